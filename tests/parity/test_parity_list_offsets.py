"""ListOffsets answers as Apache Kafka 4.4 gives them (found by the protocol differential).

- a partition named twice (in one topic entry or two) is answered once, INVALID_REQUEST
  (Kafka's ListOffsetsRequest.duplicatePartitions); a topic without partitions is not
  answered;
- a negative timestamp that is none of the special ones (-1..-5) is UNSUPPORTED_VERSION;
- an isolation level other than 0 and 1 fails every partition with UNKNOWN_SERVER_ERROR.
"""

from __future__ import annotations

import pytest

from tests.brokerproc import BrokerProcess, create_topic, raw_request
from wire.errors import ErrorCode
from wire.registry import ApiKey

pytestmark = pytest.mark.timeout(120)


@pytest.fixture(scope="module")
def broker(tmp_path_factory):
    with BrokerProcess(tmp_path_factory.mktemp("parity-list-offsets") / "data") as proc:
        create_topic(proc.port, "plo", 3)
        yield proc


def list_offsets(broker, version: int, topics: list[dict], isolation: int = 0) -> dict:
    return raw_request("127.0.0.1", broker.port, ApiKey.LIST_OFFSETS, version,
                       {"replica_id": -1, "isolation_level": isolation, "topics": topics})


def parts(*indexes: int, timestamp: int = -1) -> list[dict]:
    return [{"partition_index": i, "current_leader_epoch": -1, "timestamp": timestamp} for i in indexes]


def answers(answer: dict) -> dict:
    return {(t["name"], p["partition_index"]): (p["error_code"], p["offset"])
            for t in answer["topics"] for p in t["partitions"]}


@pytest.mark.parametrize("version", [1, 5, 9])
def test_a_partition_named_twice_is_answered_once_as_invalid(broker, version):
    answer = list_offsets(broker, version, [{"name": "plo", "partitions": parts(0, 1)},
                                            {"name": "plo", "partitions": parts(0, 2)}])
    assert len(answer["topics"]) == 1 and len(answer["topics"][0]["partitions"]) == 3
    assert answers(answer) == {("plo", 0): (ErrorCode.INVALID_REQUEST, -1), ("plo", 1): (ErrorCode.NONE, 0),
                               ("plo", 2): (ErrorCode.NONE, 0)}


def test_a_topic_without_partitions_is_not_answered(broker):
    answer = list_offsets(broker, 9, [{"name": "plo", "partitions": []}, {"name": "plo-x", "partitions": []}])
    assert answer["topics"] == []


@pytest.mark.parametrize("version", [1, 9])
def test_an_unknown_negative_timestamp_is_unsupported(broker, version):
    answer = list_offsets(broker, version, [{"name": "plo", "partitions": parts(0, timestamp=-99)}])
    assert answers(answer) == {("plo", 0): (ErrorCode.UNSUPPORTED_VERSION, -1)}


@pytest.mark.parametrize("version", [2, 9])
def test_an_unknown_isolation_level_fails_every_partition(broker, version):
    answer = list_offsets(broker, version, [{"name": "plo", "partitions": parts(0, 1)}], isolation=99)
    assert answers(answer) == {("plo", 0): (ErrorCode.UNKNOWN_SERVER_ERROR, -1),
                               ("plo", 1): (ErrorCode.UNKNOWN_SERVER_ERROR, -1)}


@pytest.mark.parametrize("version, supported", [(1, set()), (6, set()), (7, {-3}), (8, {-3, -4}), (9, {-3, -4, -5})])
def test_special_timestamps_need_their_version(broker, version, supported):
    topics = [{"name": "plo", "partitions": [{"partition_index": i, "current_leader_epoch": -1, "timestamp": ts}
                                             for i, ts in enumerate((-3, -4, -5))]}]
    codes = {p["partition_index"]: p["error_code"]
             for p in list_offsets(broker, version, topics)["topics"][0]["partitions"]}
    assert codes == {i: ErrorCode.NONE if ts in supported else ErrorCode.UNSUPPORTED_VERSION
                     for i, ts in enumerate((-3, -4, -5))}
