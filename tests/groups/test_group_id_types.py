"""A group id belongs to one kind of group: requests of another kind for a share group's id
are refused (GROUP_ID_NOT_FOUND, as Kafka's ShareGroup answers) instead of creating a classic
or consumer group that would take the id from the share consumers; and a commit from outside
an empty consumer group (epoch -1) is accepted whatever member id it names, as Kafka's
validateOffsetCommit does. Raw requests over real sockets against a broker process."""

from __future__ import annotations

import pytest

from tests.brokerproc import BrokerProcess, raw_request
from tests.groups.share_wire import ShareClient, create_topic
from wire.errors import ErrorCode
from wire.registry import ApiKey

pytestmark = pytest.mark.timeout(120)


@pytest.fixture
def broker(tmp_path):
    with BrokerProcess(tmp_path / "data") as proc:
        yield proc


def _commit(broker, group: str, member_id: str, epoch: int, topic: str) -> int:
    body = {"group_id": group, "generation_id_or_member_epoch": epoch, "member_id": member_id,
            "group_instance_id": None, "topics": [{"name": topic, "partitions": [
                {"partition_index": 0, "committed_offset": 1, "committed_leader_epoch": -1,
                 "committed_metadata": ""}]}]}
    answer = raw_request("127.0.0.1", broker.port, ApiKey.OFFSET_COMMIT, 9, body)
    return answer["topics"][0]["partitions"][0]["error_code"]


def _heartbeat(broker, group: str, member_id: str, epoch: int, topic: str) -> dict:
    body = {"group_id": group, "member_id": member_id, "member_epoch": epoch, "instance_id": None,
            "rack_id": None, "rebalance_timeout_ms": 30000, "subscribed_topic_names": [topic],
            "server_assignor": None, "topic_partitions": [] if epoch == 0 else None}
    return raw_request("127.0.0.1", broker.port, ApiKey.CONSUMER_GROUP_HEARTBEAT, 0, body)


def test_a_share_groups_id_is_not_taken_by_other_kinds(broker):
    create_topic(broker.bootstrap, "jobs", 1)
    share = ShareClient(broker, "queue")
    assert share.join("jobs")["error_code"] == 0

    assert _heartbeat(broker, "queue", "", 0, "jobs")["error_code"] == ErrorCode.GROUP_ID_NOT_FOUND
    assert _commit(broker, "queue", "", -1, "jobs") == ErrorCode.GROUP_ID_NOT_FOUND
    fetched = raw_request("127.0.0.1", broker.port, ApiKey.OFFSET_FETCH, 9, {
        "groups": [{"group_id": "queue", "member_id": None, "member_epoch": -1,
                    "topics": [{"name": "jobs", "partition_indexes": [0]}]}], "require_stable": False})
    assert fetched["groups"][0]["error_code"] == ErrorCode.GROUP_ID_NOT_FOUND

    # the share group is untouched: its member heartbeats on at its epoch
    assert share.heartbeat()["error_code"] == 0
    listed = raw_request("127.0.0.1", broker.port, ApiKey.LIST_GROUPS, 5, {"states_filter": [], "types_filter": []})
    assert [(g["group_id"], g["group_type"]) for g in listed["groups"]] == [("queue", "share")]
    share.close()


def test_a_commit_from_outside_an_empty_consumer_group_is_accepted(broker):
    create_topic(broker.bootstrap, "events", 1)
    joined = _heartbeat(broker, "readers", "", 0, "events")
    assert joined["error_code"] == 0, joined
    member, epoch = joined["member_id"], joined["member_epoch"]
    assert _heartbeat(broker, "readers", member, -1, "events")["error_code"] == 0  # leaves: the group is empty
    # e.g. the Java consumer after unsubscribe() + assign(): it keeps its member id, epoch -1
    assert _commit(broker, "readers", member, -1, "events") == ErrorCode.NONE
    assert epoch > 0
