"""Group requests answered as Apache Kafka 4.4 answers them (found by the protocol
differential):
- OffsetCommit v9+ from a member (generation >= 0) of a group that does not exist is
  GROUP_ID_NOT_FOUND; older versions ILLEGAL_GENERATION (Kafka's validateOffsetCommit);
- LeaveGroup v3+ with a group-level error lists no members;
- SyncGroup v5+ without a protocol type or name is INCONSISTENT_GROUP_PROTOCOL, with null
  protocol fields.
"""

from __future__ import annotations

import pytest

from tests.brokerproc import BrokerProcess, create_topic, raw_request
from wire.errors import ErrorCode
from wire.registry import ApiKey

pytestmark = pytest.mark.timeout(120)


@pytest.fixture(scope="module")
def broker(tmp_path_factory):
    with BrokerProcess(tmp_path_factory.mktemp("parity-group-requests") / "data") as proc:
        create_topic(proc.port, "pgr", 1)
        yield proc


def call(broker, api: int, version: int, body: dict) -> dict:
    return raw_request("127.0.0.1", broker.port, api, version, body)


@pytest.mark.parametrize("version, expected", [(8, ErrorCode.ILLEGAL_GENERATION), (9, ErrorCode.GROUP_ID_NOT_FOUND)])
def test_a_members_commit_to_a_missing_group(broker, version, expected):
    answer = call(broker, ApiKey.OFFSET_COMMIT, version, {
        "group_id": f"pgr-missing-{version}", "generation_id_or_member_epoch": 3, "member_id": "pgr-member",
        "group_instance_id": None, "topics": [{"name": "pgr", "partitions": [
            {"partition_index": 0, "committed_offset": 1, "committed_leader_epoch": -1, "committed_metadata": ""}]}]})
    assert answer["topics"][0]["partitions"][0]["error_code"] == expected


@pytest.mark.parametrize("version", [3, 5])
def test_a_group_level_leave_error_lists_no_members(broker, version):
    answer = call(broker, ApiKey.LEAVE_GROUP, version, {"group_id": "", "members": [
        {"member_id": "pgr-m", "group_instance_id": None, "reason": None}]})
    assert (answer["error_code"], answer["members"]) == (ErrorCode.INVALID_GROUP_ID, [])


@pytest.mark.parametrize("missing", ["protocol_type", "protocol_name"])
def test_sync_v5_needs_protocol_type_and_name(broker, missing):
    body = {"group_id": "pgr-sync", "generation_id": 1, "member_id": "pgr-m", "group_instance_id": None,
            "protocol_type": "consumer", "protocol_name": "range", "assignments": []}
    body[missing] = None
    answer = call(broker, ApiKey.SYNC_GROUP, 5, body)
    assert (answer["error_code"], answer["protocol_type"], answer["protocol_name"]) == (
        ErrorCode.INCONSISTENT_GROUP_PROTOCOL, None, None)
