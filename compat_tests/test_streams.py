"""Kafka Streams, unmodified, against the broker: exactly-once through crashes.

The application is compat_tests/jvm_apps/WordCountApp.java (compiled by the suite against
the `streams` classpath of .ci/jvm/pom.xml, Kafka Streams 4.x): a word count with a state
store behind a repartition topic, and a windowed word count, with
processing.guarantee=exactly_once_v2 and the record cache off, so every word read makes
exactly one update on each output topic.

Each scenario runs two instances of the application (one application.id, a state directory
each), feeds lines in while they run, SIGKILLs one instance mid-stream and starts it again
(on the clusters, also SIGKILLs a broker), and then reads both output topics with
read_committed: for every word the counts must be exactly 1, 2, ..., n (for every word and
window likewise) -- nothing lost, nothing twice, nothing from an aborted transaction.
This exercises what no client test does: transactions spanning a consumer group's
rebalances (the group's offsets committed in the producer's transaction, zombie fencing
through InitProducerId, the coordinator aborting a crashed instance's transaction on its
timeout), internal topics the application creates itself (repartition, compacted changelogs)
and state restored from a changelog.

Light variants (the default run): Kafka and Trafka single brokers, classic rebalance
protocol. With TRAFKA_LONG_TESTS=1: more records, the three-broker clusters with a broker
SIGKILLed as well, and Kafka with the streams protocol.

Kafka Streams 4.x's group protocols: "classic" and "streams" (KIP-1071, the streams
rebalance protocol; its main consumer cannot be switched to KIP-848's "consumer" protocol
on its own: Streams drops a `group.protocol` consumer setting). `test_streams_protocol`
runs the application with group.protocol=streams: on Kafka 4.4 it must produce the same
exact output; Trafka does not implement streams groups (StreamsGroupHeartbeat is not among
the APIs it advertises), so there the application must stop with Kafka's own "not
supported" error and the broker must keep serving.
"""

from __future__ import annotations

import os
import random
import struct
import threading
import time
from collections import Counter
from pathlib import Path

import pytest

from compat_tests.helpers import unique_name
from compat_tests.jvm_apps import JvmProcess, compile_app
from compat_tests.jvm_apps.topics import Producer, Rec, create_topics, end_offsets, read_all

LONG = os.environ.get("TRAFKA_LONG_TESTS", "") not in ("", "0")
LINES = 4000 if LONG else 400
WORDS_PER_LINE = 5
VOCABULARY = [f"w{i:02d}" for i in range(30)]
LINE_SPACING_MS = 50  # record timestamps: 200 lines per 10 s window
FEED_BATCH = 20  # lines per produce call of the feeder
FEED_PAUSE_S = 0.3  # between produce calls: the instances work while lines arrive
# Group and transaction timing short enough for a crash to be recovered from in seconds
# (the broker's group.min.session.timeout.ms is 6 s on both).
APP_SETTINGS = {
    "num.stream.threads": "1",
    "session.timeout.ms": "6000",
    "heartbeat.interval.ms": "1000",
    "producer.transaction.timeout.ms": "10000",
    # A transaction stays open a second: a crash always finds one with records in it.
    "commit.interval.ms": "1000",
    # Streams deletes consumed repartition records (DeleteRecords) every 30 s by default:
    # not while the scenario counts the aborted ones.
    "repartition.purge.interval.ms": "3600000",
}
SETTLE_S = 150.0 if LONG else 90.0
TXN_LOGGER = "org.apache.kafka.clients.producer.internals.TransactionManager"

pytestmark = [pytest.mark.compat(client="streams"), pytest.mark.timeout(600 if LONG else 240)]


def make_lines(n: int, seed: int) -> list[tuple[bytes, bytes, int]]:
    """n lines of WORDS_PER_LINE words, timestamped LINE_SPACING_MS apart and ending now:
    recent, so no broker's retention.ms (7 days) deletes them while the scenario runs."""
    rng = random.Random(seed)
    t0 = int(time.time() * 1000) - n * LINE_SPACING_MS
    return [(b"line-%d" % i, " ".join(rng.choice(VOCABULARY) for _ in range(WORDS_PER_LINE)).encode(),
             t0 + i * LINE_SPACING_MS) for i in range(n)]


def expected_counts(lines) -> tuple[Counter, Counter]:
    """(word -> n, "word@windowStart" -> n) for the lines fed in."""
    counts: Counter = Counter()
    windows: Counter = Counter()
    for _key, value, ts in lines:
        for word in value.decode().split(" "):
            counts[word] += 1
            windows[f"{word}@{ts - ts % 10_000}"] += 1
    return counts, windows


