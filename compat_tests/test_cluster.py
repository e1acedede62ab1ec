"""A 3-broker cluster (RF=3, min.insync.replicas=2, one real ZooKeeper) through every client,
Trafka's (`trafka-cluster`) and Apache Kafka 3.9's in ZooKeeper mode (`kafka-cluster`): data spread over leaders on different brokers, a group coordinator that is not the
bootstrap broker, the partition leader SIGKILLed under the client's idempotent acks=all
producer, the controller SIGKILLed, a stopped follower catching up.

The scenarios run against the broker kinds `kafka-cluster` and `trafka-cluster` only (the
`broker_kinds` marker), each whenever it or its base kind (`kafka`, `trafka`) is among
`--broker`'s kinds; each cluster is shared
by the session (the broker pool) and every scenario leaves it healthy (`heal()`: all three
brokers up, a controller, every partition led with its full ISR), so a failure in one does
not cascade. Failures are injected with the cluster object (`broker.kill_leader(...)`, ...),
never through a client, and state (leaders, ISRs, the controller) is read with raw Metadata
requests, so what a client library caches cannot hide or fake a broker's behaviour.

What the client under test is asked to do is what an application does: produce (acks=all,
idempotent), consume, commit and fetch offsets. Every check is exact: each acknowledged
record read back once, at the offset its producer was told, nothing else in the log.
"""

from __future__ import annotations

import threading
import time

import pytest

from compat_tests import kafka_wire
from compat_tests.clients.base import Client, ClientError, Message, NotSupportedByClient
from compat_tests.helpers import assert_exact, unique_name

pytestmark = [pytest.mark.broker_kinds("kafka-cluster", "trafka-cluster"), pytest.mark.timeout(180)]

LEADER_KILLS = 2  # SIGKILLs of the leader per client, each followed by the broker's restart
BATCH = 25  # records per produce call of the background producer
PROGRESS = 40  # acknowledged records that prove the producer moves on, before and after a kill
OFFSETS_PARTITIONS = 3  # offsets.topic.num.partitions the cluster runs with (brokers.py FAST)


@pytest.fixture(autouse=True)
def leave_healthy(broker):
    """After every scenario, pass or fail: all brokers up, every ISR full."""
    yield
    broker.heal()


def _produce(client: Client, setup: Client, topic: str, messages: list[Message]):
    """Produce acks=all, idempotent; returns (partition, offset) per message, or None when
    the client reports no offsets (kcat: then its exit status is the acknowledgement)."""
    deliveries = client.produce(topic, messages, acks="all", idempotent=True)
    if deliveries is None:
        return None
    assert len(deliveries) == len(messages)
    for d, m in zip(deliveries, messages):
        assert d.offset is not None and d.offset >= 0, f"no offset acknowledged for {m}: {d}"
        assert m.partition is None or d.partition == m.partition, (d, m)
    return [(d.partition, d.offset) for d in deliveries]


def _assert_at_acked_offsets(records, messages: list[Message], acked) -> None:
    """Per partition, exactly `messages` in order from offset 0 and, where the client gave
    offsets, each at the one it was acknowledged."""
    expected: dict[int, list[Message]] = {}
    for m in messages:
        expected.setdefault(m.partition, []).append(m)
    assert_exact(records, expected)
    if acked is not None:
        stored = {(r.partition, r.value): r.offset for r in records}
        moved = [(m.value, o, stored.get((p, m.value))) for m, (p, o) in zip(messages, acked)
                 if stored.get((p, m.value)) != o]
        assert not moved, f"acknowledged at one offset, stored at another: {moved[:5]}"


def java_string_hash(text: str) -> int:
    """Java's String.hashCode (over UTF-16 code units) as a signed int32: Kafka places a
    group on __consumer_offsets partition abs(hash) % partitions."""
    data = text.encode("utf-16-be")
    h = 0
    for i in range(0, len(data), 2):
        h = (31 * h + (data[i] << 8 | data[i + 1])) & 0xFFFFFFFF
    return h - (1 << 32) if h >= 1 << 31 else h


# --------------------------------------------------------------------------- scenarios


def test_cluster_leaders_on_three_brokers(client, setup_client, broker, topic_name):
    """A 3-partition topic whose leaders are the three brokers: produced and consumed exactly,
    the client following Metadata to each leader."""
    broker.create_topic(topic_name, 3)
    view = broker.metadata([topic_name])
    leaders = {p: s.leader for p, s in view.topics[topic_name].items()}
    assert sorted(leaders.values()) == [1, 2, 3], f"leaders not spread over the brokers: {leaders}"
    messages = [Message(b"spread-%d-%d" % (p, i), b"k%d" % i, partition=p)
                for p in range(3) for i in range(20)]
    acked = _produce(client, setup_client, topic_name, messages)
    records = client.consume(topic_name, len(messages), timeout=30)
    _assert_at_acked_offsets(records, messages, acked)


