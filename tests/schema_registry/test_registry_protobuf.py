"""PROTOBUF schemas in the registry: .proto text (proto2, proto3) and serialized descriptors,
references and well-known imports, one id per schema however it is sent, Confluent's
compatibility rules, and confluent-kafka's ProtobufSerializer / ProtobufDeserializer
round-tripping records through a Trafka topic with a message class built at runtime."""

from __future__ import annotations

import base64
import uuid

import confluent_kafka as ck
import httpx
import pytest
from confluent_kafka.schema_registry import Schema, SchemaRegistryClient
from confluent_kafka.schema_registry.error import SchemaRegistryError
from confluent_kafka.schema_registry.protobuf import ProtobufDeserializer, ProtobufSerializer
from confluent_kafka.serialization import MessageField, SerializationContext
from google.protobuf import descriptor_pb2, descriptor_pool, message_factory, timestamp_pb2

from tests.schema_registry.conftest import RegistryBroker

ORDER = """
syntax = "proto3";
package shop.v1;

import "google/protobuf/timestamp.proto";

// an order, as a shop would send it
message Order {
  int64 id = 1;
  string item = 2;
  repeated Line lines = 3;
  google.protobuf.Timestamp placed = 4;
  map<string, int32> counts = 5;
  oneof payment { string card = 6; bool cash = 7; }
  optional string note = 8;
  message Line { string sku = 1; Status status = 2; }
  enum Status { UNKNOWN = 0; SHIPPED = 1; }
}
"""


def _post(http, subject: str, schema: str, **extra) -> httpx.Response:
    return http.post(f"/subjects/{subject}/versions", json={"schemaType": "PROTOBUF", "schema": schema, **extra})


def _order_descriptor() -> descriptor_pb2.FileDescriptorProto:
    """ORDER as protoc would compile it (only what the serializer needs): a FileDescriptorProto
    built by hand, so no protoc is needed."""
    f = descriptor_pb2.FieldDescriptorProto
    proto = descriptor_pb2.FileDescriptorProto(name="shop/order.proto", package="shop.v1", syntax="proto3",
                                               dependency=["google/protobuf/timestamp.proto"])
    order = proto.message_type.add(name="Order")
    order.field.add(name="id", number=1, type=f.TYPE_INT64, label=f.LABEL_OPTIONAL, json_name="id")
    order.field.add(name="item", number=2, type=f.TYPE_STRING, label=f.LABEL_OPTIONAL, json_name="item")
    order.field.add(name="lines", number=3, type=f.TYPE_MESSAGE, label=f.LABEL_REPEATED,
                    type_name=".shop.v1.Order.Line", json_name="lines")
    order.field.add(name="placed", number=4, type=f.TYPE_MESSAGE, label=f.LABEL_OPTIONAL,
                    type_name=".google.protobuf.Timestamp", json_name="placed")
    order.field.add(name="counts", number=5, type=f.TYPE_MESSAGE, label=f.LABEL_REPEATED,
                    type_name=".shop.v1.Order.CountsEntry", json_name="counts")
    order.field.add(name="card", number=6, type=f.TYPE_STRING, label=f.LABEL_OPTIONAL, oneof_index=0, json_name="card")
    order.field.add(name="cash", number=7, type=f.TYPE_BOOL, label=f.LABEL_OPTIONAL, oneof_index=0, json_name="cash")
    order.field.add(name="note", number=8, type=f.TYPE_STRING, label=f.LABEL_OPTIONAL, oneof_index=1,
                    proto3_optional=True, json_name="note")
    order.oneof_decl.add(name="payment")
    order.oneof_decl.add(name="_note")
    # protoc adds a map's entry message where the map field is declared: before Line
    entry = order.nested_type.add(name="CountsEntry")
    entry.options.map_entry = True
    entry.field.add(name="key", number=1, type=f.TYPE_STRING, label=f.LABEL_OPTIONAL, json_name="key")
    entry.field.add(name="value", number=2, type=f.TYPE_INT32, label=f.LABEL_OPTIONAL, json_name="value")
    line = order.nested_type.add(name="Line")
    line.field.add(name="sku", number=1, type=f.TYPE_STRING, label=f.LABEL_OPTIONAL, json_name="sku")
    line.field.add(name="status", number=2, type=f.TYPE_ENUM, label=f.LABEL_OPTIONAL,
                   type_name=".shop.v1.Order.Status", json_name="status")
    status = order.enum_type.add(name="Status")
    status.value.add(name="UNKNOWN", number=0)
    status.value.add(name="SHIPPED", number=1)
    return proto


