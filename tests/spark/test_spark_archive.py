"""topic_archive: archive rows, their date partitions in Parquet, and argument checking."""

from __future__ import annotations

from datetime import datetime, timezone

import pytest

from compat_tests import spark_kit

spark_kit.require("pyspark")

from pyspark.sql import functions as F  # noqa: E402

from spark_jobs.kafka_io import KAFKA_SOURCE_SCHEMA  # noqa: E402
from spark_jobs.topic_archive import PARTITION_COLUMNS, archive_rows, parse_args  # noqa: E402


def _ts(text: str) -> datetime:
    return datetime.fromisoformat(text).replace(tzinfo=timezone.utc)


# Around midnight UTC on purpose: the date must be the UTC day whatever the machine's zone.
ROWS = [
    (b"k1", b'{"a":1}', "logs", 0, 0, _ts("2025-03-01T23:59:59.999"), 0, [("trace", b"t1")]),
    (b"k2", b"plain text", "logs", 1, 0, _ts("2025-03-02T00:00:00.000"), 0, []),
    (None, b"\xff\xfe", "logs", 0, 1, _ts("2025-03-02T00:00:00.001"), 0, None),
    (b"k1", None, "logs", 1, 1, _ts("2025-03-03T12:00:00.000"), 0, [("a", None), ("a", b"2")]),
]


@pytest.fixture(scope="module")
def kafka_rows(spark):
    return spark.createDataFrame(ROWS, KAFKA_SOURCE_SCHEMA)


def test_archive_rows_columns_and_dates(kafka_rows):
    rows = archive_rows(kafka_rows)
    assert rows.columns == ["key", "value", "topic", "partition", "offset", "timestamp", "date"]
    assert dict(rows.dtypes)["key"] == "string" and dict(rows.dtypes)["date"] == "date"
    got = rows.select("key", "value", "partition", "offset", F.date_format("date", "yyyy-MM-dd").alias("d")).collect()
    assert [tuple(r) for r in got] == [
        ("k1", '{"a":1}', 0, 0, "2025-03-01"),
        ("k2", "plain text", 1, 0, "2025-03-02"),
        (None, "\ufffd\ufffd", 0, 1, "2025-03-02"),  # invalid UTF-8 is replaced, not fatal
        ("k1", None, 1, 1, "2025-03-03"),
    ]


def test_archive_rows_binary_and_headers(kafka_rows):
    rows = archive_rows(kafka_rows, binary=True, headers=True)
    assert rows.columns == ["key", "value", "topic", "partition", "offset", "timestamp", "headers", "date"]
    got = rows.collect()
    assert [bytes(r["value"]) if r["value"] is not None else None for r in got] == [r[1] for r in ROWS]
    assert [[(h["key"], h["value"] and bytes(h["value"])) for h in r["headers"]] if r["headers"] is not None else None for r in got] == [
        [("trace", b"t1")],
        [],
        None,
        [("a", None), ("a", b"2")],
    ]


def test_parquet_is_partitioned_by_date(spark, kafka_rows, tmp_path):
    out = tmp_path / "lake"
    archive_rows(kafka_rows, headers=True).write.partitionBy(*PARTITION_COLUMNS).parquet(str(out))
    assert sorted(p.name for p in out.iterdir() if p.is_dir()) == [
        "date=2025-03-01",
        "date=2025-03-02",
        "date=2025-03-03",
    ]
    back = spark.read.parquet(str(out))
    assert "date" in back.columns
    assert back.where(F.col("date") == "2025-03-02").count() == 2
    original = {(r["key"], r["partition"], r["offset"]) for r in archive_rows(kafka_rows).collect()}
    assert {(r["key"], r["partition"], r["offset"]) for r in back.collect()} == original


def test_parse_args_checks_modes():
    base = ["--topic", "logs", "--output", "/tmp/out"]
    args = parse_args(base)
    assert not args.streaming and args.ending_offsets == "latest"
    assert parse_args(base + ["--streaming", "--checkpoint", "/tmp/c"]).streaming
    for bad in (
        ["--streaming"],  # no checkpoint
        ["--streaming", "--checkpoint", "c", "--ending-offsets", '{"logs":{"0":5}}'],
        ["--streaming", "--checkpoint", "c", "--mode", "overwrite"],
        ["--checkpoint", "c"],  # batch with a checkpoint
        ["--starting-offsets", "latest"],
        ["--ending-offsets", "earliest"],
        ["--starting-offsets", '{"logs":{"0":"x"}}'],
    ):
        with pytest.raises(SystemExit):
            parse_args(base + bad)
    with pytest.raises(SystemExit):
        parse_args(["--topic", "logs", "--topic-pattern", "lo.*", "--output", "o"])
