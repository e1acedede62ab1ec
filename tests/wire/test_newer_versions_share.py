"""ShareFetch v1 (Kafka 4.1, KIP-932) from wire.newer_versions, byte for byte.

librdkafka 2.16's ShareConsumer sends ShareFetch v1 only. The request body below is laid
out by hand from Kafka 4.1's ShareFetchRequest.json: v1 adds MaxRecords and BatchSize after
MaxBytes and drops each partition's PartitionMaxBytes (v0 only); the response adds
AcquisitionLockTimeoutMs after ErrorMessage.
"""

from __future__ import annotations

import struct
import uuid

import pytest

from wire.generate import convert_fields, load_schema, schema_dir
from wire.schema import compile_fields

REQUEST = schema_dir() / "ShareFetchRequest.json"
RESPONSE = schema_dir() / "ShareFetchResponse.json"
pytestmark = pytest.mark.skipif(not REQUEST.is_file(), reason=f"{REQUEST} not present")

TOPIC = uuid.UUID("0123456789abcdef0123456789abcdef")


def _compact_string(text: str | None) -> bytes:
    if text is None:
        return b"\x00"
    raw = text.encode()
    return bytes([len(raw) + 1]) + raw


def _request_body() -> bytes:
    return (_compact_string("q") + _compact_string("m-1")
            + struct.pack(">iiii", 3, 500, 1, 52428800)      # epoch, max wait, min bytes, max bytes
            + struct.pack(">ii", 500, 500)                    # MaxRecords, BatchSize (v1)
            + b"\x02" + TOPIC.bytes                            # one topic
            + b"\x02" + struct.pack(">i", 0)                   # one partition, index 0 (no max bytes)
            + b"\x02" + struct.pack(">qq", 10, 12) + b"\x04\x01\x02\x03" + b"\x00"  # one ack batch
            + b"\x00"                                          # partition tagged fields
            + b"\x00"                                          # topic tagged fields
            + b"\x01"                                          # forgotten topics: empty
            + b"\x00")                                         # tagged fields


def test_share_fetch_v1_request_bytes():
    fields = convert_fields(load_schema(REQUEST)["fields"], {})
    body = _request_body()
    v1 = compile_fields(fields, 1, True).parse(body)
    assert (v1["group_id"], v1["member_id"], v1["share_session_epoch"]) == ("q", "m-1", 3)
    assert (v1["max_records"], v1["batch_size"]) == (500, 500)
    part = v1["topics"][0]["partitions"][0]
    assert part["partition_index"] == 0 and "partition_max_bytes" not in part
    assert part["acknowledgement_batches"][0] == {"first_offset": 10, "last_offset": 12,
                                                  "acknowledge_types": [1, 2, 3]}
    assert compile_fields(fields, 1, True).build(v1) == body
    # v0 (3.9.2, early access) still has the per-partition max bytes and no MaxRecords.
    v0 = compile_fields(fields, 0, True).build({**v1, "topics": [{"topic_id": TOPIC, "partitions": [
        {**part, "partition_max_bytes": 1024}]}]})
    assert len(v0) == len(body) - 8 + 4


def test_share_fetch_v1_response_has_the_lock_timeout_after_the_error_message():
    fields = convert_fields(load_schema(RESPONSE)["fields"], {})
    body = (struct.pack(">ih", 0, 0) + _compact_string(None)
            + struct.pack(">i", 30000)                         # AcquisitionLockTimeoutMs (v1)
            + b"\x01"                                          # responses: empty
            + b"\x01"                                          # node endpoints: empty
            + b"\x00")
    v1 = compile_fields(fields, 1, True).parse(body)
    assert v1["acquisition_lock_timeout_ms"] == 30000 and v1["responses"] == []
    assert compile_fields(fields, 1, True).build(v1) == body
    assert compile_fields(fields, 0, True).build(v1) == body[:7] + body[11:]
