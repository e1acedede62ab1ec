"""A full disk (ENOSPC on a small tmpfs) or a file size limit (EFBIG via RLIMIT_FSIZE) during
append: LogDirFull, nothing half-written left behind, the log keeps working."""

from __future__ import annotations

import os
import resource

import pytest

from storage import LogConfig, LogDirFull, PartitionLog
from storage_testkit import batch_with_size, decode, read_all
from tests.tmpfs import mounted_tmpfs

T0 = 1_700_000_000_000


@pytest.fixture
def small_tmpfs(tmp_path):
    with mounted_tmpfs(tmp_path / "tmpfs", "256k") as mount_point:
        yield mount_point


def fill_until_full(plog: PartitionLog, size: int, limit: int = 10_000) -> tuple[int, LogDirFull]:
    for appended in range(limit):
        try:
            plog.append(batch_with_size(size), now_ms=T0)
        except LogDirFull as exc:
            return appended, exc
    raise AssertionError("the disk never filled up")


@pytest.mark.parametrize("policy", ["never", "always"])
def test_enospc_on_tmpfs(small_tmpfs, policy):
    config = LogConfig(segment_bytes=100_000, flush_policy=policy, index_interval_bytes=1000,
                       file_delete_delay_ms=0)
    plog = PartitionLog.open(small_tmpfs / "t-0", config, now_ms=T0)
    appended, exc = fill_until_full(plog, 7000)
    assert appended > 10
    assert plog.log_end_offset == appended
    # The failed batch was cut back: file sizes match what the log committed.
    for segment in plog.segments:
        assert os.path.getsize(segment.log_path) == segment.size
    assert [r[0] for r in decode(read_all(plog))] == list(range(appended))
    # Free space by deleting old segments, then appends work again.
    plog.delete_records_before(plog.log_end_offset - 5)
    plog.sweep()
    result = plog.append(batch_with_size(7000), now_ms=T0)
    assert result[0] == appended
    # A crash now recovers exactly what was acknowledged.
    expected = read_all(plog)
    plog.close()
    plog = PartitionLog.open(small_tmpfs / "t-0", config, clean=False, now_ms=T0)
    assert read_all(plog) == expected
    plog.close()


def test_partial_write_past_file_size_limit(tmp_path):
    config = LogConfig(segment_bytes=1 << 30)
    plog = PartitionLog.open(tmp_path / "t-0", config, now_ms=T0)
    for _ in range(3):
        plog.append(batch_with_size(1000), now_ms=T0)
    soft, hard = resource.getrlimit(resource.RLIMIT_FSIZE)
    # Room for half of the next batch: the kernel writes part of it, then refuses (EFBIG).
    resource.setrlimit(resource.RLIMIT_FSIZE, (3000 + 500, hard))
    try:
        with pytest.raises(LogDirFull):
            plog.append(batch_with_size(1000), now_ms=T0)
    finally:
        resource.setrlimit(resource.RLIMIT_FSIZE, (soft, hard))
    assert os.path.getsize(plog.active.log_path) == 3000 == plog.active.size
    assert plog.log_end_offset == 3
    assert plog.append(batch_with_size(1000), now_ms=T0)[0] == 3
    assert [r[0] for r in decode(read_all(plog))] == [0, 1, 2, 3]
    plog.close()
