"""Preferred and unclean leader elections in a 3-broker cluster on a real ZooKeeper:
ElectLeaders (KIP-460) driven by confluent-kafka's AdminClient, and the controller's own
balancing (auto.leader.rebalance.enable, leader.imbalance.*).

A broker that restarts comes back as a follower everywhere; its preferred partitions stay
led elsewhere until an election moves them back. Both ways are checked under an idempotent
acks=all producer whose every acknowledged record is read back exactly once, at the offset
it was acknowledged at. The error cases are Kafka's per-partition codes.
"""

from __future__ import annotations

import json

import confluent_kafka as ck
import pytest
from confluent_kafka import ElectionType
from confluent_kafka.admin import AdminClient
from kazoo.client import KazooClient

from tests.cluster.clusterkit import Cluster, Workload, read_topic
from tests.cluster.test_cluster_unclean_election import stale_follower_alone, zk_state
from wire.errors import ErrorCode
from wire.registry import ApiKey

pytestmark = pytest.mark.timeout(180)

PARTITIONS = 6


def leaders(cluster: Cluster, topic: str) -> dict[int, tuple[int, int, list[int]]]:
    """partition -> (leader, preferred replica, ISR)."""
    t = cluster.metadata([topic])["topics"][0]
    return {p["partition_index"]: (p["leader_id"], p["replica_nodes"][0], p["isr_nodes"]) for p in t["partitions"]}


def balanced(cluster: Cluster, topic: str) -> bool:
    return all(leader == preferred and len(isr) == 3 for leader, preferred, isr in leaders(cluster, topic).values())


def restart_a_preferred_leader(cluster: Cluster, topic: str) -> tuple[int, list[int]]:
    """Restart a broker that is not the controller; returns it and the partitions it
    prefers, which are then led by others."""
    controller = cluster.metadata()["controller_id"]
    broker = next(b for b in sorted(cluster.brokers) if b != controller)
    preferred = [p for p, (_l, pref, _isr) in leaders(cluster, topic).items() if pref == broker]
    assert preferred, leaders(cluster, topic)
    cluster.brokers[broker].stop()  # controlled shutdown: its leaderships move at once
    cluster.wait_for(lambda: all(leaders(cluster, topic)[p][0] not in (-1, broker) for p in preferred), 30,
                     "its leaderships moved away")
    cluster.brokers[broker].start()
    cluster.wait_for(lambda: all(len(isr) == 3 for _l, _p, isr in leaders(cluster, topic).values()), 60,
                     "the restarted broker back in every ISR")
    return broker, preferred


def make_topic(cluster: Cluster, topic: str) -> None:
    assert cluster.create_topic(topic, PARTITIONS, 3, {"min.insync.replicas": "2"})["error_code"] == 0
    cluster.wait_for(lambda: balanced(cluster, topic), 30, "every partition led by its preferred replica")


def elect(cluster: Cluster, election_type: ElectionType, tps: list[tuple[str, int]] | None) -> dict:
    """AdminClient.elect_leaders; (topic, partition) -> error code (0 for elected)."""
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap})
    partitions = None if tps is None else [ck.TopicPartition(t, p) for t, p in tps]
    # No timeouts given: confluent-kafka 2.16's binding fails on either keyword (SystemError).
    result = admin.elect_leaders(election_type, partitions).result(90)
    out = {}
    for tp, error in result.items():
        if error is None:
            out[(tp.topic, tp.partition)] = 0
        else:
            err = error.args[0] if isinstance(error, ck.KafkaException) else error
            out[(tp.topic, tp.partition)] = err.code()
    return out


def test_admin_preferred_election_brings_leaderships_back_under_load(tmp_path, zk_connect):
    with Cluster(tmp_path, zk_connect, 3, "--set", "auto.leader.rebalance.enable=false") as cluster:
        make_topic(cluster, "pref")
        with Workload(cluster, "pref", partitions=PARTITIONS) as producing:
            producing.wait_for_progress(100, 60)
            broker, preferred = restart_a_preferred_leader(cluster, "pref")
            producing.wait_for_progress(100, 60)
            assert all(leaders(cluster, "pref")[p][0] != broker for p in preferred)  # nothing moves them back

            results = elect(cluster, ElectionType.PREFERRED, [("pref", p) for p in range(PARTITIONS)])
            assert results == {("pref", p): 0 if p in preferred else ErrorCode.ELECTION_NOT_NEEDED
                               for p in range(PARTITIONS)}
            # The answer came once the controller's metadata showed the new leaders.
            cluster.wait_for(lambda: balanced(cluster, "pref"), 30, "the preferred replicas leading everywhere")
            producing.wait_for_progress(100, 60)
        assert producing.check() > 100
        # All partitions (null): "pref" needs no election any more; the group's
        # __consumer_offsets partitions led elsewhere since the restart move back now. After
        # that nothing needs one: the answer lists nothing.
        first = elect(cluster, ElectionType.PREFERRED, None)
        assert all(topic == "__consumer_offsets" and code == 0 for (topic, _p), code in first.items()), first
        assert elect(cluster, ElectionType.PREFERRED, None) == {}


def test_auto_rebalance_brings_leaderships_back_under_load(tmp_path, zk_connect):
    with Cluster(tmp_path, zk_connect, 3, "--set", "leader.imbalance.check.interval.seconds=2") as cluster:
        make_topic(cluster, "auto")
        with Workload(cluster, "auto", partitions=PARTITIONS) as producing:
            producing.wait_for_progress(100, 60)
            broker, preferred = restart_a_preferred_leader(cluster, "auto")
            cluster.wait_for(lambda: balanced(cluster, "auto"), 40, "the controller moving the leaderships back")
            producing.wait_for_progress(100, 60)
        assert producing.check() > 100
        controller = cluster.metadata()["controller_id"]
        assert f"leader imbalance of broker {broker}" in cluster.brokers[controller].log_tail(2000)


