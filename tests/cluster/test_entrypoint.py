"""The container's entrypoint (cli/entrypoint.py): TRAFKA_BROKERS_PER_HOST=2 runs two
brokers of one cluster from one set of TRAFKA_* settings (ids, ports and data dirs
derived), leaders spread over both, and SIGTERM (`docker stop`) stops them cleanly."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

import confluent_kafka as ck
import pytest
from confluent_kafka.admin import AdminClient, NewTopic

from tests.brokerproc import REPO
from tests.cluster.test_dev_cluster import consecutive_free_ports, read_line_matching

pytestmark = pytest.mark.timeout(180)


def entrypoint(env: dict[str, str]) -> subprocess.Popen:
    clean = {k: v for k, v in os.environ.items() if not k.startswith("TRAFKA_")}
    clean["TRAFKA_HTTP_LISTENERS"] = ""  # no HTTP listeners: 8080 may be taken on a test machine
    return subprocess.Popen([sys.executable, "-m", "cli.entrypoint"], env={**clean, **env},
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, cwd=REPO)


def test_two_brokers_per_host_from_one_set_of_settings(tmp_path, zk_connect):
    base = consecutive_free_ports(2)
    proc = entrypoint({"TRAFKA_BROKERS_PER_HOST": "2", "TRAFKA_ZOOKEEPER_CONNECT": zk_connect,
                       "TRAFKA_LISTENERS": f"127.0.0.1:{base}", "TRAFKA_NODE_ID": "11",
                       "TRAFKA_LOG_DIRS": str(tmp_path), "TRAFKA_DEFAULT_REPLICATION_FACTOR": "2",
                       "TRAFKA_SCHEMA_REGISTRY_LISTENERS": "",
                       "TRAFKA_OFFSETS_TOPIC_REPLICATION_FACTOR": "2", "TRAFKA_OFFSETS_TOPIC_NUM_PARTITIONS": "2"})
    seen: list[str] = []
    try:
        for _ in range(2):
            read_line_matching(proc, r"trafka: listening on", 60, seen)
        bootstrap = f"127.0.0.1:{base},127.0.0.1:{base + 1}"
        admin = AdminClient({"bootstrap.servers": bootstrap})
        deadline = time.monotonic() + 60
        while len(admin.list_topics(timeout=10).brokers) < 2:
            assert time.monotonic() < deadline, "the two brokers never both registered"
            time.sleep(0.3)
        assert sorted(admin.list_topics(timeout=10).brokers) == [11, 12]
        admin.create_topics([NewTopic("spread", num_partitions=4)])["spread"].result(30)
        described = admin.describe_topics(ck.TopicCollection(["spread"]))["spread"].result(30)
        assert {p.leader.id for p in described.partitions} == {11, 12}, "leaders spread over the host's brokers"

        producer = ck.Producer({"bootstrap.servers": bootstrap, "acks": "all", "enable.idempotence": True})
        for i in range(40):
            producer.produce("spread", value=b"v%d" % i, partition=i % 4)
        assert producer.flush(30) == 0
        consumer = ck.Consumer({"bootstrap.servers": bootstrap, "group.id": "spread", "auto.offset.reset": "earliest"})
        consumer.subscribe(["spread"])
        got = []
        deadline = time.monotonic() + 60
        while len(got) < 40 and time.monotonic() < deadline:
            msg = consumer.poll(0.5)
            if msg is not None and msg.error() is None:
                got.append(msg.value())
        consumer.close()
        assert sorted(got) == sorted(b"v%d" % i for i in range(40))
        assert (tmp_path / "broker-11").is_dir() and (tmp_path / "broker-12").is_dir()

        proc.send_signal(signal.SIGTERM)
        assert proc.wait(60) == 0
        seen.append(proc.stdout.read())
        assert "controlled shutdown" in "".join(seen), "the brokers did not stop with a controlled shutdown"
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


def test_several_brokers_per_host_need_a_cluster(tmp_path):
    proc = entrypoint({"TRAFKA_BROKERS_PER_HOST": "2", "TRAFKA_LOG_DIRS": str(tmp_path)})
    out, _ = proc.communicate(timeout=60)
    assert proc.returncode == 2 and "TRAFKA_ZOOKEEPER_CONNECT" in out, out
