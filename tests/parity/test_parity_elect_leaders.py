"""ElectLeaders on one broker answered as Apache Kafka 4.4's KRaft controller answers
(found by the protocol differential): topics as asked, entry by entry (a partition named
twice is answered twice); for every partition (null) every topic without results;
timeout_ms <= 0 is REQUEST_TIMED_OUT for the request and each partition."""

from __future__ import annotations

import pytest

from tests.brokerproc import BrokerProcess, create_topic, raw_request
from wire.errors import ErrorCode
from wire.registry import ApiKey

pytestmark = pytest.mark.timeout(120)


@pytest.fixture(scope="module")
def broker(tmp_path_factory):
    with BrokerProcess(tmp_path_factory.mktemp("parity-elect") / "data") as proc:
        create_topic(proc.port, "pel-a", 2)
        create_topic(proc.port, "pel-b", 1)
        yield proc


def elect(broker, version: int, topic_partitions, timeout_ms: int = 10000) -> dict:
    return raw_request("127.0.0.1", broker.port, ApiKey.ELECT_LEADERS, version, {
        "election_type": 0, "topic_partitions": topic_partitions, "timeout_ms": timeout_ms})


def shape(answer: dict) -> list:
    return [(t["topic"], [(p["partition_id"], p["error_code"]) for p in t["partition_result"]])
            for t in answer["replica_election_results"]]


@pytest.mark.parametrize("version", [0, 2])
def test_topics_are_answered_as_asked(broker, version):
    answer = elect(broker, version, [{"topic": "pel-a", "partitions": [0, 0]}, {"topic": "pel-a", "partitions": [1]}])
    nn = ErrorCode.ELECTION_NOT_NEEDED
    assert shape(answer) == [("pel-a", [(0, nn), (0, nn)]), ("pel-a", [(1, nn)])]


def test_every_partition_lists_every_topic_without_results(broker):
    answer = elect(broker, 2, None)
    assert sorted(t for t in shape(answer) if t[0].startswith("pel-")) == [("pel-a", []), ("pel-b", [])]
    assert all(results == [] for _topic, results in shape(answer))


@pytest.mark.parametrize("version", [1, 2])
def test_no_time_left_times_out(broker, version):
    answer = elect(broker, version, [{"topic": "pel-b", "partitions": [0]}], timeout_ms=-1)
    assert answer["error_code"] == ErrorCode.REQUEST_TIMED_OUT
    assert shape(answer) == [("pel-b", [(0, ErrorCode.REQUEST_TIMED_OUT)])]


def test_an_unknown_election_type_is_invalid_for_every_partition(broker):
    answer = elect(broker, 2, [{"topic": "pel-a", "partitions": [0, 1]}])
    assert answer["error_code"] == ErrorCode.NONE
    raw = raw_request("127.0.0.1", broker.port, ApiKey.ELECT_LEADERS, 2, {
        "election_type": 99, "topic_partitions": [{"topic": "pel-a", "partitions": [0, 1]}], "timeout_ms": 10000})
    assert raw["error_code"] == ErrorCode.INVALID_REQUEST
    assert shape(raw) == [("pel-a", [(0, ErrorCode.INVALID_REQUEST), (1, ErrorCode.INVALID_REQUEST)])]
