"""Racks: replicas spread across racks by CreateTopics, and fetch from the closest replica
(KIP-392) with `replica.selector.class` rack-aware and the consumer's `client.rack`.

Three brokers in racks, a real ZooKeeper, stock clients (confluent-kafka AdminClient,
producer and consumer: librdkafka follows preferred_read_replica), and raw Fetch requests
for what the clients hide: the leader's preferred_read_replica answer and the follower's
own reads up to its high watermark.
"""

from __future__ import annotations

import json
import random
import time

import confluent_kafka as ck
import pytest
from confluent_kafka.admin import AdminClient, NewTopic

from server.cluster.controller import assign_replicas
from server.config import ConfigError, load_config
from tests.cluster.clusterkit import Cluster
from wire.errors import ErrorCode
from wire.records import iter_headers
from wire.registry import ApiKey

RACK_AWARE = ("--set", "replica.selector.class=org.apache.kafka.common.replica.RackAwareReplicaSelector")


def _create(bootstrap: str, *topics: NewTopic) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    for future in admin.create_topics(list(topics), operation_timeout=20).values():
        future.result(timeout=30)


def test_rack_aware_assignment_every_start():
    """Kafka's AdminUtils guarantees, for every random start: replicas ≥ racks puts one in
    every rack; fewer puts at most one per rack; no broker twice."""
    racks = {1: "a", 2: "a", 3: "b", 4: "c", 5: "c", 6: "c"}
    for seed in range(100):
        for brokers, rf in (([1, 2, 3], 2), ([1, 2, 3], 3), ([1, 3, 4], 2), ([1, 2, 3, 4, 5, 6], 2),
                            ([1, 2, 3, 4, 5, 6], 3), ([1, 2, 3, 4, 5, 6], 4)):
            plan = assign_replicas([(b, racks[b]) for b in brokers], 12, rf, rng=random.Random(seed))
            wanted = min(rf, len({racks[b] for b in brokers}))
            for replicas in plan.values():
                assert len(set(replicas)) == rf and len({racks[r] for r in replicas}) == wanted, (seed, plan)


def test_replica_selector_class_names():
    """Kafka's class name, or empty (Kafka's null); anything else stops the broker at startup."""
    name = "org.apache.kafka.common.replica.RackAwareReplicaSelector"
    assert load_config(environ={}, overrides={"replica.selector.class": name}).get("replica.selector.class") == name
    assert load_config(environ={}).get("replica.selector.class") == ""
    with pytest.raises(ConfigError, match="replica.selector.class"):
        load_config(environ={}, overrides={"replica.selector.class": "com.example.NearestSelector"})


def test_create_topics_puts_replicas_in_every_rack(tmp_path, zk_connect):
    """Racks a, a, b: with two replicas every partition has one in each rack (Kafka's
    rack-aware AdminUtils; a plain round-robin puts some in rack a twice)."""
    with Cluster(tmp_path, zk_connect, 3, racks=["a", "a", "b"]) as cluster:
        _create(cluster.bootstrap, NewTopic("spread", 12, 2), NewTopic("everywhere", 3, 3))
        meta = cluster.wait_for(lambda: (lambda m: m if all(len(t["partitions"]) in (3, 12) and t["error_code"] == 0
                                                          for t in m["topics"]) else None)(
            cluster.metadata(["spread", "everywhere"])), 30, "both topics in the metadata")
        rack = {b["node_id"]: b["rack"] for b in meta["brokers"]}
        assert rack == {1: "a", 2: "a", 3: "b"}
        topics = {t["name"]: t["partitions"] for t in meta["topics"]}
        for p in topics["spread"]:
            assert sorted(rack[r] for r in p["replica_nodes"]) == ["a", "b"], p
        leaders = [p["leader_id"] for p in topics["spread"]]
        assert set(leaders) == {1, 2, 3}, leaders  # leaders still spread over the brokers
        for p in topics["everywhere"]:
            assert sorted(p["replica_nodes"]) == [1, 2, 3], p


