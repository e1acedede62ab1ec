"""events_to_aggregates' transformations, on static DataFrames and on a file stream.

Spark's answers are checked against ``spark_jobs.generate.reference_counts``, a plain-Python
computation of the same windowed counts, on events from the real generator.
"""

from __future__ import annotations

import json
import os
import re
import time
import zlib
from datetime import datetime, timezone

import pytest

from compat_tests import spark_kit

spark_kit.require("pyspark")

from pyspark.sql import functions as F  # noqa: E402
from pyspark.sql.types import StringType, TimestampType  # noqa: E402

from spark_jobs.events_to_aggregates import (  # noqa: E402
    AGGREGATE_COLUMNS,
    EVENT_SCHEMA,
    parse_events,
    parse_args,
    to_kafka_records,
    windowed_counts,
)
from spark_jobs.generate import GeneratedEvent, iso_ms, make_events, reference_counts  # noqa: E402
from spark_jobs.kafka_io import KAFKA_SOURCE_SCHEMA  # noqa: E402

START_MS = 1_740_830_400_000  # 2025-03-01T12:00:00Z, on a minute boundary
MINUTE = 60_000


def kafka_rows(spark, events: list[GeneratedEvent], topic: str = "events", partitions: int = 3):
    """A DataFrame shaped like Spark's Kafka source output, partitioned by key like a producer."""
    offsets = [0] * partitions
    rows = []
    for e in events:
        p = zlib.crc32(e.key.encode()) % partitions
        rows.append(
            (
                e.key.encode(),
                e.value,
                topic,
                p,
                offsets[p],
                datetime.fromtimestamp(e.timestamp_ms / 1000, tz=timezone.utc),
                0,
                [(k, v) for k, v in e.headers],
            )
        )
        offsets[p] += 1
    return spark.createDataFrame(rows, KAFKA_SOURCE_SCHEMA)


def collected_counts(aggregates) -> dict[tuple[int, str, str], int]:
    """Spark aggregates -> the reference's shape, with window starts as epoch ms."""
    rows = aggregates.select(
        F.unix_millis("window_start").alias("start"),
        F.unix_millis("window_end").alias("end"),
        "page",
        "action",
        "count",
    ).collect()
    out = {}
    for r in rows:
        key = (r["start"], r["page"], r["action"])
        assert key not in out, f"duplicate aggregate row {key}"
        assert r["end"] - r["start"] == MINUTE
        out[key] = r["count"]
    return out


@pytest.fixture(scope="module")
def events() -> list[GeneratedEvent]:
    return list(make_events(1200, start_ms=START_MS, spacing_ms=500, skew_ms=30_000, users=40, seed=7))


def test_parse_events_declares_schema_and_drops_unplaceable_rows(spark):
    good = {"user": "u1", "page": "/cart", "action": "click", "event_time": "2025-03-01T12:00:03.250Z"}
    values = [
        json.dumps(good),
        json.dumps({**good, "extra": [1, 2]}),  # extra fields are ignored
        json.dumps({k: v for k, v in good.items() if k != "event_time"}),  # no event time
        json.dumps({k: v for k, v in good.items() if k != "page"}),  # no page
        "not json at all",
        None,  # a tombstone
    ]
    rows = spark.createDataFrame([(b"k", v.encode() if v else None) for v in values], "key binary, value binary")
    parsed = parse_events(rows)
    assert [(f.name, f.dataType) for f in parsed.schema.fields] == [
        ("user", StringType()),
        ("page", StringType()),
        ("action", StringType()),
        ("event_time", TimestampType()),
    ]
    assert parsed.schema.fieldNames() == EVENT_SCHEMA.fieldNames()
    got = parsed.select("user", "page", "action", F.unix_millis("event_time").alias("t")).collect()
    assert [tuple(r) for r in got] == [("u1", "/cart", "click", 1_740_830_403_250)] * 2


def test_windowed_counts_carries_the_watermark(spark, tmp_path):
    # Spark drops withWatermark from batch plans, so look at a streaming one: the same source
    # shape the job has (binary values), from files instead of Kafka.
    raw = spark.readStream.schema("value string").text(str(tmp_path)).select(
        F.col("value").cast("binary").alias("value")
    )
    events = parse_events(raw)
    aggregates = windowed_counts(events, "1 minute", "2 minutes")
    assert aggregates.isStreaming
    assert aggregates.columns == AGGREGATE_COLUMNS
    plan = aggregates._jdf.queryExecution().analyzed().toString()
    assert re.search(r"EventTimeWatermark [^\n]*event_time#\d+: timestamp, 2 minutes", plan), plan
    # The window is computed from the watermarked column (-T<delay>ms), so state can expire.
    assert re.search(r"AS window#\d+-T120000ms", plan), plan
    # ... and on the event-time column's metadata, where stateful operators look for it.
    watermarked = events.withWatermark("event_time", "2 minutes")
    assert watermarked.schema["event_time"].metadata == {"spark.watermarkDelayMs": 120_000}


