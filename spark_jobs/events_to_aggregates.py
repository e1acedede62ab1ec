"""Windowed counts of click events per page and action, from a Kafka topic to a Kafka topic.

A Structured Streaming job. Input records carry JSON values

    {"user": "u042", "page": "/cart", "action": "click", "event_time": "2025-03-01T12:00:03.250Z"}

(extra fields are ignored; values that do not parse, or lack event_time, are dropped). Counts
are per tumbling event-time window, page and action, with a watermark: a window is written
once, when the watermark (largest event time seen minus --watermark) passes its end, and
events older than the watermark are dropped. Output records:

    key   = "<window start ISO-8601>|<page>"
    value = {"window_start": ..., "window_end": ..., "page": ..., "action": ..., "count": N}

optionally also appended to Parquet (--parquet). Each sink has its own checkpoint under
--checkpoint, so stopping and starting again resumes where it stopped: the Parquet sink is
exactly-once, the Kafka sink at-least-once (a batch interrupted mid-write is written again).

Usage:
    python -m spark_jobs.events_to_aggregates --bootstrap 127.0.0.1:9092 \\
        --topic events --output-topic page-counts --checkpoint /tmp/ckpt \\
        [--parquet /tmp/page-counts] [--window '1 minute'] [--watermark '2 minutes'] \\
        [--trigger available-now | --trigger '10 seconds'] [--max-offsets-per-trigger N]
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.streaming import StreamingQuery
from pyspark.sql.types import StringType, StructField, StructType, TimestampType

from spark_jobs.kafka_io import (
    add_connection_args,
    await_queries,
    client_options,
    interval,
    load_kafka,
    offsets_spec,
    parse_trigger,
    positive_int,
    session_from_args,
    topic_name,
    trigger_spec,
)

# Declared rather than inferred: a streaming source cannot infer, and a declared schema makes
# a producer's typo a dropped row instead of a new column.
EVENT_SCHEMA = StructType(
    [
        StructField("user", StringType(), True),
        StructField("page", StringType(), True),
        StructField("action", StringType(), True),
        StructField("event_time", TimestampType(), True),
    ]
)

AGGREGATE_COLUMNS = ["window_start", "window_end", "page", "action", "count"]


def parse_events(kafka_rows: DataFrame) -> DataFrame:
    """Kafka source rows -> typed events (user, page, action, event_time).

    from_json in its default PERMISSIVE mode turns unparsable values into nulls; those rows,
    and rows without event_time or page, cannot be placed in a window and are dropped.
    """
    parsed = kafka_rows.select(
        F.from_json(F.col("value").cast("string"), EVENT_SCHEMA).alias("event")
    ).select("event.*")
    return parsed.where(F.col("event_time").isNotNull() & F.col("page").isNotNull())


def windowed_counts(events: DataFrame, window: str = "1 minute", watermark: str = "2 minutes") -> DataFrame:
    """Count events per tumbling event-time ``window``, page and action, behind a watermark.

    The watermark is what lets a streaming query in append mode emit a window at all (and
    drop its state): without it Spark refuses append mode for an aggregation.
    """
    return (
        events.withWatermark("event_time", watermark)
        .groupBy(F.window("event_time", window).alias("window"), "page", "action")
        .count()
        .select(
            F.col("window.start").alias("window_start"),
            F.col("window.end").alias("window_end"),
            "page",
            "action",
            F.col("count"),
        )
    )


def to_kafka_records(aggregates: DataFrame) -> DataFrame:
    """Aggregates -> (key, value) string rows for the Kafka sink, keyed by window start and page.

    Keying by window and page puts every action of a page's window in one partition, in order.
    """
    return aggregates.select(
        F.concat_ws(
            "|", F.date_format("window_start", "yyyy-MM-dd'T'HH:mm:ss.SSSXXX"), F.col("page")
        ).alias("key"),
        F.to_json(F.struct(*AGGREGATE_COLUMNS)).alias("value"),
    )


def start_queries(spark: SparkSession, args: argparse.Namespace) -> list[StreamingQuery]:
    """Start the Kafka-sink query and, with --parquet, the Parquet-sink query."""
    source = {
        **client_options(args),
        "subscribe": args.topic,
        "startingOffsets": args.starting_offsets,
        "failOnDataLoss": str(args.fail_on_data_loss).lower(),
    }
    if args.max_offsets_per_trigger:
        source["maxOffsetsPerTrigger"] = str(args.max_offsets_per_trigger)
    aggregates = windowed_counts(
        parse_events(load_kafka(spark, source, streaming=True)), args.window, args.watermark
    )
    trigger = parse_trigger(args.trigger)
    checkpoint = Path(args.checkpoint)
    queries = []
    if args.output_topic:
        writer = (
            to_kafka_records(aggregates)
            .writeStream.queryName(f"{args.name}-kafka")
            .format("kafka")
            .outputMode("append")
            .option("topic", args.output_topic)
            .option("checkpointLocation", str(checkpoint / "kafka-sink"))
            .trigger(**trigger)
        )
        for key, value in client_options(args).items():
            writer = writer.option(key, value)
        queries.append(writer.start())
    if args.parquet:
        queries.append(
            aggregates.writeStream.queryName(f"{args.name}-parquet")
            .format("parquet")
            .outputMode("append")
            .option("path", args.parquet)
            .option("checkpointLocation", str(checkpoint / "parquet-sink"))
            .trigger(**trigger)
            .start()
        )
    return queries


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m spark_jobs.events_to_aggregates",
        description=__doc__.split("\n\n")[0],
        formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog=__doc__.split("\n\n", 1)[1],
    )
    add_connection_args(parser)
    parser.add_argument("--topic", required=True, type=topic_name, help="input topic of JSON events")
    parser.add_argument("--output-topic", type=topic_name, help="topic the aggregates are written to")
    parser.add_argument("--parquet", help="also append the aggregates as Parquet to this directory")
    parser.add_argument("--checkpoint", required=True, help="checkpoint directory (one per job)")
    parser.add_argument("--window", type=interval, default="1 minute", help="tumbling window length (default %(default)s)")
    parser.add_argument(
        "--watermark", type=interval, default="2 minutes", help="allowed event-time lateness (default %(default)s)"
    )
    parser.add_argument(
        "--starting-offsets",
        type=offsets_spec,
        default="earliest",
        help="where a new checkpoint starts: earliest, latest or JSON (default %(default)s)",
    )
    parser.add_argument("--max-offsets-per-trigger", type=positive_int, help="cap on records per micro-batch")
    parser.add_argument(
        "--trigger",
        type=trigger_spec,
        default="available-now",
        help="'available-now' (process what is there, then stop), 'once', or an interval "
        "such as '10 seconds' (default %(default)s)",
    )
    parser.add_argument("--run-for", type=float, help="stop after this many seconds (interval triggers)")
    parser.add_argument(
        "--no-fail-on-data-loss",
        dest="fail_on_data_loss",
        action="store_false",
        help="skip records deleted or expired before they were read instead of failing",
    )
    parser.add_argument("--name", default="events_to_aggregates", help="query name prefix")
    return parser


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = build_parser()
    args = parser.parse_args(argv)
    if not args.output_topic and not args.parquet:
        parser.error("give --output-topic, --parquet or both")
    if args.run_for is not None and args.run_for <= 0:
        parser.error("--run-for must be > 0")
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    spark = session_from_args(args, "events_to_aggregates")
    await_queries(start_queries(spark, args), args.run_for)
    return 0


if __name__ == "__main__":
    sys.exit(main())
