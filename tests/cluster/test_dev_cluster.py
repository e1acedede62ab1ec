"""`trafka dev cluster` (cli/dev.py): ZooKeeper from Debian's package and N brokers
on loopback, the bootstrap string printed, everything stopped on Ctrl-C."""

from __future__ import annotations

import os
import re
import signal
import socket
import subprocess
import sys
import time

import confluent_kafka as ck
import pytest
from confluent_kafka.admin import AdminClient, NewTopic

from cli.zookeeper_server import ZooKeeperServer
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


LONG = os.environ.get("TRAFKA_LONG_TESTS") == "1"


def free_base_with_stride(count: int, stride: int = 10) -> int:
    """A port P with P, P+stride, ... free: the base of the brokers' registry ports."""
    for _ in range(50):
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            base = s.getsockname()[1]
        if base + stride * count > 65535:
            continue
        try:
            for i in range(count):
                with socket.socket() as probe:
                    probe.bind(("127.0.0.1", base + stride * i))
            return base
        except OSError:
            continue
    raise RuntimeError("no free ports")


def start_dev_cluster(tmp_path, brokers: int, *extra: str, stdin=subprocess.DEVNULL):
    base = consecutive_free_ports(brokers)
    proc = subprocess.Popen([sys.executable, "-m", "server", "dev", "cluster", "--brokers", str(brokers),
                             "--base-port", str(base), "--data-dir", str(tmp_path), *extra],
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, cwd=REPO, stdin=stdin)
    return proc, base


def leader_of(port: int, topic: str) -> int:
    """The leader of `topic`-0 in the Metadata of the broker on `port` (-1: none yet)."""
    from tests.brokerproc import raw_request
    from wire.registry import ApiKey

    body = {"topics": [{"name": topic}], "allow_auto_topic_creation": False}
    answer = raw_request("127.0.0.1", port, ApiKey.METADATA, 9, body)
    for found in answer["topics"]:
        for part in found["partitions"]:
            if part["partition_index"] == 0 and part["error_code"] == 0:
                return part["leader_id"]
    return -1


def stop_dev_cluster(proc: subprocess.Popen, seen: list[str]) -> None:
    proc.send_signal(signal.SIGINT)
    assert proc.wait(90) == 0, "".join(seen)
    seen.append(proc.stdout.read())
    assert "trafka: stopped" in "".join(seen)


@pytest.mark.timeout(900 if LONG else 300)
def test_dev_cluster_of_three_starts_every_time(tmp_path):
    """`trafka dev cluster --brokers 3` crashed at start-up 3 times in 4: every broker's Schema
    Registry creates `_schemas` once three brokers are live, and the losers of that race
    died. Started 3 times (10 with TRAFKA_LONG_TESTS=1), each start must reach `_schemas`
    with a leader and every broker still serving a moment later."""
    rounds = 10 if LONG else 3
    for round_ in range(rounds):
        registry = free_base_with_stride(3)
        proc, base = start_dev_cluster(tmp_path / f"round-{round_}", 3,
                                       "--set", f"schema.registry.listeners=127.0.0.1:{registry}")
        seen: list[str] = []
        try:
            read_line_matching(proc, r"bootstrap servers: ", 120, seen)
            deadline = time.monotonic() + 60
            while time.monotonic() < deadline and leader_of(base, "_schemas") < 0:
                assert proc.poll() is None, "".join(seen)
                time.sleep(0.3)
            assert leader_of(base, "_schemas") in (1, 2, 3), "_schemas has a leader"
            time.sleep(2)  # a loser of the race would be dead by now
            assert proc.poll() is None, "".join(seen)
            for port in range(base, base + 3):
                assert leader_of(port, "_schemas") in (1, 2, 3), f"the broker on {port} serves"
            stop_dev_cluster(proc, seen)
            output = "".join(seen)
            assert "exited" not in output and "killed" not in output, output
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait()


def in_sync(port: int) -> bool:
    """Every partition the broker on `port` knows has its whole replica set in the ISR."""
    from tests.brokerproc import raw_request
    from wire.registry import ApiKey

    answer = raw_request("127.0.0.1", port, ApiKey.METADATA, 9, {"topics": None, "allow_auto_topic_creation": False})
    return all(sorted(p["isr_nodes"]) == sorted(p["replica_nodes"]) and p["leader_id"] >= 0
               for t in answer["topics"] for p in t["partitions"])