def _fetch(cluster: Cluster, node: int, topic: str, offset: int, *, version: int = 11, rack: str = "",
           epoch: int = -1, max_wait_ms: int = 0) -> dict:
    body = {"cluster_id": None, "replica_id": -1, "replica_state": {"replica_id": -1, "replica_epoch": -1},
            "max_wait_ms": max_wait_ms, "min_bytes": 1, "max_bytes": 1 << 20, "isolation_level": 0,
            "session_id": 0, "session_epoch": -1, "forgotten_topics_data": [], "rack_id": rack,
            "topics": [{"topic": topic, "topic_id": None,
                        "partitions": [{"partition": 0, "current_leader_epoch": epoch, "fetch_offset": offset,
                                        "last_fetched_epoch": -1, "log_start_offset": -1,
                                        "partition_max_bytes": 1 << 20, "replica_directory_id": None}]}]}
    return cluster.call(ApiKey.FETCH, version, body, node)["responses"][0]["partitions"][0]


def _offsets(records: bytes) -> list[int]:
    return [o for _pos, h in iter_headers(bytearray(records or b""))
            for o in range(h.base_offset, h.base_offset + h.last_offset_delta + 1)]


def _produce(bootstrap: str, topic: str, values: list[bytes]) -> None:
    producer = ck.Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True, "acks": "all",
                            "linger.ms": 5})
    failed = []
    for value in values:
        producer.produce(topic, value=value, partition=0,
                         on_delivery=lambda err, _msg: failed.append(err) if err is not None else None)
        producer.poll(0)
    assert producer.flush(30) == 0
    assert failed == []


def test_consumer_reads_from_the_follower_in_its_rack(tmp_path, zk_connect):
    with Cluster(tmp_path, zk_connect, 3, *RACK_AWARE, racks=["a", "b", "c"]) as cluster:
        _create(cluster.bootstrap, NewTopic("near", 1, 3))
        info = cluster.wait_for(lambda: (lambda ps: ps[0] if all(p and len(p["isr_nodes"]) == 3 for p in ps)
                                         and len({(p["leader_id"], p["leader_epoch"]) for p in ps}) == 1
                                         else None)([cluster.partition("near", 0, n) for n in (1, 2, 3)]),
                                30, "a full ISR known to every broker")
        leader, epoch = info["leader_id"], info["leader_epoch"]
        follower = min(r for r in info["replica_nodes"] if r != leader)
        rack = "abc"[follower - 1]
        first = [b"m%04d" % i for i in range(300)]
        _produce(cluster.bootstrap, "near", first)
        # the follower has everything once its high watermark (from its next fetch) says so
        cluster.wait_for(lambda: _fetch(cluster, follower, "near", 300, rack=rack)["high_watermark"] == 300,
                         30, "the follower's high watermark reaches 300")

        # The leader sends a consumer in the follower's rack there: no records, at once.
        part = _fetch(cluster, leader, "near", 0, rack=rack, epoch=epoch, max_wait_ms=5000)
        assert part["error_code"] == 0 and part["preferred_read_replica"] == follower, part
        assert _offsets(part["records"]) == [] and part["high_watermark"] == 300
        # ...but reads itself for a client in its own rack, with no rack, or in a rack of no replica
        for other in ("abc"[leader - 1], "", "z"):
            part = _fetch(cluster, leader, "near", 0, rack=other)
            assert part["preferred_read_replica"] == -1 and _offsets(part["records"])[:1] == [0], (other, part)

        # The follower serves a consumer's Fetch v11+ up to its high watermark...
        part = _fetch(cluster, follower, "near", 0, rack=rack, epoch=epoch)
        assert part["error_code"] == 0 and part["preferred_read_replica"] == -1, part
        got = _offsets(part["records"])
        assert got[0] == 0 and got[-1] < 300 and got == list(range(len(got))), got[-3:]
        # ...not older fetches (no client metadata: leader only), nor past its log end
        assert _fetch(cluster, follower, "near", 0, version=10)["error_code"] == ErrorCode.NOT_LEADER_OR_FOLLOWER
        assert _fetch(cluster, follower, "near", 400, rack=rack)["error_code"] == ErrorCode.OFFSET_OUT_OF_RANGE
        # ListOffsets stays with the leader
        assert cluster.list_offset("near", -1, follower) == -1
        assert cluster.list_offset("near", -1, leader) == 300

        # librdkafka with client.rack = the follower's rack reads all of it, once, from the follower
        fetched_from: set[int] = set()

        def stats(text: str) -> None:
            p = json.loads(text).get("topics", {}).get("near", {}).get("partitions", {}).get("0")
            if p is not None and p.get("broker", -1) >= 0:
                fetched_from.add(p["broker"])

        consumer = ck.Consumer({"bootstrap.servers": cluster.bootstrap, "group.id": "near-reader",
                                "client.rack": rack, "enable.auto.commit": False, "auto.offset.reset": "earliest",
                                "statistics.interval.ms": 200, "stats_cb": stats})
        consumer.assign([ck.TopicPartition("near", 0, ck.OFFSET_BEGINNING)])
        second = [b"n%04d" % i for i in range(200)]
        seen: list[tuple[int, bytes]] = []
        produced_second = False
        deadline = time.monotonic() + 60
        try:
            while time.monotonic() < deadline and len(seen) < 500:
                msg = consumer.poll(0.2)
                if msg is not None and msg.error() is None:
                    seen.append((msg.offset(), msg.value()))
                if not produced_second and len(seen) >= 150:
                    _produce(cluster.bootstrap, "near", second)  # while the consumer reads the follower
                    produced_second = True
            cluster.wait_for(lambda: follower in fetched_from, 10, "statistics naming the fetching broker")
            settle = time.monotonic() + 1.5
            while time.monotonic() < settle:  # nothing more (no duplicates after the end)
                msg = consumer.poll(0.2)
                if msg is not None and msg.error() is None:
                    seen.append((msg.offset(), msg.value()))
        finally:
            consumer.close()
        assert [o for o, _v in seen] == list(range(500))
        assert [v for _o, v in seen] == first + second
        assert follower in fetched_from, fetched_from


