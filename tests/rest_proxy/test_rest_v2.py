"""REST Proxy v2 driven with plain HTTP (httpx) through the flows of Confluent's API
documentation: produce binary and JSON, consumer instances (subscribe, records, offsets,
assignments, positions), metadata, and the error codes of each refusal. Records produced
over HTTP are read back by a native confluent-kafka consumer too, and the other way round."""

from __future__ import annotations

import base64
import json
import time
import uuid

import httpx
import pytest
from confluent_kafka import Consumer, ConsumerGroupTopicPartitions, Producer
from confluent_kafka.admin import AdminClient

from tests.brokerproc import create_topic
from tests.rest_proxy.conftest import BINARY, JSON, JSONSCHEMA, V2, read_all

pytestmark = pytest.mark.timeout(120)


def b64(data: bytes) -> str:
    return base64.b64encode(data).decode()


def new_topic(broker, partitions: int = 1) -> str:
    name = f"t-{uuid.uuid4().hex[:8]}"
    create_topic(broker.port, name, partitions)
    return name


def native_read(broker, topic: str, want: int) -> list:
    consumer = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": f"native-{uuid.uuid4().hex[:6]}",
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


def new_consumer(rest, group: str, fmt: str = "binary", **extra) -> str:
    body = {"name": f"c-{uuid.uuid4().hex[:6]}", "format": fmt, "auto.offset.reset": "earliest", **extra}
    r = rest.post(f"/consumers/{group}", json=body, headers={"Content-Type": V2})
    assert r.status_code == 200, r.text
    assert r.json()["instance_id"] == body["name"]
    assert r.json()["base_uri"].endswith(f"/consumers/{group}/instances/{body['name']}")
    return r.json()["base_uri"]


def subscribe(rest, base_uri: str, *topics: str) -> None:
    r = rest.post(base_uri + "/subscription", json={"topics": list(topics)}, headers={"Content-Type": V2})
    assert r.status_code == 204, r.text


def test_produce_binary_read_by_rest_and_native_consumers(broker, rest):
    topic = new_topic(broker, 2)
    r = rest.post(f"/topics/{topic}", headers={"Content-Type": BINARY}, json={"records": [
        {"key": b64(b"k1"), "value": b64(b"v1")},
        {"value": b64(b"\x00\xffbinary"), "partition": 1},
        {"key": b64(b"k3"), "value": None}]})
    assert r.status_code == 200, r.text
    assert r.headers["content-type"].startswith(V2)
    answer = r.json()
    assert answer["key_schema_id"] is None and answer["value_schema_id"] is None
    assert [o["error_code"] for o in answer["offsets"]] == [None, None, None]
    assert answer["offsets"][1]["partition"] == 1

    base_uri = new_consumer(rest, f"g-{topic}")
    subscribe(rest, base_uri, topic)
    got = read_all(rest, base_uri, BINARY, 3)
    by_value = {rec["value"]: rec for rec in got}
    assert set(by_value) == {b64(b"v1"), b64(b"\x00\xffbinary"), None}
    assert by_value[b64(b"v1")]["key"] == b64(b"k1")
    assert by_value[None]["key"] == b64(b"k3")
    assert {rec["topic"] for rec in got} == {topic}
    for rec, off in zip(sorted(got, key=lambda x: (x["partition"], x["offset"])), sorted(
            (o["partition"], o["offset"]) for o in answer["offsets"])):
        assert (rec["partition"], rec["offset"]) == off

    native = {(m.key(), m.value()) for m in native_read(broker, topic, 3)}
    assert native == {(b"k1", b"v1"), (None, b"\x00\xffbinary"), (b"k3", None)}
    assert rest.delete(base_uri).status_code == 204