@pytest.mark.timeout(900 if LONG else 300)
def test_dev_cluster_survives_a_broker_killed_and_brings_it_back_on_enter(tmp_path):
    """kill -9 of one broker (the controller, the hardest case; with TRAFKA_LONG_TESTS=1 each
    broker in turn) must not stop the others: the death is reported, produce (acks=all) and
    consume go on through the survivors, and Enter on the dev cluster's terminal starts the
    broker again with its node id, port and data. The consumer groups are first used after
    the kill: the dev cluster had `__consumer_offsets` created while every broker was live."""
    from tests.brokerproc import raw_request
    from wire.registry import ApiKey

    proc, base = start_dev_cluster(tmp_path, 3, "--set", "zookeeper.session.timeout.ms=6000",
                                   "--set", "schema.registry.listeners=", "--set", "rest.proxy.listeners=",
                                   "--set", "http.listeners=", stdin=subprocess.PIPE)
    seen: list[str] = []
    try:
        bootstrap = read_line_matching(proc, r"bootstrap servers: (\S+)", 120, seen).group(1)
        pids = {int(m.group(1)): int(m.group(2)) for m in
                (read_line_matching(proc, r"broker (\d) \(pid (\d+)\): kafka", 10, seen) for _ in range(3))}
        admin = AdminClient({"bootstrap.servers": bootstrap})
        admin.create_topics([NewTopic("failover", num_partitions=3)])["failover"].result(30)
        producer = ck.Producer({"bootstrap.servers": bootstrap, "acks": "all", "enable.idempotence": True,
                                "message.timeout.ms": 60000})
        for i in range(30):
            producer.produce("failover", value=b"before-%d" % i, partition=i % 3)
        assert producer.flush(60) == 0
        expected = {b"before-%d" % i for i in range(30)}

        metadata = raw_request("127.0.0.1", base, ApiKey.METADATA, 9, {"topics": [], "allow_auto_topic_creation": False})
        controller = metadata["controller_id"]
        victims = [controller] + ([n for n in (1, 2, 3) if n != controller] if LONG else [])
        for round_, victim in enumerate(victims):
            os.kill(pids[victim], signal.SIGKILL)
            read_line_matching(proc, rf"broker {victim} \(pid {pids[victim]}\) was killed by SIGKILL.*keep serving",
                               30, seen)

            survivors = ",".join(f"127.0.0.1:{base + node - 1}" for node in pids if node != victim)
            producer = ck.Producer({"bootstrap.servers": survivors, "acks": "all", "enable.idempotence": True,
                                    "message.timeout.ms": 90000})
            failed = []
            for i in range(30):
                producer.produce("failover", value=b"after-%d-%d" % (round_, i), partition=i % 3,
                                 on_delivery=lambda err, _msg: failed.append(err) if err else None)
            assert producer.flush(100) == 0 and not failed, failed
            expected |= {b"after-%d-%d" % (round_, i) for i in range(30)}
            consumer = ck.Consumer({"bootstrap.servers": survivors, "group.id": f"failover-{round_}",
                                    "auto.offset.reset": "earliest"})
            consumer.subscribe(["failover"])
            got = set()
            deadline = time.monotonic() + 90
            while len(got) < len(expected) and time.monotonic() < deadline:
                msg = consumer.poll(0.5)
                if msg is not None and msg.error() is None:
                    got.add(msg.value())
            consumer.close()
            assert got == expected
            assert proc.poll() is None, "the dev cluster goes on"

            proc.stdin.write("\n")
            proc.stdin.flush()
            read_line_matching(proc, rf"broker {victim} starting again", 20, seen)
            pids[victim] = int(read_line_matching(proc, rf"broker {victim} \(pid (\d+)\) is back", 90, seen).group(1))
            assert leader_of(base + victim - 1, "failover") in (1, 2, 3)
            deadline = time.monotonic() + 90  # caught up before the next one is killed
            while not in_sync(base + victim - 1):
                assert time.monotonic() < deadline, "the restarted broker never caught up"
                time.sleep(0.5)
        stop_dev_cluster(proc, seen)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
