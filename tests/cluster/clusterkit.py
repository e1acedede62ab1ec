"""A cluster of Trafka broker processes on loopback ports, sharing one real ZooKeeper."""

from __future__ import annotations

import threading
import time
from pathlib import Path

import confluent_kafka as ck

from tests.brokerproc import BrokerProcess, free_port, raw_request
from wire.registry import ApiKey

FAST = ("--set", "replica.lag.time.max.ms=3000", "--set", "zookeeper.session.timeout.ms=6000",
        "--set", "replica.fetch.wait.max.ms=200", "--set", "replica.fetch.backoff.ms=200",
        "--set", "offsets.topic.num.partitions=3", "--set", "transaction.state.log.num.partitions=3")


class Cluster:
    def __init__(self, root: Path, zk_connect: str, size: int = 3, *extra: str,
                 racks: list[str] | None = None, http: bool = False) -> None:
        """`racks`: broker.rack of broker 1, 2, ... (none when not given); `http`: each
        broker serves /metrics on a free port of its own (BrokerProcess.http_url)."""
        self.zk_connect = zk_connect
        self.brokers: dict[int, BrokerProcess] = {}
        for node in range(1, size + 1):
            port = free_port()
            rack = ("--set", f"broker.rack={racks[node - 1]}") if racks else ()
            self.brokers[node] = BrokerProcess(root / f"broker-{node}" / "data", "--node-id", str(node),
                                               "--set", f"zookeeper.connect={zk_connect}", *FAST, *rack, *extra,
                                               port=port, http=http)

    def start(self) -> "Cluster":
        for broker in self.brokers.values():
            broker.start()
        # Every broker, not just the first: a broker answers from its metadata cache, which the
        # controller's UpdateMetadata fills a moment after it registers (Kafka's ZkAdminManager
        # too places a new topic's replicas over the brokers its cache knows; before that first
        # UpdateMetadata it answers CreateTopics with INVALID_REPLICATION_FACTOR).
        for node in self.brokers:
            self.wait_for(lambda: len(self.metadata(node=node)["brokers"]) == len(self.brokers), 30,
                          f"broker {node} knows every broker")
        return self

    def stop(self) -> None:
        for broker in self.brokers.values():
            try:
                broker.stop()
            except Exception:
                broker.kill()

    def __enter__(self) -> "Cluster":
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()

    @property
    def bootstrap(self) -> str:
        return ",".join(b.bootstrap for b in self.brokers.values() if b.proc is not None and b.proc.poll() is None)

    def any_live(self) -> BrokerProcess:
        for broker in self.brokers.values():
            if broker.proc is not None and broker.proc.poll() is None:
                return broker
        raise RuntimeError("no live broker")

    def call(self, key: ApiKey, version: int, body: dict, node: int | None = None) -> dict:
        broker = self.brokers[node] if node is not None else self.any_live()
        return raw_request("127.0.0.1", broker.port, key, version, body)

    def metadata(self, topics: list[str] | None = None, node: int | None = None) -> dict:
        body = {"topics": None if topics is None else [{"name": t, "topic_id": None} for t in topics],
                "allow_auto_topic_creation": False, "include_topic_authorized_operations": False}
        return self.call(ApiKey.METADATA, 12, body, node)

    def partition(self, topic: str, index: int, node: int | None = None) -> dict | None:
        for t in self.metadata([topic], node)["topics"]:
            for p in t["partitions"]:
                if p["partition_index"] == index:
                    return p
        return None

    def list_offset(self, topic: str, timestamp: int, node: int, partition: int = 0) -> int:
        """ListOffsets at `node`: -1 latest (the high watermark), -2 earliest (the log start);
        -1 also when the broker answers with an error."""
        body = {"replica_id": -1, "isolation_level": 0,
                "topics": [{"name": topic, "partitions": [{"partition_index": partition, "current_leader_epoch": -1,
                                                           "timestamp": timestamp}]}]}
        part = self.call(ApiKey.LIST_OFFSETS, 7, body, node)["topics"][0]["partitions"][0]
        return part["offset"] if part["error_code"] == 0 else -1

    def create_topic(self, name: str, partitions: int, rf: int, configs: dict[str, str] | None = None) -> dict:
        body = {"topics": [{"name": name, "num_partitions": partitions, "replication_factor": rf, "assignments": [],
                            "configs": [{"name": k, "value": v} for k, v in (configs or {}).items()]}],
                "timeout_ms": 20000, "validate_only": False}
        return self.call(ApiKey.CREATE_TOPICS, 5, body)["topics"][0]

    @staticmethod
    def wait_for(condition, timeout: float, what: str, interval: float = 0.1):
        deadline = time.monotonic() + timeout
        last = None
        while time.monotonic() < deadline:
            try:
                last = condition()
                if last:
                    return last
            except (OSError, KeyError, IndexError, TypeError):
                pass
            time.sleep(interval)
        raise AssertionError(f"timed out waiting for {what} (last: {last!r})")


