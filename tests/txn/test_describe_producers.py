"""DescribeProducers (61) against a real broker process: the producer state a partition keeps.

A transactional producer (confluent-kafka) opens a transaction on one partition and an
idempotent one writes to another; DescribeProducers then shows each producer id with its
epoch, last sequence, last timestamp and, for the open transaction, the offset it began at.
Kafka's own `kafka-transactions describe-producers / find-hanging / abort` read this (the
last aborts with WriteTxnMarkers, tried here too: the partition's last stable offset moves
past the aborted records). Unknown topics and partitions answer as Kafka's
KafkaApis.handleDescribeProducersRequest does.
"""

from __future__ import annotations

import pytest
from confluent_kafka import Producer

from tests.brokerproc import BrokerProcess, create_topic, raw_request
from wire.registry import ApiKey

pytestmark = pytest.mark.timeout(90)

NONE, UNKNOWN_TOPIC_OR_PARTITION = 0, 3
TS = 1704067200000


@pytest.fixture(scope="module")
def broker(tmp_path_factory):
    with BrokerProcess(tmp_path_factory.mktemp("describe-producers") / "data") as b:
        yield b


def describe(broker, topics: dict[str, list[int]]) -> dict:
    body = {"topics": [{"name": name, "partition_indexes": indexes} for name, indexes in topics.items()]}
    answer = raw_request("127.0.0.1", broker.port, ApiKey.DESCRIBE_PRODUCERS, 0, body)
    return {(t["name"], p["partition_index"]): p for t in answer["topics"] for p in t["partitions"]}


def list_offset(broker, topic: str, partition: int, read_committed: bool) -> int:
    body = {"replica_id": -1, "isolation_level": 1 if read_committed else 0,
            "topics": [{"name": topic, "partitions": [{"partition_index": partition, "current_leader_epoch": -1,
                                                       "timestamp": -1}]}]}
    answer = raw_request("127.0.0.1", broker.port, ApiKey.LIST_OFFSETS, 7, body)
    return answer["topics"][0]["partitions"][0]["offset"]


def test_producer_state_and_an_abort_by_marker(broker):
    create_topic(broker.port, "states", 2)
    idempotent = Producer({"bootstrap.servers": broker.bootstrap, "enable.idempotence": True, "linger.ms": 0})
    for i in range(3):
        idempotent.produce("states", value=b"plain", partition=1, timestamp=TS + i)
    assert idempotent.flush(30) == 0
    txn = Producer({"bootstrap.servers": broker.bootstrap, "transactional.id": "describe-me", "linger.ms": 0})
    txn.init_transactions(30)
    txn.begin_transaction()
    for i in range(2):
        txn.produce("states", value=b"open", partition=0, timestamp=TS + 100 + i)
    assert txn.flush(30) == 0

    got = describe(broker, {"states": [0, 1, 7], "nowhere": [0]})
    assert got[("states", 0)]["error_code"] == NONE
    [open_txn] = got[("states", 0)]["active_producers"]
    assert (open_txn["last_sequence"], open_txn["last_timestamp"], open_txn["current_txn_start_offset"]) == \
        (1, TS + 101, 0), open_txn
    [plain] = got[("states", 1)]["active_producers"]
    assert (plain["last_sequence"], plain["last_timestamp"], plain["current_txn_start_offset"]) == (2, TS + 2, -1)
    assert plain["producer_id"] != open_txn["producer_id"]
    assert (got[("states", 7)]["error_code"], got[("states", 7)]["active_producers"]) == (UNKNOWN_TOPIC_OR_PARTITION, [])
    assert got[("nowhere", 0)]["error_code"] == UNKNOWN_TOPIC_OR_PARTITION
    assert list_offset(broker, "states", 0, read_committed=True) == 0

    # What `kafka-transactions abort` does with that state: an ABORT marker for the producer.
    body = {"markers": [{"producer_id": open_txn["producer_id"], "producer_epoch": open_txn["producer_epoch"],
                         "transaction_result": False, "coordinator_epoch": open_txn["coordinator_epoch"],
                         "topics": [{"name": "states", "partition_indexes": [0]}]}]}
    answer = raw_request("127.0.0.1", broker.port, ApiKey.WRITE_TXN_MARKERS, 1, body)
    assert answer["markers"][0]["topics"][0]["partitions"][0]["error_code"] == NONE, answer
    [after] = describe(broker, {"states": [0]})[("states", 0)]["active_producers"]
    assert after["current_txn_start_offset"] == -1, after
    assert list_offset(broker, "states", 0, read_committed=True) == 3  # two records and the marker
