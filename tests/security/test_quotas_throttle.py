"""Client quota enforcement against a real broker process with stock clients.

The broker runs with quota.window.num=4 (samples of quota.window.size.seconds=1): Kafka's
rate window is then at least 3 s, so the burst a fresh client gets before its first
throttle (quota x 3 s) is over before the measured span starts. Rates are measured by the
test from delivery reports / consumed messages, after a warm-up that fills the window.

- a producer_byte_rate quota holds a confluent-kafka producer to the quota (±20 %), and
  the producer's throttle_cb reports throttle_time_ms; removing the quota restores speed;
- a consumer_byte_rate quota holds a confluent-kafka consumer to the quota (±20 %);
- KIP-219 on the wire: a throttled Produce v7 is answered at once with its
  throttle_time_ms and the connection is muted for that long (the next request waits);
  Produce v5 (before KIP-219) gets its answer after the throttle time instead;
- a request_percentage quota throttles Metadata requests (throttle bounded to one sample);
- a connection_creation_rate on the default ip entity refuses connections over the rate;
- max.connection.creation.rate delays accepts over the broker-wide rate (and serves them).
"""

from __future__ import annotations

import os
import socket
import struct
import time

import pytest
from confluent_kafka import Consumer, Producer

from tests.brokerproc import BrokerProcess, raw_request, recv_exact
from wire import decode_response, encode_request
from wire.records import Record, build_batch

pytestmark = pytest.mark.timeout(90)

ALTER = 49
QUOTA = 200 * 1024  # bytes/s
VALUE = 1000


@pytest.fixture(scope="module")
def broker(tmp_path_factory):
    with BrokerProcess(tmp_path_factory.mktemp("quotas-throttle") / "data", "--set", "quota.window.num=4",
                       "--set", "num.partitions=1") as proc:
        yield proc


def set_quota(broker, entity: list[dict], key: str, value: float | None) -> None:
    body = {"entries": [{"entity": entity, "ops": [{"key": key, "value": value or 0.0, "remove": value is None}]}],
            "validate_only": False}
    answer = raw_request("127.0.0.1", broker.port, ALTER, 1, body)
    assert answer["entries"][0]["error_code"] == 0, answer


def client(name: str) -> list[dict]:
    return [{"entity_type": "client-id", "entity_name": name}]


def produce_for(broker, topic: str, client_id: str, seconds: float, throttles: list,
                limit: int | None = None, config: dict | None = None) -> list[tuple[float, int]]:
    """Produce incompressible 1000-byte values as fast as the producer takes them for
    `seconds` (or `limit` messages); returns (time, bytes) of every delivered message.
    `config`: more client settings (another listener's bootstrap, SASL)."""
    delivered: list[tuple[float, int]] = []

    def on_delivery(err, msg):
        assert err is None, err
        delivered.append((time.monotonic(), len(msg.value())))

    producer = Producer({"bootstrap.servers": broker.bootstrap, "client.id": client_id, "linger.ms": 5,
                         "batch.size": 16384, "queue.buffering.max.kbytes": 256, "compression.type": "none",
                         "throttle_cb": lambda event: throttles.append(event.throttle_time), **(config or {})})
    payload = os.urandom(VALUE)
    end = time.monotonic() + seconds
    count = 0
    while time.monotonic() < end and (limit is None or count < limit):
        try:
            producer.produce(topic, payload, on_delivery=on_delivery)
        except BufferError:
            producer.poll(0.005)
            continue
        count += 1
        producer.poll(0)
    producer.flush(15)
    return delivered


def rate_between(events: list[tuple[float, int]], start: float, end: float) -> float:
    return sum(size for at, size in events if start <= at < end) / (end - start)


