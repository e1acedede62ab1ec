"""Spark's own Kafka connector against the broker under test, end to end.

The client here is Spark 4.0's ``spark-sql-kafka-0-10`` on the Java kafka-clients 3.9: the
driver plans offsets with the Admin client (describeTopics, listOffsets: earliest, latest,
by timestamp), executors read with an assigned, seeked KafkaConsumer, and the sink writes
with an idempotent KafkaProducer (acks=all). Nothing is adapted to the broker: these are the
options a Spark user sets, with Spark's documented meaning (Structured Streaming + Kafka
Integration Guide, "Creating a Kafka Source for Batch Queries" and the options tables).

The connector is not on PyPI, so these tests need its jars in a folder named by
``SPARK_KAFKA_JARS`` (see spark_jobs/README.md) and are skipped without it. Topics are
created, and records deleted, with a real admin client (confluent-kafka); reference records
are produced with confluent-kafka too, so a scenario about Spark's reader does not depend on
Spark's writer.
"""

from __future__ import annotations

import json
import os
import shutil
import time
import uuid
from collections import Counter
from datetime import datetime
from pathlib import Path

import pytest

from compat_tests.helpers import unique_name

pytest.importorskip("pyspark", reason="pyspark not installed (extra 'spark')")

from spark_jobs.kafka_io import KAFKA_SOURCE_SCHEMA, load_kafka  # noqa: E402

SKIP_REASON = "SPARK_KAFKA_JARS not set (Spark's Kafka connector is not on PyPI; see README)"

pytestmark = [
    pytest.mark.skipif(not os.environ.get("SPARK_KAFKA_JARS"), reason=SKIP_REASON),
    pytest.mark.compat(client="spark"),
    # Spark plans, schedules and polls: a scenario takes seconds, not milliseconds.
    pytest.mark.timeout(300),
]

# Diagnostic only, never the default: one record per batch in every producer the tests use
# (confluent-kafka and Spark's sink). Tansu 0.6.0 reports a high watermark of "last batch's
# base offset + 1", so with normal batching Spark's end offsets are short; this setting
# separates that one bug from everything else a scenario checks.
ONE_RECORD_BATCHES = os.environ.get("SPARK_COMPAT_ONE_RECORD_BATCHES") == "1"
PRODUCER_TWEAKS = {"batch.num.messages": 1, "linger.ms": 0} if ONE_RECORD_BATCHES else {}
SINK_TWEAKS = {"kafka.batch.size": "0"} if ONE_RECORD_BATCHES else {}

T0 = 1_740_830_400_000  # 2025-03-01T12:00:00Z: explicit record timestamps start here
WAIT_S = 120.0  # upper bound for any one streaming query to finish


# --------------------------------------------------------------------------- fixtures


@pytest.fixture(scope="module")
def spark():
    from spark_jobs.session import build_session

    # The tests' shuffles are tiny; Kafka client timeouts stay Spark's defaults on purpose.
    return build_session("trafka-compat-spark", connector=True)


class Admin:
    """Topic creation, DeleteRecords and offsets through confluent-kafka's AdminClient."""

    def __init__(self, bootstrap: str) -> None:
        from confluent_kafka.admin import AdminClient

        self.bootstrap = bootstrap
        self.client = AdminClient({"bootstrap.servers": bootstrap})

    def create_topic(self, name: str, partitions: int) -> str:
        from confluent_kafka.admin import NewTopic

        for future in self.client.create_topics(
            [NewTopic(name, num_partitions=partitions, replication_factor=1)], operation_timeout=30
        ).values():
            future.result(timeout=30)
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:  # until Metadata shows every partition
            topics = self.client.list_topics(name, timeout=10).topics
            if name in topics and topics[name].error is None and len(topics[name].partitions) == partitions:
                return name
            time.sleep(0.2)
        raise AssertionError(f"topic {name} not visible with {partitions} partitions after 30 s")

    def delete_records(self, topic: str, before: dict[int, int]) -> dict[int, int]:
        """DeleteRecords up to ``before[partition]``; returns the new low watermarks."""
        from confluent_kafka import TopicPartition

        futures = self.client.delete_records(
            [TopicPartition(topic, p, o) for p, o in before.items()], request_timeout=30
        )
        return {tp.partition: f.result(timeout=30).low_watermark for tp, f in futures.items()}

    def watermarks(self, topic: str, partitions: int) -> dict[int, tuple[int, int]]:
        from confluent_kafka import Consumer, TopicPartition

        consumer = Consumer({"bootstrap.servers": self.bootstrap, "group.id": unique_name("wm")})
        try:
            return {
                p: consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=10)
                for p in range(partitions)
            }
        finally:
            consumer.close()


