"""spark_jobs.avro without Spark: Confluent's framing, and the registry client against a real
Trafka registry, cross-checked with confluent-kafka's own AvroSerializer/AvroDeserializer."""

from __future__ import annotations

import json

import httpx
import pytest

from spark_jobs.avro import AvroSchemaError, AvroWireError, RegistryClient, RegistryError, decode, encode, parse_schema, schema_id_of
from spark_jobs.avro import to_json_text
from tests.schema_registry.conftest import RegistryBroker

CLICK = {
    "type": "record",
    "name": "Click",
    "namespace": "trafka.test",
    "fields": [
        {"name": "user", "type": "string"},
        {"name": "page", "type": ["null", "string"], "default": None},
        {"name": "n", "type": "long"},
        {"name": "raw", "type": "bytes"},
    ],
}
VALUE = {"user": "u1", "page": None, "n": 2**40, "raw": b"\x00\xff"}


def test_frame_layout_and_round_trip():
    data = encode(7, parse_schema(CLICK), VALUE)
    assert data[:5] == b"\x00\x00\x00\x00\x07"
    assert schema_id_of(data) == 7
    assert decode(data, parse_schema(CLICK)) == VALUE
    assert json.loads(to_json_text(VALUE)) == {"user": "u1", "page": None, "n": 2**40, "raw": "AP8="}


@pytest.mark.parametrize(
    "data, message",
    [
        (b"", "shorter than the 5-byte"),
        (b"\x00\x00\x00", "shorter than the 5-byte"),
        (b"\x01\x00\x00\x00\x07\x02u", "unknown magic byte 0x01"),
        (b"\x00\x00\x00\x00\x07\x02", "does not decode"),  # string length 1, no byte follows
    ],
)
def test_bad_frames_are_named(data, message):
    with pytest.raises(AvroWireError, match=message):
        decode(data, parse_schema(CLICK))


def test_trailing_bytes_and_wrong_values_are_refused():
    data = encode(1, parse_schema(CLICK), VALUE)
    with pytest.raises(AvroWireError, match="1 bytes left"):
        decode(data + b"\x00", parse_schema(CLICK))
    with pytest.raises(AvroWireError, match="does not match schema id 1"):
        encode(1, parse_schema(CLICK), {"user": "u1", "n": "not a long", "raw": b""})


@pytest.fixture(scope="module")
def registry(tmp_path_factory):
    with RegistryBroker(tmp_path_factory.mktemp("avro") / "data") as broker:
        yield broker


def test_registry_client_against_confluent_serializers(registry):
    from confluent_kafka.schema_registry import SchemaRegistryClient
    from confluent_kafka.schema_registry.avro import AvroDeserializer, AvroSerializer
    from confluent_kafka.serialization import MessageField, SerializationContext

    ctx = SerializationContext("clicks", MessageField.VALUE)
    theirs = SchemaRegistryClient({"url": registry.url})
    with RegistryClient(registry.url) as ours:
        schema_id = ours.register("clicks-value", CLICK)
        assert ours.register("clicks-value", CLICK) == schema_id  # idempotent
        ours_bytes = ours.encode("clicks-value", CLICK, VALUE)
        assert schema_id_of(ours_bytes) == schema_id
        # confluent-kafka reads what we write, and we read what it writes
        assert AvroDeserializer(theirs)(ours_bytes, ctx) == VALUE
        theirs_bytes = AvroSerializer(theirs, json.dumps(CLICK), conf={"auto.register.schemas": False,
                                                                       "use.latest.version": True})(VALUE, ctx)
        assert schema_id_of(theirs_bytes) == schema_id
        # a fresh client (empty cache) looks the id up
        with RegistryClient(registry.url) as fresh:
            assert fresh.decode(theirs_bytes) == VALUE


def test_registry_errors_carry_the_registry_code(registry):
    with RegistryClient(registry.url) as client:
        with pytest.raises(RegistryError) as info:
            client.schema(987654)
        assert info.value.status == 404 and info.value.error_code == 40403
        client.register("strict-value", CLICK)
        httpx.put(registry.url + "/config/strict-value", json={"compatibility": "BACKWARD"}).raise_for_status()
        incompatible = dict(CLICK, fields=CLICK["fields"] + [{"name": "extra", "type": "int"}])  # no default
        with pytest.raises(RegistryError) as info:
            client.register("strict-value", incompatible)
        assert info.value.status == 409
        with pytest.raises(AvroSchemaError, match="nosuch"):  # refused before any HTTP
            client.register("x-value", {"type": "record", "name": "R", "fields": [{"name": "a", "type": "nosuch"}]})


def test_unreachable_registry_is_a_registry_error():
    from tests.brokerproc import free_port

    with RegistryClient(f"http://127.0.0.1:{free_port()}", timeout=2) as client:
        with pytest.raises(RegistryError, match="127.0.0.1"):
            client.schema(1)


def test_a_subject_is_quoted_into_the_path(registry):
    """A subject name is quoted into the path: `shop/clicks#1-value` registers under that one
    subject (sent unquoted, the `#` cut the path short)."""
    with RegistryClient(registry.url) as client:
        schema_id = client.register("shop/clicks#1-value", CLICK)
        assert client.latest("shop/clicks#1-value")["id"] == schema_id
    subjects = httpx.get(registry.url + "/subjects").json()
    assert "shop/clicks#1-value" in subjects
