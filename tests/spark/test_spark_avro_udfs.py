"""The pandas UDFs of spark_jobs.avro on a local SparkSession (no connector) with a real Trafka
registry: bytes written by confluent-kafka's AvroSerializer decode into typed columns, the
pipeline's transform re-encodes them under a registered schema confluent-kafka reads back."""

from __future__ import annotations

import json

import pytest

from compat_tests import spark_kit

spark_kit.require("pyspark")
spark_kit.require("pyarrow", "pandas UDFs need pyarrow (the 'spark' extra)")

from pyspark.sql import functions as F  # noqa: E402
from pyspark.sql import types as T  # noqa: E402

from spark_jobs.avro import (  # noqa: E402
    AvroSchemaError,
    avro_to_spark_ddl,
    from_confluent_avro,
    spark_to_avro,
    to_confluent_avro,
)
from spark_jobs.avro_pipeline import split_select, transform  # noqa: E402
from tests.schema_registry.conftest import RegistryBroker  # noqa: E402

CLICK = {
    "type": "record", "name": "Click", "namespace": "t",
    "fields": [
        {"name": "user", "type": "string"},
        {"name": "page", "type": ["null", "string"], "default": None},
        {"name": "n", "type": "long"},
        {"name": "tags", "type": {"type": "array", "items": "string"}},
    ],
}


def test_schema_mapping():
    assert avro_to_spark_ddl(CLICK) == "struct<`user`:string,`page`:string,`n`:bigint,`tags`:array<string>>"
    with pytest.raises(AvroSchemaError, match="only"):
        avro_to_spark_ddl(["null", "int", "string"])
    st = T.StructType([T.StructField("a", T.LongType(), False), T.StructField("b", T.StringType())])
    assert spark_to_avro(st, "R") == {"type": "record", "name": "R", "namespace": "trafka.spark", "fields": [
        {"name": "a", "type": "long"}, {"name": "b", "type": ["null", "string"], "default": None}]}
    with pytest.raises(AvroSchemaError, match="timestamp"):
        spark_to_avro(T.TimestampType())
    assert split_select("user, concat(page, ',', user) AS p, n*2") == ["user", "concat(page, ',', user) AS p", "n*2"]


@pytest.fixture(scope="module")
def registry(tmp_path_factory):
    with RegistryBroker(tmp_path_factory.mktemp("udf") / "data") as broker:
        yield broker


def test_decode_transform_encode(spark, registry):
    from confluent_kafka.schema_registry import SchemaRegistryClient
    from confluent_kafka.schema_registry.avro import AvroDeserializer, AvroSerializer
    from confluent_kafka.serialization import MessageField, SerializationContext

    theirs = SchemaRegistryClient({"url": registry.url})
    ctx = SerializationContext("clicks", MessageField.VALUE)
    ser = AvroSerializer(theirs, json.dumps(CLICK))
    clicks = [{"user": f"u{i}", "page": None if i % 3 == 0 else f"/p{i % 2}", "n": i, "tags": ["a"] * (i % 3)}
              for i in range(20)]
    rows = [(b"k%d" % i, ser(c, ctx)) for i, c in enumerate(clicks)] + [(b"bad", b"\x01junk"), (b"tomb", None)]
    df = spark.createDataFrame(rows, "key binary, value binary")

    with pytest.raises(Exception, match="unknown magic byte"):
        df.select(from_confluent_avro(F.col("value"), registry.url)).collect()

    decoded = df.select("key", from_confluent_avro(F.col("value"), registry.url, avro_to_spark_ddl(CLICK),
                                                   on_error="null").alias("v")).where("v IS NOT NULL")
    got = {bytes(r.key): r.v.asDict() for r in decoded.collect()}
    assert got == {b"k%d" % i: c for i, c in enumerate(clicks)}

    shaped = transform(decoded, "page = '/p1'", "user, n * 2 AS weight, size(tags) AS tags")
    schema = spark_to_avro(shaped.schema["out"].dataType, "Weighted")
    out = shaped.select("key", to_confluent_avro(F.col("out"), "weighted-value", schema, registry.url).alias("value"))
    deser = AvroDeserializer(SchemaRegistryClient({"url": registry.url}))
    wctx = SerializationContext("weighted", MessageField.VALUE)
    result = {bytes(r.key): deser(bytes(r.value), wctx) for r in out.collect()}
    assert result == {b"k%d" % i: {"user": c["user"], "weight": 2 * c["n"], "tags": len(c["tags"])}
                      for i, c in enumerate(clicks) if c["page"] == "/p1"}
    assert theirs.get_latest_version("weighted-value").schema.schema_str  # registered by the driver


def test_pipeline_refuses_an_unknown_input_subject(registry, capsys):
    from spark_jobs.avro_pipeline import main

    assert main(["--registry", registry.url, "--input-topic", "nosuch", "--output-topic", "out"]) == 2
    err = capsys.readouterr().err
    assert "nosuch-value" in err and "40401" in err
