"""MirrorMaker 2, unmodified, between two brokers: topics, their configs and a consumer
group's offsets replicated, and the group moved to the target.

MirrorMaker 2 is Kafka's own dedicated driver (`org.apache.kafka.connect.mirror.MirrorMaker
mm2.properties`, connect-mirror of the `connect` classpath in .ci/jvm/pom.xml), a JVM with a
bounded heap. Each scenario runs it between two brokers of its own and does what a
migration does (docs/operations/migrating-with-mirrormaker2.md):

1. on the source: a topic with configs of its own, records with keys, headers and
   timestamps, and a consumer group that read them and committed;
2. MirrorMaker 2 starts: the topic is created on the target with the source's partitions
   and configs, the records are replicated, the group's offsets are translated
   (checkpoints) and written to the target's group (sync.group.offsets.enabled);
3. more records are produced on the source while MirrorMaker 2 runs;
4. MirrorMaker 2 is stopped (the cut-over) and the group resumes on the target: it reads
   exactly the records it had not read on the source -- nothing lost, nothing twice. (The
   offsets MirrorMaker 2 translates are exact for a group that had read everything
   replicated; it promises no more than "at or before the group's position" otherwise.)
   The target's copy of the topic equals the source's record for record.

Pairs (target = the broker kind of the matrix column):
- `test_migration_from_kafka`: Apache Kafka -> the target, with IdentityReplicationPolicy
  (topic names kept: a one-way migration). On Trafka this is the migration story; on Kafka
  the reference.
- `test_replication_between_two_clusters`: a second broker of the target's own kind ->
  the target, with the default replication policy (remote topics named "source.<topic>").
Single brokers stand in for clusters here; with TRAFKA_LONG_TESTS=1 the same runs from
Kafka's three-broker ZooKeeper cluster to Trafka's.
"""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

from compat_tests.helpers import unique_name
from compat_tests.jvm_apps.connect import MirrorMakerProcess
from compat_tests.jvm_apps.topics import (Rec, committed, consume_group, create_topics, end_offsets,
                                          partitions, produce, read_all, topic_configs)

LONG = os.environ.get("TRAFKA_LONG_TESTS", "") not in ("", "0")
PARTITIONS = 3
PER_PARTITION = 200 if LONG else 40  # records per partition in each of the two phases
SETTLE_S = 120.0
# Topic configs set on the source that MirrorMaker 2 copies (none is on its exclude list).
TOPIC_CONFIGS = {"retention.ms": "86400000", "max.message.bytes": "300000", "cleanup.policy": "delete"}
DEFAULT_POLICY = "org.apache.kafka.connect.mirror.DefaultReplicationPolicy"
IDENTITY_POLICY = "org.apache.kafka.connect.mirror.IdentityReplicationPolicy"

pytestmark = [pytest.mark.compat(client="mirrormaker2"), pytest.mark.timeout(600 if LONG else 300)]


def mm2_settings(source: str, target: str, topic: str, group: str, policy: str) -> dict[str, str]:
    """mm2.properties for one flow source -> target, every interval in seconds."""
    return {
        "clusters": "source, target",
        "source.bootstrap.servers": source,
        "target.bootstrap.servers": target,
        "source->target.enabled": "true",
        "target->source.enabled": "false",
        # nor a heartbeats-only herder for the way back (MirrorMaker 2 runs one per pair
        # unless told not to)
        "target->source.emit.heartbeats.enabled": "false",
        "source->target.topics": topic,
        "source->target.groups": group,
        "replication.policy.class": policy,
        # -1: each broker's default.replication.factor
        "replication.factor": "-1",
        "checkpoints.topic.replication.factor": "-1",
        "heartbeats.topic.replication.factor": "-1",
        "offset-syncs.topic.replication.factor": "-1",
        "offset.storage.replication.factor": "-1",
        "config.storage.replication.factor": "-1",
        "status.storage.replication.factor": "-1",
        "refresh.topics.interval.seconds": "1",
        "refresh.groups.interval.seconds": "1",
        "sync.topic.configs.interval.seconds": "1",
        "emit.checkpoints.interval.seconds": "1",
        "emit.heartbeats.interval.seconds": "1",
        "sync.group.offsets.enabled": "true",
        "sync.group.offsets.interval.seconds": "1",
        # The source task's offsets, and with them the offset sync of the last record
        # replicated, are committed every second (default: a minute). A Connect worker
        # setting: in MirrorMaker 2's mm2.properties it takes the target cluster's prefix.
        "target.offset.flush.interval.ms": "1000",
        # the plugins' ServiceLoader manifests, not a scan of every jar: a quicker start
        "plugin.discovery": "service_load",
    }


