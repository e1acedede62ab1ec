"""The single-batch append path (PartitionLog.append) against the general one, and the
settings it derives once (_arm): rolls by size, age, full index and config change."""

from __future__ import annotations

import random
import struct
import time
from dataclasses import replace

import pytest

from storage import LogClosed, LogConfig, PartitionLog
from storage.index import OffsetIndex
from storage_testkit import batch_with_size, decode, make_batch, read_all

T0 = 1_700_000_000_000


def _state(plog: PartitionLog):
    out = []
    for s in plog.segments:
        out.append((s.base_offset, s.size, s.next_offset, s.max_timestamp, s.offset_of_max_timestamp,
                    s.first_batch_max_timestamp, s.bytes_since_index,
                    list(s.offset_index.keys), list(s.offset_index.values),
                    list(s.time_index.keys), list(s.time_index.values)))
    return out


def test_single_batch_path_matches_multi_batch_path(tmp_path):
    rng = random.Random(7)
    config = LogConfig(index_interval_bytes=700)
    single = PartitionLog.open(tmp_path / "a-0", config, now_ms=T0)
    multi = PartitionLog.open(tmp_path / "b-0", config, now_ms=T0)
    batches = []
    for i in range(300):
        ts = T0 + rng.randrange(-50, 400)  # sometimes lower than the maximum so far
        batches.append(make_batch(rng.randrange(1, 6), timestamp=ts, value_size=rng.randrange(10, 600)))
    for i in range(0, len(batches), 2):
        r1 = single.append(bytearray(batches[i]), now_ms=T0)
        r2 = single.append(bytearray(batches[i + 1]), now_ms=T0)
        r = multi.append(bytearray(batches[i]) + bytearray(batches[i + 1]), now_ms=T0)
        assert (r1[0], r2[1]) == (r[0], r[1])  # base offset of the first, last offset of the second
        assert r1[2:] == (-1, 0)  # no LogAppendTime; log start offset
    assert _state(single) == _state(multi)
    assert read_all(single) == read_all(multi)
    single.close()
    multi.close()
    for suffix in (".index", ".timeindex", ".log"):
        name = "00000000000000000000" + suffix
        assert (tmp_path / "a-0" / name).read_bytes() == (tmp_path / "b-0" / name).read_bytes()


def test_log_append_time(tmp_path):
    plog = PartitionLog.open(tmp_path / "t-0", LogConfig(message_timestamp_type="LogAppendTime"), now_ms=T0)
    result = plog.append(make_batch(3), now_ms=T0 + 5)
    assert result == (0, 2, T0 + 5, 0)
    assert plog.active.max_timestamp == T0 + 5
    before = time.time_ns() // 1_000_000
    _base, _last, log_append_time_ms, _start = plog.append(make_batch(1))
    assert before <= log_append_time_ms <= time.time_ns() // 1_000_000
    assert [r[1] for r in decode(read_all(plog))] == [T0 + 5] * 3 + [log_append_time_ms]


def test_segment_ms_roll_boundary(tmp_path):
    plog = PartitionLog.open(tmp_path / "t-0", LogConfig(segment_ms=1000), now_ms=T0)
    plog.append(make_batch(1), now_ms=T0)
    plog.append(make_batch(1), now_ms=T0 + 1000)  # not past segment.ms yet
    assert len(plog.segments) == 1
    plog.append(make_batch(1), now_ms=T0 + 1001)
    assert [s.base_offset for s in plog.segments] == [0, 2]
    # The wall clock (no now_ms): the active segment was created long ago.
    plog.append(make_batch(1))
    assert [s.base_offset for s in plog.segments] == [0, 2, 3]
    plog.append(make_batch(1))
    assert len(plog.segments) == 3


def test_segment_bytes_and_config_change(tmp_path):
    config = LogConfig(segment_bytes=1000)
    plog = PartitionLog.open(tmp_path / "t-0", config, now_ms=T0)
    for _ in range(3):
        plog.append(batch_with_size(400), now_ms=T0)  # 400, 800, then 1200 > 1000 rolls
    assert [s.base_offset for s in plog.segments] == [0, 2]
    plog.config = replace(config, segment_bytes=500)
    plog.append(batch_with_size(400), now_ms=T0)  # 800 > 500: rolls under the new config
    assert [s.base_offset for s in plog.segments] == [0, 2, 3]
    plog.config = replace(config, max_message_bytes=300)
    with pytest.raises(Exception, match="max.message.bytes"):
        plog.append(batch_with_size(400), now_ms=T0)
    assert plog.log_end_offset == 4


