"""The log-summary-checkpoint (storage.log_summary): after a clean shutdown the manager opens
no log until asked, yet knows each one's offsets and leader epoch; the summary is trusted
only with the clean-shutdown marker of the same close, a log never opened keeps its
recovery point and its place in the next summary, and deleting it removes its directory."""

from __future__ import annotations

import gc
import logging

from storage import LogConfig, LogManager
from storage.files import read_offset_checkpoint
from storage.log_summary import LOG_SUMMARY_CHECKPOINT, LogSummary, read_log_summary, write_log_summary
from storage.manager import RECOVERY_POINT_CHECKPOINT
from storage_testkit import crash, open_manager, make_batch, read_all

T0 = 1_700_000_000_000
CONFIG = LogConfig(index_interval_bytes=300)


def opened(data_dir) -> LogManager:
    return open_manager(data_dir, CONFIG)


def written(data_dir, partitions: int = 4, batches: int = 3) -> dict[int, bytes]:
    """A closed directory with `partitions` logs of topic t; partition p holds p * batches
    batches (partition 0 is empty), one segment roll each; epoch 5 from offset 0 of p1."""
    mgr = opened(data_dir)
    mgr.create_logs("t", range(partitions), CONFIG, now_ms=T0)
    mgr.log("t", 1).leader_epoch_cache.assign(5, 0)
    stored = {}
    for p in range(partitions):
        plog = mgr.log("t", p)
        for _ in range(p * batches):
            plog.append(make_batch(2, value_size=50), now_ms=T0, leader_epoch=5 if p == 1 else 0)
        plog.roll(now_ms=T0)
        stored[p] = read_all(plog)
    mgr.close()
    return stored


def test_a_clean_restart_opens_no_log_until_asked(tmp_path):
    data_dir = tmp_path / "data"
    stored = written(data_dir)
    assert read_log_summary(data_dir / LOG_SUMMARY_CHECKPOINT) == {
        ("t", 0): LogSummary(0, 0, None), ("t", 1): LogSummary(0, 6, 5),
        ("t", 2): LogSummary(0, 12, 0), ("t", 3): LogSummary(0, 18, 0)}
    mgr = opened(data_dir)
    assert not (data_dir / LOG_SUMMARY_CHECKPOINT).exists()  # never trusted twice
    stats = mgr.statistics()
    assert (stats["logs"], stats["logs_deferred"]) == (0, 4)
    assert mgr.deferred("t", 3) == LogSummary(0, 18, 0)
    assert sorted(mgr.deferred_keys()) == [("t", p) for p in range(4)]
    plog = mgr.open_log("t", 2, CONFIG)
    assert mgr.deferred("t", 2) is None
    assert (mgr.statistics()["logs"], mgr.statistics()["logs_deferred"]) == (1, 3)
    assert read_all(plog) == stored[2]
    assert plog.log_end_offset == 12 and plog.recovery_point == 12
    assert mgr.statistics()["recovery_segments_scanned"] == 0
    mgr.close()


def test_a_log_never_opened_keeps_its_recovery_point_and_its_summary(tmp_path):
    data_dir = tmp_path / "data"
    stored = written(data_dir)
    mgr = opened(data_dir)
    plog = mgr.open_log("t", 1, CONFIG)
    plog.append(make_batch(2, value_size=50), now_ms=T0, leader_epoch=5)
    mgr.flush_all()
    # The periodic checkpoint names the unopened logs at their end (they are fsynced there),
    # so a crash now does not scan them whole.
    assert mgr.checkpoint_recovery_points() == 4
    assert read_offset_checkpoint(data_dir / RECOVERY_POINT_CHECKPOINT) == {
        ("t", 0): 0, ("t", 1): 8, ("t", 2): 12, ("t", 3): 18}
    mgr.close()
    assert read_log_summary(data_dir / LOG_SUMMARY_CHECKPOINT) == {
        ("t", 0): LogSummary(0, 0, None), ("t", 1): LogSummary(0, 8, 5),
        ("t", 2): LogSummary(0, 12, 0), ("t", 3): LogSummary(0, 18, 0)}
    mgr = opened(data_dir)
    assert mgr.statistics()["logs_deferred"] == 4
    assert read_all(mgr.open_log("t", 3, CONFIG)) == stored[3]
    mgr.close()


