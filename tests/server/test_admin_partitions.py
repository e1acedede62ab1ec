"""CreatePartitions and DeleteRecords against a real broker process.

kafka-python's KafkaAdminClient and confluent-kafka's AdminClient over loopback, with real
producers and consumers checking that new partitions take data and that deleted records
are gone; raw requests (built with wire/) where a client hides the error code. The broker
runs with trafka.max.partitions=40 so the partition limit can be reached cheaply.
"""

from __future__ import annotations

import uuid

import pytest

from tests.brokerproc import raw_request
from confluent_kafka import Consumer, KafkaException, Producer, TopicPartition
from confluent_kafka import KafkaError as CKError
from confluent_kafka.admin import AdminClient, NewPartitions, NewTopic
from kafka import KafkaAdminClient, KafkaConsumer
from kafka import TopicPartition as KPTopicPartition
from kafka.errors import (InvalidPartitionsError, InvalidReplicationAssignmentError, PolicyViolationError,
                          UnknownTopicOrPartitionError)

from compat_tests.brokers import TrafkaBroker

pytestmark = pytest.mark.timeout(120)

MAX_PARTITIONS = 40
NONE, OFFSET_OUT_OF_RANGE, UNKNOWN_TOPIC_OR_PARTITION, INVALID_TOPIC_EXCEPTION = 0, 1, 3, 17
INVALID_PARTITIONS, INVALID_REPLICA_ASSIGNMENT, INVALID_REQUEST, POLICY_VIOLATION = 37, 39, 42, 44
DELETE_RECORDS, CREATE_PARTITIONS, METADATA = 21, 37, 3



@pytest.fixture(scope="module")
def broker(tmp_path_factory):
    TrafkaBroker.check_available()
    b = TrafkaBroker(tmp_path_factory.mktemp("admin-partitions"),
                     extra_args=["--set", f"trafka.max.partitions={MAX_PARTITIONS}"])
    b.start()
    yield b
    b.stop()


@pytest.fixture(scope="module")
def kp(broker):
    client = KafkaAdminClient(bootstrap_servers=broker.bootstrap, client_id="admin-partitions-kp",
                              request_timeout_ms=10000)
    yield client
    client.close()


@pytest.fixture(scope="module")
def ck(broker):
    return AdminClient({"bootstrap.servers": broker.bootstrap, "client.id": "admin-partitions-ck"})


def raw(broker, api_key: int, version: int, body: dict) -> dict:
    return raw_request(broker.host, broker.port, api_key, version, body, client_id="admin-partitions-raw")


def new_topic(ck, partitions: int = 1, configs: dict[str, str] | None = None) -> str:
    name = f"part-{uuid.uuid4().hex[:10]}"
    ck.create_topics([NewTopic(name, partitions, 1, config=configs or {})])[name].result(timeout=15)
    return name


def partition_count(broker, name: str) -> int:
    body = {"topics": [{"name": name}], "allow_auto_topic_creation": False,
            "include_topic_authorized_operations": False}
    [topic] = raw(broker, METADATA, 9, body)["topics"]
    assert topic["error_code"] == NONE
    return len(topic["partitions"])


def produce(broker, name: str, partition: int, count: int, *, batch_each: bool = False) -> None:
    producer = Producer({"bootstrap.servers": broker.bootstrap, "linger.ms": 0})
    for i in range(count):
        producer.produce(name, value=f"v{i}".encode(), key=f"k{i}".encode(), partition=partition)
        if batch_each:
            assert producer.flush(15) == 0
    assert producer.flush(15) == 0


def consume_all(broker, name: str, partition: int, expected: int) -> list[int]:
    """Offsets read from the earliest available one; stops after `expected` or 10 s."""
    consumer = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": f"g-{uuid.uuid4().hex[:6]}",
                         "enable.auto.commit": False, "auto.offset.reset": "earliest"})
    try:
        consumer.assign([TopicPartition(name, partition, -2)])  # OFFSET_BEGINNING
        offsets: list[int] = []
        for _ in range(100):
            if len(offsets) >= expected:
                break
            for message in consumer.consume(num_messages=expected, timeout=0.1):
                assert message.error() is None, message.error()
                offsets.append(message.offset())
        return offsets
    finally:
        consumer.close()


def create_partitions_raw(broker, topics: list[dict], validate_only: bool = False, version: int = 3) -> list[dict]:
    body = {"topics": topics, "timeout_ms": 5000, "validate_only": validate_only}
    return raw(broker, CREATE_PARTITIONS, version, body)["results"]


