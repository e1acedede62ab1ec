"""Requests the fuzzing (test_rest_fuzz.py) and its review found answered 500 / 50002 with a
Traceback: JSON values that pass a type check but not librdkafka's C types (a partition
beyond int32, an offset beyond int64, Infinity), a dict where a partition number goes.
Each must be a 4xx, and the broker's log must stay free of tracebacks."""

from __future__ import annotations

import json

import pytest

from tests.rest_proxy.conftest import BINARY, V2


def new_instance(rest, group: str) -> str:
    r = rest.post(f"/consumers/{group}", headers={"Content-Type": V2}, json={"format": "binary"})
    assert r.status_code == 200, r.text
    return r.json()["base_uri"].split(str(rest.base_url).rstrip("/"), 1)[1]


def assert_refused(r, status: int = 422) -> None:
    assert r.status_code == status, r.text
    assert isinstance(r.json()["error_code"], int) and r.json()["message"]


def test_a_record_partition_that_is_not_a_number(broker, rest):
    r = rest.post("/topics/any-topic", headers={"Content-Type": BINARY},
                  json={"records": [{"value": None, "partition": {}}]})
    assert r.status_code in (404, 422), r.text  # unknown topic or bad partition: never a 500
    assert "Traceback" not in broker.log_tail(200)


@pytest.mark.parametrize("path, body", [
    ("/assignments", {"partitions": [{"topic": "t", "partition": 2 ** 40}]}),
    ("/positions/beginning", {"partitions": [{"topic": "t", "partition": 2 ** 31}]}),
    ("/positions", {"offsets": [{"topic": "t", "partition": 0, "offset": 2 ** 70}]}),
    ("/offsets", {"offsets": [{"topic": "t", "partition": -1, "offset": 0}]}),
])
def test_partitions_and_offsets_beyond_kafkas_types(broker, rest, path, body):
    base = new_instance(rest, "fuzz-findings")
    assert_refused(rest.post(base + path, headers={"Content-Type": V2}, json=body))
    assert "Traceback" not in broker.log_tail(200)


def test_consumer_settings_of_infinity(broker, rest):
    body = json.dumps({"format": "binary", "fetch.min.bytes": float("inf")})  # Python writes Infinity
    assert_refused(rest.post("/consumers/fuzz-findings", headers={"Content-Type": V2}, content=body))
    assert "Traceback" not in broker.log_tail(200)


@pytest.mark.parametrize("field, value", [("partitions_count", 2 ** 40), ("replication_factor", 2 ** 40),
                                          ("replication_factor", 11499)])
def test_topic_sizes_beyond_kafkas_types(broker, rest, field, value):
    """Beyond int32, or beyond what librdkafka's NewTopic takes (replication_factor up to 10000)."""
    cluster = rest.get("/v3/clusters").json()["data"][0]["cluster_id"]
    body = {"topic_name": "fuzz-too-big", "partitions_count": 1, "replication_factor": 1, field: value}
    r = rest.post(f"/v3/clusters/{cluster}/topics", json=body)
    assert r.status_code in (400, 422), r.text
    assert "Traceback" not in broker.log_tail(200)


@pytest.mark.parametrize("record", [
    {"value": {"type": "STRING", "data": "x"}, "headers": 5},
    {"value": {"type": "STRING", "data": "x"}, "headers": {"name": "h"}},
    {"value": {"type": "STRING", "data": "x"}, "timestamp": "0001-01-01T00:00:00+14:00"},
    {"value": {"type": "STRING", "data": "x"}, "partition_id": [0]},
    {"value": {"type": "STRING", "data": "x"}, "partition_id": {"p": 0}},
])
def test_v3_record_fields_of_the_wrong_shape(broker, rest, record):
    from tests.brokerproc import create_topic

    cluster = rest.get("/v3/clusters").json()["data"][0]["cluster_id"]
    if "fuzz-v3" not in rest.get("/topics").json():
        create_topic(broker.port, "fuzz-v3", 1)
    r = rest.post(f"/v3/clusters/{cluster}/topics/fuzz-v3/records", json=record)
    assert r.status_code < 500, r.text
    assert "Traceback" not in broker.log_tail(200)


@pytest.mark.parametrize("path, media", [("/topics/any-topic", BINARY), ("/consumers/fuzz-findings", V2),
                                         ("/v3/clusters/{cluster}/topics", "application/json"),
                                         ("/v3/clusters/{cluster}/topics/fuzz-deep/records", "application/json")])
