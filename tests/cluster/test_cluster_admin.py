"""Topic administration in a 3-broker cluster: CreateTopics with explicit assignments and
replication factors, CreatePartitions, DeleteTopics everywhere, errors Kafka gives."""

from __future__ import annotations

import pytest

from tests.cluster.clusterkit import Cluster
from wire.errors import ErrorCode as E
from wire.registry import ApiKey

pytestmark = pytest.mark.timeout(180)


def partition_dirs(cluster: Cluster, topic: str) -> dict[int, list[str]]:
    return {n: sorted(p.name for p in b.data_dir.iterdir() if p.is_dir() and p.name.rsplit("-", 1)[0] == topic)
            for n, b in cluster.brokers.items()}


def test_create_with_assignment_add_partitions_delete_everywhere(tmp_path, zk_connect):
    with Cluster(tmp_path, zk_connect) as cluster:
        body = {"topics": [{"name": "placed", "num_partitions": -1, "replication_factor": -1,
                            "assignments": [{"partition_index": 0, "broker_ids": [2, 3]},
                                            {"partition_index": 1, "broker_ids": [3, 1]}], "configs": []}],
                "timeout_ms": 20000, "validate_only": False}
        assert cluster.call(ApiKey.CREATE_TOPICS, 5, body)["topics"][0]["error_code"] == E.NONE
        assert cluster.partition("placed", 0)["replica_nodes"] == [2, 3]
        assert cluster.wait_for(lambda: cluster.partition("placed", 1)["leader_id"] == 3, 20, "preferred leader 3")
        # Errors: too many replicas, a dead broker in an assignment, a topic that exists.
        assert cluster.create_topic("too-wide", 1, 4)["error_code"] == E.INVALID_REPLICATION_FACTOR
        body["topics"][0].update(name="nowhere", assignments=[{"partition_index": 0, "broker_ids": [1, 9]}])
        assert cluster.call(ApiKey.CREATE_TOPICS, 5, body)["topics"][0]["error_code"] == E.INVALID_REPLICA_ASSIGNMENT
        assert cluster.create_topic("placed", 1, 1)["error_code"] == E.TOPIC_ALREADY_EXISTS
        # CreatePartitions with an assignment
        grow = {"topics": [{"name": "placed", "count": 3, "assignments": [{"broker_ids": [1, 2]}]}],
                "timeout_ms": 20000, "validate_only": False}
        assert cluster.call(ApiKey.CREATE_PARTITIONS, 1, grow)["results"][0]["error_code"] == E.NONE
        assert cluster.partition("placed", 2)["replica_nodes"] == [1, 2]
        cluster.wait_for(lambda: len(cluster.partition("placed", 2, 3)["isr_nodes"]) == 2, 20, "partition 2 in sync")
        assert partition_dirs(cluster, "placed") == {1: ["placed-1", "placed-2"], 2: ["placed-0", "placed-2"],
                                                     3: ["placed-0", "placed-1"]}
        # DescribeLogDirs lists every replica a broker hosts, the followers too (kafka-log-dirs,
        # kafka-reassign-partitions); it listed only the partitions each broker led.
        for node, dirs in partition_dirs(cluster, "placed").items():
            answer = cluster.call(ApiKey.DESCRIBE_LOG_DIRS, 4, {"topics": None}, node)
            listed = sorted(f"{t['name']}-{p['partition_index']}" for d in answer["results"] for t in d["topics"]
                            for p in t["partitions"] if t["name"] == "placed")
            assert listed == dirs, (node, answer)
        # DeleteTopics on one broker removes it from every broker's metadata and disk.
        deleted = cluster.call(ApiKey.DELETE_TOPICS, 4, {"topic_names": ["placed"], "timeout_ms": 20000}, node=1)
        assert deleted["responses"][0]["error_code"] == E.NONE
        for node in (1, 2, 3):
            cluster.wait_for(lambda: not cluster.metadata(["placed"], node)["topics"][0]["partitions"], 20,
                             f"placed gone from broker {node}'s metadata")
        cluster.wait_for(lambda: partition_dirs(cluster, "placed") == {1: [], 2: [], 3: []}, 20,
                         "the replicas deleted on every broker")
        # The name can be used again once the controller has removed its znodes (until then
        # TOPIC_ALREADY_EXISTS, "marked for deletion", as Kafka answers).
        cluster.wait_for(lambda: cluster.create_topic("placed", 1, 3)["error_code"] == E.NONE, 20, "recreated")
        assert cluster.wait_for(lambda: len(cluster.partition("placed", 0)["isr_nodes"]) == 3, 20, "recreated")


