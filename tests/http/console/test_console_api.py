"""The console's JSON API over real sockets (httpx) against a broker process fed by real
confluent-kafka clients: what it shows matches what the Kafka API says, and its actions
are visible through the Kafka API."""

from __future__ import annotations

import json
import struct
import time
import uuid

import confluent_kafka as ck
import httpx
import pytest
from confluent_kafka.admin import AdminClient, NewTopic
from confluent_kafka.schema_registry import SchemaRegistryClient
from confluent_kafka.schema_registry.avro import AvroSerializer
from confluent_kafka.serialization import MessageField, SerializationContext

from tests.http.console.conftest import produce, wait_for

pytestmark = pytest.mark.timeout(180)


def new_topic(broker, partitions: int = 1) -> str:
    name = f"console-{uuid.uuid4().hex[:8]}"
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    admin.create_topics([NewTopic(name, partitions, 1)])[name].result(30)
    return name


def assert_error(response: httpx.Response, status: int, name: str) -> dict:
    assert response.status_code == status, response.text
    body = response.json()
    assert body["error"] == name, body
    assert isinstance(body["error_code"], int) and body["message"]
    return body


def test_page_and_assets_are_served_without_internet(broker):
    page = httpx.get(broker.http_url + "/", timeout=10)
    assert page.status_code == 200 and "text/html" in page.headers["content-type"]
    assert "/static/app.js" in page.text and "http" not in page.text.replace("http-equiv", "")  # nothing fetched elsewhere
    for asset, kind in (("app.js", "javascript"), ("console.css", "css")):
        response = httpx.get(f"{broker.http_url}/static/{asset}", timeout=10)
        assert response.status_code == 200 and kind in response.headers["content-type"]
        assert "https://" not in response.text  # no CDN
    assert httpx.get(broker.http_url + "/metrics", timeout=10).status_code == 200  # still there


def test_cluster_shows_the_broker_as_controller(broker, api):
    cluster = api.get("/cluster").json()
    assert cluster["mode"] == "single"
    assert cluster["controller_id"] == cluster["node_id"]
    assert cluster["brokers"] == [{"node_id": cluster["node_id"], "host": "127.0.0.1", "port": broker.port,
                                   "rack": None, "controller": True, "this": True}]
    metadata = AdminClient({"bootstrap.servers": broker.bootstrap}).list_topics(timeout=10)
    assert metadata.controller_id == cluster["controller_id"]
    assert metadata.cluster_id == cluster["cluster_id"]


def test_topic_partitions_offsets_and_sizes_match_kafka(broker, api):
    topic = new_topic(broker, partitions=2)
    produce(broker.bootstrap, topic, [{"key": b"k", "value": b"v" * 100}] * 5, partition=1)
    listed = {t["name"]: t for t in api.get("/topics").json()["topics"]}
    assert listed[topic]["partitions"] == 2 and listed[topic]["replication_factor"] == 1
    assert listed[topic]["messages"] == 5 and listed[topic]["size"] > 500
    assert listed["__consumer_offsets"]["internal"] is True
    detail = api.get(f"/topics/{topic}").json()
    p0, p1 = detail["partitions"]
    assert (p0["log_start_offset"], p0["log_end_offset"], p0["high_watermark"], p0["size"]) == (0, 0, 0, 0)
    assert (p1["log_start_offset"], p1["high_watermark"]) == (0, 5)
    consumer = ck.Consumer({"bootstrap.servers": broker.bootstrap, "group.id": "watermarks"})
    try:
        assert consumer.get_watermark_offsets(ck.TopicPartition(topic, 1), timeout=10) == (0, 5)
    finally:
        consumer.close()
    meta = AdminClient({"bootstrap.servers": broker.bootstrap}).list_topics(topic, timeout=10).topics[topic]
    for p in detail["partitions"]:
        kafka = meta.partitions[p["partition"]]
        assert (p["leader"], p["replicas"], p["isr"]) == (kafka.leader, kafka.replicas, kafka.isrs)
    assert_error(api.get("/topics/no-such-topic"), 404, "UNKNOWN_TOPIC_OR_PARTITION")


