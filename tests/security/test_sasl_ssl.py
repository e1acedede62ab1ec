"""SASL_SSL: SASL inside TLS, on one listener, with every stock client that speaks it —
confluent-kafka, kafka-python, aiokafka, kcat and the Java client (kafka-clients 3.9.2,
what Spark's connector runs) — with PLAIN and SCRAM, and OAUTHBEARER (confluent-kafka). The Java client also logs in over
SASL_PLAINTEXT. Certificates are made by the test (tests/security/certs.py); SCRAM's user
is created through AlterUserScramCredentials by an admin that logged in with PLAIN over
SASL_SSL."""

from __future__ import annotations

import asyncio
import subprocess
import uuid

import pytest

from tests.security.sasl_kit import BOB, USERS, SaslSslBroker as Setup

pytestmark = pytest.mark.timeout(180)

PLAIN_LOGIN = "org.apache.kafka.common.security.plain.PlainLoginModule"
SCRAM_LOGIN = "org.apache.kafka.common.security.scram.ScramLoginModule"


@pytest.fixture(scope="module")
def setup(tmp_path_factory):
    s = Setup(tmp_path_factory.mktemp("sasl-ssl"))
    with s.broker:
        s.create_bob()
        yield s


def _user(mechanism: str) -> tuple[str, str]:
    return ("alice", USERS["alice"]) if mechanism == "PLAIN" else ("bob", BOB)


def confluent_roundtrip(setup: Setup, mechanism: str, topic: str) -> list[bytes]:
    import confluent_kafka

    conf = setup.librdkafka(mechanism, *_user(mechanism))
    producer = confluent_kafka.Producer({**conf, "message.timeout.ms": 10000})
    errors: list = []
    for i in range(3):
        producer.produce(topic, b"v%d" % i, on_delivery=lambda e, m: errors.append(e))
    assert producer.flush(15) == 0 and errors == [None] * 3, errors
    consumer = confluent_kafka.Consumer({**conf, "group.id": f"g-{topic}", "auto.offset.reset": "earliest"})
    got: list[bytes] = []
    try:
        consumer.subscribe([topic])
        for _ in range(60):
            msg = consumer.poll(0.5)
            if msg is not None and not msg.error():
                got.append(msg.value())
            if len(got) == 3:
                break
    finally:
        consumer.close()
    return got


def kafka_python_roundtrip(setup: Setup, mechanism: str, topic: str) -> list[bytes]:
    import kafka

    user, password = _user(mechanism)
    conf = dict(bootstrap_servers=setup.bootstrap, security_protocol="SASL_SSL", ssl_cafile=str(setup.ca.cert_pem),
                sasl_mechanism=mechanism, sasl_plain_username=user, sasl_plain_password=password)
    producer = kafka.KafkaProducer(**conf, request_timeout_ms=10000)
    try:
        for i in range(3):
            producer.send(topic, b"v%d" % i).get(timeout=15)
    finally:
        producer.close(timeout=5)
    consumer = kafka.KafkaConsumer(topic, **conf, group_id=f"g-{topic}", auto_offset_reset="earliest",
                                   consumer_timeout_ms=10000)
    try:
        got = []
        for msg in consumer:
            got.append(msg.value)
            if len(got) == 3:
                break
        return got
    finally:
        consumer.close()


def aiokafka_roundtrip(setup: Setup, mechanism: str, topic: str) -> list[bytes]:
    import aiokafka
    from aiokafka.helpers import create_ssl_context

    user, password = _user(mechanism)

    async def run() -> list[bytes]:
        conf = dict(bootstrap_servers=setup.bootstrap, security_protocol="SASL_SSL",
                    ssl_context=create_ssl_context(cafile=str(setup.ca.cert_pem)), sasl_mechanism=mechanism,
                    sasl_plain_username=user, sasl_plain_password=password)
        producer = aiokafka.AIOKafkaProducer(**conf, request_timeout_ms=10000)
        await producer.start()
        try:
            for i in range(3):
                await producer.send_and_wait(topic, b"v%d" % i)
        finally:
            await producer.stop()
        consumer = aiokafka.AIOKafkaConsumer(topic, **conf, group_id=f"g-{topic}", auto_offset_reset="earliest")
        await consumer.start()
        got: list[bytes] = []
        try:
            async def take():
                async for msg in consumer:
                    got.append(msg.value)
                    if len(got) == 3:
                        return
            await asyncio.wait_for(take(), 20)
            return got
        finally:
            await consumer.stop()

    return asyncio.run(run())


