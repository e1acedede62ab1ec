"""Leader epochs in storage: the leader-epoch-checkpoint file as Kafka writes it, the
cache's semantics (Kafka's LeaderEpochFileCache), epochs stamped by appends, kept across
restarts and crashes, checked by recovery, and kept consistent by truncation, DeleteRecords
and retention."""

from __future__ import annotations

import os
import shutil
import struct
from pathlib import Path

import pytest

from storage import LogConfig, PartitionLog
from storage.leader_epoch import (
    LEADER_EPOCH_CHECKPOINT,
    UNDEFINED_EPOCH,
    EpochEntry,
    LeaderEpochCheckpointFile,
    LeaderEpochFileCache,
)
from storage.retention import apply_retention
from storage_testkit import decode, make_batch, read_all
from wire.records import PARTITION_LEADER_EPOCH, iter_headers

T0 = 1_700_000_000_000
CONFIG = LogConfig(segment_bytes=2_000, index_interval_bytes=300)


def cache_in(directory: Path, entries=()) -> LeaderEpochFileCache:
    cache = LeaderEpochFileCache.load(directory)
    for epoch, start in entries:
        cache.assign(epoch, start)
    return cache


def epochs_of(plog: PartitionLog) -> list[tuple[int, int]]:
    """(base offset, partitionLeaderEpoch) of every stored batch."""
    out = []
    for segment in plog.segments:
        data = os.pread(segment.fd, segment.size, 0)
        out += [(h.base_offset, h.partition_leader_epoch) for _, h in iter_headers(data)]
    return out


# ------------------------------------------------------------------ the checkpoint file


def test_checkpoint_file_is_byte_for_byte_kafkas(tmp_path):
    cache = cache_in(tmp_path, [(0, 0), (3, 120), (7, 5000)])
    # Kafka's CheckpointFile: version line, count line, "<epoch> <startOffset>" lines.
    assert (tmp_path / LEADER_EPOCH_CHECKPOINT).read_bytes() == b"0\n3\n0 0\n3 120\n7 5000\n"
    assert cache.epoch_entries() == [EpochEntry(0, 0), EpochEntry(3, 120), EpochEntry(7, 5000)]
    cache.clear()
    assert (tmp_path / LEADER_EPOCH_CHECKPOINT).read_bytes() == b"0\n0\n"


def test_checkpoint_file_as_kafka_wrote_it_is_read(tmp_path):
    (tmp_path / LEADER_EPOCH_CHECKPOINT).write_bytes(b"0\n2\n1 0\n4 77\n")
    cache = LeaderEpochFileCache.load(tmp_path)
    assert cache.epoch_entries() == [(1, 0), (4, 77)] and cache.latest_epoch == 4
    assert LeaderEpochCheckpointFile(tmp_path / "absent").read() is None
    (tmp_path / LEADER_EPOCH_CHECKPOINT).write_bytes(b"0\n3\n1 0\n")
    with pytest.raises(ValueError):
        LeaderEpochFileCache.load(tmp_path)


def test_checkpoint_is_replaced_atomically(tmp_path):
    cache = cache_in(tmp_path, [(0, 0)])
    cache.assign(1, 10)
    assert sorted(p.name for p in tmp_path.iterdir()) == [LEADER_EPOCH_CHECKPOINT]  # no .tmp left


# ------------------------------------------------------------------ cache semantics


def test_assign_follows_kafka():
    cache = LeaderEpochFileCache(None)
    assert cache.latest_epoch is None and cache.epoch_entries() == []
    assert cache.assign(2, 10)
    assert not cache.assign(2, 10)  # same epoch, same offset: nothing to do
    assert not cache.assign(2, 15)  # same epoch, later offset: the epoch started earlier
    assert cache.epoch_entries() == [(2, 10)]
    assert cache.assign(2, 8)  # same epoch, earlier offset: moved back
    assert cache.epoch_entries() == [(2, 8)]
    assert cache.assign(5, 20)
    assert cache.assign(6, 30)
    # An entry that is not monotonic removes what conflicts with it (Kafka's
    # maybeTruncateNonMonotonicEntries): epochs >= 5 or start offsets >= 25.
    assert cache.assign(5, 25)
    assert cache.epoch_entries() == [(2, 8), (5, 25)]
    assert cache.assign(7, 25)  # a new epoch at the same offset replaces the empty one
    assert cache.epoch_entries() == [(2, 8), (7, 25)]
    with pytest.raises(ValueError):
        cache.assign(-1, 3)
    with pytest.raises(ValueError):
        cache.assign(9, -1)


