"""Three brokers on a real ZooKeeper, each with its registry: a schema registered on one
broker is read from the others, writes on a follower go through the leader of
`_schemas`, and the ids survive the leader's SIGKILL."""

from __future__ import annotations

import json
import time

import httpx
import pytest

from tests.brokerproc import free_port
from tests.cluster.clusterkit import Cluster
from tests.cluster.conftest import zk_connect, zookeeper  # noqa: F401  (the fixtures)

SCHEMA = json.dumps({"type": "record", "name": "R", "fields": [{"name": "a", "type": "int"}]})


def _wait(predicate, timeout: float, what: str):
    deadline = time.monotonic() + timeout
    while True:
        try:
            value = predicate()
            if value:
                return value
        except httpx.HTTPError:
            pass
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.2)


@pytest.fixture
def registry_cluster(tmp_path, zk_connect):
    cluster = Cluster(tmp_path, zk_connect, 3)
    urls = {}
    for node, broker in cluster.brokers.items():
        port = free_port()
        broker.extra += ["--set", f"schema.registry.listeners=127.0.0.1:{port}"]
        urls[node] = f"http://127.0.0.1:{port}"
    with cluster:
        for node, url in urls.items():
            _wait(lambda: httpx.get(url + "/subjects", timeout=2).status_code == 200, 30, f"registry {node}")
        yield cluster, urls


def _leader(cluster) -> int:
    found = cluster.partition("_schemas", 0)
    return found["leader_id"] if found else -1


def test_registered_on_one_read_from_another(registry_cluster):
    cluster, urls = registry_cluster
    leader = _wait(lambda: _leader(cluster) if _leader(cluster) > 0 else None, 30, "a leader of _schemas")
    follower = next(n for n in urls if n != leader)
    other = next(n for n in urls if n not in (leader, follower))
    # a write on a follower goes through the leader; the follower reads it back at once
    first = httpx.post(urls[follower] + "/subjects/s/versions", json={"schema": SCHEMA}, timeout=30)
    assert first.status_code == 200, first.text
    schema_id = first.json()["id"]
    assert httpx.get(urls[follower] + "/subjects/s/versions/latest", timeout=10).json()["id"] == schema_id
    # and every broker serves it
    for node, url in urls.items():
        got = _wait(lambda: httpx.get(url + "/subjects/s/versions/1", timeout=5).json().get("id"), 15,
                    f"subject s on broker {node}")
        assert got == schema_id
    # a write on the leader, read from the third broker
    second = httpx.post(urls[leader] + "/subjects/t/versions", json={"schema": '"string"'}, timeout=30).json()["id"]
    assert second != schema_id
    assert _wait(lambda: httpx.get(urls[other] + f"/schemas/ids/{second}", timeout=5).status_code == 200, 15,
                 "the new id on the third broker")
    # errors answer the same through the forwarding path
    refused = httpx.post(urls[follower] + "/subjects/s/versions", json={"schema": '"int"'}, timeout=30)
    assert (refused.status_code, refused.json()["error_code"]) == (409, 409)
    # the leader dies: another broker leads _schemas, ids go on without reuse
    cluster.brokers[leader].kill()
    survivor = follower
    answers = []

    def write():
        answers.append(httpx.post(urls[survivor] + "/subjects/u/versions", json={"schema": '"long"'}, timeout=10))
        return answers[-1].status_code == 200 and answers[-1].json()["id"]

    try:
        new_id = _wait(write, 60, "a write after the leader died")
    except AssertionError:
        raise AssertionError(f"no write after the leader died; last answers {[a.text for a in answers[-3:]]}")
    assert new_id not in (schema_id, second)
    assert httpx.get(urls[other] + "/subjects", timeout=10).json() == ["s", "t", "u"] or \
        _wait(lambda: httpx.get(urls[other] + "/subjects", timeout=10).json() == ["s", "t", "u"], 15, "subjects")
    # SIGTERM stops every live broker cleanly and promptly: the registry's tail of `_schemas`
    # once spun on a wait that returned at once during shutdown, and the brokers never exited.
    for node in (n for n in urls if n != leader):
        started = time.monotonic()
        assert cluster.brokers[node].stop(timeout=15) == 0, cluster.brokers[node].log_tail()
        assert time.monotonic() - started < 15
