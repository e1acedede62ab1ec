"""The topic registry (server/topics.py) and the Broker's topic operations on a real data
directory: the `__topics/<name>.json` format, lookups, and the commit points that keep a
crash from leaving a half-made or half-deleted topic behind."""

from __future__ import annotations

import json
import os
import uuid
from types import MappingProxyType

import pytest

from server.broker import Broker
from server.config import load_config
from server.errors import InvalidTopic, KafkaError, UnknownTopicOrPartition
from server.topics import TOPICS_DIR, TopicMeta, TopicRegistry, validate_topic_name
from storage import InvalidConfig
from wire.errors import ErrorCode
from wire.records import Record, build_batch, iter_records

T0 = 1_700_000_000_000
OFFSETS = "__consumer_offsets"


def make_broker(data_dir, **settings: str) -> Broker:
    overrides = {"log.dirs": str(data_dir), "listeners": "127.0.0.1:9092",
                 "offsets.topic.num.partitions": "1", **settings}
    broker = Broker(load_config(overrides=overrides, environ={}))
    broker.open()
    return broker


def crash(broker: Broker) -> None:
    """The process dies: no close(), no clean-shutdown marker, the flock goes with it."""
    broker.logs._release_lock()


def append(broker: Broker, topic: str, index: int, items: list[bytes]) -> None:
    records = [Record(offset=i, timestamp=T0 + i, key=None, value=v) for i, v in enumerate(items)]
    broker.partition(topic, index).log.append(build_batch(records), len(records), now_ms=T0)


def values(broker: Broker, topic: str, index: int) -> list[bytes | None]:
    plog = broker.partition(topic, index).log
    return [r.value for _header, data in plog.iter_batches(plog.log_start_offset) for r in iter_records(data)]


def partition_dirs(data_dir) -> list[str]:
    return sorted(p.name for p in data_dir.iterdir() if p.is_dir() and p.name not in (TOPICS_DIR, f"{OFFSETS}-0"))


def meta_file(data_dir, name: str):
    return data_dir / TOPICS_DIR / f"{name}.json"


@pytest.fixture
def data_dir(tmp_path):
    return tmp_path / "data"


@pytest.fixture
def broker(data_dir):
    broker = make_broker(data_dir)
    yield broker
    broker.close()


# ---- TopicRegistry ---------------------------------------------------------------------


def test_metadata_file_format(tmp_path):
    registry = TopicRegistry(tmp_path)
    topic_id = uuid.uuid4()
    registry.put(TopicMeta("orders", topic_id, 3, MappingProxyType({"retention.ms": "1000"}), T0))
    doc = json.loads(meta_file(tmp_path, "orders").read_text())
    assert doc == {"version": 1, "name": "orders", "topic_id": str(topic_id), "partitions": 3,
                   "configs": {"retention.ms": "1000"}, "created_ms": T0}  # no assignment: this broker
    registry.put(TopicMeta("placed", uuid.uuid4(), 2, assignment=MappingProxyType({0: (1, 2), 1: (2, 1)})))
    doc = json.loads(meta_file(tmp_path, "placed").read_text())
    assert doc["assignment"] == {"0": [1, 2], "1": [2, 1]}

    again = TopicRegistry(tmp_path)
    again.load()
    assert again["orders"] == registry["orders"]
    assert dict(again["orders"].configs) == {"retention.ms": "1000"}
    placed = again["placed"]
    assert placed.replicas(0, default=7) == [1, 2] and placed.replicas(1, default=7) == [2, 1]


def test_old_format_without_assignment_loads(tmp_path):
    (tmp_path / TOPICS_DIR).mkdir()
    topic_id = uuid.uuid4()
    meta_file(tmp_path, "old").write_text(json.dumps(
        {"version": 1, "name": "old", "topic_id": str(topic_id), "partitions": 2,
         "configs": {"cleanup.policy": "compact"}, "created_ms": T0}))
    registry = TopicRegistry(tmp_path)
    registry.load()
    meta = registry["old"]
    assert (meta.topic_id, meta.partitions, dict(meta.configs), meta.created_ms) == (
        topic_id, 2, {"cleanup.policy": "compact"}, T0)
    assert dict(meta.assignment) == {} and meta.replicas(1, default=3) == [3]