def test_windowed_counts_match_plain_python(spark, events):
    aggregates = windowed_counts(parse_events(kafka_rows(spark, events)), "1 minute", "2 minutes")
    # A batch query ignores the watermark, so every window is there.
    expected = reference_counts(events, MINUTE)
    assert collected_counts(aggregates) == expected
    assert sum(expected.values()) == len(events)
    # The generator's skew really puts events into earlier windows than their arrival.
    assert any(e.event_time_ms // MINUTE < e.timestamp_ms // MINUTE for e in events)


def test_windowed_counts_with_other_window_lengths(spark, events):
    aggregates = windowed_counts(parse_events(kafka_rows(spark, events)), "5 minutes", "10 minutes")
    rows = aggregates.select(F.unix_millis("window_start").alias("s"), "page", "action", "count").collect()
    got = {(r["s"], r["page"], r["action"]): r["count"] for r in rows}
    assert got == reference_counts(events, 5 * MINUTE)


def test_kafka_records_are_keyed_by_window_and_page(spark, events):
    aggregates = windowed_counts(parse_events(kafka_rows(spark, events[:300])))
    records = to_kafka_records(aggregates).collect()
    expected = reference_counts(events[:300], MINUTE)
    assert len(records) == len(expected)
    for r in records:
        value = json.loads(r["value"])
        assert set(value) == set(AGGREGATE_COLUMNS)
        start_ms = int(datetime.fromisoformat(value["window_start"].replace("Z", "+00:00")).timestamp() * 1000)
        assert r["key"] == f"{iso_ms(start_ms)}|{value['page']}"
        assert value["window_end"] == iso_ms(start_ms + MINUTE)
        assert expected[(start_ms, value["page"], value["action"])] == value["count"]


def _write_json_lines(folder, index, events):
    """File ``index`` of a stream: the file source takes files in modification-time order,
    and files written within one millisecond tie, so give each its own mtime."""
    folder.mkdir(exist_ok=True)
    tmp = folder / f".part-{index}.tmp"
    tmp.write_bytes(b"".join(e.value + b"\n" for e in events))
    mtime = time.time() - 3600 + index
    os.utime(tmp, (mtime, mtime))
    tmp.rename(folder / f"part-{index}.json")  # never let the source see a half-written file


def _run_stream(spark, source_dir, parquet_dir, checkpoint_dir):
    raw = (
        spark.readStream.schema("value string")
        .option("maxFilesPerTrigger", 1)
        .text(str(source_dir))
        .select(F.col("value").cast("binary").alias("value"))
    )
    query = (
        windowed_counts(parse_events(raw), "1 minute", "2 minutes")
        .writeStream.format("parquet")
        .outputMode("append")
        .option("path", str(parquet_dir))
        .option("checkpointLocation", str(checkpoint_dir))
        .trigger(availableNow=True)
        .start()
    )
    assert query.awaitTermination(120), "availableNow query did not finish"
    assert query.exception() is None


def test_streaming_emits_closed_windows_once_and_resumes_from_checkpoint(spark, events, tmp_path):
    """The job's aggregation as a stream (files instead of Kafka, same code after the source).

    Append mode writes a window once the watermark passes its end; a second run on the same
    checkpoint picks up only the new input, and the Parquet output stays exactly the
    reference: no window twice, none missing.
    """
    source, out, ckpt = tmp_path / "in", tmp_path / "out", tmp_path / "ckpt"
    first, second = events[:600], events[600:]
    for i in range(2):  # two files, two micro-batches: the watermark moves between them
        _write_json_lines(source, i, first[i * 300 : (i + 1) * 300])
    _run_stream(spark, source, out, ckpt)
    after_first = collected_counts(spark.read.parquet(str(out)))
    assert after_first == reference_counts(first, MINUTE, watermark_ms=2 * MINUTE)
    assert after_first, "the first run closed no window at all"

    for i in range(2):
        _write_json_lines(source, 2 + i, second[i * 300 : (i + 1) * 300])
    _run_stream(spark, source, out, ckpt)
    final = collected_counts(spark.read.parquet(str(out)))
    assert final == reference_counts(events, MINUTE, watermark_ms=2 * MINUTE)
    assert set(after_first) < set(final)


def test_parse_args_requires_a_sink():
    with pytest.raises(SystemExit):
        parse_args(["--topic", "events", "--checkpoint", "/tmp/x"])
    args = parse_args(["--topic", "events", "--checkpoint", "/tmp/x", "--parquet", "/tmp/p"])
    assert args.trigger == "available-now" and args.fail_on_data_loss is True
    with pytest.raises(SystemExit):
        parse_args(["--topic", "bad topic", "--checkpoint", "/tmp/x", "--parquet", "/tmp/p"])
    base = ["--topic", "t", "--checkpoint", "c", "--parquet", "p"]
    for bad in (
        ["--starting-offsets", "{x"],
        ["--trigger", "soon"],
        ["--window", "1 fortnight"],
        ["--window", "1 min"],  # Spark refuses abbreviated units ...
        ["--watermark", "1.5 minutes"],  # ... and fractions of anything but seconds
        ["--watermark", "-5 minutes"],
        ["--max-offsets-per-trigger", "0"],
        ["--run-for", "0"],
    ):
        with pytest.raises(SystemExit):
            parse_args(base + bad)
    args = parse_args(base + ["--trigger", "500 milliseconds", "--window", "10 seconds", "--watermark", "2.5 seconds"])
    assert (args.trigger, args.window, args.watermark) == ("500 milliseconds", "10 seconds", "2.5 seconds")
