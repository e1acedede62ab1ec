"""Archive a Kafka topic into Parquet, partitioned by record date: logs into the data lake.

Each record becomes one Parquet row with its key and value (as UTF-8 strings, or raw bytes
with --binary), topic, partition, offset, timestamp and, with --headers, its headers. Rows
are partitioned by ``date`` (the UTC day of the record timestamp), so a day's logs are one
directory: ``<output>/date=2025-03-01/part-....parquet``.

Two modes:
- batch (default): read --starting-offsets .. --ending-offsets once and write them; reruns
  over the same range duplicate rows unless --mode overwrite.
- --streaming: a Structured Streaming query with a checkpoint; the Parquet sink is
  exactly-once, so reruns continue where the last one stopped.

Usage:
    python -m spark_jobs.topic_archive --bootstrap 127.0.0.1:9092 --topic logs \\
        --output /data/lake/logs [--starting-offsets earliest] [--ending-offsets latest]
    python -m spark_jobs.topic_archive --bootstrap 127.0.0.1:9092 --topic logs \\
        --output /data/lake/logs --streaming --checkpoint /data/ckpt/logs \\
        [--trigger available-now | --trigger '1 minute']
"""

from __future__ import annotations

import argparse
import sys

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from spark_jobs.kafka_io import (
    add_connection_args,
    await_queries,
    client_options,
    load_kafka,
    offsets_spec,
    parse_trigger,
    positive_int,
    session_from_args,
    topic_name,
    trigger_spec,
)

PARTITION_COLUMNS = ["date"]


def archive_rows(kafka_rows: DataFrame, *, binary: bool = False, headers: bool = False) -> DataFrame:
    """Kafka source rows -> archive rows with a ``date`` partition column.

    The date is taken from the record timestamp in UTC (the session time zone), not from the
    payload: the archive must accept any value, including values that are not JSON.
    """
    key, value = F.col("key"), F.col("value")
    if not binary:
        key, value = key.cast("string"), value.cast("string")
    columns = [
        key.alias("key"),
        value.alias("value"),
        "topic",
        "partition",
        "offset",
        "timestamp",
    ]
    if headers:
        columns.append("headers")
    columns.append(F.to_date("timestamp").alias("date"))
    return kafka_rows.select(*columns)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m spark_jobs.topic_archive",
        description=__doc__.split("\n\n")[0],
        formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog=__doc__.split("\n\n", 1)[1],
    )
    add_connection_args(parser)
    source = parser.add_mutually_exclusive_group(required=True)
    source.add_argument("--topic", type=topic_name, help="topic to archive")
    source.add_argument("--topic-pattern", help="Java regex of topics to archive (subscribePattern)")
    parser.add_argument("--output", required=True, help="Parquet directory")
    parser.add_argument("--starting-offsets", type=offsets_spec, default="earliest", help="(default %(default)s)")
    parser.add_argument(
        "--ending-offsets",
        type=offsets_spec,
        default="latest",
        help="batch only: latest or JSON (default %(default)s)",
    )
    parser.add_argument("--binary", action="store_true", help="keep key and value as bytes")
    parser.add_argument("--headers", action="store_true", help="archive record headers too")
    parser.add_argument(
        "--mode",
        choices=["append", "overwrite", "error"],
        default="append",
        help="batch only: what to do when --output exists (default %(default)s)",
    )
    parser.add_argument("--streaming", action="store_true", help="run as a checkpointed streaming query")
    parser.add_argument("--checkpoint", help="streaming only: checkpoint directory")
    parser.add_argument("--trigger", type=trigger_spec, default="available-now", help="streaming only (default %(default)s)")
    parser.add_argument("--run-for", type=float, help="streaming only: stop after this many seconds")
    parser.add_argument("--max-offsets-per-trigger", type=positive_int, help="streaming only")
    parser.add_argument(
        "--no-fail-on-data-loss",
        dest="fail_on_data_loss",
        action="store_false",
        help="skip records deleted before they were read instead of failing",
    )
    return parser


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.streaming:
        if not args.checkpoint:
            parser.error("--streaming needs --checkpoint")
        if args.ending_offsets != "latest":
            parser.error("--ending-offsets is for batch runs; a streaming query has no end")
        if args.mode != "append":
            parser.error("--mode is for batch runs; the streaming Parquet sink only appends")
    else:
        for flag in ("checkpoint", "run_for", "max_offsets_per_trigger"):
            if getattr(args, flag) is not None:
                parser.error(f"--{flag.replace('_', '-')} needs --streaming")
        if args.ending_offsets == "earliest":
            parser.error("--ending-offsets earliest would read nothing")
        if args.starting_offsets == "latest":
            parser.error("--starting-offsets latest would read nothing in a batch run")
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    spark = session_from_args(args, "topic_archive")
    options = {
        **client_options(args),
        "startingOffsets": args.starting_offsets,
        "failOnDataLoss": str(args.fail_on_data_loss).lower(),
        "includeHeaders": str(args.headers).lower(),
    }
    if args.topic:
        options["subscribe"] = args.topic
    else:
        options["subscribePattern"] = args.topic_pattern
    if not args.streaming:
        options["endingOffsets"] = args.ending_offsets
        rows = archive_rows(load_kafka(spark, options, streaming=False), binary=args.binary, headers=args.headers)
        rows.write.mode(args.mode).partitionBy(*PARTITION_COLUMNS).parquet(args.output)
        return 0
    if args.max_offsets_per_trigger:
        options["maxOffsetsPerTrigger"] = str(args.max_offsets_per_trigger)
    rows = archive_rows(load_kafka(spark, options, streaming=True), binary=args.binary, headers=args.headers)
    query = (
        rows.writeStream.queryName("topic_archive")
        .format("parquet")
        .option("path", args.output)
        .option("checkpointLocation", args.checkpoint)
        .partitionBy(*PARTITION_COLUMNS)
        .trigger(**parse_trigger(args.trigger))
        .start()
    )
    await_queries([query], args.run_for)
    return 0


if __name__ == "__main__":
    sys.exit(main())
