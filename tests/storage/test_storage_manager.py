"""LogManager: topics, partitions, configs, persistence, start-up and shutdown."""

from __future__ import annotations

import json
import uuid

import pytest

from storage import (
    InvalidConfig,
    InvalidPartitions,
    InvalidTopicName,
    LogConfig,
    LogManager,
    StorageError,
    TopicExists,
    UnknownTopicOrPartition,
)
from storage_testkit import decode, make_batch, read_all

T0 = 1_700_000_000_000


@pytest.fixture
def data_dir(tmp_path):
    return tmp_path / "data"


def opened(data_dir, defaults: LogConfig | None = None) -> LogManager:
    mgr = LogManager(data_dir, defaults or LogConfig())
    mgr.open(now_ms=T0)
    return mgr


def test_create_append_reopen(data_dir):
    mgr = opened(data_dir)
    topic_id = uuid.uuid4()
    meta = mgr.create_topic("orders", 3, {"retention.ms": "1000"}, topic_id=topic_id, now_ms=T0)
    assert (meta.name, meta.topic_id, meta.partitions, dict(meta.configs), meta.created_ms) == (
        "orders", topic_id, 3, {"retention.ms": "1000"}, T0)
    assert mgr.config("orders").retention_ms == 1000
    for partition in range(3):
        mgr.log("orders", partition).append(make_batch(partition + 1), now_ms=T0)
    with pytest.raises(TopicExists):
        mgr.create_topic("orders", 1)
    with pytest.raises(UnknownTopicOrPartition):
        mgr.log("orders", 3)
    with pytest.raises(UnknownTopicOrPartition):
        mgr.log("nope", 0)
    mgr.close()
    assert (data_dir / ".clean_shutdown").exists()
    stored = json.loads((data_dir / "__topics" / "orders.json").read_text())
    assert stored["topic_id"] == str(topic_id) and stored["configs"] == {"retention.ms": "1000"}

    mgr = opened(data_dir)
    assert mgr.recovered_cleanly is True
    assert not (data_dir / ".clean_shutdown").exists()
    assert mgr.topics["orders"].topic_id == topic_id
    assert [mgr.log("orders", p).log_end_offset for p in range(3)] == [1, 2, 3]
    assert [r[0] for r in decode(read_all(mgr.log("orders", 2)))] == [0, 1, 2]
    mgr.close()


def test_crash_is_noticed(data_dir):
    mgr = opened(data_dir)
    mgr.create_topic("t", 1)
    mgr.log("t", 0).append(make_batch(2), now_ms=T0)
    mgr.flush_all()
    mgr._release_lock()  # a crash: no close(), no clean-shutdown marker
    again = opened(data_dir)
    assert again.recovered_cleanly is False
    assert again.log("t", 0).log_end_offset == 2
    again.close()


def test_data_dir_is_locked(data_dir):
    mgr = opened(data_dir)
    with pytest.raises(StorageError):
        opened(data_dir)
    mgr.close()


def test_delete_topic_removes_files(data_dir):
    mgr = opened(data_dir)
    mgr.create_topic("gone", 2)
    plog = mgr.log("gone", 1)
    plog.append(make_batch(1), now_ms=T0)
    mgr.delete_topic("gone")
    assert not (data_dir / "gone-0").exists() and not (data_dir / "gone-1").exists()
    assert not (data_dir / "__topics" / "gone.json").exists()
    assert "gone" not in mgr.topics
    with pytest.raises(UnknownTopicOrPartition):
        mgr.log("gone", 0)
    with pytest.raises(UnknownTopicOrPartition):
        mgr.delete_topic("gone")
    # Same name again: a new, empty topic with a new id.
    meta = mgr.create_topic("gone", 1)
    assert mgr.log("gone", 0).log_end_offset == 0
    mgr.close()
    mgr = opened(data_dir)
    assert mgr.topics["gone"].topic_id == meta.topic_id
    mgr.close()


