"""The inter-broker APIs (LeaderAndIsr, StopReplica, UpdateMetadata, ControlledShutdown,
AlterPartition) through the public codec, at every version Kafka 3.9 has.

- Round trip: the representative body of tests/wire/inter_broker_bodies.py, projected onto
  each version, goes through encode_request/decode_request (or encode_response/
  decode_response) and comes back equal, and re-encodes to the same bytes.
- Kafka's bytes: tests/wire/golden/inter_broker_kafka_3_9_2.bodies holds what Kafka 3.9.2's
  generated classes write for the same bodies (capture_inter_broker.py). Our frame must be
  a hand-built header followed by exactly those bytes, and those bytes must decode to the body.
- Two bodies spelled out byte by byte from the JSON schemas, to show what the layout is.
"""

from __future__ import annotations

import pathlib
import struct
import uuid

import pytest

from tests.wire.inter_broker_bodies import BIG_EPOCH, ORDERS_ID, body_at
from wire import ApiKey, Request, decode_request, decode_response, encode_request, encode_response
from wire.registry import CODEC_VERSIONS, INTER_BROKER_APIS
from wire.schema import is_flexible

GOLDEN = pathlib.Path(__file__).resolve().parent / "golden" / "inter_broker_kafka_3_9_2.bodies"
CLIENT_ID = "trafka-controller"


def _golden() -> dict[tuple[str, int, int], bytes]:
    out = {}
    for line in GOLDEN.read_text().splitlines():
        if line and not line.startswith("#"):
            kind, key, version, hexdata = line.split()
            out[(kind, int(key), int(version))] = bytes.fromhex(hexdata)
    return out


GOLDEN_BODIES = _golden()


def _cases():
    for key, (lo, hi) in sorted((k, CODEC_VERSIONS[k]) for k in INTER_BROKER_APIS):
        for kind in ("request", "response"):
            for version in range(lo, hi + 1):
                yield pytest.param(kind, key, version, id=f"{ApiKey(key).name}-{kind}-v{version}")


def _plain(value):
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_plain(v) for v in value]
    if isinstance(value, (bytearray, memoryview)):
        return bytes(value)
    return value


def _request_header(key: int, version: int, correlation_id: int) -> bytes:
    """Request header v1 (v2 adds an empty tag buffer for flexible versions)."""
    client = CLIENT_ID.encode()
    header = struct.pack(">hhih", key, version, correlation_id, len(client)) + client
    return header + (b"\x00" if is_flexible(key, "request", version) else b"")


def _response_header(key: int, version: int, correlation_id: int) -> bytes:
    return struct.pack(">i", correlation_id) + (b"\x00" if is_flexible(key, "response", version) else b"")


def test_every_version_has_a_golden_body():
    assert {(kind, key, version) for kind, key, version in (c.values for c in _cases())} == set(GOLDEN_BODIES)


@pytest.mark.parametrize("kind,key,version", list(_cases()))
def test_roundtrip_and_kafka_bytes(kind, key, version):
    body = body_at(key, kind, version)
    golden = GOLDEN_BODIES[(kind, key, version)]
    if kind == "request":
        frame = encode_request(key, version, 1234, body, client_id=CLIENT_ID)
        header = _request_header(key, version, 1234)
        decoded = decode_request(bytearray(frame[4:]))
        assert isinstance(decoded, Request)
        assert (decoded.api_key, decoded.api_version, decoded.correlation_id) == (key, version, 1234)
        assert _plain(decoded.body) == body
        assert encode_request(key, version, 1234, decoded.body, client_id=CLIENT_ID) == frame
        from_kafka = decode_request(bytearray(header + golden))
        assert _plain(from_kafka.body) == body
    else:
        frame = encode_response(key, version, 1234, body)
        header = _response_header(key, version, 1234)
        correlation_id, decoded = decode_response(key, version, frame[4:])
        assert correlation_id == 1234
        assert _plain(decoded) == body
        assert encode_response(key, version, 1234, decoded) == frame
        assert _plain(decode_response(key, version, header + golden)[1]) == body
    assert frame == struct.pack(">i", len(header) + len(golden)) + header + golden


