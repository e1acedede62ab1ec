"""REST Proxy v3 (Kafka REST, application/json) driven with httpx through Confluent's
documented flows: clusters and brokers, topics create/list/get/delete, partitions, topic
configs, records produce (read back natively), consumer groups with consumers and lags."""

from __future__ import annotations

import base64
import json
import time
import uuid

import httpx
import pytest
from confluent_kafka import Consumer, TopicPartition
from confluent_kafka.admin import AdminClient, ConfigResource, ResourceType

pytestmark = pytest.mark.timeout(120)


@pytest.fixture(scope="module")
def cluster_id(broker) -> str:
    answer = httpx.get(broker.rest_url + "/v3/clusters").json()
    assert answer["kind"] == "KafkaClusterList"
    return answer["data"][0]["cluster_id"]


def make_topic(rest, cluster_id: str, partitions: int = 1, configs: list | None = None) -> str:
    name = f"v3-{uuid.uuid4().hex[:8]}"
    r = rest.post(f"/v3/clusters/{cluster_id}/topics", json={
        "topic_name": name, "partitions_count": partitions, "replication_factor": 1, "configs": configs or []})
    assert r.status_code == 201, r.text
    return name


def test_clusters_and_brokers(broker, rest, cluster_id):
    cluster = rest.get(f"/v3/clusters/{cluster_id}").json()
    assert cluster["kind"] == "KafkaCluster" and cluster["cluster_id"] == cluster_id
    assert cluster["topics"]["related"].endswith(f"/v3/clusters/{cluster_id}/topics")
    assert cluster["metadata"]["resource_name"] == f"crn:///kafka={cluster_id}"
    brokers = rest.get(f"/v3/clusters/{cluster_id}/brokers").json()
    assert [(b["broker_id"], b["host"], b["port"]) for b in brokers["data"]] == [(1, "127.0.0.1", broker.port)]
    assert rest.get(f"/v3/clusters/{cluster_id}/brokers/1").json()["broker_id"] == 1
    r = rest.get("/v3/clusters/not-this-one")
    assert r.status_code == 404 and r.json()["error_code"] == 404


def test_topics_create_get_list_delete(broker, rest, cluster_id):
    name = make_topic(rest, cluster_id, 3, [{"name": "cleanup.policy", "value": "compact"}])
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    assert len(admin.list_topics(name, timeout=10).topics[name].partitions) == 3
    topic = rest.get(f"/v3/clusters/{cluster_id}/topics/{name}").json()
    assert (topic["kind"], topic["topic_name"], topic["partitions_count"], topic["replication_factor"],
            topic["is_internal"]) == ("KafkaTopic", name, 3, 1, False)
    assert name in [t["topic_name"] for t in rest.get(f"/v3/clusters/{cluster_id}/topics").json()["data"]]
    parts = rest.get(f"/v3/clusters/{cluster_id}/topics/{name}/partitions").json()
    assert [p["partition_id"] for p in parts["data"]] == [0, 1, 2]
    assert parts["data"][0]["leader"]["related"].endswith(f"/topics/{name}/partitions/0/replicas/1")
    assert rest.get(f"/v3/clusters/{cluster_id}/topics/{name}/partitions/2").json()["partition_id"] == 2
    leader = rest.get(parts["data"][0]["leader"]["related"]).json()  # the link leads somewhere
    assert (leader["kind"], leader["broker_id"], leader["is_leader"], leader["is_in_sync"]) == ("KafkaReplica", 1,
                                                                                                True, True)
    replicas = rest.get(f"/v3/clusters/{cluster_id}/topics/{name}/partitions/0/replicas").json()["data"]
    assert [r["broker_id"] for r in replicas] == [1]
    r = rest.get(f"/v3/clusters/{cluster_id}/topics/{name}/partitions/9")
    assert r.status_code == 404 and r.json()["error_code"] == 40403

    r = rest.post(f"/v3/clusters/{cluster_id}/topics", json={"topic_name": name, "partitions_count": 1})
    assert r.status_code == 400 and r.json()["error_code"] == 40002, r.text
    assert rest.delete(f"/v3/clusters/{cluster_id}/topics/{name}").status_code == 204
    r = rest.get(f"/v3/clusters/{cluster_id}/topics/{name}")
    assert r.status_code == 404 and r.json()["error_code"] == 40403
    assert rest.delete(f"/v3/clusters/{cluster_id}/topics/{name}").json()["error_code"] == 40403


