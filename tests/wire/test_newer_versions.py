"""Later message versions than Kafka 3.9.2's schemas (wire.newer_versions), as Kafka 4.0 writes them.

ConsumerGroupHeartbeat v1 is what librdkafka 2.16 sends for `group.protocol=consumer`; the bytes
below are a v1 request body laid out by hand from Kafka 4.0's ConsumerGroupHeartbeatRequest.json
(flexible: compact strings, nullable compact arrays, an empty tagged-field section).
"""

from __future__ import annotations

import struct

import pytest

from wire import newer_versions
from wire.generate import convert_fields, load_schema, schema_dir
from wire.schema import compile_fields

SCHEMA = schema_dir() / "ConsumerGroupHeartbeatRequest.json"
pytestmark = pytest.mark.skipif(not SCHEMA.is_file(), reason=f"{SCHEMA} not present")


def _compact_string(text: str | None) -> bytes:
    if text is None:
        return b"\x00"
    raw = text.encode()
    return bytes([len(raw) + 1]) + raw


def test_heartbeat_v1_adds_the_regex_after_the_topic_names():
    schema = load_schema(SCHEMA)
    assert schema["validVersions"] == "0-1"
    names = [f["name"] for f in schema["fields"]]
    assert names.index("SubscribedTopicRegex") == names.index("SubscribedTopicNames") + 1
    # applying twice changes nothing (a schema folder that already has v1)
    assert newer_versions.apply(schema)["fields"] == schema["fields"]


def test_heartbeat_v1_body_decodes_and_v0_has_no_regex():
    fields = convert_fields(load_schema(SCHEMA)["fields"], {})
    body = (_compact_string("g1") + _compact_string("m-1") + struct.pack(">i", 0)
            + _compact_string(None) + _compact_string(None) + struct.pack(">i", 30000)
            + b"\x00"                          # subscribed_topic_names: null
            + _compact_string("orders-.*")     # subscribed_topic_regex (v1)
            + _compact_string("uniform")
            + b"\x01"                          # topic_partitions: empty
            + b"\x00")                         # tagged fields
    v1 = compile_fields(fields, 1, True).parse(body)
    assert v1["group_id"] == "g1" and v1["member_id"] == "m-1"
    assert v1["subscribed_topic_names"] is None
    assert v1["subscribed_topic_regex"] == "orders-.*"
    assert v1["server_assignor"] == "uniform" and v1["topic_partitions"] == []
    assert compile_fields(fields, 1, True).build(v1) == body
    v0 = compile_fields(fields, 0, True).build({**v1, "subscribed_topic_regex": None})
    assert "orders" not in v0.decode("latin-1") and len(v0) == len(body) - len(_compact_string("orders-.*"))