def test_produce_json_to_a_partition_then_read_as_json(broker, rest):
    topic = new_topic(broker, 3)
    values = [{"name": "alice", "n": 1}, [1, 2, 3], "text", 4.5, None]
    r = rest.post(f"/topics/{topic}/partitions/2", headers={"Content-Type": JSON},
                  json={"records": [{"key": {"id": i}, "value": v} for i, v in enumerate(values)]})
    assert r.status_code == 200, r.text
    assert {o["partition"] for o in r.json()["offsets"]} == {2}
    assert [o["offset"] for o in r.json()["offsets"]] == [0, 1, 2, 3, 4]

    base_uri = new_consumer(rest, f"g-{topic}", "json")
    subscribe(rest, base_uri, topic)
    got = read_all(rest, base_uri, JSON, len(values))
    assert [rec["value"] for rec in got] == values
    assert [rec["key"] for rec in got] == [{"id": i} for i in range(len(values))]

    native = native_read(broker, topic, len(values))
    assert [None if m.value() is None else json.loads(m.value()) for m in native] == values


def test_native_producer_to_rest_consumer(broker, rest):
    topic = new_topic(broker)
    producer = Producer({"bootstrap.servers": broker.bootstrap})
    for i in range(20):
        producer.produce(topic, key=f"k{i}".encode(), value=f"v{i}".encode(), headers=[("h", b"x")])
    assert producer.flush(10) == 0
    base_uri = new_consumer(rest, f"g-{topic}")
    subscribe(rest, base_uri, topic)
    got = read_all(rest, base_uri, BINARY, 20)
    assert [base64.b64decode(rec["value"]) for rec in got] == [f"v{i}".encode() for i in range(20)]
    assert [rec["offset"] for rec in got] == list(range(20))
    assert got[0]["headers"] == [{"key": "h", "value": b64(b"x")}]


def test_max_bytes_splits_a_fetch_without_losing_records(broker, rest):
    topic = new_topic(broker)
    rest.post(f"/topics/{topic}", headers={"Content-Type": BINARY},
              json={"records": [{"value": b64(bytes(100))} for _ in range(10)]}).raise_for_status()
    base_uri = new_consumer(rest, f"g-{topic}")
    subscribe(rest, base_uri, topic)
    got: list = []
    deadline = time.monotonic() + 30
    while len(got) < 10 and time.monotonic() < deadline:
        r = rest.get(base_uri + "/records", params={"timeout": 1000, "max_bytes": 250},
                     headers={"Accept": BINARY})
        assert r.status_code == 200
        assert len(r.json()) <= 2
        got += r.json()
    assert [rec["offset"] for rec in got] == list(range(10))


def test_offsets_commit_is_visible_to_admin_client(broker, rest):
    topic = new_topic(broker)
    group = f"g-{topic}"
    rest.post(f"/topics/{topic}", headers={"Content-Type": BINARY},
              json={"records": [{"value": b64(b"%d" % i)} for i in range(5)]}).raise_for_status()
    base_uri = new_consumer(rest, group, **{"auto.commit.enable": "false"})
    subscribe(rest, base_uri, topic)
    assert len(read_all(rest, base_uri, BINARY, 5)) == 5

    admin = AdminClient({"bootstrap.servers": broker.bootstrap})

    def committed() -> dict:
        fut = admin.list_consumer_group_offsets([ConsumerGroupTopicPartitions(group)])[group]
        return {(tp.topic, tp.partition): tp.offset for tp in fut.result(10).topic_partitions}

    assert committed().get((topic, 0), -1001) < 0  # auto commit off: nothing yet
    r = rest.post(base_uri + "/offsets", headers={"Content-Type": V2})  # empty body: commit what was consumed
    assert r.status_code == 204, r.text
    assert committed()[(topic, 0)] == 5
    r = rest.request("GET", base_uri + "/offsets", headers={"Content-Type": V2},
                     content=json.dumps({"partitions": [{"topic": topic, "partition": 0}]}))
    assert r.status_code == 200 and r.json()["offsets"] == [{"topic": topic, "partition": 0, "offset": 5,
                                                             "metadata": ""}]
    r = rest.post(base_uri + "/offsets", headers={"Content-Type": V2},
                  json={"offsets": [{"topic": topic, "partition": 0, "offset": 2}]})
    assert r.status_code == 204, r.text
    assert committed()[(topic, 0)] == 2