def test_full_offset_index_rolls(tmp_path):
    config = LogConfig(index_interval_bytes=100, segment_index_bytes=12 * 3)
    plog = PartitionLog.open(tmp_path / "t-0", config, now_ms=T0)
    for _ in range(4):  # the first batch gets no entry; batches 2..4 fill the index
        plog.append(batch_with_size(200), now_ms=T0)
    assert len(plog.segments) == 1 and plog.active.index_full
    assert len(plog.active.offset_index.keys) == 3
    plog.append(batch_with_size(200), now_ms=T0)
    assert [s.base_offset for s in plog.segments] == [0, 4]


def test_pending_index_entries_flushed_every_512(tmp_path):
    plog = PartitionLog.open(tmp_path / "t-0", LogConfig(index_interval_bytes=1), now_ms=T0)
    for _ in range(1030):
        plog.append(make_batch(1), now_ms=T0)
    # 1029 entries (the first batch has none): 1024 written in two blocks, 5 pending.
    assert len(plog.active.offset_index.keys) == 1029
    assert (tmp_path / "t-0" / "00000000000000000000.index").stat().st_size == 1024 * 8
    plog.close()
    raw = (tmp_path / "t-0" / "00000000000000000000.index").read_bytes()
    size = len(make_batch(1))
    assert [struct.unpack_from(">ii", raw, 8 * i) for i in range(1029)] == [(i, i * size) for i in range(1, 1030)]


def test_index_entries_survive_merges_from_every_path(tmp_path):
    """The fast path appends index entries to the index's tail, which merges replace: merges
    by the general path (several batches), by flush() and by the fast path itself must not
    leave it appending to a detached tail. Every batch gets an entry here (interval 1)."""
    mixed = PartitionLog.open(tmp_path / "a-0", LogConfig(index_interval_bytes=1), now_ms=T0)
    reference = PartitionLog.open(tmp_path / "b-0", LogConfig(index_interval_bytes=1), now_ms=T0)
    rng = random.Random(11)
    for step in range(3000):
        batches = [make_batch(rng.randrange(1, 4)) for _ in range(rng.choice([1, 1, 1, 2, 3]))]
        mixed.append(bytearray(b"".join(batches)), now_ms=T0)
        for batch in batches:
            reference.append(bytearray(batch), now_ms=T0)
        if rng.random() < 0.01:
            mixed.flush(now_ms=T0)
    assert len(mixed.active.offset_index) > 3 * 512
    assert _state(mixed) == _state(reference)
    for key, position in zip(mixed.active.offset_index.keys, mixed.active.offset_index.values):
        assert mixed.active.offset_index.lookup(key) == (key, position)
    mixed.close()
    reference.close()
    name = "00000000000000000000.index"
    assert (tmp_path / "a-0" / name).read_bytes() == (tmp_path / "b-0" / name).read_bytes()


def test_closed_log_rejects_appends(tmp_path):
    plog = PartitionLog.open(tmp_path / "t-0", LogConfig(), now_ms=T0)
    plog.append(make_batch(1), now_ms=T0)
    plog.close()
    with pytest.raises(LogClosed):
        plog.append(make_batch(1), now_ms=T0)


@pytest.mark.parametrize("base", [0, 5, 2**31 - 3, 2**40 + 7, 2**62])
def test_offset_index_encoding(tmp_path, base):
    rng = random.Random(base)
    for trial in range(40):
        index = OffsetIndex(tmp_path / "x.index", base)
        keys, values = index._cols
        k, v = base + rng.randrange(3), rng.randrange(100)
        for _ in range(rng.randrange(0, 700)):
            values.append(v)
            keys.append(k)
            k += rng.randrange(1, 2**20)
            v += rng.randrange(1, 2**21)
        start, end = sorted((rng.randrange(len(keys) + 1), rng.randrange(len(keys) + 1)))
        flat = [x for kv in zip([key - base for key in keys[start:end]], values[start:end]) for x in kv]
        try:
            expected = struct.pack(f">{len(flat)}i", *flat)
        except struct.error:
            with pytest.raises(struct.error):
                index._encode_range(start, end)
        else:
            assert index._encode_range(start, end) == expected
