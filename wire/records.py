"""Record batches (magic 2): the unit a producer sends, the log stores and a consumer reads.

Layout of the 61-byte header (Kafka "Message Format", RecordBatch)::

    0  baseOffset            int64    assigned by the broker; outside the CRC
    8  batchLength           int32    bytes after this field
    12 partitionLeaderEpoch  int32    set by the broker; outside the CRC
    16 magic                 int8     2
    17 crc                   uint32   CRC32C of bytes 21..end
    21 attributes            int16    compression (bits 0-2), timestamp type (3),
                                      transactional (4), control (5), delete horizon (6)
    23 lastOffsetDelta       int32
    27 baseTimestamp         int64
    35 maxTimestamp          int64
    43 producerId            int64
    51 producerEpoch         int16
    53 baseSequence          int32
    57 recordCount           int32
    61 records...

The hot path never looks past byte 61: produce checks the CRC and patches the two
fields outside it; fetch serves the stored bytes. Records are decoded only when a
feature asks for them (compaction, legacy conversion, tests).
"""

from __future__ import annotations

import enum
import struct
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field

import crc32c as _crc32c

from wire import compression as _compression
from wire.errors import CorruptRecords

# The header layout, defined once: (field, struct code) in file order. Every offset
# constant below and every struct that reads part of a header (`header_fields`) is derived
# from this table, so storage's partial unpacks cannot drift from it.
HEADER_LAYOUT: tuple[tuple[str, str], ...] = (
    ("base_offset", "q"),
    ("length", "i"),  # batchLength
    ("partition_leader_epoch", "i"),
    ("magic", "b"),
    ("crc", "I"),
    ("attributes", "h"),
    ("last_offset_delta", "i"),
    ("base_timestamp", "q"),
    ("max_timestamp", "q"),
    ("producer_id", "q"),
    ("producer_epoch", "h"),
    ("base_sequence", "i"),
    ("records_count", "i"),
)


def _field_offsets() -> dict[str, int]:
    offsets, at = {}, 0
    for name, code in HEADER_LAYOUT:
        offsets[name] = at
        at += struct.calcsize(">" + code)
    offsets["records"] = at
    return offsets


FIELD_OFFSETS = _field_offsets()
# Byte offsets of the header fields within a batch (Kafka's DefaultRecordBatch *_OFFSET).
BASE_OFFSET = FIELD_OFFSETS["base_offset"]  # 0
LENGTH = FIELD_OFFSETS["length"]  # 8
PARTITION_LEADER_EPOCH = FIELD_OFFSETS["partition_leader_epoch"]  # 12
MAGIC = FIELD_OFFSETS["magic"]  # 16
CRC = FIELD_OFFSETS["crc"]  # 17
ATTRIBUTES = FIELD_OFFSETS["attributes"]  # 21
LAST_OFFSET_DELTA = FIELD_OFFSETS["last_offset_delta"]  # 23
BASE_TIMESTAMP = FIELD_OFFSETS["base_timestamp"]  # 27
MAX_TIMESTAMP = FIELD_OFFSETS["max_timestamp"]  # 35
PRODUCER_ID = FIELD_OFFSETS["producer_id"]  # 43
PRODUCER_EPOCH = FIELD_OFFSETS["producer_epoch"]  # 51
BASE_SEQUENCE = FIELD_OFFSETS["base_sequence"]  # 53
RECORDS_COUNT = FIELD_OFFSETS["records_count"]  # 57
RECORDS = FIELD_OFFSETS["records"]  # 61

HEADER = struct.Struct(">" + "".join(code for _name, code in HEADER_LAYOUT))
HEADER_SIZE = HEADER.size  # 61
assert HEADER_SIZE == RECORDS
# Where a batch starts counting toward batchLength, and where the CRC region starts.
LOG_OVERHEAD = LENGTH + 4
CRC_START = ATTRIBUTES
# Older names, kept for their callers.
MAGIC_OFFSET = MAGIC
ATTRIBUTES_OFFSET = ATTRIBUTES
MAX_TIMESTAMP_OFFSET = MAX_TIMESTAMP