def kcat_roundtrip(setup: Setup, mechanism: str, topic: str) -> list[bytes]:
    user, password = _user(mechanism)
    auth = ["-b", setup.bootstrap, "-X", "security.protocol=SASL_SSL", "-X", f"ssl.ca.location={setup.ca.cert_pem}",
            "-X", f"sasl.mechanisms={mechanism}", "-X", f"sasl.username={user}", "-X", f"sasl.password={password}"]
    produced = subprocess.run(["kcat", *auth, "-P", "-t", topic], input=b"v0\nv1\nv2\n", capture_output=True,
                              timeout=30)
    assert produced.returncode == 0, produced.stderr.decode()
    consumed = subprocess.run(["kcat", *auth, "-C", "-t", topic, "-o", "beginning", "-c", "3", "-e"],
                              capture_output=True, timeout=30)
    assert consumed.returncode == 0, consumed.stderr.decode()
    return consumed.stdout.splitlines()


ROUNDTRIPS = {"confluent-kafka": confluent_roundtrip, "kafka-python": kafka_python_roundtrip,
              "aiokafka": aiokafka_roundtrip, "kcat": kcat_roundtrip}


@pytest.mark.parametrize("mechanism", ["PLAIN", "SCRAM-SHA-512"])
@pytest.mark.parametrize("client", sorted(ROUNDTRIPS))
def test_sasl_ssl_produce_consume(setup, client, mechanism):
    topic = f"sasl-ssl-{client}-{mechanism[-3:]}-{uuid.uuid4().hex[:6]}"
    assert ROUNDTRIPS[client](setup, mechanism, topic) == [b"v0", b"v1", b"v2"]


def test_sasl_ssl_refuses_a_wrong_password(setup):
    import confluent_kafka

    errors: list = []
    producer = confluent_kafka.Producer({**setup.librdkafka("SCRAM-SHA-512", "bob", "not-it"),
                                         "error_cb": errors.append, "message.timeout.ms": 3000})
    producer.produce("refused", b"x")
    producer.flush(5)
    assert any(e.code() == confluent_kafka.KafkaError._AUTHENTICATION for e in errors), errors
    assert "not-it" not in setup.broker.log_path.read_text(errors="replace")


@pytest.mark.parametrize("protocol,mechanism", [("SASL_SSL", "PLAIN"), ("SASL_SSL", "SCRAM-SHA-256"),
                                                ("SASL_PLAINTEXT", "SCRAM-SHA-512")])
def test_java_client(setup, protocol, mechanism):
    """kafka-clients 3.9.2 with Kafka's own client settings: security.protocol, sasl.mechanism,
    sasl.jaas.config, a PEM truststore (KIP-651) — admin, producer and group consumer."""
    from compat_tests.clients.base import Message
    from compat_tests.clients.java_client import JavaClient

    user, password = _user(mechanism)
    module = PLAIN_LOGIN if mechanism == "PLAIN" else SCRAM_LOGIN
    config = {"security.protocol": protocol, "sasl.mechanism": mechanism,
              "sasl.jaas.config": f'{module} required username="{user}" password="{password}";'}
    port = setup.sasl_ssl_port if protocol == "SASL_SSL" else setup.sasl_plain_port
    if protocol == "SASL_SSL":
        config.update({"ssl.truststore.type": "PEM", "ssl.truststore.location": str(setup.ca.cert_pem)})
    java = JavaClient(f"127.0.0.1:{port}", config)
    topic = f"sasl-java-{mechanism[-3:]}-{uuid.uuid4().hex[:6]}"
    try:
        java.create_topic(topic, 1)
        deliveries = java.produce(topic, [Message(value=b"j%d" % i) for i in range(5)])
        assert [d.offset for d in deliveries] == list(range(5))
        assert [r.value for r in java.consume(topic, 5, group=f"g-{topic}")] == [b"j%d" % i for i in range(5)]
    finally:
        java.close()


def test_oauthbearer_over_sasl_ssl(setup):
    """The third mechanism inside TLS: Kafka's unsecured JWS (development default), librdkafka's
    unsecure-JWT mode."""
    import confluent_kafka

    conf = {"bootstrap.servers": setup.bootstrap, "security.protocol": "SASL_SSL",
            "ssl.ca.location": str(setup.ca.cert_pem), "sasl.mechanisms": "OAUTHBEARER",
            "sasl.oauthbearer.config": "principal=carol", "enable.sasl.oauthbearer.unsecure.jwt": True}
    topic = f"sasl-ssl-oauth-{uuid.uuid4().hex[:6]}"
    producer = confluent_kafka.Producer({**conf, "message.timeout.ms": 10000})
    errors: list = []
    producer.produce(topic, b"o1", on_delivery=lambda e, m: errors.append(e))
    assert producer.flush(15) == 0 and errors == [None], errors
    consumer = confluent_kafka.Consumer({**conf, "group.id": f"g-{topic}", "auto.offset.reset": "earliest"})
    try:
        consumer.subscribe([topic])
        got = None
        for _ in range(40):
            msg = consumer.poll(0.5)
            if msg is not None and not msg.error():
                got = msg.value()
                break
    finally:
        consumer.close()
    assert got == b"o1"
    assert "authenticated as User:carol with OAUTHBEARER" in setup.broker.log_tail(400)