def test_create_partitions(data_dir):
    mgr = opened(data_dir)
    mgr.create_topic("t", 1)
    with pytest.raises(InvalidPartitions):
        mgr.create_partitions("t", 1)
    meta = mgr.create_partitions("t", 4)
    assert meta.partitions == 4
    mgr.log("t", 3).append(make_batch(1), now_ms=T0)
    mgr.close()
    mgr = opened(data_dir)
    assert mgr.topics["t"].partitions == 4
    assert mgr.log("t", 3).log_end_offset == 1
    mgr.close()


def test_alter_configs(data_dir):
    mgr = opened(data_dir, LogConfig(retention_ms=5000))
    mgr.create_topic("t", 2, {"segment.bytes": "10000"})
    assert mgr.config("t").retention_ms == 5000  # broker default
    mgr.alter_configs("t", {"retention.ms": "100", "cleanup.policy": "compact"}, incremental=True)
    assert mgr.config("t").retention_ms == 100 and mgr.config("t").segment_bytes == 10000
    assert mgr.log("t", 1).config.compact
    mgr.alter_configs("t", {"segment.bytes": None}, incremental=True)
    assert dict(mgr.topics["t"].configs) == {"retention.ms": "100", "cleanup.policy": "compact"}
    mgr.alter_configs("t", {"max.message.bytes": "2000"}, incremental=False)
    assert dict(mgr.topics["t"].configs) == {"max.message.bytes": "2000"}
    assert mgr.config("t").retention_ms == 5000
    with pytest.raises(InvalidConfig) as info:
        mgr.alter_configs("t", {"retention.ms": "soon"}, incremental=True)
    assert info.value.name == "retention.ms"
    with pytest.raises(InvalidConfig):
        mgr.alter_configs("t", {"no.such.config": None}, incremental=True)
    assert dict(mgr.topics["t"].configs) == {"max.message.bytes": "2000"}  # unchanged by failures
    mgr.close()
    mgr = opened(data_dir, LogConfig(retention_ms=5000))
    assert mgr.config("t").max_message_bytes == 2000
    mgr.close()


def test_invalid_creations(data_dir):
    mgr = opened(data_dir)
    for name in ("", ".", "..", "a/b", "x" * 250, "sp ace"):
        with pytest.raises(InvalidTopicName):
            mgr.create_topic(name, 1)
    with pytest.raises(InvalidPartitions):
        mgr.create_topic("t", 0)
    with pytest.raises(InvalidConfig):
        mgr.create_topic("t", 1, {"retention.ms": "-5"})
    assert "t" not in mgr.topics and not (data_dir / "t-0").exists()
    mgr.close()


def test_stray_directories_are_set_aside(data_dir):
    mgr = opened(data_dir)
    mgr.create_topic("t", 1)
    mgr.close()
    (data_dir / "ghost-0").mkdir()  # e.g. a crash between dirs and metadata
    (data_dir / "t-5").mkdir()  # beyond the partition count
    (data_dir / "old-0.abc-delete").mkdir()
    mgr = opened(data_dir)
    assert sorted(mgr.topics) == ["t"]
    names = sorted(p.name for p in data_dir.iterdir())
    assert not any(n in ("ghost-0", "t-5", "old-0.abc-delete") for n in names)
    assert sum(n.endswith("-stray") for n in names) == 2
    mgr.close()


def test_internal_topic_compaction_through_manager(data_dir):
    """__consumer_offsets style: many commits to few keys, cleaned by run_compaction."""
    mgr = opened(data_dir)
    mgr.create_topic("__consumer_offsets", 1, {"cleanup.policy": "compact", "segment.bytes": "2000"})
    plog = mgr.log("__consumer_offsets", 0)
    for i in range(200):
        plog.append(make_batch([(b"group-%d" % (i % 4), b"offset=%d" % i)]), now_ms=T0)
    stats = mgr.run_compaction(now_ms=T0)
    assert "__consumer_offsets-0" in stats
    closed = [r for r in decode(read_all(plog)) if r[0] < plog.active.base_offset]
    assert len(closed) <= 4
    mgr.close()
    mgr = opened(data_dir)
    latest = {}
    for header, data in mgr.log("__consumer_offsets", 0).iter_batches():
        for offset, _ts, key, value in decode(data):
            latest[key] = value
    assert latest == {b"group-%d" % g: b"offset=%d" % (196 + g) for g in range(4)}
    mgr.close()