def test_put_replaces_the_file_atomically(tmp_path):
    registry = TopicRegistry(tmp_path)
    meta = TopicMeta("t", uuid.uuid4(), 1, created_ms=T0)
    registry.put(meta)
    path = meta_file(tmp_path, "t")
    with open(path, "rb") as before:
        registry.put(TopicMeta("t", meta.topic_id, 4, created_ms=T0))
        # A new file took the name: a reader of the old one still sees it whole.
        assert TopicMeta.from_json(before.read()).partitions == 1
    assert TopicMeta.from_json(path.read_bytes()).partitions == 4
    assert sorted(p.name for p in (tmp_path / TOPICS_DIR).iterdir()) == ["t.json"]  # no temp file left
    # A crash mid-write leaves `<name>.json.tmp` beside the old file: load keeps the old
    # one and clears the temp file away.
    tmp = path.with_name("t.json.tmp")
    tmp.write_bytes(b'{"version": 1, "name": "t", "par')
    registry = TopicRegistry(tmp_path)
    registry.load()
    assert registry["t"].partitions == 4 and not tmp.exists()


def test_lookups_by_name_and_by_id(tmp_path):
    registry = TopicRegistry(tmp_path)
    a = TopicMeta("a", uuid.uuid4(), 2)
    b = TopicMeta("b", uuid.uuid4(), 3)
    registry.put(a)
    registry.put(b)
    assert registry.get("a") is a and registry["b"] is b and registry.get("zzz") is None and registry.get(None) is None
    assert "a" in registry and "zzz" not in registry
    assert sorted(registry) == ["a", "b"] and len(registry) == 2
    assert dict(registry.items()) == {"a": a, "b": b} and sorted(m.name for m in registry.values()) == ["a", "b"]
    assert registry.name_for_id(a.topic_id) == "a" and registry.name_for_id(b.topic_id) == "b"
    assert registry.name_for_id(uuid.uuid4()) is None
    assert registry.total_partitions() == 5
    grown = TopicMeta("a", a.topic_id, 6)
    registry.put(grown)
    assert registry["a"] is grown and registry.name_for_id(a.topic_id) == "a" and registry.total_partitions() == 9
    assert registry.remove("a") is grown
    assert "a" not in registry and registry.name_for_id(a.topic_id) is None
    assert not meta_file(tmp_path, "a").exists()
    reloaded = TopicRegistry(tmp_path)
    reloaded.load()
    assert list(reloaded) == ["b"] and reloaded.name_for_id(b.topic_id) == "b"


def _good(name: str) -> dict:
    return {"version": 1, "name": name, "topic_id": str(uuid.uuid4()), "partitions": 1, "configs": {}}


UNREADABLE = {
    "truncated": b'{"version": 1, "na',
    "not-utf8": b"\xff\xfe{}",
    "future-version": json.dumps({**_good("future-version"), "version": 2}).encode(),
    "no-partitions": json.dumps({k: v for k, v in _good("no-partitions").items() if k != "partitions"}).encode(),
    "bad-uuid": json.dumps({**_good("bad-uuid"), "topic_id": "not-a-uuid"}).encode(),
    "other-name": json.dumps(_good("someone-else")).encode(),  # the file name must match
    "bad-name": json.dumps(_good("bad name")).encode(),
}


@pytest.mark.parametrize("content", list(UNREADABLE.values()), ids=list(UNREADABLE))
def test_unreadable_files_are_skipped(tmp_path, content):
    registry = TopicRegistry(tmp_path)
    registry.put(TopicMeta("fine", uuid.uuid4(), 1))
    meta_file(tmp_path, "broken").write_bytes(content)
    (tmp_path / TOPICS_DIR / "README").write_text("not a topic")
    registry = TopicRegistry(tmp_path)
    registry.load()
    assert list(registry) == ["fine"]
    assert meta_file(tmp_path, "broken").exists()  # left for a human to look at


NOT_AN_OBJECT = {
    "null": b"null",
    "list": b"[]",
    "null-configs": json.dumps({**_good("broken"), "configs": None}).encode(),
    "numeric-topic-id": json.dumps({**_good("broken"), "topic_id": 5}).encode(),
}


@pytest.mark.parametrize("content", list(NOT_AN_OBJECT.values()), ids=list(NOT_AN_OBJECT))
def test_wrongly_shaped_json_is_skipped(tmp_path, content):
    registry = TopicRegistry(tmp_path)
    registry.put(TopicMeta("fine", uuid.uuid4(), 1))
    meta_file(tmp_path, "broken").write_bytes(content)
    registry = TopicRegistry(tmp_path)
    registry.load()
    assert list(registry) == ["fine"]


