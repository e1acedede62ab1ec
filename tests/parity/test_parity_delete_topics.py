"""DeleteTopics answered as Apache Kafka 4.4's KRaft controller answers (found by the
protocol differential): a topic named twice is answered once, INVALID_REQUEST, and not
deleted; timeout_ms <= 0 deletes nothing (REQUEST_TIMED_OUT); errors carry a message (v5+)."""

from __future__ import annotations

import pytest

from tests.brokerproc import BrokerProcess, create_topic, raw_request
from wire.errors import ErrorCode
from wire.registry import ApiKey

pytestmark = pytest.mark.timeout(120)


@pytest.fixture(scope="module")
def broker(tmp_path_factory):
    with BrokerProcess(tmp_path_factory.mktemp("parity-delete-topics") / "data") as proc:
        yield proc


def exists(broker, name: str) -> bool:
    answer = raw_request("127.0.0.1", broker.port, ApiKey.METADATA, 9,
                         {"topics": [{"name": name}], "allow_auto_topic_creation": False})
    return answer["topics"][0]["error_code"] == ErrorCode.NONE


def delete(broker, version: int, names: list[str], timeout_ms: int = 10000) -> list[tuple]:
    answer = raw_request("127.0.0.1", broker.port, ApiKey.DELETE_TOPICS, version, {
        "topic_names": names, "topics": [{"name": n} for n in names], "timeout_ms": timeout_ms})
    return [(r["name"], r["error_code"], r.get("error_message")) for r in answer["responses"]]


@pytest.mark.parametrize("version", [1, 5, 6])
def test_a_topic_named_twice_is_answered_once_and_kept(broker, version):
    name = f"pdt-dup-{version}"
    create_topic(broker.port, name, 1)
    got = delete(broker, version, [name, name])
    assert [(n, code) for n, code, _m in got] == [(name, ErrorCode.INVALID_REQUEST)]
    assert exists(broker, name)


@pytest.mark.parametrize("timeout_ms", [0, -1])
def test_no_time_left_deletes_nothing(broker, timeout_ms):
    name = f"pdt-timeout{timeout_ms}"
    create_topic(broker.port, name, 1)
    assert [code for _n, code, _m in delete(broker, 6, [name], timeout_ms)] == [ErrorCode.REQUEST_TIMED_OUT]
    assert exists(broker, name)


def test_errors_carry_a_message(broker):
    [(_name, code, message)] = delete(broker, 5, ["pdt-nobody"])
    assert code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION and message


def test_v6_names_a_topic_by_name_or_by_id(broker):
    import uuid

    answer = raw_request("127.0.0.1", broker.port, ApiKey.DELETE_TOPICS, 6, {"timeout_ms": 10000, "topics": [
        {"name": "pdt-both", "topic_id": uuid.UUID("5eed0000-0000-4000-8000-00000000dead")},
        {"name": None, "topic_id": uuid.UUID(int=0)}]})
    assert [r["error_code"] for r in answer["responses"]] == [ErrorCode.INVALID_REQUEST] * 2
