"""Kafka Connect, unmodified, against the broker: a distributed worker group through the
SIGKILL of a worker.

Two distributed workers (Kafka's `ConnectDistributed`, connect-runtime and the FileStream
connectors of the `connect` classpath in .ci/jvm/pom.xml, each a JVM with a bounded heap)
form one Connect cluster on the broker:

- its config, offset and status topics are created by Connect itself, compacted, with the
  partition counts the workers ask for (checked with DescribeConfigs and Metadata);
- a FileStreamSource connector (a growing text file -> a topic) and a FileStreamSink
  connector (the topic -> another file) are created through Connect's REST API;
- lines are appended to the source file while the worker running the source task is
  SIGKILLed: its tasks move to the other worker, which resumes from the offsets stored in
  the offset topic; the killed worker is started again and rejoins.

Exactly-once source support (KIP-618, exactly.once.source.support=enabled) is on: the
source task's records and its file position are written in one transaction, a zombie task
is fenced (Admin.fenceProducers, InitProducerId), the leader writes the config topic
transactionally. So the topic read with read_committed holds every line exactly once, in
order, and the stored offset is the source file's length; the sink (at-least-once, as
Connect promises for sinks) wrote every line, in order of first appearance.
Light variant (the default run): a few hundred lines on Kafka and Trafka single brokers;
TRAFKA_LONG_TESTS=1: more lines, and the three-broker clusters.
"""

from __future__ import annotations

import os
import threading
import time
from pathlib import Path

import pytest

from compat_tests.helpers import unique_name
from compat_tests.jvm_apps.connect import ConnectWorker
from compat_tests.jvm_apps.topics import create_topics, partitions, read_all, topic_configs

LONG = os.environ.get("TRAFKA_LONG_TESTS", "") not in ("", "0")
LINES = 3000 if LONG else 300
FEED_BATCH = 10
FEED_PAUSE_S = 0.1
SETTLE_S = 120.0
# Connect's internal topics (worker setting -> the partitions it gets; the config topic
# must have exactly one)
INTERNAL_TOPICS = {"config.storage.topic": 1, "offset.storage.topic": 5, "status.storage.topic": 3}

pytestmark = [pytest.mark.compat(client="connect"), pytest.mark.timeout(600 if LONG else 300)]


def worker_settings(bootstrap: str, group: str) -> dict[str, str]:
    return {
        "bootstrap.servers": bootstrap,
        "group.id": group,
        "config.storage.topic": f"{group}-configs",
        "offset.storage.topic": f"{group}-offsets",
        "status.storage.topic": f"{group}-status",
        # -1: the broker's default.replication.factor (1 on one broker, 3 on the clusters)
        "config.storage.replication.factor": "-1",
        "offset.storage.replication.factor": "-1",
        "status.storage.replication.factor": "-1",
        "offset.storage.partitions": str(INTERNAL_TOPICS["offset.storage.topic"]),
        "status.storage.partitions": str(INTERNAL_TOPICS["status.storage.topic"]),
        "key.converter": "org.apache.kafka.connect.storage.StringConverter",
        "value.converter": "org.apache.kafka.connect.storage.StringConverter",
        "exactly.once.source.support": "enabled",
        # sink tasks read only committed transactions of the exactly-once source
        "consumer.isolation.level": "read_committed",
        "offset.flush.interval.ms": "1000",
        # a dead worker is noticed in seconds and its tasks reassigned 5 s later (the
        # default waits 5 minutes for it to come back)
        "session.timeout.ms": "6000",
        "heartbeat.interval.ms": "1000",
        "scheduled.rebalance.max.delay.ms": "5000",
        # the plugins' ServiceLoader manifests, not a scan of every jar: a quicker start
        "plugin.discovery": "service_load",
    }


class FileFeeder:
    """Appends numbered lines to the source file in small batches, in a thread."""

    def __init__(self, path: Path, n: int) -> None:
        self.path = path
        self.lines = [f"line-{i:05d} {'x' * (i % 23)}" for i in range(n)]
        path.touch()
        self.thread = threading.Thread(target=self._feed, name="connect-feeder", daemon=True)
        self.error: BaseException | None = None

    def _feed(self) -> None:
        try:
            for i in range(0, len(self.lines), FEED_BATCH):
                with open(self.path, "a") as f:
                    f.write("".join(line + "\n" for line in self.lines[i:i + FEED_BATCH]))
                time.sleep(FEED_PAUSE_S)
        except BaseException as exc:  # noqa: BLE001 - reported by join
            self.error = exc

    def start(self) -> None:
        self.thread.start()

    def join(self) -> None:
        self.thread.join(SETTLE_S)
        assert not self.thread.is_alive(), "the feeder did not finish"
        if self.error:
            raise AssertionError(f"feeding the source file failed: {self.error!r}")


def read_lines(path: Path) -> list[str]:
    try:
        return path.read_text().splitlines()
    except FileNotFoundError:
        return []


def wait_for(condition, timeout: float, what: str, workers=()):
    deadline = time.monotonic() + timeout
    last = None
    while True:
        last = condition()
        if last:
            return last
        if time.monotonic() > deadline:
            logs = "\n".join(f"--- {w.name} ---\n{w.log_tail(40)}" for w in workers)
            raise AssertionError(f"timed out after {timeout:.0f}s waiting for {what}\n{logs}")
        time.sleep(0.5)


