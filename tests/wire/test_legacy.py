"""Legacy message sets (magic 0/1): read, and up-convert to magic 2.

Sets come from kafka-python's and aiokafka's own legacy builders; the reference
for what they mean is kafka-python's reader (MemoryRecords / LegacyRecordBatch),
and converted batches are checked with kafka-python's and aiokafka's magic-2
readers.
"""

from __future__ import annotations

import struct
import zlib

import aiokafka.record.default_records as aio_records
import aiokafka.record.legacy_records as aio_legacy
import kafka.record.default_records as kp_records
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from kafka.record.legacy_records import LegacyRecordBatchBuilder
from kafka.record.memory_records import MemoryRecords

from wire import compression as wc
from wire.errors import CorruptRecords
from wire.legacy import iter_entries, iter_messages, legacy_to_batches, unwrap
from wire.records import iter_headers, iter_records, peek_magic

LEGACY_CODECS = [wc.NONE, wc.GZIP, wc.SNAPPY, wc.LZ4]
CODEC_IDS = ["none", "gzip", "snappy", "lz4"]

PAYLOADS = [
    (b"key-0", b"legacy value " * 30),
    (None, b"no key " * 10),
    (b"", None),
    (b"k" * 200, b"\x00\xff" * 500),
] + [(b"key-%d" % i, b"filler " * i) for i in range(4, 30)]


def kafka_python_set(magic: int, codec: int, *, first_offset: int = 0, timestamp: int = 1_600_000_000_000) -> bytes:
    builder = LegacyRecordBatchBuilder(magic, codec, 10 * 1024 * 1024)
    for i, (key, value) in enumerate(PAYLOADS):
        assert builder.append(first_offset + i, timestamp + i, key, value) is not None
    return bytes(builder.build())


def reference(data: bytes) -> list[tuple]:
    """(offset, timestamp, key, value) per message, as kafka-python reads the set."""
    out = []
    for batch in MemoryRecords(data):
        for r in batch:
            ts = -1 if r.timestamp is None else r.timestamp
            out.append((r.offset, ts, r.key, r.value))
    return out


def converted(data: bytes | bytearray) -> list[tuple]:
    """Walk converted batches with kafka-python's magic-2 reader, checking each CRC."""
    out = []
    for pos, header in iter_headers(data):
        chunk = bytes(data[pos:pos + header.size])
        for reader in (kp_records.DefaultRecordBatch, aio_records.DefaultRecordBatch):
            assert reader(chunk).validate_crc()
        batch = kp_records.DefaultRecordBatch(chunk)
        assert batch.magic == 2 and batch.producer_id == -1
        for r in batch:
            assert r.headers == []
            out.append((r.offset, r.timestamp, r.key, r.value))
        assert [(r.offset, r.timestamp, r.key, r.value) for r in iter_records(chunk)] == out[-header.record_count:]
    return out


def message(magic: int, offset: int, attributes: int, timestamp: int, key: bytes | None, value: bytes | None) -> bytes:
    """One legacy message written by hand (for the cases no client builder makes)."""
    body = struct.pack(">bb", magic, attributes)
    if magic:
        body += struct.pack(">q", timestamp)
    for field in (key, value):
        body += struct.pack(">i", -1) if field is None else struct.pack(">i", len(field)) + field
    crc = zlib.crc32(body)
    return struct.pack(">qiI", offset, len(body) + 4, crc) + body


def reseal(msg: bytearray, pos: int = 0) -> None:
    """Recompute the CRC32 of the message at ``pos`` after an edit."""
    size = struct.unpack_from(">i", msg, pos + 8)[0]
    struct.pack_into(">I", msg, pos + 12, zlib.crc32(memoryview(msg)[pos + 16:pos + 12 + size]))


# -- kafka-python's builder -------------------------------------------------------


