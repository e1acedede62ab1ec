"""Compression codecs for record batches, with each client's framing quirks.

A batch names its codec in attributes bits 0-2 (magic 2) or in the wrapper
message's attributes (magic 0/1). The broker's hot path never calls this module:
it stores and serves the compressed bytes as they came. Decompression is needed
only when something must look at records (compaction, legacy up-conversion,
tests); compression only when the broker writes a batch itself.

What each codec has to tolerate:

- gzip: Java's GZIPOutputStream writes one member; concatenated members are legal
  gzip, so they are accepted too.
- snappy: Java (xerial snappy-java), kafka-python and aiokafka write the xerial
  *block stream*: ``\\x82SNAPPY\\x00`` + two int32 (version, compat) + blocks of
  (int32 length, raw snappy). librdkafka writes *raw* snappy and reads both. The
  magic decides; the version fields are ignored because some producers
  (Redpanda, per kafka-python#2414) write them little-endian.
- lz4: the LZ4 *frame* format since KIP-57. Before it (message format 0, Kafka
  0.8/0.9) Kafka computed the frame header checksum over the magic number too,
  so a correct reader rejects those frames; `lz4_decompress(...,
  fix_header_checksum=True)` rewrites the checksum byte first. Only legacy
  message sets use it.
- zstd: librdkafka and Java (zstd-jni streams) may omit the frame content size,
  which zstandard's one-shot ``decompress`` refuses, so frames are decoded with a
  streaming decompressor, one frame after another.

Every failure surfaces as `CorruptRecords` (or its subclass
`UnsupportedCompression` for a codec id we do not know), never as a codec
library's own exception type.
"""

from __future__ import annotations

import enum
import gzip
import struct
import zlib

import cramjam
import lz4.frame as _lz4_frame
import zstandard as _zstd

from wire.errors import CorruptRecords

NONE = 0
GZIP = 1
SNAPPY = 2
LZ4 = 3
ZSTD = 4


class Codec(enum.IntEnum):
    """Kafka's compression ids (attributes bits 0-2)."""

    NONE = NONE
    GZIP = GZIP
    SNAPPY = SNAPPY
    LZ4 = LZ4
    ZSTD = ZSTD


class UnsupportedCompression(CorruptRecords):
    """A codec id outside 0-4: a batch we cannot read, so as good as corrupt.

    A subclass of CorruptRecords so callers that only care about "bad records"
    need one except clause; the produce path can still tell it apart (Kafka
    answers UNSUPPORTED_COMPRESSION_TYPE, 76, for a codec the broker refuses).
    """

    def __init__(self, codec: int) -> None:
        super().__init__(f"unknown compression codec id {codec}")
        self.codec = codec


Buffer = bytes | bytearray | memoryview

# -- gzip ---------------------------------------------------------------------

# Deflater.DEFAULT_COMPRESSION in Java is level 6; matching it keeps our output
# the size a Java producer would send.
GZIP_LEVEL = 6


def gzip_compress(data: Buffer) -> bytes:
    # mtime=0 makes the output deterministic, which tests and dedup both like.
    return gzip.compress(data, compresslevel=GZIP_LEVEL, mtime=0)


def gzip_decompress(data: Buffer) -> bytes:
    # gzip.decompress accepts zero members; Java's GZIPInputStream does not.
    if not len(data):
        raise CorruptRecords("gzip: empty input")
    try:
        return gzip.decompress(data)
    except (OSError, EOFError, zlib.error) as exc:  # BadGzipFile is an OSError
        raise CorruptRecords(f"gzip: {exc}") from None


# -- snappy -------------------------------------------------------------------

XERIAL_MAGIC = b"\x82SNAPPY\x00"
# Version 1, compatible-version 1: what snappy-java's SnappyOutputStream writes.
XERIAL_HEADER = XERIAL_MAGIC + struct.pack(">ii", 1, 1)
# snappy-java's default block size, and what kafka-python/aiokafka use.
XERIAL_BLOCK_SIZE = 32 * 1024
_I32 = struct.Struct(">i")