@pytest.fixture
def admin(broker) -> Admin:
    return Admin(broker.bootstrap)


Record = tuple  # (partition, key, value, headers, timestamp_ms)


def produce(bootstrap: str, topic: str, records: list[Record]) -> None:
    """Produce with confluent-kafka (idempotent, acks=all), each record to its partition."""
    from confluent_kafka import Producer

    producer = Producer(
        {
            "bootstrap.servers": bootstrap,
            "enable.idempotence": True,
            "acks": "all",
            "linger.ms": 5,
            **PRODUCER_TWEAKS,
        }
    )
    failures: list[str] = []
    for partition, key, value, headers, ts in records:
        producer.produce(
            topic,
            key=key,
            value=value,
            partition=partition,
            headers=list(headers) if headers else None,
            timestamp=ts or 0,
            on_delivery=lambda err, _msg: err and failures.append(str(err)),
        )
        producer.poll(0)
    assert producer.flush(30) == 0, "records still undelivered after 30 s"
    assert not failures, failures[:3]


def numbered(partitions: int, per_partition: int, *, ts_step_ms: int = 1000) -> list[Record]:
    """Records 'p<p>-<i>' with timestamps T0 + i * step, partition by partition."""
    return [
        (p, f"k{p}-{i}".encode(), f"p{p}-{i}".encode(), None, T0 + i * ts_step_ms)
        for p in range(partitions)
        for i in range(per_partition)
    ]


def _b(value) -> bytes | None:
    return None if value is None else bytes(value)


def rows_of(df) -> list[dict]:
    """Collected Kafka source rows as plain dicts (bytes, not bytearray), in log order."""
    out = []
    for r in df.collect():
        d = r.asDict()
        d["key"], d["value"] = _b(d["key"]), _b(d["value"])
        if d.get("headers") is not None:
            d["headers"] = [(h["key"], _b(h["value"])) for h in d["headers"]]
        out.append(d)
    return sorted(out, key=lambda d: (d["topic"], d["partition"], d["offset"]))


def _source_options(bootstrap: str, options: dict) -> dict[str, str]:
    """Kafka source options; dict values (per-partition offsets, assign) become JSON."""
    out = {"kafka.bootstrap.servers": bootstrap}
    out.update({k: v if isinstance(v, str) else json.dumps(v) for k, v in options.items()})
    return out


def read(spark, bootstrap: str, **options):
    return load_kafka(spark, _source_options(bootstrap, options), streaming=False)


def read_stream(spark, bootstrap: str, **options):
    return load_kafka(spark, _source_options(bootstrap, options), streaming=True)


class QueryFailed(Exception):
    """A streaming query ended with an exception (its message is Spark's)."""


def run_available_now(df, checkpoint: Path, name: str):
    """Run ``df`` with trigger(availableNow) and a checkpoint; return (rows, progresses).

    Rows are collected per micro-batch with foreachBatch: unlike the memory sink, it lets a
    query restart from its checkpoint, which the resume scenarios need.
    """
    from pyspark.errors import StreamingQueryException

    collected: list[dict] = []
    query = (
        df.writeStream.queryName(name)
        .foreachBatch(lambda batch, _batch_id: collected.extend(rows_of(batch)))
        .option("checkpointLocation", str(checkpoint))
        .trigger(availableNow=True)
        .start()
    )
    try:
        finished = query.awaitTermination(WAIT_S)
    except StreamingQueryException as exc:
        raise QueryFailed(str(exc)) from None
    finally:
        if query.isActive:
            query.stop()
    assert finished, f"availableNow query did not finish in {WAIT_S} s"
    rows = sorted(collected, key=lambda d: (d["topic"], d["partition"], d["offset"]))
    return rows, query.recentProgress


def offsets_by_partition(rows: list[dict]) -> dict[int, list[int]]:
    out: dict[int, list[int]] = {}
    for r in rows:
        out.setdefault(r["partition"], []).append(r["offset"])
    return out


def query_name() -> str:
    return "q_" + uuid.uuid4().hex[:12]


# --------------------------------------------------------------------------- scenarios


