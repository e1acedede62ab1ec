"""DeleteTopics with delete.topic.enable=false: every topic of the request gets the error,
before any other check (an unknown topic too) — INVALID_REQUEST before v3, which has no
TOPIC_DELETION_DISABLED, and TOPIC_DELETION_DISABLED from v3. What Kafka 3.9 (KafkaApis /
ControllerApis.deleteTopics) and Kafka 4.4 answer."""

from __future__ import annotations

import pytest

from tests.brokerproc import BrokerProcess, create_topic, raw_request
from wire.errors import ErrorCode as E
from wire.registry import ApiKey as K


@pytest.fixture(scope="module")
def broker(tmp_path_factory):
    with BrokerProcess(tmp_path_factory.mktemp("no-delete"), "--set", "delete.topic.enable=false") as proc:
        create_topic(proc.port, "kept", 1)
        yield proc


@pytest.mark.parametrize("version,code", [(0, E.INVALID_REQUEST), (2, E.INVALID_REQUEST),
                                          (3, E.TOPIC_DELETION_DISABLED), (5, E.TOPIC_DELETION_DISABLED)])
def test_delete_disabled_answers_every_topic(broker, version, code):
    answer = raw_request("127.0.0.1", broker.port, K.DELETE_TOPICS, version,
                         {"topic_names": ["kept", "never-was"], "timeout_ms": 10000})
    assert {r["name"]: r["error_code"] for r in answer["responses"]} == {"kept": code, "never-was": code}
    metadata = raw_request("127.0.0.1", broker.port, K.METADATA, 1, {"topics": [{"name": "kept"}]})
    assert metadata["topics"][0]["error_code"] == 0
