"""REST Proxy with the PROTOBUF embedded format: v2 produce (schema text or id) read back by
confluent-kafka's ProtobufDeserializer, records written by its ProtobufSerializer read by a
REST consumer in protobuf format as Confluent's JSON, v3 PROTOBUF records, and the error
codes for a schema that does not parse and a record that does not match."""

from __future__ import annotations

import base64
import io

import httpx
import pytest
from hypothesis import given
from hypothesis import strategies as st
from confluent_kafka import Producer
from confluent_kafka.schema_registry import SchemaRegistryClient
from confluent_kafka.schema_registry.protobuf import ProtobufDeserializer, ProtobufSerializer
from confluent_kafka.serialization import MessageField, SerializationContext
from confluent_kafka.schema_registry.common.serde import SchemaId
from google.protobuf import descriptor_pb2, descriptor_pool, message_factory

from rest_proxy.protobuf import message_indexes, read_message_indexes

from tests.rest_proxy.conftest import V2, read_all
from tests.rest_proxy.test_rest_schemas import native_values, new_topic, rest_consumer

pytestmark = pytest.mark.timeout(120)

PROTOBUF = "application/vnd.kafka.protobuf.v2+json"
ORDER = """
syntax = "proto3";
package rest.v1;

message Order {
  int64 id = 1;
  string item_name = 2;
  repeated Line lines = 3;
  Status status = 4;
  message Line { string sku = 1; int32 qty = 2; }
  enum Status { NEW = 0; SHIPPED = 1; }
}

message Other { string x = 1; }
"""
KEY = 'syntax = "proto3"; package rest.v1; message OrderKey { string region = 1; }'


def message_class(broker, schema_id: int, name: str):
    """The registry's schema as a message class built at runtime (no protoc), as an
    application with generated classes would hold it."""
    answer = httpx.get(f"{broker.registry_url}/schemas/ids/{schema_id}", params={"format": "serialized"}).json()
    pool = descriptor_pool.DescriptorPool()
    pool.Add(descriptor_pb2.FileDescriptorProto.FromString(base64.b64decode(answer["schema"])))
    return message_factory.GetMessageClass(pool.FindMessageTypeByName(name))


def deserializer(broker, cls) -> ProtobufDeserializer:
    return ProtobufDeserializer(cls, {"use.deprecated.format": False},
                                schema_registry_client=SchemaRegistryClient({"url": broker.registry_url}))


def test_v2_produce_reads_back_with_protobuf_deserializer(broker, rest):
    topic = new_topic(broker)
    orders = [{"id": "7", "itemName": "book", "lines": [{"sku": "b-1", "qty": 2}], "status": "SHIPPED"},
              {"id": 8, "item_name": "pen"}]  # proto field names and numbers for int64 parse too
    r = rest.post(f"/topics/{topic}", headers={"Content-Type": PROTOBUF}, json={
        "key_schema": KEY, "value_schema": ORDER,
        "records": [{"key": {"region": "eu"}, "value": o} for o in orders]})
    assert r.status_code == 200, r.text
    key_id, value_id = r.json()["key_schema_id"], r.json()["value_schema_id"]
    assert isinstance(value_id, int) and key_id != value_id
    assert [o["error_code"] for o in r.json()["offsets"]] == [None, None]
    latest = httpx.get(f"{broker.registry_url}/subjects/{topic}-value/versions/latest").json()
    assert (latest["id"], latest["schemaType"]) == (value_id, "PROTOBUF")

    # by id, the next request sends no schema
    r = rest.post(f"/topics/{topic}", headers={"Content-Type": PROTOBUF},
                  json={"value_schema_id": value_id, "records": [{"value": {"id": "9", "status": 1}}]})
    assert r.status_code == 200 and r.json()["value_schema_id"] == value_id, r.text

    order_cls = message_class(broker, value_id, "rest.v1.Order")
    key_cls = message_class(broker, key_id, "rest.v1.OrderKey")
    values = deserializer(broker, order_cls)
    keys = deserializer(broker, key_cls)

    def decode(msg):
        # the first message of the file: a single 0 as the message-index array
        assert msg.value()[:6] == b"\x00" + value_id.to_bytes(4, "big") + b"\x00"
        key = None if msg.key() is None else keys(msg.key(), SerializationContext(topic, MessageField.KEY))
        return key, values(msg.value(), SerializationContext(topic, MessageField.VALUE))

    got = native_values(broker, topic, 3, decode)
    assert [(k.region if k else None) for k, _v in got] == ["eu", "eu", None]
    first, second, third = (v for _k, v in got)
    assert (first.id, first.item_name, first.status, [(ln.sku, ln.qty) for ln in first.lines]) == \
           (7, "book", 1, [("b-1", 2)])
    assert (second.id, second.item_name, list(second.lines)) == (8, "pen", [])
    assert (third.id, third.status) == (9, 1)


