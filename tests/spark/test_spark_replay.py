"""replay: the report against a plain-Python count, and the Kafka options a command line means."""

from __future__ import annotations

import json
import random
from collections import Counter
from datetime import datetime, timezone

import pytest

from compat_tests import spark_kit

spark_kit.require("pyspark")

from spark_jobs.kafka_io import KAFKA_SOURCE_SCHEMA  # noqa: E402
from spark_jobs.replay import parse_args, replay_report, source_options, timestamp_ms  # noqa: E402

BASE_MS = 1_740_830_400_000


@pytest.fixture(scope="module")
def records():
    """Records of two topics, offsets starting past 0 as after retention, with null keys."""
    rng = random.Random(3)
    rows = []
    next_offset = {("a", 0): 10, ("a", 1): 0, ("b", 0): 500}
    for i in range(400):
        topic, partition = rng.choice(list(next_offset))
        key = None if rng.random() < 0.1 else f"k{rng.randrange(12)}".encode()
        offset = next_offset[(topic, partition)]
        next_offset[(topic, partition)] += 1
        ts = datetime.fromtimestamp((BASE_MS + i * 1000) / 1000, tz=timezone.utc)
        rows.append((key, b"v", topic, partition, offset, ts, 0, None))
    return rows


def test_report_matches_plain_python(spark, records):
    report = replay_report(spark.createDataFrame(records, KAFKA_SOURCE_SCHEMA), top_keys=None)
    json.dumps(report)  # the report is plain JSON

    assert report["records"] == len(records)
    by_partition: dict[tuple[str, int], list] = {}
    for r in records:
        by_partition.setdefault((r[2], r[3]), []).append(r)
    assert [(p["topic"], p["partition"]) for p in report["partitions"]] == sorted(by_partition)
    for p in report["partitions"]:
        rows = by_partition[(p["topic"], p["partition"])]
        assert p["count"] == len(rows)
        assert p["first_offset"] == min(r[4] for r in rows)
        assert p["last_offset"] == max(r[4] for r in rows)
        assert p["first_timestamp"] == min(r[5] for r in rows).isoformat(timespec="milliseconds")
        assert p["last_timestamp"] == max(r[5] for r in rows).isoformat(timespec="milliseconds")

    key_counts = Counter((r[2], r[0].decode() if r[0] is not None else None) for r in records)
    assert report["distinct_keys"] == len(key_counts)
    assert {(k["topic"], k["key"]): k["count"] for k in report["top_keys"]} == dict(key_counts)
    counts = [k["count"] for k in report["top_keys"]]
    assert counts == sorted(counts, reverse=True)
    for k in report["top_keys"]:
        assert k["partitions"] == sorted(
            {r[3] for r in records if r[2] == k["topic"] and (r[0].decode() if r[0] else None) == k["key"]}
        )


def test_report_top_keys_and_empty_input(spark, records):
    report = replay_report(spark.createDataFrame(records, KAFKA_SOURCE_SCHEMA), top_keys=3)
    assert len(report["top_keys"]) == 3
    empty = replay_report(spark.createDataFrame([], KAFKA_SOURCE_SCHEMA))
    assert empty == {"records": 0, "distinct_keys": 0, "partitions": [], "top_keys": []}


def test_command_line_to_source_options():
    opts = source_options(parse_args(["--bootstrap", "127.0.0.1:1", "--topic", "t", "-K", "client.id=r"]))
    assert opts == {
        "kafka.bootstrap.servers": "127.0.0.1:1",
        "kafka.client.id": "r",
        "subscribe": "t",
        "startingOffsets": "earliest",
        "endingOffsets": "latest",
    }
    opts = source_options(
        parse_args(
            [
                "--assign", '{"t":[0,2]}',
                "--starting-timestamp", "2025-03-01T12:00:00Z",
                "--ending-timestamp", "1740830460000",
                "--no-match", "latest",
            ]
        )
    )
    assert opts["assign"] == '{"t":[0,2]}'
    assert opts["startingTimestamp"] == str(BASE_MS)
    assert opts["startingOffsetsByTimestampStrategy"] == "latest"
    assert opts["endingTimestamp"] == "1740830460000"
    assert "startingOffsets" not in opts and "endingOffsets" not in opts


@pytest.mark.parametrize(
    "argv",
    [
        [],  # neither --topic nor --assign
        ["--topic", "t", "--assign", '{"t":[0]}'],
        ["--assign", '{"t":0}'],
        ["--topic", "t", "--starting-offsets", "latest"],
        ["--topic", "t", "--starting-offsets", "earliest", "--starting-timestamp", "5"],
        ["--topic", "t", "--starting-timestamp", "2025-03-02", "--ending-timestamp", "2025-03-01"],
        ["--topic", "t", "--starting-timestamp", "yesterday"],
        ["--topic", "t", "--top-keys", "0"],
    ],
)
def test_bad_command_lines_are_refused(argv):
    with pytest.raises(SystemExit):
        parse_args(argv)


def test_timestamp_forms():
    assert timestamp_ms("1740830400000") == BASE_MS
    assert timestamp_ms("2025-03-01T12:00:00Z") == BASE_MS
    assert timestamp_ms("2025-03-01T12:00:00") == BASE_MS  # naive means UTC
    assert timestamp_ms("2025-03-01T13:00:00+01:00") == BASE_MS
