"""Metadata answers as Apache Kafka 4.4 gives them (found by the protocol differential).

- v10 and v11 take topic names only: a topic id, or a null name, makes Kafka refuse the
  whole request (InvalidRequestException: every requested topic INVALID_REQUEST, no
  brokers, no cluster id, controller -1);
- v12: once any topic is named by id, Kafka answers the ids only (names are ignored);
- a topic named twice is answered once.
"""

from __future__ import annotations

import uuid

import pytest

from tests.brokerproc import BrokerProcess, create_topic, raw_request
from wire.errors import ErrorCode
from wire.registry import ApiKey

pytestmark = pytest.mark.timeout(120)

ZERO = uuid.UUID(int=0)
UNKNOWN_ID = uuid.UUID("5eed0000-0000-4000-8000-00000000dead")


@pytest.fixture(scope="module")
def broker(tmp_path_factory):
    with BrokerProcess(tmp_path_factory.mktemp("parity-metadata") / "data") as proc:
        proc.topic_ids = {name: create_topic(proc.port, name, 2) for name in ("pm-a", "pm-b")}
        yield proc


def metadata(broker, version: int, topics, **flags) -> dict:
    body = {"topics": topics, "allow_auto_topic_creation": False, **flags}
    return raw_request("127.0.0.1", broker.port, ApiKey.METADATA, version, body)


@pytest.mark.parametrize("version", [10, 11])
def test_topic_id_before_v12_refuses_the_request(broker, version):
    answer = metadata(broker, version, [{"name": "pm-a", "topic_id": broker.topic_ids["pm-a"]},
                                        {"name": "pm-b", "topic_id": ZERO}])
    assert answer["brokers"] == [] and answer["cluster_id"] is None and answer["controller_id"] == -1
    assert [(t["name"], t["topic_id"], t["error_code"], t["partitions"]) for t in answer["topics"]] == [
        ("pm-a", broker.topic_ids["pm-a"], ErrorCode.INVALID_REQUEST, []),
        ("pm-b", ZERO, ErrorCode.INVALID_REQUEST, [])]


@pytest.mark.parametrize("version", [10, 11])
def test_null_name_before_v12_refuses_the_request(broker, version):
    answer = metadata(broker, version, [{"name": None, "topic_id": ZERO}, {"name": "pm-b", "topic_id": ZERO}])
    assert answer["controller_id"] == -1
    assert [(t["name"], t["error_code"]) for t in answer["topics"]] == [
        ("", ErrorCode.INVALID_REQUEST), ("pm-b", ErrorCode.INVALID_REQUEST)]


def test_v12_ids_take_precedence_over_names(broker):
    answer = metadata(broker, 12, [{"name": "pm-a", "topic_id": UNKNOWN_ID}, {"name": "pm-b", "topic_id": ZERO}])
    assert [(t["name"], t["topic_id"], t["error_code"]) for t in answer["topics"]] == [
        (None, UNKNOWN_ID, ErrorCode.UNKNOWN_TOPIC_ID)]
    known = metadata(broker, 12, [{"name": None, "topic_id": broker.topic_ids["pm-b"]},
                                  {"name": "pm-a", "topic_id": ZERO}])
    assert [(t["name"], t["error_code"]) for t in known["topics"]] == [("pm-b", ErrorCode.NONE)]


@pytest.mark.parametrize("version", [1, 9, 12])
def test_a_topic_named_twice_is_answered_once(broker, version):
    answer = metadata(broker, version, [{"name": "pm-a", "topic_id": ZERO}] * 2 + [{"name": "pm-b", "topic_id": ZERO}])
    assert sorted(t["name"] for t in answer["topics"]) == ["pm-a", "pm-b"]
