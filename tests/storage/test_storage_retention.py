"""Retention by time and size, whole segments only, through the LogManager."""

from __future__ import annotations

import os

from storage import LogConfig, LogManager
from storage_testkit import batch_with_size, decode, make_batch, read_all

T0 = 1_700_000_000_000
HOUR = 3600 * 1000


def manager(tmp_path, **defaults) -> LogManager:
    mgr = LogManager(tmp_path / "data", LogConfig(**defaults))
    mgr.open()
    return mgr


def create(mgr: LogManager, topic: str, partitions: int, configs: dict[str, str]) -> LogConfig:
    """What the broker does for a new topic: fresh logs under its explicit configs."""
    config = LogConfig.from_kafka(configs, mgr.defaults)
    mgr.create_logs(topic, range(partitions), config, now_ms=T0)
    return config


def test_retention_ms_deletes_old_closed_segments(tmp_path):
    mgr = manager(tmp_path)
    config = create(mgr, "t", 1, {"retention.ms": str(HOUR), "segment.bytes": "1000"})
    plog = mgr.log("t", 0)
    # Three segments of old records, then fresh ones.
    for i in range(9):
        plog.append(batch_with_size(300, timestamp=T0 - 3 * HOUR), now_ms=T0)
    for i in range(5):
        plog.append(batch_with_size(300, timestamp=T0), now_ms=T0)
    assert len(plog.segments) == 5
    assert mgr.run_retention(now_ms=T0) == 3
    assert plog.log_start_offset == 9
    assert [r[0] for r in decode(read_all(plog))] == list(range(9, 14))
    # Nothing else is old enough; without a high watermark (storage alone) the active
    # segment is never deleted.
    assert mgr.run_retention(now_ms=T0) == 0
    assert mgr.run_retention(now_ms=T0 + 2 * HOUR) == 1
    assert len(plog.segments) == 1 and plog.log_start_offset == 12
    assert plog.log_end_offset == 14
    # The log start offset survives a restart.
    mgr.close()
    mgr = manager(tmp_path)
    assert mgr.open_log("t", 0, config, now_ms=T0).log_start_offset == 12
    mgr.close()


def test_retention_ms_uses_mtime_without_timestamps(tmp_path):
    mgr = manager(tmp_path)
    create(mgr, "t", 1, {"retention.ms": str(HOUR), "segment.bytes": "500"})
    plog = mgr.log("t", 0)
    for _ in range(4):
        plog.append(batch_with_size(300, timestamp=-1), now_ms=T0)
    first = plog.segments[0]
    os.utime(first.log_path, (T0 / 1000 - 7200, T0 / 1000 - 7200))
    assert mgr.run_retention(now_ms=T0) == 1
    mgr.close()


def test_retention_bytes(tmp_path):
    mgr = manager(tmp_path)
    create(mgr, "t", 2, {"retention.bytes": "2500", "segment.bytes": "1000", "retention.ms": "-1"})
    plog = mgr.log("t", 1)
    for _ in range(20):
        plog.append(batch_with_size(300), now_ms=T0)
    # 7 segments of 900 bytes (the last 600): 6000 bytes; keep >= 2500 -> delete 3.
    assert mgr.run_retention(now_ms=T0) == 3
    assert sum(s.size for s in plog.segments) == 3300
    assert mgr.log("t", 0).log_end_offset == 0


def test_compact_delete_policy_applies_both(tmp_path):
    mgr = manager(tmp_path)
    create(mgr, "t", 1, {"cleanup.policy": "compact,delete", "retention.ms": str(HOUR),
                         "segment.bytes": "600", "min.cleanable.dirty.ratio": "0"})
    plog = mgr.log("t", 0)
    for i in range(12):
        ts = T0 - 2 * HOUR if i < 6 else T0
        plog.append(make_batch([(b"k%d" % (i % 3), b"v%d" % i + b"x" * 220)], timestamp=ts), now_ms=T0)
    assert mgr.run_retention(now_ms=T0) > 0
    assert mgr.run_compaction(now_ms=T0)
    records = decode(read_all(plog))
    assert all(ts == T0 for _, ts, _, _ in records)  # the old ones expired
    closed = [k for o, _, k, _ in records if o < plog.active.base_offset]
    assert len(closed) == len(set(closed))  # and the rest was compacted
    mgr.close()


def test_delete_policy_does_not_compact_and_compact_policy_does_not_expire(tmp_path):
    mgr = manager(tmp_path)
    create(mgr, "c", 1, {"cleanup.policy": "compact", "retention.ms": "1", "segment.bytes": "300"})
    plog = mgr.log("c", 0)
    for i in range(6):
        plog.append(make_batch([(b"k%d" % i, b"v")], timestamp=T0 - HOUR), now_ms=T0)
    assert mgr.run_retention(now_ms=T0) == 0
    assert plog.log_start_offset == 0
    mgr.close()


