"""Kafka's recovery point: after a crash only the segments holding offsets at or past the
last checkpointed recovery point are scanned; a clean shutdown scans nothing; a missing or
garbled recovery-point-offset-checkpoint means a full scan (with a log line), not a crash."""

from __future__ import annotations

import logging

import pytest

from storage import LogConfig, LogManager
from storage.files import read_offset_checkpoint
from storage.manager import RECOVERY_POINT_CHECKPOINT
from storage_testkit import crash, open_manager, decode, make_batch, read_all

T0 = 1_700_000_000_000
CONFIG = LogConfig(index_interval_bytes=300)


def opened(data_dir) -> LogManager:
    return open_manager(data_dir, CONFIG)


def fill(mgr: LogManager, topic: str, segments: int, per_segment: int = 4) -> None:
    plog = mgr.log(topic, 0)
    for _ in range(segments):
        for _ in range(per_segment):
            plog.append(make_batch(3, value_size=100), now_ms=T0)
        plog.roll(now_ms=T0)


def base_offsets(mgr: LogManager, topic: str) -> list[int]:
    return [s.base_offset for s in mgr.log(topic, 0).segments]


@pytest.fixture
def crashed_with_tail(tmp_path):
    """10 flushed and checkpointed segments, then 3 more never fsynced, then a crash."""
    data_dir = tmp_path / "data"
    mgr = opened(data_dir)
    mgr.create_logs("t", [0], CONFIG, now_ms=T0)
    fill(mgr, "t", 10)
    mgr.flush_all()
    recovery_point = mgr.log("t", 0).recovery_point
    assert recovery_point == mgr.log("t", 0).log_end_offset == 120
    assert mgr.checkpoint_recovery_points() == 1
    assert read_offset_checkpoint(data_dir / RECOVERY_POINT_CHECKPOINT) == {("t", 0): 120}
    fill(mgr, "t", 3)
    bases = base_offsets(mgr, "t")
    stored = read_all(mgr.log("t", 0))
    crash(mgr)
    return data_dir, bases, stored


def test_crash_scans_only_segments_past_the_recovery_point(crashed_with_tail):
    data_dir, bases, stored = crashed_with_tail
    mgr = opened(data_dir)
    plog = mgr.open_log("t", 0, CONFIG, now_ms=T0)
    stats = mgr.statistics()
    # 10 segments below offset 120 are trusted; the three after it and the empty active
    # segment the last roll made are scanned.
    assert stats["recovery_segments_scanned"] == 4
    assert stats["recovery_segments_trusted"] == 10
    assert base_offsets(mgr, "t") == bases
    assert read_all(plog) == stored
    assert plog.recovery_point == 120  # recovered data counts as flushed only once fsynced
    mgr.flush_all()
    assert plog.recovery_point == plog.log_end_offset == 156
    mgr.close()
    assert read_offset_checkpoint(data_dir / RECOVERY_POINT_CHECKPOINT) == {("t", 0): 156}


def test_corruption_past_the_recovery_point_is_cut_below_kept(crashed_with_tail):
    data_dir, bases, stored = crashed_with_tail
    directory = data_dir / "t-0"
    # Damage a record in the 12th segment (offsets 132..143), past the recovery point.
    damaged = directory / f"{bases[11]:020d}.log"
    raw = bytearray(damaged.read_bytes())
    raw[200] ^= 0xFF
    damaged.write_bytes(bytes(raw))
    mgr = opened(data_dir)
    plog = mgr.open_log("t", 0, CONFIG, now_ms=T0)
    records = decode(read_all(plog))
    assert plog.log_end_offset < 144
    assert plog.log_end_offset >= 132  # the 11th segment (past the point, intact) survives
    assert [r[0] for r in records] == list(range(plog.log_end_offset))
    assert mgr.statistics()["recovery_bytes_truncated"] > 0
    assert not (directory / f"{bases[12]:020d}.log").exists()
    # Everything below the recovery point is served byte for byte as before.
    assert read_all(plog)[:len(stored)] == stored[:len(read_all(plog))]
    mgr.close()


