"""Share groups with kafka-clients 3.9.2's KafkaShareConsumer (early access, share APIs v0)
beside confluent-kafka's ShareConsumer (librdkafka 2.16, v1), in one share group.

Why: the two stock share consumers speak different versions of the same four APIs; a
share group must hand every record to exactly one of them and settle it once, whichever
version acknowledged it. The Java members are `TrafkaCompat share_worker` processes
(compat_tests/clients/java_client.py builds the toolchain; skipped without a JDK).
"""

from __future__ import annotations

import json
import subprocess
import threading
import time

import pytest

from compat_tests.clients.base import NotSupportedByClient
from compat_tests.clients.java_client import share_worker_argv
from tests.brokerproc import BrokerProcess
from tests.groups.share_wire import ShareClient, create_topic, produce

confluent_kafka = pytest.importorskip("confluent_kafka")
if not hasattr(confluent_kafka, "ShareConsumer"):
    pytest.skip("confluent-kafka without ShareConsumer", allow_module_level=True)

from confluent_kafka import AcknowledgeType, ShareConsumer  # noqa: E402

TOTAL = 600


@pytest.fixture
def broker(tmp_path):
    with BrokerProcess(tmp_path / "data", "--set", "group.share.record.lock.duration.ms=15000",
                       "--set", "group.share.heartbeat.interval.ms=500") as b:
        yield b


class JavaShareMember:
    """One KafkaShareConsumer process; its records are read from stdout in a thread."""

    def __init__(self, broker: BrokerProcess, name: str) -> None:
        try:
            argv = share_worker_argv(broker.bootstrap, "g", name, ["q"])
        except NotSupportedByClient as exc:
            pytest.skip(str(exc))
        self.proc = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                     text=True)
        self.values: list[str] = []
        self.errors: list[str] = []
        self.closed = threading.Event()
        self.thread = threading.Thread(target=self._read, daemon=True)
        self.thread.start()

    def _read(self) -> None:
        for line in self.proc.stdout:
            event = json.loads(line)
            if "value" in event:
                self.values.append(event["value"])
            elif "error" in event:
                self.errors.append(event["error"])
            elif event.get("closed"):
                self.closed.set()

    def stop(self) -> None:
        self.proc.stdin.write("stop\n")
        self.proc.stdin.flush()
        try:
            self.proc.wait(60)
        finally:
            if self.proc.poll() is None:
                self.proc.kill()
        self.thread.join(5)


def test_two_java_and_one_confluent_consumer_every_record_once(broker):
    tid = create_topic(broker.bootstrap, "q", 3)
    java = [JavaShareMember(broker, f"java-{i}") for i in range(2)]
    librd = ShareConsumer({"bootstrap.servers": broker.bootstrap, "group.id": "g",
                           "share.acknowledgement.mode": "explicit"})
    librd.subscribe(["q"])
    librd_values: list[str] = []
    try:
        # Until all three are members with an assignment (share partitions initialised at the end).
        deadline = time.monotonic() + 60
        while True:
            librd.poll(0.2)
            members = ShareClient(broker, "g").describe()["groups"][0]["members"]
            if len(members) == 3 and all(m["assignment"]["topic_partitions"] for m in members):
                break
            assert time.monotonic() < deadline, (members, [j.proc.stderr for j in java])
        for p in range(3):
            produce(broker.bootstrap, "q", TOTAL // 3, partition=p, prefix=f"p{p}-")
        deadline = time.monotonic() + 90
        while len(librd_values) + sum(len(j.values) for j in java) < TOTAL and time.monotonic() < deadline:
            for m in librd.poll(0.2):
                assert m.error() is None, m.error()
                librd_values.append(m.value().decode())
                librd.acknowledge(m, AcknowledgeType.ACCEPT)
        for j in java:
            j.stop()
        librd.close()
    finally:
        for j in java:
            if j.proc.poll() is None:
                j.proc.kill()
    java_values = [v for j in java for v in j.values]
    every = librd_values + java_values
    assert sorted(every) == sorted(f"p{p}-{i}" for p in range(3) for i in range(TOTAL // 3))
    # The Java members took part (which member gets how many is the assignor's and the race's).
    assert java_values, [len(j.values) for j in java]
    assert not [e for j in java for e in j.errors]
    assert all(j.closed.is_set() for j in java)
    # Everything was accepted: a new member of the group gets nothing, ever.
    late = ShareClient(broker, "g")
    late.join("q")
    got = late.fetch(tid, partitions=(0, 1, 2), max_wait_ms=1000)
    assert got["error_code"] == 0 and not any(p["acquired_records"] for t in got["responses"]
                                              for p in t["partitions"]), got
