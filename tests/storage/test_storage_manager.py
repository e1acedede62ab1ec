"""LogManager: partition logs of a data directory, the directory lock, clean and unclean
shutdowns, strays, and the duties. Which topics exist is the server's topic registry
(tests/server/test_topic_registry.py); here the test plays the registry's part and tells
the manager which logs to open, create and delete."""

from __future__ import annotations

import pytest

from storage import LogConfig, LogManager, StorageError, UnknownTopicOrPartition
from storage_testkit import decode, make_batch, read_all

T0 = 1_700_000_000_000


@pytest.fixture
def data_dir(tmp_path):
    return tmp_path / "data"


def opened(data_dir, defaults: LogConfig | None = None) -> LogManager:
    mgr = LogManager(data_dir, defaults or LogConfig())
    mgr.open()
    return mgr


def test_logs_survive_close_and_reopen(data_dir):
    mgr = opened(data_dir)
    assert mgr.recovered_cleanly is True  # a new directory has nothing to distrust
    config = LogConfig.from_kafka({"retention.ms": "1000"})
    plogs = mgr.create_logs("orders", range(3), config, now_ms=T0)
    assert [p.name for p in plogs] == ["orders-0", "orders-1", "orders-2"]
    assert mgr.log("orders", 1).config.retention_ms == 1000
    for partition in range(3):
        mgr.log("orders", partition).append(make_batch(partition + 1), now_ms=T0)
    with pytest.raises(UnknownTopicOrPartition):
        mgr.log("orders", 3)
    with pytest.raises(UnknownTopicOrPartition):
        mgr.log("nope", 0)
    mgr.close()
    assert (data_dir / ".clean_shutdown").exists()
    assert sorted(p.name for p in data_dir.iterdir() if p.is_dir()) == ["orders-0", "orders-1", "orders-2"]

    mgr = opened(data_dir)
    assert mgr.recovered_cleanly is True
    assert not (data_dir / ".clean_shutdown").exists()
    assert mgr.logs() == []  # nothing is opened until someone asks
    for partition in range(3):
        mgr.open_log("orders", partition, config, now_ms=T0)
    assert mgr.open_log("orders", 0, config) is mgr.log("orders", 0)  # opened once
    assert [p.log_end_offset for p in mgr.logs("orders")] == [1, 2, 3]
    assert [r[0] for r in decode(read_all(mgr.log("orders", 2)))] == [0, 1, 2]
    mgr.close()


def test_logs_lists_in_partition_order(data_dir):
    mgr = opened(data_dir)
    mgr.create_logs("b", [2, 0, 1], LogConfig(), now_ms=T0)
    mgr.create_logs("a", [0], LogConfig(), now_ms=T0)
    assert [p.name for p in mgr.logs("b")] == ["b-0", "b-1", "b-2"]
    assert [p.name for p in mgr.logs()] == ["a-0", "b-0", "b-1", "b-2"]
    # What sweeps take: the same logs, unsorted (no sort of 100 000 on the event loop).
    assert sorted(p.name for p in mgr.all_logs()) == ["a-0", "b-0", "b-1", "b-2"]
    mgr.delete_logs("b", [1])
    assert sorted(p.name for p in mgr.all_logs()) == ["a-0", "b-0", "b-2"]
    mgr.close()


def test_crash_is_noticed(data_dir):
    mgr = opened(data_dir)
    mgr.create_logs("t", [0], LogConfig(), now_ms=T0)
    mgr.log("t", 0).append(make_batch(2), now_ms=T0)
    mgr.flush_all()
    mgr._release_lock()  # a crash: no close(), no clean-shutdown marker
    again = opened(data_dir)
    assert again.recovered_cleanly is False
    assert again.open_log("t", 0, LogConfig(), now_ms=T0).log_end_offset == 2
    again.close()
    assert opened(data_dir).recovered_cleanly is True


def test_new_directory_is_not_an_unclean_shutdown(data_dir):
    # Another broker part (the topic registry, meta.properties) may have written files
    # first; without partition directories there is still nothing to validate.
    (data_dir / "__topics").mkdir(parents=True)
    (data_dir / "meta.properties").write_text("version=1\n")
    mgr = opened(data_dir)
    assert mgr.recovered_cleanly is True
    mgr.close()


def test_open_is_required(data_dir):
    mgr = LogManager(data_dir)
    with pytest.raises(StorageError):
        mgr.open_log("t", 0, LogConfig())
    with pytest.raises(StorageError):
        mgr.create_logs("t", [0], LogConfig())


def test_data_dir_is_locked(data_dir):
    mgr = opened(data_dir)
    with pytest.raises(StorageError):
        opened(data_dir)
    mgr.close()
    opened(data_dir).close()  # released by close()


def test_create_logs_removes_leftovers_of_a_crashed_create(data_dir):
    leftover = data_dir / "t-0"
    leftover.mkdir(parents=True)
    (leftover / "00000000000000000000.log").write_bytes(b"half a batch")
    mgr = opened(data_dir)
    [plog] = mgr.create_logs("t", [0], LogConfig(), now_ms=T0)
    assert plog.log_end_offset == 0 and read_all(plog) == b""
    assert (leftover / "00000000000000000000.log").stat().st_size == 0
    mgr.close()


def test_create_logs_is_all_or_nothing(data_dir):
    data_dir.mkdir()
    (data_dir / "t-2").write_bytes(b"")  # a file where partition 2's directory must go
    mgr = opened(data_dir)
    with pytest.raises(OSError):
        mgr.create_logs("t", range(3), LogConfig(), now_ms=T0)
    assert mgr.logs() == []
    assert not (data_dir / "t-0").exists() and not (data_dir / "t-1").exists()
    with pytest.raises(UnknownTopicOrPartition):
        mgr.log("t", 0)
    mgr.close()