def test_produce_quota_throttles_and_removal_restores(broker):
    set_quota(broker, client("slow-producer"), "producer_byte_rate", QUOTA)
    throttles: list = []
    delivered = produce_for(broker, "quota-produce", "slow-producer", 8.0, throttles)
    first = delivered[0][0]
    # the first ~2 s fill the window (Kafka's burst allowance); then the quota holds
    rate = rate_between(delivered, first + 3.5, first + 7.5)
    assert 0.8 * QUOTA <= rate <= 1.2 * QUOTA, rate
    assert throttles and max(throttles) > 0  # the client saw throttle_time_ms

    set_quota(broker, client("slow-producer"), "producer_byte_rate", None)
    free = produce_for(broker, "quota-produce", "slow-producer", 2.5, [])
    t0 = free[0][0]
    assert rate_between(free, t0 + 1.0, t0 + 2.0) > 3 * QUOTA


def test_fetch_quota_throttles_consumer(broker):
    topic = "quota-fetch"
    loaded = produce_for(broker, topic, "loader", 30, [], limit=3000)  # unthrottled: 3 MB
    assert len(loaded) == 3000
    set_quota(broker, client("slow-consumer"), "consumer_byte_rate", QUOTA)
    consumer = Consumer({"bootstrap.servers": broker.bootstrap, "client.id": "slow-consumer",
                         "group.id": "quota-fetch", "auto.offset.reset": "earliest",
                         "fetch.max.bytes": 65536, "max.partition.fetch.bytes": 65536, "message.max.bytes": 65536,
                         "enable.auto.commit": False})
    consumed: list[tuple[float, int]] = []
    try:
        consumer.subscribe([topic])
        end = time.monotonic() + 20
        while time.monotonic() < end:
            msg = consumer.poll(0.2)
            if msg is None or msg.error():
                continue
            consumed.append((time.monotonic(), len(msg.value())))
            if consumed[-1][0] - consumed[0][0] > 7.5:
                break
    finally:
        consumer.close()
    first = consumed[0][0]
    assert consumed[-1][0] - first > 7.5, "the consumer ran out of records before the measurement ended"
    rate = rate_between(consumed, first + 3.5, first + 7.5)
    assert 0.8 * QUOTA <= rate <= 1.2 * QUOTA, rate


class _Conn:
    """One raw connection that stays open (the mute is per connection)."""

    def __init__(self, port: int, client_id: str) -> None:
        self.sock = socket.create_connection(("127.0.0.1", port), timeout=10)
        self.client_id = client_id
        self.correlation = 0

    def call(self, api_key: int, version: int, body: dict) -> dict:
        self.correlation += 1
        self.sock.sendall(encode_request(api_key, version, self.correlation, body, client_id=self.client_id))
        size = struct.unpack(">i", recv_exact(self.sock, 4))[0]
        got, response = decode_response(api_key, version, recv_exact(self.sock, size))
        assert got == self.correlation
        return response

    def close(self) -> None:
        self.sock.close()


def _produce_body(topic: str, size: int) -> dict:
    batch = build_batch([Record(offset=0, timestamp=int(time.time() * 1000), key=None, value=os.urandom(size))])
    return {"transactional_id": None, "acks": 1, "timeout_ms": 5000,
            "topic_data": [{"name": topic, "partition_data": [{"index": 0, "records": bytes(batch)}]}]}


@pytest.mark.parametrize("version, mutes_after", [(7, True), (5, False)])
def test_kip219_mute_after_response_or_delayed_response(broker, version, mutes_after):
    # quota 4096 B/s, window 3 s (a fresh rate): a 16 KiB produce is (16/3 KiB/s - 4 KiB/s) /
    # 4 KiB/s x 3 s = ~1 s over, whatever the machine's speed.
    client_id = f"kip219-v{version}"
    set_quota(broker, client(client_id), "producer_byte_rate", 4096)
    conn = _Conn(broker.port, client_id)
    try:
        conn.call(3, 8, {"topics": [{"name": "quota-kip219"}], "allow_auto_topic_creation": True,
                         "include_cluster_authorized_operations": False, "include_topic_authorized_operations": False})
        started = time.monotonic()
        answer = conn.call(0, version, _produce_body("quota-kip219", 16 * 1024))
        answered = time.monotonic() - started
        assert answer["responses"][0]["partition_responses"][0]["error_code"] == 0
        throttle_ms = answer["throttle_time_ms"]
        assert 800 <= throttle_ms <= 1400, throttle_ms
        conn.call(3, 8, {"topics": [], "allow_auto_topic_creation": False,
                         "include_cluster_authorized_operations": False, "include_topic_authorized_operations": False})
        next_answered = time.monotonic() - started
        if mutes_after:  # answered at once; the next request waits out the mute
            assert answered < 0.5, answered
            assert next_answered >= throttle_ms / 1000 - 0.05, next_answered
        else:  # the answer itself waits; nothing is muted after it
            assert answered >= throttle_ms / 1000 - 0.05, answered
            assert next_answered - answered < 0.5
    finally:
        conn.close()
        set_quota(broker, client(client_id), "producer_byte_rate", None)