def header_fields(*names: str, whole: bool = True) -> struct.Struct:
    """A struct reading only the named header fields (in layout order), pad bytes between.

    Unpacking 5 fields instead of 13 is measurably cheaper on storage's hot paths. With
    ``whole`` the struct spans the full 61-byte header, so unpacking it also checks that a
    whole header is there; otherwise it ends after the last named field.
    """
    codes = dict(HEADER_LAYOUT)
    fmt = [">"]
    at = 0
    for name in names:
        if name not in codes:
            raise ValueError(f"no header field {name!r}")
        start = FIELD_OFFSETS[name]
        if start < at:
            raise ValueError(f"header field {name!r} out of layout order")
        if start > at:
            fmt.append(f"{start - at}x")
        fmt.append(codes[name])
        at = start + struct.calcsize(">" + codes[name])
    if whole and at < HEADER_SIZE:
        fmt.append(f"{HEADER_SIZE - at}x")
    return struct.Struct("".join(fmt))


_I64 = struct.Struct(">q")
_I32 = struct.Struct(">i")
_U32 = struct.Struct(">I")
_I16 = struct.Struct(">h")

COMPRESSION_MASK = 0x07
TIMESTAMP_TYPE_MASK = 0x08
TRANSACTIONAL_MASK = 0x10
CONTROL_MASK = 0x20
DELETE_HORIZON_MASK = 0x40

NO_PRODUCER_ID = -1
NO_TIMESTAMP = -1


def crc32c(data: bytes | bytearray | memoryview) -> int:
    """CRC32C (Castagnoli) as Kafka computes it for magic-2 batches."""
    return _crc32c.crc32c(data)


@dataclass(frozen=True, slots=True)
class BatchHeader:
    """The decoded fixed header of one record batch."""

    base_offset: int
    batch_length: int
    partition_leader_epoch: int
    magic: int
    crc: int
    attributes: int
    last_offset_delta: int
    base_timestamp: int
    max_timestamp: int
    producer_id: int
    producer_epoch: int
    base_sequence: int
    record_count: int

    @property
    def size(self) -> int:
        """Bytes the whole batch takes, header included."""
        return self.batch_length + LOG_OVERHEAD

    @property
    def last_offset(self) -> int:
        return self.base_offset + self.last_offset_delta

    @property
    def next_offset(self) -> int:
        return self.base_offset + self.last_offset_delta + 1

    @property
    def compression(self) -> int:
        return self.attributes & COMPRESSION_MASK

    @property
    def is_log_append_time(self) -> bool:
        return bool(self.attributes & TIMESTAMP_TYPE_MASK)

    @property
    def is_transactional(self) -> bool:
        return bool(self.attributes & TRANSACTIONAL_MASK)

    @property
    def is_control(self) -> bool:
        return bool(self.attributes & CONTROL_MASK)

    @property
    def last_sequence(self) -> int:
        if self.base_sequence < 0:
            return -1
        # Sequences wrap at int32 max (KIP-98).
        return (self.base_sequence + self.last_offset_delta) % 0x80000000


def parse_header(buf: bytes | bytearray | memoryview, pos: int = 0) -> BatchHeader:
    """Decode the fixed header at ``pos``; raise CorruptRecords when it cannot be one."""
    if len(buf) - pos < HEADER_SIZE:
        raise CorruptRecords(f"record batch header needs {HEADER_SIZE} bytes, {len(buf) - pos} left")
    header = BatchHeader(*HEADER.unpack_from(buf, pos))
    if header.magic != 2:
        raise CorruptRecords(f"record batch magic {header.magic}, expected 2")
    if header.batch_length < HEADER_SIZE - LOG_OVERHEAD:
        raise CorruptRecords(f"record batch length {header.batch_length} below the header size")
    return header


def peek_batch_size(buf: bytes | bytearray | memoryview, pos: int = 0) -> int | None:
    """Total size of the batch starting at ``pos``, or None if its length is not readable yet."""
    if len(buf) - pos < LOG_OVERHEAD:
        return None
    return _I32.unpack_from(buf, pos + LENGTH)[0] + LOG_OVERHEAD