def test_end_offset_for_follows_kafka():
    cache = LeaderEpochFileCache(None, [EpochEntry(2, 10), EpochEntry(4, 20), EpochEntry(7, 35)])
    leo = 50
    assert cache.end_offset_for(UNDEFINED_EPOCH, leo) == (-1, -1)
    assert cache.end_offset_for(7, leo) == (7, leo)  # the latest: the log end offset
    assert cache.end_offset_for(4, leo) == (4, 35)  # start of the next epoch
    assert cache.end_offset_for(5, leo) == (4, 35)  # unknown in between: the one below it
    assert cache.end_offset_for(2, leo) == (2, 20)
    # Below the first known epoch Kafka answers the requested epoch with the first start
    # offset (the follower truncates to where the leader's log begins).
    assert cache.end_offset_for(1, leo) == (1, 10)
    assert cache.end_offset_for(8, leo) == (-1, -1)  # above every known epoch
    assert LeaderEpochFileCache(None).end_offset_for(0, leo) == (-1, -1)


def test_truncate_from_end_and_start():
    entries = [EpochEntry(1, 0), EpochEntry(3, 10), EpochEntry(4, 20)]
    cache = LeaderEpochFileCache(None, entries)
    cache.truncate_from_end(21)
    assert cache.epoch_entries() == entries  # nothing starts at or after 21
    cache.truncate_from_end(10)
    assert cache.epoch_entries() == [(1, 0)]

    cache = LeaderEpochFileCache(None, entries)
    cache.truncate_from_start(10)  # exclusive: the epoch starting at 10 stays as it is
    assert cache.epoch_entries() == [(3, 10), (4, 20)]
    cache.truncate_from_start(15)  # the epoch holding 15 now starts there
    assert cache.epoch_entries() == [(3, 15), (4, 20)]
    cache.truncate_from_start(5)
    assert cache.epoch_entries() == [(3, 15), (4, 20)]
    assert cache.epoch_for_offset(16) == 3 and cache.epoch_for_offset(20) == 4 and cache.epoch_for_offset(1) is None


# ------------------------------------------------------------------ the log


def test_append_stamps_the_epoch_and_assigns_before_writing(tmp_path):
    plog = PartitionLog.open(tmp_path, CONFIG, now_ms=T0)
    plog.append(make_batch(2), now_ms=T0)  # leader epoch 0 by default
    plog.append(make_batch(3), leader_epoch=2, now_ms=T0)
    plog.append(make_batch(1), leader_epoch=2, now_ms=T0)
    plog.append(make_batch(2) + make_batch(2), leader_epoch=5, now_ms=T0)  # the general path
    assert epochs_of(plog) == [(0, 0), (2, 2), (5, 2), (6, 5), (8, 5)]
    assert plog.leader_epoch_cache.epoch_entries() == [(0, 0), (2, 2), (5, 6)]
    assert (tmp_path / LEADER_EPOCH_CHECKPOINT).read_bytes() == b"0\n3\n0 0\n2 2\n5 6\n"
    assert plog.leader_epoch_cache.end_offset_for(2, plog.log_end_offset) == (2, 6)
    assert plog.leader_epoch_cache.end_offset_for(5, plog.log_end_offset) == (5, 10)
    with pytest.raises(ValueError):
        plog.append(make_batch(1), leader_epoch=3, now_ms=T0)  # a stale leader
    assert plog.log_end_offset == 10
    decode(read_all(plog))  # CRCs intact: the epoch is outside the CRC
    plog.close()


