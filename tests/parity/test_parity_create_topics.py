"""CreateTopics answered as Apache Kafka 4.4's KRaft controller answers (found by the
protocol differential):
- a name given twice is answered once, INVALID_REQUEST;
- timeout_ms <= 0 leaves no time: REQUEST_TIMED_OUT, nothing created;
- more than 10 000 partitions in one request: POLICY_VIOLATION for every topic;
- validate_only answers with a fresh topic id (v7).
"""

from __future__ import annotations

import uuid

import pytest

from tests.brokerproc import BrokerProcess, raw_request
from wire.errors import ErrorCode
from wire.registry import ApiKey

pytestmark = pytest.mark.timeout(120)


@pytest.fixture(scope="module")
def broker(tmp_path_factory):
    with BrokerProcess(tmp_path_factory.mktemp("parity-create-topics") / "data") as proc:
        yield proc


def create(broker, topics: list[tuple[str, int]], timeout_ms: int = 10000, validate_only: bool = False,
           version: int = 7) -> list[tuple]:
    answer = raw_request("127.0.0.1", broker.port, ApiKey.CREATE_TOPICS, version, {
        "topics": [{"name": n, "num_partitions": p, "replication_factor": 1, "assignments": [], "configs": []}
                   for n, p in topics], "timeout_ms": timeout_ms, "validate_only": validate_only})
    return [(t["name"], t["error_code"], t.get("topic_id")) for t in answer["topics"]]


def exists(broker, name: str) -> bool:
    answer = raw_request("127.0.0.1", broker.port, ApiKey.METADATA, 9,
                         {"topics": [{"name": name}], "allow_auto_topic_creation": False})
    return answer["topics"][0]["error_code"] == ErrorCode.NONE


@pytest.mark.parametrize("version", [2, 7])
def test_a_name_given_twice_is_answered_once(broker, version):
    got = create(broker, [(f"pct-dup-{version}", 1), (f"pct-dup-{version}", 1), (f"pct-one-{version}", 1)],
                 version=version)
    assert [(n, code) for n, code, _id in got] == [(f"pct-dup-{version}", ErrorCode.INVALID_REQUEST),
                                                   (f"pct-one-{version}", ErrorCode.NONE)]


@pytest.mark.parametrize("timeout_ms", [0, -1])
def test_no_time_left_creates_nothing(broker, timeout_ms):
    name = f"pct-timeout{timeout_ms}"
    assert [code for _n, code, _id in create(broker, [(name, 1)], timeout_ms=timeout_ms)] == [
        ErrorCode.REQUEST_TIMED_OUT]
    assert not exists(broker, name)


def test_more_than_10000_partitions_per_request_is_a_policy_violation(broker):
    got = create(broker, [("pct-big-a", 6000), ("pct-big-b", 4001)], validate_only=True)
    assert [code for _n, code, _id in got] == [ErrorCode.POLICY_VIOLATION] * 2
    assert [code for _n, code, _id in create(broker, [("pct-big-c", 5000)], validate_only=True)] == [ErrorCode.NONE]


def test_validate_only_answers_a_topic_id(broker):
    [(_name, code, topic_id)] = create(broker, [("pct-validate", 1)], validate_only=True)
    assert code == ErrorCode.NONE and topic_id != uuid.UUID(int=0)
    assert not exists(broker, "pct-validate")
