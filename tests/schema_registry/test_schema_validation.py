"""Broker-side schema validation (`confluent.value.schema.validation`,
`confluent.key.schema.validation`): records whose value (key) does not carry a schema id
registered under the topic's subject are refused with INVALID_RECORD; other topics are not
touched. Real confluent-kafka producers and serializers against a real broker."""

from __future__ import annotations

import json
import socket
import struct

import confluent_kafka as ck
from confluent_kafka.admin import AdminClient, ConfigResource, NewTopic
from confluent_kafka.schema_registry import SchemaRegistryClient
from confluent_kafka.schema_registry.avro import AvroSerializer
from confluent_kafka.serialization import MessageField, SerializationContext

from tests.brokerproc import BrokerProcess, recv_exact
from wire import decode_response, encode_request
from wire.errors import ErrorCode
from wire.records import Record, build_batch
from wire.registry import ApiKey

USER = json.dumps({"type": "record", "name": "User", "fields": [{"name": "name", "type": "string"}]})


def _create(registry, topic: str, configs: dict) -> None:
    admin = AdminClient({"bootstrap.servers": registry.bootstrap})
    for future in admin.create_topics([NewTopic(topic, 1, 1, config=configs)]).values():
        future.result(30)


def _produce(registry, topic: str, *, value: bytes | None, key: bytes | None = None):
    """The delivery error of one record (None: accepted)."""
    outcome = []
    producer = ck.Producer({"bootstrap.servers": registry.bootstrap, "linger.ms": 0,
                            "message.send.max.retries": 0})
    producer.produce(topic, value=value, key=key, on_delivery=lambda err, msg: outcome.append(err))
    assert producer.flush(30) == 0
    return outcome[0]


def test_value_validation(registry):
    _create(registry, "checked", {"confluent.value.schema.validation": "true"})
    _create(registry, "free", {})
    client = SchemaRegistryClient({"url": registry.url})
    serialize = AvroSerializer(client, USER)
    good = serialize({"name": "ada"}, SerializationContext("checked", MessageField.VALUE))
    assert _produce(registry, "checked", value=good) is None
    raw = _produce(registry, "checked", value=b"plain bytes")
    assert raw is not None and raw.code() == ck.KafkaError.INVALID_RECORD, raw
    # the wire format with an id the subject does not hold: refused too
    unknown = b"\x00" + (999).to_bytes(4, "big") + good[5:]
    refused = _produce(registry, "checked", value=unknown)
    assert refused is not None and refused.code() == ck.KafkaError.INVALID_RECORD
    # a tombstone carries no schema: accepted
    assert _produce(registry, "checked", value=None, key=b"k") is None
    # a topic without the config takes anything
    assert _produce(registry, "free", value=b"plain bytes") is None
    # only the valid records were stored
    consumer = ck.Consumer({"bootstrap.servers": registry.bootstrap, "group.id": "v", "auto.offset.reset": "earliest"})
    consumer.assign([ck.TopicPartition("checked", 0, 0)])
    got = []
    try:
        while len(got) < 2:
            msg = consumer.poll(10)
            assert msg is not None and msg.error() is None
            got.append(msg.value())
        assert consumer.poll(1) is None
    finally:
        consumer.close()
    assert got == [good, None]


def test_key_validation_and_alter(registry):
    _create(registry, "keyed", {"confluent.key.schema.validation": "true"})
    client = SchemaRegistryClient({"url": registry.url})
    key = AvroSerializer(client, USER)({"name": "k"}, SerializationContext("keyed", MessageField.KEY))
    assert _produce(registry, "keyed", key=key, value=b"anything") is None
    refused = _produce(registry, "keyed", key=b"raw key", value=b"anything")
    assert refused is not None and refused.code() == ck.KafkaError.INVALID_RECORD
    # switched off at run time (IncrementalAlterConfigs): raw keys pass again
    admin = AdminClient({"bootstrap.servers": registry.bootstrap})
    resource = ConfigResource("TOPIC", "keyed", incremental_configs=[
        ck.admin.ConfigEntry("confluent.key.schema.validation", "false",
                             incremental_operation=ck.admin.AlterConfigOpType.SET)])
    for future in admin.incremental_alter_configs([resource]).values():
        future.result(30)
    assert _produce(registry, "keyed", key=b"raw key", value=b"anything") is None


def _raw_produce(broker, topic: str, values: list[bytes | None]) -> dict:
    """One batch of `values` in a Produce v9 request; the partition's answer."""
    with socket.create_connection(("127.0.0.1", broker.port), timeout=10) as sock:
        batch = build_batch([Record(i, 1_700_000_000_000, b"k", v) for i, v in enumerate(values)])
        body = {"transactional_id": None, "acks": -1, "timeout_ms": 30000,
                "topic_data": [{"name": topic, "partition_data": [{"index": 0, "records": bytes(batch)}]}]}
        sock.sendall(encode_request(ApiKey.PRODUCE, 9, 1, body))
        size = struct.unpack(">i", recv_exact(sock, 4))[0]
        return decode_response(ApiKey.PRODUCE, 9, recv_exact(sock, size))[1]["responses"][0]["partition_responses"][0]


def test_record_errors_name_each_bad_record(registry):
    _create(registry, "mixed", {"confluent.value.schema.validation": "true"})
    good = AvroSerializer(SchemaRegistryClient({"url": registry.url}), USER)(
        {"name": "ada"}, SerializationContext("mixed", MessageField.VALUE))
    answer = _raw_produce(registry, "mixed", [good, b"raw", good, b"\x00\x00\x00\x03\xe7x"])
    assert answer["error_code"] == ErrorCode.INVALID_RECORD
    assert [e["batch_index"] for e in answer["record_errors"]] == [1, 3]
    messages = [e["batch_index_error_message"] for e in answer["record_errors"]]
    assert "wire format" in messages[0] and "schema id 999 is not registered under subject mixed-value" in messages[1]
    assert _raw_produce(registry, "mixed", [good, None])["error_code"] == ErrorCode.NONE


def test_without_a_registry_validated_topics_refuse(tmp_path):
    with BrokerProcess(tmp_path / "data", "--set", "schema.registry.listeners=") as broker:
        _create(broker, "checked", {"confluent.value.schema.validation": "true"})
        _create(broker, "free", {})
        answer = _raw_produce(broker, "checked", [b"\x00\x00\x00\x00\x01x"])
        assert answer["error_code"] == ErrorCode.INVALID_RECORD
        assert "no schema registry" in answer["record_errors"][0]["batch_index_error_message"]
        assert _raw_produce(broker, "free", [b"raw"])["error_code"] == ErrorCode.NONE