def _order_class():
    pool = descriptor_pool.DescriptorPool()
    pool.AddSerializedFile(timestamp_pb2.DESCRIPTOR.serialized_pb)
    pool.Add(_order_descriptor())
    return message_factory.GetMessageClass(pool.FindMessageTypeByName("shop.v1.Order"))


def test_text_and_descriptor_are_one_schema(registry, http):
    assert "PROTOBUF" in http.get("/schemas/types").json()
    first = _post(http, "orders-value", ORDER)
    assert first.status_code == 200, first.text
    schema_id = first.json()["id"]
    stored = http.get(f"/schemas/ids/{schema_id}").json()
    assert stored["schemaType"] == "PROTOBUF"
    text = stored["schema"]
    assert "an order" not in text and "message Order {" in text  # canonical: comments gone, one layout
    # other spacing, a comment, the same schema: the same id and no new version
    again = _post(http, "orders-value", "// hi\n" + ORDER.replace("\n", "\n\n  "))
    assert again.json() == {"id": schema_id}
    # confluent-kafka's form, a base64 FileDescriptorProto: still the same schema
    serialized = base64.b64encode(_order_descriptor().SerializeToString()).decode()
    assert _post(http, "orders-value", serialized).json() == {"id": schema_id}
    assert http.get("/subjects/orders-value/versions").json() == [1]
    found = http.post("/subjects/orders-value", json={"schemaType": "PROTOBUF", "schema": serialized}).json()
    assert (found["id"], found["version"]) == (schema_id, 1)
    # and back as a descriptor, which the deserializers load
    answer = http.get(f"/schemas/ids/{schema_id}", params={"format": "serialized"}).json()
    back = descriptor_pb2.FileDescriptorProto.FromString(base64.b64decode(answer["schema"]))
    assert back.package == "shop.v1" and [m.name for m in back.message_type] == ["Order"]
    assert list(back.dependency) == ["google/protobuf/timestamp.proto"]
    latest = http.get("/subjects/orders-value/versions/latest", params={"format": "serialized"}).json()
    assert latest["schema"] == answer["schema"]
    # the stored text parses to the same descriptor it was printed from
    assert _post(http, "other-value", text).json() == {"id": schema_id}


def test_proto2(http):
    proto2 = ('syntax = "proto2"; package legacy; message Item { required int32 id = 1; '
              'optional string name = 2 [default = "none"]; repeated int64 tags = 3 [packed = true]; '
              'extensions 100 to 199; }')
    answer = _post(http, "legacy-value", proto2)
    assert answer.status_code == 200, answer.text
    text = http.get(f"/schemas/ids/{answer.json()['id']}/schema").text
    assert 'required int32 id = 1;' in text and '[default = "none"]' in text and "extensions 100 to 199;" in text


@pytest.mark.parametrize("schema, why", [
    ('syntax = "proto3"; message A { int32 x = 1 }', "mismatched input"),
    ('syntax = "proto3"; message A { Missing x = 1; }', "Missing"),
    ('syntax = "proto3"; message A { int32 x = 1; string y = 1; }', "duplicate field number"),
    ('syntax = "proto3"; enum E { FIRST = 1; }', "first value must be zero"),
    ('syntax = "proto3"; message A { required int32 x = 1; }', "required"),
    ('syntax = "proto3"; import "other.proto"; message A {}', "other.proto"),
    ('syntax = "proto3"; message A { option no_such_option = true; }', "no_such_option"),
    ('syntax = "proto3"; message A { reserved 2 to 4; int32 x = 3; }', "reserved number 3"),
    ('syntax = "proto3"; message A { int32 x = 99999999999; }', "out of range"),
    ('syntax = "proto2"; message A { optional group G = 1 { optional int32 y = 2; } }', "groups"),
    ('syntax = "proto3"; message A { int32 x = 1 [(my.rule) = 3]; }', "custom option (my.rule)"),
    ("  ", "empty"),
    ("bm90IGEgZGVzY3JpcHRvcg==", "neither"),  # base64 of "not a descriptor"
    ("bm90IGEgZGVzY3JpcHRvcg==!", "mismatched input"),
])
def test_invalid_schemas_are_42201(http, schema, why):
    answer = _post(http, "bad-value", schema)
    assert answer.status_code == 422 and answer.json()["error_code"] == 42201, answer.text
    assert why in answer.json()["message"]
    assert http.get("/subjects").json() == []


