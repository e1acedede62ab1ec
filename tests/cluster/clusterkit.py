"""A cluster of Trafka broker processes on loopback ports, sharing one real ZooKeeper."""

from __future__ import annotations

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
                 racks: list[str] | None = None) -> None:
        """`racks`: broker.rack of broker 1, 2, ... (none when not given)."""
        self.zk_connect = zk_connect
        self.brokers: dict[int, BrokerProcess] = {}
        for node in range(1, size + 1):
            port = free_port()
            rack = ("--set", f"broker.rack={racks[node - 1]}") if racks else ()
            self.brokers[node] = BrokerProcess(root / f"broker-{node}" / "data", "--node-id", str(node),
                                               "--set", f"zookeeper.connect={zk_connect}", *FAST, *rack, *extra,
                                               port=port)

    def start(self) -> "Cluster":
        for broker in self.brokers.values():
            broker.start()
        self.wait_for(lambda: len(self.metadata()["brokers"]) == len(self.brokers), 30, "all brokers registered")
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
