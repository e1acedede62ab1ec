"""The cleaner, on batches built by kafka-python's encoder and checked with its decoder."""

from __future__ import annotations

import random
import threading

import pytest

from storage import LogConfig, PartitionLog
from storage.compaction import clean_log
from storage_testkit import decode, make_batch, read_all
from wire.records import DELETE_HORIZON_MASK, iter_headers, parse_header

T0 = 1_700_000_000_000
DAY = 24 * 3600 * 1000


def compact_config(**kw) -> LogConfig:
    base = dict(cleanup_policy=frozenset({"compact"}), segment_bytes=1200, index_interval_bytes=100,
                min_cleanable_dirty_ratio=0.0, delete_retention_ms=DAY, file_delete_delay_ms=0)
    base.update(kw)
    return LogConfig(**base)


def expected_after_clean(history: list[tuple[int, bytes, bytes | None]], first_uncleanable: int):
    """Records a correct cleaner keeps: the latest per key below first_uncleanable, and
    everything at or above it."""
    latest: dict[bytes, int] = {}
    for offset, key, _ in history:
        if offset < first_uncleanable:
            latest[key] = offset
    return [(o, k, v) for o, k, v in history if o >= first_uncleanable or latest[k] == o]


def write_history(plog: PartitionLog, rng: random.Random, batches: int, keys: int, *, compression: int = 0,
                  tombstone_rate: float = 0.0, now_ms: int = T0):
    history = []
    for _ in range(batches):
        records = []
        for _ in range(rng.randint(1, 5)):
            key = b"key-%d" % rng.randrange(keys)
            value = None if rng.random() < tombstone_rate else b"value-%d" % rng.randrange(10**6)
            records.append((key, value))
        result = plog.append(make_batch(records, compression=compression, timestamp=now_ms), now_ms=now_ms)
        for i, (key, value) in enumerate(records):
            history.append((result[0] + i, key, value))
    return history


@pytest.mark.parametrize("compression", [0, 1, 3])  # none, gzip, lz4 (kafka-python codecs)
def test_keeps_latest_per_key_and_preserves_offsets(tmp_path, compression):
    rng = random.Random(compression)
    plog = PartitionLog.open(tmp_path / "c-0", compact_config(), now_ms=T0)
    history = write_history(plog, rng, 80, 12, compression=compression)
    segments_before = len(plog.segments)
    codecs = {h.base_offset: h.compression for _, h in iter_headers(read_all(plog))}
    assert compression == 0 or any(codecs.values())
    first_uncleanable = plog.active.base_offset
    before_end = plog.log_end_offset
    stats = clean_log(plog, T0)
    assert stats is not None and stats.records_removed > 0
    kept = [(o, k, v) for o, _ts, k, v in decode(read_all(plog))]
    assert kept == expected_after_clean(history, first_uncleanable)
    assert plog.log_end_offset == before_end and plog.log_start_offset == 0
    assert len(plog.segments) < segments_before  # small cleaned segments were merged
    # Rewritten batches keep their codec and their offset range.
    for _, header in iter_headers(read_all(plog)):
        assert header.compression == codecs[header.base_offset]
    # Reading at an offset whose record was removed gives the next batch holding a later one.
    gone = sorted(set(o for o, _, _ in history) - set(o for o, _, _ in kept))
    for offset in gone[:20]:
        data = plog.read(offset, 1)
        header = parse_header(data)
        assert header.last_offset >= offset
    # A restart (clean or crashed) serves the same: gaps below the cleaner checkpoint are legal.
    content = read_all(plog)
    plog.close()
    for clean in (True, False):
        plog = PartitionLog.open(tmp_path / "c-0", compact_config(), clean=clean, now_ms=T0)
        assert read_all(plog) == content
        assert plog.log_end_offset == before_end
        result = plog.append(make_batch(1), now_ms=T0)
        assert result[0] == before_end
        plog.truncate_to(before_end)
        plog.close()


def test_second_pass_only_when_dirty_enough(tmp_path):
    rng = random.Random(1)
    plog = PartitionLog.open(tmp_path / "c-0", compact_config(min_cleanable_dirty_ratio=0.5), now_ms=T0)
    write_history(plog, rng, 60, 5)
    assert clean_log(plog, T0) is not None
    assert clean_log(plog, T0) is None  # nothing new in closed segments
    history = write_history(plog, rng, 60, 5)
    assert history
    assert clean_log(plog, T0) is not None


def test_max_compaction_lag_overrides_the_dirty_ratio(tmp_path):
    config = compact_config(min_cleanable_dirty_ratio=1.0, max_compaction_lag_ms=60_000)
    plog = PartitionLog.open(tmp_path / "c-0", config, now_ms=T0)
    for i in range(3):
        plog.append(make_batch([(b"k", b"%d" % i)], timestamp=T0), now_ms=T0)
    plog.roll(now_ms=T0)
    plog.append(make_batch([(b"k", b"3")], timestamp=T0), now_ms=T0)
    plog.roll(now_ms=T0)
    plog.append(make_batch(1), now_ms=T0)
    plog.write_cleaned_offset(3)  # the first segment counts as clean: the ratio is below 1.0
    assert clean_log(plog, T0 + 1000) is None
    assert clean_log(plog, T0 + 60_001) is not None
    assert [o for o, *_ in decode(read_all(plog))] == [3, 4]