def test_sink_round_trip_batch_read(spark, broker, admin):
    """Spark's sink writes N rows with key, value, headers, a partition and a topic column;
    a batch read returns exactly those N rows, offsets dense from 0 in every partition."""
    topics = [admin.create_topic(unique_name("spark-sink-a"), 3), admin.create_topic(unique_name("spark-sink-b"), 2)]
    n = 300
    rows = []
    for i in range(n):
        topic = topics[i % 2]
        headers = [("seq", str(i).encode()), ("null", None), ("seq", b"dup")] if i % 3 else []
        key = None if i % 17 == 0 else f"key-{i}".encode()
        value = json.dumps({"i": i, "pad": "x" * (i % 50)}).encode()
        rows.append((key, value, headers, topic, i % (3 if topic == topics[0] else 2)))
    df = spark.createDataFrame(
        rows,
        "key binary, value binary, headers array<struct<key:string,value:binary>>, "
        "topic string, partition int",
    )
    df.write.format("kafka").option("kafka.bootstrap.servers", broker.bootstrap).options(**SINK_TWEAKS).save()

    back = rows_of(read(spark, broker.bootstrap, subscribe=",".join(topics), includeHeaders="true"))
    assert len(back) == n
    sent = Counter((k, v, tuple(h), t, p) for k, v, h, t, p in rows)
    # A record without headers reads back with headers = null (Spark's row converter).
    got = Counter((r["key"], r["value"], tuple(r["headers"] or ()), r["topic"], r["partition"]) for r in back)
    assert got == sent
    for (topic, partition), count in Counter((r[3], r[4]) for r in rows).items():
        offsets = [r["offset"] for r in back if r["topic"] == topic and r["partition"] == partition]
        assert offsets == list(range(count)), f"{topic}/{partition} offsets not dense"


def test_read_stream_available_now_gets_all(spark, broker, admin, tmp_path):
    """readStream + trigger(availableNow=True) reads everything there at start, then stops."""
    topic = admin.create_topic(unique_name("spark-avail"), 3)
    records = numbered(3, 70)
    produce(broker.bootstrap, topic, records)
    rows, progress = run_available_now(
        read_stream(spark, broker.bootstrap, subscribe=topic, startingOffsets="earliest"),
        tmp_path / "ckpt",
        query_name(),
    )
    assert len(rows) == len(records)
    assert {(r["partition"], r["key"], r["value"]) for r in rows} == {(p, k, v) for p, k, v, _, _ in records}
    assert sum(p["numInputRows"] for p in progress) == len(records)
    assert {p: len(o) for p, o in offsets_by_partition(rows).items()} == {0: 70, 1: 70, 2: 70}


def test_starting_and_ending_offsets(spark, broker, admin):
    """Batch: earliest..latest is everything; per-partition JSON offsets, with -2 (earliest)
    and -1 (latest), select exactly [start, end) in each partition."""
    topic = admin.create_topic(unique_name("spark-offsets"), 3)
    produce(broker.bootstrap, topic, numbered(3, 40))

    everything = rows_of(read(spark, broker.bootstrap, subscribe=topic, startingOffsets="earliest", endingOffsets="latest"))
    assert {p: o for p, o in offsets_by_partition(everything).items()} == {p: list(range(40)) for p in range(3)}

    ranged = rows_of(
        read(
            spark,
            broker.bootstrap,
            subscribe=topic,
            startingOffsets={topic: {"0": 5, "1": -2, "2": 39}},
            endingOffsets={topic: {"0": 20, "1": -1, "2": 40}},
        )
    )
    assert offsets_by_partition(ranged) == {0: list(range(5, 20)), 1: list(range(40)), 2: [39]}
    assert all(r["value"] == f"p{r['partition']}-{r['offset']}".encode() for r in ranged)


