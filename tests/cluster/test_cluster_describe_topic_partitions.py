"""DescribeTopicPartitions (75) in a 3-broker ZooKeeper cluster: every broker answers from the
metadata cache the controller fills, so its leaders, leader epochs, replicas, ISR, offline
replicas and topic ids are Metadata's, on every broker, paged or not, and still after a
broker is stopped (its partitions led elsewhere, the broker out of the ISRs)."""

from __future__ import annotations

import pytest

from tests.cluster.clusterkit import Cluster, whole_isrs
from wire.registry import ApiKey

pytestmark = pytest.mark.timeout(240)

FIELDS = ("leader_id", "leader_epoch", "replica_nodes", "isr_nodes", "offline_replicas")


def describe(cluster: Cluster, topics: list[str], node: int, limit: int = 2000, cursor: dict | None = None) -> dict:
    body = {"topics": [{"name": t} for t in topics], "response_partition_limit": limit, "cursor": cursor}
    return cluster.call(ApiKey.DESCRIBE_TOPIC_PARTITIONS, 0, body, node)


def paged(cluster: Cluster, topics: list[str], node: int, limit: int) -> dict[str, list[dict]]:
    """Every partition of `topics` at `node`, following the cursor page by page."""
    out: dict[str, list[dict]] = {}
    cursor = None
    for _ in range(50):
        answer = describe(cluster, topics, node, limit, cursor)
        assert sum(len(t["partitions"]) for t in answer["topics"]) <= limit
        for t in answer["topics"]:
            assert t["error_code"] == 0, t
            out.setdefault(t["name"], []).extend(t["partitions"])
        cursor = answer["next_cursor"]
        if cursor is None:
            return out
    raise AssertionError("the cursor never ended")


def as_metadata(cluster: Cluster, topics: list[str], node: int) -> dict:
    """Metadata's view: {topic: (topic id, [(index, fields...)])}."""
    return {t["name"]: (t["topic_id"], [(p["partition_index"], *(p[f] for f in FIELDS)) for p in t["partitions"]])
            for t in cluster.metadata(topics, node)["topics"]}


def as_dtp(cluster: Cluster, topics: list[str], node: int, limit: int) -> dict:
    ids = {t["name"]: t["topic_id"] for t in describe(cluster, topics, node)["topics"]}
    return {name: (ids[name], [(p["partition_index"], *(p[f] for f in FIELDS)) for p in parts])
            for name, parts in paged(cluster, topics, node, limit).items()}


def agree(cluster: Cluster, topics: list[str], node: int, limit: int) -> bool:
    return as_dtp(cluster, topics, node, limit) == as_metadata(cluster, topics, node)


def test_describe_topic_partitions_matches_metadata_on_every_broker(tmp_path, zk_connect):
    with Cluster(tmp_path, zk_connect) as cluster:
        assert cluster.create_topic("wide", 5, 3)["error_code"] == 0
        assert cluster.create_topic("pairs", 4, 2)["error_code"] == 0
        topics = ["wide", "pairs"]
        for node in (1, 2, 3):
            cluster.wait_for(whole_isrs(cluster, "wide", 5, node), 30, f"wide in sync at broker {node}")
            cluster.wait_for(whole_isrs(cluster, "pairs", 4, node, size=2), 30, f"pairs in sync at broker {node}")
        for node in (1, 2, 3):
            dtp = as_dtp(cluster, topics, node, 3)
            assert dtp == as_metadata(cluster, topics, node)
            assert [p[0] for p in dtp["pairs"][1]] == [0, 1, 2, 3] and [p[0] for p in dtp["wide"][1]] == list(range(5))
            assert {p[1] for p in dtp["wide"][1]} <= {1, 2, 3}
        # The first page stops inside "pairs" (sorted first) with the cursor where it stopped.
        first = describe(cluster, topics, 1, 3)
        assert [t["name"] for t in first["topics"]] == ["pairs"]
        assert first["next_cursor"] == {"topic_name": "pairs", "partition_index": 3}
        # All topics from a cluster member, unknown topics named, the same as in single-broker mode.
        listed = [t["name"] for t in describe(cluster, [], 2)["topics"]]
        assert listed == sorted(listed) and {"wide", "pairs"} <= set(listed)
        assert describe(cluster, ["nope"], 3)["topics"][0]["error_code"] == 3

        # Broker 3 stops: leadership moves, the ISRs shrink, and both APIs keep telling the same story.
        cluster.brokers[3].stop()
        for node in (1, 2):
            cluster.wait_for(lambda: all(p[1] != 3 and 3 not in p[4] for p in as_metadata(cluster, ["wide"], node)
                                         ["wide"][1]), 60, f"broker 3 out of wide's leaders and ISRs at {node}")
            cluster.wait_for(lambda: agree(cluster, topics, node, 2), 20, f"DTP agrees with Metadata at {node}")