def delete_records_raw(broker, name: str, offsets: dict[int, int], version: int = 2) -> dict[int, dict]:
    body = {"topics": [{"name": name, "partitions": [{"partition_index": p, "offset": o} for p, o in offsets.items()]}],
            "timeout_ms": 5000}
    [topic] = raw(broker, DELETE_RECORDS, version, body)["topics"]
    return {p["partition_index"]: p for p in topic["partitions"]}


# ------------------------------------------------------------------ CreatePartitions


def test_create_partitions_kafka_python(broker, kp, ck):
    name = new_topic(ck, 1)
    kp.create_partitions({name: 3})
    assert partition_count(broker, name) == 3
    produce(broker, name, 2, 5)
    assert consume_all(broker, name, 2, 5) == [0, 1, 2, 3, 4]
    # with explicit assignments naming this broker (node 1)
    kp.create_partitions({name: {"count": 5, "assignments": [[1], [1]]}})
    assert partition_count(broker, name) == 5
    assert kp.describe_topics([name])[0]["partitions"][4]["leader_id"] == 1


def test_create_partitions_errors_kafka_python(broker, kp, ck):
    name = new_topic(ck, 2)
    with pytest.raises(InvalidPartitionsError):
        kp.create_partitions({name: 2})
    with pytest.raises(InvalidPartitionsError):
        kp.create_partitions({name: 1})
    with pytest.raises(UnknownTopicOrPartitionError):
        kp.create_partitions({"no-such-topic-cp": 4})
    with pytest.raises(InvalidReplicationAssignmentError):
        kp.create_partitions({name: {"count": 3, "assignments": [[2]]}})
    with pytest.raises(PolicyViolationError):
        kp.create_partitions({name: MAX_PARTITIONS + 1})
    kp.create_partitions({name: 4}, validate_only=True)
    assert partition_count(broker, name) == 2


def test_create_partitions_confluent(broker, ck):
    name = new_topic(ck, 1)
    futures = ck.create_partitions([NewPartitions(name, 4)])
    assert futures[name].result(timeout=15) is None
    assert partition_count(broker, name) == 4
    produce(broker, name, 3, 3)
    assert consume_all(broker, name, 3, 3) == [0, 1, 2]

    def error_of(new: NewPartitions, **kw) -> int:
        with pytest.raises(KafkaException) as info:
            ck.create_partitions([new], **kw)[new.topic].result(timeout=15)
        return info.value.args[0].code()

    assert error_of(NewPartitions(name, 4)) == CKError.INVALID_PARTITIONS
    assert error_of(NewPartitions(name, 6, replica_assignment=[[1]])) == CKError.INVALID_REPLICA_ASSIGNMENT
    assert error_of(NewPartitions(name, 6, replica_assignment=[[1], [7]])) == CKError.INVALID_REPLICA_ASSIGNMENT
    assert error_of(NewPartitions(name, 6, replica_assignment=[[1, 1], [1, 1]])) == CKError.INVALID_REPLICA_ASSIGNMENT
    assert error_of(NewPartitions("no-such-topic-cp2", 6)) == CKError.UNKNOWN_TOPIC_OR_PART
    assert ck.create_partitions([NewPartitions(name, 6)], validate_only=True)[name].result(timeout=15) is None
    assert partition_count(broker, name) == 4


def test_create_partitions_raw_versions(broker, ck):
    name = new_topic(ck, 1)
    for version, count in ((0, 2), (1, 3), (2, 4), (3, 5)):
        [result] = create_partitions_raw(broker, [{"name": name, "count": count, "assignments": None}],
                                         version=version)
        assert result["error_code"] == NONE, result
    assert partition_count(broker, name) == 5
    # the same topic twice: INVALID_REQUEST, nothing created
    results = create_partitions_raw(broker, [{"name": name, "count": 6, "assignments": None}] * 2)
    # (answered once: Kafka 4.4's results are a map by topic name)
    assert [r["error_code"] for r in results] == [INVALID_REQUEST]
    # one bad topic does not stop a good one
    other = new_topic(ck, 1)
    results = create_partitions_raw(broker, [{"name": other, "count": 2, "assignments": None},
                                             {"name": name, "count": 3, "assignments": None}])
    assert [r["error_code"] for r in results] == [NONE, INVALID_PARTITIONS]
    assert "5" in results[1]["error_message"]
    assert partition_count(broker, other) == 2