def test_assignments_and_positions(broker, rest):
    topic = new_topic(broker, 2)
    rest.post(f"/topics/{topic}/partitions/1", headers={"Content-Type": BINARY},
              json={"records": [{"value": b64(b"%d" % i)} for i in range(6)]}).raise_for_status()
    base_uri = new_consumer(rest, f"g-{topic}")
    r = rest.post(base_uri + "/assignments", headers={"Content-Type": V2},
                  json={"partitions": [{"topic": topic, "partition": 1}]})
    assert r.status_code == 204, r.text
    assert rest.get(base_uri + "/assignments").json() == {"partitions": [{"topic": topic, "partition": 1}]}
    r = rest.post(base_uri + "/positions", headers={"Content-Type": V2},
                  json={"offsets": [{"topic": topic, "partition": 1, "offset": 4}]})
    assert r.status_code == 204, r.text
    got = read_all(rest, base_uri, BINARY, 2)
    assert [rec["offset"] for rec in got] == [4, 5]
    r = rest.post(base_uri + "/positions/beginning", headers={"Content-Type": V2},
                  json={"partitions": [{"topic": topic, "partition": 1}]})
    assert r.status_code == 204, r.text
    assert [rec["offset"] for rec in read_all(rest, base_uri, BINARY, 6)] == list(range(6))
    r = rest.post(base_uri + "/positions/end", headers={"Content-Type": V2},
                  json={"partitions": [{"topic": topic, "partition": 1}]})
    assert r.status_code == 204, r.text
    r = rest.get(base_uri + "/records", params={"timeout": 500}, headers={"Accept": BINARY})
    assert r.status_code == 200 and r.json() == []
    # a partition it does not hold cannot be positioned: Confluent's 40903 illegal state
    r = rest.post(base_uri + "/positions", headers={"Content-Type": V2},
                  json={"offsets": [{"topic": topic, "partition": 0, "offset": 0}]})
    assert r.status_code == 409 and r.json()["error_code"] == 40903


def test_subscription_get_and_delete(broker, rest):
    topic = new_topic(broker)
    base_uri = new_consumer(rest, f"g-{topic}")
    subscribe(rest, base_uri, topic)
    assert rest.get(base_uri + "/subscription").json() == {"topics": [topic]}
    r = rest.post(base_uri + "/assignments", headers={"Content-Type": V2},
                  json={"partitions": [{"topic": topic, "partition": 0}]})
    assert r.status_code == 409 and r.json()["error_code"] == 40903  # subscribe and assign exclude each other
    assert rest.delete(base_uri + "/subscription").status_code == 204
    assert rest.get(base_uri + "/subscription").json() == {"topics": []}


def test_metadata(broker, rest):
    topic = new_topic(broker, 3)
    assert topic in rest.get("/topics").json()
    described = rest.get(f"/topics/{topic}").json()
    assert described["name"] == topic
    assert [p["partition"] for p in described["partitions"]] == [0, 1, 2]
    assert described["partitions"][0]["replicas"] == [{"broker": 1, "leader": True, "in_sync": True}]
    assert "cleanup.policy" in described["configs"]
    assert len(rest.get(f"/topics/{topic}/partitions").json()) == 3
    assert rest.get(f"/topics/{topic}/partitions/2").json()["leader"] == 1
    rest.post(f"/topics/{topic}/partitions/2", headers={"Content-Type": BINARY},
              json={"records": [{"value": b64(b"x")}] * 3}).raise_for_status()
    assert rest.get(f"/topics/{topic}/partitions/2/offsets").json() == {"beginning_offset": 0, "end_offset": 3}
    assert rest.get("/brokers").json() == {"brokers": [1]}


