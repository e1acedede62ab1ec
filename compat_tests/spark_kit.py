"""What every Spark test shares: the one SparkSession of the pytest process, with Spark's
Kafka connector on it, and the helpers the connector scenarios use.

The connector (spark-sql-kafka-0-10, its token provider, commons-pool2 and the kafka-clients
it was built with) is not in the pyspark wheel. It comes from Maven Central by the
coordinates of `.ci/jvm/pom.xml` (module `spark-kafka`, copied into `.cache/jvm/spark-kafka/`;
`compat_tests/jvm.py`), unless the user names a folder of their own with `SPARK_KAFKA_JARS`.
Whichever is used is exported as `SPARK_KAFKA_JARS`, so a job the tests start as a process of
its own (`python -m spark_jobs.mirror`) finds the same jars.

Under CI (`CI` set) a connector, a JDK or pyspark that cannot be had FAILS the test; elsewhere
it is a skip with the reason. Connector jars are fixed when Spark's JVM starts, so the first
session of a process decides whether `format("kafka")` exists in it: every Spark fixture of
the repository (tests/spark, tests/security, compat_tests) builds its session here, so that
first session always carries the connector when it can be had.

Spark's driver JVM runs with C1 only and the serial collector here (`spark.driver.
defaultJavaOptions` in a spark-defaults.conf the kit points SPARK_CONF_DIR at, unless the
user set one): on two cores that halves the start-up and the small jobs of these tests
(measured: session start 11-16 s -> 6-9 s, a tiny aggregation twice 8-17 s -> 5-6 s), as
the suite's Kafka brokers run with the same flags. The jobs the tests start as processes get
the same through the environment.

Record timestamps in these tests are recent (`T0`, an hour-aligned time two hours ago):
Apache Kafka deletes segments whose newest record is older than retention.ms (7 days by
default) from the first retention check on (30 s after start-up), the active segment
included, so fixed dates in the past would vanish mid-test.
"""

from __future__ import annotations

import importlib
import json
import os
import time
import uuid
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

from compat_tests import jvm
from compat_tests.helpers import unique_name