def snappy_compress(data: Buffer, *, xerial: bool = True, block_size: int = XERIAL_BLOCK_SIZE) -> bytes:
    """Snappy in xerial framing (the default: every client reads it) or raw."""
    if not xerial:
        return bytes(cramjam.snappy.compress_raw(data))
    view = memoryview(data)
    parts = [XERIAL_HEADER]
    for start in range(0, len(view), block_size):
        block = cramjam.snappy.compress_raw(view[start:start + block_size])
        parts.append(_I32.pack(len(block)))
        parts.append(block)
    return b"".join(parts)


def snappy_decompress(data: Buffer) -> bytes:
    """Decode xerial-framed or raw snappy, told apart by the xerial magic."""
    view = memoryview(data)
    try:
        if len(view) >= 16 and view[:8] == XERIAL_MAGIC:
            blocks = []
            pos = 16
            end = len(view)
            while pos < end:
                if end - pos < 4:
                    raise CorruptRecords("snappy: truncated xerial block length")
                size = _I32.unpack_from(view, pos)[0]
                pos += 4
                if size < 0 or pos + size > end:
                    raise CorruptRecords(f"snappy: xerial block of {size} bytes overruns the frame")
                blocks.append(cramjam.snappy.decompress_raw(view[pos:pos + size]))
                pos += size
            return b"".join(blocks)
        return bytes(cramjam.snappy.decompress_raw(view))
    except cramjam.DecompressionError as exc:
        raise CorruptRecords(f"snappy: {exc}") from None


# -- lz4 ----------------------------------------------------------------------

LZ4_FRAME_MAGIC = b"\x04\x22\x4d\x18"  # 0x184D2204 little-endian


def lz4_compress(data: Buffer) -> bytes:
    """An LZ4 frame with independent blocks.

    Kafka's Java reader (KafkaLZ4BlockInputStream) does not support linked
    blocks (KIP-57), so they are off. Level 0 (fast): the broker compresses only
    off the hot path, and the level does not affect compatibility.
    """
    return _lz4_frame.compress(data, block_linked=False, content_checksum=False)


def lz4_decompress(data: Buffer, *, fix_header_checksum: bool = False) -> bytes:
    """Decode one LZ4 frame; with ``fix_header_checksum``, accept pre-KIP-57 frames.

    Kafka 0.8/0.9 (message format 0) hashed the magic number into the frame
    descriptor checksum (KAFKA-3160). Recomputing that byte over the right range
    before decoding is the same as ignoring it, which is what Kafka's own reader
    does for magic 0.
    """
    try:
        if fix_header_checksum:
            data = _fix_lz4_header_checksum(data)
        _check_lz4_content_size(data)
        return _lz4_frame.decompress(data)
    except RuntimeError as exc:  # lz4.frame reports every failure as RuntimeError
        raise CorruptRecords(f"lz4: {exc}") from None


# LZ4 cannot expand a byte into more than 255 (a match length is coded in
# 255-steps); a declared content size beyond that is a lie.
_LZ4_MAX_RATIO = 255
_U64LE = struct.Struct("<Q")


def _check_lz4_content_size(data: Buffer) -> None:
    """Refuse a frame whose declared content size no input of this length can produce.

    lz4.frame allocates the declared size up front, so one flipped byte in the
    header would otherwise be a MemoryError (or an allocation of exabytes).
    """
    view = memoryview(data)
    if len(view) >= 14 and view[:4] == LZ4_FRAME_MAGIC and view[4] & 0x08:
        size = _U64LE.unpack_from(view, 6)[0]
        if size > len(view) * _LZ4_MAX_RATIO:
            raise CorruptRecords(f"lz4: frame declares {size} bytes of content in {len(view)} compressed")


def _fix_lz4_header_checksum(data: Buffer) -> bytearray:
    frame = bytearray(data)
    if len(frame) < 7 or frame[:4] != LZ4_FRAME_MAGIC:
        raise CorruptRecords("lz4: not an LZ4 frame")
    flg = frame[4]
    hc_pos = 6 + (8 if flg & 0x08 else 0) + (4 if flg & 0x01 else 0)
    if len(frame) <= hc_pos:
        raise CorruptRecords("lz4: truncated frame descriptor")
    frame[hc_pos] = (xxh32(memoryview(frame)[4:hc_pos]) >> 8) & 0xFF
    return frame


_P1 = 2654435761
_P2 = 2246822519
_P3 = 3266489917
_P4 = 668265263
_P5 = 374761393
_M32 = 0xFFFFFFFF
_U32LE = struct.Struct("<I")