def test_topic_configs(broker, rest, cluster_id):
    name = make_topic(rest, cluster_id)
    base = f"/v3/clusters/{cluster_id}/topics/{name}/configs"
    listed = {c["name"]: c for c in rest.get(base).json()["data"]}
    assert listed["retention.ms"]["is_default"] is True
    assert rest.put(base + "/retention.ms", json={"value": "123456"}).status_code == 204
    one = rest.get(base + "/retention.ms").json()
    assert (one["kind"], one["value"], one["is_default"]) == ("KafkaTopicConfig", "123456", False)
    r = rest.post(base + ":alter", json={"data": [{"name": "cleanup.policy", "value": "compact"},
                                                  {"name": "retention.ms", "operation": "DELETE"}]})
    assert r.status_code == 204, r.text
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    res = ConfigResource(ResourceType.TOPIC, name)
    seen = admin.describe_configs([res])[res].result(10)
    assert seen["cleanup.policy"].value == "compact"
    assert seen["retention.ms"].is_default
    assert rest.delete(base + "/cleanup.policy").status_code == 204
    assert rest.get(base + "/cleanup.policy").json()["value"] == "delete"
    assert rest.get(base + "/no.such.config").status_code == 404


def _native(broker, topic: str, want: int) -> list:
    consumer = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": f"n-{uuid.uuid4().hex[:6]}",
                         "auto.offset.reset": "earliest"})
    consumer.subscribe([topic])
    got, deadline = [], time.monotonic() + 30
    try:
        while len(got) < want and time.monotonic() < deadline:
            msg = consumer.poll(0.5)
            if msg is not None and msg.error() is None:
                got.append(msg)
    finally:
        consumer.close()
    return got


def test_records_produce_each_type(broker, rest, cluster_id):
    name = make_topic(rest, cluster_id, 2)
    url = f"/v3/clusters/{cluster_id}/topics/{name}/records"
    r = rest.post(url, json={"partition_id": 1, "headers": [{"name": "h", "value": base64.b64encode(b"hv").decode()}],
                             "key": {"type": "BINARY", "data": base64.b64encode(b"bk").decode()},
                             "value": {"type": "JSON", "data": {"a": [1, 2]}}})
    assert r.status_code == 200, r.text
    answer = r.json()
    assert (answer["error_code"], answer["topic_name"], answer["partition_id"], answer["offset"]) == (200, name, 1, 0)
    assert answer["key"] == {"type": "BINARY", "size": 2} and answer["value"]["type"] == "JSON"
    assert answer["timestamp"].endswith("Z")
    r = rest.post(url, json={"partition_id": 1, "value": {"type": "STRING", "data": "plain text"}})
    assert r.status_code == 200 and r.json()["offset"] == 1
    schema = json.dumps({"type": "record", "name": "P", "fields": [{"name": "x", "type": "int"}]})
    r = rest.post(url, json={"partition_id": 1, "value": {"type": "AVRO", "schema": schema, "data": {"x": 5}}})
    assert r.status_code == 200, r.text
    schema_id = r.json()["value"]["schema_id"]
    got = _native(broker, name, 3)
    assert [(m.key(), m.value()[:5] if m.value()[:1] == b"\x00" else m.value()) for m in got] == [
        (b"bk", b'{"a":[1,2]}'), (None, b"plain text"), (None, b"\x00" + schema_id.to_bytes(4, "big"))]
    assert got[0].headers() == [("h", b"hv")]
    assert got[2].value()[5:] == b"\x0a"  # Avro int 5, zig-zag

    # streaming mode: several records in one body, one answer per line
    body = "".join(json.dumps({"partition_id": 0, "value": {"type": "STRING", "data": f"s{i}"}}) for i in range(4))
    r = rest.post(url, content=body.encode(), headers={"Content-Type": "application/json"})
    assert r.status_code == 200, r.text
    lines = [json.loads(line) for line in r.text.splitlines()]
    assert [(a["error_code"], a["offset"]) for a in lines] == [(200, i) for i in range(4)]