def test_segments_below_the_recovery_point_are_not_scanned(crashed_with_tail):
    """Trusted means not read: a flipped byte in a record of a segment below the recovery
    point is still there after recovery (Kafka's trust, which is what makes a restart
    after a crash cost only the unflushed tail)."""
    data_dir, bases, stored = crashed_with_tail
    below = data_dir / "t-0" / f"{bases[2]:020d}.log"
    raw = bytearray(below.read_bytes())
    raw[-5] ^= 0xFF  # inside the last record's value: the index still points right
    below.write_bytes(bytes(raw))
    mgr = opened(data_dir)
    plog = mgr.open_log("t", 0, CONFIG, now_ms=T0)
    assert plog.log_end_offset == 156
    assert below.read_bytes() == bytes(raw)
    assert mgr.statistics()["recovery_segments_scanned"] == 4
    mgr.close()


def test_clean_shutdown_scans_nothing(tmp_path):
    data_dir = tmp_path / "data"
    mgr = opened(data_dir)
    mgr.create_logs("t", [0, 1], CONFIG, now_ms=T0)
    fill(mgr, "t", 5)
    plog = mgr.log("t", 0)
    plog.append(make_batch(3, value_size=100), now_ms=T0)  # the active segment holds data
    plog.append(make_batch(3, value_size=100), now_ms=T0 + 5)
    stored = read_all(plog)
    mgr.close()
    mgr = opened(data_dir)
    plog = mgr.open_log("t", 0, CONFIG, now_ms=T0)
    mgr.open_log("t", 1, CONFIG, now_ms=T0)
    stats = mgr.statistics()
    assert stats["recovery_segments_scanned"] == 0
    assert stats["recovery_segments_trusted"] == 7  # 6 of t-0, 1 of t-1
    assert plog.log_end_offset == 66 and plog.recovery_point == 66
    assert read_all(plog) == stored
    # The trusted active segment takes appends exactly as a scanned one would.
    assert plog.active.max_timestamp == 1_700_000_000_002
    plog.append(make_batch(2), now_ms=T0)
    assert [r[0] for r in decode(read_all(plog))] == list(range(68))
    mgr.close()


def test_hand_written_kafka_checkpoint_is_read(crashed_with_tail):
    data_dir, bases, _stored = crashed_with_tail
    # As Kafka's OffsetCheckpointFile writes it: version, count, "topic partition offset".
    (data_dir / RECOVERY_POINT_CHECKPOINT).write_text(f"0\n2\nother 3 7\nt 0 {bases[12]}\n")
    mgr = opened(data_dir)
    mgr.open_log("t", 0, CONFIG, now_ms=T0)
    assert mgr.statistics()["recovery_segments_scanned"] == 2  # the last full one and the active one
    assert mgr.statistics()["recovery_segments_trusted"] == 12
    mgr.close()


@pytest.mark.parametrize("content", [
    None,  # missing
    "0\n2\nt 0 120\n",  # count says 2, one line
    "1\n1\nt 0 120\n",  # unknown version
    "0\n1\nt zero 120\n",
    "\x00\xff garbage",
])
def test_missing_or_garbled_checkpoint_means_full_recovery(crashed_with_tail, caplog, content):
    data_dir, bases, stored = crashed_with_tail
    path = data_dir / RECOVERY_POINT_CHECKPOINT
    path.unlink()
    if content is not None:
        path.write_bytes(content.encode("latin-1"))
    with caplog.at_level(logging.WARNING, logger="storage"):
        mgr = opened(data_dir)
        plog = mgr.open_log("t", 0, CONFIG, now_ms=T0)
    assert mgr.statistics()["recovery_segments_scanned"] == len(bases)
    assert mgr.statistics()["recovery_segments_trusted"] == 0
    assert read_all(plog) == stored
    assert RECOVERY_POINT_CHECKPOINT in caplog.text
    if content is not None:
        assert "ignoring unreadable checkpoint" in caplog.text
    mgr.close()


def test_crash_after_a_flush_scans_nothing(tmp_path):
    """Flushed up to its end: even the active segment is trusted after a crash (its header
    walk past the last index entry ends at the recovery point), and unflushed appends
    after the checkpoint get it scanned again."""
    data_dir = tmp_path / "data"
    mgr = opened(data_dir)
    mgr.create_logs("t", [0, 1], CONFIG, now_ms=T0)
    fill(mgr, "t", 3)
    for partition in (0, 1):
        mgr.log("t", partition).append(make_batch(3, value_size=100), now_ms=T0)
    mgr.flush_all()
    mgr.checkpoint_recovery_points()
    mgr.log("t", 1).append(make_batch(3, value_size=100), now_ms=T0)  # past t-1's point
    stored = [read_all(mgr.log("t", p)) for p in (0, 1)]
    crash(mgr)
    mgr = opened(data_dir)
    logs = [mgr.open_log("t", p, CONFIG, now_ms=T0) for p in (0, 1)]
    assert mgr.statistics()["recovery_segments_scanned"] == 1  # t-1's active segment
    assert mgr.statistics()["recovery_segments_trusted"] == 4  # t-0: 3 rolled + the active one
    assert [read_all(plog) for plog in logs] == stored
    assert [plog.log_end_offset for plog in logs] == [39, 6]
    assert logs[0].append(make_batch(1), now_ms=T0)[0] == 39
    mgr.close()


