"""Share groups (KIP-932) with the stock client: confluent-kafka's ShareConsumer (librdkafka
2.16, share APIs v1) against a broker process.

- three consumers on a topic of two partitions (more consumers than partitions: queue
  semantics) together get every record exactly once when all accept;
- records a consumer releases come back to another with a higher delivery count, rejected
  ones never do;
- a consumer that hangs without acknowledging: its records go to another once the
  acquisition lock expires (`group.share.record.lock.duration.ms`=3000 here); one killed:
  at once, its connection having closed;
- a broker restart does not deliver accepted records again.
"""

from __future__ import annotations

import signal
import subprocess
import sys
import threading
import time

import pytest

from tests.brokerproc import BrokerProcess
from tests.groups.share_wire import ShareClient, create_topic, produce

confluent_kafka = pytest.importorskip("confluent_kafka")
if not hasattr(confluent_kafka, "ShareConsumer"):
    pytest.skip("confluent-kafka without ShareConsumer", allow_module_level=True)

from confluent_kafka import AcknowledgeType, ShareConsumer  # noqa: E402

LOCK_MS = 3000


@pytest.fixture
def broker(tmp_path):
    with BrokerProcess(tmp_path / "data", "--set", f"group.share.record.lock.duration.ms={LOCK_MS}",
                       "--set", "group.share.heartbeat.interval.ms=500") as b:
        yield b


def consumer(broker: BrokerProcess, group: str = "g", **extra) -> ShareConsumer:
    c = ShareConsumer({"bootstrap.servers": broker.bootstrap, "group.id": group, **extra})
    c.subscribe(["q"])
    return c


def wait_for_members(broker: BrokerProcess, count: int, group: str = "g", timeout: float = 20) -> None:
    """Until the share group has `count` members, each with an assignment (so the share
    partitions exist, initialised at the end of the log: produce after this)."""
    deadline = time.monotonic() + timeout
    while True:
        group_info = ShareClient(broker, group).describe()["groups"][0]
        members = group_info["members"]
        if len(members) >= count and all(m["assignment"]["topic_partitions"] for m in members):
            return
        assert time.monotonic() < deadline, group_info
        time.sleep(0.1)


def poll_until(c: ShareConsumer, want: int, timeout: float = 20, ack=None) -> list:
    got = []
    deadline = time.monotonic() + timeout
    while len(got) < want and time.monotonic() < deadline:
        for m in c.poll(0.5):
            assert m.error() is None, m.error()
            got.append(m)
            if ack is not None:
                c.acknowledge(m, ack(m))
    return got


