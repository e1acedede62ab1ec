"""Fetch size limits across partitions (KIP-74), and Metadata by topic id.

librdkafka drops a Fetch response larger than the fetch.max.bytes it asked for ("Invalid
response size"): the response-wide max_bytes must hold across partitions, with Kafka's one
exception — the first batch of the first partition that has data is returned whole.
"""

from __future__ import annotations

import socket
import struct
import time
import uuid

import pytest
from confluent_kafka import Consumer, Producer

from tests.brokerproc import BrokerProcess, create_topic, raw_request, recv_exact
from wire import ApiKey, decode_response, encode_request
from wire.errors import ErrorCode
from wire.primitives import ZERO_UUID
from wire.records import Record, build_batch, iter_headers

# Record timestamps: recent, since the module's broker lives past its first retention check
# (30 s after start-up), which deletes segments older than retention.ms (7 days), as Kafka does.
RECENT_MS = int(time.time() * 1000)

BATCH_VALUE = 400_000


@pytest.fixture(scope="module")
def broker(tmp_path_factory):
    with BrokerProcess(tmp_path_factory.mktemp("limits") / "data") as proc:
        yield proc


def _create(broker, topic: str, partitions: int) -> uuid.UUID:
    return create_topic(broker.port, topic, partitions)


def _fill(broker, topic: str, partitions: int, batches: int) -> None:
    """`batches` batches of one 400 kB record in every partition."""
    for p in range(partitions):
        for b in range(batches):
            batch = build_batch([Record(0, RECENT_MS, b"k", bytes([b]) * BATCH_VALUE)])
            answer = raw_request("127.0.0.1", broker.port, ApiKey.PRODUCE, 9, {
                "transactional_id": None, "acks": -1, "timeout_ms": 10000,
                "topic_data": [{"name": topic, "partition_data": [{"index": p, "records": bytes(batch)}]}]})
            assert answer["responses"][0]["partition_responses"][0]["error_code"] == 0


def _fetch(broker, topic: str, partitions: int, max_bytes: int, partition_max_bytes: int, version: int = 12):
    body = {"replica_id": -1, "max_wait_ms": 0, "min_bytes": 1, "max_bytes": max_bytes, "isolation_level": 0,
            "session_id": 0, "session_epoch": -1,
            "topics": [{"topic": topic, "partitions": [
                {"partition": p, "current_leader_epoch": -1, "fetch_offset": 0, "log_start_offset": -1,
                 "partition_max_bytes": partition_max_bytes} for p in range(partitions)]}],
            "forgotten_topics_data": [], "rack_id": ""}
    with socket.create_connection(("127.0.0.1", broker.port), timeout=10) as sock:
        sock.sendall(encode_request(ApiKey.FETCH, version, 1, body))
        size = struct.unpack(">i", recv_exact(sock, 4))[0]
        _cid, answer = decode_response(ApiKey.FETCH, version, recv_exact(sock, size))
    return size, [len(p["records"] or b"") for p in answer["responses"][0]["partitions"]], answer


def test_max_bytes_holds_across_partitions(broker):
    _create(broker, "spread", 3)
    _fill(broker, "spread", 3, 2)
    frame, sizes, _answer = _fetch(broker, "spread", 3, max_bytes=1_000_000, partition_max_bytes=1 << 20)
    assert sum(sizes) <= 1_000_000, sizes
    assert frame < 1_000_000 + 1024, frame
    # Partition 0 takes two batches; the 200 kB left cannot hold a whole 400 kB batch.
    assert sizes[0] > 2 * BATCH_VALUE and sizes[1] == sizes[2] == 0, sizes


def test_only_the_first_partition_with_data_may_exceed_the_limits(broker):
    _create(broker, "oversize", 3)
    _fill(broker, "oversize", 3, 1)
    _frame, sizes, _answer = _fetch(broker, "oversize", 3, max_bytes=100_000, partition_max_bytes=50_000)
    assert sizes[0] > BATCH_VALUE and sizes[1] == sizes[2] == 0, sizes
    _frame, sizes, _answer = _fetch(broker, "oversize", 3, max_bytes=10 << 20, partition_max_bytes=50_000)
    assert sizes[0] > BATCH_VALUE and sizes[1] == sizes[2] == 0, sizes


def test_librdkafka_consumes_large_messages_over_several_partitions(broker):
    """The user-visible bug: confluent-kafka with fetch.max.bytes=1000000 over partitions
    holding 400 kB messages reported "Invalid response size" and stalled."""
    topic = "librdkafka-large"
    _create(broker, topic, 4)
    producer = Producer({"bootstrap.servers": broker.bootstrap, "linger.ms": 0, "batch.size": 500_000})
    for i in range(16):
        producer.produce(topic, value=bytes([i]) * BATCH_VALUE, partition=i % 4)
    assert producer.flush(30) == 0
    consumer = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": "large", "auto.offset.reset": "earliest",
                         "fetch.max.bytes": 1_000_000, "max.partition.fetch.bytes": 1_000_000,
                         "receive.message.max.bytes": 1_000_000 + 512, "enable.auto.commit": False})
    consumer.subscribe([topic])
    got = 0
    errors = []
    try:
        for _ in range(60):
            msg = consumer.poll(0.5)
            if msg is None:
                if got == 16:
                    break
                continue
            if msg.error():
                errors.append(msg.error())
                continue
            got += 1
    finally:
        consumer.close()
    assert not errors and got == 16, (got, errors)


@pytest.mark.parametrize("blank", [None, ""])
def test_metadata_by_topic_id_with_a_blank_name(broker, blank):
    """Metadata v10+ naming a topic by id alone (the Java admin's describeTopics by id)."""
    topic_id = _create(broker, f"by-id-{blank is None}", 2)
    answer = raw_request("127.0.0.1", broker.port, ApiKey.METADATA, 12, {
        "topics": [{"topic_id": topic_id, "name": blank}], "allow_auto_topic_creation": False,
        "include_topic_authorized_operations": False})
    [entry] = answer["topics"]
    assert entry["error_code"] == 0, entry
    assert entry["name"] == f"by-id-{blank is None}" and entry["topic_id"] == topic_id
    assert [p["partition_index"] for p in entry["partitions"]] == [0, 1]
    unknown = raw_request("127.0.0.1", broker.port, ApiKey.METADATA, 12, {
        "topics": [{"topic_id": uuid.uuid4(), "name": blank}], "allow_auto_topic_creation": False,
        "include_topic_authorized_operations": False})
    assert unknown["topics"][0]["error_code"] == ErrorCode.UNKNOWN_TOPIC_ID
    assert unknown["topics"][0]["topic_id"] != ZERO_UUID