def phase_records(phase: int) -> dict[int, list[tuple]]:
    """Per partition: (key, value, timestamp, headers) records of `phase` (1 or 2)."""
    t0 = int(time.time() * 1000) - 60_000
    return {p: [(b"k-%d-%d" % (p, i), b"v-%d-%d-%d" % (phase, p, i), t0 + i,
                 [("phase", b"%d" % phase), ("n", b"%d" % i)]) for i in range(PER_PARTITION)]
            for p in range(PARTITIONS)}


def wait_for(condition, timeout: float, what: str, mm2: MirrorMakerProcess | None = None):
    deadline = time.monotonic() + timeout
    last = None
    while True:
        try:
            last = condition()
        except Exception as exc:  # noqa: BLE001 - a topic not there yet: ask again
            last = exc
        if last and not isinstance(last, Exception):
            print(f"{what}: {timeout - (deadline - time.monotonic()):.1f} s")
            return last
        if mm2 is not None and not mm2.alive():
            raise AssertionError(f"MirrorMaker 2 exited ({mm2.returncode()}):\n{mm2.log_tail()}")
        if time.monotonic() > deadline:
            logs = f"\n--- MirrorMaker 2 ---\n{mm2.log_tail(80)}" if mm2 else ""
            raise AssertionError(f"timed out after {timeout:.0f}s waiting for {what} (last: {last!r}){logs}")
        time.sleep(0.5)


def content(records: list[Rec]) -> dict[int, list[tuple]]:
    out: dict[int, list[tuple]] = {}
    for r in sorted(records, key=lambda r: (r.partition, r.offset)):
        out.setdefault(r.partition, []).append((r.key, r.value, r.timestamp, r.headers))
    return out


def as_content(records: dict[int, list[tuple]]) -> dict[int, list[tuple]]:
    return {p: [(k, v, ts, tuple(h)) for k, v, ts, h in recs] for p, recs in records.items()}