def test_a_body_nested_too_deep_is_400(broker, rest, path, media):
    from tests.brokerproc import create_topic

    cluster = rest.get("/v3/clusters").json()["data"][0]["cluster_id"]
    if "fuzz-deep" not in rest.get("/topics").json():
        create_topic(broker.port, "fuzz-deep", 1)
    r = rest.post(path.format(cluster=cluster), headers={"Content-Type": media},
                  content=b"[" * 100_000 + b"]" * 100_000)
    assert_refused(r, 400)
    assert "Traceback" not in broker.log_tail(200)


def test_seek_to_an_edge_of_an_unassigned_partition_is_refused_at_once(broker, rest):
    """Before: the watermarks of an unknown topic were asked first, 10 s, then 500 / 50002."""
    import time

    base = new_instance(rest, "fuzz-findings")
    start = time.monotonic()
    r = rest.post(base + "/positions/beginning", headers={"Content-Type": V2},
                  json={"partitions": [{"topic": "fuzz-no-such-topic", "partition": 857}]})
    assert_refused(r, 409)
    assert r.json()["error_code"] == 40903 and time.monotonic() - start < 5


def test_an_empty_config_name_in_a_batch_alter(broker, rest):
    from tests.brokerproc import create_topic

    cluster = rest.get("/v3/clusters").json()["data"][0]["cluster_id"]
    if "fuzz-configs" not in rest.get("/topics").json():
        create_topic(broker.port, "fuzz-configs", 1)
    r = rest.post(f"/v3/clusters/{cluster}/topics/fuzz-configs/configs:alter",
                  json={"data": [{"name": "", "value": "1", "operation": "SET"}]})
    assert_refused(r, 400)
    assert "Traceback" not in broker.log_tail(200)


def test_a_config_named_twice_in_a_batch_alter(broker, rest):
    from tests.brokerproc import create_topic

    cluster = rest.get("/v3/clusters").json()["data"][0]["cluster_id"]
    if "fuzz-configs" not in rest.get("/topics").json():
        create_topic(broker.port, "fuzz-configs", 1)
    r = rest.post(f"/v3/clusters/{cluster}/topics/fuzz-configs/configs:alter",
                  json={"data": [{"name": "retention.ms", "value": "1000"}, {"name": "retention.ms", "value": "2000"}]})
    assert_refused(r, 400)


@pytest.mark.parametrize("edge", ["beginning", "end"])
def test_seek_to_an_edge_of_an_assigned_partition_that_does_not_exist(broker, rest, edge):
    """Kafka's assign() takes any partition and seekToBeginning/End resolve lazily; before, the
    proxy asked the watermarks first: 10 s, then 500 / 50002."""
    import time

    base = new_instance(rest, "fuzz-findings")
    tps = {"partitions": [{"topic": "no such\u000ftopic", "partition": 1366}]}  # not even a valid name
    assert rest.post(base + "/assignments", headers={"Content-Type": V2}, json=tps).status_code == 204
    start = time.monotonic()
    r = rest.post(base + f"/positions/{edge}", headers={"Content-Type": V2}, json=tps)
    assert r.status_code < 500, r.text
    assert time.monotonic() - start < 8


def test_seek_to_the_edges_still_lands_on_them(broker, rest):
    """The logical offsets above keep the edges' meaning: the end reads only what comes next,
    the beginning everything."""
    import base64

    from tests.brokerproc import create_topic
    from tests.rest_proxy.conftest import read_all

    create_topic(broker.port, "fuzz-edges", 1)

    def produce(values: list[bytes]) -> None:
        rest.post("/topics/fuzz-edges", headers={"Content-Type": BINARY}, json={
            "records": [{"value": base64.b64encode(v).decode()} for v in values]}).raise_for_status()

    produce([b"a", b"b", b"c"])
    base = new_instance(rest, "fuzz-edges")
    tps = {"partitions": [{"topic": "fuzz-edges", "partition": 0}]}
    assert rest.post(base + "/assignments", headers={"Content-Type": V2}, json=tps).status_code == 204
    assert rest.post(base + "/positions/end", headers={"Content-Type": V2}, json=tps).status_code == 204
    produce([b"d"])
    assert [r["offset"] for r in read_all(rest, base, BINARY, 1)] == [3]
    assert rest.post(base + "/positions/beginning", headers={"Content-Type": V2}, json=tps).status_code == 204
    assert [r["offset"] for r in read_all(rest, base, BINARY, 4)] == [0, 1, 2, 3]
