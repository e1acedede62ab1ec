"""Internal topics in a cluster follow Kafka's rule: `__consumer_offsets` is not created on
fewer live brokers than offsets.topic.replication.factor (FindCoordinator answers
COORDINATOR_NOT_AVAILABLE, which clients retry) — created smaller it would stay
under-replicated for good, and a group's coordinator could vanish with one broker."""

from __future__ import annotations

import time

import pytest

from tests.cluster.clusterkit import Cluster
from wire.registry import ApiKey

pytestmark = pytest.mark.timeout(180)


def find_coordinator(cluster: Cluster, group: str) -> dict:
    body = {"key_type": 0, "coordinator_keys": [group]}
    return cluster.call(ApiKey.FIND_COORDINATOR, 4, body)["coordinators"][0]


def test_offsets_topic_waits_for_its_replication_factor(tmp_path, zk_connect):
    cluster = Cluster(tmp_path, zk_connect, 3)  # offsets.topic.replication.factor: Kafka's default 3
    try:
        for node in (1, 2):
            cluster.brokers[node].start()
        cluster.wait_for(lambda: len(cluster.metadata()["brokers"]) == 2, 30, "two brokers registered")
        deadline = time.monotonic() + 4
        while time.monotonic() < deadline:
            assert find_coordinator(cluster, "early")["error_code"] == 15  # COORDINATOR_NOT_AVAILABLE
            time.sleep(0.5)
        topics = cluster.metadata(["__consumer_offsets"])["topics"]
        assert topics[0]["error_code"] == 3, topics  # UNKNOWN_TOPIC_OR_PARTITION: not created with RF 2

        cluster.brokers[3].start()
        found = cluster.wait_for(lambda: (c := find_coordinator(cluster, "early"))["error_code"] == 0 and c,
                                 60, "a coordinator once three brokers are live")
        assert found["node_id"] in (1, 2, 3)
        partitions = cluster.metadata(["__consumer_offsets"])["topics"][0]["partitions"]
        assert partitions and all(len(p["replica_nodes"]) == 3 for p in partitions)
    finally:
        cluster.stop()
