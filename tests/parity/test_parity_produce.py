"""Produce answers as Apache Kafka 4.4 gives them (found by the protocol differential).

Kafka reads a request's partitions into a map (KafkaApis.handleProduceRequest):
- a partition named twice (in one topic entry, or in two entries of the same topic) is
  appended once, with the records of its last occurrence, and answered once;
- a topic entry without partitions is not answered at all.
A retried idempotent batch (a duplicate) is answered with the original offsets and, as
log_append_time, the batch timestamp Kafka keeps per producer (its max timestamp on a
CreateTime topic), not -1.
"""

from __future__ import annotations

import pytest

from tests.brokerproc import BrokerProcess, create_topic, raw_request
from wire.records import Record, build_batch, iter_records
from wire.registry import ApiKey

pytestmark = pytest.mark.timeout(120)

TS = 1_790_000_000_000


@pytest.fixture(scope="module")
def broker(tmp_path_factory):
    with BrokerProcess(tmp_path_factory.mktemp("parity-produce") / "data") as proc:
        for name in ("pp-dup", "pp-dup2", "pp-empty", "pp-idem"):
            create_topic(proc.port, name, 2)
        yield proc


def batch(tag: str, count: int = 2, **kw) -> bytes:
    return bytes(build_batch([Record(offset=i, timestamp=TS + i, key=None, value=f"{tag}{i}".encode())
                              for i in range(count)], **kw))


def produce(broker, topic_data: list[dict], version: int = 8) -> dict:
    return raw_request("127.0.0.1", broker.port, ApiKey.PRODUCE, version,
                       {"transactional_id": None, "acks": -1, "timeout_ms": 5000, "topic_data": topic_data})


def fetch_values(broker, topic: str, partition: int) -> list[bytes]:
    answer = raw_request("127.0.0.1", broker.port, ApiKey.FETCH, 4, {
        "replica_id": -1, "max_wait_ms": 0, "min_bytes": 1, "max_bytes": 1 << 20, "isolation_level": 0,
        "topics": [{"topic": topic, "partitions": [{"partition": partition, "fetch_offset": 0,
                                                     "partition_max_bytes": 1 << 20}]}]})
    records = answer["responses"][0]["partitions"][0]["records"] or b""
    return [r.value for r in iter_records(records)] if records else []


def test_a_partition_named_twice_is_appended_once_with_its_last_records(broker):
    answer = produce(broker, [{"name": "pp-dup", "partition_data": [
        {"index": 0, "records": batch("first-")}, {"index": 0, "records": batch("last-")}]}])
    assert [(t["name"], [p["index"] for p in t["partition_responses"]]) for t in answer["responses"]] == [
        ("pp-dup", [0])]
    assert fetch_values(broker, "pp-dup", 0) == [b"last-0", b"last-1"]


def test_a_topic_named_twice_is_answered_once(broker):
    answer = produce(broker, [{"name": "pp-dup2", "partition_data": [{"index": 0, "records": batch("a-")}]},
                              {"name": "pp-dup2", "partition_data": [{"index": 0, "records": batch("b-")},
                                                                     {"index": 1, "records": batch("c-")}]}])
    assert [(t["name"], sorted(p["index"] for p in t["partition_responses"])) for t in answer["responses"]] == [
        ("pp-dup2", [0, 1])]
    assert fetch_values(broker, "pp-dup2", 0) == [b"b-0", b"b-1"]


def test_a_topic_without_partitions_is_not_answered(broker):
    answer = produce(broker, [{"name": "pp-empty", "partition_data": []},
                              {"name": "pp-dup2", "partition_data": [{"index": 1, "records": batch("d-")}]}])
    assert [t["name"] for t in answer["responses"]] == ["pp-dup2"]


def test_a_duplicate_batch_answers_its_timestamp_as_log_append_time(broker):
    init = raw_request("127.0.0.1", broker.port, ApiKey.INIT_PRODUCER_ID, 4, {
        "transactional_id": None, "transaction_timeout_ms": 60000, "producer_id": -1, "producer_epoch": -1})
    data = batch("i-", 3, producer_id=init["producer_id"], producer_epoch=init["producer_epoch"], base_sequence=0)
    first = produce(broker, [{"name": "pp-idem", "partition_data": [{"index": 0, "records": data}]}])
    again = produce(broker, [{"name": "pp-idem", "partition_data": [{"index": 0, "records": data}]}])
    first_p, again_p = first["responses"][0]["partition_responses"][0], again["responses"][0]["partition_responses"][0]
    assert first_p["error_code"] == again_p["error_code"] == 0
    assert first_p["log_append_time_ms"] == -1  # a CreateTime topic
    assert again_p["base_offset"] == first_p["base_offset"]
    assert again_p["log_append_time_ms"] == TS + 2  # the batch's max timestamp
