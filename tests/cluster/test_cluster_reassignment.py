"""Partition reassignment (KIP-455) in a ZooKeeper-mode cluster on a real ZooKeeper:
partitions moved — to entirely other brokers, to three other brokers — under an idempotent
acks=all producer lose nothing acknowledged and duplicate nothing; the new replicas hold
the data, the old ones deleted their logs; a move slowed by a replication throttle
(KIP-73) is listed while it runs, cancelled back to the original replicas, or released by
removing the throttle; Kafka's errors for bad requests.

confluent-kafka 2.16 has no alter_partition_reassignments, so the requests go raw through
the kit (as `kafka-reassign-partitions.sh` sends them); the legacy
/admin/reassign_partitions znode is driven with kazoo."""

from __future__ import annotations

import json
import threading
import time
from pathlib import Path

import confluent_kafka as ck
import pytest

from tests.cluster.clusterkit import Cluster, read_topic
from wire.errors import ErrorCode as E
from wire.registry import ApiKey

pytestmark = pytest.mark.timeout(240)


def controller_id(cluster: Cluster) -> int:
    return cluster.wait_for(lambda: (lambda c: c if c >= 0 else None)(cluster.metadata()["controller_id"]), 30,
                            "a controller")


def reassign(cluster: Cluster, moves: dict[tuple[str, int], list[int] | None], node: int | None = None) -> dict:
    """AlterPartitionReassignments v0 to the controller (or `node`): {(topic, p): replicas or None}."""
    by_topic: dict[str, list[dict]] = {}
    for (topic, index), replicas in moves.items():
        by_topic.setdefault(topic, []).append({"partition_index": index, "replicas": replicas})
    body = {"timeout_ms": 30000, "topics": [{"name": t, "partitions": ps} for t, ps in by_topic.items()]}
    return cluster.call(ApiKey.ALTER_PARTITION_REASSIGNMENTS, 0, body,
                        node if node is not None else controller_id(cluster))


def codes(answer: dict) -> dict[tuple[str, int], int]:
    return {(t["name"], p["partition_index"]): p["error_code"] for t in answer["responses"] for p in t["partitions"]}


def listing(cluster: Cluster, topics: dict[str, list[int]] | None = None, node: int | None = None) -> dict:
    body = {"timeout_ms": 30000,
            "topics": None if topics is None else [{"name": t, "partition_indexes": ps} for t, ps in topics.items()]}
    answer = cluster.call(ApiKey.LIST_PARTITION_REASSIGNMENTS, 0, body,
                          node if node is not None else controller_id(cluster))
    assert answer["error_code"] == E.NONE, answer
    return {(t["name"], p["partition_index"]): (p["replicas"], p["adding_replicas"], p["removing_replicas"])
            for t in answer["topics"] for p in t["partitions"]}


def create(cluster: Cluster, topic: str, assignment: dict[int, list[int]], configs: dict[str, str] | None = None):
    body = {"topics": [{"name": topic, "num_partitions": -1, "replication_factor": -1,
                        "assignments": [{"partition_index": p, "broker_ids": r} for p, r in assignment.items()],
                        "configs": [{"name": k, "value": v} for k, v in (configs or {}).items()]}],
            "timeout_ms": 20000, "validate_only": False}
    assert cluster.call(ApiKey.CREATE_TOPICS, 5, body)["topics"][0]["error_code"] == E.NONE
    for p, replicas in assignment.items():
        cluster.wait_for(lambda: (lambda m: m and m["leader_id"] >= 0 and sorted(m["isr_nodes"]) == sorted(replicas))(
            cluster.partition(topic, p)), 30, f"{topic}-{p} in sync")


def log_bytes(cluster: Cluster, node: int, topic: str, index: int) -> int | None:
    """Bytes of the replica's segment files on disk; None without a log directory."""
    folder: Path = cluster.brokers[node].data_dir / f"{topic}-{index}"
    if not folder.is_dir():
        return None
    return sum(f.stat().st_size for f in folder.glob("*.log"))


def settled(cluster: Cluster, topic: str, index: int, replicas: list[int]):
    """Metadata everywhere says `replicas`, all in the ISR, and the reassignment is over."""
    def check():
        if (topic, index) in listing(cluster):
            return False
        for node in cluster.brokers:
            p = cluster.partition(topic, index, node)
            if p is None or p["replica_nodes"] != replicas or sorted(p["isr_nodes"]) != sorted(replicas) \
                    or p["leader_id"] not in replicas:
                return False
        return True
    return check