def migrate(source, target, workdir: Path, policy: str, kill_target_broker: bool = False) -> None:
    topic, group = unique_name("mm2-orders"), unique_name("mm2-group")
    remote = topic if policy == IDENTITY_POLICY else f"source.{topic}"
    create_topics(source.bootstrap, {topic: PARTITIONS}, {topic: TOPIC_CONFIGS})
    first, second = phase_records(1), phase_records(2)
    for p, recs in first.items():
        produce(source.bootstrap, topic, recs, partition=p)
    # The group reads everything there is on the source, commits and stops.
    read = consume_group(source.bootstrap, group, topic, PARTITIONS * PER_PARTITION)
    assert len(read) == PARTITIONS * PER_PARTITION
    assert committed(source.bootstrap, group, topic) == {p: PER_PARTITION for p in range(PARTITIONS)}

    mm2 = MirrorMakerProcess("mirrormaker2", workdir,
                             mm2_settings(source.bootstrap, target.bootstrap, topic, group, policy))
    try:
        mm2.start()
        # The topic on the target: the source's partitions and configs, every record.
        wait_for(lambda: len(partitions(target.bootstrap, remote)) == PARTITIONS, SETTLE_S,
                 f"{remote} on the target", mm2)
        wait_for(lambda: {k: topic_configs(target.bootstrap, remote)[k][0] for k in TOPIC_CONFIGS}
                 == TOPIC_CONFIGS, SETTLE_S, f"{remote}'s configs copied", mm2)
        wait_for(lambda: end_offsets(target.bootstrap, remote) == end_offsets(source.bootstrap, topic),
                 SETTLE_S, "the first records replicated", mm2)
        # The group's offsets translated onto the target: exactly where it stopped.
        wait_for(lambda: committed(target.bootstrap, group, remote)
                 == {p: PER_PARTITION for p in range(PARTITIONS)}, SETTLE_S,
                 "the group's offsets translated to the target", mm2)
        # Producers go on writing to the source while MirrorMaker 2 runs.
        if kill_target_broker:  # and the leader of a copied partition dies meanwhile
            dead = target.kill_leader(remote, 0)
        for p, recs in second.items():
            produce(source.bootstrap, topic, recs, partition=p)
        if kill_target_broker:
            # back once another broker leads (its ZooKeeper session expired: a Kafka broker
            # cannot register again before)
            target.wait_leader(remote, 0, not_in=(dead,))
            target.start(dead)
        wait_for(lambda: end_offsets(target.bootstrap, remote) == end_offsets(source.bootstrap, topic),
                 SETTLE_S, "the second records replicated", mm2)
    except BaseException:
        print(f"--- MirrorMaker 2 ---\n{mm2.log_tail(120)}")
        raise
    finally:
        mm2.stop()

    # The cut-over: the group resumes on the target where it stopped on the source.
    resumed = consume_group(target.bootstrap, group, remote, PARTITIONS * PER_PARTITION,
                            expect_more=False)
    assert content(resumed) == as_content(second), (
        f"the group read {len(resumed)} records on the target, "
        f"{PARTITIONS * PER_PARTITION} expected (the second phase's)")
    # The target's copy equals the source record for record (keys, values, headers, timestamps).
    assert content(read_all(target.bootstrap, remote)) == content(read_all(source.bootstrap, topic))


@pytest.fixture
def source_broker(broker_pool, request):
    """The broker MirrorMaker 2 copies from: the session's shared broker of the kind
    `@pytest.mark.source_kind(kind)` names, else of the target's kind (the target is a
    broker of the scenario's own: `fresh_broker`). The scenario's topic and group are its
    own by their unique names; MirrorMaker 2 adds its offset-syncs topic."""
    marker = request.node.get_closest_marker("source_kind")
    return broker_pool.get(marker.args[0] if marker else request.getfixturevalue("broker_kind"))


@pytest.mark.broker_kinds("kafka", "trafka")
@pytest.mark.source_kind("kafka")
def test_migration_from_kafka(source_broker, fresh_broker, tmp_path):
    migrate(source_broker, fresh_broker, tmp_path, IDENTITY_POLICY)


@pytest.mark.broker_kinds("kafka", "trafka")
def test_replication_between_two_clusters(source_broker, fresh_broker, tmp_path):
    migrate(source_broker, fresh_broker, tmp_path, DEFAULT_POLICY)


@pytest.mark.skipif(not LONG, reason="Trafka as a source is in the default run already "
                    "(Trafka -> Trafka): TRAFKA_LONG_TESTS=1")
@pytest.mark.broker_kinds("kafka")
@pytest.mark.source_kind("trafka")
def test_migration_from_trafka_back_to_kafka(source_broker, fresh_broker, tmp_path):
    """The way back: Trafka -> Apache Kafka, names kept."""
    migrate(source_broker, fresh_broker, tmp_path, IDENTITY_POLICY)


@pytest.mark.skipif(not LONG, reason="two three-broker clusters: TRAFKA_LONG_TESTS=1")
@pytest.mark.broker_kinds("kafka-cluster", "trafka-cluster")
@pytest.mark.source_kind("kafka-cluster")
def test_migration_from_a_kafka_cluster(source_broker, fresh_broker, tmp_path):
    """From Kafka 3.9's three-broker ZooKeeper cluster to a three-broker cluster of the
    target's kind, a target broker SIGKILLed while the second records are replicated."""
    migrate(source_broker, fresh_broker, tmp_path, IDENTITY_POLICY, kill_target_broker=True)