def read_topic(bootstrap: str, topic: str, expected: int, timeout: float = 60, *,
               isolation: str = "read_uncommitted", settle_s: float = 2.0) -> list[tuple[int, int, bytes]]:
    """(partition, offset, value) of everything in `topic` from the start, waiting for
    `expected` records and then `settle_s` longer for anything that should not be there.

    Assigned, not subscribed: a group would need __consumer_offsets, which Kafka does not
    create on fewer live brokers than its replication factor (these reads often run after
    brokers were stopped)."""
    consumer = ck.Consumer({"bootstrap.servers": bootstrap, "group.id": f"check-{time.time_ns()}",
                            "auto.offset.reset": "earliest", "enable.auto.commit": False,
                            "isolation.level": isolation})
    partitions = consumer.list_topics(topic, timeout=30).topics[topic].partitions
    consumer.assign([ck.TopicPartition(topic, p, ck.OFFSET_BEGINNING) for p in partitions])
    out: list[tuple[int, int, bytes]] = []
    deadline = time.monotonic() + timeout
    idle_until = None
    try:
        while time.monotonic() < deadline:
            msg = consumer.poll(0.5)
            if msg is None:
                if len(out) >= expected:
                    idle_until = idle_until or time.monotonic() + settle_s
                    if time.monotonic() > idle_until:
                        break
                continue
            if msg.error() is None:
                out.append((msg.partition(), msg.offset(), msg.value()))
    finally:
        consumer.close()
    return out


def whole_isrs(cluster: Cluster, topic: str, partitions: int, node: int | None = None, size: int = 3):
    """A wait_for condition: every partition of `topic` has a leader and `size` replicas in
    its ISR (as `node`'s Metadata says, or any live broker's)."""
    def check():
        parts = [cluster.partition(topic, p, node) for p in range(partitions)]
        return all(p and p["leader_id"] >= 0 and len(p["isr_nodes"]) == size for p in parts)
    return check


