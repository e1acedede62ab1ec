"""Ids, versions, deletions, configs and modes survive a restart and a SIGKILL (they are
replayed from `_schemas`); `schema.registry.listeners=` opens no port; a taken port stops
the broker."""

from __future__ import annotations

import json
import socket
import subprocess
import sys

import httpx

from tests.brokerproc import REPO, BrokerProcess, free_port
from tests.schema_registry.conftest import RegistryBroker


def _schema(n: int) -> str:
    return json.dumps({"type": "record", "name": "R", "fields": [
        {"name": f"f{i}", "type": "int", "default": 0} for i in range(n)]})


def _state(url: str) -> dict:
    with httpx.Client(base_url=url, timeout=10) as http:
        return {
            "subjects": http.get("/subjects").json(),
            "deleted": http.get("/subjects", params={"deleted": "true"}).json(),
            "a": http.get("/subjects/a/versions/latest").json(),
            "a_versions": http.get("/subjects/a/versions", params={"deleted": "true"}).json(),
            "b": [http.get(f"/subjects/b/versions/{v}").json() for v in http.get("/subjects/b/versions").json()],
            "config": http.get("/config").json(),
            "config_a": http.get("/config/a").json(),
            "mode_c": http.get("/mode/c").json(),
            "ids": [http.get(f"/schemas/ids/{i}").status_code for i in range(1, 8)],
        }


def _populate(url: str) -> None:
    with httpx.Client(base_url=url, timeout=10) as http:
        for n in range(1, 4):
            assert http.post("/subjects/a/versions", json={"schema": _schema(n)}).status_code == 200
        assert http.post("/subjects/b/versions", json={"schema": _schema(2)}).json()["id"] == 2
        assert http.put("/config/b", json={"compatibility": "NONE"}).status_code == 200
        assert http.post("/subjects/b/versions", json={"schema": '"string"'}).json()["id"] == 4
        assert http.delete("/subjects/a/versions/1").status_code == 200
        assert http.post("/subjects/gone/versions", json={"schema": '"long"'}).status_code == 200
        assert http.delete("/subjects/gone").status_code == 200
        assert http.put("/config", json={"compatibility": "FULL_TRANSITIVE"}).status_code == 200
        assert http.put("/config/a", json={"compatibility": "NONE"}).status_code == 200
        assert http.post("/subjects/c/versions", json={"schema": '"int"'}).status_code == 200
        assert http.put("/mode/c", json={"mode": "READONLY"}).status_code == 200


def test_state_survives_restart_and_sigkill(tmp_path):
    broker = RegistryBroker(tmp_path / "data").start()
    try:
        _populate(broker.url)
        before = _state(broker.url)
        assert before["a_versions"] == [1, 2, 3] and before["deleted"] == ["a", "b", "c", "gone"]
        assert before["ids"] == [200] * 6 + [404]
        broker.restart()
        assert _state(broker.url) == before
        broker.kill()
        broker.start()
        assert _state(broker.url) == before
        # the next id continues after the replayed ones, not from 1
        with httpx.Client(base_url=broker.url, timeout=10) as http:
            assert http.post("/subjects/d/versions", json={"schema": '"boolean"'}).json() == {"id": 7}
            assert http.post("/subjects/c/versions", json={"schema": '"long"'}).json()["error_code"] == 42205
    finally:
        broker.kill()


def test_records_are_confluent_format(tmp_path):
    """The _schemas topic, read with a plain Kafka consumer, holds Confluent's keys and values."""
    import confluent_kafka as ck

    with RegistryBroker(tmp_path / "data") as broker:
        with httpx.Client(base_url=broker.url, timeout=10) as http:
            http.post("/subjects/k/versions", json={"schema": '"string"'})
            http.put("/config/k", json={"compatibility": "NONE"})
            http.delete("/subjects/k/versions/1")
            http.delete("/subjects/k/versions/1", params={"permanent": "true"})
        consumer = ck.Consumer({"bootstrap.servers": broker.bootstrap, "group.id": "peek",
                                "auto.offset.reset": "earliest"})
        consumer.subscribe(["_schemas"])
        got = []
        try:
            while len(got) < 4:
                msg = consumer.poll(10)
                assert msg is not None
                got.append((json.loads(msg.key()), json.loads(msg.value()) if msg.value() is not None else None))
        finally:
            consumer.close()
    assert got[0] == ({"keytype": "SCHEMA", "subject": "k", "version": 1, "magic": 1},
                      {"subject": "k", "version": 1, "id": 1, "schema": '"string"', "deleted": False})
    assert got[1] == ({"keytype": "CONFIG", "subject": "k", "magic": 0}, {"compatibilityLevel": "NONE"})
    assert got[2][1]["deleted"] is True
    assert got[3] == ({"keytype": "SCHEMA", "subject": "k", "version": 1, "magic": 1}, None)


def test_empty_setting_opens_no_port(tmp_path):
    port = free_port()
    with BrokerProcess(tmp_path / "data", "--set", "schema.registry.listeners=", env={}) as broker:
        try:
            httpx.get(f"http://127.0.0.1:{port}/subjects", timeout=2)
            reached = True
        except httpx.HTTPError:
            reached = False
        assert not reached
        assert "schema registry" not in broker.log_tail(200)
    # the harness default (TRAFKA_SCHEMA_REGISTRY_LISTENERS="") keeps 8081 closed too
    with BrokerProcess(tmp_path / "data2") as broker:
        assert "schema registry on" not in broker.log_tail(200)


def test_taken_port_stops_the_broker(tmp_path):
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen(1)
        port = taken.getsockname()[1]
        done = subprocess.run([sys.executable, "-m", "server", "serve", "--listen", f"127.0.0.1:{free_port()}",
                               "--data-dir", str(tmp_path / "data"), "--set",
                               f"schema.registry.listeners=127.0.0.1:{port}",
                               # the HTTP listener on: the registry's bind then fails inside its nursery
                               "--set", f"http.listeners=127.0.0.1:{free_port()}"],
                              capture_output=True, text=True, timeout=30, cwd=REPO, env={"PYTHONPATH": str(REPO),
                                                                                         "PATH": "/usr/bin:/bin"})
    assert done.returncode == 1, done.stderr
    assert f"cannot listen on 127.0.0.1:{port}" in done.stderr and "schema.registry.listeners" in done.stderr
    assert "Traceback" not in done.stderr, done.stderr  # one line, as for a taken Kafka port


def test_brokers_on_one_host_get_their_own_registry_ports():
    """`trafka dev cluster` and the Docker entrypoint give broker i the port base + 10 i, so
    one broker's registry never takes the next one's HTTP (metrics) port."""
    from cli.launcher import offset_listener

    assert [offset_listener("127.0.0.1:8081", i) for i in range(3)] == \
        ["127.0.0.1:8081", "127.0.0.1:8091", "127.0.0.1:8101"]
    assert offset_listener("http://0.0.0.0:9000", 2) == "0.0.0.0:9020"
    http = [offset_listener("127.0.0.1:8080", i) for i in range(4)]
    registry = [offset_listener("127.0.0.1:8081", i) for i in range(4)]
    assert not set(http) & set(registry)
    assert offset_listener("", 1) == ""
