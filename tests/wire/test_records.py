"""Magic-2 record batches: ours against kafka-python's and aiokafka's codecs.

Every codec both ways: their builders -> our header/CRC/record decoding, and our
build_batch -> their readers (validate_crc, header fields, every record).
"""

from __future__ import annotations

import struct

import aiokafka.record.default_records as aio_records
import kafka.record.default_records as kp_records
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from wire import compression as wc
from wire.errors import CorruptRecords
from wire.records import (
    HEADER_SIZE,
    ControlType,
    Record,
    build_batch,
    build_txn_marker,
    control_type,
    crc32c,
    iter_headers,
    iter_records,
    parse_header,
    patch_base_offset,
    patch_leader_epoch,
    peek_magic,
    set_log_append_time,
    verify_crc,
)

CODECS = [wc.NONE, wc.GZIP, wc.SNAPPY, wc.LZ4, wc.ZSTD]
CODEC_IDS = ["none", "gzip", "snappy", "lz4", "zstd"]


def sample_records(base_offset: int = 0) -> list[Record]:
    """Records that exercise nulls, empties, headers, unicode, sizes and timestamps."""
    filler = b"compressible payload " * 40
    records = [
        Record(0, 1_700_000_000_000, b"key-0", filler, [("trace", b"abc"), ("none", None)]),
        Record(1, 1_700_000_000_005, None, b"value without key", []),
        Record(2, 1_699_999_999_990, b"", None, [("", b"")]),  # older than the first: negative delta
        Record(3, 1_700_000_000_100, b"k" * 300, filler * 3, [("caf\u00e9 \u2603", b"\x00\xff" * 100)] * 3),
        Record(4, 1_700_000_000_100, b"big", b"x" * 70_000, []),
    ]
    records += [Record(i, 1_700_000_001_000 + i, b"key-%d" % i, filler[: i * 7], []) for i in range(5, 60)]
    for r in records:
        r.offset += base_offset
    return records


def their_record(record) -> tuple:
    headers = [(k, None if v is None else bytes(v)) for k, v in record.headers]
    key = None if record.key is None else bytes(record.key)
    value = None if record.value is None else bytes(record.value)
    return (record.offset, record.timestamp, key, value, headers)


def our_record(record: Record) -> tuple:
    return (record.offset, record.timestamp, record.key, record.value, record.headers)


BUILDERS = {
    "kafka-python": kp_records.DefaultRecordBatchBuilder,
    "aiokafka": aio_records.DefaultRecordBatchBuilder,
}
READERS = {
    "kafka-python": kp_records.DefaultRecordBatch,
    "aiokafka": aio_records.DefaultRecordBatch,
}


def build_theirs(library: str, codec: int, records: list[Record], *, transactional: bool = False) -> bytes:
    producer = (4711, 3, 1000) if transactional else (-1, -1, -1)
    builder = BUILDERS[library](2, codec, transactional, *producer, 10 * 1024 * 1024)
    for r in records:
        assert builder.append(r.offset, r.timestamp, r.key, r.value, r.headers) is not None
    return bytes(builder.build())


def assert_header_matches(ours, theirs) -> None:
    assert ours.base_offset == theirs.base_offset
    assert ours.magic == theirs.magic == 2
    assert ours.crc == theirs.crc
    assert ours.attributes == theirs.attributes
    assert ours.compression == theirs.compression_type
    assert ours.is_transactional == theirs.is_transactional
    assert ours.is_control == theirs.is_control_batch
    assert ours.last_offset_delta == theirs.last_offset_delta
    assert ours.base_timestamp == theirs.first_timestamp
    assert ours.max_timestamp == theirs.max_timestamp
    assert ours.producer_id == theirs.producer_id
    assert ours.producer_epoch == theirs.producer_epoch
    assert ours.base_sequence == theirs.base_sequence
    assert ours.next_offset == theirs.next_offset


# -- theirs -> ours -------------------------------------------------------------


