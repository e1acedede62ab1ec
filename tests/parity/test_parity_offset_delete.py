"""OffsetDelete answered as Apache Kafka 4.4 answers (found by the protocol differential):
an empty group id is INVALID_GROUP_ID, even for a group "" that exists; a topic entry
without partitions is not answered."""

from __future__ import annotations

import pytest

from tests.brokerproc import BrokerProcess, create_topic, raw_request
from wire.errors import ErrorCode
from wire.registry import ApiKey

pytestmark = pytest.mark.timeout(120)


@pytest.fixture(scope="module")
def broker(tmp_path_factory):
    with BrokerProcess(tmp_path_factory.mktemp("parity-offset-delete") / "data") as proc:
        create_topic(proc.port, "pod", 1)
        for group in ("", "pod-g"):
            raw_request("127.0.0.1", proc.port, ApiKey.OFFSET_COMMIT, 8, {
                "group_id": group, "generation_id_or_member_epoch": -1, "member_id": "", "group_instance_id": None,
                "topics": [{"name": "pod", "partitions": [{"partition_index": 0, "committed_offset": 1,
                                                           "committed_leader_epoch": -1, "committed_metadata": ""}]}]})
        yield proc


def delete(broker, group: str, topics: list[dict]) -> dict:
    return raw_request("127.0.0.1", broker.port, ApiKey.OFFSET_DELETE, 0, {"group_id": group, "topics": topics})


def test_an_empty_group_id_is_invalid(broker):
    answer = delete(broker, "", [{"name": "pod", "partitions": [{"partition_index": 0}]}])
    assert (answer["error_code"], answer["topics"]) == (ErrorCode.INVALID_GROUP_ID, [])


def test_a_topic_without_partitions_is_not_answered(broker):
    answer = delete(broker, "pod-g", [{"name": "pod", "partitions": []}])
    assert (answer["error_code"], answer["topics"]) == (ErrorCode.NONE, [])