def test_epochs_survive_close_and_reopen(tmp_path):
    plog = PartitionLog.open(tmp_path, CONFIG, now_ms=T0)
    for epoch in (0, 0, 1, 3, 3, 3):
        plog.append(make_batch(4, value_size=100), leader_epoch=epoch, now_ms=T0)
    before = epochs_of(plog)
    plog.close()
    for clean in (True, False):
        plog = PartitionLog.open(tmp_path, CONFIG, clean=clean, now_ms=T0)
        assert epochs_of(plog) == before and plog.log_end_offset == 24
        assert plog.leader_epoch_cache.epoch_entries() == [(0, 0), (1, 8), (3, 12)]
        plog.close()
    plog = PartitionLog.open(tmp_path, CONFIG, now_ms=T0)
    plog.append(make_batch(1), leader_epoch=3, now_ms=T0)  # the fast path after a reopen
    assert epochs_of(plog)[-1] == (24, 3)
    plog.close()


def test_epochs_survive_a_crash(tmp_path):
    """Files copied while the log is open (never closed or flushed): what a crash leaves."""
    plog = PartitionLog.open(tmp_path / "live", CONFIG, now_ms=T0)
    for epoch in (0, 2, 2, 4):
        plog.append(make_batch(3, value_size=200), leader_epoch=epoch, now_ms=T0)
    shutil.copytree(tmp_path / "live", tmp_path / "crashed")
    plog.close()
    plog = PartitionLog.open(tmp_path / "crashed", CONFIG, now_ms=T0)
    assert plog.log_end_offset == 12
    assert [e for _, e in epochs_of(plog)] == [0, 2, 2, 4]
    assert plog.leader_epoch_cache.epoch_entries() == [(0, 0), (2, 3), (4, 9)]
    plog.close()


def test_a_crash_between_assign_and_write_leaves_no_epoch_past_the_end(tmp_path):
    plog = PartitionLog.open(tmp_path, CONFIG, now_ms=T0)
    plog.append(make_batch(3), leader_epoch=1, now_ms=T0)
    plog.close()
    cache_in(tmp_path).assign(2, 3)  # the checkpoint was written, the batch never was
    plog = PartitionLog.open(tmp_path, CONFIG, now_ms=T0)
    assert plog.leader_epoch_cache.epoch_entries() == [(1, 0)]
    plog.close()


def _stamp_epoch(directory: Path, batch_index: int, epoch: int) -> None:
    """Overwrite one stored batch's partitionLeaderEpoch (outside the CRC)."""
    for path in sorted(directory.glob("*.log")):
        data = path.read_bytes()
        for pos, _header in iter_headers(data):
            if batch_index == 0:
                with open(path, "r+b") as f:
                    f.seek(pos + PARTITION_LEADER_EPOCH)
                    f.write(struct.pack(">i", epoch))
                return
            batch_index -= 1
    raise AssertionError("no such batch")


def test_recovery_accepts_known_epochs_and_cuts_an_unknown_one(tmp_path):
    plog = PartitionLog.open(tmp_path, CONFIG, now_ms=T0)
    for epoch in (0, 1, 2, 2, 2, 2):
        plog.append(make_batch(2), leader_epoch=epoch, now_ms=T0)
    plog.close()
    assert cache_in(tmp_path).latest_epoch == 2
    _stamp_epoch(tmp_path, 3, 1)  # an older epoch the checkpoint knows: valid
    _stamp_epoch(tmp_path, 4, 5)  # the checkpoint knows 0..2 only: damage
    plog = PartitionLog.open(tmp_path, CONFIG, clean=False, now_ms=T0)
    assert plog.log_end_offset == 8
    assert [e for _, e in epochs_of(plog)] == [0, 1, 2, 1]
    assert plog.leader_epoch_cache.epoch_entries() == [(0, 0), (1, 2), (2, 4)]
    plog.close()


def test_recovery_cuts_a_negative_epoch(tmp_path):
    plog = PartitionLog.open(tmp_path, CONFIG, now_ms=T0)
    for _ in range(3):
        plog.append(make_batch(2), now_ms=T0)
    plog.close()
    _stamp_epoch(tmp_path, 1, -1)
    plog = PartitionLog.open(tmp_path, CONFIG, clean=False, now_ms=T0)
    assert plog.log_end_offset == 2
    plog.close()