@pytest.mark.parametrize("transactional", [False, True], ids=["plain", "txn"])
@pytest.mark.parametrize("codec", CODECS, ids=CODEC_IDS)
@pytest.mark.parametrize("library", list(BUILDERS))
def test_their_batches_parse_with_ours(library: str, codec: int, transactional: bool) -> None:
    records = sample_records()
    data = build_theirs(library, codec, records, transactional=transactional)
    header = parse_header(data)
    verify_crc(data, header)
    assert header.size == len(data)
    # The builders fall back to no compression when it does not pay; these records compress.
    assert header.compression == codec
    assert header.record_count == len(records)
    assert header.last_offset_delta == len(records) - 1
    assert header.base_timestamp == records[0].timestamp
    assert header.max_timestamp == max(r.timestamp for r in records)
    if transactional:
        assert (header.producer_id, header.producer_epoch, header.base_sequence) == (4711, 3, 1000)
        assert header.is_transactional
    assert_header_matches(header, READERS[library](data))
    for buffer in (data, bytearray(data), memoryview(data)):
        assert list(iter_records(buffer, check_crc=True)) == records


@pytest.mark.parametrize("library", list(BUILDERS))
def test_their_concatenated_batches_walk_with_iter_headers(library: str) -> None:
    batches = [build_theirs(library, codec, sample_records()) for codec in CODECS]
    blob = b"".join(batches)
    found = list(iter_headers(blob))
    assert [h.compression for _, h in found] == CODECS
    assert [pos for pos, _ in found] == [sum(len(b) for b in batches[:i]) for i in range(len(batches))]
    # A fetch-style cut in the last batch is an error for a produce payload.
    with pytest.raises(CorruptRecords):
        list(iter_headers(blob[:-1]))


# -- ours -> theirs -------------------------------------------------------------


@pytest.mark.parametrize("codec", CODECS, ids=CODEC_IDS)
@pytest.mark.parametrize("library", list(READERS))
def test_our_batches_parse_with_theirs(library: str, codec: int) -> None:
    records = sample_records(base_offset=1000)
    data = build_batch(
        records,
        base_offset=1000,
        compression=codec,
        producer_id=99,
        producer_epoch=7,
        base_sequence=12,
        partition_leader_epoch=5,
    )
    theirs = READERS[library](bytes(data))
    assert theirs.validate_crc()
    ours = parse_header(data)
    assert_header_matches(ours, theirs)
    assert ours.partition_leader_epoch == 5
    assert theirs.compression_type == codec
    assert (theirs.producer_id, theirs.producer_epoch, theirs.base_sequence) == (99, 7, 12)
    assert theirs.first_timestamp == records[0].timestamp
    assert theirs.max_timestamp == max(r.timestamp for r in records)
    assert [their_record(r) for r in theirs] == [our_record(r) for r in records]


@pytest.mark.parametrize("library", list(READERS))
def test_offset_gaps_survive(library: str) -> None:
    # What compaction produces: the original base offset, records with holes.
    records = [Record(o, 1000 + o, b"k%d" % o, b"v") for o in (103, 104, 110, 250)]
    data = build_batch(records, base_offset=100, compression=wc.LZ4)
    header = parse_header(data)
    assert header.last_offset_delta == 150
    assert header.record_count == 4
    assert header.next_offset == 251
    theirs = READERS[library](bytes(data))
    assert theirs.validate_crc()
    assert [r.offset for r in theirs] == [103, 104, 110, 250]
    assert [r.offset for r in iter_records(data)] == [103, 104, 110, 250]


def test_flags_and_explicit_fields() -> None:
    records = [Record(0, 50, b"a", b"b")]
    data = build_batch(records, is_transactional=True, producer_id=1, producer_epoch=0,
                       timestamp_type=1, max_timestamp=777)
    header = parse_header(data)
    assert header.is_transactional and header.is_log_append_time and not header.is_control
    assert header.max_timestamp == 777
    theirs = kp_records.DefaultRecordBatch(bytes(data))
    assert theirs.validate_crc() and theirs.timestamp_type == 1
    assert [r.timestamp for r in theirs] == [777]
    assert [r.timestamp for r in iter_records(data)] == [777]


