"""Legacy message sets (magic 0 and 1), read and up-converted to magic-2 batches.

Clients fall back to these when they believe the broker is older than 0.11:
librdkafka < 2.11.1 whenever the advertised Produce/Fetch ranges miss its exact
version probes (docs/design/clients.md#exact-version-feature-checks), kafka-python when it
infers an old
broker. The broker stores only magic 2, so a legacy produce is converted once,
here, and never served back in the old format.

Layout of one message (Kafka "Message sets", before KIP-98)::

    0  offset      int64
    8  size        int32    bytes after this field
    12 crc         uint32   CRC32 (zlib's, not Castagnoli) of bytes 16..end
    16 magic       int8     0 or 1
    17 attributes  int8     compression (bits 0-2), timestamp type (bit 3, magic 1)
    18 timestamp   int64    magic 1 only
    .. key         int32 length (-1 = null) + bytes
    .. value       int32 length (-1 = null) + bytes

A compressed message is a *wrapper*: its value is a whole inner message set,
compressed. In magic 1 (KIP-31) inner offsets are relative, 0..n-1, and the
wrapper carries the absolute offset of the last one; in magic 0 inner offsets are
absolute. With LogAppendTime the wrapper's timestamp applies to every inner
message. Byte 16 holds the magic in both this format and magic 2, which is how
`wire.records.peek_magic` tells them apart.
"""

from __future__ import annotations

import struct
import zlib
from collections.abc import Iterator
from dataclasses import dataclass

from wire import compression as _compression
from wire.errors import CorruptRecords
from wire.records import HEADER_SIZE, NO_TIMESTAMP, Record, build_batch, iter_records, parse_header

_V0 = struct.Struct(">qiIbb")  # offset, size, crc, magic, attributes
_V1 = struct.Struct(">qiIbbq")  # ... timestamp
_I32 = struct.Struct(">i")
LOG_OVERHEAD = 12
CRC_START = 16
# Smallest message body (after the size field): crc, magic, attributes, [timestamp], two lengths.
MIN_SIZE = {0: 14, 1: 22}
COMPRESSION_MASK = 0x07
TIMESTAMP_TYPE_MASK = 0x08


@dataclass(slots=True)
class LegacyMessage:
    """One magic-0/1 message as stored on the wire (a wrapper's value still compressed)."""

    offset: int
    magic: int
    attributes: int
    timestamp: int  # NO_TIMESTAMP (-1) for magic 0
    key: bytes | None
    value: bytes | None
    crc: int

    @property
    def compression(self) -> int:
        return self.attributes & COMPRESSION_MASK

    @property
    def is_log_append_time(self) -> bool:
        # Magic 0 has no timestamp, so bit 3 means nothing there.
        return self.magic > 0 and bool(self.attributes & TIMESTAMP_TYPE_MASK)


def iter_entries(data: bytes | bytearray | memoryview, *, check_crc: bool = True) -> Iterator[LegacyMessage]:
    """The top-level messages of a set, wrappers left compressed.

    The set must end on a message boundary: a producer sends whole messages, so
    a partial one is corruption rather than a fetch-size cut.
    """
    buf = data if type(data) is bytes else bytes(data)
    pos = 0
    end = len(buf)
    while pos < end:
        message, pos = _read_message(buf, pos, end, check_crc)
        yield message


def _read_message(buf: bytes, pos: int, end: int, check_crc: bool) -> tuple[LegacyMessage, int]:
    if end - pos < LOG_OVERHEAD + MIN_SIZE[0]:
        raise CorruptRecords(f"legacy message at byte {pos}: {end - pos} bytes left, too few for a message")
    magic = buf[pos + 16]
    if magic not in MIN_SIZE:
        raise CorruptRecords(f"legacy message at byte {pos} has magic {magic}; a message set holds 0 or 1")
    if magic == 0:
        offset, size, crc, magic, attributes = _V0.unpack_from(buf, pos)
        timestamp = NO_TIMESTAMP
        key_pos = pos + _V0.size
    else:
        if end - pos < _V1.size:
            raise CorruptRecords(f"legacy message at byte {pos} truncated in its header")
        offset, size, crc, magic, attributes, timestamp = _V1.unpack_from(buf, pos)
        key_pos = pos + _V1.size
    message_end = pos + LOG_OVERHEAD + size
    if size < MIN_SIZE[magic] or message_end > end:
        raise CorruptRecords(f"legacy message at byte {pos} declares {size} bytes, {end - pos - LOG_OVERHEAD} present")
    if check_crc:
        actual = zlib.crc32(memoryview(buf)[pos + CRC_START:message_end])
        if actual != crc:
            raise CorruptRecords(f"legacy message at offset {offset}: CRC32 {actual:#010x}, stored {crc:#010x}")
    key, value_pos = _read_bytes(buf, key_pos, message_end)
    value, after = _read_bytes(buf, value_pos, message_end)
    if after != message_end:
        raise CorruptRecords(f"legacy message at offset {offset} has {message_end - after} bytes after its value")
    return LegacyMessage(offset, magic, attributes, timestamp, key, value, crc), message_end


