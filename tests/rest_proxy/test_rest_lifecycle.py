"""The REST Proxy's life in the broker: a taken port stops the start with the setting's
name, a missing confluent-kafka leaves the proxy off (the broker still serves), idle
consumer instances expire, and shutdown closes the rest (their consumers leave the group)."""

from __future__ import annotations

import socket
import subprocess
import sys
import time
import uuid

import httpx
import pytest
from confluent_kafka.admin import AdminClient

from tests.brokerproc import REPO, BrokerProcess, create_topic, free_port
from tests.rest_proxy.conftest import BINARY, V2, RestBroker

pytestmark = pytest.mark.timeout(120)


def test_taken_port_stops_the_broker_with_the_settings_name(tmp_path):
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen(1)
        port = taken.getsockname()[1]
        proc = subprocess.run(
            [sys.executable, "-m", "server", "serve", "--listen", f"127.0.0.1:{free_port()}", "--data-dir",
             str(tmp_path / "d"), "--set", "http.listeners=", "--set", f"rest.proxy.listeners=127.0.0.1:{port}"],
            cwd=REPO, capture_output=True, text=True, timeout=60)
    assert proc.returncode == 1
    assert "rest.proxy.listeners" in proc.stderr and f"127.0.0.1:{port}" in proc.stderr


def test_without_confluent_kafka_the_proxy_stays_off(tmp_path):
    shadow = tmp_path / "shadow" / "confluent_kafka"
    shadow.mkdir(parents=True)
    (shadow / "__init__.py").write_text("raise ImportError('confluent_kafka hidden by the test')\n")
    proc = BrokerProcess(tmp_path / "data", rest_proxy=True, env={"PYTHONPATH": f"{shadow.parent}:{REPO}"})
    with proc:
        create_topic(proc.port, "still-serving", 1)  # the broker itself is up
        with pytest.raises(httpx.ConnectError):
            httpx.get(proc.rest_url + "/topics", timeout=5)
        assert "rest proxy: off: confluent_kafka is not installed" in proc.log_tail(100)


def _group_members(broker, group: str) -> int:
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    return len(admin.describe_consumer_groups([group])[group].result(10).members)


def test_idle_instances_expire(tmp_path):
    with RestBroker(tmp_path / "data", "--set", "consumer.instance.timeout.ms=1500") as broker:
        topic = f"e-{uuid.uuid4().hex[:6]}"
        create_topic(broker.port, topic, 1)
        rest = httpx.Client(base_url=broker.rest_url, timeout=30)
        keep = rest.post("/consumers/ge", headers={"Content-Type": V2}, json={"name": "busy"}).json()["base_uri"]
        idle = rest.post("/consumers/ge", headers={"Content-Type": V2}, json={"name": "idle"}).json()["base_uri"]
        for base_uri in (keep, idle):
            assert rest.post(base_uri + "/subscription", headers={"Content-Type": V2},
                             json={"topics": [topic]}).status_code == 204
        deadline = time.monotonic() + 4
        while time.monotonic() < deadline:  # "busy" is used all along, "idle" never
            assert rest.get(keep + "/records", params={"timeout": 200}, headers={"Accept": BINARY}).status_code == 200
        r = rest.get(idle + "/records", headers={"Accept": BINARY})
        assert r.status_code == 404 and r.json()["error_code"] == 40403
        assert "consumer instance ge/idle expired" in broker.log_tail(200)
        assert rest.get(keep + "/subscription").status_code == 200
        deadline = time.monotonic() + 15
        while _group_members(broker, "ge") != 1 and time.monotonic() < deadline:
            time.sleep(0.2)
        assert _group_members(broker, "ge") == 1  # the expired one left the group


def test_shutdown_closes_instances(tmp_path):
    broker = RestBroker(tmp_path / "data").start()
    try:
        topic = f"s-{uuid.uuid4().hex[:6]}"
        create_topic(broker.port, topic, 1)
        rest = httpx.Client(base_url=broker.rest_url, timeout=30)
        base_uri = rest.post("/consumers/gs", headers={"Content-Type": V2}, json={"name": "c"}).json()["base_uri"]
        rest.post(base_uri + "/subscription", headers={"Content-Type": V2}, json={"topics": [topic]})
        deadline = time.monotonic() + 15
        while _group_members(broker, "gs") != 1 and time.monotonic() < deadline:
            rest.get(base_uri + "/records", params={"timeout": 200}, headers={"Accept": BINARY})
        assert _group_members(broker, "gs") == 1
    finally:
        assert broker.stop() == 0
    log = broker.log_tail(200)
    assert "rest proxy: closing 1 consumer instances" in log
    assert "member c-" in log and "left the group" in log.split("closing 1 consumer instances")[1]