JARS_ENV = "SPARK_KAFKA_JARS"
HOUR_MS = 3_600_000
# Recent enough for any broker's retention and within Kafka's
# log.message.timestamp.after.max.ms (1 h) for the half hour of timestamps a test uses.
T0 = (int(time.time() * 1000) // HOUR_MS - 2) * HOUR_MS
WAIT_S = 120.0  # upper bound for any one streaming query to finish

# Diagnostic only, never the default: one record per batch in every producer the tests use
# (confluent-kafka and Spark's sink). Tansu 0.6.0 reports a high watermark of "last batch's
# base offset + 1", so with normal batching Spark's end offsets are short; this setting
# separates that one bug from everything else a scenario checks.
ONE_RECORD_BATCHES = os.environ.get("SPARK_COMPAT_ONE_RECORD_BATCHES") == "1"
PRODUCER_TWEAKS: dict[str, Any] = {"batch.num.messages": 1, "linger.ms": 0} if ONE_RECORD_BATCHES else {}
SINK_TWEAKS: dict[str, str] = {"kafka.batch.size": "0"} if ONE_RECORD_BATCHES else {}


def in_ci() -> bool:
    return bool(os.environ.get("CI"))


def unavailable(reason: str) -> None:
    """Fail under CI, skip elsewhere: Spark is part of what CI must prove."""
    if in_ci():
        pytest.fail(reason, pytrace=False)
    pytest.skip(reason)


def require(module: str, why: str = "the 'spark' extra") -> ModuleType:
    """Import `module` for a Spark test module: a skip without it, an error under CI."""
    try:
        return importlib.import_module(module)
    except ImportError as exc:
        if in_ci():
            raise
        pytest.skip(f"{module} not installed ({why}): {exc}", allow_module_level=True)
        raise  # unreachable: skip raises


# What spark-defaults.conf holds for the tests' Spark driver JVMs (see the module docstring).
TEST_SPARK_DEFAULTS = "spark.driver.defaultJavaOptions -XX:TieredStopAtLevel=1 -XX:+UseSerialGC\n"


def use_test_spark_defaults() -> None:
    """Point SPARK_CONF_DIR at the tests' spark-defaults.conf (kept under the ignored
    .cache/), unless the user named a conf dir of their own."""
    if os.environ.get("SPARK_CONF_DIR"):
        return
    folder = jvm.REPO / ".cache" / "spark-test-conf"
    folder.mkdir(parents=True, exist_ok=True)
    target = folder / "spark-defaults.conf"
    if not target.exists() or target.read_text() != TEST_SPARK_DEFAULTS:
        tmp = folder / f".spark-defaults.conf.{os.getpid()}"
        tmp.write_text(TEST_SPARK_DEFAULTS)
        tmp.replace(target)  # atomic: parallel sessions never read half a file
    os.environ["SPARK_CONF_DIR"] = str(folder)


def connector_folder() -> Path:
    """The folder of the connector jars, exported as SPARK_KAFKA_JARS.

    The user's SPARK_KAFKA_JARS if set, else `.cache/jvm/spark-kafka` (resolved from Maven
    Central if absent). Raises jvm.JvmUnavailable when it cannot be had.
    """
    use_test_spark_defaults()
    given = os.environ.get(JARS_ENV)
    if given:
        return Path(given)
    folder = jvm.classpath("spark-kafka")[0].parent
    os.environ[JARS_ENV] = str(folder)
    return folder


def session(app_name: str = "trafka-tests", *, connector: bool = True):
    """The process's SparkSession (built once; later calls get the same one).

    `connector=False` is for tests that only feed the jobs' transformations static
    DataFrames: they still get the connector when it can be had (see the module docstring),
    and run without it when not.
    """
    require("pyspark")
    use_test_spark_defaults()
    try:
        connector_folder()
    except jvm.JvmUnavailable as exc:
        if connector:
            unavailable(f"Spark's Kafka connector (.ci/jvm/pom.xml module spark-kafka): {exc}")
    from spark_jobs.session import build_session

    # A ConnectorUnavailable here is a broken SPARK_KAFKA_JARS or a session built without the
    # connector earlier in this process: errors, never skips.
    return build_session(app_name, connector=connector)


# --------------------------------------------------------------------------- brokers


class Admin:
    """Topic creation, DeleteRecords and offsets through confluent-kafka's AdminClient."""

    def __init__(self, bootstrap: str) -> None:
        from confluent_kafka.admin import AdminClient

        self.bootstrap = bootstrap
        self.client = AdminClient({"bootstrap.servers": bootstrap})

    def create_topic(self, name: str, partitions: int, configs: dict[str, str] | None = None) -> str:
        from confluent_kafka.admin import NewTopic

        for future in self.client.create_topics(
            [NewTopic(name, num_partitions=partitions, replication_factor=1, config=configs or {})],
            operation_timeout=30,
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


Record = tuple  # (partition, key, value, headers, timestamp_ms)


def produce(bootstrap: str, topic: str, records: list[Record], *, timeout: float = 30) -> None:
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
    assert producer.flush(timeout) == 0, f"records still undelivered after {timeout} s"
    assert not failures, failures[:3]


def numbered(partitions: int, per_partition: int, *, ts_step_ms: int = 1000) -> list[Record]:
    """Records 'p<p>-<i>' with timestamps T0 + i * step, partition by partition."""
    return [
        (p, f"k{p}-{i}".encode(), f"p{p}-{i}".encode(), None, T0 + i * ts_step_ms)
        for p in range(partitions)
        for i in range(per_partition)
    ]


# --------------------------------------------------------------------------- Spark


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


def source_options(bootstrap: str, options: dict) -> dict[str, str]:
    """Kafka source options; dict values (per-partition offsets, assign) become JSON."""
    out = {"kafka.bootstrap.servers": bootstrap}
    out.update({k: v if isinstance(v, str) else json.dumps(v) for k, v in options.items()})
    return out


def read(spark, bootstrap: str, **options):
    from spark_jobs.kafka_io import load_kafka

    return load_kafka(spark, source_options(bootstrap, options), streaming=False)


def read_stream(spark, bootstrap: str, **options):
    from spark_jobs.kafka_io import load_kafka

    return load_kafka(spark, source_options(bootstrap, options), streaming=True)


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


def wait_rows(spark, query, table: str, n: int, what: str) -> None:
    """Until the memory-sink table of a running query holds at least `n` rows."""
    deadline = time.monotonic() + WAIT_S
    while spark.table(table).count() < n:
        assert query.isActive, f"query stopped {what}: {query.exception()}"
        assert time.monotonic() < deadline, f"fewer than {n} rows {what} after {WAIT_S} s"
        time.sleep(0.5)


def offsets_by_partition(rows: list[dict]) -> dict[int, list[int]]:
    out: dict[int, list[int]] = {}
    for r in rows:
        out.setdefault(r["partition"], []).append(r["offset"])
    return out


def query_name() -> str:
    return "q_" + uuid.uuid4().hex[:12]