# ---- refusals, with Confluent's codes ----------------------------------------------------
def test_unknown_topic_and_partition(broker, rest):
    topic = new_topic(broker, 2)
    for r in (rest.get("/topics/no-such-topic"),
              rest.post("/topics/no-such-topic", headers={"Content-Type": BINARY}, json={"records": [{"value": ""}]})):
        assert r.status_code == 404 and r.json()["error_code"] == 40401, r.text
    for r in (rest.get(f"/topics/{topic}/partitions/7"), rest.get(f"/topics/{topic}/partitions/7/offsets"),
              rest.post(f"/topics/{topic}/partitions/7", headers={"Content-Type": BINARY},
                        json={"records": [{"value": ""}]}),
              rest.post(f"/topics/{topic}", headers={"Content-Type": BINARY},
                        json={"records": [{"value": "", "partition": 5}]})):
        assert r.status_code == 404 and r.json()["error_code"] == 40402, r.text
    assert "no-such-topic" not in rest.get("/topics").json()  # asking did not create it


def test_consumer_instance_errors(broker, rest):
    r = rest.get("/consumers/g/instances/nobody/records", headers={"Accept": BINARY})
    assert r.status_code == 404 and r.json()["error_code"] == 40403
    assert rest.delete("/consumers/g/instances/nobody").json()["error_code"] == 40403
    base_uri = new_consumer(rest, "g-dup", name="twice")
    r = rest.post("/consumers/g-dup", json={"name": "twice"}, headers={"Content-Type": V2})
    assert r.status_code == 409 and r.json()["error_code"] == 40902
    r = rest.post("/consumers/g-bad", json={"format": "xml"}, headers={"Content-Type": V2})
    assert r.status_code == 422 and r.json()["error_code"] == 42204
    r = rest.post("/consumers/g-bad", json={"auto.offset.reset": "sometimes"}, headers={"Content-Type": V2})
    assert r.status_code == 422 and r.json()["error_code"] == 42204
    r = rest.post("/consumers/g-bad", json={"consumer.request.timeout.ms": "soon"}, headers={"Content-Type": V2})
    assert r.status_code == 422 and r.json()["error_code"] == 42204
    r = rest.post("/consumers/g-bad", json={"format": "PROTOBUF"}, headers={"Content-Type": V2})
    assert r.status_code == 200, r.text  # served since the registry has PROTOBUF (test_rest_protobuf.py)
    assert rest.delete(r.json()["base_uri"]).status_code == 204
    # a binary consumer asked for JSON records: Confluent's 406 40601
    r = rest.get(base_uri + "/records", headers={"Accept": JSON})
    assert r.status_code == 406 and r.json()["error_code"] == 40601
    r = rest.get(base_uri + "/records", headers={"Accept": "text/html"})
    assert r.status_code == 406 and r.json()["error_code"] == 406
    assert rest.delete(base_uri).status_code == 204
    r = rest.get(base_uri + "/records", headers={"Accept": BINARY})
    assert r.status_code == 404 and r.json()["error_code"] == 40403


def test_bad_bodies_and_content_types(broker, rest):
    topic = new_topic(broker)
    r = rest.post(f"/topics/{topic}", headers={"Content-Type": BINARY}, content=b"{not json")
    assert r.status_code == 400 and r.json()["error_code"] == 400
    r = rest.post(f"/topics/{topic}", headers={"Content-Type": "text/plain"}, content=b"{}")
    assert r.status_code == 415 and r.json()["error_code"] == 415
    r = rest.post(f"/topics/{topic}", headers={"Content-Type": BINARY}, json={"records": "no"})
    assert r.status_code == 422
    r = rest.post(f"/topics/{topic}", headers={"Content-Type": BINARY}, json={"records": [{"value": "!!!"}]})
    assert r.status_code == 422, r.text
    r = rest.post(f"/topics/{topic}", headers={"Content-Type": "application/vnd.kafka.protobuf.v2+json"},
                  json={"records": [{"value": {}}]})
    assert r.status_code == 422 and r.json()["error_code"] == 42202  # protobuf values need a schema
    r = rest.post(f"/topics/{topic}", headers={"Content-Type": JSONSCHEMA}, json={"records": [{"value": {}}]})
    assert r.status_code == 422 and r.json()["error_code"] == 42202
    r = rest.post(f"/topics/{topic}", headers={"Content-Type": JSONSCHEMA},
                  json={"value_schema": '{"type": "object"}', "records": [{"key": 1, "value": {}}]})
    assert r.status_code == 422 and r.json()["error_code"] == 42201
    r = rest.post("/consumers/g", headers={"Content-Type": "text/plain"}, content=b"{}")
    assert r.status_code == 415
    # the broker took all of it and still serves
    assert rest.get("/topics").status_code == 200
    log = broker.log_tail(400)
    assert "Traceback" not in log, log


