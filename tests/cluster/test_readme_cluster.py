"""The README's by-hand cluster, typed as written: `trafka dev zookeeper` and three `trafka
serve` that differ in --node-id, --listen and --data-dir only. The HTTP sides keep their
default ports (8080-8082): the first broker may serve them, the others find them taken and
must start all the same. Only the ZooKeeper port and the Kafka ports are swapped for free
ones, so the test does not depend on 2181 and 9092-9094 being free on this machine."""

from __future__ import annotations

import os
import re
import shlex
import signal
import subprocess
import sys
import time

import confluent_kafka as ck
import pytest
from confluent_kafka.admin import AdminClient, NewTopic

from cli.zookeeper_server import ZooKeeperServer
from tests.brokerproc import REPO, free_port, raw_request
from tests.cluster.clusterkit import Cluster
from wire.registry import ApiKey

pytestmark = [pytest.mark.timeout(240),
              pytest.mark.skipif(not ZooKeeperServer.available(), reason="no ZooKeeper (java + Debian zookeeper)")]


def readme_recipe() -> list[list[str]]:
    """The commands of the README's by-hand code block, continuation lines joined."""
    text = (REPO / "README.md").read_text()
    start = text.index("By hand, each broker is a `trafka serve`")
    block = re.search(r"```sh\n(.*?)```", text[start:], re.S).group(1)
    return [shlex.split(line) for line in block.replace("\\\n", " ").splitlines() if line.strip()]