def test_message_browser_renders_text_json_hex_and_headers(broker, api):
    topic = new_topic(broker)
    produce(broker.bootstrap, topic, [
        {"key": b"user-1", "value": json.dumps({"name": "Ada", "n": 1}).encode(), "headers": [("trace", b"abc")]},
        {"key": b"\x00\xff\x10", "value": b"\xde\xad\xbe\xef"},
        {"key": None, "value": None},
    ])
    answer = api.get(f"/topics/{topic}/partitions/0/records").json()
    first, binary, tombstone = answer["records"]
    assert first["offset"] == 0 and first["key"]["text"] == "user-1"
    assert first["value"]["json"] == {"name": "Ada", "n": 1}
    assert first["headers"] == [{"key": "trace", "value": {**first["headers"][0]["value"], "text": "abc", "hex": "616263"}}]
    assert binary["key"]["text"] is None and binary["key"]["hex"] == "00ff10" and binary["value"]["hex"] == "deadbeef"
    assert tombstone["key"] is None and tombstone["value"] is None
    assert answer["high_watermark"] == 3 and answer["next_offset"] == 3
    # from an offset, with a limit
    later = api.get(f"/topics/{topic}/partitions/0/records", params={"offset": 1, "limit": 1}).json()
    assert [r["offset"] for r in later["records"]] == [1] and later["next_offset"] == 2
    # past the end: nothing, not an error
    assert api.get(f"/topics/{topic}/partitions/0/records", params={"offset": 99}).json()["records"] == []
    # bad input: precise errors
    assert_error(api.get(f"/topics/{topic}/partitions/0/records", params={"limit": 201}), 400, "INVALID_REQUEST")
    assert_error(api.get(f"/topics/{topic}/partitions/0/records", params={"offset": "x"}), 400, "INVALID_REQUEST")
    assert_error(api.get(f"/topics/{topic}/partitions/5/records"), 404, "UNKNOWN_TOPIC_OR_PARTITION")
    assert_error(api.get("/topics/no-such-topic/partitions/0/records"), 404, "UNKNOWN_TOPIC_OR_PARTITION")


def test_message_browser_starts_at_a_timestamp(broker, api):
    topic = new_topic(broker)
    base = int(time.time() * 1000) - 3_600_000
    produce(broker.bootstrap, topic, [{"key": f"k{i}".encode(), "value": b"v", "timestamp": base + i * 1000}
                                      for i in range(5)])
    answer = api.get(f"/topics/{topic}/partitions/0/records", params={"timestamp": base + 2500}).json()
    assert [r["offset"] for r in answer["records"]] == [3, 4]
    assert answer["records"][0]["timestamp"] == base + 3000
    consumer = ck.Consumer({"bootstrap.servers": broker.bootstrap, "group.id": "times"})
    try:  # Kafka's own answer for the same timestamp
        found = consumer.offsets_for_times([ck.TopicPartition(topic, 0, base + 2500)], timeout=10)
        assert found[0].offset == 3
    finally:
        consumer.close()
    after = api.get(f"/topics/{topic}/partitions/0/records", params={"timestamp": base + 10_000}).json()
    assert after["records"] == [] and after["start_offset"] == 5


def test_avro_values_are_decoded_through_the_registry(broker, api):
    topic = new_topic(broker)
    schema = json.dumps({"type": "record", "name": "Payment", "fields": [
        {"name": "id", "type": "string"}, {"name": "amount", "type": "double"}]})
    serializer = AvroSerializer(SchemaRegistryClient({"url": broker.registry_url}), schema)
    value = serializer({"id": "p-1", "amount": 9.5}, SerializationContext(topic, MessageField.VALUE))
    unknown_id = b"\x00" + struct.pack(">I", 999_999) + b"\x02x"
    produce(broker.bootstrap, topic, [{"key": b"a", "value": value}, {"key": b"b", "value": unknown_id}])
    known, unknown = api.get(f"/topics/{topic}/partitions/0/records").json()["records"]
    assert known["value"]["avro"] == {"id": "p-1", "amount": 9.5}
    assert known["value"]["schema_id"] == struct.unpack(">I", value[1:5])[0]
    assert unknown["value"]["avro"] is None and unknown["value"]["hex"] == unknown_id.hex()


def committed(bootstrap: str, group: str, topic: str, partitions: int) -> list[int]:
    consumer = ck.Consumer({"bootstrap.servers": bootstrap, "group.id": group})
    try:
        return [tp.offset for tp in consumer.committed([ck.TopicPartition(topic, p) for p in range(partitions)],
                                                       timeout=10)]
    finally:
        consumer.close()


