"""Unclean leader election in a 3-broker cluster on a real ZooKeeper (Kafka's
`unclean.leader.election.enable`, docs/design/replication.md#unclean-leader-election).

The scene of every test: an RF=2 partition on the two brokers that are not the controller
(so killing its leader never moves the controller). Records `before` are written while both
replicas are in the ISR; the follower is stopped, the ISR shrinks to the leader, records
`after` are written with acks=1 (only the leader has them); the leader is SIGKILLed and the
stale follower started again. Its replica is alive but outside the ISR:
- unclean elections off (the topic's setting wins over the broker's `true`): the partition
  stays offline, leader -1 in ZooKeeper and LEADER_NOT_AVAILABLE in Metadata, until the old
  leader returns and is elected cleanly; nothing is lost;
- on through the topic's config (broker default off): the stale follower leads at once with
  ISR = [it], leader epoch bumped, RECOVERING in the state znode (KIP-704) until the old
  leader, truncated to it, rejoins the ISR; `after` is gone, as Kafka documents;
- turned on by IncrementalAlterConfigs while the partition is offline: the controller runs
  the election then (Kafka's TopicUncleanLeaderElectionEnable).
"""

from __future__ import annotations

import json
import time

import confluent_kafka as ck
import pytest
from kazoo.client import KazooClient

from tests.cluster.clusterkit import Cluster, read_topic
from wire.registry import ApiKey

pytestmark = pytest.mark.timeout(120)

UNCLEAN = "unclean.leader.election.enable"
LEADER_NOT_AVAILABLE = 5
INVALID_REQUEST = 42
TOPIC_RESOURCE = 2  # ConfigResource.Type


def zk_get(zk_connect: str, path: str):
    client = KazooClient(hosts=zk_connect)
    client.start(timeout=10)
    try:
        return client.get(path)
    finally:
        client.stop()
        client.close()


def zk_state(zk_connect: str, topic: str, index: int = 0) -> dict:
    """The partition's state znode, as the controller wrote it."""
    return json.loads(zk_get(zk_connect, f"/brokers/topics/{topic}/partitions/{index}/state")[0])


def alter_partition(cluster: Cluster, zk_connect: str, topic: str, leader: int, isr: list[int],
                    recovery: int) -> int:
    """AlterPartition v1 to the controller as the partition's leader; the partition's error."""
    data, stat = zk_get(zk_connect, f"/brokers/topics/{topic}/partitions/0/state")
    broker_epoch = zk_get(zk_connect, f"/brokers/ids/{leader}")[1].czxid
    body = {"broker_id": leader, "broker_epoch": broker_epoch,
            "topics": [{"topic_name": topic, "partitions": [
                {"partition_index": 0, "leader_epoch": json.loads(data)["leader_epoch"], "new_isr": isr,
                 "leader_recovery_state": recovery, "partition_epoch": stat.version}]}]}
    answer = cluster.call(ApiKey.ALTER_PARTITION, 1, body, cluster.metadata()["controller_id"])
    assert answer["error_code"] == 0, answer
    return answer["topics"][0]["partitions"][0]["error_code"]


def produce(bootstrap: str, topic: str, values: list[bytes], acks: str) -> None:
    producer = ck.Producer({"bootstrap.servers": bootstrap, "acks": acks, "linger.ms": 0,
                            "message.timeout.ms": 20000})
    failed = []
    for v in values:
        producer.produce(topic, value=v, on_delivery=lambda err, _msg: err is None or failed.append(err))
    assert producer.flush(30) == 0
    assert not failed, failed[:3]


def read_values(bootstrap: str, topic: str, expected: int) -> list[bytes]:
    return [v for _p, _o, v in read_topic(bootstrap, topic, expected, timeout=20, settle_s=1.5)]

def stale_follower_alone(cluster: Cluster, topic: str, configs: dict[str, str]) -> tuple[int, int, list, list]:
    """Build the scene (module docstring); returns (old leader, stale follower, before,
    after) with the leader killed and the stale follower started again."""
    controller = cluster.metadata()["controller_id"]
    leader, follower = [b for b in sorted(cluster.brokers) if b != controller]
    body = {"topics": [{"name": topic, "num_partitions": -1, "replication_factor": -1,
                        "assignments": [{"partition_index": 0, "broker_ids": [leader, follower]}],
                        "configs": [{"name": k, "value": v} for k, v in configs.items()]}],
            "timeout_ms": 20000, "validate_only": False}
    assert cluster.call(ApiKey.CREATE_TOPICS, 5, body)["topics"][0]["error_code"] == 0
    cluster.wait_for(lambda: (lambda p: p["leader_id"] == leader and len(p["isr_nodes"]) == 2)(
        cluster.partition(topic, 0)), 20, "both replicas in the ISR")
    before = [b"before-%d" % i for i in range(50)]
    produce(cluster.brokers[leader].bootstrap, topic, before, "all")
    cluster.brokers[follower].stop()
    cluster.wait_for(lambda: cluster.partition(topic, 0)["isr_nodes"] == [leader], 20, "the ISR shrunk to the leader")
    after = [b"after-%d" % i for i in range(30)]
    produce(cluster.brokers[leader].bootstrap, topic, after, "1")
    cluster.brokers[leader].kill()
    cluster.wait_for(lambda: cluster.partition(topic, 0, controller)["leader_id"] == -1, 20,
                     "the controller seeing the leader gone")
    cluster.brokers[follower].start()
    cluster.wait_for(lambda: follower in [b["node_id"] for b in cluster.metadata(node=controller)["brokers"]], 20,
                     "the stale follower registered")
    cluster.wait_for(lambda: cluster.partition(topic, 0, follower) is not None, 20,
                     "the stale follower's metadata has the partition")
    return leader, follower, before, after