def test_three_consumers_fewer_partitions_every_record_once(broker):
    create_topic(broker.bootstrap, "q", 2)
    total = 300
    stop = threading.Event()
    seen: list[list[tuple[bytes, int]]] = [[], [], []]
    consumers = [consumer(broker) for _ in range(3)]

    def run(i: int) -> None:
        c = consumers[i]
        while not stop.is_set():
            for m in c.poll(0.2):
                assert m.error() is None, m.error()
                seen[i].append((m.value(), m.delivery_count()))
        c.close()  # sends the last (implicit) acceptances

    threads = [threading.Thread(target=run, args=(i,)) for i in range(3)]
    for t in threads:
        t.start()
    try:
        wait_for_members(broker, 3)
        for burst in range(6):
            for p in (0, 1):
                produce(broker.bootstrap, "q", total // 12, partition=p, prefix=f"b{burst}p{p}-")
        deadline = time.monotonic() + 30
        while sum(map(len, seen)) < total and time.monotonic() < deadline:
            time.sleep(0.1)
        time.sleep(1.0)  # anything delivered twice would show up now
    finally:
        stop.set()
        for t in threads:
            t.join(30)
    values = [v for per in seen for v, _count in per]
    assert len(values) == total and len(set(values)) == total
    assert {count for per in seen for _v, count in per} == {1}
    assert sum(1 for per in seen if per) >= 2  # more than one consumer did the work
    # All were accepted: a new member gets nothing, even after the locks would have expired.
    time.sleep(LOCK_MS / 1000 + 0.5)
    late = consumer(broker)
    try:
        assert poll_until(late, 1, timeout=4) == []
    finally:
        late.close()


def test_released_records_come_back_rejected_ones_never(broker):
    create_topic(broker.bootstrap, "q", 1)
    a = consumer(broker, **{"share.acknowledgement.mode": "explicit"})
    poll_until(a, 1, timeout=3)
    wait_for_members(broker, 1)
    produce(broker.bootstrap, "q", 10)
    got = poll_until(a, 10, ack=lambda m: AcknowledgeType.RELEASE if m.offset() % 2 == 0 else AcknowledgeType.REJECT)
    assert sorted(m.offset() for m in got) == list(range(10))
    assert all(m.delivery_count() == 1 for m in got)
    a.commit_sync()
    a.close()
    b = consumer(broker)
    try:
        again = poll_until(b, 5)
        time.sleep(0.5)
        again += poll_until(b, 1, timeout=2)
    finally:
        b.close()
    assert sorted(m.offset() for m in again) == [0, 2, 4, 6, 8]
    assert all(m.delivery_count() == 2 for m in again)


CHILD = """
import sys, time
from confluent_kafka import ShareConsumer
c = ShareConsumer({"bootstrap.servers": sys.argv[1], "group.id": "g"})
c.subscribe(["q"])
got = []
while len(got) < 5:
    got += [m.offset() for m in c.poll(0.5) if m.error() is None]
print(" ".join(map(str, sorted(got))), flush=True)
time.sleep(600)   # holds the records, never acknowledges: killed
"""


def _child_holding_five(broker: BrokerProcess) -> subprocess.Popen:
    child = subprocess.Popen([sys.executable, "-c", CHILD, broker.bootstrap], stdout=subprocess.PIPE, text=True)
    try:
        wait_for_members(broker, 1)
        produce(broker.bootstrap, "q", 5)
        line = child.stdout.readline()
        assert line.split() == ["0", "1", "2", "3", "4"]
    except BaseException:
        child.kill()
        child.wait()
        raise
    return child


@pytest.mark.parametrize("death", ["hung", "killed"])
def test_dead_consumer_records_go_to_another(broker, death):
    """A hung consumer (SIGSTOP: its connection stays open) loses its records when the
    acquisition lock expires; a killed one (its connection closes) at once, as Kafka ends
    a share session with the connection that opened it."""
    create_topic(broker.bootstrap, "q", 1)
    child = _child_holding_five(broker)
    try:
        child.send_signal(signal.SIGSTOP if death == "hung" else signal.SIGKILL)
        died_at = time.monotonic()
        b = consumer(broker)
        try:
            got = poll_until(b, 5, timeout=LOCK_MS / 1000 + 15)
        finally:
            b.close()
        waited = time.monotonic() - died_at
    finally:
        child.kill()
        child.wait()
    assert sorted(m.offset() for m in got) == [0, 1, 2, 3, 4]
    assert all(m.delivery_count() == 2 for m in got)
    if death == "hung":
        assert waited >= LOCK_MS / 1000 - 1.0  # not before the lock expired
    else:
        assert waited < LOCK_MS / 1000 - 1.0  # released with the connection, not by the lock


def test_broker_restart_does_not_redeliver_accepted_records(broker):
    create_topic(broker.bootstrap, "q", 1)
    a = consumer(broker)
    poll_until(a, 1, timeout=3)
    wait_for_members(broker, 1)
    produce(broker.bootstrap, "q", 20, prefix="before-")
    got = poll_until(a, 20)
    assert len(got) == 20
    # Implicit mode accepts a poll's records with the next poll or commit; librdkafka 2.16's
    # close() sends its final ShareAcknowledge without them, so commit first.
    assert all(v is None for v in a.commit_sync().values())
    a.close()
    broker.restart()
    produce(broker.bootstrap, "q", 5, prefix="after-")
    b = consumer(broker)
    try:
        after = poll_until(b, 5)
        after += poll_until(b, 1, timeout=3)
    finally:
        b.close()
    assert sorted(m.value() for m in after) == [f"after-{i}".encode() for i in range(5)]