def test_tombstones_get_a_delete_horizon_then_go(tmp_path):
    config = compact_config(delete_retention_ms=1000)
    plog = PartitionLog.open(tmp_path / "c-0", config, now_ms=T0)
    plog.append(make_batch([(b"a", b"1"), (b"b", b"1")]), now_ms=T0)
    plog.append(make_batch([(b"a", None)]), now_ms=T0)  # tombstone for a
    plog.roll(now_ms=T0)
    plog.append(make_batch([(b"c", b"1")]), now_ms=T0)
    clean_log(plog, T0 + 10)
    records = decode(read_all(plog))
    assert [(o, k, v) for o, _, k, v in records] == [(1, b"b", b"1"), (2, b"a", None), (3, b"c", b"1")]
    headers = [h for _, h in iter_headers(read_all(plog))]
    tomb = next(h for h in headers if h.base_offset == 2)
    assert tomb.attributes & DELETE_HORIZON_MASK and tomb.base_timestamp == T0 + 10 + 1000
    assert records[1][1] == T0  # the record keeps its own timestamp (delta from the horizon)
    # Before the horizon nothing changes; after it, the tombstone goes.
    assert plog.next_delete_horizon_ms == T0 + 1010
    clean_log(plog, T0 + 500)
    assert [o for o, *_ in decode(read_all(plog))] == [1, 2, 3]
    stats = clean_log(plog, T0 + 1011)
    assert stats is not None and stats.tombstones_removed == 1
    assert [(o, k) for o, _, k, _ in decode(read_all(plog))] == [(1, b"b"), (3, b"c")]


def test_last_batch_of_a_producer_is_kept_empty(tmp_path):
    plog = PartitionLog.open(tmp_path / "c-0", compact_config(), now_ms=T0)
    plog.append(make_batch([(b"x", b"1")], producer_id=7, producer_epoch=0, base_sequence=0), now_ms=T0)
    plog.append(make_batch([(b"y", b"1"), (b"z", b"1")], producer_id=7, producer_epoch=0, base_sequence=1), now_ms=T0)
    plog.append(make_batch([(b"y", b"2"), (b"z", b"2"), (b"x", b"2")]), now_ms=T0)  # no producer id
    plog.roll(now_ms=T0)
    plog.append(make_batch(1), now_ms=T0)
    clean_log(plog, T0)
    headers = [h for _, h in iter_headers(read_all(plog))]
    # Producer 7's first batch is gone; its last survives empty with its sequence state.
    assert [(h.base_offset, h.record_count, h.producer_id) for h in headers[:2]] == [(1, 0, 7), (3, 3, -1)]
    empty = headers[0]
    assert (empty.last_offset_delta, empty.base_sequence, empty.last_sequence) == (1, 1, 2)
    # kafka-python reads the empty batch without complaint.
    assert [o for o, *_ in decode(read_all(plog))] == [3, 4, 5, 6]


def test_min_compaction_lag(tmp_path):
    plog = PartitionLog.open(tmp_path / "c-0", compact_config(min_compaction_lag_ms=60_000), now_ms=T0)
    for ts in (T0, T0 + 100_000):
        plog.append(make_batch([(b"k", b"1")], timestamp=ts), now_ms=ts)
        plog.append(make_batch([(b"k", b"2")], timestamp=ts), now_ms=ts)
        plog.roll(now_ms=ts)
    plog.append(make_batch(1), now_ms=T0 + 100_000)
    clean_log(plog, T0 + 100_000)
    # Only the first segment was old enough: it lost offset 0; offsets 2, 3 (young) stay.
    assert [o for o, *_ in decode(read_all(plog))] == [1, 2, 3, 4]


def test_reads_during_compaction_never_fail(tmp_path):
    rng = random.Random(3)
    plog = PartitionLog.open(tmp_path / "c-0", compact_config(segment_bytes=3000), now_ms=T0)
    write_history(plog, rng, 200, 8)
    stop = threading.Event()
    errors = []

    def reader():
        try:
            while not stop.is_set():
                offset = rng.randrange(plog.log_end_offset)
                data = plog.read(offset, 500)
                headers = [h for _, h in iter_headers(data, check_crc=True)]
                assert headers[0].last_offset >= offset
        except BaseException as exc:  # pragma: no cover
            errors.append(exc)

    thread = threading.Thread(target=reader)
    thread.start()
    try:
        for _ in range(5):
            write_history(plog, rng, 40, 8)
            clean_log(plog, T0, force=True)
    finally:
        stop.set()
        thread.join()
    assert not errors, errors[0]


def test_delete_policy_topics_are_not_compacted(tmp_path):
    plog = PartitionLog.open(tmp_path / "d-0", LogConfig(segment_bytes=200), now_ms=T0)
    for _ in range(5):
        plog.append(make_batch([(b"k", b"v")]), now_ms=T0)
    assert clean_log(plog, T0, force=True) is None