def verify_crc(buf: bytes | bytearray | memoryview, header: BatchHeader, pos: int = 0) -> None:
    """Raise CorruptRecords unless the stored CRC32C matches attributes..end."""
    end = pos + header.size
    if end > len(buf):
        raise CorruptRecords(f"record batch of {header.size} bytes truncated at {len(buf) - pos}")
    actual = crc32c(memoryview(buf)[pos + CRC_START:end])
    if actual != header.crc:
        raise CorruptRecords(f"record batch CRC {actual:#010x} does not match stored {header.crc:#010x}")


def iter_headers(buf: bytes | bytearray | memoryview, *, check_crc: bool = True):
    """Yield (position, header) for each whole batch in a concatenation of batches.

    A trailing partial batch is an error: a producer's records field must hold whole
    batches only.
    """
    pos = 0
    end = len(buf)
    while pos < end:
        header = parse_header(buf, pos)
        if pos + header.size > end:
            raise CorruptRecords(
                f"record batch at byte {pos} declares {header.size} bytes, only {end - pos} present"
            )
        if check_crc:
            verify_crc(buf, header, pos)
        yield pos, header
        pos += header.size


def patch_base_offset(buf: bytearray | memoryview, base_offset: int, pos: int = 0) -> None:
    """Write the broker-assigned base offset in place (outside the CRC, so no recompute)."""
    _I64.pack_into(buf, pos, base_offset)


def patch_leader_epoch(buf: bytearray | memoryview, epoch: int, pos: int = 0) -> None:
    """Write partitionLeaderEpoch in place (outside the CRC)."""
    _I32.pack_into(buf, pos + PARTITION_LEADER_EPOCH, epoch)


def set_log_append_time(buf: bytearray | memoryview, timestamp_ms: int, pos: int = 0) -> None:
    """Mark the batch LogAppendTime with ``timestamp_ms`` as its max timestamp.

    Both fields sit inside the CRC region, so the CRC is recomputed: this is the one
    header rewrite that costs a pass over the batch.
    """
    attributes = _I16.unpack_from(buf, pos + ATTRIBUTES_OFFSET)[0]
    _I16.pack_into(buf, pos + ATTRIBUTES_OFFSET, attributes | TIMESTAMP_TYPE_MASK)
    _I64.pack_into(buf, pos + MAX_TIMESTAMP_OFFSET, timestamp_ms)
    size = _I32.unpack_from(buf, pos + LENGTH)[0] + LOG_OVERHEAD
    _U32.pack_into(buf, pos + CRC, crc32c(memoryview(buf)[pos + CRC_START:pos + size]))


def peek_magic(buf: bytes | bytearray | memoryview, pos: int = 0) -> int | None:
    """The magic byte of the batch or message set at ``pos`` (byte 16), or None if short.

    Magic 0/1 message sets and magic-2 batches agree on the first 17 bytes'
    meaning up to this byte (offset, size, then CRC or leader epoch), so this is
    how a reader picks the format before parsing anything else.
    """
    if len(buf) - pos <= MAGIC_OFFSET:
        return None
    return buf[pos + MAGIC_OFFSET]


# ---------------------------------------------------------------------------
# Records inside a batch
#
# Record layout (Kafka "Message Format", Record), all varints zigzag-encoded:
#
#     length          varint   bytes after this field
#     attributes      int8     unused
#     timestampDelta  varlong  from baseTimestamp
#     offsetDelta     varint   from baseOffset
#     keyLength       varint   -1 = null
#     key             bytes
#     valueLength     varint   -1 = null
#     value           bytes
#     headerCount     varint
#     headers         [keyLength varint, key utf-8, valueLength varint (-1 = null), value]
#
# In a compressed batch everything after recordCount is one compressed blob.
# ---------------------------------------------------------------------------