def test_group_members_lag_and_offset_reset(broker, api):
    topic = new_topic(broker, partitions=2)
    produce(broker.bootstrap, topic, [{"value": b"x"}] * 10, partition=0)
    produce(broker.bootstrap, topic, [{"value": b"y"}] * 4, partition=1)
    group = f"g-{uuid.uuid4().hex[:6]}"
    consumer = ck.Consumer({"bootstrap.servers": broker.bootstrap, "group.id": group, "client.id": "console-test",
                            "auto.offset.reset": "earliest", "enable.auto.commit": False})
    try:
        consumer.subscribe([topic])
        wait_for(lambda: consumer.poll(0.5) is not None and consumer.assignment(), 30, "an assignment")
        consumer.commit(offsets=[ck.TopicPartition(topic, 0, 3), ck.TopicPartition(topic, 1, 4)], asynchronous=False)
        listed = {g["group_id"]: g for g in api.get("/groups").json()["groups"]}
        assert listed[group]["state"] == "Stable" and listed[group]["members"] == 1 and listed[group]["lag"] == 7
        detail = api.get(f"/groups/{group}").json()
        (member,) = detail["members"]
        assert member["client_id"] == "console-test"
        assert member["assignment"] == [{"topic": topic, "partitions": [0, 1]}]
        lags = {(o["topic"], o["partition"]): (o["committed"], o["lag"]) for o in detail["offsets"]}
        assert lags == {(topic, 0): (3, 7), (topic, 1): (4, 0)}
        # Kafka: offsets of a group with active members cannot be reset
        body = assert_error(api.post(f"/groups/{group}/reset-offsets", json={"to": "earliest"}), 409, "NON_EMPTY_GROUP")
        assert "inactive" in body["message"]
        assert committed(broker.bootstrap, group, topic, 2) == [3, 4]
    finally:
        consumer.close()
    assert api.get(f"/groups/{group}").json()["state"] == "Empty"
    done = api.post(f"/groups/{group}/reset-offsets", json={"to": "earliest"})
    assert done.status_code == 200, done.text
    assert committed(broker.bootstrap, group, topic, 2) == [0, 0]
    assert api.post(f"/groups/{group}/reset-offsets", json={"to": "latest"}).status_code == 200
    assert committed(broker.bootstrap, group, topic, 2) == [10, 4]
    # an explicit offset is clamped to each partition's range, as kafka-consumer-groups does
    assert api.post(f"/groups/{group}/reset-offsets", json={"to": "offset", "offset": 6}).status_code == 200
    assert committed(broker.bootstrap, group, topic, 2) == [6, 4]
    assert api.get(f"/groups/{group}").json()["offsets"][0]["lag"] == 4
    assert_error(api.post(f"/groups/{group}/reset-offsets", json={"to": "sideways"}), 400, "INVALID_REQUEST")
    assert_error(api.post(f"/groups/{group}/reset-offsets", json={"to": "offset"}), 400, "INVALID_REQUEST")
    assert_error(api.post(f"/groups/{group}/reset-offsets", content=b"{"), 400, "INVALID_REQUEST")
    assert_error(api.post(f"/groups/{group}/reset-offsets", json={"to": "earliest", "topic": "nope"}), 404,
                 "UNKNOWN_TOPIC_OR_PARTITION")
    assert_error(api.get("/groups/no-such-group"), 404, "GROUP_ID_NOT_FOUND")


def test_create_and_delete_topics_as_kafka_does(broker, api):
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    name = f"created-{uuid.uuid4().hex[:8]}"
    created = api.post("/topics", json={"name": name, "partitions": 3, "replication_factor": 1,
                                        "configs": {"cleanup.policy": "compact"}})
    assert created.status_code == 201, created.text
    meta = admin.list_topics(timeout=10).topics
    assert len(meta[name].partitions) == 3
    assert api.get(f"/topics/{name}").json()["configs"] == {"cleanup.policy": "compact"}
    # the handlers' own validation and error codes
    assert_error(api.post("/topics", json={"name": name, "partitions": 1}), 409, "TOPIC_ALREADY_EXISTS")
    assert_error(api.post("/topics", json={"name": "bad/name", "partitions": 1}), 400, "INVALID_TOPIC_EXCEPTION")
    assert_error(api.post("/topics", json={"name": "x" + name, "partitions": 0}), 400, "INVALID_PARTITIONS")
    assert_error(api.post("/topics", json={"name": "x" + name, "replication_factor": 3}), 400,
                 "INVALID_REPLICATION_FACTOR")
    assert_error(api.post("/topics", json={"name": "x" + name, "configs": {"cleanup.policy": "sometimes"}}), 400,
                 "INVALID_CONFIG")
    assert_error(api.post("/topics", json={"name": "x" + name, "partitions": "many"}), 400, "INVALID_REQUEST")
    assert "x" + name not in admin.list_topics(timeout=10).topics
    deleted = api.delete(f"/topics/{name}")
    assert deleted.status_code == 200, deleted.text
    wait_for(lambda: name not in admin.list_topics(timeout=10).topics, 10, "the topic gone")
    assert_error(api.delete(f"/topics/{name}"), 404, "UNKNOWN_TOPIC_OR_PARTITION")
    assert_error(api.delete("/topics/__consumer_offsets"), 400, "INVALID_TOPIC_EXCEPTION")


