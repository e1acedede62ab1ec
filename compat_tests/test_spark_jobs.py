"""The shipped jobs of spark_jobs/ end to end, through Spark's Kafka connector, against the
broker under test (Apache Kafka and Trafka alike): generate, events_to_aggregates, replay,
topic_archive, avro_pipeline and mirror.

Each job runs through its own command line (`main(argv)`), as an operator runs it. All but
the mirror run in this process, on the session every Spark test shares (one JVM: Spark takes
seconds to start on two cores); the mirror runs as a process of its own because it is
SIGKILLed mid-run. Topics carry unique names, so the jobs share the session's broker with the
other scenarios; a test that restarts a broker gets one of its own (`fresh_broker`).
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
from collections import Counter
from datetime import datetime, timezone
from pathlib import Path

import pytest

from compat_tests import jvm, spark_kit
from compat_tests.helpers import unique_name
from compat_tests.spark_kit import (
    PRODUCER_TWEAKS,
    SINK_TWEAKS,
    T0,
    WAIT_S,
    Admin,
    produce,
    read,
    rows_of,
)

spark_kit.require("pyspark")

pytestmark = [
    pytest.mark.compat(client="spark"),
    pytest.mark.timeout(300),
]

REPO = Path(__file__).resolve().parent.parent


@pytest.fixture(scope="module")
def spark():
    return spark_kit.session("trafka-compat-spark")


@pytest.fixture
def admin(broker) -> Admin:
    return Admin(broker.bootstrap)


def iso_utc_ms(epoch_ms: int) -> str:
    return datetime.fromtimestamp(epoch_ms / 1000, tz=timezone.utc).isoformat(timespec="milliseconds")


# --------------------------------------------------------------------------- generate + aggregates


def test_events_to_aggregates_restart(spark, broker, admin, tmp_path):
    """`spark_jobs.generate` writes click events, the `events_to_aggregates` job turns them
    into exact windowed counts, in Kafka and Parquet. The query is stopped mid-stream and
    restarted from its checkpoint; the Parquet output then has every closed window exactly
    once."""
    from pyspark.sql import functions as F

    from spark_jobs import events_to_aggregates as job
    from spark_jobs import generate
    from spark_jobs.generate import iso_ms, make_events, reference_counts

    events_topic = admin.create_topic(unique_name("spark-events"), 3)
    out_topic = admin.create_topic(unique_name("spark-aggregates"), 2)
    shape = dict(start_ms=T0, spacing_ms=400, skew_ms=30_000, users=60, seed=11)
    assert generate.main(
        ["--bootstrap", broker.bootstrap, "--topic", events_topic, "--count", "1500",
         "--start", iso_ms(T0), "--spacing-ms", "400", "--skew-ms", "30000", "--users", "60", "--seed", "11"]
        + [f"-P{k}={v}" for k, v in PRODUCER_TWEAKS.items()]
    ) == 0
    # The same arguments give the same events: the reference is computed from them.
    expected = reference_counts(make_events(1500, **shape), 60_000, watermark_ms=120_000)

    argv = [
        "--bootstrap", broker.bootstrap,
        "--topic", events_topic,
        "--output-topic", out_topic,
        "--parquet", str(tmp_path / "parquet"),
        "--checkpoint", str(tmp_path / "ckpt"),
        "--window", "1 minute",
        "--watermark", "2 minutes",
        "--max-offsets-per-trigger", "200",
    ] + [f"-K{k.removeprefix('kafka.')}={v}" for k, v in SINK_TWEAKS.items()]
    # Run 1: interval trigger, stopped as soon as the Parquet query has committed a few
    # batches and the Kafka one at least one (the two progress independently: waiting for
    # both to reach the same count lets the faster one finish the topic).
    queries = job.start_queries(spark, job.parse_args(argv + ["--trigger", "200 milliseconds"]))
    parquet_query = next(q for q in queries if q.name.endswith("-parquet"))
    try:
        deadline = time.monotonic() + WAIT_S
        while not (len(parquet_query.recentProgress) >= 3 and all(q.recentProgress for q in queries)):
            assert all(q.isActive for q in queries), [q.exception() for q in queries]
            assert time.monotonic() < deadline, "queries made no progress"
            time.sleep(0.1)
    finally:
        for q in queries:
            q.stop()
    midway = spark.read.parquet(str(tmp_path / "parquet")).count()
    assert midway < len(expected), "stopped too late to test a restart"

    # Run 2: the same checkpoints, availableNow, through the job's command line: finishes
    # the topic and stops.
    assert job.main(argv + ["--trigger", "available-now"]) == 0

    windows = [
        ((r["s"], r["page"], r["action"]), r["count"])
        for r in spark.read.parquet(str(tmp_path / "parquet"))
        .select(F.unix_millis("window_start").alias("s"), "page", "action", "count")
        .collect()
    ]
    duplicates = [k for k, n in Counter(k for k, _ in windows).items() if n > 1]
    assert not duplicates, f"windows written twice: {duplicates[:5]}"
    assert dict(windows) == expected  # and none missing, none with a wrong count

    # Kafka sink: at-least-once, so a batch interrupted by the stop may be written twice;
    # the distinct records are exactly the expected aggregates.
    published = {}
    for r in rows_of(read(spark, broker.bootstrap, subscribe=out_topic)):
        value = json.loads(r["value"])
        start_ms = int(datetime.fromisoformat(value["window_start"].replace("Z", "+00:00")).timestamp() * 1000)
        assert r["key"].decode() == f"{iso_ms(start_ms)}|{value['page']}"
        key = (start_ms, value["page"], value["action"])
        assert published.setdefault(key, value["count"]) == value["count"]
    assert published == expected


# --------------------------------------------------------------------------- replay


def test_replay_job(spark, broker, admin, tmp_path):
    """`spark_jobs.replay` between two timestamps (ListOffsets by timestamp at both ends):
    its JSON report has exactly the records whose timestamps fall in [start, end), per
    partition with their offset and timestamp ranges, and the most frequent keys."""
    from spark_jobs import replay

    topic = admin.create_topic(unique_name("spark-replay"), 3)
    produce(broker.bootstrap, topic, [
        (p, f"user-{i % 4}".encode(), f"p{p}-{i}".encode(), [("i", str(i).encode())], T0 + i * 1000)
        for p in range(3) for i in range(20)
    ])
    out = tmp_path / "report.json"
    assert replay.main(["--bootstrap", broker.bootstrap, "--topic", topic,
                        "--starting-timestamp", str(T0 + 5_000), "--ending-timestamp", iso_utc_ms(T0 + 15_000),
                        "--top-keys", "3", "--output", str(out)]) == 0
    report = json.loads(out.read_text())
    # Offsets 5..14 of each partition; keys user-(i % 4): 1 and 2 three times per
    # partition, 0 and 3 twice.
    assert report == {
        "records": 30,
        "distinct_keys": 4,
        "partitions": [
            {"topic": topic, "partition": p, "count": 10, "first_offset": 5, "last_offset": 14,
             "first_timestamp": iso_utc_ms(T0 + 5_000), "last_timestamp": iso_utc_ms(T0 + 14_000)}
            for p in range(3)
        ],
        "top_keys": [
            {"topic": topic, "key": "user-1", "count": 9, "partitions": [0, 1, 2]},
            {"topic": topic, "key": "user-2", "count": 9, "partitions": [0, 1, 2]},
            {"topic": topic, "key": "user-0", "count": 6, "partitions": [0, 1, 2]},
        ],
    }


# --------------------------------------------------------------------------- topic_archive


def test_topic_archive_job(spark, broker, admin, tmp_path):
    """`spark_jobs.topic_archive`: a batch run writes every record (key, value, headers,
    offsets) to Parquet partitioned by the record's UTC date; the streaming mode, run twice
    with availableNow over one checkpoint with records produced in between, archives each
    record exactly once."""
    from spark_jobs import topic_archive

    topic = admin.create_topic(unique_name("spark-archive"), 2)
    first = [(p, f"k{i}".encode(), f"v{p}-{i}".encode(), [("n", str(i).encode()), ("empty", b"")], T0 + i * 60_000)
             for p in range(2) for i in range(12)]
    produce(broker.bootstrap, topic, first)

    batch_out = tmp_path / "batch"
    assert topic_archive.main(["--bootstrap", broker.bootstrap, "--topic", topic, "--output", str(batch_out),
                               "--headers"]) == 0
    rows = spark.read.parquet(str(batch_out)).collect()
    got = sorted((r["partition"], r["offset"], r["key"], r["value"],
                  tuple((h["key"], bytes(h["value"])) for h in r["headers"]), str(r["date"])) for r in rows)
    # Offsets are dense from 0 per partition: record i of a partition is at offset i.
    want = sorted((p, i, f"k{i}", f"v{p}-{i}", (("n", str(i).encode()), ("empty", b"")), iso_utc_ms(T0 + i * 60_000)[:10])
                  for p in range(2) for i in range(12))
    assert got == want
    assert {d.name for d in batch_out.iterdir() if d.name.startswith("date=")} == {
        f"date={iso_utc_ms(ts)[:10]}" for *_, ts in first}

    stream_out, ckpt = tmp_path / "stream", tmp_path / "ckpt"
    argv = ["--bootstrap", broker.bootstrap, "--topic", topic, "--output", str(stream_out),
            "--streaming", "--checkpoint", str(ckpt), "--trigger", "available-now",
            "--max-offsets-per-trigger", "10"]
    assert topic_archive.main(argv) == 0
    assert spark.read.parquet(str(stream_out)).count() == len(first)
    later = [(p, None, f"later-{p}-{i}".encode(), None, T0 + 3_600_000 + i) for p in range(2) for i in range(5)]
    produce(broker.bootstrap, topic, later)
    assert topic_archive.main(argv) == 0
    archived = Counter((r["partition"], r["offset"], r["value"]) for r in spark.read.parquet(str(stream_out)).collect())
    assert all(n == 1 for n in archived.values()), "a record archived twice"
    assert {(p, o) for p, o, _ in archived} == {(p, o) for p in range(2) for o in range(17)}
    assert {v for *_, v in archived} == {v.decode() for _, _, v, _, _ in first + later}


# --------------------------------------------------------------------------- avro_pipeline


AVRO_CLICK = {
    "type": "record", "name": "Click", "namespace": "t",
    "fields": [{"name": "user", "type": "string"}, {"name": "page", "type": "string"}, {"name": "n", "type": "long"}],
}


@pytest.fixture
def registry(tmp_path):
    """Trafka's Schema Registry, on a Trafka broker of its own: Apache Kafka has none, and the
    pipeline takes the registry's URL apart from the bootstrap of the broker under test."""
    spark_kit.require("pyarrow", "pandas UDFs need pyarrow (the 'spark' extra)")
    from tests.schema_registry.conftest import RegistryBroker

    with RegistryBroker(tmp_path / "registry") as registry_broker:
        yield registry_broker.url