class Producing:
    """An idempotent acks=all producer writing `topics` (round robin over their partitions)
    until stopped; what was acknowledged."""

    def __init__(self, cluster: Cluster, topics: dict[str, int]) -> None:
        self.cluster, self.topics = cluster, topics
        self.acked: dict[bytes, tuple[str, int, int]] = {}
        self.failed: list = []
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._run)

    def _run(self) -> None:
        producer = ck.Producer({"bootstrap.servers": self.cluster.bootstrap, "acks": "all", "enable.idempotence": True,
                                "linger.ms": 5, "message.timeout.ms": 120000})

        def report(err, msg):
            if err is None:
                self.acked[msg.value()] = (msg.topic(), msg.partition(), msg.offset())
            else:
                self.failed.append(err)
        targets = [(t, p) for t, n in self.topics.items() for p in range(n)]
        i = 0
        while not self.stop.is_set():
            topic, index = targets[i % len(targets)]
            producer.produce(topic, value=b"v%07d" % i + b"." * 200, partition=index, on_delivery=report)
            producer.poll(0)
            i += 1
            time.sleep(0.002)
        producer.flush(120)

    def __enter__(self) -> "Producing":
        self.thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self.stop.set()
        self.thread.join(180)

    def check(self) -> int:
        """Every acknowledged message read back once, at the offset it was acknowledged at."""
        assert not self.failed, self.failed[:3]
        where: dict[bytes, tuple[str, int, int]] = {}
        for topic in self.topics:
            expected = sum(1 for t, _p, _o in self.acked.values() if t == topic)
            records = read_topic(self.cluster.bootstrap, topic, expected)
            values = [v for _p, _o, v in records]
            assert len(values) == len(set(values)), f"duplicates in {topic}"
            where.update((v, (topic, p, o)) for p, o, v in records)
        missing = [v for v in self.acked if v not in where]
        assert not missing, f"{len(missing)} acknowledged messages lost, e.g. {missing[:3]}"
        moved = [v for v, po in self.acked.items() if where[v] != po]
        assert not moved, f"acknowledged at one offset, stored at another: {moved[:3]}"
        return len(self.acked)


def test_partitions_move_to_other_brokers_while_producing(tmp_path, zk_connect):
    """4 brokers: moving-0 on [1, 2] moves entirely to [3, 4] (its leader too); spread-0 on
    [1] moves to the three other brokers [2, 3, 4]. Nothing acknowledged is lost or
    duplicated."""
    with Cluster(tmp_path, zk_connect, 4) as cluster:
        create(cluster, "moving", {0: [1, 2]}, {"min.insync.replicas": "2"})
        create(cluster, "spread", {0: [1]})
        with Producing(cluster, {"moving": 1, "spread": 1}) as producing:
            cluster.wait_for(lambda: len(producing.acked) > 1000, 60, "writes before the move")
            answer = reassign(cluster, {("moving", 0): [3, 4], ("spread", 0): [2, 3, 4]})
            assert answer["error_code"] == E.NONE and set(codes(answer).values()) == {E.NONE}, answer
            cluster.wait_for(settled(cluster, "moving", 0, [3, 4]), 60, "moving-0 on [3, 4]")
            cluster.wait_for(settled(cluster, "spread", 0, [2, 3, 4]), 60, "spread-0 on [2, 3, 4]")
            before = len(producing.acked)
            cluster.wait_for(lambda: len(producing.acked) > before + 500, 60, "writes after the move")
        total = producing.check()
        assert total > 1500
        # The old replicas deleted their logs; the new ones have every byte the leader has.
        cluster.wait_for(lambda: [log_bytes(cluster, n, "moving", 0) for n in (1, 2)] == [None, None], 30,
                         "moving-0's old replicas deleted")
        cluster.wait_for(lambda: log_bytes(cluster, 1, "spread", 0) is None, 30, "spread-0's old replica deleted")
        for topic, replicas in (("moving", [3, 4]), ("spread", [2, 3, 4])):
            sizes = cluster.wait_for(lambda: (lambda s: s if len(set(s)) == 1 else None)(
                [log_bytes(cluster, n, topic, 0) for n in replicas]), 30, f"{topic}-0's replicas equal")
            assert sizes[0] and sizes[0] > 0
        assert listing(cluster) == {}
