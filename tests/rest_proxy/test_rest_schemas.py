"""REST Proxy v2 with schemas: Avro and JSON-schema embedded formats through the broker's own
Schema Registry (Confluent's wire format: magic 0 + the schema id), read back by a REST
consumer and by confluent-kafka's own deserializers, and the other way round."""

from __future__ import annotations

import json
import time
import uuid

import httpx
import pytest
from confluent_kafka import Consumer, Producer
from confluent_kafka.schema_registry import SchemaRegistryClient
from confluent_kafka.schema_registry.avro import AvroDeserializer, AvroSerializer
from confluent_kafka.schema_registry.json_schema import JSONDeserializer
from confluent_kafka.serialization import MessageField, SerializationContext

from tests.brokerproc import create_topic
from tests.rest_proxy.conftest import AVRO, JSONSCHEMA, V2, read_all

pytestmark = pytest.mark.timeout(120)

USER = json.dumps({"type": "record", "name": "User", "fields": [
    {"name": "name", "type": "string"}, {"name": "age", "type": "int"},
    {"name": "email", "type": ["null", "string"], "default": None}]})
KEY = json.dumps({"type": "string"})
ORDER = json.dumps({"type": "object", "properties": {"id": {"type": "integer"}, "item": {"type": "string"}},
                    "required": ["id"]})


def new_topic(broker) -> str:
    name = f"s-{uuid.uuid4().hex[:8]}"
    create_topic(broker.port, name, 1)
    return name


def native_values(broker, topic: str, want: int, decode) -> list:
    consumer = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": f"n-{uuid.uuid4().hex[:6]}",
                         "auto.offset.reset": "earliest"})
    consumer.subscribe([topic])
    got, deadline = [], time.monotonic() + 30
    try:
        while len(got) < want and time.monotonic() < deadline:
            msg = consumer.poll(0.5)
            if msg is not None and msg.error() is None:
                got.append(decode(msg))
    finally:
        consumer.close()
    return got


def rest_consumer(rest, topic: str, fmt: str) -> str:
    r = rest.post(f"/consumers/g-{topic}", headers={"Content-Type": V2},
                  json={"name": "c", "format": fmt, "auto.offset.reset": "earliest"})
    assert r.status_code == 200, r.text
    base_uri = r.json()["base_uri"]
    assert rest.post(base_uri + "/subscription", headers={"Content-Type": V2},
                     json={"topics": [topic]}).status_code == 204
    return base_uri


def test_avro_produce_registers_schemas_and_reads_back(broker, rest):
    topic = new_topic(broker)
    users = [{"name": "alice", "age": 30, "email": {"string": "a@example.org"}},
             {"name": "bob", "age": 41, "email": None}]
    r = rest.post(f"/topics/{topic}", headers={"Content-Type": AVRO}, json={
        "key_schema": KEY, "value_schema": USER,
        "records": [{"key": u["name"], "value": u} for u in users]})
    assert r.status_code == 200, r.text
    key_id, value_id = r.json()["key_schema_id"], r.json()["value_schema_id"]
    assert isinstance(key_id, int) and isinstance(value_id, int) and key_id != value_id

    # registered under TopicNameStrategy subjects in the broker's registry
    registry = httpx.get(f"{broker.registry_url}/subjects/{topic}-value/versions/latest").json()
    assert registry["id"] == value_id

    # the next request names the schema by id only
    r = rest.post(f"/topics/{topic}", headers={"Content-Type": AVRO}, json={
        "value_schema_id": value_id, "records": [{"value": {"name": "carol", "age": 7, "email": None}}]})
    assert r.status_code == 200, r.text
    assert r.json()["value_schema_id"] == value_id

    base_uri = rest_consumer(rest, topic, "avro")
    got = read_all(rest, base_uri, AVRO, 3)
    assert [rec["value"] for rec in got] == users + [{"name": "carol", "age": 7, "email": None}]
    assert [rec["key"] for rec in got] == ["alice", "bob", None]
    assert got[0]["value_schema_id"] == value_id and got[0]["key_schema_id"] == key_id

    deserializer = AvroDeserializer(SchemaRegistryClient({"url": broker.registry_url}))
    values = native_values(broker, topic, 3, lambda m: deserializer(
        m.value(), SerializationContext(topic, MessageField.VALUE)))
    assert values == [{"name": "alice", "age": 30, "email": "a@example.org"},
                      {"name": "bob", "age": 41, "email": None}, {"name": "carol", "age": 7, "email": None}]


