"""Spark's own Kafka connector against the broker under test, end to end.

The client here is Spark 4.0's ``spark-sql-kafka-0-10`` on the Java kafka-clients 3.9: the
driver plans offsets with the Admin client (describeTopics, listOffsets: earliest, latest,
by timestamp), executors read with an assigned, seeked KafkaConsumer, and the sink writes
with an idempotent KafkaProducer (acks=all). Nothing is adapted to the broker: these are the
options a Spark user sets, with Spark's documented meaning (Structured Streaming + Kafka
Integration Guide, "Creating a Kafka Source for Batch Queries" and the options tables).

The connector's jars come from Maven Central (.ci/jvm/pom.xml, see compat_tests/spark_kit.py);
under CI a missing jar fails these tests, it never skips them. Topics are created, and
records deleted, with a real admin client (confluent-kafka); reference records are produced
with confluent-kafka too, so a scenario about Spark's reader does not depend on Spark's
writer. The shipped jobs of spark_jobs/ run end to end in test_spark_jobs.py.
"""

from __future__ import annotations

import json
import shutil
import time
from collections import Counter

import pytest

from compat_tests import spark_kit
from compat_tests.helpers import unique_name
from compat_tests.spark_kit import (
    PRODUCER_TWEAKS,
    SINK_TWEAKS,
    T0,
    WAIT_S,
    Admin,
    QueryFailed,
    numbered,
    offsets_by_partition,
    produce,
    query_name,
    read,
    read_stream,
    rows_of,
    run_available_now,
    wait_rows,
)

spark_kit.require("pyspark")

from spark_jobs.kafka_io import KAFKA_SOURCE_SCHEMA  # noqa: E402

pytestmark = [
    pytest.mark.compat(client="spark"),
    # Spark plans, schedules and polls: a scenario takes seconds, not milliseconds.
    pytest.mark.timeout(300),
]


@pytest.fixture(scope="module")
def spark():
    # The tests' shuffles are tiny; Kafka client timeouts stay Spark's defaults on purpose.
    return spark_kit.session("trafka-compat-spark")


@pytest.fixture
def admin(broker) -> Admin:
    return Admin(broker.bootstrap)


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


def test_read_stream_from_timestamps(spark, broker, admin, tmp_path):
    """readStream starting from timestamps: startingTimestamp for every partition, and
    startingOffsetsByTimestamp per partition, resolved by ListOffsets when the query first
    plans (batch 0) and kept in its checkpoint; records produced later stream after them."""
    topic = admin.create_topic(unique_name("spark-ts-stream"), 2)
    produce(broker.bootstrap, topic, numbered(2, 20))

    every, _ = run_available_now(
        read_stream(spark, broker.bootstrap, subscribe=topic, startingTimestamp=str(T0 + 12_000)),
        tmp_path / "ckpt-all",
        query_name(),
    )
    assert offsets_by_partition(every) == {p: list(range(12, 20)) for p in range(2)}

    ckpt = tmp_path / "ckpt-each"
    source = dict(subscribe=topic, maxOffsetsPerTrigger="5",
                  startingOffsetsByTimestamp={topic: {"0": T0 + 3_000, "1": T0 + 17_500}})
    first, progress = run_available_now(read_stream(spark, broker.bootstrap, **source), ckpt, query_name())
    assert offsets_by_partition(first) == {0: list(range(3, 20)), 1: [18, 19]}
    assert len([p for p in progress if p["numInputRows"]]) >= 4  # micro-batches of at most 5
    # The start is in the checkpoint: a second run reads only what came since.
    produce(broker.bootstrap, topic, [(p, None, f"later-{p}".encode(), None, T0 + 40_000) for p in range(2)])
    second, _ = run_available_now(read_stream(spark, broker.bootstrap, **source), ckpt, query_name())
    assert offsets_by_partition(second) == {0: [20], 1: [20]}


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