def _read_bytes(buf: bytes, pos: int, end: int) -> tuple[bytes | None, int]:
    if end - pos < 4:
        raise CorruptRecords(f"legacy message truncated at byte {pos}")
    size = _I32.unpack_from(buf, pos)[0]
    pos += 4
    if size < 0:
        return None, pos
    if pos + size > end:
        raise CorruptRecords(f"legacy message field of {size} bytes overruns its message")
    return buf[pos:pos + size], pos + size


def unwrap(wrapper: LegacyMessage, *, check_crc: bool = True) -> list[LegacyMessage]:
    """The inner messages of a compressed wrapper, with absolute offsets and timestamps.

    Offsets: magic 1 inner offsets are relative to the wrapper's (which names the
    last inner message, KIP-31), magic 0 ones are absolute, as in Kafka's
    AbstractLegacyRecordBatch (including its rule that a negative base means
    "not assigned yet"). Timestamps: LogAppendTime on the wrapper
    overrides the inner ones.
    """
    codec = wrapper.compression
    if wrapper.value is None:
        raise CorruptRecords(f"compressed legacy message at offset {wrapper.offset} has a null value")
    if codec == _compression.LZ4:
        # Magic 0 frames carry Kafka 0.8/0.9's wrong header checksum; recomputing it
        # is harmless for magic 1, whose checksum is already right (KIP-57).
        inner_bytes = _compression.lz4_decompress(wrapper.value, fix_header_checksum=True)
    else:
        inner_bytes = _compression.decompress(codec, wrapper.value)
    inner = list(iter_entries(inner_bytes, check_crc=check_crc))
    if not inner:
        raise CorruptRecords(f"compressed legacy message at offset {wrapper.offset} holds no messages")
    shift = wrapper.offset - inner[-1].offset if wrapper.magic > 0 else 0
    if shift < 0:
        # A producer's wrapper carries offset 0 (the broker has not assigned one),
        # so the base would be negative; Kafka's AbstractLegacyRecordBatch then
        # leaves the inner offsets as they are, and so do we.
        shift = 0
    append_time = wrapper.is_log_append_time
    for message in inner:
        if message.compression:
            raise CorruptRecords(f"legacy message at offset {wrapper.offset} is compressed twice")
        message.offset += shift
        if append_time:
            message.timestamp = wrapper.timestamp
            message.attributes |= TIMESTAMP_TYPE_MASK
    return inner


def iter_messages(data: bytes | bytearray | memoryview, *, check_crc: bool = True) -> Iterator[LegacyMessage]:
    """Every logical message of a set, wrappers opened, in order."""
    for entry in iter_entries(data, check_crc=check_crc):
        if entry.compression:
            yield from unwrap(entry, check_crc=check_crc)
        else:
            yield entry