def test_the_same_topic_created_on_every_broker_at_once(tmp_path, zk_connect):
    """Creating a topic another broker created a moment before is normal in a cluster: each
    topic is created once, every other broker answers TOPIC_ALREADY_EXISTS (Kafka's
    AdminZkClient: the assignment znode is the arbiter), none fails with an unknown error
    and no broker dies. Before the fix the loser of the race on `/config/topics/<t>` or
    `/brokers/topics/<t>` raised (AttributeError for `self.zk.NodeExists`, or NodeExists)."""
    import socket
    import struct
    import threading

    from tests.brokerproc import recv_exact
    from wire import decode_response, encode_request

    topics = [f"raced-{i}" for i in range(12)]
    with Cluster(tmp_path, zk_connect) as cluster:
        answers: dict[str, list] = {t: [] for t in topics}

        def call(node: int, key: ApiKey, version: int, body: dict) -> dict:
            """One request to `node`, waiting as long as the broker may (the harness's 10 s
            socket timeout is shorter than a CreateTopics on a loaded machine)."""
            with socket.create_connection(("127.0.0.1", cluster.brokers[node].port), timeout=60) as sock:
                sock.sendall(encode_request(key, version, 1, body, client_id="race"))
                size = struct.unpack(">i", recv_exact(sock, 4))[0]
                return decode_response(key, version, recv_exact(sock, size))[1]

        def create(node: int, name: str, barrier: threading.Barrier) -> None:
            body = {"topics": [{"name": name, "num_partitions": 1, "replication_factor": 1, "assignments": [],
                                "configs": [{"name": "retention.ms", "value": "3600000"}]}],
                    "timeout_ms": 20000, "validate_only": False}
            barrier.wait(30)
            try:
                answers[name].append(call(node, ApiKey.CREATE_TOPICS, 5, body)["topics"][0]["error_code"])
            except Exception as exc:  # shown by the assertion below
                answers[name].append(repr(exc))

        for name in topics:
            barrier = threading.Barrier(len(cluster.brokers))
            threads = [threading.Thread(target=create, args=(node, name, barrier)) for node in cluster.brokers]
            for thread in threads:
                thread.start()
            for thread in threads:
                thread.join(90)
        for name, codes in answers.items():
            assert sorted(codes, key=str) == [E.NONE, E.TOPIC_ALREADY_EXISTS, E.TOPIC_ALREADY_EXISTS], (name, codes)
        # Auto-creation (Metadata for an unknown topic, as producers send it) on every broker at once
        auto = [f"auto-raced-{i}" for i in range(12)]
        auto_answers: dict[str, list] = {t: [] for t in auto}

        def metadata(node: int, name: str, barrier: threading.Barrier) -> None:
            body = {"topics": [{"name": name}], "allow_auto_topic_creation": True}
            barrier.wait(30)
            try:
                auto_answers[name].append(call(node, ApiKey.METADATA, 9, body)["topics"][0]["error_code"])
            except Exception as exc:
                auto_answers[name].append(repr(exc))

        for name in auto:
            barrier = threading.Barrier(len(cluster.brokers))
            threads = [threading.Thread(target=metadata, args=(node, name, barrier)) for node in cluster.brokers]
            for thread in threads:
                thread.start()
            for thread in threads:
                thread.join(90)
        for name, codes in auto_answers.items():
            assert len(codes) == 3 and set(codes) <= {E.NONE, E.LEADER_NOT_AVAILABLE}, (name, codes)
        assert all(b.proc.poll() is None for b in cluster.brokers.values()), "every broker still runs"
        for name in topics + auto:
            cluster.wait_for(lambda: (cluster.partition(name, 0) or {}).get("leader_id") in cluster.brokers, 20,
                             f"{name} has a leader")