def test_native_serializer_to_rest_consumer_json(broker, rest):
    topic = new_topic(broker)
    # registered by the REST Proxy, then used by a native application
    r = rest.post(f"/topics/{topic}", headers={"Content-Type": PROTOBUF},
                  json={"value_schema": ORDER, "records": [{"value": {"id": "1"}}]})
    assert r.status_code == 200, r.text
    order_cls = message_class(broker, r.json()["value_schema_id"], "rest.v1.Order")
    other_cls = message_class(broker, r.json()["value_schema_id"], "rest.v1.Other")
    client = SchemaRegistryClient({"url": broker.registry_url})
    config = {"use.deprecated.format": False}
    order = order_cls(id=2 ** 40, item_name="lamp", status=1)
    order.lines.add(sku="l-9", qty=3)
    producer = Producer({"bootstrap.servers": broker.bootstrap})
    ctx = SerializationContext(topic, MessageField.VALUE)
    producer.produce(topic, value=ProtobufSerializer(order_cls, client, config)(order, ctx))
    # the file's second message: a message-index array [1] the proxy must follow
    producer.produce(topic, value=ProtobufSerializer(other_cls, client, config)(other_cls(x="y"), ctx))
    assert producer.flush(30) == 0

    base_uri = rest_consumer(rest, topic, "protobuf")
    try:
        got = read_all(rest, base_uri, PROTOBUF, 3)
    finally:
        rest.delete(base_uri, headers={"Content-Type": V2})
    # Confluent's JsonFormat.printer().includingDefaultValueFields(): lowerCamelCase names,
    # int64 as strings, enums by name, fields without presence printed with their defaults
    assert [g["value"] for g in got] == [
        {"id": "1", "itemName": "", "lines": [], "status": "NEW"},
        {"id": str(2 ** 40), "itemName": "lamp", "lines": [{"sku": "l-9", "qty": 3}], "status": "SHIPPED"},
        {"x": "y"}]
    assert all(g["value_schema_id"] == r.json()["value_schema_id"] for g in got[:2]), got
    assert got[2]["value_schema_id"] is not None and got[0]["key"] is None


def test_v3_protobuf_records(broker, rest):
    topic = new_topic(broker)
    cluster = rest.get("/v3/clusters").json()["data"][0]["cluster_id"]
    url = f"/v3/clusters/{cluster}/topics/{topic}/records"
    r = rest.post(url, json={"value": {"type": "PROTOBUF", "schema": ORDER, "data": {"id": "5", "itemName": "cup"}}})
    assert r.status_code == 200, r.text
    value = r.json()["value"]
    assert value["type"] == "PROTOBUF" and isinstance(value["schema_id"], int) and value["size"] > 6
    schema_id = value["schema_id"]
    # by schema_id (the type comes from the registry), and by subject + schema_version
    r = rest.post(url, json={"value": {"schema_id": schema_id, "data": {"id": "6"}}})
    assert r.status_code == 200 and r.json()["value"]["type"] == "PROTOBUF", r.text
    r = rest.post(url, json={"value": {"type": "PROTOBUF", "subject": f"{topic}-value", "schema_version": 1,
                                       "data": {"id": "7", "status": "SHIPPED"}}})
    assert r.status_code == 200, r.text
    assert (r.json()["value"]["schema_id"], r.json()["value"]["schema_version"]) == (schema_id, 1)
    # an AVRO type naming a PROTOBUF schema is refused
    r = rest.post(url, json={"value": {"type": "AVRO", "schema_id": schema_id, "data": {"id": "8"}}})
    assert (r.status_code, r.json()["error_code"]) == (422, 42205), r.text

    values = deserializer(broker, message_class(broker, schema_id, "rest.v1.Order"))
    got = native_values(broker, topic, 3, lambda m: values(m.value(), SerializationContext(topic, MessageField.VALUE)))
    assert [(o.id, o.item_name, o.status) for o in got] == [(5, "cup", 0), (6, "", 0), (7, "", 1)]