class Workload:
    """What the fault tests run through a fault: an idempotent acks=all producer writing
    numbered values as fast as `pace_s` allows, and a consumer group reading them, each on
    a thread. `check()` then asserts Kafka's promise: every acknowledged value is in the
    log once, at the offset it was acknowledged at, and the group received it.

    Use as a context manager around the fault; `acked` and `failed` may be read meanwhile
    (e.g. to wait for progress after a failover)."""

    def __init__(self, cluster: Cluster, topic: str, *, pace_s: float = 0.004, group: bool = True,
                 partitions: int | None = None, producer_config: dict | None = None) -> None:
        """`partitions`: write them round-robin (every partition gets writes through the
        fault) instead of librdkafka's sticky partitioner."""
        self.cluster = cluster
        self.topic = topic
        self.pace_s = pace_s
        self.group = group
        self.partitions = partitions
        self.producer_config = producer_config or {}
        self.acked: dict[bytes, tuple[int, int]] = {}
        self.failed: list = []
        self.verifier = VerifyingGroup(cluster, [topic]) if group else None
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._produce, daemon=True)

    def __enter__(self) -> "Workload":
        self._thread.start()
        if self.verifier:
            self.verifier.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        self._thread.join(180)
        if self.verifier:
            self.verifier.stop(self.acked, catch_up=exc[0] is None)

    @property
    def consumed(self) -> set[bytes]:
        return self.verifier.consumed if self.verifier else set()

    def wait_for_progress(self, count: int = 100, timeout: float = 40) -> None:
        """Wait until `count` more values are acknowledged than now."""
        before = len(self.acked)
        Cluster.wait_for(lambda: len(self.acked) >= before + count, timeout,
                         f"{count} more acknowledged writes")

    def _produce(self) -> None:
        config = {"bootstrap.servers": self.cluster.bootstrap, "acks": "all", "enable.idempotence": True,
                  "linger.ms": 5, "message.timeout.ms": 120000, **self.producer_config}
        producer = ck.Producer(config)

        def report(err, msg) -> None:
            if err is None:
                self.acked[msg.value()] = (msg.partition(), msg.offset())
            else:
                self.failed.append(err)
        i = 0
        while not self._stop.is_set():
            if self.partitions:
                producer.produce(self.topic, value=b"w%07d" % i, partition=i % self.partitions, on_delivery=report)
            else:
                producer.produce(self.topic, value=b"w%07d" % i, on_delivery=report)
            producer.poll(0)
            i += 1
            time.sleep(self.pace_s)
        producer.flush(120)

    def check(self, *, allow_failed: bool = False) -> int:
        """Assert nothing acknowledged was lost, moved or duplicated, and the group read it
        all; returns how many acknowledged values were checked."""
        if not allow_failed:
            assert not self.failed, f"{len(self.failed)} failed deliveries, e.g. {self.failed[:3]}"
        assert self.acked, "nothing was acknowledged"
        records = read_topic(self.cluster.bootstrap, self.topic, len(self.acked))
        values = [v for _p, _o, v in records]
        assert len(values) == len(set(values)), "duplicates in the log"
        where = {v: (p, o) for p, o, v in records}
        missing = [v for v in self.acked if v not in where]
        assert not missing, f"{len(missing)} acknowledged values lost, e.g. {missing[:3]}"
        # librdkafka acknowledges a record implicitly, without an offset, when a later batch
        # of its partition succeeded while this one was being retried (rd_kafka_dr_implicit_ack,
        # after a leader change): those must be there; the others at the offset acknowledged.
        moved = [v for v, at in self.acked.items() if at[1] is not None and at[1] >= 0 and where[v] != at]
        assert not moved, f"acknowledged at one offset, stored at another: {moved[:3]}"
        if self.verifier:
            self.verifier.check(self.acked)
        return len(self.acked)


class VerifyingGroup:
    """A consumer group (one librdkafka consumer on a thread, auto-committing) reading
    `topics` from the earliest offset through a fault: `check(acked)` asserts it received
    every acknowledged value. Kept apart from the producers so every fault test can add it."""

    def __init__(self, cluster: Cluster, topics: list[str], group_id: str | None = None) -> None:
        self.cluster = cluster
        self.topics = topics
        self.group_id = group_id or "verify-" + "-".join(topics)
        self.consumed: set[bytes] = set()
        self.errors: list = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def start(self) -> None:
        self._thread.start()

    def stop(self, acked, *, catch_up: bool = True, timeout: float = 60) -> None:
        """Stop; first (catch_up) wait up to `timeout` for it to receive what was acknowledged."""
        deadline = time.monotonic() + timeout
        while catch_up and time.monotonic() < deadline and not set(acked) <= self.consumed \
                and self._thread.is_alive():
            time.sleep(0.2)
        self._stop.set()
        self._thread.join(60)

    def _run(self) -> None:
        try:
            consumer = ck.Consumer({"bootstrap.servers": self.cluster.bootstrap, "group.id": self.group_id,
                                    "auto.offset.reset": "earliest", "enable.auto.commit": True,
                                    "auto.commit.interval.ms": 500})
            consumer.subscribe(self.topics)
            try:
                while not self._stop.is_set():
                    msg = consumer.poll(0.2)
                    if msg is None:
                        continue
                    if msg.error() is None:
                        self.consumed.add(msg.value())
                    else:
                        self.errors.append(msg.error())
            finally:
                consumer.close()
        except Exception as exc:  # recorded for check(): a dead thread must not pass as "read nothing yet"
            self.errors.append(repr(exc))

    def check(self, acked) -> None:
        unread = [v for v in acked if v not in self.consumed]
        assert not unread, (f"the group never received {len(unread)} acknowledged values, e.g. {unread[:3]}; "
                            f"it received {len(self.consumed)} in all; consumer errors: {self.errors[:5]}")
