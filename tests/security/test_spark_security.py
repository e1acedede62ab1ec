"""Spark's Kafka connector (spark-sql-kafka-0-10 4.0 on kafka-clients) over SASL_SSL, with
only the options a Spark user sets: `kafka.security.protocol`, `kafka.sasl.mechanism`,
`kafka.sasl.jaas.config`, `kafka.ssl.truststore.*`. The sink writes as SCRAM user bob, a
batch read and an availableNow stream read it back. The connector comes from Maven Central
(compat_tests/spark_kit.py); under CI a missing jar fails this test, it never skips it.
Trafka only: the broker is Trafka's SASL_SSL set-up (sasl_kit); Spark's connector against
Apache Kafka runs in compat_tests."""

from __future__ import annotations

import uuid

import pytest

from compat_tests import spark_kit
from tests.security.sasl_kit import BOB, SaslSslBroker

spark_kit.require("pyspark")

pytestmark = pytest.mark.timeout(300)


@pytest.fixture(scope="module")
def setup(tmp_path_factory):
    s = SaslSslBroker(tmp_path_factory.mktemp("spark-sasl-ssl"))
    with s.broker:
        s.create_bob()
        yield s


@pytest.fixture(scope="module")
def spark():
    return spark_kit.session("trafka-spark-security")


def options(setup: SaslSslBroker) -> dict[str, str]:
    return {
        "kafka.bootstrap.servers": setup.bootstrap,
        "kafka.security.protocol": "SASL_SSL",
        "kafka.sasl.mechanism": "SCRAM-SHA-512",
        "kafka.sasl.jaas.config": 'org.apache.kafka.common.security.scram.ScramLoginModule required '
                                  f'username="bob" password="{BOB}";',
        "kafka.ssl.truststore.type": "PEM",
        "kafka.ssl.truststore.location": str(setup.ca.cert_pem),
    }


def test_spark_writes_and_reads_over_sasl_ssl(spark, setup, tmp_path):
    from spark_jobs.kafka_io import load_kafka

    topic = f"spark-sasl-ssl-{uuid.uuid4().hex[:6]}"
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient(setup.librdkafka("SCRAM-SHA-512", "bob", BOB))
    admin.create_topics([NewTopic(topic, 2, 1)])[topic].result(30)

    rows = [(f"k{i}".encode(), f"v{i}".encode()) for i in range(50)]
    df = spark.createDataFrame(rows, "key binary, value binary")
    writer = df.write.format("kafka").option("topic", topic)
    for key, value in options(setup).items():
        writer = writer.option(key, value)
    writer.save()

    batch = load_kafka(spark, {**options(setup), "subscribe": topic}, streaming=False).collect()
    assert sorted(bytes(r["value"]) for r in batch) == sorted(v for _k, v in rows)

    got: list[bytes] = []
    stream = load_kafka(spark, {**options(setup), "subscribe": topic, "startingOffsets": "earliest"},
                        streaming=True)
    query = (stream.writeStream.trigger(availableNow=True)
             .option("checkpointLocation", str(tmp_path / "checkpoint"))
             .foreachBatch(lambda frame, _id: got.extend(bytes(r["value"]) for r in frame.collect()))
             .start())
    assert query.awaitTermination(120)
    assert query.exception() is None
    assert sorted(got) == sorted(v for _k, v in rows)