def test_avro_pipeline_job(spark, broker, admin, registry):
    """`spark_jobs.avro_pipeline`: confluent-kafka writes registry-encoded Avro clicks, the
    job filters and reshapes them, confluent-kafka reads the output with the schema the job
    registered; keys pass through."""
    from confluent_kafka import Consumer, Producer, TopicPartition
    from confluent_kafka.schema_registry import SchemaRegistryClient
    from confluent_kafka.schema_registry.avro import AvroDeserializer, AvroSerializer
    from confluent_kafka.serialization import MessageField, SerializationContext

    from spark_jobs import avro_pipeline

    clicks_topic = admin.create_topic(unique_name("spark-clicks"), 2)
    out_topic = admin.create_topic(unique_name("spark-checkout"), 1)
    sr = SchemaRegistryClient({"url": registry})
    ser = AvroSerializer(sr, json.dumps(AVRO_CLICK))
    producer = Producer({"bootstrap.servers": broker.bootstrap})
    clicks = [{"user": f"u{i}", "page": "/checkout" if i % 3 == 0 else "/home", "n": i} for i in range(90)]
    for i, c in enumerate(clicks):
        producer.produce(clicks_topic, key=b"k%d" % i,
                         value=ser(c, SerializationContext(clicks_topic, MessageField.VALUE)))
    assert producer.flush(30) == 0

    assert avro_pipeline.main(["--bootstrap", broker.bootstrap, "--registry", registry,
                               "--input-topic", clicks_topic, "--output-topic", out_topic,
                               "--where", "page = '/checkout'", "--select", "user, n * 2 AS weight"]) == 0

    deser = AvroDeserializer(SchemaRegistryClient({"url": registry}))
    consumer = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": unique_name("check")})
    consumer.assign([TopicPartition(out_topic, 0, 0)])
    got = {}
    deadline = time.monotonic() + 30
    try:
        while len(got) < 30 and time.monotonic() < deadline:
            msg = consumer.poll(1.0)
            if msg is not None and not msg.error():
                got[msg.key()] = deser(msg.value(), SerializationContext(out_topic, MessageField.VALUE))
    finally:
        consumer.close()
    assert got == {b"k%d" % i: {"user": c["user"], "weight": 2 * c["n"]}
                   for i, c in enumerate(clicks) if c["page"] == "/checkout"}
    registered = json.loads(sr.get_latest_version(f"{out_topic}-value").schema.schema_str)
    assert [f["name"] for f in registered["fields"]] == ["user", "weight"]