def assert_running_counts(topic: str, records: list[Rec], expected: Counter) -> None:
    """Per key, the values read are exactly 1, 2, ..., expected[key]: no update lost, none
    twice, none from an aborted transaction."""
    seen: dict[str, list[int]] = {}
    for r in records:
        seen.setdefault(r.key.decode(), []).append(struct.unpack(">q", r.value)[0])
    wrong = {key: _short(seen.get(key, [])) for key in expected
             if seen.get(key) != list(range(1, expected[key] + 1))}
    extra = sorted(set(seen) - set(expected))
    assert not wrong and not extra, (
        f"{topic}: {len(records)} records read, {sum(expected.values())} expected; "
        f"keys whose counts are not 1..n ({len(wrong)}): "
        + ", ".join(f"{k}: {v} (n={expected[k]})" for k, v in list(wrong.items())[:5])
        + (f"; unexpected keys: {extra[:5]}" if extra else ""))


def _short(values: list[int]) -> str:
    if len(values) <= 12:
        return str(values)
    return f"[{', '.join(map(str, values[:5]))}, ..., {', '.join(map(str, values[-5:]))}] ({len(values)})"


class WordCount:
    """The two-instance application of one scenario: its topics, instances and feeder."""

    def __init__(self, bootstrap: str, workdir: Path, protocol: str = "classic") -> None:
        self.bootstrap = bootstrap
        self.app_id = unique_name("wordcount")
        self.input, self.counts, self.windows = (f"{self.app_id}-{t}" for t in ("lines", "counts", "windows"))
        create_topics(bootstrap, {self.input: 4, self.counts: 2, self.windows: 2})
        classpath = compile_app("WordCountApp.java", "streams")
        self.instances = [
            JvmProcess(f"streams-{name}", workdir, classpath, "WordCountApp",
                       ["--input", self.input, "--counts", self.counts, "--windows", self.windows,
                        f"bootstrap.servers={bootstrap}", f"application.id={self.app_id}",
                        f"state.dir={workdir / ('state-' + name)}", f"group.protocol={protocol}",
                        *(f"{k}={v}" for k, v in APP_SETTINGS.items())],
                       heap_mb=256, loggers={"org.apache.kafka.streams.KafkaStreams": "INFO",
                                             # "Transition from state ... to ...": when to kill
                                             TXN_LOGGER: "DEBUG"})
            for name in ("a", "b")]
        self.lines = make_lines(LINES, seed=len(self.app_id))
        self.feeder: threading.Thread | None = None
        self.feed_error: BaseException | None = None

    def start_feeding(self) -> None:
        def feed():
            try:
                producer = Producer(self.bootstrap)
                for i in range(0, len(self.lines), FEED_BATCH):
                    producer.send(self.input, self.lines[i:i + FEED_BATCH])
                    time.sleep(FEED_PAUSE_S)
            except BaseException as exc:  # noqa: BLE001 - reported by wait_fed
                self.feed_error = exc

        self.feeder = threading.Thread(target=feed, name="streams-feeder", daemon=True)
        self.feeder.start()

    def wait_fed(self) -> None:
        assert self.feeder is not None
        self.feeder.join(SETTLE_S)
        assert not self.feeder.is_alive(), "the feeder did not finish"
        if self.feed_error:
            raise AssertionError(f"feeding lines failed: {self.feed_error!r}")

    def wait_output(self, topic: str, n: int, timeout: float) -> list[Rec]:
        """Read `topic` (read_committed) until it holds `n` records; the last read when not."""
        deadline = time.monotonic() + timeout
        while True:
            records = read_all(self.bootstrap, topic)
            if len(records) >= n or time.monotonic() > deadline:
                return records
            for instance in self.instances:
                if "FATAL" in instance.output():
                    raise AssertionError(f"{instance.name} died:\n{instance.log_tail()}")
            time.sleep(1.0)

    def written_topics(self) -> list[str]:
        """Every topic the application writes in its transactions."""
        return [self.counts, self.windows, f"{self.app_id}-words-repartition",
                f"{self.app_id}-word-counts-changelog", f"{self.app_id}-windowed-counts-changelog"]

    def stop(self) -> None:
        for instance in self.instances:
            instance.stop()

    def logs(self) -> str:
        return "\n".join(f"--- {i.name} ---\n{i.log_tail(30)}" for i in self.instances)


@pytest.fixture
def workdir(tmp_path: Path) -> Path:
    return tmp_path


