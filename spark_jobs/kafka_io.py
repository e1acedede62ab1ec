"""What every job shares: the Kafka source's row schema, connector options and CLI arguments.

The jobs keep I/O (``spark.read.format("kafka")``, sinks, triggers) apart from their
transformations, which take and return DataFrames. Tests build DataFrames with
``KAFKA_SOURCE_SCHEMA`` and feed the transformations without any broker.
"""

from __future__ import annotations

import argparse
import json
import re
import time

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql.streaming import StreamingQuery
from pyspark.sql.types import (
    ArrayType,
    BinaryType,
    IntegerType,
    LongType,
    StringType,
    StructField,
    StructType,
    TimestampType,
)

# The rows Spark's Kafka source yields, headers included (only there with includeHeaders=true):
# KafkaRecordToRowConverter.kafkaSchema(true) of spark-sql-kafka-0-10 4.0, every field nullable.
HEADER_TYPE = ArrayType(
    StructType([StructField("key", StringType()), StructField("value", BinaryType())])
)
KAFKA_SOURCE_SCHEMA = StructType(
    [
        StructField("key", BinaryType()),
        StructField("value", BinaryType()),
        StructField("topic", StringType()),
        StructField("partition", IntegerType()),
        StructField("offset", LongType()),
        StructField("timestamp", TimestampType()),
        StructField("timestampType", IntegerType()),
        StructField("headers", HEADER_TYPE),
    ]
)

_TOPIC_NAME = re.compile(r"^[A-Za-z0-9._-]{1,249}$")


def topic_name(text: str) -> str:
    """argparse type: a legal Kafka topic name (Kafka's ``Topic.validate`` rules)."""
    if not _TOPIC_NAME.match(text) or text in (".", ".."):
        raise argparse.ArgumentTypeError(f"not a valid Kafka topic name: {text!r}")
    return text


def offsets_spec(text: str) -> str:
    """argparse type: ``earliest``, ``latest`` or Spark's per-partition JSON offsets."""
    if text in ("earliest", "latest"):
        return text
    try:
        parsed = json.loads(text)
    except json.JSONDecodeError:
        raise argparse.ArgumentTypeError(
            f"expected earliest, latest or JSON like '{{\"topic\":{{\"0\":42}}}}', got {text!r}"
        ) from None
    if not isinstance(parsed, dict) or not all(
        isinstance(parts, dict) and all(isinstance(o, int) for o in parts.values())
        for parts in parsed.values()
    ):
        raise argparse.ArgumentTypeError(f"offsets JSON must map topic -> partition -> int: {text!r}")
    return text


def assign_spec(text: str) -> str:
    """argparse type: Spark's ``assign`` JSON, topic -> list of partitions."""
    try:
        parsed = json.loads(text)
    except json.JSONDecodeError:
        parsed = None
    if not isinstance(parsed, dict) or not parsed or not all(
        isinstance(parts, list) and parts and all(isinstance(p, int) and p >= 0 for p in parts)
        for parts in parsed.values()
    ):
        raise argparse.ArgumentTypeError(f"expected JSON like '{{\"topic\":[0,1]}}', got {text!r}")
    return text


def positive_int(text: str) -> int:
    """argparse type: an integer > 0."""
    value = int(text)
    if value <= 0:
        raise argparse.ArgumentTypeError(f"must be > 0: {text}")
    return value


def kafka_option(text: str) -> tuple[str, str]:
    """argparse type: ``name=value``, passed to the Kafka client as ``kafka.name``."""
    name, sep, value = text.partition("=")
    if not sep or not name:
        raise argparse.ArgumentTypeError(f"expected name=value, got {text!r}")
    return name.removeprefix("kafka."), value