def assert_offline(cluster: Cluster, zk_connect: str, topic: str, seconds: float) -> None:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        for node in cluster.brokers:
            if cluster.brokers[node].proc is None or cluster.brokers[node].proc.poll() is not None:
                continue
            p = cluster.partition(topic, 0, node)
            assert p["leader_id"] == -1 and p["error_code"] == LEADER_NOT_AVAILABLE, (node, p)
        assert zk_state(zk_connect, topic)["leader"] == -1
        time.sleep(0.5)


def test_a_topic_that_forbids_it_stays_offline_until_an_isr_member_returns(tmp_path, zk_connect):
    """The broker allows unclean elections, the topic's config does not: the topic wins."""
    with Cluster(tmp_path, zk_connect, 3, "--set", f"{UNCLEAN}=true") as cluster:
        leader, follower, before, after = stale_follower_alone(cluster, "strict", {UNCLEAN: "false"})
        epoch = zk_state(zk_connect, "strict")["leader_epoch"]
        assert_offline(cluster, zk_connect, "strict", 4)
        assert zk_state(zk_connect, "strict")["isr"] == [leader]

        cluster.brokers[leader].start()  # its arrival triggers a clean election
        cluster.wait_for(lambda: cluster.partition("strict", 0, follower)["leader_id"] == leader, 20,
                         "the ISR member elected again")
        state = zk_state(zk_connect, "strict")
        assert state["leader"] == leader and state["leader_epoch"] > epoch
        assert state.get("leader_recovery_state", 0) == 0
        cluster.wait_for(lambda: sorted(cluster.partition("strict", 0)["isr_nodes"]) == sorted([leader, follower]),
                         30, "the follower caught up")
        assert sorted(read_values(cluster.bootstrap, "strict", len(before) + len(after))) == sorted(before + after)


def test_a_topic_that_allows_it_elects_the_stale_replica(tmp_path, zk_connect):
    """The broker default forbids unclean elections, the topic's config allows them."""
    with Cluster(tmp_path, zk_connect, 3) as cluster:
        leader, follower, before, after = stale_follower_alone(cluster, "lenient", {UNCLEAN: "true"})
        cluster.wait_for(lambda: cluster.partition("lenient", 0, follower)["leader_id"] == follower, 20,
                         "the stale follower elected")
        state = zk_state(zk_connect, "lenient")
        assert state["leader"] == follower and state["isr"] == [follower]
        assert state["leader_recovery_state"] == 1  # RECOVERING (KIP-704)
        controller = cluster.metadata()["controller_id"]
        assert "unclean leader election of broker %d" % follower in cluster.brokers[controller].log_tail(400)
        # The controller refuses RECOVERING with more than one ISR member (KIP-704).
        assert alter_partition(cluster, zk_connect, "lenient", follower, [follower, controller], 1) == INVALID_REQUEST

        # What only the dead leader had is gone; the partition takes writes again.
        later = [b"later-%d" % i for i in range(20)]
        produce(cluster.brokers[follower].bootstrap, "lenient", later, "1")
        assert sorted(read_values(cluster.brokers[follower].bootstrap, "lenient", 70)) == sorted(before + later)

        # The old leader returns: it truncates its divergent tail, rejoins the ISR, and the
        # leader's ISR expansion marks the partition RECOVERED.
        cluster.brokers[leader].start()
        cluster.wait_for(lambda: sorted(zk_state(zk_connect, "lenient")["isr"]) == sorted([leader, follower]), 30,
                         "the old leader back in the ISR")
        state = zk_state(zk_connect, "lenient")
        assert state["leader"] == follower and state.get("leader_recovery_state", 0) == 0
        # ... and going back from RECOVERED to RECOVERING.
        assert alter_partition(cluster, zk_connect, "lenient", follower, [follower], 1) == INVALID_REQUEST
        cluster.brokers[follower].stop()  # now the old leader serves what it kept
        cluster.wait_for(lambda: cluster.partition("lenient", 0, leader)["leader_id"] == leader, 20,
                         "the old leader leading")
        assert sorted(read_values(cluster.brokers[leader].bootstrap, "lenient", 70)) == sorted(before + later)


def test_enabling_it_on_an_offline_topic_elects_at_once(tmp_path, zk_connect):
    with Cluster(tmp_path, zk_connect, 3) as cluster:
        leader, follower, before, _after = stale_follower_alone(cluster, "later", {})
        epoch = zk_state(zk_connect, "later")["leader_epoch"]
        assert_offline(cluster, zk_connect, "later", 3)

        body = {"resources": [{"resource_type": TOPIC_RESOURCE, "resource_name": "later",
                               "configs": [{"name": UNCLEAN, "config_operation": 0, "value": "true"}]}],
                "validate_only": False}
        assert cluster.call(ApiKey.INCREMENTAL_ALTER_CONFIGS, 1, body, follower)["responses"][0]["error_code"] == 0
        cluster.wait_for(lambda: cluster.partition("later", 0, follower)["leader_id"] == follower, 15,
                         "the stale follower elected after the config change")
        state = zk_state(zk_connect, "later")
        assert state["isr"] == [follower] and state["leader_epoch"] > epoch
        assert sorted(read_values(cluster.brokers[follower].bootstrap, "later", len(before))) == sorted(before)