def test_empty_batch_keeps_producer_state() -> None:
    data = build_batch([], base_offset=40, last_offset_delta=9, producer_id=5, producer_epoch=1, base_sequence=30)
    header = parse_header(data)
    verify_crc(data, header)
    assert (header.record_count, header.next_offset, header.last_sequence) == (0, 50, 39)
    assert header.base_timestamp == header.max_timestamp == -1
    assert list(iter_records(data)) == []
    theirs = kp_records.DefaultRecordBatch(bytes(data))
    assert theirs.validate_crc() and list(theirs) == []


def test_delete_horizon() -> None:
    records = [Record(0, 5000, b"k", None), Record(1, 6000, b"j", b"v")]
    data = build_batch(records, delete_horizon=4000)
    header = parse_header(data)
    assert header.attributes & 0x40
    assert header.base_timestamp == 4000
    assert header.max_timestamp == 6000
    assert list(iter_records(data)) == records
    theirs = kp_records.DefaultRecordBatch(bytes(data))
    assert theirs.validate_crc()
    assert [r.timestamp for r in theirs] == [5000, 6000]


def test_build_rejects_bad_input() -> None:
    with pytest.raises(ValueError):
        build_batch([Record(5, 0, None, None), Record(5, 0, None, None)], base_offset=5)
    with pytest.raises(ValueError):
        build_batch([Record(4, 0, None, None)], base_offset=5)
    with pytest.raises(ValueError):
        build_batch([Record(5 + 2**31, 0, None, None)], base_offset=5)
    with pytest.raises(ValueError):
        build_batch([])
    with pytest.raises(ValueError):
        build_batch([Record(3, 0, None, None)], last_offset_delta=2)
    with pytest.raises(wc.UnsupportedCompression):
        build_batch([Record(0, 0, None, None)], compression=6)


# -- control batches ------------------------------------------------------------


@pytest.mark.parametrize("commit", [True, False])
def test_txn_marker(commit: bool) -> None:
    data = build_txn_marker(commit, producer_id=77, producer_epoch=4, timestamp=123_456,
                            base_offset=900, coordinator_epoch=11, partition_leader_epoch=2)
    header = parse_header(data)
    verify_crc(data, header)
    assert header.is_control and header.is_transactional
    assert (header.producer_id, header.producer_epoch, header.base_offset) == (77, 4, 900)
    [record] = list(iter_records(data))
    assert record.is_control
    assert control_type(record) == (ControlType.COMMIT if commit else ControlType.ABORT)
    assert struct.unpack(">hi", record.value) == (0, 11)

    kp = kp_records.DefaultRecordBatch(bytes(data))
    assert kp.validate_crc() and kp.is_control_batch and kp.is_transactional
    [control] = list(kp)
    assert isinstance(control, kp_records.ControlRecord)
    assert (control.commit, control.abort, control.version) == (commit, not commit, 0)
    assert control.offset == 900 and control.timestamp == 123_456

    aio = aio_records.DefaultRecordBatch(bytes(data))
    assert aio.validate_crc() and aio.is_control_batch


def test_control_type_of_other_records() -> None:
    assert control_type(Record(0, 0, b"\x00\x00\x00\x01", None)) is None  # data record
    assert control_type(Record(0, 0, b"\x00\x00\x00\x09", None, [], True)) is ControlType.UNKNOWN
    assert control_type(Record(0, 0, b"\x00\x01\x00\x00", None, [], True)) is ControlType.ABORT  # newer key version
    for key in (None, b"", b"\x00\x00\x00"):
        with pytest.raises(CorruptRecords):
            control_type(Record(0, 0, key, None, [], True))
    with pytest.raises(CorruptRecords):
        control_type(Record(0, 0, b"\xff\xff\x00\x00", None, [], True))


def test_control_batch_built_by_hand_reads_as_control() -> None:
    key = struct.pack(">hh", 0, 0)
    data = build_batch([Record(0, 1, key, struct.pack(">hi", 0, 0))], is_control=True, is_transactional=True,
                       producer_id=3, producer_epoch=0)
    [record] = iter_records(data)
    assert control_type(record) is ControlType.ABORT


# -- in-place header patches ----------------------------------------------------


