"""``python -m spark_jobs.avro_pipeline`` end to end with Spark's connector: confluent-kafka
writes Avro clicks through a Trafka broker's own registry, the job filters and reshapes them,
confluent-kafka reads the output with the schema the job registered. Skipped without
``SPARK_KAFKA_JARS``."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time

import pytest

pytest.importorskip("pyspark", reason="pyspark not installed (extra 'spark')")

from tests.brokerproc import REPO, create_topic  # noqa: E402
from tests.schema_registry.conftest import RegistryBroker  # noqa: E402

pytestmark = [
    pytest.mark.skipif(not os.environ.get("SPARK_KAFKA_JARS"),
                       reason="SPARK_KAFKA_JARS not set (Spark's Kafka connector is not on PyPI; see README)"),
    pytest.mark.timeout(300),
]

CLICK = {
    "type": "record", "name": "Click", "namespace": "t",
    "fields": [{"name": "user", "type": "string"}, {"name": "page", "type": "string"}, {"name": "n", "type": "long"}],
}


def test_avro_pipeline(tmp_path):
    from confluent_kafka import Consumer, Producer, TopicPartition
    from confluent_kafka.schema_registry import SchemaRegistryClient
    from confluent_kafka.schema_registry.avro import AvroDeserializer, AvroSerializer
    from confluent_kafka.serialization import MessageField, SerializationContext

    with RegistryBroker(tmp_path / "data") as broker:
        create_topic(broker.port, "clicks", 2)
        create_topic(broker.port, "checkout", 1)
        sr = SchemaRegistryClient({"url": broker.url})
        ser = AvroSerializer(sr, json.dumps(CLICK))
        producer = Producer({"bootstrap.servers": broker.bootstrap})
        clicks = [{"user": f"u{i}", "page": "/checkout" if i % 3 == 0 else "/home", "n": i} for i in range(90)]
        for i, c in enumerate(clicks):
            producer.produce("clicks", key=b"k%d" % i, value=ser(c, SerializationContext("clicks", MessageField.VALUE)))
        assert producer.flush(30) == 0

        job = subprocess.run(
            [sys.executable, "-m", "spark_jobs.avro_pipeline", "--bootstrap", broker.bootstrap,
             "--registry", broker.url, "--input-topic", "clicks", "--output-topic", "checkout",
             "--where", "page = '/checkout'", "--select", "user, n * 2 AS weight"],
            cwd=REPO, capture_output=True, text=True, timeout=240, env={**os.environ, "PYTHONPATH": str(REPO)},
        )
        assert job.returncode == 0, job.stderr[-4000:]

        deser = AvroDeserializer(SchemaRegistryClient({"url": broker.url}))
        consumer = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": "check"})
        consumer.assign([TopicPartition("checkout", 0, 0)])
        got = {}
        deadline = time.monotonic() + 30
        while len(got) < 30 and time.monotonic() < deadline:
            msg = consumer.poll(1.0)
            if msg is not None and not msg.error():
                got[msg.key()] = deser(msg.value(), SerializationContext("checkout", MessageField.VALUE))
        consumer.close()
        assert got == {b"k%d" % i: {"user": c["user"], "weight": 2 * c["n"]}
                       for i, c in enumerate(clicks) if c["page"] == "/checkout"}
        registered = json.loads(sr.get_latest_version("checkout-value").schema.schema_str)
        assert [f["name"] for f in registered["fields"]] == ["user", "weight"]