def test_starting_offsets_latest_stream(spark, broker, admin, tmp_path):
    """Streaming from 'latest' sees only records produced after the query resolved its start."""
    topic = admin.create_topic(unique_name("spark-latest"), 2)
    produce(broker.bootstrap, topic, numbered(2, 10))
    name = query_name()
    ckpt = tmp_path / "ckpt"
    query = (
        read_stream(spark, broker.bootstrap, subscribe=topic, startingOffsets="latest")
        .writeStream.format("memory")
        .queryName(name)
        .option("checkpointLocation", str(ckpt))
        .trigger(processingTime="500 milliseconds")
        .start()
    )
    try:
        deadline = time.monotonic() + WAIT_S
        while not (ckpt / "offsets" / "0").exists():  # batch 0 fixed the start: latest
            assert query.isActive, query.exception()
            assert time.monotonic() < deadline, "query never planned its first batch"
            time.sleep(0.2)
        new = [(p, f"new-{p}-{i}".encode(), f"new-{p}-{i}".encode(), None, None) for p in range(2) for i in range(5)]
        produce(broker.bootstrap, topic, new)
        query.processAllAvailable()
        rows = rows_of(spark.table(name))
    finally:
        query.stop()
    assert sorted(r["value"] for r in rows) == sorted(v for _, _, v, _, _ in new)
    assert offsets_by_partition(rows) == {0: list(range(10, 15)), 1: list(range(10, 15))}


def test_starting_timestamp(spark, broker, admin):
    """startingTimestamp / startingOffsetsByTimestamp / endingTimestamp resolve through
    ListOffsets by timestamp: the first offset whose timestamp is >= the given one."""
    topic = admin.create_topic(unique_name("spark-ts"), 3)
    produce(broker.bootstrap, topic, numbered(3, 20))

    late = rows_of(read(spark, broker.bootstrap, subscribe=topic, startingTimestamp=str(T0 + 10_000)))
    assert offsets_by_partition(late) == {p: list(range(10, 20)) for p in range(3)}

    window = rows_of(
        read(
            spark,
            broker.bootstrap,
            subscribe=topic,
            startingTimestamp=str(T0 + 10_000),
            endingTimestamp=str(T0 + 15_000),
        )
    )
    assert offsets_by_partition(window) == {p: list(range(10, 15)) for p in range(3)}

    per_partition = rows_of(
        read(
            spark,
            broker.bootstrap,
            subscribe=topic,
            startingOffsetsByTimestamp={topic: {"0": T0 + 5_000, "1": T0 + 18_500, "2": T0 - 1}},
        )
    )
    assert offsets_by_partition(per_partition) == {0: list(range(5, 20)), 1: [19], 2: list(range(20))}

    # Past every record: Spark's default strategy fails, "latest" reads nothing.
    beyond = read(
        spark,
        broker.bootstrap,
        subscribe=topic,
        startingTimestamp=str(T0 + 60_000),
        startingOffsetsByTimestampStrategy="latest",
    )
    assert beyond.count() == 0


def test_max_offsets_per_trigger(spark, broker, admin, tmp_path):
    """maxOffsetsPerTrigger splits an availableNow run into batches of at most that many."""
    topic = admin.create_topic(unique_name("spark-maxoff"), 3)
    records = numbered(3, 30)
    produce(broker.bootstrap, topic, records)
    rows, progress = run_available_now(
        read_stream(spark, broker.bootstrap, subscribe=topic, startingOffsets="earliest", maxOffsetsPerTrigger="20"),
        tmp_path / "ckpt",
        query_name(),
    )
    assert len(rows) == 90
    sizes = [p["numInputRows"] for p in progress if p["numInputRows"]]
    assert sum(sizes) == 90 and max(sizes) <= 20 and len(sizes) >= 5, sizes


def test_subscribe_pattern(spark, broker, admin):
    """subscribePattern matches whole topic names (Java regex), listing topics via Metadata."""
    prefix = unique_name("spark-pat")
    a = admin.create_topic(f"{prefix}-a", 2)
    b = admin.create_topic(f"{prefix}-b", 1)
    other = admin.create_topic(f"{prefix}x", 1)
    for topic in (a, b, other):
        produce(broker.bootstrap, topic, [(0, None, topic.encode(), None, None)] * 3)
    rows = rows_of(read(spark, broker.bootstrap, subscribePattern=f"{prefix}-.*"))
    assert Counter(r["topic"] for r in rows) == {a: 3, b: 3}
    assert all(r["value"] == r["topic"].encode() for r in rows)


def test_assign(spark, broker, admin, tmp_path):
    """assign reads exactly the listed partitions, in batch and streaming queries."""
    topic = admin.create_topic(unique_name("spark-assign"), 3)
    produce(broker.bootstrap, topic, numbered(3, 10))
    rows = rows_of(read(spark, broker.bootstrap, assign={topic: [0, 2]}))
    assert offsets_by_partition(rows) == {0: list(range(10)), 2: list(range(10))}
    streamed, _ = run_available_now(
        read_stream(spark, broker.bootstrap, assign={topic: [1]}, startingOffsets="earliest"),
        tmp_path / "ckpt",
        query_name(),
    )
    assert offsets_by_partition(streamed) == {1: list(range(10))}