def legacy_to_batches(
    data: bytes | bytearray | memoryview,
    *,
    base_offset: int | None = None,
    compression: int | None = None,
    check_crc: bool = True,
) -> bytearray:
    """Convert a magic-0/1 message set into concatenated magic-2 batches.

    One batch per compressed wrapper (keeping its codec unless ``compression``
    says otherwise) and one per run of uncompressed messages, split where the
    timestamp type changes, since a batch has only one. Records get no headers
    and no producer id: magic 0/1 had neither.

    Offsets: with ``base_offset`` the messages are renumbered from it in order,
    which is what a broker does on produce (producers write placeholder offsets,
    often all zero). Without it each message keeps the absolute offset the set
    gives it, which must then increase. Either way every batch is complete and
    its CRC valid, ready for `wire.records.patch_base_offset` if the caller
    assigns offsets per batch instead.

    LogAppendTime batches take the largest timestamp of their messages as
    maxTimestamp (which magic-2 readers then report for every record).
    """
    groups: list[tuple[int, bool, list[LegacyMessage]]] = []
    open_run = False  # whether groups[-1] is a run of uncompressed messages
    for entry in iter_entries(data, check_crc=check_crc):
        if entry.compression:
            inner = unwrap(entry, check_crc=check_crc)
            groups.append((entry.compression, entry.is_log_append_time, inner))
            open_run = False
        else:
            append_time = entry.is_log_append_time
            if open_run and groups[-1][1] == append_time:
                groups[-1][2].append(entry)
            else:
                groups.append((0, append_time, [entry]))
                open_run = True

    out = bytearray()
    next_offset = base_offset
    for codec, append_time, messages in groups:
        if next_offset is not None:
            records = [Record(next_offset + i, m.timestamp, m.key, m.value) for i, m in enumerate(messages)]
            next_offset += len(messages)
        else:
            records = [Record(m.offset, m.timestamp, m.key, m.value) for m in messages]
        try:
            out += build_batch(
                records,
                base_offset=records[0].offset,
                compression=codec if compression is None else compression,
                timestamp_type=1 if append_time else 0,
            )
        except CorruptRecords:
            raise
        except ValueError as exc:
            raise CorruptRecords(
                f"legacy message set cannot become a batch ({exc}); pass base_offset to renumber"
            ) from None
    return out


# ---------------------------------------------------------------- down-conversion
#
# Fetch v0-3 readers understand only magic 0 (v0-1) or magic 1 (v2-3). The log holds magic
# 2, so every such fetch converts what it read, as Kafka 3.9 does (RecordsUtil.downConvert
# inside LazyDownConversionRecords and its Send); docs/protocol-versions.md describes the
# rules, which `down_convert` follows literally, quirks included.

MAX_READ_SIZE = 128 * 1024  # Kafka's LazyDownConversionRecordsSend: bytes converted per chunk
MIN_OVERFLOW_MESSAGE_LENGTH = LOG_OVERHEAD  # an offset and a size: what a reader needs to stop
RECORD_BATCH_OVERHEAD = 61  # a magic-2 batch header: the smallest size an overflow entry declares


class UnsupportedDownConversion(CorruptRecords):
    """A batch old message formats cannot express (zstd: KIP-110 gave it no magic 0/1 form)."""


def encode_message(offset: int, magic: int, attributes: int, timestamp: int,
                   key: bytes | None, value: bytes | None) -> bytes:
    """One magic-0/1 message with its offset and size header and CRC32 (LegacyRecord.write)."""
    body = bytearray([magic, attributes])
    if magic > 0:
        body += struct.pack(">q", timestamp)
    for field in (key, value):
        if field is None:
            body += _I32.pack(-1)
        else:
            body += _I32.pack(len(field))
            body += field
    crc = zlib.crc32(body)
    return struct.pack(">qiI", offset, len(body) + 4, crc) + bytes(body)


def _compress_legacy(codec: int, data: bytes, magic: int) -> bytes:
    """The wrapper's value: Kafka's streams for magic 0/1. LZ4 under magic 0 gets the frame
    descriptor checksum Kafka 0.8/0.9 computed, over the magic number too (KAFKA-3160),
    as Kafka still writes it for magic 0 (its useBrokenFlagDescriptorChecksum)."""
    if codec == _compression.LZ4:
        frame = bytearray(_compression.lz4_compress(data))
        if magic == 0:
            flg = frame[4]
            hc_pos = 6 + (8 if flg & 0x08 else 0) + (4 if flg & 0x01 else 0)
            frame[hc_pos] = (_compression.xxh32(memoryview(frame)[:hc_pos]) >> 8) & 0xFF
        return bytes(frame)
    if codec == _compression.SNAPPY:
        return _compression.snappy_compress(data, xerial=True)
    return _compression.compress(codec, data)


def _convert_batch(header, records: list[Record], magic: int) -> bytes:
    """Kafka's RecordsUtil.convertRecordBatch: one magic-2 batch's kept records as magic 0/1.

    Uncompressed: one message per record. Compressed: one wrapper holding the inner set,
    compressed with the batch's codec; in magic 1 inner offsets count from the first
    record and the wrapper carries the last record's offset, in magic 0 inner offsets are
    absolute. LogAppendTime batches give every message the batch's max timestamp and set
    the timestamp-type bit on each (magic 1 only: magic 0 has no timestamp)."""
    append_time = header.is_log_append_time
    type_bit = TIMESTAMP_TYPE_MASK if magic > 0 and append_time else 0
    codec = header.compression
    out = bytearray()
    if codec == _compression.NONE:
        for r in records:
            ts = header.max_timestamp if append_time else r.timestamp
            out += encode_message(r.offset, magic, type_bit, ts, r.key, r.value)
        return bytes(out)
    base = records[0].offset
    max_ts = NO_TIMESTAMP
    inner = bytearray()
    for r in records:
        ts = header.max_timestamp if append_time else r.timestamp
        max_ts = max(max_ts, ts)
        inner += encode_message(r.offset - base if magic > 0 else r.offset, magic, type_bit, ts, r.key, r.value)
    wrapper_ts = header.max_timestamp if append_time else max_ts
    return encode_message(records[-1].offset, magic, codec | type_bit, wrapper_ts, None,
                          _compress_legacy(codec, bytes(inner), magic))


