"""confluent-kafka's SchemaRegistryClient and its Avro / JSON serializers against the
registry, producing registry-encoded records to a Trafka topic and reading them back."""

from __future__ import annotations

import json
import uuid

import confluent_kafka as ck
import pytest
from confluent_kafka.schema_registry import Schema, SchemaRegistryClient
from confluent_kafka.schema_registry.avro import AvroDeserializer, AvroSerializer
from confluent_kafka.schema_registry.error import SchemaRegistryError
from confluent_kafka.schema_registry.json_schema import JSONDeserializer, JSONSerializer
from confluent_kafka.serialization import MessageField, SerializationContext

USER = json.dumps({"type": "record", "name": "User", "namespace": "shop", "fields": [
    {"name": "name", "type": "string"}, {"name": "age", "type": "int"}]})
ORDER_JSON = json.dumps({"$schema": "http://json-schema.org/draft-07/schema#", "title": "Order", "type": "object",
                         "properties": {"id": {"type": "integer"}, "item": {"type": "string"}},
                         "required": ["id"]})


def roundtrip(registry, topic, serializer, deserializer, values):
    producer = ck.Producer({"bootstrap.servers": registry.bootstrap})
    for value in values:
        producer.produce(topic, value=serializer(value, SerializationContext(topic, MessageField.VALUE)))
    assert producer.flush(30) == 0
    consumer = ck.Consumer({"bootstrap.servers": registry.bootstrap, "group.id": uuid.uuid4().hex,
                            "auto.offset.reset": "earliest"})
    consumer.subscribe([topic])
    got = []
    try:
        while len(got) < len(values):
            msg = consumer.poll(15)
            assert msg is not None, f"only {len(got)} of {len(values)} records came back"
            assert msg.error() is None, msg.error()
            raw = msg.value()
            assert raw[0] == 0  # Confluent's wire format: magic byte, then the schema id
            got.append(deserializer(raw, SerializationContext(topic, MessageField.VALUE)))
    finally:
        consumer.close()
    return got


def test_avro_serializer_roundtrip(registry):
    client = SchemaRegistryClient({"url": registry.url})
    serializer = AvroSerializer(client, USER)
    values = [{"name": "ada", "age": 36}, {"name": "alan", "age": 41}]
    got = roundtrip(registry, "users", serializer, AvroDeserializer(SchemaRegistryClient({"url": registry.url})),
                    values)
    assert got == values
    assert client.get_subjects() == ["users-value"]
    latest = client.get_latest_version("users-value")
    assert latest.version == 1 and json.loads(latest.schema.schema_str)["name"] == "User"
    # registry-encoded bytes carry the id the registry gave
    assert client.get_schema(latest.schema_id).schema_str == latest.schema.schema_str


def test_json_serializer_roundtrip(registry):
    client = SchemaRegistryClient({"url": registry.url})
    values = [{"id": 1, "item": "book"}, {"id": 2}]
    got = roundtrip(registry, "orders", JSONSerializer(ORDER_JSON, client),
                    JSONDeserializer(ORDER_JSON, schema_registry_client=SchemaRegistryClient({"url": registry.url})),
                    values)
    assert got == values
    registered = client.get_latest_version("orders-value")
    assert registered.schema.schema_type == "JSON"


def test_client_flows(registry):
    client = SchemaRegistryClient({"url": registry.url})
    v1 = Schema(USER, "AVRO")
    schema_id = client.register_schema("flow-value", v1)
    assert client.lookup_schema("flow-value", v1).schema_id == schema_id
    assert client.get_versions("flow-value") == [1]
    assert client.get_compatibility() == "BACKWARD"
    client.set_compatibility("flow-value", "FULL")
    assert client.get_compatibility("flow-value") == "FULL"
    renamed = Schema(USER.replace('"age", "type": "int"', '"age", "type": "string"'), "AVRO")
    assert client.test_compatibility("flow-value", renamed) is False
    with pytest.raises(SchemaRegistryError) as refused:
        client.register_schema("flow-value", renamed)
    assert refused.value.http_status_code == 409
    with pytest.raises(SchemaRegistryError) as missing:
        client.get_latest_version("nope")
    assert missing.value.error_code == 40401
    assert client.delete_version("flow-value", 1) == 1
    assert client.delete_subject("flow-value", permanent=True) == [1]
    assert client.get_subjects() == []