class ControlType(enum.IntEnum):
    """Type field of a control record's key (ControlRecordType in Kafka)."""

    UNKNOWN = -1
    ABORT = 0
    COMMIT = 1
    # KRaft metadata-log control records; a broker's data log never holds them,
    # but naming them keeps a stray one from reading as UNKNOWN.
    LEADER_CHANGE = 2
    SNAPSHOT_HEADER = 3
    SNAPSHOT_FOOTER = 4
    KRAFT_VERSION = 5
    KRAFT_VOTERS = 6


@dataclass(slots=True)
class Record:
    """One decoded record, with absolute offset and timestamp.

    ``is_control`` says the record came from a control batch, so its key is a
    (version, type) pair rather than user data; see `control_type`.
    """

    offset: int
    timestamp: int
    key: bytes | None
    value: bytes | None
    headers: list[tuple[str, bytes | None]] = field(default_factory=list)
    is_control: bool = False


_CONTROL_KEY = struct.Struct(">hh")
_END_TXN_VALUE = struct.Struct(">hi")
# Header keys are Java Strings on the producer side, hence UTF-8; surrogateescape
# lets a malformed one through and re-encodes it to the same bytes, so
# decode -> build (compaction) never changes a header.
_HEADER_KEY_ERRORS = "surrogateescape"


def control_type(record: Record) -> ControlType | None:
    """Which control record this is (ABORT/COMMIT marker...), or None for a data record."""
    if not record.is_control:
        return None
    key = record.key
    if key is None or len(key) < _CONTROL_KEY.size:
        raise CorruptRecords(f"control record at offset {record.offset} has a key of {0 if key is None else len(key)} bytes")
    version, type_ = _CONTROL_KEY.unpack_from(key)
    if version < 0:
        raise CorruptRecords(f"control record at offset {record.offset} has key version {version}")
    # Kafka reads newer key versions by their leading fields, so no upper bound.
    try:
        return ControlType(type_)
    except ValueError:
        return ControlType.UNKNOWN


def _read_varint(buf: bytes, pos: int) -> tuple[int, int]:
    """Zigzag varint/varlong at ``pos`` -> (value, next pos). The multi-byte path.

    Ten bytes at most (a varlong); anything longer is corrupt rather than a
    huge number, as in Java's ByteUtils.
    """
    result = 0
    shift = 0
    while True:
        b = buf[pos]
        pos += 1
        result |= (b & 0x7F) << shift
        if b < 0x80:
            return (result >> 1) ^ -(result & 1), pos
        shift += 7
        if shift >= 70:
            raise CorruptRecords(f"varint longer than 10 bytes at {pos - 10}")


def iter_records(batch: bytes | bytearray | memoryview, *, check_crc: bool = False) -> Iterator[Record]:
    """Decode the records of the one batch that starts at byte 0 of ``batch``.

    The header is checked here, at call time; records are decompressed and
    decoded lazily as the iterator advances, and a malformed one raises
    CorruptRecords at that point. Produce never calls this: it is for
    compaction, up-conversion, tools and tests. ``check_crc`` is off by default
    because stored batches were verified when produced.
    """
    header = parse_header(batch)
    if header.size > len(batch):
        raise CorruptRecords(f"record batch of {header.size} bytes truncated at {len(batch)}")
    if header.record_count < 0:
        raise CorruptRecords(f"record batch with record count {header.record_count}")
    if check_crc:
        verify_crc(batch, header)
    return _decode_records(batch, header)


