"""OffsetFetch and OffsetCommit answers shaped as Apache Kafka 4.4 shapes them (found by the
protocol differential): OffsetFetch answers named topics entry by entry as requested (a
topic named twice is answered twice, each with its own partitions); OffsetCommit does not
answer a topic entry without partitions."""

from __future__ import annotations

import pytest

from tests.brokerproc import BrokerProcess, create_topic, raw_request
from wire.registry import ApiKey

pytestmark = pytest.mark.timeout(120)


@pytest.fixture(scope="module")
def broker(tmp_path_factory):
    with BrokerProcess(tmp_path_factory.mktemp("parity-offsets") / "data") as proc:
        create_topic(proc.port, "pof", 3)
        answer = raw_request("127.0.0.1", proc.port, ApiKey.OFFSET_COMMIT, 8, {
            "group_id": "pof-g", "generation_id_or_member_epoch": -1, "member_id": "", "group_instance_id": None,
            "topics": [{"name": "pof", "partitions": [{"partition_index": i, "committed_offset": 10 + i,
                                                       "committed_leader_epoch": -1, "committed_metadata": ""}
                                                      for i in range(3)]}]})
        assert all(p["error_code"] == 0 for p in answer["topics"][0]["partitions"])
        yield proc


def shape(topics: list[dict]) -> list[tuple[str, list[tuple[int, int]]]]:
    return [(t["name"], [(p["partition_index"], p["committed_offset"]) for p in t["partitions"]]) for t in topics]


@pytest.mark.parametrize("version", [1, 7])
def test_offset_fetch_answers_topics_as_requested(broker, version):
    answer = raw_request("127.0.0.1", broker.port, ApiKey.OFFSET_FETCH, version, {
        "group_id": "pof-g", "topics": [{"name": "pof", "partition_indexes": [0, 1]},
                                        {"name": "pof", "partition_indexes": [2]}]})
    assert shape(answer["topics"]) == [("pof", [(0, 10), (1, 11)]), ("pof", [(2, 12)])]


def test_offset_fetch_v8_answers_topics_as_requested(broker):
    answer = raw_request("127.0.0.1", broker.port, ApiKey.OFFSET_FETCH, 8, {"groups": [{
        "group_id": "pof-g", "topics": [{"name": "pof", "partition_indexes": [2]},
                                        {"name": "pof", "partition_indexes": [2, 0]}]}]})
    assert shape(answer["groups"][0]["topics"]) == [("pof", [(2, 12)]), ("pof", [(2, 12), (0, 10)])]


def test_offset_commit_does_not_answer_a_topic_without_partitions(broker):
    answer = raw_request("127.0.0.1", broker.port, ApiKey.OFFSET_COMMIT, 8, {
        "group_id": "pof-g", "generation_id_or_member_epoch": -1, "member_id": "", "group_instance_id": None,
        "topics": [{"name": "pof", "partitions": []}]})
    assert answer["topics"] == []


def test_txn_offset_commit_does_not_answer_a_topic_without_partitions(broker):
    init = raw_request("127.0.0.1", broker.port, ApiKey.INIT_PRODUCER_ID, 4, {
        "transactional_id": "pof-txn", "transaction_timeout_ms": 60000, "producer_id": -1, "producer_epoch": -1})
    answer = raw_request("127.0.0.1", broker.port, ApiKey.TXN_OFFSET_COMMIT, 3, {
        "transactional_id": "pof-txn", "group_id": "pof-g", "producer_id": init["producer_id"],
        "producer_epoch": init["producer_epoch"], "generation_id": -1, "member_id": "", "group_instance_id": None,
        "topics": [{"name": "pof", "partitions": []}]})
    assert answer["topics"] == []


def test_txn_offset_commit_refuses_an_empty_group_id(broker):
    init = raw_request("127.0.0.1", broker.port, ApiKey.INIT_PRODUCER_ID, 4, {
        "transactional_id": "pof-txn-empty", "transaction_timeout_ms": 60000, "producer_id": -1,
        "producer_epoch": -1})
    answer = raw_request("127.0.0.1", broker.port, ApiKey.TXN_OFFSET_COMMIT, 3, {
        "transactional_id": "pof-txn-empty", "group_id": "", "producer_id": init["producer_id"],
        "producer_epoch": init["producer_epoch"], "generation_id": -1, "member_id": "", "group_instance_id": None,
        "topics": [{"name": "pof", "partitions": [{"partition_index": 0, "committed_offset": 1,
                                                   "committed_leader_epoch": -1, "committed_metadata": ""}]}]})
    assert answer["topics"][0]["partitions"][0]["error_code"] == 24  # INVALID_GROUP_ID