def wait_for_line(path, pattern: str, proc: subprocess.Popen, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        text = path.read_text(errors="replace") if path.exists() else ""
        if re.search(pattern, text):
            return
        assert proc.poll() is None, f"{proc.args} exited with {proc.returncode}:\n{text[-3000:]}"
        time.sleep(0.2)
    raise AssertionError(f"no {pattern!r} in {path} within {timeout} s:\n{text[-3000:]}")


def test_the_readme_by_hand_cluster_typed_as_written(tmp_path):
    commands = readme_recipe()
    assert [c[:3] for c in commands] == [["trafka", "dev", "zookeeper"]] + [["trafka", "serve", "--node-id"]] * 3
    zk_port = free_port()
    kafka_ports = {f"127.0.0.1:{9092 + i}": f"127.0.0.1:{free_port()}" for i in range(3)}
    substitutions = {"127.0.0.1:2181": f"127.0.0.1:{zk_port}", **kafka_ports}
    env = {k: v for k, v in os.environ.items() if not k.startswith("TRAFKA_")}  # a user's plain shell
    env["PYTHONPATH"] = str(REPO)
    procs: list[subprocess.Popen] = []
    logs = []
    try:
        for index, command in enumerate(commands):
            args = []
            for arg in command[1:]:
                for old, new in substitutions.items():
                    arg = arg.replace(old, new)
                args.append(arg)
            if args[:2] == ["dev", "zookeeper"]:
                args += ["--port", str(zk_port)]
            log = tmp_path / f"terminal-{index}.log"
            with open(log, "wb") as out:
                procs.append(subprocess.Popen([sys.executable, "-m", "server", *args], stdout=out,
                                              stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, cwd=tmp_path,
                                              env=env))
            logs.append(log)
            wait_for_line(log, r"trafka: (ZooKeeper on|listening on)", procs[-1], 90)
        bootstrap = ",".join(kafka_ports.values())
        port = int(next(iter(kafka_ports.values())).rpartition(":")[2])
        # A broker learns of the others from the controller, which hears of each registration
        # in ZooKeeper and then sends UpdateMetadata (Kafka's order too): the third broker's
        # `listening on` line can come before broker 1's metadata names it.
        def brokers_named() -> list[int]:
            metadata = raw_request("127.0.0.1", port, ApiKey.METADATA, 9,
                                   {"topics": [], "allow_auto_topic_creation": False})
            return sorted(b["node_id"] for b in metadata["brokers"])

        Cluster.wait_for(lambda: brokers_named() == [1, 2, 3], 30, "broker 1's metadata naming brokers 1, 2 and 3")
        assert (tmp_path / "d1").is_dir() and (tmp_path / "d3").is_dir()

        admin = AdminClient({"bootstrap.servers": bootstrap})
        admin.create_topics([NewTopic("recipe", num_partitions=3)])["recipe"].result(30)  # default RF: 3
        described = admin.describe_topics(ck.TopicCollection(["recipe"]))["recipe"].result(30)
        assert [len(p.replicas) for p in described.partitions] == [3, 3, 3]
        producer = ck.Producer({"bootstrap.servers": bootstrap, "acks": "all"})
        for i in range(30):
            producer.produce("recipe", value=b"r%d" % i, partition=i % 3)
        assert producer.flush(60) == 0
        consumer = ck.Consumer({"bootstrap.servers": bootstrap, "group.id": "recipe", "auto.offset.reset": "earliest"})
        consumer.subscribe(["recipe"])
        got = set()
        deadline = time.monotonic() + 60
        while len(got) < 30 and time.monotonic() < deadline:
            msg = consumer.poll(0.5)
            if msg is not None and msg.error() is None:
                got.add(msg.value())
        consumer.close()
        assert got == {b"r%d" % i for i in range(30)}
        assert all(proc.poll() is None for proc in procs), "every broker (and ZooKeeper) still runs"
        # A broker that found the default HTTP ports taken says so in one warning and serves Kafka.
        later = [log.read_text() for log in logs[2:]]
        assert all("Traceback" not in text for text in later)
    finally:
        for proc in reversed(procs):
            if proc.poll() is None:
                proc.send_signal(signal.SIGTERM)
        for proc in reversed(procs):
            try:
                proc.wait(60)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
    assert [proc.returncode for proc in procs] == [0, 0, 0, 0]


def test_the_mistakes_of_a_by_hand_cluster_are_one_line_each(tmp_path, zk_connect):
    """What a by-hand cluster gets wrong stops that broker with one line naming the setting:
    a node id another live broker holds (after waiting out a previous session of its own),
    a data directory that belongs to another cluster (Kafka's InconsistentClusterIdException)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("TRAFKA_")}
    env["PYTHONPATH"] = str(REPO)
    common = ["--set", f"zookeeper.connect={zk_connect}", "--set", "zookeeper.session.timeout.ms=2000",
              "--set", "http.listeners=", "--set", "schema.registry.listeners=", "--set", "rest.proxy.listeners="]
    log = tmp_path / "first.log"
    with open(log, "wb") as out:
        first = subprocess.Popen([sys.executable, "-m", "server", "serve", "--node-id", "1", "--listen",
                                  f"127.0.0.1:{free_port()}", "--data-dir", str(tmp_path / "d1"), *common],
                                 stdout=out, stderr=subprocess.STDOUT, env=env, cwd=tmp_path)
    try:
        wait_for_line(log, r"trafka: listening on", first, 60)
        twin = subprocess.run([sys.executable, "-m", "server", "serve", "--node-id", "1", "--listen",
                               f"127.0.0.1:{free_port()}", "--data-dir", str(tmp_path / "d2"), *common],
                              capture_output=True, text=True, env=env, cwd=tmp_path, timeout=90)
        assert twin.returncode == 1
        errors = [line for line in twin.stderr.splitlines() if line.startswith("trafka: ")]
        assert errors == ["trafka: node.id=1: another live broker is registered with this id at /brokers/ids/1 "
                          "(each broker needs a node.id of its own)"], twin.stderr
        assert "Traceback" not in twin.stderr
    finally:
        first.send_signal(signal.SIGTERM)
        assert first.wait(60) == 0
    # ZooKeeper of another cluster (its /cluster/id written as Kafka writes it)
    from kazoo.client import KazooClient

    from server.zookeeper.znodes import CLUSTER_ID_PATH, encode_cluster_id

    other = zk_connect + "-other"
    client = KazooClient(hosts=other.partition("/")[0])
    client.start(10)
    try:
        client.create("/" + other.partition("/")[2] + CLUSTER_ID_PATH, encode_cluster_id("AnotherClusterIdXXXXXX"),
                      makepath=True)
    finally:
        client.stop()
        client.close()
    again = subprocess.run([sys.executable, "-m", "server", "serve", "--node-id", "1", "--listen",
                            f"127.0.0.1:{free_port()}", "--data-dir", str(tmp_path / "d1"), *common,
                            "--set", f"zookeeper.connect={other}"],
                           capture_output=True, text=True, env=env, cwd=tmp_path, timeout=90)
    assert again.returncode == 1
    errors = [line for line in again.stderr.splitlines() if line.startswith("trafka: ")]
    assert len(errors) == 1 and errors[0].startswith(f"trafka: zookeeper.connect={other}: ZooKeeper holds cluster "), \
        again.stderr
    assert f"but log.dirs={tmp_path / 'd1'} belongs to cluster" in errors[0]
