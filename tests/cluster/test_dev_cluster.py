"""`trafka dev cluster` (server/cluster/dev.py): ZooKeeper from Debian's package and N brokers
on loopback, the bootstrap string printed, everything stopped on Ctrl-C."""

from __future__ import annotations

import re
import signal
import socket
import subprocess
import sys
import time

import confluent_kafka as ck
import pytest
from confluent_kafka.admin import AdminClient, NewTopic

from server.cluster.zookeeper_server import ZooKeeperServer
from tests.brokerproc import REPO

pytestmark = [pytest.mark.timeout(180),
              pytest.mark.skipif(not ZooKeeperServer.available(), reason="no ZooKeeper (java + Debian zookeeper)")]


def consecutive_free_ports(count: int) -> int:
    for _ in range(50):
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            base = s.getsockname()[1]
        if base + count > 65535:
            continue
        try:
            held = []
            for port in range(base, base + count):
                sock = socket.socket()
                held.append(sock)
                sock.bind(("127.0.0.1", port))
            return base
        except OSError:
            continue
        finally:
            for sock in held:
                sock.close()
    raise RuntimeError("no consecutive free ports")


def read_line_matching(proc: subprocess.Popen, pattern: str, timeout: float, seen: list[str]) -> re.Match:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        line = proc.stdout.readline()
        if not line:
            if proc.poll() is not None:
                break
            continue
        seen.append(line)
        found = re.search(pattern, line)
        if found:
            return found
    raise AssertionError(f"no line matching {pattern!r} within {timeout} s; output:\n{''.join(seen)}")


def test_dev_cluster_serves_replicated_topics_and_stops_on_ctrl_c(tmp_path):
    base = consecutive_free_ports(2)
    proc = subprocess.Popen([sys.executable, "-m", "server", "dev", "cluster", "--brokers", "2",
                             "--base-port", str(base), "--data-dir", str(tmp_path),
                             "--set", "schema.registry.listeners="],
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, cwd=REPO)
    seen: list[str] = []
    try:
        zk_port = int(read_line_matching(proc, r"ZooKeeper on 127\.0\.0\.1:(\d+)", 60, seen).group(1))
        bootstrap = read_line_matching(proc, r"bootstrap servers: (\S+)", 90, seen).group(1)
        assert bootstrap == f"127.0.0.1:{base},127.0.0.1:{base + 1}"

        admin = AdminClient({"bootstrap.servers": bootstrap})
        # No replication factor given: the dev cluster's default, min(3, brokers) = 2.
        admin.create_topics([NewTopic("tryout", num_partitions=2)])["tryout"].result(30)
        described = admin.describe_topics(ck.TopicCollection(["tryout"]))["tryout"].result(30)
        assert [len(p.replicas) for p in described.partitions] == [2, 2]
        assert {p.leader.id for p in described.partitions} == {1, 2}, "leaders spread over the brokers"

        producer = ck.Producer({"bootstrap.servers": bootstrap, "acks": "all", "enable.idempotence": True})
        for i in range(20):
            producer.produce("tryout", value=b"v%d" % i, partition=i % 2)
        assert producer.flush(30) == 0
        consumer = ck.Consumer({"bootstrap.servers": bootstrap, "group.id": "tryout",
                                "auto.offset.reset": "earliest"})
        consumer.subscribe(["tryout"])
        got = []
        deadline = time.monotonic() + 60
        while len(got) < 20 and time.monotonic() < deadline:
            msg = consumer.poll(0.5)
            if msg is not None and msg.error() is None:
                got.append(msg.value())
        consumer.close()
        assert sorted(got) == sorted(b"v%d" % i for i in range(20))

        proc.send_signal(signal.SIGINT)
        assert proc.wait(60) == 0
        seen.append(proc.stdout.read())
        assert "trafka: stopped" in "".join(seen)
        assert not ZooKeeperServer(port=zk_port, data_dir=tmp_path / "zookeeper").answers(), "ZooKeeper stopped"
        for port in (base, base + 1):
            with pytest.raises(OSError):
                socket.create_connection(("127.0.0.1", port), timeout=2).close()
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