def test_an_old_directory_migrates_to_epoch_zero(tmp_path):
    plog = PartitionLog.open(tmp_path, CONFIG, now_ms=T0)
    for _ in range(30):
        plog.append(make_batch(3, value_size=30), now_ms=T0)
    plog.delete_records_before(7)
    plog.close()
    # What the previous version left: epoch-0 batches and no checkpoint.
    (tmp_path / LEADER_EPOCH_CHECKPOINT).unlink()
    plog = PartitionLog.open(tmp_path, CONFIG, clean=False, now_ms=T0)
    assert plog.log_end_offset == 90 and plog.log_start_offset == 7
    assert plog.leader_epoch_cache.epoch_entries() == [(0, 7)]
    assert (tmp_path / LEADER_EPOCH_CHECKPOINT).read_bytes() == b"0\n1\n0 7\n"
    plog.append(make_batch(1), leader_epoch=1, now_ms=T0)
    plog.close()

    empty = tmp_path / "empty"
    plog = PartitionLog.open(empty, CONFIG, now_ms=T0)
    assert plog.leader_epoch_cache.epoch_entries() == []
    assert not (empty / LEADER_EPOCH_CHECKPOINT).exists()
    plog.close()


def test_truncation_keeps_the_cache_consistent(tmp_path):
    plog = PartitionLog.open(tmp_path, CONFIG, now_ms=T0)
    for epoch in (0, 0, 1, 1, 3, 3, 4):
        plog.append(make_batch(5, value_size=50), leader_epoch=epoch, now_ms=T0)
    assert plog.leader_epoch_cache.epoch_entries() == [(0, 0), (1, 10), (3, 20), (4, 30)]
    plog.truncate_to(22)  # a batch is removed whole: the end is 20
    assert plog.log_end_offset == 20
    assert plog.leader_epoch_cache.epoch_entries() == [(0, 0), (1, 10)]
    assert plog.leader_epoch_cache.end_offset_for(1, plog.log_end_offset) == (1, 20)
    plog.append(make_batch(2), leader_epoch=5, now_ms=T0)
    assert plog.leader_epoch_cache.epoch_entries() == [(0, 0), (1, 10), (5, 20)]
    plog.close()
    plog = PartitionLog.open(tmp_path, CONFIG, clean=False, now_ms=T0)
    assert plog.leader_epoch_cache.epoch_entries() == [(0, 0), (1, 10), (5, 20)]
    assert [e for _, e in epochs_of(plog)] == [0, 0, 1, 1, 5]
    # Fully (below the log start): no epoch holds data any more.
    plog.delete_records_before(12)
    plog.truncate_to(3)
    assert plog.log_start_offset == plog.log_end_offset == 3
    assert plog.leader_epoch_cache.epoch_entries() == []
    plog.append(make_batch(1), leader_epoch=6, now_ms=T0)
    assert plog.leader_epoch_cache.epoch_entries() == [(6, 3)]
    plog.close()