def test_a_crash_after_a_clean_restart_recovers_from_the_checkpoint(tmp_path):
    data_dir = tmp_path / "data"
    stored = written(data_dir)
    mgr = opened(data_dir)
    mgr.checkpoint_recovery_points()  # the periodic one: unopened logs at their ends
    crash(mgr)
    mgr = opened(data_dir)
    assert mgr.recovered_cleanly is False
    assert mgr.statistics()["logs_deferred"] == 0  # no summary without the marker
    for p in range(4):
        assert read_all(mgr.open_log("t", p, CONFIG)) == stored[p]
    stats = mgr.statistics()
    # Every segment is below its recovery point: all 7 are trusted (3 with data), none is
    # scanned (a checkpoint without the unopened logs would have had them all scanned).
    assert (stats["recovery_segments_scanned"], stats["recovery_segments_trusted"]) == (0, 7), stats
    mgr.close()


def test_a_summary_without_the_marker_is_ignored_and_removed(tmp_path):
    data_dir = tmp_path / "data"
    written(data_dir)
    (data_dir / ".clean_shutdown").unlink()  # as if the process died after the summary
    mgr = opened(data_dir)
    assert mgr.recovered_cleanly is False
    assert mgr.statistics()["logs_deferred"] == 0
    assert not (data_dir / LOG_SUMMARY_CHECKPOINT).exists()
    mgr.close()


def test_a_malformed_summary_means_every_log_is_opened_as_before(tmp_path, caplog):
    data_dir = tmp_path / "data"
    stored = written(data_dir)
    (data_dir / LOG_SUMMARY_CHECKPOINT).write_text("0\n2\nt 0 0 0 -1\nt 1 9 3 0\n")  # start past end
    with caplog.at_level(logging.WARNING, logger="storage"):
        mgr = opened(data_dir)
    assert "ignoring unreadable checkpoint" in caplog.text and "impossible offsets" in caplog.text
    assert mgr.recovered_cleanly is True and mgr.statistics()["logs_deferred"] == 0
    assert read_all(mgr.open_log("t", 1, CONFIG)) == stored[1]
    mgr.close()


def test_deleting_an_unopened_log_removes_its_directory(tmp_path):
    data_dir = tmp_path / "data"
    written(data_dir)
    mgr = opened(data_dir)
    mgr.delete_logs("t", [1, 2])
    assert not (data_dir / "t-1").exists() and not (data_dir / "t-2").exists()
    assert sorted(mgr.deferred_keys()) == [("t", 0), ("t", 3)]
    mgr.close()
    assert sorted(read_log_summary(data_dir / LOG_SUMMARY_CHECKPOINT)) == [("t", 0), ("t", 3)]
    assert sorted(read_offset_checkpoint(data_dir / RECOVERY_POINT_CHECKPOINT)) == [("t", 0), ("t", 3)]


def test_directories_no_topic_claims_leave_the_summary(tmp_path):
    data_dir = tmp_path / "data"
    written(data_dir)
    mgr = opened(data_dir)
    assert mgr.set_aside_strays([("t", 0), ("t", 1)]) == ["t-2", "t-3"]
    assert sorted(mgr.deferred_keys()) == [("t", 0), ("t", 1)]
    mgr.close()


def test_the_recovery_point_checkpoint_of_many_logs_leaves_the_cyclic_gc_alone(tmp_path):
    """The checkpoint is written every log.flush.offset.checkpoint.interval.ms from
    a worker thread. Built from a copy of 100 000 (key, log) pairs, it made the cyclic
    collector run over and over while the GIL was held: 0.1-0.3 s without the event loop.
    Straight to strings (untracked), it triggers no collection however many logs there are."""
    data_dir = tmp_path / "data"
    data_dir.mkdir()
    n = 20_000
    write_log_summary(data_dir / LOG_SUMMARY_CHECKPOINT,
                      {(f"topic-{i // 1000}", i % 1000): LogSummary(0, i, 0) for i in range(n)})
    (data_dir / ".clean_shutdown").touch()
    mgr = opened(data_dir)
    assert mgr.statistics()["logs_deferred"] == n
    collections = []

    def count(phase, info):
        if phase == "start":
            collections.append(info["generation"])

    gc.collect()
    gc.callbacks.append(count)
    try:
        assert mgr.checkpoint_recovery_points() == n
    finally:
        gc.callbacks.remove(count)
    assert len(collections) <= 2, f"{len(collections)} collections while writing {n} entries"
    points = read_offset_checkpoint(data_dir / RECOVERY_POINT_CHECKPOINT)
    assert len(points) == n and points[("topic-19", 999)] == n - 1
    mgr.close()
