"""Avro in, Avro out: read a registry-encoded topic, filter and reshape it, write it back encoded.

    python -m spark_jobs.avro_pipeline --bootstrap 127.0.0.1:9092 --registry http://127.0.0.1:8081 \\
        --input-topic clicks --output-topic checkout-clicks \\
        --where "page = '/checkout'" --select "user, page, n * 2 AS weight"

The input's Spark type comes from the latest schema of ``<input-topic>-value`` in the
registry (``avro_to_spark_ddl``); each value is decoded with the schema its own id names, so
older writers' records read fine as long as the latest schema can read them (the registry's
compatibility check is what promises that). The output's Avro schema is derived from the
selected columns (``spark_to_avro``) unless ``--output-schema`` gives one, and is registered
under ``<output-topic>-value`` before any record is read: an incompatible change stops the
job at once with the registry's 409. Keys pass through unchanged.

Batch by default (earliest to latest at start); ``--streaming --checkpoint DIR`` keeps it
running. Spark's Kafka sink is at-least-once: a streaming batch replayed after a crash is
written again (use ``spark_jobs.mirror``'s design where that matters).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from spark_jobs.kafka_io import (
    add_connection_args,
    await_queries,
    client_options,
    load_kafka,
    session_from_args,
    topic_name,
)


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m spark_jobs.avro_pipeline", description=__doc__.split("\n\n")[0])
    add_connection_args(parser)
    parser.add_argument("--registry", required=True, help="Schema Registry URL, e.g. http://127.0.0.1:8081")
    parser.add_argument("--input-topic", type=topic_name, required=True)
    parser.add_argument("--output-topic", type=topic_name, required=True)
    parser.add_argument("--where", default=None, help="Spark SQL condition on the decoded fields")
    parser.add_argument("--select", default="*", help="comma-separated Spark SQL expressions (default: all fields)")
    parser.add_argument("--output-schema", type=Path, default=None, help="Avro schema file for the output")
    parser.add_argument("--output-subject", default=None, help="default: <output-topic>-value")
    parser.add_argument("--on-error", choices=["fail", "null"], default="fail",
                        help="an undecodable value: stop the job, or drop the record (logged)")
    parser.add_argument("--streaming", action="store_true", help="keep running (needs --checkpoint)")
    parser.add_argument("--checkpoint", default=None)
    parser.add_argument("--run-for", type=float, default=None, help="streaming: stop after this many seconds")
    args = parser.parse_args(argv)
    if args.streaming and not args.checkpoint:
        parser.error("--streaming needs --checkpoint")
    return args


def split_select(text: str) -> list[str]:
    """Split ``--select`` on top-level commas (not those inside parentheses or quotes)."""
    out, depth, quote, cur = [], 0, None, ""
    for ch in text:
        if quote:
            quote = None if ch == quote else quote
        elif ch in "'\"`":
            quote = ch
        elif ch == "(":
            depth += 1
        elif ch == ")":
            depth -= 1
        elif ch == "," and depth == 0:
            out.append(cur.strip())
            cur = ""
            continue
        cur += ch
    if cur.strip():
        out.append(cur.strip())
    return out


def transform(decoded, where: str | None, select: str):
    """The decoded rows (``key`` + the value's fields) filtered and reshaped; ``key`` kept."""
    from pyspark.sql import functions as F

    rows = decoded.select("key", "v.*")
    if where:
        rows = rows.where(where)
    exprs = split_select(select)
    return rows.select(F.col("key"), F.struct(*[F.expr(e) for e in exprs]).alias("out"))


def main(argv: list[str] | None = None) -> int:
    from pyspark.sql import functions as F

    from spark_jobs.avro import (
        AvroSchemaError,
        RegistryClient,
        RegistryError,
        avro_to_spark_ddl,
        from_confluent_avro,
        spark_to_avro,
        to_confluent_avro,
    )

    args = parse_args(argv)
    try:
        with RegistryClient(args.registry) as client:
            latest = client.latest(f"{args.input_topic}-value")
        input_type = avro_to_spark_ddl(latest["schema"])
    except (RegistryError, AvroSchemaError) as exc:
        print(f"error: input schema of {args.input_topic}-value: {exc}", file=sys.stderr)
        return 2
    spark = session_from_args(args, "trafka-avro-pipeline")
    options = {**client_options(args), "subscribe": args.input_topic, "startingOffsets": "earliest"}
    if not args.streaming:
        options["endingOffsets"] = "latest"
    source = load_kafka(spark, options, streaming=args.streaming)
    decoded = source.select("key", from_confluent_avro(F.col("value"), args.registry, input_type,
                                                       on_error=args.on_error).alias("v"))
    decoded = decoded.where(F.col("v").isNotNull())
    shaped = transform(decoded, args.where, args.select)
    out_type = shaped.schema["out"].dataType
    schema = (json.loads(args.output_schema.read_text()) if args.output_schema
              else spark_to_avro(out_type, name=args.output_topic.replace(".", "_").replace("-", "_")))
    subject = args.output_subject or f"{args.output_topic}-value"
    try:
        value = to_confluent_avro(F.col("out"), subject, schema, args.registry)
    except (RegistryError, AvroSchemaError) as exc:
        print(f"error: output schema for {subject}: {exc}", file=sys.stderr)
        return 2
    out = shaped.select("key", value.alias("value"))
    sink_options = {**client_options(args), "topic": args.output_topic}
    if args.streaming:
        writer = out.writeStream.format("kafka").option("checkpointLocation", args.checkpoint)
        for k, v in sink_options.items():
            writer = writer.option(k, v)
        await_queries([writer.start()], args.run_for)
    else:
        writer = out.write.format("kafka")
        for k, v in sink_options.items():
            writer = writer.option(k, v)
        writer.save()
    return 0


if __name__ == "__main__":
    sys.exit(main())