def test_produce_creates_an_unknown_topic_when_the_broker_auto_creates(tmp_path):
    with RestBroker(tmp_path / "data", "--set", "num.partitions=3") as broker:
        rest = httpx.Client(base_url=broker.rest_url, timeout=30)
        r = rest.post("/topics/made-by-produce", headers={"Content-Type": BINARY},
                      json={"records": [{"value": "aGk="}]})
        assert r.status_code == 200 and r.json()["offsets"][0]["error_code"] is None, r.text
        assert len(rest.get("/topics/made-by-produce/partitions").json()) == 3  # num.partitions
        # reading never creates one
        assert rest.get("/topics/only-asked-for").json()["error_code"] == 40401
        assert "only-asked-for" not in rest.get("/topics").json()


def test_a_tls_first_listener_the_proxy_uses_the_plaintext_one(tmp_path):
    from tests.security.certs import CertificateAuthority

    ca = CertificateAuthority(tmp_path / "certs")
    keystore = ca.pem_keystore(ca.issue("broker", server=True, CN="localhost"), tmp_path / "certs" / "ks.pem")
    port, ssl_port = free_port(), free_port()
    with RestBroker(tmp_path / "data", "--set", f"listeners=SSL://127.0.0.1:{ssl_port},PLAINTEXT://127.0.0.1:{port}",
                    "--set", "ssl.keystore.type=PEM", "--set", f"ssl.keystore.location={keystore}",
                    port=port) as broker:
        rest = httpx.Client(base_url=broker.rest_url, timeout=30)
        r = rest.post("/topics/over-plaintext", headers={"Content-Type": BINARY}, json={"records": [{"value": "aGk="}]})
        assert r.status_code == 200 and r.json()["offsets"][0]["offset"] == 0, r.text


def test_consumer_instances_are_bounded(tmp_path):
    with RestBroker(tmp_path / "data", "--set", "trafka.rest.proxy.max.consumer.instances=2") as broker:
        rest = httpx.Client(base_url=broker.rest_url, timeout=30)
        made = [rest.post("/consumers/gb", headers={"Content-Type": V2}, json={"name": f"c{i}"}) for i in range(2)]
        assert [r.status_code for r in made] == [200, 200]
        r = rest.post("/consumers/gb", headers={"Content-Type": V2}, json={"name": "c2"})
        assert r.status_code == 429 and r.json()["error_code"] == 429
        assert "trafka.rest.proxy.max.consumer.instances" in r.json()["message"]
        assert rest.delete(made[0].json()["base_uri"]).status_code == 204
        assert rest.post("/consumers/gb", headers={"Content-Type": V2}, json={"name": "c2"}).status_code == 200


def test_a_malformed_listener_is_a_configuration_error(tmp_path):
    proc = subprocess.run(
        [sys.executable, "-m", "server", "serve", "--listen", f"127.0.0.1:{free_port()}", "--data-dir",
         str(tmp_path / "d"), "--set", "http.listeners=", "--set", "rest.proxy.listeners=no-port-here"],
        cwd=REPO, capture_output=True, text=True, timeout=60)
    assert proc.returncode == 2
    assert "rest.proxy.listeners" in proc.stderr and "HOST:PORT" in proc.stderr


def test_schema_formats_without_the_registry_say_so(tmp_path):
    with BrokerProcess(tmp_path / "data", rest_proxy=True) as broker:  # schema.registry.listeners empty
        create_topic(broker.port, "needs-schemas", 1)
        rest = httpx.Client(base_url=broker.rest_url, timeout=30)
        deadline = time.monotonic() + 30
        while True:
            try:
                r = rest.post("/topics/needs-schemas", headers={"Content-Type": "application/vnd.kafka.avro.v2+json"},
                              json={"value_schema": '"string"', "records": [{"value": "x"}]})
                break
            except httpx.ConnectError:
                assert time.monotonic() < deadline
                time.sleep(0.1)
        assert r.status_code == 500 and r.json()["error_code"] == 50001
        assert "schema.registry.listeners" in r.json()["message"]
        r = rest.post("/topics/needs-schemas", headers={"Content-Type": BINARY}, json={"records": [{"value": "eA=="}]})
        assert r.status_code == 200  # the rest of the proxy serves
