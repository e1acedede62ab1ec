"""REST Proxy v2 consumer instances: the media types every consumer route takes, and what a
client sees when a record cannot be read in the instance's format (nothing lost, nothing
committed past what was answered). Plain HTTP (httpx) against a broker process, records
produced by a native confluent-kafka producer so any bytes can be written."""

from __future__ import annotations

import json
import time
import uuid

import pytest
from confluent_kafka import ConsumerGroupTopicPartitions, Producer
from confluent_kafka.admin import AdminClient

from tests.brokerproc import create_topic
from tests.rest_proxy.conftest import AVRO, BINARY, JSON, JSONSCHEMA, V2

pytestmark = pytest.mark.timeout(120)

PROTOBUF = "application/vnd.kafka.protobuf.v2+json"


def new_topic(broker, partitions: int = 1) -> str:
    name = f"t-{uuid.uuid4().hex[:8]}"
    create_topic(broker.port, name, partitions)
    return name


def produce(broker, topic: str, values: list[bytes], partition: int = 0) -> None:
    producer = Producer({"bootstrap.servers": broker.bootstrap})
    for value in values:
        producer.produce(topic, value=value, partition=partition)
    assert producer.flush(30) == 0


def committed(broker, group: str, topic: str, partition: int = 0) -> int:
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    fut = admin.list_consumer_group_offsets([ConsumerGroupTopicPartitions(group)])[group]
    return {(tp.topic, tp.partition): tp.offset for tp in fut.result(10).topic_partitions}.get((topic, partition), -1)


def first_answer(rest, base_uri: str, accept: str, deadline_s: float = 30.0):
    """The first records answer that is not an empty list (the consumer joins its group first)."""
    deadline = time.monotonic() + deadline_s
    while True:
        r = rest.get(base_uri + "/records", params={"timeout": 1000}, headers={"Accept": accept})
        if r.status_code != 200 or r.json() or time.monotonic() > deadline:
            return r


@pytest.mark.parametrize("media_type", [BINARY, JSON, AVRO, JSONSCHEMA, PROTOBUF, V2])
def test_every_consumer_route_takes_every_embedded_format_type(broker, rest, media_type):
    """Confluent's v2 consumers resource consumes every embedded format's type and the
    generic one on all its routes; a client written for it sends the type of the format it
    reads with. They were answered 415."""
    topic = new_topic(broker)
    produce(broker, topic, [b'{"n": 0}', b'{"n": 1}'])
    headers = {"Content-Type": media_type}
    instances = []
    # subscription and assignment: one instance each, in groups of their own (a commit without
    # a member id is refused while the group has members, as Kafka refuses it)
    for name in ("subscriber", "assignee"):
        r = rest.post(f"/consumers/g-{topic}-{name}", headers=headers,
                      json={"name": name, "format": "binary", "auto.offset.reset": "earliest"})
        assert r.status_code == 200, r.text
        instances.append(r.json()["base_uri"])
    try:
        base_uri = instances[0]
        r = rest.post(base_uri + "/subscription", headers=headers, json={"topics": [topic]})
        assert r.status_code == 204, r.text
        assert rest.get(base_uri + "/subscription", headers=headers).json() == {"topics": [topic]}
        assert rest.delete(base_uri + "/subscription", headers=headers).status_code == 204
        base_uri = instances[1]
        r = rest.post(base_uri + "/assignments", headers=headers, json={"partitions": [{"topic": topic, "partition": 0}]})
        assert r.status_code == 204, r.text
        assert rest.get(base_uri + "/assignments", headers=headers).json() == {
            "partitions": [{"topic": topic, "partition": 0}]}
        r = rest.post(base_uri + "/positions", headers=headers,
                      json={"offsets": [{"topic": topic, "partition": 0, "offset": 1}]})
        assert r.status_code == 204, r.text
        got = first_answer(rest, base_uri, BINARY)
        assert got.status_code == 200 and [rec["offset"] for rec in got.json()] == [1], got.text
        for edge in ("beginning", "end"):
            r = rest.post(base_uri + f"/positions/{edge}", headers=headers,
                          json={"partitions": [{"topic": topic, "partition": 0}]})
            assert r.status_code == 204, r.text
        r = rest.post(base_uri + "/offsets", headers=headers,
                      json={"offsets": [{"topic": topic, "partition": 0, "offset": 2}]})
        assert r.status_code == 204, r.text
        r = rest.request("GET", base_uri + "/offsets", headers=headers,
                         content=json.dumps({"partitions": [{"topic": topic, "partition": 0}]}))
        assert r.status_code == 200 and r.json()["offsets"][0]["offset"] == 2, r.text
    finally:
        for base_uri in instances:
            assert rest.delete(base_uri, headers=headers).status_code == 204