def test_delete_logs_removes_files(data_dir):
    mgr = opened(data_dir)
    mgr.create_logs("gone", range(2), LogConfig(), now_ms=T0)
    mgr.create_logs("kept", [0], LogConfig(), now_ms=T0)
    mgr.log("gone", 1).append(make_batch(1), now_ms=T0)
    mgr.delete_logs("gone")
    assert not (data_dir / "gone-0").exists() and not (data_dir / "gone-1").exists()
    with pytest.raises(UnknownTopicOrPartition):
        mgr.log("gone", 0)
    assert [p.name for p in mgr.logs()] == ["kept-0"]
    mgr.delete_logs("gone")  # nothing left: no error
    # The same name again: new, empty logs.
    [plog] = mgr.create_logs("gone", [0], LogConfig(), now_ms=T0)
    assert plog.log_end_offset == 0
    mgr.close()


def test_set_config_reaches_the_logs(data_dir):
    mgr = opened(data_dir, LogConfig(retention_ms=5000))
    config = LogConfig.from_kafka({"segment.bytes": "10000"}, mgr.defaults)
    mgr.create_logs("t", range(2), config, now_ms=T0)
    mgr.create_logs("other", [0], config, now_ms=T0)
    assert mgr.log("t", 1).config.retention_ms == 5000  # the default
    changed = LogConfig.from_kafka({"retention.ms": "100", "cleanup.policy": "compact"}, mgr.defaults)
    mgr.set_config("t", changed)
    assert all(p.config is changed for p in mgr.logs("t"))
    assert mgr.log("t", 1).config.compact and mgr.log("t", 1).config.retention_ms == 100
    assert mgr.log("other", 0).config is config
    mgr.close()


def test_strays_are_set_aside(data_dir):
    mgr = opened(data_dir)
    mgr.create_logs("t", [0], LogConfig(), now_ms=T0)
    mgr.log("t", 0).append(make_batch(1), now_ms=T0)
    mgr.close()
    (data_dir / "ghost-0").mkdir()  # e.g. a crash between directories and metadata
    (data_dir / "ghost-0" / "00000000000000000000.log").write_bytes(b"someone's data")
    (data_dir / "t-5").mkdir()  # beyond the partition count
    (data_dir / "old-0.abc-delete").mkdir()  # a delete that did not finish
    (data_dir / "older-0.abc-stray").mkdir()  # set aside before: stays as it is
    (data_dir / "__topics").mkdir()  # not a partition directory
    (data_dir / "lost+found").mkdir()
    mgr = opened(data_dir)
    assert sorted(mgr.set_aside_strays([("t", 0)])) == ["ghost-0", "t-5"]
    names = sorted(p.name for p in data_dir.iterdir())
    assert {"t-0", "older-0.abc-stray", "__topics", "lost+found"} <= set(names)
    assert not any(n in ("ghost-0", "t-5", "old-0.abc-delete") for n in names)
    strays = [n for n in names if n.endswith("-stray") and n != "older-0.abc-stray"]
    assert sorted(n.split(".")[0] for n in strays) == ["ghost-0", "t-5"]
    [ghost] = [n for n in strays if n.startswith("ghost-0.")]
    assert (data_dir / ghost / "00000000000000000000.log").read_bytes() == b"someone's data"  # never deleted
    assert mgr.open_log("t", 0, LogConfig(), now_ms=T0).log_end_offset == 1
    assert mgr.set_aside_strays([("t", 0)]) == []
    mgr.close()


def test_long_topic_names_set_aside_within_name_max(data_dir):
    name = "x" * 249
    (data_dir / f"{name}-0").mkdir(parents=True)
    mgr = opened(data_dir)
    assert mgr.set_aside_strays([]) == [f"{name}-0"]
    [stray] = [p.name for p in data_dir.iterdir() if p.is_dir()]
    assert stray.endswith("-stray") and len(stray) <= 255
    mgr.close()


def test_internal_topic_compaction_through_manager(data_dir):
    """__consumer_offsets style: many commits to few keys, cleaned by run_compaction."""
    mgr = opened(data_dir)
    config = LogConfig.from_kafka({"cleanup.policy": "compact", "segment.bytes": "2000"})
    mgr.create_logs("__consumer_offsets", [0], config, now_ms=T0)
    mgr.create_logs("plain", [0], LogConfig.from_kafka({"segment.bytes": "2000"}), now_ms=T0)
    plog = mgr.log("__consumer_offsets", 0)
    plain = mgr.log("plain", 0)
    for i in range(200):
        plog.append(make_batch([(b"group-%d" % (i % 4), b"offset=%d" % i)]), now_ms=T0)
        plain.append(make_batch([(b"group-%d" % (i % 4), b"offset=%d" % i)]), now_ms=T0)
    stats = mgr.run_compaction(now_ms=T0)
    assert list(stats) == ["__consumer_offsets-0"]  # cleanup.policy=delete is not compacted
    closed = [r for r in decode(read_all(plog)) if r[0] < plog.active.base_offset]
    assert len(closed) <= 4
    assert len(decode(read_all(plain))) == 200
    mgr.close()
    mgr = opened(data_dir)
    latest = {}
    for header, data in mgr.open_log("__consumer_offsets", 0, config, now_ms=T0).iter_batches():
        for offset, _ts, key, value in decode(data):
            latest[key] = value
    assert latest == {b"group-%d" % g: b"offset=%d" % (196 + g) for g in range(4)}
    mgr.close()