def test_delete_records_then_retention_removes_segments_below_start(tmp_path):
    mgr = manager(tmp_path)
    create(mgr, "t", 1, {"segment.bytes": "700", "retention.ms": "-1"})
    plog = mgr.log("t", 0)
    for _ in range(10):
        plog.append(batch_with_size(300), now_ms=T0)
    assert plog.delete_records_before(5) == 5
    assert plog.segments[0].base_offset == 4  # the segment holding offset 5 stays
    assert mgr.run_retention(now_ms=T0) == 0
    mgr.close()


def test_with_the_high_watermark_an_expired_active_segment_goes_too(tmp_path):
    """Kafka's rule (seen on Apache Kafka 4.4: "Rolled new log segment at offset 20" then
    "Deleting segment ... due to log retention time ... breach"): when every record of the
    partition is past retention.ms and the high watermark is at the log end, the active
    segment goes as well, a new empty one being rolled at the log end offset, which stays.
    Without the high watermark the last segment stayed forever."""
    mgr = manager(tmp_path)
    create(mgr, "t", 1, {"retention.ms": str(HOUR), "segment.bytes": "1000"})
    plog = mgr.log("t", 0)
    for _ in range(5):
        plog.append(batch_with_size(300, timestamp=T0 - 3 * HOUR), now_ms=T0)
    assert len(plog.segments) == 2 and plog.log_end_offset == 5
    assert mgr.run_retention(now_ms=T0, high_watermark=lambda _plog: 5) == 2
    assert plog.log_start_offset == plog.log_end_offset == 5
    assert [s.base_offset for s in plog.segments] == [5] and plog.active.size == 0
    assert read_all(plog) == b""
    # An empty active segment is never deleted; appends go on at the log end offset.
    assert mgr.run_retention(now_ms=T0 + 10 * HOUR, high_watermark=lambda _plog: 5) == 0
    plog.append(batch_with_size(300, timestamp=T0), now_ms=T0)
    assert [r[0] for r in decode(read_all(plog))] == [5]
    # The log start offset survives a restart.
    mgr.close()
    mgr = manager(tmp_path)
    assert mgr.open_log("t", 0, plog.config, now_ms=T0).log_start_offset == 5
    mgr.close()


def test_nothing_past_the_high_watermark_goes(tmp_path):
    """Kafka deletes a segment only once the high watermark has reached the next segment's
    base offset (the log end offset for the active one): records not yet replicated stay."""
    mgr = manager(tmp_path)
    create(mgr, "t", 1, {"retention.ms": str(HOUR), "segment.bytes": "1000"})
    plog = mgr.log("t", 0)
    for _ in range(8):  # segments at 0, 3, 6 (active): three batches fill one
        plog.append(batch_with_size(300, timestamp=T0 - 3 * HOUR), now_ms=T0)
    assert [s.base_offset for s in plog.segments] == [0, 3, 6]
    assert mgr.run_retention(now_ms=T0, high_watermark=lambda _plog: 2) == 0
    assert mgr.run_retention(now_ms=T0, high_watermark=lambda _plog: 5) == 1
    assert plog.log_start_offset == 3
    assert mgr.run_retention(now_ms=T0, high_watermark=lambda _plog: 7) == 1
    assert [s.base_offset for s in plog.segments] == [6] and plog.log_start_offset == 6
    assert mgr.run_retention(now_ms=T0, high_watermark=lambda _plog: 8) == 1
    assert plog.log_start_offset == plog.log_end_offset == 8
    mgr.close()


def test_retention_bytes_zero_empties_the_log_as_kafka_does(tmp_path):
    """retention.bytes=0: Kafka deletes while size - retention.bytes >= the segment's size,
    the active segment included once the high watermark is at the log end."""
    mgr = manager(tmp_path)
    create(mgr, "t", 1, {"retention.bytes": "0", "retention.ms": "-1", "segment.bytes": "1000"})
    plog = mgr.log("t", 0)
    for _ in range(4):
        plog.append(batch_with_size(300), now_ms=T0)
    assert mgr.run_retention(now_ms=T0) == 1  # storage alone: the closed segment only
    assert mgr.run_retention(now_ms=T0, high_watermark=lambda _plog: 4) == 1
    assert plog.log_start_offset == plog.log_end_offset == 4 and plog.active.size == 0
    mgr.close()