@pytest.mark.parametrize("body, status, code", [
    ({"value_schema": 'syntax = "proto3"; message A { int32 x = 1 }', "records": [{"value": {"x": 1}}]}, 422, 42205),
    ({"value_schema": ORDER, "records": [{"value": {"id": "1", "no_such_field": 2}}]}, 422, 42203),
    ({"value_schema": ORDER, "records": [{"value": {"id": "one"}}]}, 422, 42203),
    ({"value_schema": ORDER, "records": [{"value": {"status": "LOST"}}]}, 422, 42203),
    ({"value_schema": ORDER, "records": [{"value": [1, 2]}]}, 422, 42203),
    ({"records": [{"value": {"id": "1"}}]}, 422, 42202),
    ({"value_schema": ORDER, "key_schema": "message {", "records": [{"key": {"x": 1}, "value": {}}]}, 422, 42205),
])
def test_bad_schema_and_records(broker, rest, body, status, code):
    topic = new_topic(broker)
    r = rest.post(f"/topics/{topic}", headers={"Content-Type": PROTOBUF}, json=body)
    assert (r.status_code, r.json()["error_code"]) == (status, code), r.text


def test_schema_id_of_another_type(broker, rest):
    topic = new_topic(broker)
    avro = httpx.post(f"{broker.registry_url}/subjects/{topic}-value/versions",
                      json={"schema": '{"type": "string"}'}).json()["id"]
    r = rest.post(f"/topics/{topic}", headers={"Content-Type": PROTOBUF},
                  json={"value_schema_id": avro, "records": [{"value": {"id": "1"}}]})
    assert (r.status_code, r.json()["error_code"]) == (422, 42205), r.text


MONEY = 'syntax = "proto3"; package common; message Money { int64 units = 1; string currency = 2; }'
PRICED = """
syntax = "proto3";
package shop;

import "shop/money.proto";
import "google/protobuf/timestamp.proto";

message Priced {
  string sku = 1;
  common.Money price = 2;
  google.protobuf.Timestamp since = 3;
}
"""


def test_references_and_well_known_imports(broker, rest):
    """A schema importing a file of another subject (a reference, its subject holding a '/')
    and a well-known google/protobuf file: the proxy loads both to build the message."""
    topic = new_topic(broker)
    registry = broker.registry_url
    money = httpx.post(f"{registry}/subjects/shop%2Fmoney.proto/versions",
                       json={"schemaType": "PROTOBUF", "schema": MONEY})
    assert money.status_code == 200, money.text
    priced = httpx.post(f"{registry}/subjects/{topic}-value/versions", json={
        "schemaType": "PROTOBUF", "schema": PRICED,
        "references": [{"name": "shop/money.proto", "subject": "shop/money.proto", "version": 1}]})
    assert priced.status_code == 200, priced.text
    schema_id = priced.json()["id"]
    value = {"sku": "b-1", "price": {"units": "12", "currency": "EUR"}, "since": "2024-05-01T10:00:00Z"}
    r = rest.post(f"/topics/{topic}", headers={"Content-Type": PROTOBUF},
                  json={"value_schema_id": schema_id, "records": [{"value": value}]})
    assert r.status_code == 200, r.text
    base_uri = rest_consumer(rest, topic, "protobuf")
    try:
        (got,) = read_all(rest, base_uri, PROTOBUF, 1)
    finally:
        rest.delete(base_uri, headers={"Content-Type": V2})
    assert got["value"] == value and got["value_schema_id"] == schema_id


