"""Partition reassignments on one broker answered as a one-node Apache Kafka 4.4 answers
(found by the protocol differential; Trafka answered NOT_CONTROLLER): a partition can only
stay on this broker, so that reassignment succeeds at once, any other replica list is
INVALID_REPLICA_ASSIGNMENT, a cancel NO_REASSIGNMENT_IN_PROGRESS, unknown partitions
UNKNOWN_TOPIC_OR_PARTITION, timeout_ms <= 0 REQUEST_TIMED_OUT; nothing is ever listed as
moving."""

from __future__ import annotations

import pytest

from tests.brokerproc import BrokerProcess, create_topic, raw_request
from wire.errors import ErrorCode
from wire.registry import ApiKey

pytestmark = pytest.mark.timeout(120)


@pytest.fixture(scope="module")
def broker(tmp_path_factory):
    with BrokerProcess(tmp_path_factory.mktemp("parity-reassign") / "data") as proc:
        create_topic(proc.port, "pra", 1)
        yield proc


def alter(broker, topics: list[dict], timeout_ms: int = 10000) -> dict:
    return raw_request("127.0.0.1", broker.port, ApiKey.ALTER_PARTITION_REASSIGNMENTS, 0,
                       {"timeout_ms": timeout_ms, "topics": topics})


def codes(answer: dict) -> list:
    return [(t["name"], [(p["partition_index"], p["error_code"]) for p in t["partitions"]]) for t in answer["responses"]]


def test_reassignments_on_one_broker(broker):
    answer = alter(broker, [
        {"name": "pra", "partitions": [{"partition_index": 0, "replicas": [1]}, {"partition_index": 0, "replicas": None},
                                       {"partition_index": 0, "replicas": [2]}, {"partition_index": 0, "replicas": []},
                                       {"partition_index": 0, "replicas": [1, 1]},
                                       {"partition_index": 9, "replicas": [1]}]},
        {"name": "pra-none", "partitions": [{"partition_index": 0, "replicas": [1]}]}])
    assert answer["error_code"] == ErrorCode.NONE
    bad = ErrorCode.INVALID_REPLICA_ASSIGNMENT
    assert codes(answer) == [("pra", [(0, ErrorCode.NONE), (0, ErrorCode.NO_REASSIGNMENT_IN_PROGRESS), (0, bad),
                                      (0, bad), (0, bad), (9, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)]),
                             ("pra-none", [(0, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)])]


def test_no_time_left_times_out(broker):
    answer = alter(broker, [{"name": "pra", "partitions": [{"partition_index": 0, "replicas": [1]}]}], timeout_ms=-1)
    assert answer["error_code"] == ErrorCode.REQUEST_TIMED_OUT
    assert codes(answer) == [("pra", [(0, ErrorCode.REQUEST_TIMED_OUT)])]


def test_nothing_is_moving(broker):
    for topics in (None, [{"name": "pra", "partition_indexes": [0]}]):
        answer = raw_request("127.0.0.1", broker.port, ApiKey.LIST_PARTITION_REASSIGNMENTS, 0,
                             {"timeout_ms": 10000, "topics": topics})
        assert (answer["error_code"], answer["topics"]) == (ErrorCode.NONE, [])
