"""Segment files opened lazily and closed when idle (storage.open_files, log.open.files.max):
a segment closed for idleness reads and takes appends again with identical bytes, the
process's descriptor count stays bounded however many partitions are used, and running out
of descriptors is a typed StorageError with a log line, after which the log works again."""

from __future__ import annotations

import logging
import os
import resource

import pytest

from storage import LogConfig, LogManager, StorageError
from storage.open_files import OPEN_FILES, TooManyOpenFiles
from storage_testkit import decode, make_batch, read_all

T0 = 1_700_000_000_000
CONFIG = LogConfig(index_interval_bytes=300)


@pytest.fixture(autouse=True)
def default_limit_afterwards():
    # Logs of other tests (crash simulations) may have left descriptors registered.
    OPEN_FILES.evict_idle(len(OPEN_FILES))
    yield
    OPEN_FILES.set_limit(None)


def fd_count() -> int:
    return len(os.listdir("/proc/self/fd"))


def opened(data_dir, max_open: int | None) -> LogManager:
    mgr = LogManager(data_dir, CONFIG, max_open_files=max_open)
    mgr.open()
    return mgr


def open_segments(mgr: LogManager) -> int:
    return sum(1 for plog in mgr.logs() for segment in plog.segments if segment.is_open)


def test_segment_closed_for_idleness_reads_and_appends_again(tmp_path):
    mgr = opened(tmp_path / "data", max_open=2)
    plogs = mgr.create_logs("t", range(5), CONFIG, now_ms=T0)
    for n, plog in enumerate(plogs):
        for i in range(n + 1):
            plog.append(make_batch([(b"p%d" % n, b"v%d-%d" % (n, i))]), now_ms=T0)
    assert open_segments(mgr) <= 2
    written = [read_all(plog) for plog in plogs]
    assert mgr.statistics()["segment_files_closed_idle"] >= 3
    # Every partition's file was closed at some point above; each reads back the same.
    for n, plog in enumerate(plogs):
        assert read_all(plog) == written[n]
        assert [r[3] for r in decode(written[n])] == [b"v%d-%d" % (n, i) for i in range(n + 1)]
        assert open_segments(mgr) <= 2
    # Appends to closed segments land after what is there, at the right offsets.
    for n, plog in enumerate(plogs):
        assert not plog.active.is_open or n >= 3
        assert plog.append(make_batch([(b"again", b"x%d" % n)]), now_ms=T0)[0] == n + 1
    for n, plog in enumerate(plogs):
        data = read_all(plog)
        assert data[:len(written[n])] == written[n]
        assert [r[0] for r in decode(data)] == list(range(n + 2))
        assert decode(data)[-1][3] == b"x%d" % n
    assert open_segments(mgr) <= 2
    mgr.close()
    # Clean restart: the same bytes again (the closed files were not damaged).
    mgr = opened(tmp_path / "data", max_open=2)
    for n in range(5):
        plog = mgr.open_log("t", n, CONFIG, now_ms=T0)
        assert [r[0] for r in decode(read_all(plog))] == list(range(n + 2))
    assert mgr.statistics()["recovery_segments_scanned"] == 0
    mgr.close()


def test_readers_pin_open_files(tmp_path):
    """A segment a reader holds (a Fetch's sendfile region) is never closed for idleness."""
    mgr = opened(tmp_path / "data", max_open=1)
    a, b = mgr.create_logs("t", range(2), CONFIG, now_ms=T0)
    a.append(make_batch(3), now_ms=T0)
    b.append(make_batch(3), now_ms=T0)
    segment, position, length = a.read_pinned(0, 1 << 20)
    fd = segment.fd
    for _ in range(3):
        assert decode(b.read(0, 1 << 20))  # opens b's file: a's cannot make room
    assert segment.is_open and segment.fd == fd
    assert decode(os.pread(fd, length, position))[0][0] == 0
    segment.unpin()
    b.append(make_batch(1), now_ms=T0)  # needs b's file, which is open: nothing to do
    assert decode(a.read(0, 1 << 20))  # reopens a's; b's, idle now, makes room
    assert open_segments(mgr) == 1
    mgr.close()


def test_descriptors_stay_bounded_with_1000_partitions(tmp_path):
    mgr = opened(tmp_path / "data", max_open=50)
    before = fd_count()
    plogs = mgr.create_logs("t", range(1000), CONFIG, now_ms=T0)
    peak = fd_count()
    for round_ in range(3):
        for n, plog in enumerate(plogs):
            plog.append(make_batch([(b"k", b"%d-%d" % (n, round_))]), now_ms=T0)
            if n % 97 == 0:
                peak = max(peak, fd_count())
        for n, plog in enumerate(plogs):
            assert decode(plog.read(round_, 1 << 20))[0][3] == b"%d-%d" % (n, round_)
            if n % 97 == 0:
                peak = max(peak, fd_count())
    # 50 segment files, plus the odd index or checkpoint file being written.
    assert peak - before <= 55, (before, peak)
    assert mgr.statistics()["open_segment_files"] <= 50
    mgr.close()
    assert fd_count() <= before