def add_connection_args(parser: argparse.ArgumentParser) -> None:
    """Arguments every job takes: where the broker is and how to get the connector."""
    group = parser.add_argument_group("connection")
    group.add_argument(
        "--bootstrap",
        default="127.0.0.1:9092",
        help="Kafka bootstrap servers, host:port[,host:port] (default %(default)s)",
    )
    group.add_argument(
        "--kafka-option",
        "-K",
        type=kafka_option,
        action="append",
        default=[],
        metavar="NAME=VALUE",
        help="extra Kafka client property, e.g. -K security.protocol=SSL (repeatable)",
    )
    group.add_argument(
        "--packages",
        action="store_true",
        help="let Spark download the connector from Maven Central (spark.jars.packages) "
        "when SPARK_KAFKA_JARS is not set",
    )
    group.add_argument("--master", default="local[2]", help="Spark master URL (default %(default)s)")


def session_from_args(args: argparse.Namespace, app_name: str) -> SparkSession:
    """The SparkSession for a job, with the connector (or a clear ConnectorUnavailable)."""
    from spark_jobs.session import ConnectorUnavailable, build_session

    try:
        return build_session(app_name, use_packages=True if args.packages else None, master=args.master)
    except ConnectorUnavailable as exc:
        raise SystemExit(f"error: {exc}") from None


def client_options(args: argparse.Namespace) -> dict[str, str]:
    """Options for ``format("kafka")`` naming the broker and any ``kafka.*`` properties."""
    options = {"kafka.bootstrap.servers": args.bootstrap}
    options.update({f"kafka.{name}": value for name, value in args.kafka_option})
    return options


def load_kafka(spark: SparkSession, options: dict[str, str], *, streaming: bool) -> DataFrame:
    """Load the Kafka source (batch or streaming) with ``options``."""
    reader = (spark.readStream if streaming else spark.read).format("kafka")
    for key, value in options.items():
        reader = reader.option(key, value)
    return reader.load()


# What Spark's interval parser takes for windows, watermarks and triggers: a number and a
# unit word, singular or plural, a fraction only for seconds; abbreviations ("min", "ms",
# "s") and fractions of other units are refused by Spark, so refuse them up front.
_INTERVAL = re.compile(
    r"^(\d+\s+(week|day|hour|minute|second|millisecond|microsecond)s?|\d+\.\d+\s+seconds?)$",
    re.IGNORECASE,
)


def interval(text: str) -> str:
    """argparse type: a Spark interval string such as '1 minute' or '500 milliseconds'."""
    if not _INTERVAL.match(text.strip()):
        raise argparse.ArgumentTypeError(f"expected an interval like '30 seconds' or '1 minute', got {text!r}")
    return text.strip()


def trigger_spec(text: str) -> str:
    """argparse type: 'available-now', 'once' or a processing-time interval."""
    if text in ("available-now", "availableNow", "once"):
        return text
    try:
        return interval(text)
    except argparse.ArgumentTypeError:
        raise argparse.ArgumentTypeError(
            f"expected 'available-now', 'once' or an interval like '10 seconds', got {text!r}"
        ) from None


def parse_trigger(text: str) -> dict[str, object]:
    """``--trigger`` -> keyword arguments of ``DataStreamWriter.trigger``."""
    if text in ("available-now", "availableNow"):
        return {"availableNow": True}
    if text == "once":
        return {"once": True}
    return {"processingTime": text}


def await_queries(queries: list[StreamingQuery], run_for: float | None) -> None:
    """Wait until every query ends (availableNow/once) or ``run_for`` seconds pass, then stop.

    A query that failed re-raises its exception here, so the job's exit status shows it.
    """
    deadline = None if run_for is None else time.monotonic() + run_for
    try:
        for query in queries:
            if deadline is None:
                query.awaitTermination()
                continue
            remaining = deadline - time.monotonic()
            if remaining <= 0:  # pyspark refuses a zero timeout
                break
            query.awaitTermination(remaining)
    finally:
        for query in queries:
            if query.isActive:
                query.stop()
    for query in queries:
        if query.exception() is not None:
            raise RuntimeError(f"query {query.name} failed: {query.exception()}")