# --------------------------------------------------------------------------- mirror


class MirrorRun:
    """`python -m spark_jobs.mirror` as a process of its own, from `source` to `target`."""

    def __init__(self, source: str, target, topics: dict[str, int], checkpoint: Path, log: Path) -> None:
        self.source, self.target, self.topics = source, target, topics
        self.checkpoint, self.log = checkpoint, log
        self.job: subprocess.Popen | None = None
        self.regex = "|".join(re.escape(t) for t in topics)

    def start(self) -> None:
        with open(self.log, "ab") as log:
            # A session of its own: the job's Spark JVM is its child, and a kill takes both.
            self.job = subprocess.Popen(
                [sys.executable, "-m", "spark_jobs.mirror", "--source", self.source,
                 "--target", self.target.bootstrap, "--topics-regex", self.regex,
                 "--checkpoint", str(self.checkpoint), "--trigger", "500 milliseconds",
                 "--max-offsets-per-trigger", "150", "--offsets-topic", "mm2-offset-syncs.target.internal"],
                cwd=REPO, stdout=log, stderr=subprocess.STDOUT, start_new_session=True,
                env={**os.environ, "PYTHONPATH": str(REPO)},
            )

    def kill(self) -> None:
        """SIGKILL the job's process group (Python driver and Spark JVM): a crash."""
        assert self.job is not None
        os.killpg(self.job.pid, signal.SIGKILL)
        self.job.wait(30)

    def stop(self) -> None:
        if self.job is None:
            return
        if self.job.poll() is None:
            self.job.send_signal(signal.SIGTERM)
            try:
                self.job.wait(60)
            except subprocess.TimeoutExpired:
                pass
        try:  # whatever is left of the group (the JVM exits on its own once the driver is gone)
            os.killpg(self.job.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        self.job.wait(30)

    def wait(self, predicate, what: str, timeout: float = 240) -> None:
        deadline = time.monotonic() + timeout
        while not predicate():
            assert self.job is not None
            if self.job.poll() is not None:
                raise AssertionError(f"mirror exited {self.job.returncode} before {what}:\n"
                                     f"{self.log.read_text()[-4000:]}")
            if time.monotonic() > deadline:
                raise AssertionError(f"timed out waiting for {what}:\n{self.log.read_text()[-4000:]}")
            time.sleep(0.5)

    def target_count(self) -> int:
        from confluent_kafka import Consumer, KafkaException, TopicPartition

        consumer = Consumer({"bootstrap.servers": self.target.bootstrap, "group.id": unique_name("count")})
        try:
            return sum(consumer.get_watermark_offsets(TopicPartition(t, p), timeout=10)[1]
                       for t, n in self.topics.items() for p in range(n))
        except KafkaException:
            return -1  # the target is restarting, or the job has not created the topic yet
        finally:
            consumer.close()


def _mirror_produce(bootstrap: str, topics: dict[str, int], start: int, count: int) -> list[tuple]:
    from confluent_kafka import Producer

    clicks, orders = topics
    producer = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True, "linger.ms": 5})
    sent = []
    for i in range(start, start + count):
        topic = clicks if i % 4 else orders
        partition = i % topics[topic]
        key = None if i % 10 == 3 else b"user-%d" % (i % 17)
        value = None if i % 25 == 7 else b"event-%d" % i
        headers = [("seq", b"%d" % i), ("trace", None)] if i % 2 else []
        producer.produce(topic, value=value, key=key, partition=partition, timestamp=T0 + i * 1000,
                         headers=headers)
        sent.append((topic, partition, key, value, T0 + i * 1000, tuple(headers)))
    assert producer.flush(30) == 0
    return sent