def test_native_avro_producer_to_rest_avro_consumer(broker, rest):
    topic = new_topic(broker)
    serializer = AvroSerializer(SchemaRegistryClient({"url": broker.registry_url}), USER)
    producer = Producer({"bootstrap.servers": broker.bootstrap})
    producer.produce(topic, value=serializer({"name": "dora", "age": 3, "email": "d@x"},
                                             SerializationContext(topic, MessageField.VALUE)))
    assert producer.flush(10) == 0
    got = read_all(rest, rest_consumer(rest, topic, "avro"), AVRO, 1)
    assert got[0]["value"] == {"name": "dora", "age": 3, "email": {"string": "d@x"}}


def test_avro_refusals(broker, rest):
    topic = new_topic(broker)
    r = rest.post(f"/topics/{topic}", headers={"Content-Type": AVRO}, json={"records": [{"value": {"a": 1}}]})
    assert r.status_code == 422 and r.json()["error_code"] == 42202
    r = rest.post(f"/topics/{topic}", headers={"Content-Type": AVRO},
                  json={"value_schema": USER, "records": [{"value": {"name": "x", "age": "old"}}]})
    assert r.status_code == 422 and r.json()["error_code"] == 42203, r.text
    r = rest.post(f"/topics/{topic}", headers={"Content-Type": AVRO},
                  json={"value_schema": '{"type": "record", "name": "R"}', "records": [{"value": {}}]})
    assert r.status_code == 422 and r.json()["error_code"] == 42205, r.text
    r = rest.post(f"/topics/{topic}", headers={"Content-Type": AVRO},
                  json={"value_schema_id": 99999, "records": [{"value": {}}]})
    assert r.status_code == 404, r.text
    # a binary record is not Avro: the avro consumer answers Confluent's deserialization error
    rest.post(f"/topics/{topic}", headers={"Content-Type": "application/vnd.kafka.binary.v2+json"},
              json={"records": [{"value": "aGVsbG8="}]}).raise_for_status()
    base_uri = rest_consumer(rest, topic, "avro")
    deadline = time.monotonic() + 30
    while True:
        r = rest.get(base_uri + "/records", headers={"Accept": AVRO})
        if r.status_code != 200 or r.json() or time.monotonic() > deadline:
            break
    assert r.status_code == 408 and r.json()["error_code"] == 40801, r.text
    assert f"partition {topic}-0 at offset 0" in r.json()["message"], r.text


def test_jsonschema_produce_and_read_back(broker, rest):
    topic = new_topic(broker)
    orders = [{"id": 1, "item": "tea"}, {"id": 2}]
    r = rest.post(f"/topics/{topic}", headers={"Content-Type": JSONSCHEMA},
                  json={"value_schema": ORDER, "records": [{"value": o} for o in orders]})
    assert r.status_code == 200, r.text
    value_id = r.json()["value_schema_id"]
    r = rest.post(f"/topics/{topic}", headers={"Content-Type": JSONSCHEMA},
                  json={"value_schema_id": value_id, "records": [{"value": {"item": "no id"}}]})
    assert r.status_code == 422 and r.json()["error_code"] == 42203, r.text

    got = read_all(rest, rest_consumer(rest, topic, "jsonschema"), JSONSCHEMA, 2)
    assert [rec["value"] for rec in got] == orders
    deserializer = JSONDeserializer(ORDER, schema_registry_client=SchemaRegistryClient({"url": broker.registry_url}))
    values = native_values(broker, topic, 2, lambda m: deserializer(
        m.value(), SerializationContext(topic, MessageField.VALUE)))
    assert values == orders
