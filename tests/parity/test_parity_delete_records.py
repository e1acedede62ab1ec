"""DeleteRecords answered as Apache Kafka 4.4 answers (found by the protocol differential):
Kafka reads the request into a map by partition, so a partition named twice (in one topic
entry or two) is answered once, with its last offset, and a topic without partitions is not
answered."""

from __future__ import annotations

import pytest

from tests.brokerproc import BrokerProcess, create_topic, raw_request
from wire.records import Record, build_batch
from wire.registry import ApiKey

pytestmark = pytest.mark.timeout(120)


@pytest.fixture(scope="module")
def broker(tmp_path_factory):
    with BrokerProcess(tmp_path_factory.mktemp("parity-delete-records") / "data") as proc:
        create_topic(proc.port, "pdr", 1)
        batch = bytes(build_batch([Record(offset=i, timestamp=1_790_000_000_000, key=None, value=b"v")
                                   for i in range(6)]))
        raw_request("127.0.0.1", proc.port, ApiKey.PRODUCE, 8, {
            "transactional_id": None, "acks": -1, "timeout_ms": 5000,
            "topic_data": [{"name": "pdr", "partition_data": [{"index": 0, "records": batch}]}]})
        yield proc


def test_a_partition_named_twice_is_answered_once_with_its_last_offset(broker):
    answer = raw_request("127.0.0.1", broker.port, ApiKey.DELETE_RECORDS, 2, {"timeout_ms": 5000, "topics": [
        {"name": "pdr", "partitions": [{"partition_index": 0, "offset": 4}]},
        {"name": "pdr", "partitions": [{"partition_index": 0, "offset": 2}]},
        {"name": "pdr-none", "partitions": []}]})
    assert [(t["name"], [(p["partition_index"], p["low_watermark"], p["error_code"]) for p in t["partitions"]])
            for t in answer["topics"]] == [("pdr", [(0, 2, 0)])]