def test_references_and_well_known_imports(http):
    common = 'syntax = "proto3"; package common; message Money { int64 units = 1; string currency = 2; }'
    assert _post(http, "common.proto", common).json() == {"id": 1}
    priced = ('syntax = "proto3"; package shop; import "common/money.proto"; '
              'import "google/protobuf/wrappers.proto"; '
              'message Priced { common.Money price = 1; google.protobuf.StringValue label = 2; }')
    # the import names a file: without a reference it is unknown
    refused = _post(http, "priced-value", priced)
    assert refused.json()["error_code"] == 42201 and "common/money.proto" in refused.json()["message"]
    refs = [{"name": "common/money.proto", "subject": "common.proto", "version": 1}]
    answer = _post(http, "priced-value", priced, references=refs)
    assert answer.status_code == 200, answer.text
    assert ".common.Money price = 1;" in http.get(f"/schemas/ids/{answer.json()['id']}/schema").text
    assert http.get("/subjects/common.proto/versions/1/referencedby").json() == [answer.json()["id"]]
    # a referenced type must exist in the referenced file
    wrong = _post(http, "wrong-value", priced.replace("common.Money", "common.Cash"), references=refs)
    assert wrong.json()["error_code"] == 42201


BASE = ('syntax = "proto3"; package p; message M { int32 a = 1; string b = 2; Inner inner = 3; '
        'oneof o { string c = 4; int64 d = 5; } message Inner { int64 x = 1; } } message Other { bool f = 1; }')


@pytest.mark.parametrize("change, new, compatible", [
    ("field added", BASE.replace("int32 a = 1;", "int32 a = 1; bool z = 9;"), True),
    ("field removed", BASE.replace("string b = 2;", ""), True),
    ("field renamed", BASE.replace("string b = 2", "string title = 2"), True),
    ("int32 to int64 (one wire group)", BASE.replace("int32 a", "int64 a"), True),
    ("string to bytes", BASE.replace("string b", "bytes b"), True),
    ("message added", BASE + " message Added {}", True),
    ("oneof field added", BASE.replace("int64 d = 5;", "int64 d = 5; bool e = 6;"), True),
    ("int32 to sint32", BASE.replace("int32 a", "sint32 a"), False),
    ("int32 to string", BASE.replace("int32 a", "string a"), False),
    ("scalar to message", BASE.replace("string b = 2", "Inner b = 2"), False),
    ("nested field type", BASE.replace("int64 x", "string x"), False),
    ("message removed", BASE.replace(" message Other { bool f = 1; }", ""), False),
    ("package changed", BASE.replace("package p", "package q"), False),
    ("oneof field removed", BASE.replace("int64 d = 5;", ""), False),
    ("two fields moved into a oneof",
     BASE.replace("int32 a = 1; string b = 2;", "oneof n { int32 a = 1; string b = 2; }"), False),
])
def test_compatibility_backward(http, change, new, compatible):
    assert _post(http, "c-value", BASE).status_code == 200
    check = http.post("/compatibility/subjects/c-value/versions/latest", params={"verbose": "true"},
                      json={"schemaType": "PROTOBUF", "schema": new}).json()
    assert check["is_compatible"] is compatible, (change, check)
    answer = _post(http, "c-value", new)
    if compatible:
        assert answer.status_code == 200, answer.text
    else:
        assert answer.status_code == 409 and answer.json()["error_code"] == 409, answer.text
        assert check["messages"], check


def test_compatibility_levels_proto2_required(http):
    v1 = 'syntax = "proto2"; message R { required int32 id = 1; optional string s = 2; }'
    added = 'syntax = "proto2"; message R { required int32 id = 1; optional string s = 2; required bool b = 3; }'
    removed = 'syntax = "proto2"; message R { optional string s = 2; }'
    for level, new, ok in [("BACKWARD", added, False), ("FORWARD", added, False), ("BACKWARD", removed, False),
                           ("NONE", added, True)]:
        subject = f"r-{uuid.uuid4().hex[:6]}"
        assert _post(http, subject, v1).status_code == 200
        assert http.put(f"/config/{subject}", json={"compatibility": level}).status_code == 200
        answer = http.post(f"/compatibility/subjects/{subject}/versions/latest", params={"verbose": "true"},
                           json={"schemaType": "PROTOBUF", "schema": new}).json()
        assert answer["is_compatible"] is ok, (level, answer)
        if not ok:
            assert any("REQUIRED_FIELD" in m for m in answer["messages"]), answer