def test_delete_records_and_retention_move_the_first_epoch(tmp_path):
    plog = PartitionLog.open(tmp_path, CONFIG, now_ms=T0)
    for i in range(40):
        plog.append(make_batch(2, value_size=60), leader_epoch=i // 10, now_ms=T0)
    assert plog.leader_epoch_cache.epoch_entries() == [(0, 0), (1, 20), (2, 40), (3, 60)]
    plog.delete_records_before(25)
    assert plog.leader_epoch_cache.epoch_entries() == [(1, 25), (2, 40), (3, 60)]
    plog.config = LogConfig(segment_bytes=2_000, index_interval_bytes=300, retention_bytes=2_500)
    assert apply_retention(plog, T0) > 0
    start = plog.log_start_offset
    assert start > 25
    first = plog.leader_epoch_cache.earliest_entry
    assert first.start_offset == start and first.epoch == plog.leader_epoch_cache.epoch_for_offset(start)
    assert cache_in(tmp_path).epoch_entries() == plog.leader_epoch_cache.epoch_entries()
    plog.close()


# ------------------------------------------------------------------ bounded reads


def _offsets(data) -> list[int]:
    return [h.base_offset for _, h in iter_headers(bytes(data))]


def test_reads_stop_below_max_offset(tmp_path):
    plog = PartitionLog.open(tmp_path, CONFIG, now_ms=T0)
    for _ in range(40):
        plog.append(make_batch(3, value_size=40), now_ms=T0)  # batches at 0, 3, 6, ...
    assert len(plog.segments) > 3
    everything = 1 << 20
    assert _offsets(plog.read(0, everything, max_offset=9)) == [0, 3, 6]
    assert _offsets(plog.read(0, everything, max_offset=10)) == [0, 3, 6, 9]  # never split
    assert _offsets(plog.read(4, everything, max_offset=7)) == [3, 6]
    assert plog.read(9, everything, max_offset=9) == b""
    assert plog.read(12, everything, max_offset=3) == b""
    # The bound inside a later segment, reads segment by segment as before.
    offset, seen = 0, []
    while True:
        data = plog.read(offset, everything, max_offset=100)
        if not data:
            break
        seen += _offsets(data)
        offset = seen[-1] + 3
    assert seen == list(range(0, 100, 3))
    for (fd, position, length), expected in ((plog.read_location(0, everything, max_offset=9)[0], [0, 3, 6]),):
        assert _offsets(os.pread(fd, length, position)) == expected
    pinned = plog.read_pinned(3, everything, max_offset=12)
    segment, position, length = pinned
    try:
        assert _offsets(os.pread(segment.fd, length, position)) == [3, 6, 9]
    finally:
        segment.unpin()
    assert plog.read_pinned(30, everything, max_offset=30) is None
    assert plog.read_location(30, everything, max_offset=29) == []
    # Unbounded reads are unchanged.
    assert _offsets(plog.read(0, everything))[:4] == [0, 3, 6, 9]
    plog.close()


def test_max_offset_after_a_clean_reopen(tmp_path):
    """Segments opened from their indexes do not know their next offset at first."""
    plog = PartitionLog.open(tmp_path, CONFIG, now_ms=T0)
    for _ in range(40):
        plog.append(make_batch(3, value_size=40), now_ms=T0)
    plog.close()
    plog = PartitionLog.open(tmp_path, CONFIG, clean=True, now_ms=T0)
    assert _offsets(plog.read(0, 1 << 20, max_offset=5)) == [0, 3]
    assert _offsets(plog.read(0, 1 << 20, max_offset=6)) == [0, 3]
    plog.close()


def test_min_one_batch(tmp_path):
    plog = PartitionLog.open(tmp_path, CONFIG, now_ms=T0)
    plog.append(make_batch(5, value_size=100), now_ms=T0)
    plog.append(make_batch(1), now_ms=T0)
    first = len(make_batch(5, value_size=100))
    assert _offsets(plog.read(0, 10)) == [0]  # the first batch whatever its size
    assert plog.read(0, 10, min_one_batch=False) == b""
    assert plog.read_location(0, 10, min_one_batch=False) == []
    assert plog.read_pinned(0, 10, min_one_batch=False) is None
    assert _offsets(plog.read(0, first, min_one_batch=False)) == [0]
    assert _offsets(plog.read(0, 1 << 20, min_one_batch=False)) == [0, 5]
    (fd, position, length), = plog.read_location(0, first, min_one_batch=False)
    assert length == first
    plog.close()


# ------------------------------------------------------------------ follower appends


def test_append_as_follower_copies_offsets_and_epochs(tmp_path):
    leader = PartitionLog.open(tmp_path / "leader", CONFIG, now_ms=T0)
    for epoch in (0, 0, 2, 2, 3):
        leader.append(make_batch(3, value_size=30), leader_epoch=epoch, now_ms=T0)
    follower = PartitionLog.open(tmp_path / "follower", CONFIG, now_ms=T0)
    fetched = bytes(read_all(leader))
    first = len(make_batch(3, value_size=30))
    follower.append_as_follower(bytearray(fetched[:first]), now_ms=T0)  # one batch
    base, last, _ts, _start = follower.append_as_follower(bytearray(fetched[first:]), now_ms=T0)
    assert (base, last) == (3, 14)
    assert read_all(follower) == fetched  # byte for byte
    assert follower.leader_epoch_cache.epoch_entries() == leader.leader_epoch_cache.epoch_entries() == [
        (0, 0), (2, 6), (3, 12)]
    with pytest.raises(ValueError):  # a gap
        follower.append_as_follower(bytearray(fetched[:first]), now_ms=T0)
    follower.close()
    follower = PartitionLog.open(tmp_path / "follower", CONFIG, clean=False, now_ms=T0)
    assert read_all(follower) == fetched
    follower.close()
    leader.close()