@pytest.mark.parametrize("codec", CODECS, ids=CODEC_IDS)
def test_patches_keep_crc_valid_for_third_party_readers(codec: int) -> None:
    data = bytearray(build_theirs("kafka-python", codec, sample_records()))
    patch_base_offset(data, 5_000_000)
    patch_leader_epoch(data, 42)
    theirs = kp_records.DefaultRecordBatch(bytes(data))
    assert theirs.validate_crc()
    assert theirs.base_offset == 5_000_000 and theirs.leader_epoch == 42
    assert [r.offset for r in theirs] == list(range(5_000_000, 5_000_000 + len(sample_records())))
    assert aio_records.DefaultRecordBatch(bytes(data)).validate_crc()

    set_log_append_time(data, 1_800_000_000_000)
    for reader in READERS.values():
        theirs = reader(bytes(data))
        assert theirs.validate_crc()
        assert theirs.timestamp_type == 1
        assert theirs.max_timestamp == 1_800_000_000_000
        assert {r.timestamp for r in theirs} == {1_800_000_000_000}
    verify_crc(data, parse_header(data))
    assert {r.timestamp for r in iter_records(data, check_crc=True)} == {1_800_000_000_000}


def test_patches_at_a_position_inside_a_larger_buffer() -> None:
    first = build_batch(sample_records()[:3])
    second = build_batch(sample_records()[:5], compression=wc.ZSTD)
    blob = bytearray(first + second)
    patch_base_offset(blob, 10, pos=len(first))
    set_log_append_time(blob, 99, pos=len(first))
    (_, h1), (pos, h2) = list(iter_headers(blob))
    assert pos == len(first) and h2.base_offset == 10 and h2.max_timestamp == 99
    assert kp_records.DefaultRecordBatch(bytes(blob[pos:])).validate_crc()
    assert [r.offset for r in iter_records(memoryview(blob)[pos:])] == list(range(10, 15))


def test_peek_magic() -> None:
    data = build_batch([Record(0, 0, None, b"v")])
    assert peek_magic(data) == 2
    assert peek_magic(data[:16]) is None
    assert peek_magic(b"\x00" * 40 + data, pos=40) == 2


# -- decoding edge cases --------------------------------------------------------


def _with_records_section(records_section: bytes, count: int) -> bytes:
    """A batch header (valid CRC) around hand-made record bytes."""
    out = bytearray(build_batch([Record(0, 0, None, None)]))
    del out[HEADER_SIZE:]
    out += records_section
    struct.pack_into(">i", out, 8, len(out) - 12)
    struct.pack_into(">i", out, 57, count)
    struct.pack_into(">I", out, 17, crc32c(memoryview(out)[21:]))
    return bytes(out)


def test_any_negative_length_is_null() -> None:
    # Java's DefaultRecord.readFrom treats every negative key/value size as null.
    body = bytes([0, 0, 0, 3, 5, 0])  # attrs, ts 0, offset 0, key -2, value -3, 0 headers
    data = _with_records_section(bytes([len(body) * 2]) + body, 1)
    [record] = iter_records(data)
    assert record.key is None and record.value is None


def test_malformed_utf8_header_key_round_trips() -> None:
    body = bytes([0, 0, 0, 1, 1, 2, 4, 0xC3, 0x28, 1])  # one header, key b"\xc3\x28", value null
    data = _with_records_section(bytes([len(body) * 2]) + body, 1)
    [record] = iter_records(data)
    assert build_batch([record])[HEADER_SIZE:] == data[HEADER_SIZE:]


@pytest.mark.parametrize(
    "section,count",
    [
        (bytes([12, 0, 0, 0, 1, 1, 0]), 2),  # fewer records than declared
        (bytes([12, 0, 0, 0, 1, 1, 0, 99]), 1),  # a trailing byte
        (bytes([14, 0, 0, 0, 1, 1, 0]), 1),  # record longer than its fields
        (bytes([10, 0, 0, 0, 1, 1, 0]), 1),  # shorter than its fields
        (bytes([12, 0, 0, 0, 20, 1, 0]), 1),  # key overruns the record
        (bytes([12, 0, 0, 0, 1, 1, 1]), 1),  # negative header count
        (bytes([16, 0, 0, 0, 1, 1, 2, 1, 1]), 1),  # header key of length -1
        (bytes([0xFF] * 12), 1),  # varint longer than 10 bytes
        (bytes([2, 0]), 1),  # record too short to hold its fields
        (b"", 1),
    ],
)
def test_malformed_records_raise_corrupt(section: bytes, count: int) -> None:
    data = _with_records_section(section, count)
    verify_crc(data, parse_header(data))
    with pytest.raises(CorruptRecords):
        list(iter_records(data))