def _read_all(bootstrap: str, topics: dict[str, int]) -> list[tuple]:
    from confluent_kafka import Consumer, TopicPartition

    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": unique_name("check"),
                         "enable.auto.commit": False})
    out = []
    try:
        for topic, partitions in topics.items():
            for p in range(partitions):
                _, high = consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=10)
                consumer.assign([TopicPartition(topic, p, 0)])
                got = 0
                deadline = time.monotonic() + 30
                while got < high and time.monotonic() < deadline:
                    msg = consumer.poll(1.0)
                    if msg is None or msg.error():
                        continue
                    got = msg.offset() + 1
                    out.append((topic, p, msg.key(), msg.value(), msg.timestamp()[1],
                                tuple(msg.headers() or ()), msg.offset()))
    finally:
        consumer.close()
    return out


@pytest.fixture
def connector_jars():
    """The connector's folder, exported as SPARK_KAFKA_JARS for a job started as a process."""
    try:
        return spark_kit.connector_folder()
    except jvm.JvmUnavailable as exc:
        spark_kit.unavailable(f"Spark's Kafka connector (.ci/jvm/pom.xml module spark-kafka): {exc}")


def test_mirror_survives_job_kill_and_target_restart(connector_jars, broker, admin, fresh_broker, tmp_path):
    """`python -m spark_jobs.mirror` from the session's broker to a broker of its own. It is
    SIGKILLed mid-run (Spark's checkpoint then replays the batch in flight) and, in its
    second run, the target is restarted under it; afterwards every source record is in the
    target exactly once, in its partition, with key, value, headers and timestamp, and the
    offset syncs map the last source offset of each partition to its target offset."""
    from spark_jobs.mirror import decode_sync

    prefix = unique_name("m")
    topics = {f"{prefix}.clicks": 3, f"{prefix}.orders": 1}
    for topic, partitions in topics.items():
        admin.create_topic(topic, partitions)
    run = MirrorRun(broker.bootstrap, fresh_broker, topics, tmp_path / "ckpt", tmp_path / "mirror.log")
    sent = _mirror_produce(broker.bootstrap, topics, 0, 600)
    run.start()
    try:
        run.wait(lambda: run.target_count() >= 150, "the first batches")
        run.kill()  # mid-run: a batch may be half written
        sent += _mirror_produce(broker.bootstrap, topics, 600, 300)
        run.start()
        run.wait(lambda: run.target_count() >= 450, "the second run's batches")
        fresh_broker.restart()
        run.wait(lambda: run.target_count() >= len(sent), "every record")
        time.sleep(3)  # a duplicate would land now
    finally:
        run.stop()

    got = _read_all(fresh_broker.bootstrap, topics)
    assert len(got) == len(sent)
    assert Counter(g[:6] for g in got) == Counter(sent)  # each once, in its partition, all kept
    # Per partition, the source order is the target order.
    for topic, partitions in topics.items():
        for p in range(partitions):
            ours = [g[3] for g in sorted((g for g in got if g[:2] == (topic, p)), key=lambda g: g[6])]
            assert ours == [s[3] for s in sent if s[:2] == (topic, p)]
    syncs = {}
    for rec in _read_all(fresh_broker.bootstrap, {"mm2-offset-syncs.target.internal": 1}):
        tp, offsets = decode_sync(rec[2], rec[3])
        syncs[tp] = offsets
    for topic, partitions in topics.items():
        for p in range(partitions):
            n = sum(1 for s in sent if s[:2] == (topic, p))
            assert syncs[(topic, p)] == (n - 1, n - 1)
