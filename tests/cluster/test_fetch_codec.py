"""The replica fetcher's Fetch v12 codec (wire/fetch_codec.py) against the generic one.

The fast path must write the same bytes the generic encoder writes for the same request, and
read from a response what the generic decoder reads, whatever optional parts the leader puts
in (aborted transactions, null records, tagged diverging_epoch / current_leader /
snapshot_id, errors, several topics and partitions)."""

from __future__ import annotations

import pytest

from wire.fetch_codec import ReplicaFetchRequest, decode_fetch_response
from wire.connection import decode_request, encode_request, encode_response
from wire.errors import MalformedFrame
from wire.registry import ApiKey


def _generic_request(topics, replica_id=2, max_wait_ms=500, min_bytes=1, max_bytes=10 * 1024 * 1024):
    return {"cluster_id": None, "replica_id": replica_id, "max_wait_ms": max_wait_ms, "min_bytes": min_bytes,
            "max_bytes": max_bytes, "isolation_level": 0, "session_id": 0, "session_epoch": -1,
            "topics": [{"topic": name, "partitions": [
                {"partition": p[0], "current_leader_epoch": p[1], "fetch_offset": p[2], "last_fetched_epoch": p[3],
                 "log_start_offset": p[4], "partition_max_bytes": p[5]} for p in parts]} for name, parts in topics],
            "forgotten_topics_data": [], "rack_id": ""}


@pytest.mark.parametrize("topics", [
    [("t", [(0, 3, 12345, 3, 0, 1048576)])],
    [("orders", [(0, 0, 0, -1, 0, 1048576), (7, 12, 2**40, 11, 2**33, 1)]), ("é-topic" * 20, [(2, 1, 5, 1, 5, 9)])],
    [],
])
def test_request_is_the_generic_encoding(topics):
    fast = ReplicaFetchRequest("trafka-broker-2", 2, 500, 1, 10 * 1024 * 1024)
    for correlation_id in (1, 0x7FFFFFFF):
        frame = fast.encode(correlation_id, topics)
        assert frame == encode_request(ApiKey.FETCH, 12, correlation_id, _generic_request(topics),
                                       client_id="trafka-broker-2")
        request = decode_request(memoryview(frame)[4:])
        assert request.body["replica_id"] == 2


def _partition(index, *, code=0, hw=10, lso=10, log_start=0, records=b"", aborted=None, **tagged):
    entry = {"partition_index": index, "error_code": code, "high_watermark": hw, "last_stable_offset": lso,
             "log_start_offset": log_start, "aborted_transactions": aborted, "preferred_read_replica": -1,
             "records": records}
    entry.update(tagged)
    return entry


RESPONSES = [
    [{"topic": "t", "partitions": [_partition(0, records=b"x" * 300)]}],
    [{"topic": "t", "partitions": [_partition(0, records=None), _partition(1, code=6, hw=-1, log_start=-1),
                                   _partition(2, records=b"", aborted=[{"producer_id": 9, "first_offset": 4}])]},
     {"topic": "u" * 200, "partitions": [_partition(5, hw=2**40, records=b"\x00" * 70000)]}],
    [{"topic": "t", "partitions": [
        _partition(0, diverging_epoch={"epoch": 4, "end_offset": 77}),
        _partition(1, current_leader={"leader_id": 3, "leader_epoch": 9},
                   snapshot_id={"end_offset": 5, "epoch": 2}, records=b"abc"),
        _partition(2, diverging_epoch={"epoch": 0, "end_offset": 0}, current_leader={"leader_id": 1, "leader_epoch": 1})]}],
    [],
]


@pytest.mark.parametrize("responses", RESPONSES)
@pytest.mark.parametrize("error_code", [0, 70])
def test_response_reads_what_the_generic_decoder_reads(responses, error_code):
    body = {"throttle_time_ms": 0, "error_code": error_code, "session_id": 0, "responses": responses}
    frame = encode_response(ApiKey.FETCH, 12, 77, body)[4:]
    code, partitions = decode_fetch_response(bytearray(frame))
    assert code == error_code
    expected = [(t["topic"], p) for t in responses for p in t["partitions"]]
    assert len(partitions) == len(expected)
    for got, (topic, want) in zip(partitions, expected):
        assert (got.topic, got.partition_index, got.error_code, got.high_watermark, got.log_start_offset) == \
            (topic, want["partition_index"], want["error_code"], want["high_watermark"], want["log_start_offset"])
        assert (None if got.records is None else bytes(got.records)) == want["records"]
        diverging = want.get("diverging_epoch") or {"epoch": -1, "end_offset": -1}
        assert (got.diverging_epoch, got.diverging_end_offset) == (diverging["epoch"], diverging["end_offset"])


def test_records_are_a_view_of_the_frame():
    body = {"throttle_time_ms": 0, "error_code": 0, "session_id": 0, "responses": RESPONSES[0]}
    frame = bytearray(encode_response(ApiKey.FETCH, 12, 1, body)[4:])
    _code, [partition] = decode_fetch_response(frame)
    assert isinstance(partition.records, memoryview) and partition.records.obj is frame


@pytest.mark.parametrize("cut", [1, 10, 40])
def test_truncated_or_padded_frames_are_malformed(cut):
    body = {"throttle_time_ms": 0, "error_code": 0, "session_id": 0, "responses": RESPONSES[1]}
    frame = encode_response(ApiKey.FETCH, 12, 1, body)[4:]
    with pytest.raises(MalformedFrame):
        decode_fetch_response(frame[:-cut])
    with pytest.raises(MalformedFrame):
        decode_fetch_response(frame + b"\x00" * cut)