@pytest.mark.parametrize("codec", LEGACY_CODECS, ids=CODEC_IDS)
@pytest.mark.parametrize("magic", [0, 1])
def test_kafka_python_sets(magic: int, codec: int) -> None:
    data = kafka_python_set(magic, codec)
    assert peek_magic(data) == magic
    expected = reference(data)
    assert len(expected) == len(PAYLOADS)
    ours = [(m.offset, m.timestamp, m.key, m.value) for m in iter_messages(data)]
    assert ours == expected

    # As a broker converts a produce: renumbered from the assigned base offset.
    batches = legacy_to_batches(data, base_offset=500)
    headers = [h for _, h in iter_headers(batches)]
    assert [h.compression for h in headers] == [codec]
    assert headers[0].base_offset == 500 and headers[0].record_count == len(PAYLOADS)
    assert converted(batches) == [(500 + i, ts, k, v) for i, (_, ts, k, v) in enumerate(expected)]

    # Offsets as the set gives them.
    assert converted(legacy_to_batches(data)) == expected


@pytest.mark.parametrize("codec", LEGACY_CODECS, ids=CODEC_IDS)
@pytest.mark.parametrize("magic", [0, 1])
def test_broker_written_sets_keep_absolute_offsets(magic: int, codec: int) -> None:
    """Sets as a pre-0.11 broker stored them: absolute offsets, v1 wrappers naming their last message."""
    parts = []
    for first in (1000, 1000 + len(PAYLOADS)):
        if codec and magic == 1:
            # Inner offsets stay relative (0..n-1); the wrapper gets the last absolute one.
            chunk = bytearray(kafka_python_set(magic, codec))
            struct.pack_into(">q", chunk, 0, first + len(PAYLOADS) - 1)  # outside the CRC
        elif codec:
            # Magic 0 wrappers hold absolute inner offsets.
            chunk = bytearray(kafka_python_set(magic, codec, first_offset=first))
            struct.pack_into(">q", chunk, 0, first + len(PAYLOADS) - 1)
        else:
            chunk = bytearray(kafka_python_set(magic, codec, first_offset=first))
        parts.append(bytes(chunk))
    data = b"".join(parts)
    expected = reference(data)
    assert [o for o, *_ in expected] == list(range(1000, 1000 + 2 * len(PAYLOADS)))
    assert [(m.offset, m.timestamp, m.key, m.value) for m in iter_messages(data)] == expected
    out = legacy_to_batches(data)
    # One batch per wrapper; uncompressed messages merge into one run.
    assert len(list(iter_headers(out))) == (2 if codec else 1)
    assert converted(out) == expected


@pytest.mark.parametrize("codec", [wc.GZIP, wc.SNAPPY, wc.LZ4], ids=CODEC_IDS[1:])
@pytest.mark.parametrize("magic", [0, 1])
def test_aiokafka_sets(magic: int, codec: int) -> None:
    if magic == 0 and codec == wc.LZ4:
        pytest.skip("aiokafka refuses lz4 with magic 0 (KAFKA-3160)")
    builder = aio_legacy.LegacyRecordBatchBuilder(magic, codec, 10 * 1024 * 1024)
    for i, (key, value) in enumerate(PAYLOADS):
        builder.append(i, 1_600_000_000_000 + i, key, value)
    data = bytes(builder.build())
    # aiokafka's reader takes one top-level message, which a compressed set is.
    theirs = [(r.offset, -1 if r.timestamp is None else r.timestamp, r.key, r.value)
              for r in aio_legacy.LegacyRecordBatch(data, magic)]
    assert [(m.offset, m.timestamp, m.key, m.value) for m in iter_messages(data)] == theirs
    assert converted(legacy_to_batches(data, base_offset=7)) == [
        (7 + i, ts, k, v) for i, (_, ts, k, v) in enumerate(theirs)
    ]