def test_a_topic_grown_meanwhile_is_produced_to_at_once(broker, rest):
    """Produce requests reuse a recent metadata answer only when it holds the partition:
    one added a moment ago is looked up, not refused from the cache."""
    from confluent_kafka.admin import NewPartitions

    topic = new_topic(broker, 1)
    ok = rest.post(f"/topics/{topic}/partitions/0", headers={"Content-Type": BINARY}, json={"records": [{"value": ""}]})
    assert ok.status_code == 200
    r = rest.post(f"/topics/{topic}/partitions/1", headers={"Content-Type": BINARY}, json={"records": [{"value": ""}]})
    assert r.json()["error_code"] == 40402
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    admin.create_partitions([NewPartitions(topic, 2)])[topic].result(10)
    r = rest.post(f"/topics/{topic}/partitions/1", headers={"Content-Type": BINARY}, json={"records": [{"value": ""}]})
    assert r.status_code == 200 and r.json()["offsets"][0]["partition"] == 1, r.text


def test_hostile_requests_get_answers(broker, rest):
    topic = new_topic(broker)
    r = rest.get("/no/such/route")
    assert r.status_code == 404 and r.json()["error_code"] == 404
    r = rest.put(f"/topics/{topic}")
    assert r.status_code == 405
    base_uri = new_consumer(rest, f"g-{topic}")
    for params in ({"timeout": "-1"}, {"timeout": "soon"}, {"max_bytes": "0"}):
        r = rest.get(base_uri + "/records", params=params, headers={"Accept": BINARY})
        assert r.status_code == 400 and r.json()["error_code"] == 400, (params, r.text)
    big = b'{"records": [{"value": "' + b"A" * (65 * 1024 * 1024) + b'"}]}'
    r = rest.post(f"/topics/{topic}", headers={"Content-Type": BINARY}, content=big)
    assert r.status_code == 413
    r = rest.post(f"/consumers/g-{topic}", headers={"Content-Type": V2}, content=b"[1, 2")
    assert r.status_code == 400
    r = rest.post(base_uri + "/positions", headers={"Content-Type": V2}, json={"offsets": [{"topic": topic}]})
    assert r.status_code == 422
    assert rest.get("/topics").status_code == 200


def test_a_long_poll_holds_no_other_instance(broker, rest):
    import threading

    import httpx

    idle_topic, busy_topic = new_topic(broker), new_topic(broker)
    waiting = new_consumer(rest, f"g-{idle_topic}")
    subscribe(rest, waiting, idle_topic)
    other = new_consumer(rest, f"g-{busy_topic}")
    rest.post(f"/topics/{busy_topic}", headers={"Content-Type": BINARY},
              json={"records": [{"value": b64(b"x")}]}).raise_for_status()
    subscribe(rest, other, busy_topic)
    assert read_all(rest, other, BINARY, 1)  # joined and served once

    answers: list = []

    def long_poll() -> None:
        with httpx.Client(timeout=60) as client:
            answers.append(client.get(waiting + "/records", params={"timeout": 8000}, headers={"Accept": BINARY}))

    poller = threading.Thread(target=long_poll)
    poller.start()
    time.sleep(0.5)
    for _ in range(5):  # meanwhile the other instance, the producer and metadata answer
        assert rest.get(other + "/records", params={"timeout": 0}, headers={"Accept": BINARY}).status_code == 200
        assert rest.post(f"/topics/{busy_topic}", headers={"Content-Type": BINARY},
                         json={"records": [{"value": b64(b"y")}]}).status_code == 200
        assert rest.get(f"/topics/{busy_topic}").status_code == 200
    assert poller.is_alive() and not answers  # all of it answered while the long poll still waited
    poller.join()
    assert answers[0].status_code == 200 and answers[0].json() == []