@given(st.lists(st.integers(min_value=0, max_value=2 ** 31 - 1), min_size=1, max_size=8))
def test_message_indexes_are_confluent_kafkas(path):
    """Bytes in, bytes out against confluent-kafka's own writer and reader of the
    message-index array (zigzag varints; [0] a single 0)."""
    theirs = io.BytesIO()
    SchemaId._encode_varints(theirs, path)
    ours = message_indexes(path)
    assert ours == theirs.getvalue()
    assert SchemaId._read_index_array(io.BytesIO(ours)) == path
    assert read_message_indexes(b"\x00" * 5 + ours + b"rest", 5) == (path, 5 + len(ours))


@pytest.mark.parametrize("cut", [b"\x80", b"\x04\x02", b"\xff" * 12])
def test_a_cut_message_index_array_is_refused(cut):
    with pytest.raises(ValueError):
        read_message_indexes(b"\x00" * 5 + cut, 5)


def test_a_record_the_schema_cannot_read(broker, rest):
    """A record naming a message the schema has not (index path [5]) or cut short: Confluent's
    deserialization failure (its SerializationException: 408 40801, naming the record), never
    a crash."""
    topic = new_topic(broker)
    r = rest.post(f"/topics/{topic}", headers={"Content-Type": PROTOBUF},
                  json={"value_schema": ORDER, "records": [{"value": {"id": "1"}}]})
    assert r.status_code == 200, r.text
    header = b"\x00" + r.json()["value_schema_id"].to_bytes(4, "big")
    for value in (header + message_indexes([5]) + b"", header + b"\x00" + b"\x08"):
        topic = new_topic(broker)
        producer = Producer({"bootstrap.servers": broker.bootstrap})
        producer.produce(topic, value=value)
        assert producer.flush(30) == 0
        base_uri = rest_consumer(rest, topic, "protobuf")
        try:
            statuses = []
            for _ in range(30):
                answer = rest.get(base_uri + "/records", params={"timeout": 1000}, headers={"Accept": PROTOBUF})
                statuses.append(answer.status_code)
                if answer.status_code != 200:
                    break
            assert (answer.status_code, answer.json()["error_code"]) == (408, 40801), statuses
            assert "cannot be read with schema" in answer.json()["message"]
            assert f"partition {topic}-0 at offset 0" in answer.json()["message"]
        finally:
            rest.delete(base_uri, headers={"Content-Type": V2})


TYPED = """
syntax = "proto3";
package shop;

import "google/protobuf/type.proto";

message Described { string name = 1; google.protobuf.Type type = 2; }
"""


def test_a_well_known_import_that_imports_others(broker, rest):
    """google/protobuf/type.proto imports any.proto and source_context.proto: the registry
    accepts the schema, and the proxy loads the same files to build its message (it loaded
    only the file named, and refused the schema the registry had taken)."""
    topic = new_topic(broker)
    value = {"name": "n", "type": {"name": "T", "sourceContext": {"fileName": "t.proto"}}}
    r = rest.post(f"/topics/{topic}", headers={"Content-Type": PROTOBUF},
                  json={"value_schema": TYPED, "records": [{"value": value}]})
    assert r.status_code == 200, r.text
    base_uri = rest_consumer(rest, topic, "protobuf")
    try:
        (got,) = read_all(rest, base_uri, PROTOBUF, 1)
    finally:
        rest.delete(base_uri, headers={"Content-Type": V2})
    assert got["value"]["name"] == "n"
    assert got["value"]["type"]["name"] == "T"
    assert got["value"]["type"]["sourceContext"] == {"fileName": "t.proto"}