def test_magic0_lz4_uses_the_kafka_08_header_checksum() -> None:
    data = kafka_python_set(0, wc.LZ4)
    [wrapper] = list(iter_entries(data))
    with pytest.raises(CorruptRecords):
        wc.lz4_decompress(wrapper.value)  # a strict LZ4 reader rejects it
    assert [m.value for m in unwrap(wrapper)] == [v for _, v in PAYLOADS]


def test_compression_override() -> None:
    data = kafka_python_set(1, wc.GZIP)
    out = legacy_to_batches(data, base_offset=0, compression=wc.ZSTD)
    [(_, header)] = list(iter_headers(out))
    assert header.compression == wc.ZSTD
    assert len(converted(out)) == len(PAYLOADS)


# -- hand-made sets for what builders do not write --------------------------------


def test_log_append_time_wrapper_overrides_inner_timestamps() -> None:
    data = bytearray(kafka_python_set(1, wc.GZIP))
    data[17] |= 0x08  # timestamp type: LogAppendTime
    struct.pack_into(">q", data, 18, 1_900_000_000_000)
    reseal(data)
    expected = reference(bytes(data))
    assert {ts for _, ts, _, _ in expected} == {1_900_000_000_000}
    ours = list(iter_messages(data))
    assert [(m.offset, m.timestamp, m.key, m.value) for m in ours] == expected
    assert all(m.is_log_append_time for m in ours)
    out = legacy_to_batches(data, base_offset=0)
    [(_, header)] = list(iter_headers(out))
    assert header.is_log_append_time and header.max_timestamp == 1_900_000_000_000
    assert {ts for _, ts, _, _ in converted(out)} == {1_900_000_000_000}


def test_uncompressed_runs_split_by_timestamp_type_and_wrappers() -> None:
    data = (
        message(1, 0, 0, 10, b"a", b"1")
        + message(1, 1, 0, 11, b"b", b"2")
        + message(1, 2, 0x08, 12, b"c", b"3")  # LogAppendTime: a batch of its own
        + kafka_python_set(1, wc.SNAPPY)
        + message(0, 3, 0, -1, None, b"v0 message")
    )
    out = legacy_to_batches(data, base_offset=100)
    headers = [h for _, h in iter_headers(out)]
    assert [(h.base_offset, h.record_count, h.compression, h.is_log_append_time) for h in headers] == [
        (100, 2, 0, False),
        (102, 1, 0, True),
        (103, len(PAYLOADS), wc.SNAPPY, False),
        (103 + len(PAYLOADS), 1, 0, False),
    ]
    records = converted(out)
    assert [r[0] for r in records] == list(range(100, 104 + len(PAYLOADS)))
    assert records[-1] == (103 + len(PAYLOADS), -1, None, b"v0 message")


def test_placeholder_offsets_need_renumbering() -> None:
    data = message(1, 0, 0, 1, b"a", b"1") + message(1, 0, 0, 2, b"b", b"2")  # librdkafka-style zeros
    with pytest.raises(CorruptRecords, match="base_offset"):
        legacy_to_batches(data)
    assert [r[0] for r in converted(legacy_to_batches(data, base_offset=50))] == [50, 51]


def test_crc_checked_on_wrapper_and_inner_messages() -> None:
    data = bytearray(message(1, 0, 0, 1, b"a", b"value"))
    data[-1] ^= 0x01
    with pytest.raises(CorruptRecords, match="CRC32"):
        list(iter_messages(data))
    assert [m.value for m in iter_messages(data, check_crc=False)] == [b"valud"]

    inner = bytearray(message(1, 0, 0, 1, b"a", b"value"))
    inner[-1] ^= 0x01
    wrapper = message(1, 0, wc.GZIP, 1, None, wc.compress(wc.GZIP, inner))
    [entry] = list(iter_entries(wrapper))  # the wrapper itself is fine
    with pytest.raises(CorruptRecords, match="CRC32"):
        unwrap(entry)
    with pytest.raises(CorruptRecords):
        legacy_to_batches(wrapper)