def test_a_metadata_file_that_cannot_be_read_is_skipped(tmp_path):
    registry = TopicRegistry(tmp_path)
    registry.put(TopicMeta("fine", uuid.uuid4(), 1))
    meta_file(tmp_path, "broken").mkdir()  # read_bytes() raises IsADirectoryError
    registry = TopicRegistry(tmp_path)
    registry.load()
    assert list(registry) == ["fine"]


@pytest.mark.parametrize("name", ["", ".", "..", "a/b", "x" * 250, "sp ace", "caf\u00e9", None])
def test_invalid_names(name):
    with pytest.raises(InvalidTopic) as info:
        validate_topic_name(name)
    assert info.value.code == ErrorCode.INVALID_TOPIC_EXCEPTION


def test_valid_names():
    for name in ("x" * 249, "a.b_c-D9", "...", OFFSETS):
        validate_topic_name(name)


# ---- Broker topic operations --------------------------------------------------------


def test_create_then_reopen_keeps_id_configs_and_partitions(data_dir):
    broker = make_broker(data_dir)
    meta = broker.create_topic("orders", 3, {"retention.ms": "100000"})
    assert meta.partitions == 3 and dict(meta.configs) == {"retention.ms": "100000"} and meta.created_ms > 0
    assert broker.topic_config("orders").retention_ms == 100000
    assert broker.topic_name_for_id(meta.topic_id) == "orders"
    assert partition_dirs(data_dir) == ["orders-0", "orders-1", "orders-2"]
    assert meta_file(data_dir, "orders").exists()
    for index in range(3):
        append(broker, "orders", index, [b"v%d" % i for i in range(index + 1)])
    broker.close()

    broker = make_broker(data_dir)
    again = broker.topics["orders"]
    assert (again.topic_id, again.partitions, dict(again.configs), again.created_ms) == (
        meta.topic_id, 3, {"retention.ms": "100000"}, meta.created_ms)
    assert broker.topic_name_for_id(meta.topic_id) == "orders"
    assert broker.topic_config("orders").retention_ms == 100000
    assert broker.partition("orders", 2).log.config.retention_ms == 100000
    assert [values(broker, "orders", i) for i in range(3)] == [[b"v0"], [b"v0", b"v1"], [b"v0", b"v1", b"v2"]]
    assert broker.partition("orders", 2).topic_id == meta.topic_id
    with pytest.raises(UnknownTopicOrPartition):
        broker.partition("orders", 3)
    broker.close()


def test_invalid_names_are_refused_before_anything_is_written(broker, data_dir):
    for name in ("", "..", "a/b", "x" * 250, "sp ace"):
        with pytest.raises(InvalidTopic):
            broker.create_topic(name, 1)
    assert partition_dirs(data_dir) == [] and sorted(broker.topics) == [OFFSETS]


def test_duplicate_create(broker):
    meta = broker.create_topic("t", 1)
    with pytest.raises(KafkaError) as info:
        broker.create_topic("t", 2)
    assert info.value.code == ErrorCode.TOPIC_ALREADY_EXISTS
    assert broker.topics["t"] is meta and broker.topics["t"].partitions == 1


def test_bad_partition_counts_and_configs_create_nothing(broker, data_dir):
    with pytest.raises(KafkaError) as info:
        broker.create_topic("t", 0)
    assert info.value.code == ErrorCode.INVALID_PARTITIONS
    with pytest.raises(InvalidConfig):
        broker.create_topic("t", 1, {"retention.ms": "soon"})
    assert "t" not in broker.topics and partition_dirs(data_dir) == []
    assert not meta_file(data_dir, "t").exists()


def test_max_partitions_is_enforced(data_dir):
    broker = make_broker(data_dir, **{"trafka.max.partitions": "5"})  # __consumer_offsets has 1
    broker.create_topic("a", 3)
    with pytest.raises(KafkaError) as info:
        broker.create_topic("b", 2)
    assert info.value.code == ErrorCode.POLICY_VIOLATION
    with pytest.raises(KafkaError) as info:
        broker.create_partitions("a", 5)
    assert info.value.code == ErrorCode.POLICY_VIOLATION
    assert "b" not in broker.topics and broker.topics["a"].partitions == 3
    assert partition_dirs(data_dir) == ["a-0", "a-1", "a-2"]
    broker.create_partitions("a", 4)  # exactly the limit
    assert broker.total_partitions() == 5
    broker.close()


