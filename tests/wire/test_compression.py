"""wire.compression against the codecs the clients themselves use.

Cross-checks: kafka-python's kafka.codec (python-snappy, lz4.frame, zstandard)
and aiokafka's aiokafka.codec (cramjam) encode, we decode, and the reverse.
"""

from __future__ import annotations

import gzip
import os
import struct

import aiokafka.codec as aiocodec
import cramjam
import kafka.codec as kcodec
import lz4.frame
import pytest
import xxhash
import zstandard
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from wire import compression as wc
from wire.errors import CorruptRecords

CODECS = [wc.GZIP, wc.SNAPPY, wc.LZ4, wc.ZSTD]


def _payloads() -> list[bytes]:
    words = b"trafka kafka broker record batch offset "
    return [
        b"",
        b"x",
        words,
        words * 2000,  # ~80 KiB: several 32 KiB xerial blocks
        os.urandom(50_000),  # incompressible
        bytes(range(256)) * 4096,  # 1 MiB
    ]


PAYLOADS = _payloads()


@pytest.mark.parametrize("codec", CODECS)
@pytest.mark.parametrize("index", range(len(PAYLOADS)))
def test_round_trip(codec: int, index: int) -> None:
    data = PAYLOADS[index]
    assert wc.decompress(codec, wc.compress(codec, data)) == data
    assert wc.decompress(codec, memoryview(wc.compress(codec, bytearray(data)))) == data


def test_none_is_identity() -> None:
    assert wc.compress(wc.NONE, b"abc") == b"abc"
    assert wc.decompress(wc.NONE, memoryview(b"abc")) == b"abc"


KAFKA_PYTHON = {
    wc.GZIP: (kcodec.gzip_encode, kcodec.gzip_decode),
    wc.SNAPPY: (kcodec.snappy_encode, kcodec.snappy_decode),
    wc.LZ4: (kcodec.lz4_encode, kcodec.lz4_decode),
    wc.ZSTD: (kcodec.zstd_encode, kcodec.zstd_decode),
}
AIOKAFKA = {
    wc.GZIP: (aiocodec.gzip_encode, aiocodec.gzip_decode),
    wc.SNAPPY: (aiocodec.snappy_encode, aiocodec.snappy_decode),
    wc.LZ4: (aiocodec.lz4_encode, aiocodec.lz4_decode),
    wc.ZSTD: (aiocodec.zstd_encode, aiocodec.zstd_decode),
}


def test_client_codecs_available() -> None:
    # kafka-python's snappy needs python-snappy; a silent skip would hide a gap.
    assert kcodec.has_snappy() and kcodec.has_lz4() and kcodec.has_zstd()
    assert aiocodec.has_snappy() and aiocodec.has_lz4() and aiocodec.has_zstd()


@pytest.mark.parametrize("library", [KAFKA_PYTHON, AIOKAFKA], ids=["kafka-python", "aiokafka"])
@pytest.mark.parametrize("codec", CODECS)
def test_theirs_to_ours_and_back(library: dict, codec: int) -> None:
    encode, decode = library[codec]
    for data in PAYLOADS:
        if not data and codec == wc.SNAPPY:
            # The xerial encoders emit a bare 16-byte header for empty input, which
            # both libraries then misread as raw snappy. Nobody compresses nothing.
            continue
        assert wc.decompress(codec, encode(data)) == data
        assert bytes(decode(wc.compress(codec, data))) == data


def test_snappy_xerial_as_java_writes_it() -> None:
    data = PAYLOADS[3]
    framed = kcodec.snappy_encode(data, xerial_compatible=True)
    assert framed.startswith(b"\x82SNAPPY\x00\x00\x00\x00\x01\x00\x00\x00\x01")
    assert wc.snappy_decompress(framed) == data
    # Our framing is byte-identical to the xerial header + 32 KiB blocks.
    assert wc.snappy_compress(data)[:16] == framed[:16]
    assert kcodec.snappy_decode(wc.snappy_compress(data)) == data


def test_snappy_xerial_small_blocks_and_little_endian_version() -> None:
    data = PAYLOADS[3]
    framed = bytearray(kcodec.snappy_encode(data, xerial_compatible=True, xerial_blocksize=1000))
    assert wc.snappy_decompress(framed) == data
    # Redpanda wrote the version/compat ints little-endian (kafka-python#2414).
    framed[8:16] = struct.pack("<ii", 1, 1)
    assert wc.snappy_decompress(framed) == data


def test_snappy_raw_as_librdkafka_writes_it() -> None:
    data = PAYLOADS[3]
    raw = kcodec.snappy_encode(data, xerial_compatible=False)
    assert not raw.startswith(wc.XERIAL_MAGIC)
    assert wc.decompress(wc.SNAPPY, raw) == data
    assert wc.decompress(wc.SNAPPY, bytes(cramjam.snappy.compress_raw(data))) == data
    assert bytes(cramjam.snappy.decompress_raw(wc.snappy_compress(data, xerial=False))) == data


def test_snappy_xerial_truncated_block() -> None:
    framed = kcodec.snappy_encode(PAYLOADS[3], xerial_compatible=True)
    for cut in (17, 20, len(framed) - 1):
        with pytest.raises(CorruptRecords):
            wc.snappy_decompress(framed[:cut])


