"""Classic group requests that name a group.instance.id, answered as Apache Kafka 4.4 does
(found by the protocol differential).

Kafka checks the member of a SyncGroup, Heartbeat and OffsetCommit with
ClassicGroup.validateMember: when the request names an instance id (even ""), that static
member must exist (else UNKNOWN_MEMBER_ID) and be the requesting member id (else
FENCED_INSTANCE_ID); without one, the member id must be in the group.
"""

from __future__ import annotations

import struct

import pytest

from tests.brokerproc import BrokerProcess, create_topic, raw_request
from wire.errors import ErrorCode
from wire.registry import ApiKey

pytestmark = pytest.mark.timeout(120)

SUBSCRIPTION = struct.pack(">hih", 0, 1, 3) + b"pcg" + struct.pack(">i", -1)


@pytest.fixture(scope="module")
def broker(tmp_path_factory):
    with BrokerProcess(tmp_path_factory.mktemp("parity-groups") / "data") as proc:
        create_topic(proc.port, "pcg", 1)
        yield proc


def call(broker, api: int, version: int, body: dict) -> dict:
    return raw_request("127.0.0.1", broker.port, api, version, body)


def join(broker, group: str, instance_id: str | None = None) -> tuple[str, int]:
    """A member of `group` (JoinGroup v5 twice, then SyncGroup as leader): (member id, generation)."""
    body = {"group_id": group, "session_timeout_ms": 30000, "rebalance_timeout_ms": 10000, "member_id": "",
            "group_instance_id": instance_id, "protocol_type": "consumer",
            "protocols": [{"name": "range", "metadata": SUBSCRIPTION}]}
    first = call(broker, ApiKey.JOIN_GROUP, 5, body)
    if first["error_code"] == ErrorCode.MEMBER_ID_REQUIRED:
        first = call(broker, ApiKey.JOIN_GROUP, 5, {**body, "member_id": first["member_id"]})
    assert first["error_code"] == 0, first
    member, generation = first["member_id"], first["generation_id"]
    synced = call(broker, ApiKey.SYNC_GROUP, 3, {"group_id": group, "generation_id": generation, "member_id": member,
                                                 "group_instance_id": instance_id,
                                                 "assignments": [{"member_id": member, "assignment": b""}]})
    assert synced["error_code"] == 0, synced
    return member, generation


def heartbeat(broker, group, member, generation, instance_id) -> int:
    return call(broker, ApiKey.HEARTBEAT, 3, {"group_id": group, "generation_id": generation, "member_id": member,
                                              "group_instance_id": instance_id})["error_code"]


def sync(broker, group, member, generation, instance_id) -> int:
    return call(broker, ApiKey.SYNC_GROUP, 3, {"group_id": group, "generation_id": generation, "member_id": member,
                                               "group_instance_id": instance_id, "assignments": []})["error_code"]


def commit(broker, group, member, generation, instance_id) -> int:
    answer = call(broker, ApiKey.OFFSET_COMMIT, 7, {
        "group_id": group, "generation_id_or_member_epoch": generation, "member_id": member,
        "group_instance_id": instance_id, "topics": [{"name": "pcg", "partitions": [
            {"partition_index": 0, "committed_offset": 1, "committed_leader_epoch": -1, "committed_metadata": ""}]}]})
    return answer["topics"][0]["partitions"][0]["error_code"]


@pytest.mark.parametrize("request_", [heartbeat, sync, commit], ids=["heartbeat", "sync", "commit"])
def test_an_unknown_instance_id_is_an_unknown_member(broker, request_):
    group = f"pcg-unknown-{request_.__name__}"
    member, generation = join(broker, group)
    assert request_(broker, group, member, generation, None) == ErrorCode.NONE
    assert request_(broker, group, member, generation, "") == ErrorCode.UNKNOWN_MEMBER_ID
    assert request_(broker, group, member, generation, "pcg-nobody") == ErrorCode.UNKNOWN_MEMBER_ID


@pytest.mark.parametrize("request_", [heartbeat, sync, commit], ids=["heartbeat", "sync", "commit"])
def test_another_members_instance_id_is_fenced(broker, request_):
    group = f"pcg-fenced-{request_.__name__}"
    member, generation = join(broker, group, instance_id="pcg-static")
    assert request_(broker, group, member, generation, "pcg-static") == ErrorCode.NONE
    assert request_(broker, group, member + "-other", generation, "pcg-static") == ErrorCode.FENCED_INSTANCE_ID