def run_through_a_crash(broker, workdir: Path, protocol: str = "classic",
                        kill_broker: bool = False) -> None:
    app = WordCount(broker.bootstrap, workdir, protocol)
    a, b = app.instances
    try:
        for instance in app.instances:
            instance.start()
        for instance in app.instances:
            instance.wait_for_log(r"^STATE RUNNING", 90)
        app.start_feeding()
        # Mid-stream: lines are still arriving and both instances have produced output.
        first = max(20, LINES // 10)
        records = app.wait_output(app.counts, first, 60)
        assert len(records) >= first, f"no progress on {app.counts}:\n{app.logs()}"
        # SIGKILL while its producer is in a transaction it has sent records in: it begins
        # one at the first record after a commit, which comes a commit.interval.ms later.
        a.wait_for_log(r"Transition from state READY to IN_TRANSACTION", 60, since=len(a.output()))
        time.sleep(0.3)
        a.kill()
        if kill_broker:
            victim = broker.kill_leader(app.counts, 0)
        a.start()
        a.wait_for_log(r"^STATE RUNNING", 90)
        if kill_broker:
            # back once another broker leads (its ZooKeeper session expired: a Kafka broker
            # cannot register again before)
            broker.wait_leader(app.counts, 0, not_in=(victim,))
            broker.start(victim)
        app.wait_fed()
        counts, windows = expected_counts(app.lines)
        app.wait_output(app.counts, sum(counts.values()), SETTLE_S)
        app.wait_output(app.windows, sum(windows.values()), SETTLE_S)
        # A clean stop commits or aborts every open transaction: then read everything.
        app.stop()
        for instance in app.instances:
            assert "FATAL" not in instance.output(), f"{instance.name}:\n{instance.log_tail()}"
        assert_running_counts(app.counts, read_all(broker.bootstrap, app.counts), counts)
        # The crash hit an open transaction: its records are in the log, aborted, in at
        # least one of the topics the application writes.
        aborted = {topic: len(read_all(broker.bootstrap, topic, isolation_level="read_uncommitted"))
                   - len(read_all(broker.bootstrap, topic)) for topic in app.written_topics()}
        assert any(aborted.values()), (
            f"no aborted records in {aborted}: the crash found no open transaction, so the "
            "scenario proved nothing; log end offsets: "
            + str({t: end_offsets(broker.bootstrap, t) for t in app.written_topics()}))
    except BaseException:
        print(app.logs())
        raise
    finally:
        app.stop()


@pytest.mark.broker_kinds("kafka", "trafka")
def test_word_count_exactly_once_through_an_instance_crash(broker, workdir):
    run_through_a_crash(broker, workdir)


@pytest.mark.skipif(not LONG, reason="a cluster with a broker SIGKILLed: TRAFKA_LONG_TESTS=1")
@pytest.mark.broker_kinds("kafka-cluster", "trafka-cluster")
def test_word_count_exactly_once_through_instance_and_broker_crashes(broker, workdir):
    """On the three-broker clusters (every topic RF=3, min.insync.replicas=2): the leader
    of an output partition is SIGKILLed as well, while the instance is down, and comes
    back once the instance runs again."""
    try:
        run_through_a_crash(broker, workdir, kill_broker=True)
    finally:
        broker.heal()


@pytest.mark.skipif(not LONG, reason="Kafka alone, the reference for what Trafka answers "
                    "unsupported: TRAFKA_LONG_TESTS=1")
@pytest.mark.broker_kinds("kafka")
def test_streams_protocol_exactly_once_through_an_instance_crash(broker, workdir):
    """KIP-1071's streams rebalance protocol (group.protocol=streams): Kafka 4.4 runs it."""
    run_through_a_crash(broker, workdir, protocol="streams")


@pytest.mark.broker_kinds("trafka")
def test_streams_protocol_is_answered_unsupported(broker, workdir):
    """Trafka has no streams groups: it does not advertise StreamsGroupHeartbeat, so the
    application stops at once with Kafka Streams' own "not supported" error, as it would
    against a Kafka cluster without the streams protocol, and the broker serves on
    (the `broker` fixture fails the test if it died)."""
    app = WordCount(broker.bootstrap, workdir, protocol="streams")
    instance = app.instances[0]
    try:
        instance.start()
        instance.wait_for_log(r"^STATE ERROR", 60)
        out = instance.output()
        assert "The node does not support STREAMS_GROUP_HEARTBEAT" in out, instance.log_tail()
        assert ("UnsupportedVersionException: The cluster does not support the STREAMS group "
                "protocol") in out, instance.log_tail()
    finally:
        app.stop()

