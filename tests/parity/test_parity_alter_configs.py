"""AlterConfigs and IncrementalAlterConfigs check a TOPIC resource as Apache Kafka 4.4 does
(found by the protocol differential): before the topic is looked up, a config set to null
and then the empty name of a "default topic" are INVALID_REQUEST (Kafka's
ConfigAdminManager.preprocess) — Trafka answered INVALID_CONFIG and INVALID_TOPIC_EXCEPTION.
A DELETE carries no value and stays valid.
"""

from __future__ import annotations

import pytest

from tests.brokerproc import BrokerProcess, create_topic, raw_request
from wire.errors import ErrorCode
from wire.registry import ApiKey

pytestmark = pytest.mark.timeout(120)

TOPIC, SET, DELETE = 2, 0, 1


@pytest.fixture(scope="module")
def broker(tmp_path_factory):
    with BrokerProcess(tmp_path_factory.mktemp("parity-alter-configs") / "data") as proc:
        create_topic(proc.port, "pac", 1)
        yield proc


def alter(broker, name: str, configs: dict) -> dict:
    body = {"resources": [{"resource_type": TOPIC, "resource_name": name,
                           "configs": [{"name": k, "value": v} for k, v in configs.items()]}], "validate_only": False}
    return raw_request("127.0.0.1", broker.port, ApiKey.ALTER_CONFIGS, 1, body)["responses"][0]


def incremental(broker, name: str, ops: list) -> dict:
    body = {"resources": [{"resource_type": TOPIC, "resource_name": name,
                           "configs": [{"name": k, "config_operation": op, "value": v} for k, op, v in ops]}],
            "validate_only": False}
    return raw_request("127.0.0.1", broker.port, ApiKey.INCREMENTAL_ALTER_CONFIGS, 1, body)["responses"][0]


@pytest.mark.parametrize("name", ["pac", "pd-missing", ""])
def test_a_null_value_is_an_invalid_request(broker, name):
    assert alter(broker, name, {"retention.ms": None})["error_code"] == ErrorCode.INVALID_REQUEST
    assert incremental(broker, name, [("retention.ms", SET, None)])["error_code"] == ErrorCode.INVALID_REQUEST


def test_the_empty_topic_name_is_an_invalid_request(broker):
    answer = alter(broker, "", {"retention.ms": "1000"})
    assert (answer["error_code"], answer["error_message"]) == (ErrorCode.INVALID_REQUEST,
                                                               "Default topic resources are not allowed.")
    assert incremental(broker, "", [("retention.ms", SET, "1000")])["error_code"] == ErrorCode.INVALID_REQUEST


def test_a_delete_needs_no_value_and_other_names_are_checked_as_before(broker):
    assert incremental(broker, "pac", [("retention.ms", DELETE, None)])["error_code"] == ErrorCode.NONE
    assert incremental(broker, "bad/name", [("retention.ms", SET, "1")])["error_code"] == ErrorCode.INVALID_TOPIC_EXCEPTION
    assert alter(broker, "pd-missing", {"retention.ms": "1"})["error_code"] == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
