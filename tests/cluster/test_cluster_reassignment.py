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

from tests.cluster.clusterkit import Cluster, VerifyingGroup, read_topic
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


def start_move(cluster: Cluster, moves: dict[tuple[str, int], list[int]]) -> None:
    """A valid move, accepted. Repeated while the controller answers INVALID_REPLICA_ASSIGNMENT
    (a target broker not alive): on the loaded test machine a broker's ZooKeeper session can
    lapse and it re-registers, and Kafka's controller refuses such moves the same way."""
    def accepted():
        answer = reassign(cluster, moves)
        if answer["error_code"] == E.NONE and set(codes(answer).values()) == {E.NONE}:
            return True
        assert set(codes(answer).values()) <= {E.NONE, E.INVALID_REPLICA_ASSIGNMENT}, answer
        moves_left = {tp: r for tp, r in moves.items() if codes(answer).get(tp) != E.NONE}
        moves.clear()
        moves.update(moves_left)
        return False
    moves = dict(moves)
    cluster.wait_for(accepted, 30, f"the move {moves} accepted", interval=0.5)


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
    until stopped; what was acknowledged; with `group`, a verifying consumer group reading
    them (clusterkit.VerifyingGroup)."""

    def __init__(self, cluster: Cluster, topics: dict[str, int], *, group: bool = False) -> None:
        self.cluster, self.topics = cluster, topics
        self.verifier = VerifyingGroup(cluster, list(topics)) if group else None
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
        if self.verifier:
            self.verifier.start()
        return self

    def __exit__(self, *exc) -> None:
        self.stop.set()
        self.thread.join(180)
        if self.verifier:
            self.verifier.stop(self.acked, catch_up=exc[0] is None)

    def check(self) -> int:
        """Every acknowledged message read back once, at the offset it was acknowledged at
    (when the client was told one)."""
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
        # librdkafka acknowledges a batch implicitly, offset unknown (None), when a later batch
        # of the same idempotent producer was acknowledged first (rd_kafka_dr_implicit_ack):
        # those must be in the log once, wherever.
        moved = [v for v, po in self.acked.items() if po[2] is not None and where[v] != po]
        assert not moved, "acknowledged at one offset, stored at another: " + ", ".join(
            f"{v[:8]!r} acked {self.acked[v]} stored {where[v]}" for v in moved[:5])
        if self.verifier:
            self.verifier.check(self.acked)
        return len(self.acked)


def test_partitions_move_to_other_brokers_while_producing(tmp_path, zk_connect):
    """4 brokers: moving-0 on [1, 2] moves entirely to [3, 4] (its leader too); spread-0 on
    [1] moves to the three other brokers [2, 3, 4]. Nothing acknowledged is lost or
    duplicated, and a consumer group reading through the moves receives all of it."""
    with Cluster(tmp_path, zk_connect, 4) as cluster:
        create(cluster, "moving", {0: [1, 2]}, {"min.insync.replicas": "2"})
        create(cluster, "spread", {0: [1]})
        with Producing(cluster, {"moving": 1, "spread": 1}, group=True) as producing:
            cluster.wait_for(lambda: len(producing.acked) > 1000, 60, "writes before the move")
            start_move(cluster, {("moving", 0): [3, 4], ("spread", 0): [2, 3, 4]})
            cluster.wait_for(settled(cluster, "moving", 0, [3, 4]), 60, "moving-0 on [3, 4]")
            cluster.wait_for(settled(cluster, "spread", 0, [2, 3, 4]), 60, "spread-0 on [2, 3, 4]")
            before = len(producing.acked)
            cluster.wait_for(lambda: len(producing.acked) > before + 500, 60, "writes after the move")
        total = producing.check()
        assert total > 1500
        print(f"moves under a producer: {total} acknowledged messages checked")
        # The old replicas deleted their logs; the new ones have every byte the leader has.
        cluster.wait_for(lambda: [log_bytes(cluster, n, "moving", 0) for n in (1, 2)] == [None, None], 30,
                         "moving-0's old replicas deleted")
        cluster.wait_for(lambda: log_bytes(cluster, 1, "spread", 0) is None, 30, "spread-0's old replica deleted")
        for topic, replicas in (("moving", [3, 4]), ("spread", [2, 3, 4])):
            sizes = cluster.wait_for(lambda: (lambda s: s if len(set(s)) == 1 else None)(
                [log_bytes(cluster, n, topic, 0) for n in replicas]), 30, f"{topic}-0's replicas equal")
            assert sizes[0] and sizes[0] > 0
        assert listing(cluster) == {}


THROTTLED = ("--set", "leader.replication.throttled.rate=100000", "--set", "follower.replication.throttled.rate=100000",
             "--set", "replication.quota.window.num=2", "--set", "replica.fetch.max.bytes=32768")
RATE = 100_000
THROTTLE_ALL = {"leader.replication.throttled.replicas": "*", "follower.replication.throttled.replicas": "*"}


def fill(cluster: Cluster, topic: str, nbytes: int) -> int:
    """Write about `nbytes` (1 KB records) with acks=all; returns the count acknowledged."""
    producer = ck.Producer({"bootstrap.servers": cluster.bootstrap, "acks": "all", "enable.idempotence": True,
                            "linger.ms": 20, "batch.size": 16384})
    acked = []
    for i in range(nbytes // 1024):
        producer.produce(topic, value=b"f%07d" % i + b"x" * 1016, partition=0,
                         on_delivery=lambda err, msg: acked.append(msg.offset()) if err is None else None)
        producer.poll(0)
    producer.flush(60)
    return len(acked)


def copied(cluster: Cluster, topic: str, nodes: list[int]) -> int:
    return sum(log_bytes(cluster, n, topic, 0) or 0 for n in nodes)


def unthrottle(cluster: Cluster, topic: str) -> None:
    body = {"resources": [{"resource_type": 2, "resource_name": topic,
                           "configs": [{"name": k, "config_operation": 1, "value": None} for k in THROTTLE_ALL]}],
            "validate_only": False}
    answer = cluster.call(ApiKey.INCREMENTAL_ALTER_CONFIGS, 1, body)
    assert answer["responses"][0]["error_code"] == E.NONE, answer


def test_throttled_move_is_listed_then_cancelled_or_released(tmp_path, zk_connect):
    """A move slowed by the throttles (100 kB/s) is listed with its adding/removing replicas
    and copies no faster than the throttle allows; cancelled, the original replica is all
    that is left; released (throttle configs removed), it completes."""
    with Cluster(tmp_path, zk_connect, 3, *THROTTLED) as cluster:
        create(cluster, "slow", {0: [1]}, THROTTLE_ALL)
        count = fill(cluster, "slow", 2_000_000)
        start_move(cluster, {("slow", 0): [2, 3]})
        assert listing(cluster) == {("slow", 0): ([2, 3, 1], [2, 3], [1])}
        assert listing(cluster, {"slow": [0, 1]}) == {("slow", 0): ([2, 3, 1], [2, 3], [1])}
        # Metadata shows every replica while the partition moves (RS = TRS + ORS), as Kafka's.
        cluster.wait_for(lambda: cluster.partition("slow", 0)["replica_nodes"] == [2, 3, 1], 20, "RS in metadata")
        cluster.wait_for(lambda: copied(cluster, "slow", [2, 3]) > 0, 30, "the copy started")
        t0, b0 = time.monotonic(), copied(cluster, "slow", [2, 3])
        time.sleep(3)
        t1, b1 = time.monotonic(), copied(cluster, "slow", [2, 3])
        # Two followers, each held to RATE by its own side and together by the leader's.
        assert b1 - b0 < 2 * RATE * (t1 - t0) + 200_000, f"{b1 - b0} bytes in {t1 - t0:.1f}s"
        print(f"throttled copy: {(b1 - b0) / (t1 - t0) / 1000:.0f} kB/s for two followers at {RATE // 1000} kB/s")
        assert ("slow", 0) in listing(cluster), "2 MB cannot have been copied at 100 kB/s"
        # Cancel: back to [1]; the adding replicas are stopped and deleted.
        assert codes(reassign(cluster, {("slow", 0): None})) == {("slow", 0): E.NONE}
        cluster.wait_for(settled(cluster, "slow", 0, [1]), 30, "the original replica back")
        cluster.wait_for(lambda: [log_bytes(cluster, n, "slow", 0) for n in (2, 3)] == [None, None], 30,
                         "the adding replicas deleted")
        assert codes(reassign(cluster, {("slow", 0): None})) == {("slow", 0): E.NO_REASSIGNMENT_IN_PROGRESS}
        # Again, then released: the move completes and the old replica goes.
        assert codes(reassign(cluster, {("slow", 0): [2, 3]})) == {("slow", 0): E.NONE}
        assert ("slow", 0) in listing(cluster)
        unthrottle(cluster, "slow")
        cluster.wait_for(settled(cluster, "slow", 0, [2, 3]), 60, "the move completed once released")
        cluster.wait_for(lambda: log_bytes(cluster, 1, "slow", 0) is None, 30, "the old replica deleted")
        assert len(read_topic(cluster.bootstrap, "slow", count)) == count


def test_move_survives_controller_failover(tmp_path, zk_connect):
    """The controller is SIGKILLed while a throttled move runs: the next controller reads
    adding/removing replicas from the topic znode, lists the move and completes it."""
    with Cluster(tmp_path, zk_connect, 3, *THROTTLED) as cluster:
        old_controller = controller_id(cluster)
        source, target = [n for n in cluster.brokers if n != old_controller]
        create(cluster, "resumed", {0: [source]}, THROTTLE_ALL)
        count = fill(cluster, "resumed", 1_500_000)
        start_move(cluster, {("resumed", 0): [target]})
        cluster.brokers[old_controller].kill()
        new_controller = cluster.wait_for(
            lambda: (lambda c: c if c not in (-1, old_controller) else None)(cluster.metadata(node=source)["controller_id"]),
            40, "a new controller")
        assert cluster.wait_for(lambda: listing(cluster, node=new_controller), 20, "the move listed") == \
            {("resumed", 0): ([target, source], [target], [source])}
        unthrottle(cluster, "resumed")
        cluster.wait_for(lambda: (lambda p: p["replica_nodes"] == [target] and p["isr_nodes"] == [target])(
            cluster.partition("resumed", 0, source)), 60, "the move completed")
        cluster.wait_for(lambda: log_bytes(cluster, source, "resumed", 0) is None, 30, "the old replica deleted")
        assert listing(cluster, node=new_controller) == {}
        assert len(read_topic(cluster.bootstrap, "resumed", count)) == count


def test_errors_and_the_legacy_znode(tmp_path, zk_connect):
    """Kafka's errors, NOT_CONTROLLER elsewhere, and a move asked through
    /admin/reassign_partitions (the znode goes when it is done)."""
    from kazoo.client import KazooClient

    with Cluster(tmp_path, zk_connect, 3) as cluster:
        create(cluster, "fixed", {0: [1, 2], 1: [2, 3]})
        ctrl = controller_id(cluster)
        other = next(n for n in cluster.brokers if n != ctrl)
        answer = reassign(cluster, {("fixed", 0): [2, 2], ("fixed", 1): [1, 9], ("fixed", 7): [1],
                                    ("nope", 0): [1], ("fixed", 5): None})
        assert codes(answer) == {("fixed", 0): E.INVALID_REPLICA_ASSIGNMENT, ("fixed", 1): E.INVALID_REPLICA_ASSIGNMENT,
                                 ("fixed", 7): E.UNKNOWN_TOPIC_OR_PARTITION, ("nope", 0): E.UNKNOWN_TOPIC_OR_PARTITION,
                                 ("fixed", 5): E.UNKNOWN_TOPIC_OR_PARTITION}
        answer = reassign(cluster, {("fixed", 0): [], ("fixed", 1): [-1, 2]})
        assert set(codes(answer).values()) == {E.INVALID_REPLICA_ASSIGNMENT}
        assert codes(reassign(cluster, {("fixed", 0): None})) == {("fixed", 0): E.NO_REASSIGNMENT_IN_PROGRESS}
        assert reassign(cluster, {("fixed", 0): [3]}, node=other)["error_code"] == E.NOT_CONTROLLER
        listed = cluster.call(ApiKey.LIST_PARTITION_REASSIGNMENTS, 0, {"timeout_ms": 1000, "topics": None}, other)
        assert listed["error_code"] == E.NOT_CONTROLLER
        assert listing(cluster) == {}
        # Shrinking needs no copy: done at once, leader moved into the new set.
        assert codes(reassign(cluster, {("fixed", 0): [2]})) == {("fixed", 0): E.NONE}
        cluster.wait_for(settled(cluster, "fixed", 0, [2]), 30, "fixed-0 on [2]")
        cluster.wait_for(lambda: log_bytes(cluster, 1, "fixed", 0) is None, 30, "fixed-0 gone from broker 1")
        # The legacy znode (kafka-reassign-partitions.sh --zookeeper).
        zk = KazooClient(hosts=cluster.zk_connect)
        zk.start(timeout=15)
        try:
            doc = {"version": 1, "partitions": [{"topic": "fixed", "partition": 1, "replicas": [1, 3]}]}
            zk.create("/admin/reassign_partitions", json.dumps(doc).encode(), makepath=True)
            cluster.wait_for(settled(cluster, "fixed", 1, [1, 3]), 30, "fixed-1 on [1, 3] through the znode")
            cluster.wait_for(lambda: zk.exists("/admin/reassign_partitions") is None, 30, "the znode deleted")
        finally:
            zk.stop()


JAVA_REASSIGN = """
import java.util.*;
import org.apache.kafka.clients.admin.*;
import org.apache.kafka.common.TopicPartition;