def test_include_headers(spark, broker, admin):
    """Headers come back in order, with repeated keys, null and empty values and UTF-8 keys
    (none at all reads as null); without includeHeaders there is no headers column."""
    topic = admin.create_topic(unique_name("spark-headers"), 1)
    headers = [
        [("a", b"1"), ("b", None), ("a", b"2")],
        [],
        [("ключ", "значение".encode()), ("empty", b"")],
        [("bin", bytes(range(256)))],
    ]
    produce(broker.bootstrap, topic, [(0, b"k", f"v{i}".encode(), h, None) for i, h in enumerate(headers)])
    with_headers = rows_of(read(spark, broker.bootstrap, subscribe=topic, includeHeaders="true"))
    # Spark gives null, not an empty array, for a record without headers.
    assert [r["headers"] for r in with_headers] == [h or None for h in headers]
    without = read(spark, broker.bootstrap, subscribe=topic)
    assert "headers" not in without.columns
    # The schema tests/spark builds its static DataFrames with is the real one.
    assert read(spark, broker.bootstrap, subscribe=topic, includeHeaders="true").schema == KAFKA_SOURCE_SCHEMA
    assert [r["value"] for r in rows_of(without)] == [f"v{i}".encode() for i in range(4)]


def test_fail_on_data_loss(spark, broker, admin, tmp_path):
    """Records deleted (DeleteRecords) between two runs of a checkpointed query: with
    failOnDataLoss=true (the default) the query fails; with false it skips to the new log
    start and reads the rest. A batch read from 'earliest' starts at the new log start."""
    topic = admin.create_topic(unique_name("spark-loss"), 1)
    produce(broker.bootstrap, topic, numbered(1, 50))
    ckpt = tmp_path / "ckpt"
    source = dict(subscribe=topic, startingOffsets="earliest")
    first, _ = run_available_now(read_stream(spark, broker.bootstrap, **source), ckpt, query_name())
    assert len(first) == 50

    produce(broker.bootstrap, topic, [(0, None, f"p0-{i}".encode(), None, None) for i in range(50, 100)])
    assert admin.delete_records(topic, {0: 80}) == {0: 80}
    assert admin.watermarks(topic, 1)[0] == (80, 100)

    shutil.copytree(ckpt, tmp_path / "ckpt-lenient")
    with pytest.raises(QueryFailed, match="(?i)data may have been lost|out of range"):
        run_available_now(
            read_stream(spark, broker.bootstrap, **source, failOnDataLoss="true"), ckpt, query_name()
        )

    rest, _ = run_available_now(
        read_stream(spark, broker.bootstrap, **source, failOnDataLoss="false"),
        tmp_path / "ckpt-lenient",
        query_name(),
    )
    assert [r["offset"] for r in rest] == list(range(80, 100))

    batch = rows_of(read(spark, broker.bootstrap, subscribe=topic))
    assert [r["offset"] for r in batch] == list(range(80, 100))


def test_events_to_aggregates_restart(spark, broker, admin, tmp_path):
    """The events_to_aggregates job: generated events in, exact windowed counts out, in Kafka
    and Parquet. The query is stopped mid-stream and restarted from its checkpoint; the
    Parquet output then has every closed window exactly once."""
    from pyspark.sql import functions as F

    from spark_jobs import events_to_aggregates as job
    from spark_jobs.generate import iso_ms, make_events, reference_counts
    from spark_jobs.generate import produce as produce_events

    events_topic = admin.create_topic(unique_name("spark-events"), 3)
    out_topic = admin.create_topic(unique_name("spark-aggregates"), 2)
    events = list(make_events(1500, start_ms=T0, spacing_ms=400, skew_ms=30_000, users=60, seed=11))
    produce_events(events, broker.bootstrap, events_topic, extra_config=PRODUCER_TWEAKS)
    expected = reference_counts(events, 60_000, watermark_ms=120_000)

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
    # Run 1: interval trigger, stopped as soon as some batches are committed.
    queries = job.start_queries(spark, job.parse_args(argv + ["--trigger", "200 milliseconds"]))
    try:
        deadline = time.monotonic() + WAIT_S
        while not all(len(q.recentProgress) >= 3 for q in queries):
            assert all(q.isActive for q in queries), [q.exception() for q in queries]
            assert time.monotonic() < deadline, "queries made no progress"
            time.sleep(0.1)
    finally:
        for q in queries:
            q.stop()
    midway = spark.read.parquet(str(tmp_path / "parquet")).count()
    assert midway < len(expected), "stopped too late to test a restart"

    # Run 2: the same checkpoints, availableNow: finishes the topic and stops.
    job.await_queries(job.start_queries(spark, job.parse_args(argv + ["--trigger", "available-now"])), WAIT_S)

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