def _group_coordinated_elsewhere(broker) -> tuple[str, int]:
    """A fresh group id whose coordinator (the leader of its __consumer_offsets partition)
    is not node 1, the first bootstrap address; FindCoordinator asked of node 1."""
    port = broker.nodes[1].port
    for _ in range(60):
        group = unique_name("g-coord")
        err, node = broker.wait_for(
            lambda: (lambda r: r if r[0] == 0 else None)(
                kafka_wire.find_coordinator_v1(broker.host, port, group)),
            30, f"FindCoordinator({group})")
        if node != 1:
            return group, node
    raise AssertionError("every group id found was coordinated by node 1")


def _consume_commit_resume(client: Client, setup: Client, topic: str, group: str) -> None:
    """10 records in partition 0; the group consumes 4 (and commits), the committed offset
    reads back as 4, an explicit commit moves it to 6 (kcat has none), and the group resumes
    there: every step goes through the group's coordinator."""
    messages = [Message(b"g-%d" % i, partition=0) for i in range(10)]
    setup.produce(topic, messages, acks="all")
    assert_exact(client.consume(topic, 4, group=group, timeout=30), {0: messages[:4]})
    try:
        committed = client.committed(group, topic, [0])
    except NotSupportedByClient:
        committed = setup.committed(group, topic, [0])
    assert committed == {0: 4}
    resume = 4
    try:
        client.commit(group, topic, {0: 6})
        resume = 6
        assert client.committed(group, topic, [0]) == {0: 6}
    except NotSupportedByClient:
        pass  # kcat: its consumer's commit above is the one checked
    assert_exact(client.consume(topic, 10 - resume, group=group, timeout=30),
                 {0: messages[resume:]}, {0: resume})


def test_cluster_group_coordinator_not_bootstrap(client, setup_client, broker, topic_name):
    """Join, commit and fetch offsets of a group whose coordinator is another broker than the
    one the client bootstraps from: the client must find it (FindCoordinator) and talk to it."""
    broker.create_topic(topic_name, 1)
    group, coordinator = _group_coordinated_elsewhere(broker)
    partition = abs(java_string_hash(group)) % OFFSETS_PARTITIONS
    assert broker.partition("__consumer_offsets", partition).leader == coordinator
    _consume_commit_resume(client, setup_client, topic_name, group)


def test_cluster_group_offsets_of_partition_coordinator_does_not_host(
        client, setup_client, broker, topic_name):
    """The same with a partition the coordinator holds no replica of (RF=1 on another broker,
    as with any topic of fewer replicas than brokers): Kafka's coordinator checks a committed
    partition against the cluster's metadata (KafkaApis: metadataCache.contains), not against
    the logs it hosts, so committing and fetching offsets work the same."""
    group, coordinator = _group_coordinated_elsewhere(broker)
    host = next(n for n in sorted(broker.nodes) if n != coordinator)
    broker.create_topic(topic_name, 1, {"min.insync.replicas": "1"}, assignment={0: [host]})
    for node in broker.live_nodes():  # every broker knows the topic: no propagation excuse
        broker.wait_for(lambda: (lambda p: p is not None and p.leader == host)(
            broker.partition(topic_name, 0, node)), 30, f"node {node} to know {topic_name}")
    _consume_commit_resume(client, setup_client, topic_name, group)


class BackgroundProducer:
    """The client's producer in a thread: batches of BATCH records to partition 0, acks=all,
    idempotent, one produce call after another until stopped. `acked` lists what each call
    was acknowledged, in order; a failed call is kept in `errors` (and counts as a failure:
    an idempotent producer must ride through a leader change)."""

    def __init__(self, client: Client, topic: str) -> None:
        self.client, self.topic = client, topic
        self.messages: list[Message] = []
        self.acked: list[tuple[int, int] | None] = []
        self.errors: list[str] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True, name="cluster-producer")
        self._lock = threading.Lock()

    def _run(self) -> None:
        n = 0
        while not self._stop.is_set():
            batch = [Message(b"v-%06d" % (n + i), partition=0) for i in range(BATCH)]
            n += BATCH
            try:
                deliveries = self.client.produce(self.topic, batch, acks="all", idempotent=True)
            except (ClientError, NotSupportedByClient) as exc:
                self.errors.append(f"after {len(self.messages)} acked: {exc}")
                return
            except Exception as exc:  # noqa: BLE001 - library-specific errors, reported
                self.errors.append(f"after {len(self.messages)} acked: {type(exc).__name__}: {exc}")
                return
            with self._lock:
                self.messages += batch
                self.acked += ([(d.partition, d.offset) for d in deliveries]
                               if deliveries is not None else [None] * len(batch))

    def count(self) -> int:
        with self._lock:
            return len(self.messages)

    def wait_progress(self, more_than: int, what: str) -> None:
        deadline = time.monotonic() + 60
        while self.count() <= more_than:
            assert not self.errors, self.errors
            assert time.monotonic() < deadline, f"no acknowledged writes {what} in 60 s"
            time.sleep(0.05)

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(150)
        assert not self._thread.is_alive(), "the producer did not finish its last call"


