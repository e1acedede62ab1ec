"""KIP-430 cluster authorized operations as Apache Kafka 4.4 reports them without an
authorizer (found by the protocol differential): the cluster resource's operations, which
do not include WRITE (Kafka's AclEntry.supportedOperations(CLUSTER))."""

from __future__ import annotations

import pytest

from tests.brokerproc import BrokerProcess, raw_request
from wire.registry import ApiKey

pytestmark = pytest.mark.timeout(120)

# CREATE, ALTER, DESCRIBE, CLUSTER_ACTION, DESCRIBE_CONFIGS, ALTER_CONFIGS, IDEMPOTENT_WRITE.
KAFKA_CLUSTER_OPERATIONS = 8096


@pytest.fixture(scope="module")
def broker(tmp_path_factory):
    with BrokerProcess(tmp_path_factory.mktemp("parity-ops") / "data") as proc:
        yield proc


@pytest.mark.parametrize("version", [8, 10])
def test_cluster_authorized_operations_have_no_write(broker, version):
    answer = raw_request("127.0.0.1", broker.port, ApiKey.METADATA, version, {
        "topics": [], "allow_auto_topic_creation": False, "include_cluster_authorized_operations": True})
    assert answer["cluster_authorized_operations"] == KAFKA_CLUSTER_OPERATIONS


def test_describe_cluster_authorized_operations_have_no_write(broker):
    answer = raw_request("127.0.0.1", broker.port, ApiKey.DESCRIBE_CLUSTER, 1,
                         {"include_cluster_authorized_operations": True, "endpoint_type": 1})
    assert answer["cluster_authorized_operations"] == KAFKA_CLUSTER_OPERATIONS


# READ, DELETE, DESCRIBE, DESCRIBE_CONFIGS, ALTER_CONFIGS: groups have configs since KIP-848.
KAFKA_GROUP_OPERATIONS = 3400


def test_describe_groups_authorized_operations_include_configs(broker):
    commit = raw_request("127.0.0.1", broker.port, ApiKey.OFFSET_COMMIT, 2, {
        "group_id": "pao-g", "generation_id_or_member_epoch": -1, "member_id": "", "retention_time_ms": -1,
        "topics": []})
    assert commit["topics"] == []
    answer = raw_request("127.0.0.1", broker.port, ApiKey.DESCRIBE_GROUPS, 5,
                         {"groups": ["pao-g"], "include_authorized_operations": True})
    assert answer["groups"][0]["authorized_operations"] == KAFKA_GROUP_OPERATIONS