def test_a_refusal_before_the_body_keeps_the_connection_usable(broker, rest):
    """A request refused on its headers (415) still has its body read, so the
    client's keep-alive connection carries the next request (it was closed under it)."""
    import socket

    for size in (10, 2000):
        body = json.dumps({"records": [{"value": "eA=="}] * size}).encode()
        with socket.create_connection(("127.0.0.1", broker.rest_port), timeout=10) as sock:
            for _ in range(20):
                for ctype in ("text/plain", "application/vnd.kafka.xml.v2+json"):
                    head = f"POST /topics/x HTTP/1.1\r\nHost: t\r\nContent-Type: {ctype}\r\n" \
                           f"Content-Length: {len(body)}\r\n\r\n".encode()
                    sock.sendall(head)
                    sock.sendall(body)  # apart: the answer may be ready before the body came
                    answer = _read_response(sock)
                    assert answer.startswith(b"HTTP/1.1 415"), answer[:100]
            sock.sendall(b"GET /brokers HTTP/1.1\r\nHost: t\r\n\r\n")
            assert _read_response(sock).startswith(b"HTTP/1.1 200")


def _read_response(sock) -> bytes:
    data = b""
    while b"\r\n\r\n" not in data:
        chunk = sock.recv(65536)
        assert chunk, f"connection closed after {data[:200]!r}"
        data += chunk
    head, _, rest = data.partition(b"\r\n\r\n")
    length = int(next(line.split(b":")[1] for line in head.split(b"\r\n") if line.lower().startswith(b"content-length")))
    while len(rest) < length:
        chunk = sock.recv(65536)
        assert chunk, "connection closed mid-body"
        rest += chunk
    return head


def test_deleting_an_instance_during_a_long_poll_closes_its_consumer(broker, rest):
    """A records poll of 25 s is under way when the instance is deleted: the consumer is
    closed (it leaves its group) without waiting for the poll to end; the close used to
    queue behind the poll's thread and give up after 30 s, leaving the member in its group."""
    import threading


    topic = f"longpoll-{uuid.uuid4().hex[:6]}"
    create_topic(broker.port, topic, 1)
    group = f"g-{topic}"
    r = rest.post(f"/consumers/{group}", headers={"Content-Type": V2},
                  json={"name": "c", "format": "binary", "auto.offset.reset": "earliest"})
    base_uri = r.json()["base_uri"]
    rest.post(base_uri + "/subscription", headers={"Content-Type": V2}, json={"topics": [topic]})
    read_all(rest, base_uri, BINARY, 0)  # nothing to read; joins nothing yet
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})

    def members() -> int:
        return len(admin.describe_consumer_groups([group])[group].result(timeout=10).members)

    answers: list = []
    poll = threading.Thread(target=lambda: answers.append(httpx.get(
        base_uri + "/records", params={"timeout": 25000}, headers={"Accept": BINARY}, timeout=60)))
    poll.start()
    deadline = time.monotonic() + 20
    while members() == 0 and time.monotonic() < deadline:  # the long poll joins the group
        time.sleep(0.2)
    assert members() == 1
    started = time.monotonic()
    assert rest.delete(base_uri, headers={"Content-Type": V2}).status_code == 204
    assert members() == 0, "the deleted instance's consumer is still in its group"
    # the close did not wait for the 25 s poll (a bound far from both: ~0.5 s vs ~25 s)
    assert time.monotonic() - started < 15
    poll.join(timeout=40)
    assert answers and answers[0].status_code in (200, 404)
