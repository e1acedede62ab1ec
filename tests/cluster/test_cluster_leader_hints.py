"""KIP-951: a Produce (v10+) or Fetch (v16+) sent to a broker that does not lead the
partition is answered with the current leader and its endpoint, so the client can go
there without a metadata round trip. Raw requests, because clients hide these fields."""

from __future__ import annotations

import time

import pytest

from tests.cluster.clusterkit import Cluster
from wire.errors import ErrorCode
from wire.records import Record, build_batch
from wire.registry import ApiKey

pytestmark = pytest.mark.timeout(180)


def produce(cluster: Cluster, node: int, version: int) -> dict:
    batch = build_batch([Record(0, int(time.time() * 1000), b"k", b"v")])
    body = {"transactional_id": None, "acks": -1, "timeout_ms": 5000,
            "topic_data": [{"name": "hints", "partition_data": [{"index": 0, "records": batch}]}]}
    return cluster.call(ApiKey.PRODUCE, version, body, node)


def fetch(cluster: Cluster, node: int, version: int, topic_id, leader_epoch: int) -> dict:
    body = {"cluster_id": None, "replica_id": -1, "replica_state": {"replica_id": -1, "replica_epoch": -1},
            "max_wait_ms": 0, "min_bytes": 1, "max_bytes": 1 << 20, "isolation_level": 0, "session_id": 0,
            "session_epoch": -1,
            "topics": [{"topic": "hints", "topic_id": topic_id,
                        "partitions": [{"partition": 0, "current_leader_epoch": leader_epoch, "fetch_offset": 0,
                                        "last_fetched_epoch": -1, "log_start_offset": -1,
                                        "partition_max_bytes": 1 << 20, "replica_directory_id": None}]}],
            "forgotten_topics_data": [], "rack_id": ""}
    return cluster.call(ApiKey.FETCH, version, body, node)


def test_followers_and_bystanders_point_at_the_leader(tmp_path, zk_connect):
    with Cluster(tmp_path, zk_connect, 3) as cluster:
        assert cluster.create_topic("hints", 1, 2)["error_code"] == 0
        # Every broker's view, the bystander's included: UpdateMetadata reaches them one by one.
        views = cluster.wait_for(lambda: (lambda ps: ps if all(p and len(p["isr_nodes"]) == 2 for p in ps)
                                          and len({(p["leader_id"], p["leader_epoch"]) for p in ps}) == 1
                                          else None)([cluster.partition("hints", 0, n) for n in (1, 2, 3)]),
                                 20, "a full ISR known to every broker")
        info = views[0]
        leader, epoch = info["leader_id"], info["leader_epoch"]
        follower = next(r for r in info["replica_nodes"] if r != leader)
        bystander = next(n for n in (1, 2, 3) if n not in info["replica_nodes"])
        topic_id = next(t["topic_id"] for t in cluster.metadata(["hints"])["topics"])
        endpoint = {"node_id": leader, "host": "127.0.0.1", "port": cluster.brokers[leader].port, "rack": None}

        for node in (follower, bystander):
            answer = produce(cluster, node, 11)
            part = answer["responses"][0]["partition_responses"][0]
            assert part["error_code"] == ErrorCode.NOT_LEADER_OR_FOLLOWER, part
            assert part["current_leader"] == {"leader_id": leader, "leader_epoch": epoch}, part
            assert answer["node_endpoints"] == [endpoint], answer

            answer = fetch(cluster, node, 17, topic_id, -1)
            part = answer["responses"][0]["partitions"][0]
            if node == follower:  # a consumer's Fetch v11+ may read a follower (KIP-392)
                assert part["error_code"] == ErrorCode.NONE, part
                continue
            assert part["error_code"] == ErrorCode.NOT_LEADER_OR_FOLLOWER, part
            assert part["current_leader"] == {"leader_id": leader, "leader_epoch": epoch}, part
            assert answer["node_endpoints"] == [endpoint], answer

        # older versions have no such fields: nothing changes for them
        part = produce(cluster, follower, 9)["responses"][0]["partition_responses"][0]
        assert part["error_code"] == ErrorCode.NOT_LEADER_OR_FOLLOWER
        assert "current_leader" not in part or part["current_leader"]["leader_id"] == -1

        # the leader moves (its broker stops); a fetch with the old epoch at the new leader is
        # fenced, and told the new epoch
        cluster.brokers[leader].stop()
        moved = cluster.wait_for(lambda: (lambda p: p if p and p["leader_id"] == follower else None)(
            cluster.partition("hints", 0, follower)), 30, "the follower takes over")
        answer = fetch(cluster, follower, 17, topic_id, epoch)
        part = answer["responses"][0]["partitions"][0]
        assert part["error_code"] == ErrorCode.FENCED_LEADER_EPOCH, part
        assert part["current_leader"] == {"leader_id": follower, "leader_epoch": moved["leader_epoch"]}, part
        assert [e["node_id"] for e in answer["node_endpoints"]] == [follower]
        # the answer of a partition without error has no hint
        answer = fetch(cluster, follower, 17, topic_id, moved["leader_epoch"])
        part = answer["responses"][0]["partitions"][0]
        assert part["error_code"] == 0 and part.get("current_leader", {"leader_id": -1})["leader_id"] == -1, part
