"""CreatePartitions answered as Apache Kafka 4.4's KRaft controller answers (found by the
protocol differential): a topic named twice is answered once (INVALID_REQUEST);
timeout_ms <= 0 adds nothing (REQUEST_TIMED_OUT); more than 10 000 partitions added in one
request is POLICY_VIOLATION."""

from __future__ import annotations

import pytest

from tests.brokerproc import BrokerProcess, create_topic, raw_request
from wire.errors import ErrorCode
from wire.registry import ApiKey

pytestmark = pytest.mark.timeout(120)


@pytest.fixture(scope="module")
def broker(tmp_path_factory):
    with BrokerProcess(tmp_path_factory.mktemp("parity-create-partitions") / "data") as proc:
        for name in ("pcp-dup", "pcp-timeout", "pcp-big"):
            create_topic(proc.port, name, 1)
        yield proc


def grow(broker, topics: list[tuple[str, int]], timeout_ms: int = 10000, validate_only: bool = False) -> list:
    answer = raw_request("127.0.0.1", broker.port, ApiKey.CREATE_PARTITIONS, 3, {
        "topics": [{"name": n, "count": c, "assignments": None} for n, c in topics], "timeout_ms": timeout_ms,
        "validate_only": validate_only})
    return [(r["name"], r["error_code"]) for r in answer["results"]]


def partitions(broker, name: str) -> int:
    answer = raw_request("127.0.0.1", broker.port, ApiKey.METADATA, 9,
                         {"topics": [{"name": name}], "allow_auto_topic_creation": False})
    return len(answer["topics"][0]["partitions"])


def test_a_topic_named_twice_is_answered_once(broker):
    assert grow(broker, [("pcp-dup", 2), ("pcp-dup", 3)]) == [("pcp-dup", ErrorCode.INVALID_REQUEST)]
    assert partitions(broker, "pcp-dup") == 1


@pytest.mark.parametrize("timeout_ms", [0, -1])
def test_no_time_left_adds_nothing(broker, timeout_ms):
    assert grow(broker, [("pcp-timeout", 2)], timeout_ms) == [("pcp-timeout", ErrorCode.REQUEST_TIMED_OUT)]
    assert partitions(broker, "pcp-timeout") == 1


def test_more_than_10000_new_partitions_is_a_policy_violation(broker):
    assert grow(broker, [("pcp-big", 10_002)], validate_only=True) == [("pcp-big", ErrorCode.POLICY_VIOLATION)]
    assert grow(broker, [("pcp-big", 10_001)], validate_only=True) == [("pcp-big", ErrorCode.NONE)]