def test_stream_resumes_across_broker_restart(spark, fresh_broker, tmp_path):
    """A checkpointed query, the broker restarted between two runs: the second run reads
    exactly the records produced since, from offsets the broker kept across the restart."""
    admin = Admin(fresh_broker.bootstrap)
    topic = admin.create_topic(unique_name("spark-restart"), 2)
    produce(fresh_broker.bootstrap, topic, numbered(2, 25))
    ckpt = tmp_path / "ckpt"
    source = dict(subscribe=topic, startingOffsets="earliest")
    first, _ = run_available_now(read_stream(spark, fresh_broker.bootstrap, **source), ckpt, query_name())
    assert len(first) == 50

    fresh_broker.restart()
    later = [(p, None, f"after-{p}-{i}".encode(), None, None) for p in range(2) for i in range(10)]
    produce(fresh_broker.bootstrap, topic, later)
    second, _ = run_available_now(read_stream(spark, fresh_broker.bootstrap, **source), ckpt, query_name())
    assert offsets_by_partition(second) == {0: list(range(25, 35)), 1: list(range(25, 35))}
    assert sorted(r["value"] for r in second) == sorted(v for _, _, v, _, _ in later)



def test_read_committed_sees_committed_rows(spark, broker, admin):
    """kafka.isolation.level=read_committed: a batch read (earliest..latest) returns exactly
    the rows of committed transactions — not an aborted one's, not an open one's — each at
    the offset its delivery report gave; read_uncommitted returns every data record and no
    control record (the commit and abort markers occupy offsets no row has).

    Written with a confluent-kafka transactional producer: committed, aborted (flushed
    first, so its records are in the log), committed again, then a transaction left open
    while Spark reads. With it open, "latest" under read_committed is the last stable offset
    (Spark lists offsets with the reader's isolation level), so the open records are past
    the end as well as uncommitted."""
    from confluent_kafka import KafkaException, Producer

    topic = admin.create_topic(unique_name("spark-txn"), 2)
    producer = Producer(
        {
            "bootstrap.servers": broker.bootstrap,
            "transactional.id": unique_name("spark-txn-producer"),
            "linger.ms": 5,
            **PRODUCER_TWEAKS,
        }
    )
    try:
        producer.init_transactions(30)
    except KafkaException as exc:
        pytest.fail(f"InitProducerId with a transactional id failed: {exc.args[0]}", pytrace=False)
    delivered: dict[str, list[tuple[int, int, bytes, bytes]]] = {}
    failures: list[str] = []

    def on_delivery(err, msg, label: str) -> None:
        if err is not None:
            failures.append(str(err))
        else:
            delivered.setdefault(label, []).append((msg.partition(), msg.offset(), msg.key(), msg.value()))

    def transaction(label: str, per_partition: int) -> None:
        producer.begin_transaction()
        for i in range(per_partition):
            for p in range(2):
                producer.produce(
                    topic,
                    key=f"{label}-k{p}-{i}".encode(),
                    value=f"{label}-p{p}-{i}".encode(),
                    partition=p,
                    on_delivery=lambda err, msg, label=label: on_delivery(err, msg, label),
                )
        assert producer.flush(30) == 0, f"{label}: records still undelivered after 30 s"

    open_txn = False
    try:
        transaction("committed", 7)
        producer.commit_transaction(30)
        transaction("aborted", 5)
        producer.abort_transaction(30)
        transaction("again", 4)
        producer.commit_transaction(30)
        transaction("open", 3)
        open_txn = True
        assert not failures, failures[:3]
        assert {label: len(recs) for label, recs in delivered.items()} == {
            "committed": 14, "aborted": 10, "again": 8, "open": 6}

        def batch_read(isolation: str) -> list[tuple[int, int, bytes, bytes]]:
            df = read(
                spark,
                broker.bootstrap,
                subscribe=topic,
                startingOffsets="earliest",
                endingOffsets="latest",
                **{"kafka.isolation.level": isolation},
            )
            return [(r["partition"], r["offset"], r["key"], r["value"]) for r in rows_of(df)]

        committed = batch_read("read_committed")
        uncommitted = batch_read("read_uncommitted")
    finally:
        if open_txn:  # end it, so the broker is not left with an open transaction
            try:
                producer.abort_transaction(30)
            except KafkaException:
                pass  # the assertion that got us here matters more

    want = sorted(delivered["committed"] + delivered["again"])
    # Row by row, so a failure names the first row that differs.
    for i, (got, expected) in enumerate(zip(committed, want)):
        assert got == expected, f"read_committed row {i}: {got} != {expected}"
    assert len(committed) == len(want), f"read_committed: {len(committed)} rows, {len(want)} committed records"

    every = sorted(r for recs in delivered.values() for r in recs)
    for i, (got, expected) in enumerate(zip(uncommitted, every)):
        assert got == expected, f"read_uncommitted row {i}: {got} != {expected}"
    assert len(uncommitted) == len(every), f"read_uncommitted: {len(uncommitted)} rows, {len(every)} data records"
    # The markers: per partition, one offset after each of the three ended transactions.
    for p in range(2):
        offsets = [o for q, o, _, _ in uncommitted if q == p]
        gaps = [b for a, b in zip(offsets, offsets[1:]) if b != a + 1]
        assert len(gaps) == 3 and all(b - a == 2 for a, b in zip(offsets, offsets[1:]) if b != a + 1), (
            f"partition {p}: offsets {offsets} should skip exactly one marker after each ended transaction")