def test_create_partitions(data_dir):
    broker = make_broker(data_dir)
    meta = broker.create_topic("t", 1, {"segment.bytes": "100000"})
    for total in (1, 0):
        with pytest.raises(KafkaError) as info:
            broker.create_partitions("t", total)
        assert info.value.code == ErrorCode.INVALID_PARTITIONS
    with pytest.raises(UnknownTopicOrPartition):
        broker.create_partitions("nope", 3)
    grown = broker.create_partitions("t", 4)
    assert (grown.topic_id, grown.partitions) == (meta.topic_id, 4)
    assert broker.topics["t"] is grown and broker.total_partitions() == 5  # with __consumer_offsets
    assert partition_dirs(data_dir) == ["t-0", "t-1", "t-2", "t-3"]
    assert broker.partition("t", 3).log.config.segment_bytes == 100000  # the topic's config
    append(broker, "t", 3, [b"x"])
    broker.close()
    broker = make_broker(data_dir)
    assert broker.topics["t"].partitions == 4 and values(broker, "t", 3) == [b"x"]
    broker.close()


def test_alter_topic_configs_persists_and_reaches_the_logs(data_dir):
    broker = make_broker(data_dir, **{"log.retention.ms": "5000"})
    broker.create_topic("t", 2, {"segment.bytes": "100000"})
    assert broker.topic_config("t").retention_ms == 5000  # the broker default
    meta = broker.alter_topic_configs("t", {"retention.ms": "100", "cleanup.policy": "compact"})
    assert dict(meta.configs) == {"retention.ms": "100", "cleanup.policy": "compact"}
    config = broker.topic_config("t")
    assert config.retention_ms == 100 and config.compact
    assert config.segment_bytes != 100000  # the complete set: segment.bytes went back to its default
    assert all(broker.partition("t", i).log.config is config for i in range(2))
    assert json.loads(meta_file(data_dir, "t").read_text())["configs"] == {
        "retention.ms": "100", "cleanup.policy": "compact"}
    with pytest.raises(InvalidConfig):
        broker.alter_topic_configs("t", {"retention.ms": "soon"})
    assert broker.topic_config("t") is config and dict(broker.topics["t"].configs)["retention.ms"] == "100"
    with pytest.raises(UnknownTopicOrPartition):
        broker.alter_topic_configs("nope", {})
    with pytest.raises(UnknownTopicOrPartition):
        broker.topic_config("nope")
    broker.close()
    broker = make_broker(data_dir, **{"log.retention.ms": "5000"})
    assert broker.topic_config("t").retention_ms == 100 and broker.partition("t", 1).log.config.compact
    broker.close()


def test_a_stored_config_no_longer_valid_is_dropped_not_fatal(data_dir):
    broker = make_broker(data_dir)
    broker.create_topic("t", 1, {"segment.bytes": "100000"})
    broker.close()
    path = meta_file(data_dir, "t")
    doc = json.loads(path.read_text())
    doc["configs"]["retention.ms"] = "soon"
    path.write_text(json.dumps(doc))
    broker = make_broker(data_dir)
    config = broker.topic_config("t")
    assert config.segment_bytes == 100000 and config.retention_ms == broker.logs.defaults.retention_ms
    broker.close()


def test_delete_topic_removes_metadata_first_then_directories(broker, data_dir):
    meta = broker.create_topic("gone", 2)
    append(broker, "gone", 1, [b"x"])
    broker.create_topic("kept", 1)
    seen = []
    delete_logs = broker.logs.delete_logs

    def observed(topic):  # the real delete, noting what was on disk when it began
        seen.append((meta_file(data_dir, topic).exists(), (data_dir / f"{topic}-0").exists()))
        delete_logs(topic)

    broker.logs.delete_logs = observed
    broker.delete_topic("gone")
    assert seen == [(False, True)]  # the metadata file went first: the commit point
    assert partition_dirs(data_dir) == ["kept-0"]
    assert "gone" not in broker.topics and broker.topic_name_for_id(meta.topic_id) is None
    with pytest.raises(UnknownTopicOrPartition):
        broker.partition("gone", 0)
    with pytest.raises(UnknownTopicOrPartition):
        broker.topic_config("gone")
    with pytest.raises(UnknownTopicOrPartition):
        broker.delete_topic("gone")
    # The same name again: a new, empty topic with a new id.
    again = broker.create_topic("gone", 1)
    assert again.topic_id != meta.topic_id and values(broker, "gone", 0) == []