def test_a_clean_restart_opens_no_segment_file_of_an_empty_partition(tmp_path):
    """After a clean shutdown an empty active segment is trusted without opening
    its .log (there is no tail to walk), so a restart of 100 000 quiet partitions costs no
    descriptors; one with data past its last index entry is opened to walk that tail, and
    the empty ones still take appends and serve them after the restart."""
    mgr = opened(tmp_path / "data", max_open=None)
    mgr.create_logs("t", range(20), CONFIG, now_ms=T0)
    mgr.log("t", 0).append(make_batch([(b"k", b"v")]), now_ms=T0)
    mgr.close()
    mgr = opened(tmp_path / "data", max_open=None)
    plogs = [mgr.open_log("t", p, CONFIG, now_ms=T0) for p in range(20)]
    assert mgr.recovered_cleanly
    assert open_segments(mgr) == 1
    assert [plog.log_end_offset for plog in plogs] == [1] + [0] * 19
    assert plogs[5].append(make_batch([(b"k", b"five")]), now_ms=T0)[0] == 0
    assert decode(plogs[5].read(0, 1 << 20))[0][3] == b"five"
    assert decode(plogs[0].read(0, 1 << 20))[0][3] == b"v"
    mgr.close()


@pytest.fixture
def low_nofile():
    """Lower this process's soft RLIMIT_NOFILE to a little above what is open now."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)

    def lower(headroom: int) -> int:
        limit = fd_count() + headroom
        resource.setrlimit(resource.RLIMIT_NOFILE, (limit, hard))
        return limit

    yield lower
    resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))


def test_out_of_descriptors_is_a_storage_error_and_passes(tmp_path, low_nofile, caplog):
    # The LRU's own bound is far above the process limit here: the operating system's
    # EMFILE is what is hit, and idle segment files are closed to retry.
    mgr = opened(tmp_path / "data", max_open=10_000)
    plogs = mgr.create_logs("t", range(40), CONFIG, now_ms=T0)
    for plog in plogs:
        plog.append(make_batch(1), now_ms=T0)
    OPEN_FILES.evict_idle(len(OPEN_FILES))
    low_nofile(30)
    for plog in plogs:  # 40 files needed, ~30 descriptors to be had: closing idle ones does it
        plog.append(make_batch(1), now_ms=T0)
        assert decode(plog.read(0, 1 << 20))
    OPEN_FILES.evict_idle(len(OPEN_FILES))
    hogs = []
    try:
        with caplog.at_level(logging.ERROR, logger="storage"):
            while True:  # take every descriptor left
                try:
                    hogs.append(os.open(os.devnull, os.O_RDONLY))
                except OSError:
                    break
            with pytest.raises(TooManyOpenFiles) as raised:
                plogs[0].append(make_batch(1), now_ms=T0)
            assert isinstance(raised.value, StorageError)  # KAFKA_STORAGE_ERROR for clients
            with pytest.raises(StorageError):
                plogs[1].read(0, 1 << 20)
        assert "cannot open" in caplog.text and "Too many open files" in caplog.text
    finally:
        for fd in hogs:
            os.close(fd)
    # Nothing was appended by the failed call; the log carries on where it was.
    assert plogs[0].log_end_offset == 2
    assert plogs[0].append(make_batch(1), now_ms=T0)[0] == 2
    assert [r[0] for r in decode(read_all(plogs[0]))] == [0, 1, 2]
    assert [r[0] for r in decode(read_all(plogs[1]))] == [0, 1]
    mgr.close()


def test_a_segment_whose_path_now_holds_another_file_is_not_reopened(tmp_path):
    """Compaction swaps a cleaned .log onto a segment's name and a full truncation recreates
    one at the same offset: a segment closed for idleness and retired must not reopen that
    new file by its path and serve its bytes as its own (a reader with the old segment list
    then sees it gone, as for a deleted file)."""
    mgr = opened(tmp_path / "data", max_open=1)
    first, second = mgr.create_logs("t", range(2), CONFIG, now_ms=T0)
    first.append(make_batch([(b"k", b"old")]), now_ms=T0)
    second.append(make_batch([(b"k", b"other")]), now_ms=T0)
    segment = first.segments[0]
    assert not segment.is_open  # closed for idleness when the second log's file opened
    replacement = tmp_path / "replacement.log"
    replacement.write_bytes(bytes(make_batch([(b"k", b"new")])))
    os.replace(replacement, segment.log_path)
    assert segment.pin() is False
    with pytest.raises(FileNotFoundError):
        segment.fd