public class Reassign {
    public static void main(String[] args) throws Exception {
        Properties props = new Properties();
        props.put("bootstrap.servers", args[0]);
        try (Admin admin = Admin.create(props)) {
            TopicPartition tp = new TopicPartition(args[1], Integer.parseInt(args[2]));
            List<Integer> replicas = new ArrayList<>();
            for (String r : args[3].split(",")) replicas.add(Integer.parseInt(r));
            admin.alterPartitionReassignments(Map.of(tp, Optional.of(new NewPartitionReassignment(replicas))))
                 .all().get();
            while (!admin.listPartitionReassignments().reassignments().get().isEmpty()) Thread.sleep(100);
            try {
                admin.alterPartitionReassignments(Map.of(tp, Optional.empty())).all().get();
                System.out.println("cancel: accepted");
            } catch (Exception e) {
                System.out.println("cancel: " + e.getCause().getClass().getSimpleName());
            }
            System.out.println("replicas: " + admin.describeTopics(List.of(args[1])).allTopicNames().get()
                .get(args[1]).partitions().get(tp.partition()).replicas().stream().map(n -> n.id()).toList());
        }
    }
}
"""


def test_java_admin_client_reassigns(tmp_path, zk_connect):
    """Kafka's own AdminClient (kafka-clients 3.9.2): alterPartitionReassignments, waiting on
    listPartitionReassignments, a cancel with nothing to cancel, describeTopics after."""
    import subprocess

    from compat_tests.clients.java_client import _toolchain

    command, missing = _toolchain()
    if missing:
        pytest.skip(f"java client unavailable: {missing}")
    classpath = command[command.index("-cp") + 1]
    source = tmp_path / "Reassign.java"
    source.write_text(JAVA_REASSIGN)
    with Cluster(tmp_path, zk_connect, 3) as cluster:
        create(cluster, "viajava", {0: [1, 2]})
        count = fill(cluster, "viajava", 200_000)
        result = subprocess.run([command[0], "-cp", classpath, str(source), cluster.bootstrap, "viajava", "0", "3,1"],
                                capture_output=True, text=True, timeout=90)
        assert result.returncode == 0, result.stderr[-3000:]
        assert result.stdout.split("\n")[:2] == ["cancel: NoReassignmentInProgressException", "replicas: [3, 1]"], \
            result.stdout
        cluster.wait_for(settled(cluster, "viajava", 0, [3, 1]), 30, "viajava-0 on [3, 1]")
        assert len(read_topic(cluster.bootstrap, "viajava", count)) == count
