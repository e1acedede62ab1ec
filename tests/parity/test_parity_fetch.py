"""Fetch answers as Apache Kafka 4.4 gives them (found by the protocol differential).

- Kafka reads the partitions of a sessionless fetch into a map: a partition named twice
  (or a topic named twice) is answered once, and a topic without partitions not at all;
- an isolation level other than 0 and 1 fails the request (Kafka's IsolationLevel.forId
  throws): UNKNOWN_SERVER_ERROR at the top (v7+) and for every partition (below v13);
- partitions Kafka refuses before reading (unknown topic or partition, unknown topic id)
  carry an empty aborted-transaction list, those it read (or failed to) a null one;
- a consumer's last_fetched_epoch (v12+) is checked as a follower's is: an epoch the log
  does not know is OFFSET_OUT_OF_RANGE.
"""

from __future__ import annotations

import uuid

import pytest

from tests.brokerproc import BrokerProcess, create_topic, raw_request
from wire.errors import ErrorCode
from wire.records import Record, build_batch
from wire.registry import ApiKey

pytestmark = pytest.mark.timeout(120)


@pytest.fixture(scope="module")
def broker(tmp_path_factory):
    with BrokerProcess(tmp_path_factory.mktemp("parity-fetch") / "data") as proc:
        proc.topic_id = create_topic(proc.port, "pf", 2)
        batch = bytes(build_batch([Record(offset=i, timestamp=1_790_000_000_000, key=None, value=b"v")
                                   for i in range(3)]))
        answer = raw_request("127.0.0.1", proc.port, ApiKey.PRODUCE, 8, {
            "transactional_id": None, "acks": -1, "timeout_ms": 5000,
            "topic_data": [{"name": "pf", "partition_data": [{"index": 0, "records": batch}]}]})
        assert answer["responses"][0]["partition_responses"][0]["error_code"] == 0
        yield proc


def part(index: int, offset: int = 0, last_fetched_epoch: int = -1) -> dict:
    return {"partition": index, "current_leader_epoch": -1, "fetch_offset": offset,
            "last_fetched_epoch": last_fetched_epoch, "log_start_offset": -1, "partition_max_bytes": 1 << 20}


def fetch(broker, version: int, topics: list[dict], isolation: int = 0) -> dict:
    return raw_request("127.0.0.1", broker.port, ApiKey.FETCH, version, {
        "replica_id": -1, "max_wait_ms": 0, "min_bytes": 1, "max_bytes": 1 << 20, "isolation_level": isolation,
        "session_id": 0, "session_epoch": -1, "topics": topics, "forgotten_topics_data": [], "rack_id": ""})


def topic(broker, parts: list[dict], name: str = "pf") -> dict:
    return {"topic": name, "topic_id": broker.topic_id, "partitions": parts}


@pytest.mark.parametrize("version", [4, 12, 13])
def test_a_partition_named_twice_is_answered_once(broker, version):
    answer = fetch(broker, version, [topic(broker, [part(0), part(0, 2)]), topic(broker, [part(1)])])
    assert len(answer["responses"]) == 1
    assert sorted(p["partition_index"] for p in answer["responses"][0]["partitions"]) == [0, 1]


@pytest.mark.parametrize("version", [4, 13])
def test_a_topic_without_partitions_is_not_answered(broker, version):
    answer = fetch(broker, version, [topic(broker, []), topic(broker, [part(1)])])
    assert [len(t["partitions"]) for t in answer["responses"]] == [1]


@pytest.mark.parametrize("version", [4, 7, 12, 13])
def test_an_unknown_isolation_level_fails_the_request(broker, version):
    answer = fetch(broker, version, [topic(broker, [part(0), part(1)])], isolation=99)
    if version >= 7:
        assert answer["error_code"] == ErrorCode.UNKNOWN_SERVER_ERROR
    if version < 13:
        parts = answer["responses"][0]["partitions"]
        assert [(p["error_code"], p["high_watermark"], p["records"] or b"") for p in parts] == [
            (ErrorCode.UNKNOWN_SERVER_ERROR, -1, b"")] * 2
    else:
        assert answer["responses"] == []


def test_unknown_partitions_carry_an_empty_aborted_list(broker):
    answer = fetch(broker, 12, [topic(broker, [part(0), part(7)]), topic(broker, [part(0)], name="pf-none")])
    got = {(t["topic"], p["partition_index"]): (p["error_code"], p["aborted_transactions"])
           for t in answer["responses"] for p in t["partitions"]}
    assert got == {("pf", 0): (ErrorCode.NONE, None), ("pf", 7): (ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, []),
                   ("pf-none", 0): (ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, [])}
    by_id = raw_request("127.0.0.1", broker.port, ApiKey.FETCH, 13, {
        "replica_id": -1, "max_wait_ms": 0, "min_bytes": 1, "max_bytes": 1 << 20, "isolation_level": 0,
        "session_id": 0, "session_epoch": -1, "forgotten_topics_data": [], "rack_id": "",
        "topics": [{"topic_id": uuid.UUID("5eed0000-0000-4000-8000-00000000dead"), "partitions": [part(0)]}]})
    p = by_id["responses"][0]["partitions"][0]
    assert (p["error_code"], p["aborted_transactions"]) == (ErrorCode.UNKNOWN_TOPIC_ID, [])


def test_a_consumers_unknown_last_fetched_epoch_is_out_of_range(broker):
    answer = fetch(broker, 12, [topic(broker, [part(0, 1, last_fetched_epoch=7)])])
    p = answer["responses"][0]["partitions"][0]
    assert (p["error_code"], p["aborted_transactions"]) == (ErrorCode.OFFSET_OUT_OF_RANGE, None)
    known = fetch(broker, 12, [topic(broker, [part(0, 1, last_fetched_epoch=0)])])
    assert known["responses"][0]["partitions"][0]["error_code"] == ErrorCode.NONE


@pytest.mark.parametrize("version", [4, 12, 17])
def test_a_consumers_failed_read_carries_no_offsets(broker, version):
    answer = fetch(broker, version, [topic(broker, [part(0, 1000)])])
    p = answer["responses"][0]["partitions"][0]
    fields = (p["error_code"], p["high_watermark"], p["last_stable_offset"], p.get("log_start_offset", -1))
    assert fields == (ErrorCode.OFFSET_OUT_OF_RANGE, -1, -1, -1)