def test_header_problems_raise_at_call_time() -> None:
    data = bytearray(build_batch(sample_records()[:3], compression=wc.GZIP))
    with pytest.raises(CorruptRecords):
        iter_records(data[:60])
    with pytest.raises(CorruptRecords):
        iter_records(data[:-1])
    bad_crc = bytearray(data)
    bad_crc[-1] ^= 1
    iter_records(bad_crc)  # unchecked by default: stored batches were checked once
    with pytest.raises(CorruptRecords):
        iter_records(bad_crc, check_crc=True)
    negative = bytearray(data)
    struct.pack_into(">i", negative, 57, -1)
    with pytest.raises(CorruptRecords):
        iter_records(negative)
    wrong_magic = bytearray(data)
    wrong_magic[16] = 1
    with pytest.raises(CorruptRecords):
        iter_records(wrong_magic)
    unknown_codec = bytearray(data)
    unknown_codec[22] = (unknown_codec[22] & ~7) | 7
    with pytest.raises(wc.UnsupportedCompression):
        list(iter_records(unknown_codec))


@pytest.mark.parametrize("codec", CODECS, ids=CODEC_IDS)
def test_every_truncation_is_corrupt(codec: int) -> None:
    data = bytes(build_batch(sample_records()[:6], compression=codec))
    for cut in range(len(data)):
        with pytest.raises(CorruptRecords):
            list(iter_records(data[:cut]))
    # Truncated records section re-sealed with a matching length and CRC.
    for cut in range(HEADER_SIZE, len(data), 7):
        resealed = _with_records_section(data[HEADER_SIZE:cut], 6)
        resealed = bytearray(resealed)
        resealed[22] = codec
        struct.pack_into(">I", resealed, 17, crc32c(memoryview(resealed)[21:]))
        with pytest.raises(CorruptRecords):
            list(iter_records(resealed))


# -- properties -----------------------------------------------------------------

header_value = st.none() | st.binary(max_size=20)
records_strategy = st.lists(
    st.tuples(
        st.integers(min_value=1, max_value=2**20),  # offset step
        st.integers(min_value=-(2**40), max_value=2**42),  # timestamp
        st.none() | st.binary(max_size=40),
        st.none() | st.binary(max_size=300),
        st.lists(st.tuples(st.text(max_size=10), header_value), max_size=4),
    ),
    min_size=1,
    max_size=25,
)


def _to_records(base_offset: int, specs) -> list[Record]:
    records = []
    offset = base_offset - 1
    for step, ts, key, value, headers in specs:
        offset += step if records else 1 + step % 3
        records.append(Record(offset, ts, key, value, list(headers)))
    return records


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    specs=records_strategy,
    base_offset=st.integers(min_value=0, max_value=2**50),
    codec=st.sampled_from(CODECS),
    producer=st.tuples(st.integers(-1, 2**40), st.integers(-1, 2**15 - 1), st.integers(-1, 2**31 - 1)),
)
def test_build_iterate_round_trip(specs, base_offset: int, codec: int, producer) -> None:
    records = _to_records(base_offset, specs)
    data = build_batch(records, base_offset=base_offset, compression=codec,
                       producer_id=producer[0], producer_epoch=producer[1], base_sequence=producer[2])
    header = parse_header(data)
    verify_crc(data, header)
    assert header.size == len(data)
    assert header.last_offset == records[-1].offset
    assert list(iter_records(data)) == records
    theirs = aio_records.DefaultRecordBatch(bytes(data))
    assert theirs.validate_crc()
    assert [their_record(r) for r in theirs] == [our_record(r) for r in records]


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    codec=st.sampled_from(CODECS),
    edits=st.lists(st.tuples(st.integers(min_value=0), st.integers(0, 255)), min_size=1, max_size=6),
    cut=st.integers(min_value=0, max_value=64),
)
def test_garbage_raises_only_corrupt_records(codec: int, edits, cut: int) -> None:
    """Mutate the records section, re-seal length and CRC: decode or CorruptRecords, nothing else."""
    data = bytearray(build_batch(sample_records()[:4], compression=codec))
    for where, byte in edits:
        data[HEADER_SIZE + where % (len(data) - HEADER_SIZE)] = byte
    if cut:
        del data[-cut:]
    struct.pack_into(">i", data, 8, len(data) - 12)
    struct.pack_into(">I", data, 17, crc32c(memoryview(data)[21:]))
    try:
        for record in iter_records(data, check_crc=True):
            control_type(record)
    except CorruptRecords:
        pass


