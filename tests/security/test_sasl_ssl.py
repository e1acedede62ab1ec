"""SASL_SSL: SASL inside TLS, on one listener, with every stock client that speaks it —
confluent-kafka, kafka-python, aiokafka, kcat and the Java client (kafka-clients 3.9.2,
what Spark's connector runs) — with PLAIN and SCRAM, and OAUTHBEARER (confluent-kafka). The Java client also logs in over
SASL_PLAINTEXT. Certificates are made by the test (tests/security/certs.py); SCRAM's user
is created through AlterUserScramCredentials by an admin that logged in with PLAIN over
SASL_SSL."""

from __future__ import annotations

import uuid

import pytest

from tests.security.sasl_kit import BOB, ROUNDTRIPS, USERS, SaslSslBroker as Setup

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


@pytest.mark.parametrize("mechanism", ["PLAIN", "SCRAM-SHA-512"])
@pytest.mark.parametrize("client", sorted(ROUNDTRIPS))
def test_sasl_ssl_produce_consume(setup, client, mechanism):
    topic = f"sasl-ssl-{client}-{mechanism[-3:]}-{uuid.uuid4().hex[:6]}"
    user, password = _user(mechanism)
    assert ROUNDTRIPS[client](setup, mechanism, user, password, topic) == [b"%s-%d" % (user.encode(), i)
                                                                          for i in range(3)]


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