def test_connection_creation_rate_refuses_over_the_rate(broker):
    default_ip = [{"entity_type": "ip", "entity_name": None}]
    admin = _Conn(broker.port, "conn-rate-admin")  # opened before the quota: it stays usable

    def admin_set(value):
        body = {"entries": [{"entity": default_ip, "ops": [{"key": "connection_creation_rate", "value": value or 0.0,
                                                            "remove": value is None}]}], "validate_only": False}
        assert admin.call(ALTER, 1, body)["entries"][0]["error_code"] == 0

    admin_set(2)
    try:
        # 2/s over a 3 s window: the first connections pass, the rest are closed after a delay
        outcomes = []
        for _ in range(8):
            with socket.create_connection(("127.0.0.1", broker.port), timeout=10) as sock:
                sock.sendall(encode_request(18, 0, 1, {}, client_id="conn-rate"))
                try:
                    outcomes.append(len(sock.recv(4)) == 4)
                except ConnectionError:
                    outcomes.append(False)
        assert outcomes[:3] == [True, True, True], outcomes
        assert False in outcomes[3:], outcomes
        assert "over its connection_creation_rate" in broker.log_tail(400)
    finally:
        admin_set(None)
        admin.close()
    with socket.create_connection(("127.0.0.1", broker.port), timeout=5) as sock:
        sock.sendall(encode_request(18, 0, 1, {}, client_id="conn-rate"))
        assert len(recv_exact(sock, 4)) == 4


def test_request_percentage_throttles_metadata(broker):
    # 0.001 % of a thread over a 3 s window is 30 ns of handler time: a few Metadata
    # requests exceed it; the throttle is bounded to one sample (ClientRequestQuotaManager).
    set_quota(broker, client("busy"), "request_percentage", 0.001)
    conn = _Conn(broker.port, "busy")
    try:
        throttles = []
        for _ in range(20):
            throttles.append(conn.call(3, 8, {"topics": [], "allow_auto_topic_creation": False,
                                              "include_cluster_authorized_operations": False,
                                              "include_topic_authorized_operations": False})["throttle_time_ms"])
            if throttles[-1]:
                break
        assert 0 < throttles[-1] <= 1000, throttles
    finally:
        conn.close()
        set_quota(broker, client("busy"), "request_percentage", None)
    other = _Conn(broker.port, "busy")
    try:
        assert other.call(3, 8, {"topics": [], "allow_auto_topic_creation": False,
                                 "include_cluster_authorized_operations": False,
                                 "include_topic_authorized_operations": False})["throttle_time_ms"] == 0
    finally:
        other.close()


def test_max_connection_creation_rate_delays_accepts(tmp_path):
    # 5/s over a 3 s window: ~15 connections pass at once, the next ones wait (and are served)
    with BrokerProcess(tmp_path / "data", "--set", "max.connection.creation.rate=5",
                       "--set", "quota.window.num=4") as proc:
        waits = []
        for _ in range(20):
            started = time.monotonic()
            with socket.create_connection(("127.0.0.1", proc.port), timeout=10) as sock:
                sock.sendall(encode_request(18, 0, 1, {}, client_id="accepts"))
                size = struct.unpack(">i", recv_exact(sock, 4))[0]
                recv_exact(sock, size)
            waits.append(time.monotonic() - started)
        assert max(waits[:10]) < 0.2, waits
        assert max(waits[15:]) >= 0.1, waits
        assert "over max.connection.creation.rate=5" in proc.log_tail(200)