def _decode_records(batch: bytes | bytearray | memoryview, header: BatchHeader) -> Iterator[Record]:
    codec = header.attributes & COMPRESSION_MASK
    if codec:
        buf = _compression.decompress(codec, memoryview(batch)[HEADER_SIZE:header.size])
        pos = 0
        end = len(buf)
    else:
        # bytes index and slice fastest, and key/value slices come out as bytes.
        buf = batch if type(batch) is bytes else bytes(memoryview(batch)[:header.size])
        pos = HEADER_SIZE
        end = header.size
    base_offset = header.base_offset
    base_timestamp = header.base_timestamp
    append_time = header.max_timestamp if header.attributes & TIMESTAMP_TYPE_MASK else None
    is_control = bool(header.attributes & CONTROL_MASK)
    read_varint = _read_varint
    try:
        for _ in range(header.record_count):
            # Single-byte varints are the common case for every field but the
            # timestamp delta, so that test is inlined before the general path.
            b = buf[pos]
            if b < 0x80:
                length = (b >> 1) ^ -(b & 1)
                pos += 1
            else:
                length, pos = read_varint(buf, pos)
            record_end = pos + length
            if length < 6 or record_end > end:
                raise CorruptRecords(f"record of {length} bytes at {pos} does not fit the batch")
            pos += 1  # attributes: unused in magic 2
            ts_delta, pos = read_varint(buf, pos)
            b = buf[pos]
            if b < 0x80:
                offset_delta = (b >> 1) ^ -(b & 1)
                pos += 1
            else:
                offset_delta, pos = read_varint(buf, pos)
            b = buf[pos]
            if b < 0x80:
                size = (b >> 1) ^ -(b & 1)
                pos += 1
            else:
                size, pos = read_varint(buf, pos)
            # Any negative length means null, as in Java's DefaultRecord.readFrom.
            if size >= 0:
                key = buf[pos:pos + size]
                pos += size
            else:
                key = None
            b = buf[pos]
            if b < 0x80:
                size = (b >> 1) ^ -(b & 1)
                pos += 1
            else:
                size, pos = read_varint(buf, pos)
            if size >= 0:
                value = buf[pos:pos + size]
                pos += size
            else:
                value = None
            b = buf[pos]
            if b == 0:
                headers = []
                pos += 1
            else:
                count, pos = read_varint(buf, pos)
                if count < 0 or count > record_end - pos:
                    raise CorruptRecords(f"record at offset delta {offset_delta} declares {count} headers")
                headers = []
                for _ in range(count):
                    size, pos = read_varint(buf, pos)
                    if size < 0:
                        raise CorruptRecords(f"record header key of length {size}")
                    hkey = buf[pos:pos + size].decode("utf-8", _HEADER_KEY_ERRORS)
                    pos += size
                    size, pos = read_varint(buf, pos)
                    if size >= 0:
                        hvalue = buf[pos:pos + size]
                        pos += size
                    else:
                        hvalue = None
                    headers.append((hkey, hvalue))
            if pos != record_end:
                raise CorruptRecords(
                    f"record at offset delta {offset_delta} declares {length} bytes, "
                    f"its fields take {length + pos - record_end}"
                )
            yield Record(
                base_offset + offset_delta,
                append_time if append_time is not None else base_timestamp + ts_delta,
                key,
                value,
                headers,
                is_control,
            )
        if pos != end:
            raise CorruptRecords(f"{end - pos} bytes left after the batch's {header.record_count} records")
    except IndexError:
        raise CorruptRecords(f"record batch at offset {base_offset} ends inside a record") from None