@pytest.mark.broker_kinds("kafka-cluster", "trafka-cluster")
def test_stream_through_leader_kill(spark, broker, tmp_path):
    """readStream from the 3-broker cluster (RF=3, min.insync.replicas=2) while the leader of
    a partition is SIGKILLed: the query keeps going, its consumers following the new leader,
    and the memory sink (idempotent per batch id) ends with every produced record exactly
    once. Records are produced in three rounds: before the kill, with the leader dead, and
    after the killed broker is back in the ISR."""
    topic = unique_name("spark-cluster")
    broker.create_topic(topic, 3)
    rounds = [[(p, f"k{r}-{p}-{i}".encode(), f"r{r}-p{p}-{i}".encode(), None, None)
               for p in range(3) for i in range(30)] for r in range(3)]
    name = query_name()
    query = (
        read_stream(spark, broker.bootstrap, subscribe=topic, startingOffsets="earliest")
        .writeStream.format("memory")
        .queryName(name)
        .option("checkpointLocation", str(tmp_path / "ckpt"))
        .trigger(processingTime="500 milliseconds")
        .start()
    )

    def wait_rows(n: int, what: str) -> None:
        deadline = time.monotonic() + WAIT_S
        while spark.table(name).count() < n:
            assert query.isActive, f"query stopped {what}: {query.exception()}"
            assert time.monotonic() < deadline, f"fewer than {n} rows {what} after {WAIT_S} s"
            time.sleep(0.5)

    try:
        produce(broker.bootstrap, topic, rounds[0])
        wait_rows(len(rounds[0]), "before the kill")
        killed = broker.kill_leader(topic, 0)
        broker.wait_leader(topic, 0, not_in=(killed,))
        produce(broker.bootstrap, topic, rounds[1])
        wait_rows(len(rounds[0]) + len(rounds[1]), "with the old leader dead")
        broker.start(killed)
        broker.wait_isr(topic, 0)
        produce(broker.bootstrap, topic, rounds[2])
        total = sum(len(r) for r in rounds)
        wait_rows(total, "after the killed broker rejoined")
        query.processAllAvailable()
        rows = rows_of(spark.table(name))
    finally:
        query.stop()
    got = Counter((r["partition"], r["key"], r["value"]) for r in rows)
    sent = Counter((p, k, v) for rnd in rounds for p, k, v, _, _ in rnd)
    assert got == sent, (f"missing {list((sent - got).elements())[:5]}, "
                         f"extra or doubled {list((got - sent).elements())[:5]}")
    assert {p: o for p, o in offsets_by_partition(rows).items()} == {p: list(range(90)) for p in range(3)}