def test_rolled_segments_are_flushed_under_policy_never(tmp_path):
    """Kafka flushes a segment once rolled, whatever the flush settings: the periodic flush
    (run_flush) does it here, and the recovery point follows the rolls."""
    data_dir = tmp_path / "data"
    mgr = opened(data_dir)
    mgr.create_logs("t", [0], CONFIG, now_ms=T0)
    plog = mgr.log("t", 0)
    assert plog.config.flush_policy == "never"
    fill(mgr, "t", 3)
    plog.append(make_batch(3), now_ms=T0)
    assert plog.recovery_point == 0
    assert mgr.run_flush(T0) == 1
    assert plog.recovery_point == 36 == plog.active.base_offset
    assert mgr.run_flush(T0) == 0  # only the active segment is dirty now
    mgr.checkpoint_recovery_points()
    crash(mgr)
    mgr = opened(data_dir)
    mgr.open_log("t", 0, CONFIG, now_ms=T0)
    assert mgr.statistics()["recovery_segments_scanned"] == 1
    assert mgr.statistics()["recovery_segments_trusted"] == 3
    mgr.close()


def test_scan_keeps_index_files_that_agree(tmp_path):
    """A scanned active segment whose index files agree with the scan (the time index
    with the final entry a clean close added; no offset index for a small segment) keeps
    them: no rewrite, no rename, which was most of recovering many small logs."""
    data_dir = tmp_path / "data"
    mgr = opened(data_dir)
    mgr.create_logs("t", [0], CONFIG, now_ms=T0)
    mgr.log("t", 0).append(make_batch(2), now_ms=T0)
    mgr.close()
    directory = data_dir / "t-0"
    time_index = directory / f"{0:020d}.timeindex"
    before = time_index.stat().st_ino
    assert not (directory / f"{0:020d}.index").exists()
    mgr = opened(data_dir)
    mgr.open_log("t", 0, CONFIG, now_ms=T0).append(make_batch(2), now_ms=T0)  # past the point
    mgr.checkpoint_recovery_points()
    crash(mgr)
    mgr = opened(data_dir)
    plog = mgr.open_log("t", 0, CONFIG, now_ms=T0)
    assert mgr.statistics()["recovery_segments_scanned"] == 1
    assert time_index.stat().st_ino == before
    assert not (directory / f"{0:020d}.index").exists()
    assert plog.log_end_offset == 4
    assert plog.offset_for_timestamp(1_700_000_000_001)[0] == 1
    mgr.close()


def test_flush_timer_visits_only_logs_with_unflushed_writes(tmp_path):
    """The flush timer (run_flush, twice a second) walked every log, 15 % of a
    100 000-partition broker's CPU under load. It now visits the logs some write made
    dirty, and forgets each once flushed; a log written again is visited again."""
    interval = LogConfig(index_interval_bytes=300, flush_policy="interval", flush_interval_ms=1000)
    assert interval.flush_policy == "interval"
    mgr = opened(tmp_path / "data")
    logs = [mgr.create_logs(f"t{i}", [0], interval, now_ms=T0)[0] for i in range(50)]
    assert mgr.statistics()["logs_dirty"] == 0
    for plog in logs[:2]:
        plog.append(make_batch(3), now_ms=T0)
    assert mgr.statistics()["logs_dirty"] == 2
    assert mgr.run_flush(T0 + 500) == 0  # flush.ms not reached: still dirty, still visited
    assert mgr.statistics()["logs_dirty"] == 2
    assert mgr.run_flush(T0 + 5000) == 2
    assert mgr.statistics()["logs_dirty"] == 0
    assert [plog.recovery_point for plog in logs[:2]] == [3, 3]
    logs[1].append(make_batch(2), now_ms=T0 + 5500)  # within flush.ms of the last flush
    assert mgr.statistics()["logs_dirty"] == 1
    assert mgr.run_flush(T0 + 9000) == 1
    assert logs[1].recovery_point == 5
    mgr.close()
