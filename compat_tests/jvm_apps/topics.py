"""The Python side of the JVM-program scenarios: topics made, records fed in and read back
with confluent-kafka (librdkafka), a client independent of the JVM program under test.

Topics are created with the broker's default replication factor (-1: one on a single
broker, three on the clusters), as an operator's tooling would.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

import confluent_kafka as ck
from confluent_kafka.admin import AdminClient, ConfigResource, NewTopic, ResourceType

TIMEOUT_S = 30.0


@dataclass(frozen=True)
class Rec:
    partition: int
    offset: int
    key: bytes | None
    value: bytes | None
    timestamp: int
    headers: tuple = ()


def admin(bootstrap: str) -> AdminClient:
    return AdminClient({"bootstrap.servers": bootstrap, "socket.timeout.ms": 30000})


def create_topics(bootstrap: str, topics: dict[str, int], configs: dict[str, dict[str, str]] | None = None
                  ) -> None:
    """Create `topics` (name -> partitions), each with its `configs`, and wait until every
    partition has a leader."""
    client = admin(bootstrap)
    futures = client.create_topics(
        [NewTopic(name, num_partitions=n, replication_factor=-1, config=(configs or {}).get(name, {}))
         for name, n in topics.items()], request_timeout=TIMEOUT_S)
    for future in futures.values():
        future.result(TIMEOUT_S)
    deadline = time.monotonic() + TIMEOUT_S
    while True:
        md = client.list_topics(timeout=TIMEOUT_S)
        ready = [name for name, n in topics.items() if name in md.topics
                 and md.topics[name].error is None and len(md.topics[name].partitions) == n
                 and all(p.leader >= 0 for p in md.topics[name].partitions.values())]
        if len(ready) == len(topics):
            return
        if time.monotonic() > deadline:
            raise AssertionError(f"topics without leaders after {TIMEOUT_S}s: "
                                 f"{sorted(set(topics) - set(ready))}")
        time.sleep(0.2)


def topic_configs(bootstrap: str, topic: str) -> dict[str, tuple[str | None, bool]]:
    """DescribeConfigs of a topic: name -> (value, is_default)."""
    resource = ConfigResource(ResourceType.TOPIC, topic)
    client = admin(bootstrap)  # held until the answer came: a collected client drops it
    entries = client.describe_configs([resource])[resource].result(TIMEOUT_S)
    return {name: (e.value, e.is_default) for name, e in entries.items()}


def partitions(bootstrap: str, topic: str) -> list[int]:
    md = admin(bootstrap).list_topics(topic=topic, timeout=TIMEOUT_S)
    return sorted(md.topics[topic].partitions)


class Producer:
    """An idempotent acks=all producer; `send` waits until every record is acknowledged."""

    def __init__(self, bootstrap: str) -> None:
        self.producer = ck.Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True,
                                     "acks": "all", "linger.ms": 5})

    def send(self, topic: str, records: list[tuple], partition: int | None = None) -> None:
        """Send (key, value, timestamp ms or None[, headers]) in order; raises on any failed
        delivery."""
        failed: list = []

        def report(err, msg):
            if err is not None:
                failed.append(err)

        for key, value, ts, *headers in records:
            kwargs = {"timestamp": ts} if ts is not None else {}
            if headers:
                kwargs["headers"] = list(headers[0])
            if partition is not None:
                kwargs["partition"] = partition
            while True:
                try:
                    self.producer.produce(topic, value, key, on_delivery=report, **kwargs)
                    break
                except BufferError:
                    self.producer.poll(0.1)
        left = self.producer.flush(TIMEOUT_S)
        assert left == 0 and not failed, f"produce to {topic}: {left} undelivered, errors {failed[:3]}"


def produce(bootstrap: str, topic: str, records: list[tuple], partition: int | None = None) -> None:
    """Send (key, value, timestamp ms or None[, headers]) in order with a producer of its own."""
    Producer(bootstrap).send(topic, records, partition)


def end_offsets(bootstrap: str, topic: str, isolation_level: str = "read_uncommitted") -> dict[int, int]:
    """Partition -> the high watermark (read_uncommitted) or last stable offset (read_committed)."""
    consumer = ck.Consumer({"bootstrap.servers": bootstrap, "group.id": "unused",
                            "isolation.level": isolation_level, "enable.auto.commit": False})
    try:
        tps = [ck.TopicPartition(topic, p, ck.OFFSET_END) for p in partitions(bootstrap, topic)]
        out = {}
        for tp in tps:
            _low, high = consumer.get_watermark_offsets(tp, timeout=TIMEOUT_S, cached=False)
            out[tp.partition] = high
        return out
    finally:
        consumer.close()


def read_all(bootstrap: str, topic: str, *, isolation_level: str = "read_committed",
             timeout: float = 60.0) -> list[Rec]:
    """Every record of `topic` from the beginning up to the end of each partition (the last
    stable offset under read_committed), in offset order per partition."""
    consumer = ck.Consumer({"bootstrap.servers": bootstrap, "group.id": "unused",
                            "isolation.level": isolation_level, "enable.auto.commit": False,
                            "enable.partition.eof": True, "fetch.wait.max.ms": 100})
    out: list[Rec] = []
    try:
        parts = partitions(bootstrap, topic)
        consumer.assign([ck.TopicPartition(topic, p, ck.OFFSET_BEGINNING) for p in parts])
        at_end: set[int] = set()
        deadline = time.monotonic() + timeout
        while len(at_end) < len(parts):
            if time.monotonic() > deadline:
                raise AssertionError(f"{topic}: partitions {sorted(set(parts) - at_end)} not read "
                                     f"to their end in {timeout:.0f}s ({len(out)} records read)")
            for msg in consumer.consume(num_messages=1000, timeout=0.5):
                err = msg.error()
                if err is None:
                    at_end.discard(msg.partition())
                    out.append(_rec(msg))
                elif err.code() == ck.KafkaError._PARTITION_EOF:
                    at_end.add(msg.partition())
                elif not err.retriable() and err.code() not in (ck.KafkaError._TRANSPORT,
                                                                 ck.KafkaError._ALL_BROKERS_DOWN):
                    raise AssertionError(f"reading {topic}: {err.name()}: {err.str()}")
        return out
    finally:
        consumer.close()


def _rec(msg) -> Rec:
    return Rec(msg.partition(), msg.offset(), msg.key(), msg.value(), msg.timestamp()[1],
               tuple(msg.headers() or ()))


def consume_group(bootstrap: str, group: str, topic: str, n: int, timeout: float = 60.0,
                  *, expect_more: bool = True) -> list[Rec]:
    """As an application's consumer would: subscribe to `topic` in `group` (classic
    protocol, auto.offset.reset=earliest), read `n` records, commit what was read and
    close (a LeaveGroup). When `expect_more` is False, wait a few more seconds to make sure
    nothing beyond the `n` arrives (it would be in the result)."""
    consumer = ck.Consumer({"bootstrap.servers": bootstrap, "group.id": group,
                            "auto.offset.reset": "earliest", "enable.auto.commit": False,
                            "session.timeout.ms": 6000, "fetch.wait.max.ms": 100})
    out: list[Rec] = []
    try:
        consumer.subscribe([topic])
        deadline = time.monotonic() + timeout
        while len(out) < n and time.monotonic() < deadline:
            out += _take(consumer, n - len(out), 0.5)
        if not expect_more:
            quiet = time.monotonic() + 3.0
            while time.monotonic() < quiet:
                out += _take(consumer, 1000, 0.5)
        if out:
            consumer.commit(asynchronous=False)
        return out
    finally:
        consumer.close()


def _take(consumer, n: int, timeout: float) -> list[Rec]:
    out = []
    for msg in consumer.consume(num_messages=n, timeout=timeout):
        err = msg.error()
        if err is None:
            out.append(_rec(msg))
        elif not err.retriable() and err.code() not in (ck.KafkaError._TRANSPORT,
                                                         ck.KafkaError._ALL_BROKERS_DOWN,
                                                         ck.KafkaError._PARTITION_EOF):
            raise AssertionError(f"consuming: {err.name()}: {err.str()}")
    return out


def committed(bootstrap: str, group: str, topic: str) -> dict[int, int | None]:
    """The group's committed offset per partition of `topic` (None: none)."""
    consumer = ck.Consumer({"bootstrap.servers": bootstrap, "group.id": group,
                            "enable.auto.commit": False})
    try:
        tps = consumer.committed([ck.TopicPartition(topic, p) for p in partitions(bootstrap, topic)],
                                 timeout=TIMEOUT_S)
        return {tp.partition: tp.offset if tp.offset >= 0 else None for tp in tps}
    finally:
        consumer.close()