def test_a_record_that_is_not_json_loses_nothing(broker, rest):
    """Offsets 0..3, offset 1 not JSON, a "json" consumer: record 0 is answered, then the
    bad one is reported (Confluent's 408 40801, naming partition and offset) on every read
    until the client seeks past it; a commit meanwhile stops at it; after the seek records 2
    and 3 come. Before: 50002 at once, records 0, 2, 3 never answered, every later read [],
    and a commit moved the group to 4."""
    topic = new_topic(broker)
    produce(broker, topic, [b'{"n": 0}', b"not json", b'{"n": 2}', b'{"n": 3}'])
    group = f"g-{topic}"
    r = rest.post(f"/consumers/{group}", headers={"Content-Type": V2},
                  json={"name": "c", "format": "json", "auto.offset.reset": "earliest", "auto.commit.enable": "false"})
    base_uri = r.json()["base_uri"]
    try:
        rest.post(base_uri + "/subscription", headers={"Content-Type": V2}, json={"topics": [topic]}).raise_for_status()
        r = first_answer(rest, base_uri, JSON)
        assert r.status_code == 200, r.text
        assert [(rec["offset"], rec["value"]) for rec in r.json()] == [(0, {"n": 0})]
        for _ in range(3):  # reported again and again: the position stays at the bad record
            r = rest.get(base_uri + "/records", params={"timeout": 500}, headers={"Accept": JSON})
            assert (r.status_code, r.json()["error_code"]) == (408, 40801), r.text
            assert f"partition {topic}-0 at offset 1" in r.json()["message"], r.text
        assert rest.post(base_uri + "/offsets", headers={"Content-Type": V2}).status_code == 204
        assert committed(broker, group, topic) == 1  # what was answered, not past the bad record
        r = rest.post(base_uri + "/positions", headers={"Content-Type": V2},
                      json={"offsets": [{"topic": topic, "partition": 0, "offset": 2}]})
        assert r.status_code == 204, r.text
        r = first_answer(rest, base_uri, JSON)
        assert r.status_code == 200, r.text
        assert [(rec["offset"], rec["value"]) for rec in r.json()] == [(2, {"n": 2}), (3, {"n": 3})]
        assert rest.post(base_uri + "/offsets", headers={"Content-Type": V2}).status_code == 204
        assert committed(broker, group, topic) == 4
    finally:
        rest.delete(base_uri, headers={"Content-Type": V2})


def test_a_commit_never_passes_records_held_back_by_max_bytes(broker, rest):
    """Records fetched beyond a request's max_bytes wait in the instance: a commit of what
    was consumed takes only what was answered (it took librdkafka's fetch position, past
    records the client never saw)."""
    topic = new_topic(broker)
    produce(broker, topic, [bytes(100)] * 10)
    group = f"g-{topic}"
    r = rest.post(f"/consumers/{group}", headers={"Content-Type": V2},
                  json={"name": "c", "format": "binary", "auto.offset.reset": "earliest", "auto.commit.enable": "false"})
    base_uri = r.json()["base_uri"]
    try:
        rest.post(base_uri + "/subscription", headers={"Content-Type": V2}, json={"topics": [topic]}).raise_for_status()
        deadline = time.monotonic() + 30
        while True:
            r = rest.get(base_uri + "/records", params={"timeout": 1000, "max_bytes": 250}, headers={"Accept": BINARY})
            assert r.status_code == 200, r.text
            if r.json() or time.monotonic() > deadline:
                break
        answered = [rec["offset"] for rec in r.json()]
        assert answered in ([0], [0, 1]), answered
        assert rest.post(base_uri + "/offsets", headers={"Content-Type": V2}).status_code == 204
        assert committed(broker, group, topic) == len(answered)
    finally:
        rest.delete(base_uri, headers={"Content-Type": V2})