def test_stream_survives_broker_restart(spark, fresh_broker, tmp_path):
    """A running micro-batch query (processingTime trigger) while its only broker is stopped
    and started again under it: the query does not fail, its consumers and the driver's
    offset planning reconnect, and the memory sink (idempotent per batch id) ends with every
    record exactly once, at offsets dense from 0: nothing the broker acknowledged is lost,
    nothing is read twice."""
    admin = Admin(fresh_broker.bootstrap)
    topic = admin.create_topic(unique_name("spark-live-restart"), 2)
    rounds = [[(p, f"k{r}-{p}-{i}".encode(), f"r{r}-p{p}-{i}".encode(), None, T0 + r * 60_000 + i)
               for p in range(2) for i in range(20)] for r in range(2)]
    name = query_name()
    query = (
        read_stream(spark, fresh_broker.bootstrap, subscribe=topic, startingOffsets="earliest")
        .writeStream.format("memory")
        .queryName(name)
        .option("checkpointLocation", str(tmp_path / "ckpt"))
        .trigger(processingTime="500 milliseconds")
        .start()
    )
    try:
        produce(fresh_broker.bootstrap, topic, rounds[0])
        wait_rows(spark, query, name, len(rounds[0]), "before the restart")
        fresh_broker.restart()
        produce(fresh_broker.bootstrap, topic, rounds[1], timeout=60)
        wait_rows(spark, query, name, len(rounds[0]) + len(rounds[1]), "after the restart")
        query.processAllAvailable()
        rows = rows_of(spark.table(name))
    finally:
        query.stop()
    got = Counter((r["partition"], r["key"], r["value"]) for r in rows)
    sent = Counter((p, k, v) for rnd in rounds for p, k, v, _, _ in rnd)
    assert got == sent, (f"missing {list((sent - got).elements())[:5]}, "
                         f"extra or doubled {list((got - sent).elements())[:5]}")
    assert offsets_by_partition(rows) == {0: list(range(40)), 1: list(range(40))}


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
    after the killed broker is back in the ISR.

    The driver plans offsets with an Admin client whose listOffsets waits for the dead
    leader until default.api.timeout.ms (60 s by default, against Kafka and Trafka alike:
    "Timed out waiting for a node assignment"), after which Spark retries with a fresh
    Admin that finds the new leader. The query sets that timeout (and request.timeout.ms,
    which must not exceed it) to 15 s, as a user who expects failovers may: the same path,
    45 s sooner."""
    topic = unique_name("spark-cluster")
    broker.create_topic(topic, 3)
    rounds = [[(p, f"k{r}-{p}-{i}".encode(), f"r{r}-p{p}-{i}".encode(), None, None)
               for p in range(3) for i in range(30)] for r in range(3)]
    name = query_name()
    timeouts = {"kafka.default.api.timeout.ms": "15000", "kafka.request.timeout.ms": "10000"}
    query = (
        read_stream(spark, broker.bootstrap, subscribe=topic, startingOffsets="earliest", **timeouts)
        .writeStream.format("memory")
        .queryName(name)
        .option("checkpointLocation", str(tmp_path / "ckpt"))
        .trigger(processingTime="500 milliseconds")
        .start()
    )

    try:
        produce(broker.bootstrap, topic, rounds[0])
        wait_rows(spark, query, name, len(rounds[0]), "before the kill")
        killed = broker.kill_leader(topic, 0)
        broker.wait_leader(topic, 0, not_in=(killed,))
        produce(broker.bootstrap, topic, rounds[1])
        wait_rows(spark, query, name, len(rounds[0]) + len(rounds[1]), "with the old leader dead")
        broker.start(killed)
        broker.wait_isr(topic, 0)
        produce(broker.bootstrap, topic, rounds[2])
        total = sum(len(r) for r in rounds)
        wait_rows(spark, query, name, total, "after the killed broker rejoined")
        query.processAllAvailable()
        rows = rows_of(spark.table(name))
    finally:
        query.stop()
    got = Counter((r["partition"], r["key"], r["value"]) for r in rows)
    sent = Counter((p, k, v) for rnd in rounds for p, k, v, _, _ in rnd)
    assert got == sent, (f"missing {list((sent - got).elements())[:5]}, "
                         f"extra or doubled {list((got - sent).elements())[:5]}")
    assert {p: o for p, o in offsets_by_partition(rows).items()} == {p: list(range(90)) for p in range(3)}
