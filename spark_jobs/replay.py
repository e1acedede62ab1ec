"""Rewind a topic: read it again from an offset or a point in time, and report what is there.

A batch read (consumers can rewind: nothing is consumed away). The range starts at
--starting-offsets (earliest or per-partition JSON) or at --starting-timestamp (for each
partition, the first record whose timestamp is at or after it, found by ListOffsets), and
ends at --ending-offsets or --ending-timestamp (default: the end of each partition now).

The report, printed or written as JSON (--output), gives the record count, per partition the
count, first/last offset and first/last timestamp, and the most frequent keys with their
counts and the partitions they were in.

Usage:
    python -m spark_jobs.replay --bootstrap 127.0.0.1:9092 --topic events \\
        [--starting-offsets earliest | --starting-offsets '{"events":{"0":100,"1":-2}}' \\
         | --starting-timestamp 2025-03-01T12:00:00Z] \\
        [--ending-offsets latest | --ending-timestamp 1740830400000] [--top-keys 20] \\
        [--output report.json]
"""

from __future__ import annotations

import argparse
import json
import sys
from datetime import datetime, timezone
from typing import Any

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from spark_jobs.kafka_io import (
    add_connection_args,
    assign_spec,
    client_options,
    load_kafka,
    offsets_spec,
    positive_int,
    session_from_args,
    topic_name,
)


def _iso_ms(epoch_ms: int | None) -> str | None:
    if epoch_ms is None:
        return None
    return datetime.fromtimestamp(epoch_ms / 1000, tz=timezone.utc).isoformat(timespec="milliseconds")


def replay_report(kafka_rows: DataFrame, top_keys: int | None = 10) -> dict[str, Any]:
    """Summarise Kafka source rows: totals, per-partition ranges and the most frequent keys.

    ``top_keys=None`` lists every key. Keys are decoded as UTF-8 (invalid bytes replaced);
    a null key is reported as ``None``.
    """
    rows = kafka_rows.select(
        "topic", "partition", "offset", "timestamp", F.col("key").cast("string").alias("key")
    ).cache()
    try:
        partitions = [
            {
                "topic": r["topic"],
                "partition": r["partition"],
                "count": r["count"],
                "first_offset": r["first_offset"],
                "last_offset": r["last_offset"],
                "first_timestamp": _iso_ms(r["first_timestamp"]),
                "last_timestamp": _iso_ms(r["last_timestamp"]),
            }
            for r in rows.groupBy("topic", "partition")
            .agg(
                F.count(F.lit(1)).alias("count"),
                F.min("offset").alias("first_offset"),
                F.max("offset").alias("last_offset"),
                # As epoch ms, computed in Spark: collected timestamps come back as naive
                # datetimes in the Python process's zone, whatever the session's zone.
                F.min(F.unix_millis("timestamp")).alias("first_timestamp"),
                F.max(F.unix_millis("timestamp")).alias("last_timestamp"),
            )
            .orderBy("topic", "partition")
            .collect()
        ]
        keys_df = (
            rows.groupBy("topic", "key")
            .agg(
                F.count(F.lit(1)).alias("count"),
                F.array_sort(F.collect_set("partition")).alias("partitions"),
            )
            .orderBy(F.desc("count"), F.asc_nulls_first("key"), "topic")
        )
        if top_keys is not None:
            keys_df = keys_df.limit(top_keys)
        keys = [
            {"topic": r["topic"], "key": r["key"], "count": r["count"], "partitions": list(r["partitions"])}
            for r in keys_df.collect()
        ]
        distinct_keys = rows.select("topic", "key").distinct().count()
    finally:
        rows.unpersist()
    return {
        "records": sum(p["count"] for p in partitions),
        "distinct_keys": distinct_keys,
        "partitions": partitions,
        "top_keys": keys,
    }


def timestamp_ms(text: str) -> int:
    """argparse type: epoch milliseconds, or ISO-8601 (a naive time is taken as UTC)."""
    if text.lstrip("-").isdigit():
        value = int(text)
    else:
        try:
            parsed = datetime.fromisoformat(text.replace("Z", "+00:00"))
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected epoch ms or ISO-8601, got {text!r}") from None
        if parsed.tzinfo is None:
            parsed = parsed.replace(tzinfo=timezone.utc)
        value = int(parsed.timestamp() * 1000)
    if value < 0:
        raise argparse.ArgumentTypeError(f"timestamp before 1970: {text!r}")
    return value


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m spark_jobs.replay",
        description=__doc__.split("\n\n")[0],
        formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog=__doc__.split("\n\n", 1)[1],
    )
    add_connection_args(parser)
    source = parser.add_mutually_exclusive_group(required=True)
    source.add_argument("--topic", type=topic_name, help="topic to replay (all its partitions)")
    source.add_argument(
        "--assign", type=assign_spec, help='JSON of topic -> partitions, e.g. \'{"events":[0,2]}\''
    )
    start = parser.add_mutually_exclusive_group()
    start.add_argument("--starting-offsets", type=offsets_spec, help="earliest (default) or JSON")
    start.add_argument("--starting-timestamp", type=timestamp_ms, help="epoch ms or ISO-8601")
    end = parser.add_mutually_exclusive_group()
    end.add_argument("--ending-offsets", type=offsets_spec, help="latest (default) or JSON")
    end.add_argument("--ending-timestamp", type=timestamp_ms, help="epoch ms or ISO-8601")
    parser.add_argument(
        "--no-match",
        choices=["error", "latest"],
        default="error",
        help="with --starting-timestamp, a partition with no record that late: fail or "
        "start at its end (default %(default)s)",
    )
    parser.add_argument("--top-keys", type=positive_int, default=10, help="(default %(default)s)")
    parser.add_argument("--all-keys", action="store_true", help="list every key, not only the top ones")
    parser.add_argument("--output", help="write the JSON report here instead of printing it")
    return parser


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.starting_offsets == "latest":
        parser.error("--starting-offsets latest would read nothing in a batch run")
    if args.ending_offsets == "earliest":
        parser.error("--ending-offsets earliest would read nothing")
    if (
        args.starting_timestamp is not None
        and args.ending_timestamp is not None
        and args.ending_timestamp <= args.starting_timestamp
    ):
        parser.error("--ending-timestamp must be after --starting-timestamp")
    return args


def source_options(args: argparse.Namespace) -> dict[str, str]:
    """The Kafka source options a parsed command line stands for."""
    options = client_options(args)
    if args.topic:
        options["subscribe"] = args.topic
    else:
        options["assign"] = args.assign
    if args.starting_timestamp is not None:
        options["startingTimestamp"] = str(args.starting_timestamp)
        options["startingOffsetsByTimestampStrategy"] = args.no_match
    else:
        options["startingOffsets"] = args.starting_offsets or "earliest"
    if args.ending_timestamp is not None:
        options["endingTimestamp"] = str(args.ending_timestamp)
    else:
        options["endingOffsets"] = args.ending_offsets or "latest"
    return options


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    spark = session_from_args(args, "replay")
    report = replay_report(
        load_kafka(spark, source_options(args), streaming=False),
        top_keys=None if args.all_keys else args.top_keys,
    )
    text = json.dumps(report, indent=2)
    if args.output:
        with open(args.output, "w", encoding="utf-8") as f:
            f.write(text + "\n")
    else:
        print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