def check_records(buf: bytes | bytearray | memoryview, header: BatchHeader, pos: int = 0) -> None:
    """Walk the records of the batch at ``pos`` without building them: raise CorruptRecords
    unless they are exactly ``record_count`` well-formed records that fill the batch (what
    Kafka's LogValidator reads from a client's batch; like Kafka, it does not require the
    offset deltas to be 0, 1, 2, ...).

    Why a walk of its own rather than iter_records: a producer's batch is otherwise kept
    opaque, so this is the only per-record work on the produce path; it reads the lengths
    it needs to step over keys, values and headers and creates no objects. A compressed
    batch is decompressed for it, as Kafka does.
    """
    codec = header.attributes & COMPRESSION_MASK
    if codec:
        buf = _compression.decompress(codec, memoryview(buf)[pos + HEADER_SIZE:pos + header.size])
        pos, end = 0, len(buf)
    else:
        end = pos + header.size
        pos += HEADER_SIZE
    read_varint = _read_varint
    try:
        # Single-byte varints are the common case for every field but the timestamp delta:
        # that test is inlined before the general path, as in _decode_records.
        for expected in range(header.record_count):
            b = buf[pos]
            if b < 0x80:
                length = (b >> 1) ^ -(b & 1)
                pos += 1
            else:
                length, pos = read_varint(buf, pos)
            record_end = pos + length
            if length < 6 or record_end > end:
                raise CorruptRecords(f"record {expected} of {length} bytes does not fit the batch")
            _, pos = read_varint(buf, pos + 1)  # attributes, then the timestamp delta
            pos += 1 if buf[pos] < 0x80 else read_varint(buf, pos)[1] - pos  # the offset delta
            b = buf[pos]  # the key: any negative length is null
            if b < 0x80:
                size = (b >> 1) ^ -(b & 1)
                pos += 1
            else:
                size, pos = read_varint(buf, pos)
            if size > 0:
                pos += size
            b = buf[pos]  # the value
            if b < 0x80:
                size = (b >> 1) ^ -(b & 1)
                pos += 1
            else:
                size, pos = read_varint(buf, pos)
            if size > 0:
                pos += size
            if buf[pos]:
                count, pos = read_varint(buf, pos)
                if count < 0 or count > record_end - pos:
                    raise CorruptRecords(f"record {expected} declares {count} headers")
                for _ in range(count):
                    size, pos = read_varint(buf, pos)
                    if size < 0:
                        raise CorruptRecords(f"record {expected} has a header key of length {size}")
                    size, pos = read_varint(buf, pos + size)
                    if size > 0:
                        pos += size
            else:
                pos += 1
            if pos != record_end:
                raise CorruptRecords(f"record {expected} declares {length} bytes, its fields take "
                                     f"{length + pos - record_end}")
        if pos != end:
            raise CorruptRecords(f"{end - pos} bytes left after the batch's {header.record_count} records")
    except IndexError:
        raise CorruptRecords("the batch ends inside a record") from None


# ---------------------------------------------------------------------------
# Building batches
# ---------------------------------------------------------------------------

_VARINT_1 = [bytes([i]) for i in range(128)]
_INT32_MAX = 0x7FFFFFFF


def _varint(value: int) -> bytes:
    """Zigzag-encode ``value`` (int64 range) as a varint."""
    z = (value << 1) ^ (value >> 63)
    if z < 0x80:
        return _VARINT_1[z]
    out = bytearray()
    while z >= 0x80:
        out.append((z & 0x7F) | 0x80)
        z >>= 7
    out.append(z)
    return bytes(out)


def encode_record(record: Record, offset_delta: int, timestamp_delta: int) -> bytearray:
    """One record's bytes, its length prefix included."""
    varint = _varint
    body = bytearray(b"\x00")  # attributes
    body += varint(timestamp_delta)
    body += varint(offset_delta)
    key = record.key
    if key is None:
        body += b"\x01"  # zigzag(-1)
    else:
        body += varint(len(key))
        body += key
    value = record.value
    if value is None:
        body += b"\x01"
    else:
        body += varint(len(value))
        body += value
    headers = record.headers
    body += varint(len(headers))
    for hkey, hvalue in headers:
        raw = hkey.encode("utf-8", _HEADER_KEY_ERRORS)
        body += varint(len(raw))
        body += raw
        if hvalue is None:
            body += b"\x01"
        else:
            body += varint(len(hvalue))
            body += hvalue
    out = bytearray(varint(len(body)))
    out += body
    return out