@pytest.mark.parametrize(
    "options",
    [
        {},
        {"block_linked": True},
        {"block_linked": False, "content_checksum": True},
        {"store_size": False},
        {"block_size": lz4.frame.BLOCKSIZE_MAX4MB, "block_checksum": True},
    ],
)
def test_lz4_frame_variants(options: dict) -> None:
    data = PAYLOADS[3]
    assert wc.decompress(wc.LZ4, lz4.frame.compress(data, **options)) == data


def test_lz4_writes_independent_blocks() -> None:
    # KIP-57: Kafka's Java reader rejects linked blocks, so ours must not use them.
    frame = wc.lz4_compress(PAYLOADS[3])
    flg = frame[4]
    assert flg & 0x20, "block independence flag"


def test_lz4_kafka_08_header_checksum() -> None:
    data = PAYLOADS[3]
    old = kcodec.lz4_encode_old_kafka(data)
    with pytest.raises(CorruptRecords):
        wc.lz4_decompress(old)
    assert wc.lz4_decompress(old, fix_header_checksum=True) == data
    # A correct frame goes through the fix untouched.
    assert wc.lz4_decompress(lz4.frame.compress(data), fix_header_checksum=True) == data
    assert wc.lz4_decompress(lz4.frame.compress(data, store_size=False, content_checksum=True),
                             fix_header_checksum=True) == data


def test_xxh32_matches_xxhash() -> None:
    for n in list(range(0, 70)) + [1000, 4099]:
        data = os.urandom(n)
        assert wc.xxh32(data) == xxhash.xxh32(data).intdigest()
        assert wc.xxh32(data, seed=12345) == xxhash.xxh32(data, seed=12345).intdigest()


def test_zstd_without_content_size() -> None:
    data = PAYLOADS[3]
    frame = zstandard.ZstdCompressor(write_content_size=False).compress(data)
    assert zstandard.frame_content_size(frame) == -1
    assert wc.decompress(wc.ZSTD, frame) == data
    # A streamed frame, as zstd-jni's ZstdOutputStream writes it.
    obj = zstandard.ZstdCompressor().compressobj()
    streamed = obj.compress(data) + obj.flush()
    assert wc.decompress(wc.ZSTD, streamed) == data


def test_zstd_multiple_frames() -> None:
    a, b = PAYLOADS[2], PAYLOADS[3]
    frames = zstandard.ZstdCompressor().compress(a) + zstandard.ZstdCompressor(write_content_size=False).compress(b)
    assert wc.decompress(wc.ZSTD, frames) == a + b


@pytest.mark.parametrize("codec", CODECS)
def test_truncated_input_is_corrupt(codec: int) -> None:
    blob = wc.compress(codec, PAYLOADS[3])
    for cut in (0, 1, 5, len(blob) // 2, len(blob) - 1):
        if codec == wc.SNAPPY and cut == 0:
            continue  # empty raw snappy is a valid empty payload
        with pytest.raises(CorruptRecords):
            wc.decompress(codec, blob[:cut])


def test_trailing_garbage_after_zstd_frame_is_corrupt() -> None:
    with pytest.raises(CorruptRecords):
        wc.decompress(wc.ZSTD, wc.compress(wc.ZSTD, b"abc") + b"garbage!")


def test_gzip_concatenated_members() -> None:
    assert wc.decompress(wc.GZIP, gzip.compress(b"ab") + gzip.compress(b"cd")) == b"abcd"


@pytest.mark.parametrize("codec", [5, 6, 7, -1, 100])
def test_unknown_codec(codec: int) -> None:
    with pytest.raises(wc.UnsupportedCompression) as info:
        wc.decompress(codec, b"abc")
    assert isinstance(info.value, CorruptRecords)
    assert info.value.codec == codec
    with pytest.raises(wc.UnsupportedCompression):
        wc.compress(codec, b"abc")


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(codec=st.sampled_from(CODECS), data=st.binary(max_size=300))
def test_garbage_never_escapes_as_another_exception(codec: int, data: bytes) -> None:
    try:
        wc.decompress(codec, data)
    except CorruptRecords:
        pass


@settings(max_examples=100, deadline=None)
@given(codec=st.sampled_from(CODECS), data=st.binary(max_size=5000))
def test_round_trip_property(codec: int, data: bytes) -> None:
    assert wc.decompress(codec, wc.compress(codec, data)) == data


def test_lz4_lying_content_size_is_corrupt_not_memory_error() -> None:
    # lz4.frame preallocates the declared size: a flipped header byte must not become
    # a MemoryError (found by the legacy fuzz test).
    frame = bytearray(wc.lz4_compress(PAYLOADS[3]))
    assert frame[4] & 0x08  # content size present
    struct.pack_into("<Q", frame, 6, 2**40)
    frame[14] = (wc.xxh32(frame[4:14]) >> 8) & 0xFF  # keep the header checksum valid
    with pytest.raises(CorruptRecords, match="declares"):
        wc.decompress(wc.LZ4, frame)


def test_zstd_lying_content_size_is_corrupt() -> None:
    frame = bytearray(wc.zstd_compress(PAYLOADS[3]))
    fhd = frame[4]
    single_segment = (fhd >> 5) & 1
    fcs_pos = 5 + (0 if single_segment else 1) + (0, 1, 2, 4)[fhd & 3]
    frame[fcs_pos:fcs_pos + 4] = b"\xff\xff\xff\x7f"
    with pytest.raises(CorruptRecords):
        wc.decompress(wc.ZSTD, frame)