def test_alter_partition_v3_bytes_by_hand():
    # AlterPartitionRequest v3 (flexible from v0): compact arrays (length + 1 as a varint),
    # a uuid for the topic, NewIsrWithEpochs instead of NewIsr, a tag buffer per struct.
    body = {"broker_id": 1, "broker_epoch": BIG_EPOCH, "topics": [
        {"topic_id": ORDERS_ID, "partitions": [
            {"partition_index": 0, "leader_epoch": 12,
             "new_isr_with_epochs": [{"broker_id": 1, "broker_epoch": -1}, {"broker_id": 2, "broker_epoch": 5}],
             "leader_recovery_state": 0, "partition_epoch": 40}]}]}
    expected_body = (
        struct.pack(">iq", 1, BIG_EPOCH)
        + b"\x02" + ORDERS_ID.bytes                     # topics: 1 element; topic_id
        + b"\x02" + struct.pack(">ii", 0, 12)           # partitions: 1 element; index, leader epoch
        + b"\x03"                                       # new_isr_with_epochs: 2 elements
        + struct.pack(">iq", 1, -1) + b"\x00"
        + struct.pack(">iq", 2, 5) + b"\x00"
        + struct.pack(">bi", 0, 40) + b"\x00"           # recovery state, partition epoch, tags
        + b"\x00"                                       # end of the topic
        + b"\x00"                                       # end of the request
    )
    header = _request_header(ApiKey.ALTER_PARTITION, 3, 9)
    frame = encode_request(ApiKey.ALTER_PARTITION, 3, 9, body, client_id=CLIENT_ID)
    assert frame == struct.pack(">i", len(header) + len(expected_body)) + header + expected_body


def test_update_metadata_v5_bytes_by_hand():
    # UpdateMetadataRequest v5 (not flexible): int32-counted arrays, int16-length strings,
    # topic states grouped by name (no id before v7), a nullable rack (-1 for null).
    body = {"controller_id": 1, "controller_epoch": 7, "broker_epoch": -1,
            "topic_states": [{"topic_name": "t", "partition_states": [
                {"partition_index": 0, "controller_epoch": 7, "leader": 2, "leader_epoch": 3, "isr": [2],
                 "zk_version": 4, "replicas": [2], "offline_replicas": []}]}],
            "live_brokers": [{"id": 2, "endpoints": [{"port": 9092, "host": "h", "listener": "PLAINTEXT",
                                                       "security_protocol": 0}], "rack": None}]}
    expected_body = (
        struct.pack(">iiq", 1, 7, -1)
        + struct.pack(">ih", 1, 1) + b"t"
        + struct.pack(">i", 1) + struct.pack(">iiii", 0, 7, 2, 3) + struct.pack(">ii", 1, 2)
        + struct.pack(">i", 4) + struct.pack(">ii", 1, 2) + struct.pack(">i", 0)
        + struct.pack(">i", 1) + struct.pack(">i", 2)
        + struct.pack(">i", 1) + struct.pack(">ih", 9092, 1) + b"h" + struct.pack(">h", 9) + b"PLAINTEXT"
        + struct.pack(">h", 0)
        + struct.pack(">h", -1)
    )
    header = _request_header(ApiKey.UPDATE_METADATA, 5, 9)
    frame = encode_request(ApiKey.UPDATE_METADATA, 5, 9, body, client_id=CLIENT_ID)
    assert frame == struct.pack(">i", len(header) + len(expected_body)) + header + expected_body
    assert decode_request(bytearray(frame[4:])).body == body


def test_topic_ids_come_back_as_uuids():
    body = body_at(ApiKey.LEADER_AND_ISR, "request", 7)
    decoded = decode_request(bytearray(encode_request(ApiKey.LEADER_AND_ISR, 7, 1, body)[4:])).body
    assert [t["topic_id"] for t in decoded["topic_states"]][0] == ORDERS_ID
    assert isinstance(decoded["topic_states"][0]["topic_id"], uuid.UUID)
    assert decoded["topic_states"][1]["partition_states"][0]["leader_recovery_state"] == 1