def build_batch(
    records: Iterable[Record],
    *,
    base_offset: int = 0,
    compression: int = 0,
    producer_id: int = NO_PRODUCER_ID,
    producer_epoch: int = -1,
    base_sequence: int = -1,
    timestamp_type: int = 0,
    is_transactional: bool = False,
    is_control: bool = False,
    partition_leader_epoch: int = -1,
    max_timestamp: int | None = None,
    last_offset_delta: int | None = None,
    delete_horizon: int | None = None,
) -> bytearray:
    """Encode ``records`` as one magic-2 batch, CRC32C included.

    Offset deltas come from each record's ``offset`` minus ``base_offset``, so a
    compacted batch keeps its gaps and its original base offset; they must
    increase. baseTimestamp is the first record's timestamp, as Java's
    MemoryRecordsBuilder writes it (later records may be older: deltas are
    signed), and maxTimestamp the largest, unless ``max_timestamp`` is given
    (LogAppendTime). ``last_offset_delta`` overrides the computed one; an empty
    batch needs it, because Kafka keeps empty batches after compaction only to
    remember a producer's last sequence and offset (KIP-98).
    ``delete_horizon`` sets attributes bit 6 and makes it the baseTimestamp
    (KIP-534). Raises ValueError for inconsistent input.
    """
    records = list(records)
    if delete_horizon is not None:
        base_timestamp = delete_horizon
    elif records:
        base_timestamp = records[0].timestamp
    else:
        base_timestamp = NO_TIMESTAMP
    if max_timestamp is None:
        max_timestamp = max((r.timestamp for r in records), default=NO_TIMESTAMP)

    out = bytearray(HEADER_SIZE)
    body = out if compression == 0 else bytearray()
    previous = -1
    for record in records:
        delta = record.offset - base_offset
        if delta <= previous or delta > _INT32_MAX:
            raise ValueError(
                f"record offset {record.offset} out of order or range for base offset {base_offset}"
            )
        previous = delta
        body += encode_record(record, delta, record.timestamp - base_timestamp)
    if last_offset_delta is None:
        if not records:
            raise ValueError("an empty batch needs an explicit last_offset_delta")
        last_offset_delta = previous
    elif last_offset_delta < previous:
        raise ValueError(f"last_offset_delta {last_offset_delta} below the last record's {previous}")
    if compression != 0:
        out += _compression.compress(compression, body)

    attributes = compression & COMPRESSION_MASK
    if timestamp_type:
        attributes |= TIMESTAMP_TYPE_MASK
    if is_transactional:
        attributes |= TRANSACTIONAL_MASK
    if is_control:
        attributes |= CONTROL_MASK
    if delete_horizon is not None:
        attributes |= DELETE_HORIZON_MASK
    try:
        HEADER.pack_into(
            out, 0,
            base_offset, len(out) - LOG_OVERHEAD, partition_leader_epoch, 2, 0, attributes,
            last_offset_delta, base_timestamp, max_timestamp,
            producer_id, producer_epoch, base_sequence, len(records),
        )
    except struct.error as exc:
        raise ValueError(f"record batch header field out of range: {exc}") from None
    _U32.pack_into(out, CRC, crc32c(memoryview(out)[CRC_START:]))
    return out


def build_txn_marker(
    commit: bool,
    *,
    producer_id: int,
    producer_epoch: int,
    timestamp: int,
    base_offset: int = 0,
    coordinator_epoch: int = 0,
    partition_leader_epoch: int = -1,
) -> bytearray:
    """A transaction marker: a control batch with one COMMIT or ABORT record.

    Key is (version 0, type); value is EndTransactionMarker (version 0,
    coordinator epoch), as WriteTxnMarkers has the partition leader append it.
    """
    record = Record(
        base_offset,
        timestamp,
        _CONTROL_KEY.pack(0, ControlType.COMMIT if commit else ControlType.ABORT),
        _END_TXN_VALUE.pack(0, coordinator_epoch),
        [],
        True,
    )
    return build_batch(
        [record],
        base_offset=base_offset,
        producer_id=producer_id,
        producer_epoch=producer_epoch,
        is_transactional=True,
        is_control=True,
        partition_leader_epoch=partition_leader_epoch,
    )


def read_txn_marker(batch: bytes | bytearray | memoryview) -> tuple[ControlType, int] | None:
    """(COMMIT or ABORT, coordinator epoch) of a transaction marker batch; None for a
    control batch that is not a transaction marker."""
    for record in iter_records(batch):
        kind = control_type(record)
        if kind not in (ControlType.COMMIT, ControlType.ABORT):
            return None
        value = record.value
        if value is None or len(value) < _END_TXN_VALUE.size:
            raise CorruptRecords(f"transaction marker at offset {record.offset} has a value of "
                                 f"{0 if value is None else len(value)} bytes")
        _version, coordinator_epoch = _END_TXN_VALUE.unpack_from(value)
        return kind, coordinator_epoch
    return None
