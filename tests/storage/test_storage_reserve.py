"""Disk blocks reserved ahead of the active segment (trafka.preallocate.bytes, Kafka's
preallocate): reserved while a busy segment takes appends, never visible in the file size,
given back at roll, close and after a crash, and never in the way of a full disk."""

from __future__ import annotations

import errno
import os

import pytest

import storage.log
from storage import LogConfig, LogDirFull, PartitionLog
from storage.files import blocks_past_end
from storage.log import RESERVE_FROM
from storage_testkit import batch_with_size, decode, read_all
from tests.tmpfs import mounted_tmpfs

T0 = 1_700_000_000_000
KiB, MiB = 1024, 1024 * 1024
SLACK = 64 * KiB  # extent metadata and rounding, never a reservation


def fill(plog: PartitionLog, nbytes: int, size: int = 16 * KiB) -> int:
    """Append batches of ``size`` bytes until the active segment holds ``nbytes``."""
    count = 0
    while plog.active.size + size <= nbytes:
        plog.append(batch_with_size(size), now_ms=T0)
        count += 1
    return count


def check_readable(plog: PartitionLog) -> None:
    offsets = [offset for offset, *_ in decode(read_all(plog))]
    assert offsets == list(range(plog.log_start_offset, plog.log_end_offset))
    for segment in plog.segments:
        assert os.path.getsize(segment.log_path) == segment.size


def test_busy_segment_reserves_ahead_and_gives_it_back_at_roll(tmp_path):
    plog = PartitionLog.open(tmp_path / "t-0", LogConfig(segment_bytes=16 * MiB, preallocate_bytes=2 * MiB),
                             now_ms=T0)
    fill(plog, RESERVE_FROM - 16 * KiB)
    assert blocks_past_end(plog.active.fd) <= SLACK  # a quiet segment reserves nothing
    fill(plog, RESERVE_FROM + 16 * KiB)
    # Past RESERVE_FROM: as far ahead as the segment holds (1 MiB here), not the whole step.
    ahead = blocks_past_end(plog.active.fd)
    assert MiB - 64 * KiB <= ahead <= MiB + SLACK
    for target in (3 * MiB, 6 * MiB, 9 * MiB):
        fill(plog, target)
        assert blocks_past_end(plog.active.fd) <= 2 * MiB + SLACK  # at most trafka.preallocate.bytes
        assert os.fstat(plog.active.fd).st_size == plog.active.size  # the size is the data's
    assert blocks_past_end(plog.active.fd) > 0
    old = plog.active
    plog.roll(now_ms=T0)
    assert plog.active is not old
    assert blocks_past_end(old.fd) <= SLACK
    check_readable(plog)
    plog.close()
    reopened = PartitionLog.open(tmp_path / "t-0", plog.config, now_ms=T0, clean=False)
    check_readable(reopened)
    reopened.close()


def test_close_gives_reserved_blocks_back(tmp_path):
    plog = PartitionLog.open(tmp_path / "t-0", LogConfig(preallocate_bytes=4 * MiB), now_ms=T0)
    fill(plog, 3 * MiB)
    active = plog.active
    assert blocks_past_end(active.fd) > MiB
    path = active.log_path
    plog.close()
    fd = os.open(path, os.O_RDONLY)
    try:
        assert blocks_past_end(fd) <= SLACK
    finally:
        os.close(fd)


def test_blocks_a_crash_left_reserved_are_given_back_at_the_next_roll(tmp_path):
    config = LogConfig(preallocate_bytes=4 * MiB)
    crashed = PartitionLog.open(tmp_path / "t-0", config, now_ms=T0)
    fill(crashed, 3 * MiB)
    end = crashed.log_end_offset
    # No close: as after kill -9, the file keeps its reserved blocks.
    plog = PartitionLog.open(tmp_path / "t-0", config, now_ms=T0, clean=False)
    assert plog.log_end_offset == end
    assert blocks_past_end(plog.active.fd) > MiB
    old = plog.active
    plog.append(batch_with_size(16 * KiB), now_ms=T0)
    plog.roll(now_ms=T0)
    assert blocks_past_end(old.fd) <= SLACK
    check_readable(plog)
    plog.close()