def test_rates_counters_move_with_traffic(broker, api):
    topic = new_topic(broker)
    before = api.get("/rates").json()
    produce(broker.bootstrap, topic, [{"value": b"z" * 50}] * 4)
    after = api.get("/rates").json()
    assert after["messages_in"] - before["messages_in"] == 4
    assert after["bytes_in"] - before["bytes_in"] > 200
    assert after["time"] > before["time"]


def test_unknown_api_path_is_a_json_error(api):
    assert_error(api.get("/nothing-here"), 400, "INVALID_REQUEST")


def test_kip848_group_members_assignment_and_reset(broker, api):
    topic = new_topic(broker, partitions=2)
    produce(broker.bootstrap, topic, [{"value": b"n"}] * 5, partition=1)
    group = f"g848-{uuid.uuid4().hex[:6]}"
    consumer = ck.Consumer({"bootstrap.servers": broker.bootstrap, "group.id": group, "group.protocol": "consumer",
                            "client.id": "kip848", "auto.offset.reset": "earliest", "enable.auto.commit": False})
    try:
        consumer.subscribe([topic])
        wait_for(lambda: consumer.poll(0.5) is not None and len(consumer.assignment()) == 2, 30, "both partitions")
        consumer.commit(offsets=[ck.TopicPartition(topic, 1, 2)], asynchronous=False)
        detail = wait_for(lambda: (d := api.get(f"/groups/{group}").json())["state"] == "Stable" and d, 20,
                          "a Stable KIP-848 group")
        assert detail["type"] == "consumer"
        (member,) = detail["members"]
        assert member["client_id"] == "kip848" and member["member_epoch"] >= 1
        assert member["assignment"] == [{"topic": topic, "partitions": [0, 1]}]
        assert [(o["partition"], o["committed"], o["lag"]) for o in detail["offsets"]] == [(1, 2, 3)]
        assert_error(api.post(f"/groups/{group}/reset-offsets", json={"to": "latest"}), 409, "NON_EMPTY_GROUP")
    finally:
        consumer.close()
    wait_for(lambda: api.get(f"/groups/{group}").json()["state"] == "Empty", 20, "an Empty group")
    assert api.post(f"/groups/{group}/reset-offsets", json={"to": "latest"}).status_code == 200
    assert committed(broker.bootstrap, group, topic, 2)[1] == 5


def test_browser_reads_compressed_and_transactional_batches(broker, api):
    topic = new_topic(broker)
    for codec in ("zstd", "lz4", "gzip", "snappy"):
        producer = ck.Producer({"bootstrap.servers": broker.bootstrap, "compression.type": codec, "linger.ms": 50})
        for i in range(3):
            producer.produce(topic, key=f"{codec}-{i}".encode(), value=b"v" * 200, partition=0)
        assert producer.flush(30) == 0
    txn = ck.Producer({"bootstrap.servers": broker.bootstrap, "transactional.id": f"tx-{uuid.uuid4().hex[:6]}"})
    txn.init_transactions(30)
    txn.begin_transaction()
    txn.produce(topic, key=b"in-txn", value=b"committed", partition=0)
    txn.commit_transaction(30)
    answer = api.get(f"/topics/{topic}/partitions/0/records").json()
    keys = [r["key"]["text"] for r in answer["records"]]
    assert keys == [f"{c}-{i}" for c in ("zstd", "lz4", "gzip", "snappy") for i in range(3)] + ["in-txn"]
    assert answer["records"][0]["value"]["text"] == "v" * 200
    # the COMMIT marker takes offset 13 and is not shown
    assert answer["high_watermark"] == 14 and answer["records"][-1]["offset"] == 12
    # one record at a time walks across compressed batches
    step = api.get(f"/topics/{topic}/partitions/0/records", params={"offset": 4, "limit": 1}).json()
    assert [r["key"]["text"] for r in step["records"]] == ["lz4-1"]


def test_an_action_needs_a_json_content_type(broker, api):
    """What a page on another site can make a visitor's browser send without a CORS
    preflight (text/plain, a form) is refused: no topic is created that way."""
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    name = f"cross-site-{uuid.uuid4().hex[:8]}"
    for content_type in ("text/plain", "application/x-www-form-urlencoded"):
        refused = api.post("/topics", content=json.dumps({"name": name, "partitions": 1}).encode(),
                           headers={"Content-Type": content_type})
        assert_error(refused, 400, "INVALID_REQUEST")
    assert name not in admin.list_topics(timeout=10).topics
    created = api.post("/topics", json={"name": name, "partitions": 1})
    assert created.status_code == 201, created.text