def test_error_cases(tmp_path, zk_connect):
    with Cluster(tmp_path, zk_connect, 3, "--set", "auto.leader.rebalance.enable=false") as cluster:
        controller = cluster.metadata()["controller_id"]
        assert cluster.create_topic("fine", 2, 3)["error_code"] == 0
        cluster.wait_for(lambda: balanced(cluster, "fine"), 30, "preferred leaders")
        # The preferred replica already leads; a live leader needs no unclean election either.
        assert elect(cluster, ElectionType.PREFERRED, [("fine", 0)]) == {("fine", 0): ErrorCode.ELECTION_NOT_NEEDED}
        assert elect(cluster, ElectionType.UNCLEAN, [("fine", 1)]) == {("fine", 1): ErrorCode.ELECTION_NOT_NEEDED}
        assert elect(cluster, ElectionType.PREFERRED, [("fine", 7), ("nope", 0)]) == {
            ("fine", 7): ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, ("nope", 0): ErrorCode.UNKNOWN_TOPIC_OR_PARTITION}

        # Another broker than the controller: NOT_CONTROLLER per partition, as Kafka's ZooKeeper mode.
        other = next(b for b in cluster.brokers if b != controller)
        body = {"election_type": 0, "topic_partitions": [{"topic": "fine", "partitions": [0, 1]}], "timeout_ms": 5000}
        answer = cluster.call(ApiKey.ELECT_LEADERS, 2, body, other)
        assert answer["error_code"] == 0
        assert sorted((r["partition_id"], r["error_code"]) for r in answer["replica_election_results"][0][
            "partition_result"]) == [(0, ErrorCode.NOT_CONTROLLER), (1, ErrorCode.NOT_CONTROLLER)]
        # v0 (no election type: preferred) at the controller.
        answer = cluster.call(ApiKey.ELECT_LEADERS, 0, {"topic_partitions": [{"topic": "fine", "partitions": [1]}],
                                                        "timeout_ms": 5000}, controller)
        assert answer["replica_election_results"][0]["partition_result"][0]["error_code"] == \
            ErrorCode.ELECTION_NOT_NEEDED

        # A partition whose only replica is dead, and one whose ISR is dead while a stale
        # replica outside it is alive (the topic does not allow unclean elections).
        leader, follower = [b for b in sorted(cluster.brokers) if b != controller]
        body = {"topics": [{"name": "lonely", "num_partitions": -1, "replication_factor": -1,
                            "assignments": [{"partition_index": 0, "broker_ids": [leader]}], "configs": []}],
                "timeout_ms": 20000, "validate_only": False}
        assert cluster.call(ApiKey.CREATE_TOPICS, 5, body)["topics"][0]["error_code"] == 0
        leader_, follower_, before, after = stale_follower_alone(cluster, "stale", {})
        assert (leader_, follower_) == (leader, follower)
        assert zk_state(zk_connect, "stale")["leader"] == -1
        assert elect(cluster, ElectionType.UNCLEAN, [("lonely", 0)]) == {
            ("lonely", 0): ErrorCode.ELIGIBLE_LEADERS_NOT_AVAILABLE}
        # The preferred replica (the dead leader) cannot lead.
        assert elect(cluster, ElectionType.PREFERRED, [("stale", 0)]) == {
            ("stale", 0): ErrorCode.PREFERRED_LEADER_NOT_AVAILABLE}
        # UNCLEAN from an admin overrides the topic's unclean.leader.election.enable=false (KIP-460).
        epoch = zk_state(zk_connect, "stale")["leader_epoch"]
        assert elect(cluster, ElectionType.UNCLEAN, [("stale", 0)]) == {("stale", 0): 0}
        state = zk_state(zk_connect, "stale")
        assert state["leader"] == follower and state["isr"] == [follower] and state["leader_epoch"] > epoch
        assert state["leader_recovery_state"] == 1  # RECOVERING (KIP-704)
        cluster.wait_for(lambda: cluster.partition("stale", 0, follower)["leader_id"] == follower, 20,
                         "the stale replica leading")
        # What only the dead leader had is gone, what the ISR had before is there.
        values = [v for _p, _o, v in read_topic(cluster.brokers[follower].bootstrap, "stale", len(before),
                                                timeout=20, settle_s=1.5)]
        assert sorted(values) == sorted(before)


def test_the_preferred_replica_election_znode(tmp_path, zk_connect):
    """Kafka's older way (kafka-preferred-replica-election.sh before KIP-460): a list of
    partitions in /admin/preferred_replica_election; the controller elects and deletes it."""
    with Cluster(tmp_path, zk_connect, 3, "--set", "auto.leader.rebalance.enable=false") as cluster:
        make_topic(cluster, "viazk")
        _broker, preferred = restart_a_preferred_leader(cluster, "viazk")
        assert not balanced(cluster, "viazk")
        client = KazooClient(hosts=zk_connect)
        client.start(timeout=10)
        try:
            client.create("/admin/preferred_replica_election", json.dumps(
                {"version": 1, "partitions": [{"topic": "viazk", "partition": p} for p in preferred]}).encode(),
                makepath=True)
            cluster.wait_for(lambda: balanced(cluster, "viazk"), 30, "the preferred replicas leading")
            cluster.wait_for(lambda: client.exists("/admin/preferred_replica_election") is None, 10,
                             "the znode deleted by the controller")
        finally:
            client.stop()
            client.close()