def test_serializer_roundtrip(registry):
    order_class = _order_class()
    client = SchemaRegistryClient({"url": registry.url})
    serializer = ProtobufSerializer(order_class, client, {"use.deprecated.format": False})
    deserializer = ProtobufDeserializer(order_class, {"use.deprecated.format": False},
                                        schema_registry_client=SchemaRegistryClient({"url": registry.url}))
    topic = "orders"
    values = []
    for i in range(3):
        order = order_class(id=i, item=f"book {i}", card="4111" if i % 2 else "")
        order.lines.add(sku=f"sku-{i}", status=1)
        order.placed.seconds = 1_700_000_000 + i
        order.counts["books"] = i + 1
        if i == 2:
            order.note = "gift"
        values.append(order)
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
            assert msg.value()[0] == 0  # Confluent's framing: magic byte, schema id, message indexes
            got.append(deserializer(msg.value(), SerializationContext(topic, MessageField.VALUE)))
    finally:
        consumer.close()
    assert [g.SerializeToString() for g in got] == [v.SerializeToString() for v in values]
    assert got[2].note == "gift" and got[1].counts["books"] == 2
    # the serializer registered the descriptor; the registry keeps it as the same schema as ORDER's text
    latest = client.get_latest_version("orders-value")
    assert latest.schema.schema_type == "PROTOBUF" and "message Order {" in latest.schema.schema_str
    assert client.register_schema("orders-value", Schema(ORDER, "PROTOBUF")) == latest.schema_id
    # an incompatible evolution through the client: refused with 409
    with pytest.raises(SchemaRegistryError) as refused:
        client.register_schema("orders-value", Schema(ORDER.replace("int64 id", "string id"), "PROTOBUF"))
    assert refused.value.http_status_code == 409


def test_survives_restart(tmp_path):
    with RegistryBroker(tmp_path / "data") as broker:
        with httpx.Client(base_url=broker.url, timeout=10) as http:
            common = 'syntax = "proto3"; package common; message Money { int64 units = 1; }'
            assert _post(http, "common.proto", common).json() == {"id": 1}
            refs = [{"name": "money.proto", "subject": "common.proto", "version": 1}]
            priced = 'syntax = "proto3"; import "money.proto"; message P { common.Money m = 1; }'
            assert _post(http, "p-value", priced, references=refs).json() == {"id": 2}
            before = http.get("/schemas/ids/2", params={"format": "serialized"}).json()
        broker.restart()
        with httpx.Client(base_url=broker.url, timeout=10) as http:
            assert http.get("/schemas/ids/2", params={"format": "serialized"}).json() == before
            assert _post(http, "p-value", priced, references=refs).json() == {"id": 2}
            assert http.post("/compatibility/subjects/p-value/versions/latest",
                             json={"schemaType": "PROTOBUF", "schema": priced.replace("common.Money m", "int32 m"),
                                   "references": refs}).json() == {"is_compatible": False}


def _priced_files() -> tuple[descriptor_pb2.FileDescriptorProto, descriptor_pb2.FileDescriptorProto]:
    f = descriptor_pb2.FieldDescriptorProto
    money = descriptor_pb2.FileDescriptorProto(name="shop/money.proto", package="common", syntax="proto3")
    m = money.message_type.add(name="Money")
    m.field.add(name="units", number=1, type=f.TYPE_INT64, label=f.LABEL_OPTIONAL, json_name="units")
    m.field.add(name="currency", number=2, type=f.TYPE_STRING, label=f.LABEL_OPTIONAL, json_name="currency")
    priced = descriptor_pb2.FileDescriptorProto(name="shop/priced.proto", package="shop", syntax="proto3",
                                                dependency=["shop/money.proto"])
    p = priced.message_type.add(name="Priced")
    p.field.add(name="sku", number=1, type=f.TYPE_STRING, label=f.LABEL_OPTIONAL, json_name="sku")
    p.field.add(name="price", number=2, type=f.TYPE_MESSAGE, label=f.LABEL_OPTIONAL, type_name=".common.Money",
                json_name="price")
    return money, priced