def test_crash_after_the_delete_commit_point_does_not_bring_the_topic_back(data_dir):
    broker = make_broker(data_dir)
    broker.create_topic("gone", 1)
    append(broker, "gone", 0, [b"x"])
    broker.topics.remove("gone")  # delete_topic's commit point, then the process dies
    crash(broker)
    broker = make_broker(data_dir)
    assert "gone" not in broker.topics
    assert broker.logs.recovered_cleanly is False
    [stray] = partition_dirs(data_dir)
    assert stray.startswith("gone-0.") and stray.endswith("-stray")
    broker.close()


def test_crash_before_the_create_commit_point_leaves_a_stray_set_aside(data_dir):
    broker = make_broker(data_dir)
    # create_topic writes the partition directories, then the metadata file; the
    # process dies in between.
    broker.logs.create_logs("half", range(2), broker.topic_defaults())
    append_to = broker.logs.log("half", 1)
    append_to.append(build_batch([Record(0, T0, None, b"orphan")]), now_ms=T0)
    crash(broker)
    broker = make_broker(data_dir)
    assert "half" not in broker.topics
    names = partition_dirs(data_dir)
    assert all(n.endswith("-stray") for n in names)
    assert sorted(n.split(".")[0] for n in names) == ["half-0", "half-1"]
    # The name is free, and the new topic starts empty; the stray keeps its data.
    broker.create_topic("half", 2)
    assert values(broker, "half", 1) == []
    [stray] = [n for n in names if n.startswith("half-1.")]
    assert any(p.stat().st_size for p in (data_dir / stray).glob("*.log"))
    broker.close()


def test_failed_metadata_write_removes_the_new_directories(broker, data_dir):
    meta_file(data_dir, "t").mkdir()  # the metadata file cannot be written
    with pytest.raises(OSError):
        broker.create_topic("t", 2)
    assert partition_dirs(data_dir) == [] and "t" not in broker.topics and broker.logs.logs("t") == []
    with pytest.raises(UnknownTopicOrPartition):
        broker.partition("t", 0)
    os.rmdir(meta_file(data_dir, "t"))
    broker.create_topic("t", 2)
    assert partition_dirs(data_dir) == ["t-0", "t-1"]


def test_failed_metadata_write_while_adding_partitions_adds_none(broker, data_dir):
    broker.create_topic("t", 1)
    tmp = meta_file(data_dir, "t").with_name("t.json.tmp")
    tmp.mkdir()  # atomic_write cannot make its temp file
    with pytest.raises(OSError):
        broker.create_partitions("t", 3)
    os.rmdir(tmp)
    assert broker.topics["t"].partitions == 1
    assert [p.name for p in broker.logs.logs("t")] == ["t-0"]
    assert partition_dirs(data_dir) == ["t-0"]


def test_longest_topic_name(data_dir):
    name = "x" * 249  # `<name>.json` is 254 bytes; its temp file must still fit NAME_MAX
    broker = make_broker(data_dir)
    meta = broker.create_topic(name, 1)
    broker.close()
    broker = make_broker(data_dir)
    assert broker.topics[name].topic_id == meta.topic_id
    broker.delete_topic(name)
    assert partition_dirs(data_dir) == [] and not meta_file(data_dir, name).exists()
    broker.close()


def test_old_metadata_file_opens_with_this_broker_as_the_replica(data_dir):
    broker = make_broker(data_dir)
    meta = broker.create_topic("old", 2)
    append(broker, "old", 0, [b"kept"])
    broker.close()
    path = meta_file(data_dir, "old")
    doc = json.loads(path.read_text())
    doc.pop("assignment", None)
    path.write_text(json.dumps(doc))
    broker = make_broker(data_dir)
    assert broker.topics["old"].topic_id == meta.topic_id
    assert broker.partition("old", 1).replicas == [broker.node_id]
    assert values(broker, "old", 0) == [b"kept"]
    broker.close()