def test_new_partitions_survive_restart(broker, ck):
    name = new_topic(ck, 1)
    ck.create_partitions([NewPartitions(name, 3)])[name].result(timeout=15)
    produce(broker, name, 2, 2)
    broker.restart()
    assert partition_count(broker, name) == 3
    assert consume_all(broker, name, 2, 2) == [0, 1]


# ------------------------------------------------------------------ DeleteRecords


def test_delete_records_kafka_python(broker, kp, ck):
    name = new_topic(ck, 2)
    produce(broker, name, 0, 10)
    produce(broker, name, 1, 4)
    result = kp.delete_records({KPTopicPartition(name, 0): 4, KPTopicPartition(name, 1): -1})
    assert result[KPTopicPartition(name, 0)]["low_watermark"] == 4
    assert result[KPTopicPartition(name, 1)]["low_watermark"] == 4  # -1: up to the high watermark
    assert consume_all(broker, name, 0, 6) == [4, 5, 6, 7, 8, 9]
    consumer = KafkaConsumer(bootstrap_servers=broker.bootstrap)
    try:
        tps = [KPTopicPartition(name, 0), KPTopicPartition(name, 1)]
        assert consumer.beginning_offsets(tps) == {tps[0]: 4, tps[1]: 4}
        assert consumer.end_offsets(tps) == {tps[0]: 10, tps[1]: 4}
    finally:
        consumer.close()
    # below the current start: nothing changes, the answer is the current start
    result = kp.delete_records({KPTopicPartition(name, 0): 2})
    assert result[KPTopicPartition(name, 0)]["low_watermark"] == 4


def test_delete_records_confluent(broker, ck):
    name = new_topic(ck, 1)
    produce(broker, name, 0, 8)
    futures = ck.delete_records([TopicPartition(name, 0, 5)])
    [(tp, future)] = futures.items()
    assert future.result(timeout=15).low_watermark == 5
    assert consume_all(broker, name, 0, 3) == [5, 6, 7]
    with pytest.raises(KafkaException) as info:
        list(ck.delete_records([TopicPartition(name, 0, 9)]).values())[0].result(timeout=15)
    assert info.value.args[0].code() == CKError.OFFSET_OUT_OF_RANGE
    # -1 (OFFSET_END): everything up to the high watermark
    assert list(ck.delete_records([TopicPartition(name, 0, -1)]).values())[0].result(timeout=15).low_watermark == 8
    produce(broker, name, 0, 2)
    assert consume_all(broker, name, 0, 2) == [8, 9]


def test_delete_records_errors_raw(broker, ck):
    name = new_topic(ck, 1)
    produce(broker, name, 0, 3)
    results = delete_records_raw(broker, name, {0: 4, 5: 1})
    assert results[0] == {"partition_index": 0, "low_watermark": -1, "error_code": OFFSET_OUT_OF_RANGE}
    assert results[5]["error_code"] == UNKNOWN_TOPIC_OR_PARTITION
    assert delete_records_raw(broker, name, {0: -7})[0]["error_code"] == OFFSET_OUT_OF_RANGE
    assert delete_records_raw(broker, "no-such-topic-dr", {0: 1})[0]["error_code"] == UNKNOWN_TOPIC_OR_PARTITION
    for version in (0, 1, 2):
        assert delete_records_raw(broker, name, {0: version + 1}, version=version)[0] == {
            "partition_index": 0, "low_watermark": version + 1, "error_code": NONE}
    compacted = new_topic(ck, 1, {"cleanup.policy": "compact"})
    produce(broker, compacted, 0, 2)
    assert delete_records_raw(broker, compacted, {0: 1})[0]["error_code"] == POLICY_VIOLATION
    both = new_topic(ck, 1, {"cleanup.policy": "compact,delete"})
    produce(broker, both, 0, 2)
    assert delete_records_raw(broker, both, {0: 1})[0] == {"partition_index": 0, "low_watermark": 1,
                                                            "error_code": NONE}


def test_deleted_records_stay_deleted_after_restart(broker, ck):
    name = new_topic(ck, 1, {"segment.bytes": "200"})  # several segments: whole ones go
    produce(broker, name, 0, 20, batch_each=True)
    futures = ck.delete_records([TopicPartition(name, 0, 15)])
    assert list(futures.values())[0].result(timeout=15).low_watermark == 15
    broker.restart()
    assert consume_all(broker, name, 0, 5) == [15, 16, 17, 18, 19]
    segments = sorted(p.name for p in (broker.data_dir / f"{name}-0").glob("*.log"))
    assert segments and int(segments[0].split(".")[0]) > 0  # the first segments were removed