def test_cluster_leader_killed_under_idempotent_producer(client, setup_client, broker,
                                                         topic_name):
    """The partition leader SIGKILLed LEADER_KILLS times while the client's idempotent acks=all
    producer writes: a new leader is elected each time, the producer carries on, the killed
    broker rejoins the ISR; afterwards every acknowledged record is in the log exactly once,
    at the offset it was acknowledged, and nothing else is."""
    broker.create_topic(topic_name, 1)
    producer = BackgroundProducer(client, topic_name)
    producer.start()
    try:
        for _ in range(LEADER_KILLS):
            producer.wait_progress(producer.count() + PROGRESS, "before the kill")
            killed = broker.kill_leader(topic_name, 0)
            broker.wait_leader(topic_name, 0, not_in=(killed,))
            producer.wait_progress(producer.count() + PROGRESS, "from the new leader")
            broker.start(killed)
            state = broker.wait_isr(topic_name, 0)
            assert killed in state.isr
    finally:
        producer.stop()
    assert not producer.errors, producer.errors
    messages, acked = producer.messages, producer.acked
    records = client.consume(topic_name, len(messages), timeout=60)
    _assert_at_acked_offsets(records, messages, None if acked[0] is None else acked)
    end = setup_client.list_offsets(topic_name, 0, "latest")
    assert end == len(messages), f"log end {end}: records beyond the {len(messages)} acknowledged"


def test_cluster_controller_killed(client, setup_client, broker, topic_name):
    """The controller SIGKILLed: another broker becomes controller and keeps leadership moving
    (partitions leave the dead broker; once it is back, a leader SIGKILLed after is replaced);
    the client's data before and after is all there, exactly."""
    broker.create_topic(topic_name, 3)
    before = [Message(b"before-%d-%d" % (p, i), partition=p) for p in range(3) for i in range(10)]
    acked_before = _produce(client, setup_client, topic_name, before)

    old = broker.kill_controller()
    new = broker.wait_controller(not_in=(old,))
    for p in range(3):
        broker.wait_leader(topic_name, p, not_in=(old,))
    broker.start(old)
    for p in range(3):
        broker.wait_isr(topic_name, p)
    assert broker.metadata().controller_id == new, "the restarted broker took the controller back"

    # A leader on a broker that is not the new controller: the new controller elects.
    view = broker.metadata([topic_name])
    victim_partition = next(p for p, s in sorted(view.topics[topic_name].items()) if s.leader != new)
    killed = broker.kill_leader(topic_name, victim_partition)
    broker.wait_leader(topic_name, victim_partition, not_in=(killed,))

    after = [Message(b"after-%d-%d" % (p, i), partition=p) for p in range(3) for i in range(10)]
    acked_after = _produce(client, setup_client, topic_name, after)
    records = client.consume(topic_name, 60, timeout=30)
    expected = {p: [m for m in before + after if m.partition == p] for p in range(3)}
    assert_exact(records, expected)
    if acked_before is not None:
        stored = {r.value: (r.partition, r.offset) for r in records}
        for m, a in zip(before + after, acked_before + acked_after):
            assert stored[m.value] == a, f"{m.value!r} acknowledged at {a}, stored at {stored[m.value]}"


def test_cluster_stopped_follower_catches_up(client, setup_client, broker, topic_name):
    """A follower stopped while the client writes (the ISR shrinks to 2, acks=all still
    succeeds with min.insync.replicas=2), then started: it rejoins the ISR; made leader, it
    serves exactly what was acknowledged."""
    broker.create_topic(topic_name, 1)
    state = broker.partition(topic_name, 0)
    leader = state.leader
    # The first replica after the leader in assignment order: the one the controller elects
    # when the leader shuts down.
    follower = next(r for r in state.replicas if r != leader)
    broker.stop(follower)
    broker.wait_isr(topic_name, 0, size=2)
    messages = [Message(b"c-%d" % i, b"k%d" % (i % 7), partition=0) for i in range(200)]
    acked = _produce(client, setup_client, topic_name, messages)
    broker.start(follower)
    assert follower in broker.wait_isr(topic_name, 0).isr

    broker.stop(leader)
    if broker.wait_leader(topic_name, 0, not_in=(leader,)) != follower:
        other = next(r for r in state.replicas if r not in (leader, follower))
        broker.stop(other)
        broker.wait_for(lambda: broker.partition(topic_name, 0).leader == follower,
                        broker.SETTLE_S, f"node {follower} leading")
    records = client.consume(topic_name, len(messages), timeout=30)
    _assert_at_acked_offsets(records, messages, acked)