def test_serializer_registers_references(registry):
    """An import of the user's own file: the serializer registers it under its own subject
    (the file name, which holds a '/') and references it; the deserializer loads both back."""
    money, priced = _priced_files()
    pool = descriptor_pool.DescriptorPool()
    pool.Add(money)
    pool.Add(priced)
    priced_class = message_factory.GetMessageClass(pool.FindMessageTypeByName("shop.Priced"))
    client = SchemaRegistryClient({"url": registry.url})
    serializer = ProtobufSerializer(priced_class, client, {"use.deprecated.format": False})
    ctx = SerializationContext("priced", MessageField.VALUE)
    value = priced_class(sku="b-1")
    value.price.units = 12
    value.price.currency = "EUR"
    data = serializer(value, ctx)
    assert sorted(client.get_subjects()) == ["priced-value", "shop/money.proto"]
    latest = client.get_latest_version("priced-value")
    assert [(r.name, r.subject, r.version) for r in latest.schema.references] == [
        ("shop/money.proto", "shop/money.proto", 1)]
    deserializer = ProtobufDeserializer(priced_class, {"use.deprecated.format": False},
                                        schema_registry_client=SchemaRegistryClient({"url": registry.url}))
    assert deserializer(data, ctx) == value


def test_every_level_refuses_with_409(http):
    v1 = 'syntax = "proto3"; message E { int32 a = 1; }'
    v2 = 'syntax = "proto3"; message E { int32 a = 1; string b = 2; }'
    bad = 'syntax = "proto3"; message E { string a = 1; string b = 2; }'  # a: number became string
    for level in ("BACKWARD", "BACKWARD_TRANSITIVE", "FORWARD", "FORWARD_TRANSITIVE", "FULL", "FULL_TRANSITIVE",
                  "NONE"):
        subject = f"level-{level.lower()}"
        assert http.put(f"/config/{subject}", json={"compatibility": level}).status_code == 200
        assert _post(http, subject, v1).status_code == 200
        assert _post(http, subject, v2).status_code == 200
        answer = _post(http, subject, bad)
        if level == "NONE":
            assert answer.status_code == 200, answer.text
        else:
            assert (answer.status_code, answer.json()["error_code"]) == (409, 409), (level, answer.text)
            assert "FIELD_SCALAR_KIND_CHANGED" in answer.json()["message"]


def test_a_descriptor_is_kept_whole_or_refused(http):
    """What the stored text cannot hold (here an extension) is refused, not dropped."""
    f = descriptor_pb2.FieldDescriptorProto
    proto = descriptor_pb2.FileDescriptorProto(name="ext.proto", syntax="proto2",
                                               dependency=["google/protobuf/descriptor.proto"])
    proto.message_type.add(name="A").field.add(name="a", number=1, type=f.TYPE_INT32, label=f.LABEL_OPTIONAL)
    proto.extension.add(name="rule", number=50000, type=f.TYPE_STRING, label=f.LABEL_OPTIONAL,
                        extendee=".google.protobuf.FieldOptions")
    answer = _post(http, "ext-value", base64.b64encode(proto.SerializeToString()).decode())
    assert (answer.status_code, answer.json()["error_code"]) == (422, 42201), answer.text
    assert "cannot keep" in answer.json()["message"]
    del proto.extension[:]
    assert _post(http, "ext-value", base64.b64encode(proto.SerializeToString()).decode()).status_code == 200


def test_descriptors_come_back_whole(http):
    """protoc-compiled files (the well-known ones: maps, oneofs, enums, nested and imported
    types) registered as descriptors come back from `?format=serialized` unchanged."""
    from google.protobuf import any_pb2, api_pb2, struct_pb2, type_pb2, wrappers_pb2

    for module in (any_pb2, api_pb2, struct_pb2, type_pb2, wrappers_pb2):
        sent = descriptor_pb2.FileDescriptorProto.FromString(module.DESCRIPTOR.serialized_pb)
        answer = _post(http, f"wk-{sent.package}-{sent.name.rsplit('/', 1)[-1]}",
                       base64.b64encode(sent.SerializeToString()).decode())
        assert answer.status_code == 200, (sent.name, answer.text)
        back = descriptor_pb2.FileDescriptorProto.FromString(base64.b64decode(
            http.get(f"/schemas/ids/{answer.json()['id']}", params={"format": "serialized"}).json()["schema"]))
        back.name = sent.name
        sent.ClearField("source_code_info")
        # protoc writes every json_name; the registry those that differ from the default
        assert _strip_json_names(back) == _strip_json_names(sent), sent.name


def _strip_json_names(proto):
    copy = descriptor_pb2.FileDescriptorProto()
    copy.CopyFrom(proto)

    def walk(messages):
        for msg in messages:
            for fld in msg.field:
                fld.ClearField("json_name")
            walk(msg.nested_type)

    walk(copy.message_type)
    return copy
