"""KIP-848 consumer group requests answered as Apache Kafka 4.4 answers them (found by the
protocol differential):
- ConsumerGroupHeartbeat v0 may join with an empty list of topic names (a member subscribed
  to nothing yet);
- ConsumerGroupDescribe: an empty group id is INVALID_GROUP_ID, an unknown group's error
  entry carries epochs 0, and a member without a regex has subscribed_topic_regex "".
"""

from __future__ import annotations

import pytest

from tests.brokerproc import BrokerProcess, create_topic, raw_request
from wire.errors import ErrorCode
from wire.registry import ApiKey

pytestmark = pytest.mark.timeout(120)


@pytest.fixture(scope="module")
def broker(tmp_path_factory):
    with BrokerProcess(tmp_path_factory.mktemp("parity-consumer-groups") / "data") as proc:
        create_topic(proc.port, "pcgr", 1)
        yield proc


def heartbeat(broker, version: int, group: str, member: str, names) -> dict:
    return raw_request("127.0.0.1", broker.port, ApiKey.CONSUMER_GROUP_HEARTBEAT, version, {
        "group_id": group, "member_id": member, "member_epoch": 0, "instance_id": None, "rack_id": None,
        "rebalance_timeout_ms": 30000, "subscribed_topic_names": names, "subscribed_topic_regex": None,
        "server_assignor": None, "topic_partitions": []})


@pytest.mark.parametrize("version", [0, 1])
def test_a_member_may_join_subscribed_to_nothing(broker, version):
    answer = heartbeat(broker, version, f"pcgr-empty-{version}", "" if version == 0 else "pcgr-member-0000000001", [])
    assert answer["error_code"] == ErrorCode.NONE and answer["member_epoch"] > 0


def test_describe_answers_as_kafka(broker):
    joined = heartbeat(broker, 1, "pcgr-described", "pcgr-member-0000000002", ["pcgr"])
    assert joined["error_code"] == ErrorCode.NONE
    answer = raw_request("127.0.0.1", broker.port, ApiKey.CONSUMER_GROUP_DESCRIBE, 0, {
        "group_ids": ["pcgr-described", "pcgr-nobody", ""], "include_authorized_operations": False})
    described, unknown, empty = answer["groups"]
    assert described["error_code"] == ErrorCode.NONE
    assert [m["subscribed_topic_regex"] for m in described["members"]] == [""]
    assert (unknown["error_code"], unknown["group_epoch"], unknown["assignment_epoch"]) == (
        ErrorCode.GROUP_ID_NOT_FOUND, 0, 0)
    assert empty["error_code"] == ErrorCode.INVALID_GROUP_ID
