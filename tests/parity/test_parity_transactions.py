"""Transaction requests checked as Apache Kafka 4.4 checks them (found by the protocol
differential):
- an empty transactional id is INVALID_REQUEST for AddPartitionsToTxn, AddOffsetsToTxn and
  EndTxn (Kafka's TransactionCoordinator checks it first);
- InitProducerId with a producer id but no epoch, or an epoch but no id, is INVALID_REQUEST;
- AddOffsetsToTxn takes an empty group id (Kafka puts it in its offsets partition).
"""

from __future__ import annotations

import pytest

from tests.brokerproc import BrokerProcess, create_topic, raw_request
from wire.errors import ErrorCode
from wire.registry import ApiKey

pytestmark = pytest.mark.timeout(120)


@pytest.fixture(scope="module")
def broker(tmp_path_factory):
    with BrokerProcess(tmp_path_factory.mktemp("parity-txn") / "data") as proc:
        create_topic(proc.port, "ptx", 1)
        yield proc


def call(broker, api: int, version: int, body: dict) -> dict:
    return raw_request("127.0.0.1", broker.port, api, version, body)


def init(broker, txn: str | None, producer_id: int = -1, producer_epoch: int = -1, version: int = 4) -> dict:
    return call(broker, ApiKey.INIT_PRODUCER_ID, version, {"transactional_id": txn, "transaction_timeout_ms": 60000,
                                                           "producer_id": producer_id,
                                                           "producer_epoch": producer_epoch})


def test_empty_transactional_ids_are_invalid(broker):
    producer = init(broker, "ptx-t")
    pid, epoch = producer["producer_id"], producer["producer_epoch"]
    added = call(broker, ApiKey.ADD_PARTITIONS_TO_TXN, 3, {
        "v3_and_below_transactional_id": "", "v3_and_below_producer_id": pid, "v3_and_below_producer_epoch": epoch,
        "v3_and_below_topics": [{"name": "ptx", "partitions": [0]}]})
    assert added["results_by_topic_v3_and_below"][0]["results_by_partition"][0]["partition_error_code"] \
        == ErrorCode.INVALID_REQUEST
    offsets = call(broker, ApiKey.ADD_OFFSETS_TO_TXN, 3, {"transactional_id": "", "producer_id": pid,
                                                          "producer_epoch": epoch, "group_id": "ptx-g"})
    assert offsets["error_code"] == ErrorCode.INVALID_REQUEST
    ended = call(broker, ApiKey.END_TXN, 3, {"transactional_id": "", "producer_id": pid, "producer_epoch": epoch,
                                             "committed": True})
    assert ended["error_code"] == ErrorCode.INVALID_REQUEST


@pytest.mark.parametrize("txn", [None, "ptx-pair"])
def test_a_producer_id_needs_its_epoch(broker, txn):
    assert init(broker, txn, producer_id=424242)["error_code"] == ErrorCode.INVALID_REQUEST
    assert init(broker, txn, producer_epoch=3)["error_code"] == ErrorCode.INVALID_REQUEST
    assert init(broker, txn)["error_code"] == ErrorCode.NONE


def test_add_offsets_takes_an_empty_group_id(broker):
    producer = init(broker, "ptx-empty-group")
    answer = call(broker, ApiKey.ADD_OFFSETS_TO_TXN, 3, {"transactional_id": "ptx-empty-group",
                                                         "producer_id": producer["producer_id"],
                                                         "producer_epoch": producer["producer_epoch"], "group_id": ""})
    assert answer["error_code"] == ErrorCode.NONE


def test_write_txn_markers_answers_each_producer_once(broker):
    marker = {"producer_id": 424242, "producer_epoch": 0, "transaction_result": False,
              "topics": [{"name": "ptx", "partition_indexes": [0]}], "coordinator_epoch": 0}
    answer = call(broker, ApiKey.WRITE_TXN_MARKERS, 1, {"markers": [marker, marker, {**marker, "producer_id": 7,
                                                                                      "topics": []}]})
    assert [(m["producer_id"], [(t["name"], [p["partition_index"] for p in t["partitions"]]) for t in m["topics"]])
            for m in answer["markers"]] == [(424242, [("ptx", [0])])]


def test_add_partitions_answers_as_asked(broker):
    producer = init(broker, "ptx-shape")
    answer = call(broker, ApiKey.ADD_PARTITIONS_TO_TXN, 3, {
        "v3_and_below_transactional_id": "ptx-shape", "v3_and_below_producer_id": producer["producer_id"],
        "v3_and_below_producer_epoch": producer["producer_epoch"],
        "v3_and_below_topics": [{"name": "ptx", "partitions": [0, 0]}, {"name": "ptx", "partitions": [0]}]})
    assert [(t["name"], [(p["partition_index"], p["partition_error_code"]) for p in t["results_by_partition"]])
            for t in answer["results_by_topic_v3_and_below"]] == [("ptx", [(0, 0), (0, 0)]), ("ptx", [(0, 0)])]


@pytest.mark.parametrize("version, fenced", [(3, ErrorCode.INVALID_PRODUCER_EPOCH), (4, ErrorCode.PRODUCER_FENCED)])
def test_a_stale_epoch_after_a_plain_init_is_fenced(broker, version, fenced):
    txn = f"ptx-stale-{version}"
    first = init(broker, txn, version=version)
    assert init(broker, txn, version=version)["producer_epoch"] == first["producer_epoch"] + 1
    # The first epoch is not the one a KIP-360 bump moved from: no retry, fenced.
    again = init(broker, txn, first["producer_id"], first["producer_epoch"], version=version)
    assert again["error_code"] == fenced


def test_a_lost_kip360_bump_may_be_asked_again(broker):
    txn = "ptx-retry"
    first = init(broker, txn)
    bumped = init(broker, txn, first["producer_id"], first["producer_epoch"])
    assert bumped["producer_epoch"] == first["producer_epoch"] + 1
    retried = init(broker, txn, first["producer_id"], first["producer_epoch"])
    assert (retried["error_code"], retried["producer_epoch"]) == (ErrorCode.NONE, bumped["producer_epoch"])