def test_java_consumer_reads_from_the_follower_in_its_rack(tmp_path, zk_connect):
    """Apache Kafka's own consumer (kafka-clients 3.9.2, compat_tests' JVM adapter) with
    client.rack: told the follower by the leader (its log line), it reads everything once."""
    from compat_tests.clients.base import NotSupportedByClient
    from compat_tests.clients.java_client import JavaClient

    with Cluster(tmp_path, zk_connect, 3, *RACK_AWARE, racks=["a", "b", "c"]) as cluster:
        try:
            java = JavaClient(cluster.bootstrap)
        except NotSupportedByClient as exc:
            pytest.skip(str(exc))
        _create(cluster.bootstrap, NewTopic("near", 1, 3))
        info = cluster.wait_for(lambda: (lambda p: p if p and len(p["isr_nodes"]) == 3 else None)(
            cluster.partition("near", 0)), 30, "a full ISR")
        leader = info["leader_id"]
        follower = max(r for r in info["replica_nodes"] if r != leader)
        values = [b"j%04d" % i for i in range(400)]
        _produce(cluster.bootstrap, "near", values)
        # A new partition's ISR is whole from its creation: wait until the follower itself knows
        # it follows this leader (its own metadata), or the consumer is sent to it too early
        # (one CI run timed out here).
        cluster.wait_for(lambda: (lambda p: p if p and p["leader_id"] == leader and len(p["isr_nodes"]) == 3
                                  else None)(cluster.partition("near", 0, follower)), 30, "the follower's metadata")
        try:
            records = java.consume("near", 400, start={0: 0}, timeout=40, client_rack="abc"[follower - 1])
        finally:
            java.close()
        assert [r.offset for r in records] == list(range(400))
        assert [r.value for r in records] == values
        redirect = f"consumer compat-java in rack {'abc'[follower - 1]} sent to its rack's replicas: near-0->{follower}"
        assert redirect in cluster.brokers[leader].log_path.read_text(errors="replace")