def task_workers(worker: ConnectWorker, connector: str) -> list[tuple[str, str]]:
    """(state, worker_id) of each task of `connector`, per the status topic."""
    try:
        status = worker.status(connector)
    except Exception:  # noqa: BLE001 - not known yet, or a rebalance: ask again
        return []
    return [(t["state"], t["worker_id"]) for t in status.get("tasks", [])]


def run_connect_cluster(broker, workdir: Path, kill_broker: bool = False) -> None:
    group = unique_name("connect")
    topic = f"{group}-lines"
    create_topics(broker.bootstrap, {topic: 1})
    source_file, sink_file = workdir / "source.txt", workdir / "sink.txt"
    feeder = FileFeeder(source_file, LINES)
    settings = worker_settings(broker.bootstrap, group)
    workers = [ConnectWorker(f"worker-{i}", workdir, settings) for i in (1, 2)]
    try:
        for w in workers:
            w.start()
        for w in workers:
            w.wait_ready()

        # Connect made its internal topics: compacted, with the partitions it was told.
        for setting, n in INTERNAL_TOPICS.items():
            name = settings[setting]
            assert len(partitions(broker.bootstrap, name)) == n, name
            assert topic_configs(broker.bootstrap, name)["cleanup.policy"][0] == "compact", name

        first = workers[0]
        first.create_connector("source", {
            "connector.class": "org.apache.kafka.connect.file.FileStreamSourceConnector",
            "file": str(source_file), "topic": topic, "tasks.max": "1"})
        first.create_connector("sink", {
            "connector.class": "org.apache.kafka.connect.file.FileStreamSinkConnector",
            "file": str(sink_file), "topics": topic, "tasks.max": "1"})
        for connector in ("source", "sink"):
            wait_for(lambda: [s for s, _ in task_workers(first, connector)] == ["RUNNING"], SETTLE_S,
                     f"the {connector} task running", workers)
        feeder.start()
        wait_for(lambda: len(read_lines(sink_file)) >= LINES // 10, SETTLE_S,
                 "the first lines in the sink file", workers)

        # SIGKILL the worker running the source task, mid-stream.
        [(_, source_worker)] = task_workers(first, "source")
        victim = next(w for w in workers if w.worker_id == source_worker)
        survivor = next(w for w in workers if w is not victim)
        victim.kill()
        if kill_broker:  # and the leader of the topic's partition with it
            dead = broker.kill_leader(topic, 0)
        for connector in ("source", "sink"):
            wait_for(lambda: task_workers(survivor, connector) == [("RUNNING", survivor.worker_id)],
                     SETTLE_S, f"the {connector} task reassigned to {survivor.name}", workers)
        if kill_broker:
            # back once another broker leads (its ZooKeeper session expired: a Kafka broker
            # cannot register again before)
            broker.wait_leader(topic, 0, not_in=(dead,))
            broker.start(dead)
        victim.start()
        victim.wait_ready()

        feeder.join()
        expected = feeder.lines
        wait_for(lambda: len(set(read_lines(sink_file))) >= len(expected), SETTLE_S,
                 "every line in the sink file", workers)
        # The topic holds each line once, in order: no line lost, none written twice.
        values = [r.value.decode() for r in read_all(broker.bootstrap, topic)]
        assert values == expected, _first_difference(values, expected)
        # The source's stored offset is the end of the file.
        position = wait_for(lambda: _source_position(survivor, source_file) == source_file.stat().st_size,
                            SETTLE_S, "the stored source offset at the end of the file", workers)
        assert position
        # The sink wrote every line; at least once, in order of first appearance.
        sink_lines = read_lines(sink_file)
        first_seen = list(dict.fromkeys(sink_lines))
        assert first_seen == expected, _first_difference(first_seen, expected)
    except BaseException:
        for w in workers:
            print(f"--- {w.name} ---\n{w.log_tail(80)}")
        raise
    finally:
        for w in workers:
            w.stop()


def _source_position(worker: ConnectWorker, source_file: Path) -> int | None:
    try:
        offsets = worker.offsets("source")["offsets"]
    except Exception:  # noqa: BLE001 - a rebalance: ask again
        return None
    for entry in offsets:
        if entry["partition"].get("filename") == str(source_file):
            return entry["offset"]["position"]
    return None


def _first_difference(got: list[str], expected: list[str]) -> str:
    for i, (g, e) in enumerate(zip(got, expected)):
        if g != e:
            return f"{len(got)} lines, {len(expected)} expected; first difference at {i}: {g!r} != {e!r}"
    return f"{len(got)} lines, {len(expected)} expected"


@pytest.mark.broker_kinds("kafka", "trafka")
def test_distributed_workers_through_a_worker_crash(broker, tmp_path):
    run_connect_cluster(broker, tmp_path)


@pytest.mark.skipif(not LONG, reason="a cluster with a broker SIGKILLed: TRAFKA_LONG_TESTS=1")
@pytest.mark.broker_kinds("kafka-cluster", "trafka-cluster")
def test_distributed_workers_through_worker_and_broker_crashes(broker, tmp_path):
    """On the three-broker clusters (RF=3, min.insync.replicas=2): the leader of the
    topic's partition is SIGKILLed together with the worker, and comes back later."""
    try:
        run_connect_cluster(broker, tmp_path, kill_broker=True)
    finally:
        broker.heal()