@pytest.mark.parametrize(
    "data",
    [
        # compressed twice
        message(1, 0, wc.GZIP, 0, None, wc.compress(wc.GZIP, message(1, 0, wc.GZIP, 0, None, wc.compress(wc.GZIP, message(1, 0, 0, 0, None, b"x"))))),
        message(1, 0, wc.GZIP, 0, None, None),  # wrapper with null value
        message(1, 0, wc.GZIP, 0, None, wc.compress(wc.GZIP, b"")),  # wrapper with no messages
        message(1, 0, wc.GZIP, 0, None, b"not gzip at all"),
        message(1, 0, 5, 0, None, b"unknown codec"),
        message(0, 0, 0, -1, None, b"x")[:-1],  # truncated
        message(0, 0, 0, -1, None, b"x") + b"\x00" * 5,  # partial trailing message
    ],
    ids=["double", "null-value", "empty-inner", "bad-gzip", "codec-5", "truncated", "partial-tail"],
)
def test_malformed_sets(data: bytes) -> None:
    with pytest.raises(CorruptRecords):
        legacy_to_batches(data)


def test_magic2_inside_a_legacy_set_is_rejected() -> None:
    from wire.records import Record, build_batch

    batch = bytes(build_batch([Record(0, 0, None, b"v")]))
    with pytest.raises(CorruptRecords, match="magic 2"):
        list(iter_entries(message(1, 0, 0, 0, None, b"x") + batch))


def test_message_fields_must_fill_the_message() -> None:
    data = bytearray(message(1, 0, 0, 1, b"abc", b"xyz"))
    struct.pack_into(">i", data, 26, 10)  # key length beyond the message
    reseal(data)
    with pytest.raises(CorruptRecords):
        list(iter_entries(data))
    data = bytearray(message(1, 0, 0, 1, b"abc", b"xyz") + b"!")
    struct.pack_into(">i", data, 8, struct.unpack_from(">i", data, 8)[0] + 1)  # a stray byte after the value
    reseal(data)
    with pytest.raises(CorruptRecords):
        list(iter_entries(data))


@pytest.mark.parametrize("codec", LEGACY_CODECS, ids=CODEC_IDS)
@pytest.mark.parametrize("magic", [0, 1])
def test_every_truncation_is_corrupt(magic: int, codec: int) -> None:
    data = kafka_python_set(magic, codec) if codec else b"".join(
        message(magic, i, 0, i, b"k", b"v" * i) for i in range(5)
    )
    boundaries = set()
    pos = 0
    while pos < len(data):
        pos += 12 + struct.unpack_from(">i", data, pos + 8)[0]
        boundaries.add(pos)
    step = max(1, len(data) // 300)
    for cut in range(1, len(data), step):
        if cut in boundaries:
            continue  # a shorter set of whole messages is a valid set
        with pytest.raises(CorruptRecords):
            legacy_to_batches(data[:cut], base_offset=0)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    magic=st.sampled_from([0, 1]),
    codec=st.sampled_from(LEGACY_CODECS),
    edits=st.lists(st.tuples(st.integers(min_value=0), st.integers(0, 255)), min_size=1, max_size=6),
    check_crc=st.booleans(),
)
def test_garbage_raises_only_corrupt_records(magic: int, codec: int, edits, check_crc: bool) -> None:
    data = bytearray(message(magic, 0, 0, 5, b"k", b"v") + message(magic, 1, 0, 6, None, b"w" * 40))
    if codec:
        data = bytearray(message(magic, 1, codec, 7, None, wc.compress(codec, data)))
    for where, byte in edits:
        data[where % len(data)] = byte
    try:
        legacy_to_batches(data, base_offset=0, check_crc=check_crc)
    except CorruptRecords:
        pass


@settings(max_examples=200, deadline=None)
@given(data=st.binary(max_size=200))
def test_random_bytes_raise_only_corrupt_records(data: bytes) -> None:
    try:
        legacy_to_batches(data, base_offset=0, check_crc=False)
    except CorruptRecords:
        pass
