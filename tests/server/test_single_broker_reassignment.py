"""Partition reassignment requests on a single broker, which is its one-broker cluster's controller.

A one-node Kafka answers ListPartitionReassignments with no moves and validates an
AlterPartitionReassignments target against the brokers it has (ReplicationControlManager's
messages). A NOT_CONTROLLER answer here sent Kafka's admin client back to Metadata, which
names this broker again, until its timeout: `kafka-topics --describe` (which lists
reassignments) hung for a minute.
"""

from __future__ import annotations

import pytest

from tests.brokerproc import BrokerProcess, create_topic, raw_request
from wire.registry import ApiKey

pytestmark = pytest.mark.timeout(60)

NONE, UNKNOWN_TOPIC_OR_PARTITION, INVALID_REPLICA_ASSIGNMENT, NO_REASSIGNMENT_IN_PROGRESS = 0, 3, 39, 85


@pytest.fixture(scope="module")
def broker(tmp_path_factory):
    with BrokerProcess(tmp_path_factory.mktemp("single-reassign") / "data") as b:
        yield b


def test_list_reassignments_is_empty(broker):
    create_topic(broker.port, "moves", 2)
    for topics in (None, [{"name": "moves", "partition_indexes": [0, 1]}]):
        answer = raw_request("127.0.0.1", broker.port, ApiKey.LIST_PARTITION_REASSIGNMENTS, 0,
                             {"timeout_ms": 5000, "topics": topics})
        assert answer["error_code"] == NONE and answer["topics"] == [], answer


def test_alter_reassignments_validates_like_a_one_node_kafka(broker):
    create_topic(broker.port, "targets", 1)
    body = {"timeout_ms": 5000, "topics": [
        {"name": "targets", "partitions": [{"partition_index": 0, "replicas": [1]}]},
        {"name": "targets", "partitions": [{"partition_index": 0, "replicas": [2, 1]}]},
        {"name": "targets", "partitions": [{"partition_index": 0, "replicas": [1, 1]}]},
        {"name": "targets", "partitions": [{"partition_index": 0, "replicas": []}]},
        {"name": "targets", "partitions": [{"partition_index": 0, "replicas": None}]},
        {"name": "targets", "partitions": [{"partition_index": 5, "replicas": [1]}]},
        {"name": "nowhere", "partitions": [{"partition_index": 0, "replicas": [1]}]},
    ]}
    answer = raw_request("127.0.0.1", broker.port, ApiKey.ALTER_PARTITION_REASSIGNMENTS, 0, body)
    assert answer["error_code"] == NONE, answer
    got = [(r["partitions"][0]["error_code"], r["partitions"][0]["error_message"]) for r in answer["responses"]]
    assert got == [
        (NONE, None),
        (INVALID_REPLICA_ASSIGNMENT, "The manual partition assignment includes broker 2, but no such broker is "
                                     "registered."),
        (INVALID_REPLICA_ASSIGNMENT, "The manual partition assignment includes the broker 1 more than once."),
        (INVALID_REPLICA_ASSIGNMENT, "The manual partition assignment includes an empty replica list."),
        (NO_REASSIGNMENT_IN_PROGRESS, None),  # Kafka 4.4 answers a cancel without a message
        (UNKNOWN_TOPIC_OR_PARTITION, "Unable to find partition targets:5."),
        (UNKNOWN_TOPIC_OR_PARTITION, "Unable to find a topic named nowhere."),
    ]