def test_records_to_a_partition_added_a_moment_ago(broker, rest, cluster_id):
    from confluent_kafka.admin import NewPartitions

    name = make_topic(rest, cluster_id, 1)
    url = f"/v3/clusters/{cluster_id}/topics/{name}/records"
    assert rest.post(url, json={"value": {"type": "STRING", "data": "x"}}).status_code == 200
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    admin.create_partitions([NewPartitions(name, 2)])[name].result(10)
    r = rest.post(url, json={"partition_id": 1, "value": {"type": "STRING", "data": "y"}})
    assert r.status_code == 200 and r.json()["partition_id"] == 1, r.text


def test_records_refusals(broker, rest, cluster_id):
    name = make_topic(rest, cluster_id)
    url = f"/v3/clusters/{cluster_id}/topics/{name}/records"
    r = rest.post(url, json={"partition_id": 4, "value": {"type": "STRING", "data": "x"}})
    assert r.status_code == 404 and r.json()["error_code"] == 40403
    r = rest.post(f"/v3/clusters/{cluster_id}/topics/none-such/records", json={"value": {"type": "STRING", "data": ""}})
    assert r.status_code == 404 and r.json()["error_code"] == 40403
    r = rest.post(url, json={"value": {"type": "XML", "data": "<x/>"}})
    assert r.status_code == 422
    r = rest.post(url, content=b"{oops", headers={"Content-Type": "application/json"})
    assert r.status_code == 400 and r.json()["error_code"] == 400
    r = rest.post(url, content=b"{}", headers={"Content-Type": "text/plain"})
    assert r.status_code == 415
    r = rest.post(url, json={"value": {"type": "PROTOBUF", "data": {}}})
    assert r.status_code == 422 and r.json()["error_code"] == 42202  # no schema, id nor subject


def test_consumer_groups_consumers_and_lags(broker, rest, cluster_id):
    name = make_topic(rest, cluster_id, 2)
    url = f"/v3/clusters/{cluster_id}/topics/{name}/records"
    for i in range(5):
        rest.post(url, json={"partition_id": 0, "value": {"type": "STRING", "data": f"{i}"}}).raise_for_status()
    for i in range(3):
        rest.post(url, json={"partition_id": 1, "value": {"type": "STRING", "data": f"{i}"}}).raise_for_status()
    group = f"grp-{name}"
    consumer = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": group, "client.id": "lagger",
                         "enable.auto.commit": False, "auto.offset.reset": "earliest"})
    consumer.subscribe([name])
    try:
        deadline = time.monotonic() + 30
        while not consumer.assignment() and time.monotonic() < deadline:
            consumer.poll(0.2)
        consumer.commit(offsets=[TopicPartition(name, 0, 2), TopicPartition(name, 1, 3)], asynchronous=False)
        base = f"/v3/clusters/{cluster_id}/consumer-groups"
        assert group in [g["consumer_group_id"] for g in rest.get(base).json()["data"]]
        described = rest.get(f"{base}/{group}").json()
        assert (described["kind"], described["state"], described["is_simple"]) == ("KafkaConsumerGroup", "STABLE",
                                                                                   False)
        members = rest.get(f"{base}/{group}/consumers").json()["data"]
        assert [m["client_id"] for m in members] == ["lagger"]
        assert rest.get(members[0]["metadata"]["self"]).json()["consumer_id"] == members[0]["consumer_id"]
        lags = rest.get(f"{base}/{group}/lags").json()["data"]
        assert [(x["partition_id"], x["current_offset"], x["log_end_offset"], x["lag"]) for x in lags] == [
            (0, 2, 5, 3), (1, 3, 3, 0)]
        assert lags[0]["client_id"] == "lagger"
        one = rest.get(lags[0]["metadata"]["self"]).json()
        assert (one["kind"], one["lag"], one["partition_id"]) == ("KafkaConsumerLag", 3, 0)
        summary = rest.get(f"{base}/{group}/lag-summary").json()
        assert (summary["max_lag"], summary["total_lag"], summary["max_lag_partition_id"],
                summary["max_lag_topic_name"]) == (3, 3, 0, name)
    finally:
        consumer.close()
    r = rest.get(f"/v3/clusters/{cluster_id}/consumer-groups/never-seen")
    assert r.status_code == 404