@settings(max_examples=300, deadline=None)
@given(data=st.binary(max_size=200))
def test_random_bytes_raise_only_corrupt_records(data: bytes) -> None:
    try:
        list(iter_records(data))
    except CorruptRecords:
        pass
    try:
        list(iter_headers(data))
    except CorruptRecords:
        pass


def test_header_layout_offsets_and_partial_structs():
    from wire import records as r

    assert (r.BASE_OFFSET, r.LENGTH, r.PARTITION_LEADER_EPOCH, r.MAGIC, r.CRC, r.ATTRIBUTES,
            r.LAST_OFFSET_DELTA, r.BASE_TIMESTAMP, r.MAX_TIMESTAMP, r.PRODUCER_ID, r.PRODUCER_EPOCH,
            r.BASE_SEQUENCE, r.RECORDS_COUNT, r.HEADER_SIZE) == (0, 8, 12, 16, 17, 21, 23, 27, 35, 43, 51, 53, 57, 61)
    assert r.HEADER.format == ">qiibIhiqqqhii"
    assert r.header_fields("length", "magic", "last_offset_delta", "max_timestamp", "records_count").format == ">8xi4xb6xi8xq14xi"
    assert r.header_fields("base_offset", "length", whole=False).size == 12
    batch = r.build_batch([r.Record(offset=7, timestamp=5, key=b"k", value=b"v")], base_offset=7,
                          partition_leader_epoch=3)
    epoch, count = r.header_fields("partition_leader_epoch", "records_count").unpack_from(batch)
    assert (epoch, count) == (3, 1)
    with pytest.raises(ValueError):
        r.header_fields("magic", "length")


def test_check_records_accepts_every_codec_and_agrees_with_the_decoder_on_damage():
    """Produce's record walk (check_records) passes well-formed batches of every codec at any
    position in a buffer, and on a batch with one byte changed fails exactly when decoding
    its records (iter_records) fails."""
    import random

    from wire.errors import CorruptRecords
    from wire.records import check_records, parse_header

    records = [Record(offset=i, timestamp=1_700_000_000_000 + i * 1_000_000, key=b"k" * i if i % 2 else None,
                      value=b"v" * (i * 50) if i != 3 else None, headers=[("h", b"x"), ("n", None)] * (i % 3))
               for i in range(40)]
    for codec in (0, 1, 2, 3, 4):
        batch = build_batch(records, compression=codec)
        check_records(batch, parse_header(batch))
        check_records(b"XX" + bytes(batch), parse_header(batch), 2)
    batch = bytes(build_batch(records))
    header = parse_header(batch)
    rng = random.Random(7)
    failures = 0
    for _ in range(3000):
        damaged = bytearray(batch)
        damaged[rng.randrange(61, len(damaged))] = rng.randrange(256)
        try:
            check_records(damaged, header)
            walked = True
        except CorruptRecords:
            walked = False
        try:
            list(iter_records(bytes(damaged)))
            decoded = True
        except CorruptRecords:
            decoded = False
        assert walked == decoded, damaged.hex()
        failures += not walked
    assert failures > 20  # some of the damage reached the structure (most lands in values)