def _convert_chunk(batches: list[tuple[object, bytes]], magic: int, first_offset: int) -> bytes:
    """Kafka's RecordsUtil.downConvert for magic 0/1: control batches dropped, zstd refused,
    records of an uncompressed batch before `first_offset` dropped (a reader asking from the
    middle of a batch must not get the records before it: old messages are not batched)."""
    out = bytearray()
    for header, data in batches:
        if header.is_control:
            continue
        if header.compression == _compression.ZSTD:
            raise UnsupportedDownConversion("down-conversion of zstandard-compressed batches is not supported")
        if header.magic <= magic:
            out += data
            continue
        kept = [r for r in iter_records(data) if header.compression or r.offset >= first_offset]
        if kept:
            out += _convert_batch(header, kept, magic)
    return bytes(out)


def _whole_batches(data: bytes) -> list[tuple[object, bytes]]:
    batches = []
    pos = 0
    while len(data) - pos >= HEADER_SIZE:
        header = parse_header(data, pos)
        if pos + header.size > len(data):
            break  # a partial batch at the end of a read: no reader gets it
        batches.append((header, data[pos:pos + header.size]))
        pos += header.size
    return batches


def _overflow(remaining: int) -> bytes:
    """Kafka's overflow entry: offset -1 and a size past the end, so the reader stops there."""
    size = max(MIN_OVERFLOW_MESSAGE_LENGTH, min(remaining + 1, MAX_READ_SIZE))
    entry = struct.pack(">qi", -1, max(remaining + 1, RECORD_BATCH_OVERHEAD)) + bytes(size - LOG_OVERHEAD)
    return entry[:remaining]


def down_convert(data: bytes | bytearray | memoryview, magic: int, first_offset: int) -> bytes:
    """A fetch's magic-2 read as the magic-0/1 message set Kafka 3.9 sends (its
    LazyDownConversionRecords and LazyDownConversionRecordsSend).

    - The answer's size is fixed before sending: the larger of the read's size and the
      first converted chunk's (so one whole converted batch always fits), or 12 bytes when
      the read had batches but none converts (an overflow entry: the reader asks again or
      reports a too-large message), or 0 for an empty read.
    - The first chunk is the first batch that converts to something; the rest is converted
      in chunks of batches up to 128 KiB of stored bytes. Kafka starts those chunks one
      batch after the start of the read whichever batch the first chunk came from, so a
      first chunk found past a batch that converted to nothing is sent twice: so here.
    - Converted bytes past the fixed size are cut (the reader sees a partial message at the
      end, as with any old fetch), and a shortfall is filled with overflow entries. A zstd
      batch after the first chunk ends the conversion there (overflow entries follow: the
      reader's next fetch starts at that batch and gets UNSUPPORTED_COMPRESSION_TYPE); one
      before it raises `UnsupportedDownConversion`.
    """
    raw = bytes(data)
    batches = _whole_batches(raw)
    first = b""
    for header, batch in batches:
        first = _convert_chunk([(header, batch)], magic, first_offset)
        if first:
            break
    if not first:
        return _overflow(MIN_OVERFLOW_MESSAGE_LENGTH) if batches else b""
    total = max(len(raw), len(first))
    out = bytearray(first[:total])
    i = 1
    while len(out) < total:
        remaining = total - len(out)
        chunk = b""
        try:
            while i < len(batches) and not chunk:
                group = [batches[i]]
                size = batches[i][0].size
                i += 1
                while i < len(batches) and size + batches[i][0].size <= MAX_READ_SIZE:
                    group.append(batches[i])
                    size += batches[i][0].size
                    i += 1
                chunk = _convert_chunk(group, magic, first_offset)
        except UnsupportedDownConversion:
            i = len(batches)
            chunk = b""
        out += chunk[:remaining] if chunk else _overflow(remaining)
    return bytes(out)
