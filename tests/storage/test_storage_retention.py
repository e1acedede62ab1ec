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
    # Nothing else is old enough.
    assert mgr.run_retention(now_ms=T0) == 0
    # The log start offset survives a restart.
    mgr.close()
    mgr = manager(tmp_path)
    assert mgr.open_log("t", 0, config, now_ms=T0).log_start_offset == 9
    mgr.close()


def test_retention_ms_deletes_the_active_segment_once_all_of_it_expired(tmp_path):
    """Kafka's deleteOldSegments: the active segment goes too when every record in it is
    past retention.ms (and below the high watermark); a new empty one is rolled at the log
    end offset first, so a quiet topic's records expire though no append rolled them."""
    mgr = manager(tmp_path)
    config = create(mgr, "t", 1, {"retention.ms": str(HOUR), "segment.bytes": "1000"})
    plog = mgr.log("t", 0)
    for _ in range(5):
        plog.append(batch_with_size(300, timestamp=T0), now_ms=T0)
    assert len(plog.segments) == 2
    assert mgr.run_retention(now_ms=T0 + HOUR) == 0  # not yet older than retention.ms
    # Past the high watermark nothing goes: a follower's, or a leader's before its ISR caught up.
    assert mgr.run_retention(now_ms=T0 + 2 * HOUR, high_watermark_of=lambda log: 3) == 1
    assert plog.log_start_offset == 3 and len(plog.segments) == 1
    assert mgr.run_retention(now_ms=T0 + 2 * HOUR, high_watermark_of=lambda log: 4) == 0
    assert mgr.run_retention(now_ms=T0 + 2 * HOUR, high_watermark_of=lambda log: None) == 0
    # Everything below the high watermark (the log end offset here): all of it goes.
    assert mgr.run_retention(now_ms=T0 + 2 * HOUR) == 1
    assert [s.base_offset for s in plog.segments] == [5]
    assert plog.log_start_offset == plog.log_end_offset == 5
    assert decode(read_all(plog)) == []
    # An empty active segment is kept; the log goes on where it was.
    assert mgr.run_retention(now_ms=T0 + 3 * HOUR) == 0
    assert plog.append(batch_with_size(300, timestamp=T0 + 3 * HOUR), now_ms=T0 + 3 * HOUR)[0] == 5
    assert [r[0] for r in decode(read_all(plog))] == [5]
    mgr.close()
    mgr = manager(tmp_path)
    reopened = mgr.open_log("t", 0, config, now_ms=T0)
    assert (reopened.log_start_offset, reopened.log_end_offset) == (5, 6)
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
