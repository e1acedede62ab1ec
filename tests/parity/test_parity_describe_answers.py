"""Describe* answers filled as Apache Kafka 4.4 fills them (found by the protocol
differential):
- DescribeConfigs, DescribeClientQuotas and DescribeUserScramCredentials answer success
  with error_message "" (not null);
- DescribeCluster's endpoint-type errors carry an empty cluster id;
- DescribeTransactions answers an unknown id with 0 (not -1) in its other fields, and an
  empty id INVALID_REQUEST.
"""

from __future__ import annotations

import pytest

from tests.brokerproc import BrokerProcess, create_topic, raw_request
from wire.errors import ErrorCode
from wire.registry import ApiKey

pytestmark = pytest.mark.timeout(120)


@pytest.fixture(scope="module")
def broker(tmp_path_factory):
    with BrokerProcess(tmp_path_factory.mktemp("parity-describe") / "data") as proc:
        create_topic(proc.port, "pda", 1)
        yield proc


def call(broker, api: int, version: int, body: dict) -> dict:
    return raw_request("127.0.0.1", broker.port, api, version, body)


@pytest.mark.parametrize("version", [1, 4])
def test_describe_configs_success_message_is_empty(broker, version):
    answer = call(broker, ApiKey.DESCRIBE_CONFIGS, version, {"resources": [
        {"resource_type": 2, "resource_name": "pda", "configuration_keys": ["retention.ms"]}]})
    assert (answer["results"][0]["error_code"], answer["results"][0]["error_message"]) == (0, "")


@pytest.mark.parametrize("version", [0, 1])
def test_describe_client_quotas_success_message_is_empty(broker, version):
    answer = call(broker, ApiKey.DESCRIBE_CLIENT_QUOTAS, version, {
        "components": [{"entity_type": "user", "match_type": 0, "match": "pda-user"}], "strict": False})
    assert (answer["error_code"], answer["error_message"]) == (0, "")


def test_describe_user_scram_credentials_success_message_is_empty(broker):
    answer = call(broker, ApiKey.DESCRIBE_USER_SCRAM_CREDENTIALS, 0, {"users": None})
    assert (answer["error_code"], answer["error_message"]) == (0, "")


@pytest.mark.parametrize("endpoint_type", [2, 99])
def test_describe_cluster_endpoint_errors_carry_no_cluster_id(broker, endpoint_type):
    answer = call(broker, ApiKey.DESCRIBE_CLUSTER, 1, {"include_cluster_authorized_operations": False,
                                                       "endpoint_type": endpoint_type})
    assert answer["error_code"] in (ErrorCode.MISMATCHED_ENDPOINT_TYPE, ErrorCode.UNSUPPORTED_ENDPOINT_TYPE)
    assert (answer["cluster_id"], answer["controller_id"], answer["brokers"]) == ("", -1, [])


def test_describe_transactions_errors_as_kafka(broker):
    answer = call(broker, ApiKey.DESCRIBE_TRANSACTIONS, 0, {"transactional_ids": ["pda-nobody", ""]})
    got = [(s["transactional_id"], s["error_code"], s["transaction_start_time_ms"], s["producer_id"],
            s["producer_epoch"], s["transaction_timeout_ms"]) for s in answer["transaction_states"]]
    assert got == [("pda-nobody", ErrorCode.TRANSACTIONAL_ID_NOT_FOUND, 0, 0, 0, 0),
                   ("", ErrorCode.INVALID_REQUEST, 0, 0, 0, 0)]


def test_describe_client_quotas_unknown_match_type_is_invalid(broker):
    answer = call(broker, ApiKey.DESCRIBE_CLIENT_QUOTAS, 1, {
        "components": [{"entity_type": "user", "match_type": 99, "match": None}], "strict": False})
    assert (answer["error_code"], answer["entries"]) == (ErrorCode.INVALID_REQUEST, None)
