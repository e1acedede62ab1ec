"""Burrow 1.2 (LinkedIn's consumer-lag monitor, Debian's `burrow`) reports a group's lag.

Burrow is a client from before Kafka 4 through and through: its cluster module asks every
partition's newest offset with ListOffsets v0, and its consumer module reads the groups'
commits from __consumer_offsets with the Fetch version of its configured Kafka version (0.10:
v2, so magic-1 message sets) and decodes Kafka's own offset-commit records. The lag it serves
over HTTP is the broker's offset minus the group's commit: it exists only when all of that
works.

The test starts ZooKeeper (Burrow keeps its own locks there) and a Trafka broker, produces
with a stock client, commits a group offset with a stock client, runs Burrow with a
generated configuration, and asks its lag endpoint.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest

from tests.brokerproc import BrokerProcess, free_port

BURROW = shutil.which("Burrow") or "/usr/bin/Burrow"
TOPIC = "burrow-lag"
GROUP = "burrow-watched"
PARTITIONS = 2
PRODUCED = {0: 10, 1: 6}
COMMITTED = {0: 3, 1: 6}  # lag 7 on partition 0, 0 on partition 1

pytestmark = pytest.mark.skipif(not Path(BURROW).exists(), reason="Burrow is not installed (apt-get install burrow)")


def _config(workdir: Path, zk: str, bootstrap: str, http_port: int, kafka_version: str) -> None:
    (workdir / "burrow.toml").write_text(f"""\
[general]
pidfile="{workdir}/burrow.pid"

[logging]
filename="{workdir}/burrow.log"
level="debug"

[zookeeper]
servers=["{zk}"]
timeout=6
root-path="/burrow-{http_port}"

[client-profile.old]
client-id="burrow-test"
kafka-version="{kafka_version}"

[cluster.local]
class-name="kafka"
servers=["{bootstrap}"]
client-profile="old"
topic-refresh=2
offset-refresh=1

[consumer.local]
class-name="kafka"
cluster="local"
servers=["{bootstrap}"]
client-profile="old"
offsets-topic="__consumer_offsets"
start-latest=false

[httpserver.default]
address="127.0.0.1:{http_port}"

[storage.default]
class-name="inmemory"
workers=2
intervals=10
expire-group=604800
min-distance=1

[evaluator.default]
class-name="caching"
expire-cache=1
""")


def _produce_and_commit(bootstrap: str) -> None:
    from confluent_kafka import Consumer, Producer, TopicPartition
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(TOPIC, PARTITIONS, 1)])[TOPIC].result(30)
    producer = Producer({"bootstrap.servers": bootstrap})
    for partition, count in PRODUCED.items():
        for i in range(count):
            producer.produce(TOPIC, value=f"m{i}".encode(), partition=partition)
    assert producer.flush(30) == 0
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": GROUP, "enable.auto.commit": False})
    try:
        committed = consumer.commit(offsets=[TopicPartition(TOPIC, p, o) for p, o in COMMITTED.items()],
                                    asynchronous=False)
        assert all(tp.error is None for tp in committed), committed
    finally:
        consumer.close()


def _get(url: str) -> tuple[int, dict | None]:
    try:
        with urllib.request.urlopen(url, timeout=5) as response:
            return response.status, json.loads(response.read())
    except urllib.error.HTTPError as exc:
        return exc.code, None
    except (urllib.error.URLError, ConnectionError, OSError):
        return 0, None


@pytest.mark.parametrize("kafka_version", ["0.10.0", "2.0.0"])
def test_burrow_reports_group_lag(tmp_path, kafka_version):
    from cli.zookeeper_server import ZooKeeperServer

    reason = ZooKeeperServer.unavailable_reason()
    if reason:
        pytest.skip(reason)
    zk = ZooKeeperServer(data_dir=tmp_path / "zk")
    zk.start()
    burrow = None
    try:
        with BrokerProcess(tmp_path / "broker", "--set", "group.initial.rebalance.delay.ms=0") as broker:
            _produce_and_commit(broker.bootstrap)
            workdir = tmp_path / "burrow"
            workdir.mkdir()
            http_port = free_port()
            _config(workdir, zk.connect_string, broker.bootstrap, http_port, kafka_version)
            burrow = subprocess.Popen([BURROW, "-config-dir", str(workdir)], cwd=workdir,
                                      stdout=open(workdir / "stdout.log", "wb"), stderr=subprocess.STDOUT)
            url = f"http://127.0.0.1:{http_port}/v3/kafka/local/consumer/{GROUP}/lag"
            deadline = time.monotonic() + 60
            status, body = 0, None
            while time.monotonic() < deadline:
                assert burrow.poll() is None, (workdir / "stdout.log").read_text()
                status, body = _get(url)
                if status == 200 and body and body.get("status", {}).get("totallag") == 7:
                    break
                time.sleep(0.5)
            log = (workdir / "burrow.log").read_text() if (workdir / "burrow.log").exists() else ""
            assert status == 200, f"lag endpoint answered {status}; Burrow's log:\n{log[-4000:]}"
            lag = body["status"]
            assert lag["totallag"] == 7, json.dumps(body, indent=1)
            by_partition = {p["partition"]: p for p in lag["partitions"]}
            assert {p: by_partition[p]["current_lag"] for p in PRODUCED} == {0: 7, 1: 0}
            assert {p: by_partition[p]["end"]["offset"] for p in PRODUCED} == COMMITTED
            # The broker offsets behind the lag came from ListOffsets v0.
            topics_status, topic = _get(f"http://127.0.0.1:{http_port}/v3/kafka/local/topic/{TOPIC}")
            assert topics_status == 200 and topic["offsets"] == [PRODUCED[0], PRODUCED[1]], topic
    finally:
        if burrow is not None:
            burrow.terminate()
            try:
                burrow.wait(10)
            except subprocess.TimeoutExpired:
                burrow.kill()
                burrow.wait(10)
        zk.stop()