def _rotl(x: int, r: int) -> int:
    return ((x << r) | (x >> (32 - r))) & _M32


def xxh32(data: Buffer, seed: int = 0) -> int:
    """XXH32, as the LZ4 frame header checksum needs it.

    Pure Python: it only ever hashes the 2-10 byte frame descriptor, so a
    dependency on the xxhash package would buy nothing.
    """
    buf = bytes(data)
    n = len(buf)
    i = 0
    if n >= 16:
        v1 = (seed + _P1 + _P2) & _M32
        v2 = (seed + _P2) & _M32
        v3 = seed & _M32
        v4 = (seed - _P1) & _M32
        while i + 16 <= n:
            a, b, c, d = struct.unpack_from("<IIII", buf, i)
            v1 = (_rotl((v1 + a * _P2) & _M32, 13) * _P1) & _M32
            v2 = (_rotl((v2 + b * _P2) & _M32, 13) * _P1) & _M32
            v3 = (_rotl((v3 + c * _P2) & _M32, 13) * _P1) & _M32
            v4 = (_rotl((v4 + d * _P2) & _M32, 13) * _P1) & _M32
            i += 16
        h = (_rotl(v1, 1) + _rotl(v2, 7) + _rotl(v3, 12) + _rotl(v4, 18)) & _M32
    else:
        h = (seed + _P5) & _M32
    h = (h + n) & _M32
    while i + 4 <= n:
        h = (_rotl((h + _U32LE.unpack_from(buf, i)[0] * _P3) & _M32, 17) * _P4) & _M32
        i += 4
    while i < n:
        h = (_rotl((h + buf[i] * _P5) & _M32, 11) * _P1) & _M32
        i += 1
    h ^= h >> 15
    h = (h * _P2) & _M32
    h ^= h >> 13
    h = (h * _P3) & _M32
    h ^= h >> 16
    return h


# -- zstd ---------------------------------------------------------------------

# Kafka's default zstd level (KIP-390).
ZSTD_LEVEL = 3
_ZSTD_COMPRESSOR = _zstd.ZstdCompressor(level=ZSTD_LEVEL)
_ZSTD_DECOMPRESSOR = _zstd.ZstdDecompressor()


def zstd_compress(data: Buffer) -> bytes:
    return _ZSTD_COMPRESSOR.compress(data)


def zstd_decompress(data: Buffer) -> bytes:
    """Decode every zstd frame in ``data``, with or without a content size.

    One streaming decompressor per frame: ``decompressobj`` stops at a frame's
    end and hands back the rest in ``unused_data``, and its ``eof`` flag is the
    only way to tell a complete frame from a truncated one (zstandard returns
    the partial output silently otherwise).
    """
    out = []
    rest = bytes(data)
    try:
        while True:
            obj = _ZSTD_DECOMPRESSOR.decompressobj()
            out.append(obj.decompress(rest))
            if not obj.eof:
                raise CorruptRecords("zstd: truncated frame")
            rest = obj.unused_data
            if not rest:
                break
    except _zstd.ZstdError as exc:
        raise CorruptRecords(f"zstd: {exc}") from None
    return out[0] if len(out) == 1 else b"".join(out)


# -- dispatch -----------------------------------------------------------------

_COMPRESS = {
    GZIP: gzip_compress,
    SNAPPY: snappy_compress,
    LZ4: lz4_compress,
    ZSTD: zstd_compress,
}
_DECOMPRESS = {
    GZIP: gzip_decompress,
    SNAPPY: snappy_decompress,
    LZ4: lz4_decompress,
    ZSTD: zstd_decompress,
}


def compress(codec: int, data: Buffer) -> bytes:
    """Compress ``data`` the way the Java producer frames it for ``codec``."""
    if codec == NONE:
        return bytes(data)
    func = _COMPRESS.get(codec)
    if func is None:
        raise UnsupportedCompression(codec)
    return func(data)


def decompress(codec: int, data: Buffer) -> bytes:
    """Decompress a batch's records section; CorruptRecords on any failure."""
    if codec == NONE:
        return bytes(data)
    func = _DECOMPRESS.get(codec)
    if func is None:
        raise UnsupportedCompression(codec)
    return func(data)