def test_kafka_preallocate_reserves_whole_segments(tmp_path):
    config = LogConfig(preallocate=True, segment_bytes=4 * MiB)
    plog = PartitionLog.open(tmp_path / "t-0", config, now_ms=T0)
    plog.append(batch_with_size(16 * KiB), now_ms=T0)
    assert 4 * MiB - 64 * KiB <= blocks_past_end(plog.active.fd) <= 4 * MiB + SLACK
    fill(plog, 4 * MiB)
    plog.append(batch_with_size(16 * KiB), now_ms=T0)  # rolls: the new segment reserves all of itself
    first, second = plog.segments
    assert blocks_past_end(first.fd) <= SLACK
    assert 4 * MiB - 64 * KiB <= blocks_past_end(second.fd) <= 4 * MiB + SLACK
    check_readable(plog)
    plog.close()


@pytest.mark.parametrize("config", [LogConfig(preallocate_bytes=0), LogConfig(flush_policy="always")],
                         ids=["disabled", "fsync-always"])
def test_no_reservation(tmp_path, config):
    plog = PartitionLog.open(tmp_path / "t-0", config, now_ms=T0)
    fill(plog, 3 * MiB, size=64 * KiB)
    assert blocks_past_end(plog.active.fd) <= SLACK
    check_readable(plog)
    plog.close()


def test_config_change_takes_effect_on_the_active_segment(tmp_path):
    plog = PartitionLog.open(tmp_path / "t-0", LogConfig(preallocate_bytes=0), now_ms=T0)
    fill(plog, 2 * MiB)
    assert blocks_past_end(plog.active.fd) <= SLACK
    plog.config = LogConfig(preallocate_bytes=MiB)
    fill(plog, 2 * MiB + 32 * KiB)
    assert MiB - 64 * KiB <= blocks_past_end(plog.active.fd) <= MiB + SLACK
    plog.close()


def test_file_system_without_fallocate(tmp_path, monkeypatch):
    calls = []

    def refuse(fd, offset, length):
        calls.append((offset, length))
        raise OSError(errno.EOPNOTSUPP, os.strerror(errno.EOPNOTSUPP))

    monkeypatch.setattr(storage.log, "reserve_blocks", refuse)
    plog = PartitionLog.open(tmp_path / "t-0", LogConfig(segment_bytes=2 * MiB), now_ms=T0)
    fill(plog, 2 * MiB)
    plog.append(batch_with_size(16 * KiB), now_ms=T0)  # a roll, then more appends
    fill(plog, MiB + 256 * KiB)
    assert len(calls) == 1  # asked once, then the log appends without
    check_readable(plog)
    plog.close()


@pytest.fixture
def small_tmpfs(tmp_path):
    with mounted_tmpfs(tmp_path / "tmpfs", "3m") as mount_point:
        yield mount_point


def test_full_disk_stops_reserving_and_every_byte_is_still_usable(small_tmpfs):
    """A 3 MiB tmpfs: the reservation at 2 MiB (2 MiB more) does not fit; the appends go on
    into what is left, then fail with LogDirFull, and everything acknowledged reads back."""
    config = LogConfig(segment_bytes=64 * MiB, file_delete_delay_ms=0)
    plog = PartitionLog.open(small_tmpfs / "t-0", config, now_ms=T0)
    appended = fill(plog, 2 * MiB + 256 * KiB)
    assert plog.active.reserved == 64 * MiB  # the reservation at 2 MiB failed: no more attempts
    with pytest.raises(LogDirFull):
        for _ in range(1000):
            plog.append(batch_with_size(16 * KiB), now_ms=T0)
            appended += 1
    assert plog.log_end_offset == appended
    assert plog.active.size > 2 * MiB + 512 * KiB  # the failed reservation left the space usable
    check_readable(plog)
    plog.close()
