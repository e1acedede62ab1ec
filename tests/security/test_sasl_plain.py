"""SASL/PLAIN on a SASL_PLAINTEXT listener: users from the listener's JAAS setting, stock
clients produce and consume; refused credentials, the pre-authentication gate, and the
handshake's errors seen on the wire."""

from __future__ import annotations

import uuid

import pytest

from tests.security.sasl_kit import ALL_MECHANISMS, ROUNDTRIPS, USERS, Raw, client_conf, sasl_broker
from wire import ApiKey
from wire.errors import ErrorCode

pytestmark = pytest.mark.timeout(120)


@pytest.fixture(scope="module")
def broker(tmp_path_factory):
    proc = sasl_broker(tmp_path_factory.mktemp("sasl-plain") / "data")
    proc.start()
    try:
        yield proc
    finally:
        proc.stop()


@pytest.mark.parametrize("client", sorted(ROUNDTRIPS))
def test_plain_produce_consume(broker, client):
    topic = f"plain-{client}-{uuid.uuid4().hex[:6]}"
    got = ROUNDTRIPS[client](broker, "PLAIN", "alice", USERS["alice"], topic)
    assert got == [b"alice-0", b"alice-1", b"alice-2"]
    assert "authenticated as User:alice with PLAIN" in broker.log_tail(400)


@pytest.mark.parametrize("user,password", [("alice", "wrong"), ("mallory", "alice-secret")])
def test_refused_credentials_answer_58_then_close(broker, user, password):
    with Raw(broker.port) as raw:
        answer = raw.plain(user, password)
        assert answer["error_code"] == ErrorCode.SASL_AUTHENTICATION_FAILED
        assert answer["error_message"] == "Authentication failed: Invalid username or password"
        assert raw.closed_by_broker()
    log = broker.log_tail(200)
    assert f"user={user}, mechanism=PLAIN" in log
    assert password not in log  # the secret is never logged
    with Raw(broker.port) as raw:  # and the broker keeps serving
        assert raw.plain("alice", USERS["alice"])["error_code"] == ErrorCode.NONE
        assert raw.request(ApiKey.METADATA, 9, {"topics": []})["brokers"]


def test_confluent_reports_authentication_error(broker):
    import confluent_kafka
    from confluent_kafka.admin import AdminClient

    admin = AdminClient({**client_conf(broker, "PLAIN", "alice", "wrong")})
    with pytest.raises(confluent_kafka.KafkaException) as info:
        admin.list_topics(timeout=2)
    # librdkafka marks the broker down with an authentication failure
    errors = []
    consumer = confluent_kafka.Consumer({**client_conf(broker, "PLAIN", "alice", "wrong"), "group.id": "x",
                                         "error_cb": errors.append})
    try:
        for _ in range(20):
            consumer.poll(0.25)
            if errors:
                break
    finally:
        consumer.close()
    assert info.value is not None
    assert any(e.code() == confluent_kafka.KafkaError._AUTHENTICATION for e in errors), errors


def test_request_before_authentication_closes_connection(broker):
    with Raw(broker.port) as raw:
        assert raw.request(ApiKey.API_VERSIONS, 3, {"client_software_name": "t", "client_software_version": "1"}
                           )["error_code"] == 0  # allowed before authentication
        raw.sock.sendall(__import__("wire").encode_request(ApiKey.METADATA, 9, 7, {"topics": []}, client_id="x"))
        assert raw.closed_by_broker()
    assert "Unexpected Kafka request of type METADATA during SASL handshake" in broker.log_tail(100)


def test_unsupported_mechanism_lists_enabled_ones(broker):
    with Raw(broker.port) as raw:
        answer = raw.handshake("GSSAPI")
        assert answer["error_code"] == ErrorCode.UNSUPPORTED_SASL_MECHANISM
        assert answer["mechanisms"] == ALL_MECHANISMS.split(",")
        assert raw.closed_by_broker()


def test_authenticate_without_handshake_is_illegal_state(broker):
    with Raw(broker.port) as raw:
        answer = raw.authenticate(b"\0alice\0alice-secret")
        assert answer["error_code"] == ErrorCode.ILLEGAL_SASL_STATE
        assert raw.closed_by_broker()


def test_handshake_v0_then_bare_tokens(broker):
    """KIP-152's old mode: after a v0 handshake the token goes bare, length-prefixed."""
    import struct

    from tests.brokerproc import recv_exact

    with Raw(broker.port) as raw:
        answer = raw.request(ApiKey.SASL_HANDSHAKE, 0, {"mechanism": "PLAIN"})
        assert answer["error_code"] == ErrorCode.NONE
        token = b"\0alice\0" + USERS["alice"].encode()
        raw.sock.sendall(struct.pack(">i", len(token)) + token)
        assert recv_exact(raw.sock, 4) == b"\0\0\0\0"  # PLAIN's empty server token
        assert raw.request(ApiKey.METADATA, 9, {"topics": []})["brokers"]
    with Raw(broker.port) as raw:
        assert raw.request(ApiKey.SASL_HANDSHAKE, 0, {"mechanism": "PLAIN"})["error_code"] == ErrorCode.NONE
        token = b"\0alice\0nope"
        raw.sock.sendall(struct.pack(">i", len(token)) + token)
        assert raw.closed_by_broker()  # v0 has no error answer: the connection closes


def test_python_clients_report_authentication_failure(broker, caplog):
    """kafka-python and aiokafka fail to bootstrap, logging the broker's error 58 and message."""
    import asyncio
    import logging

    import aiokafka
    import kafka

    conf = dict(bootstrap_servers=broker.bootstrap, security_protocol="SASL_PLAINTEXT", sasl_mechanism="PLAIN",
                sasl_plain_username="alice", sasl_plain_password="bad", request_timeout_ms=3000)
    caplog.set_level(logging.INFO)
    with pytest.raises(kafka.errors.KafkaError):
        kafka.KafkaAdminClient(**conf, bootstrap_timeout_ms=3000)
    kafka_python_log = caplog.text
    assert "Invalid username or password" in kafka_python_log
    caplog.clear()

    async def run():
        producer = aiokafka.AIOKafkaProducer(**conf)
        try:
            with pytest.raises(aiokafka.errors.KafkaConnectionError):
                await producer.start()
        finally:
            await producer.stop()

    asyncio.run(run())
    assert "[Error 58] SaslAuthenticationFailed: Authentication failed: Invalid username or password" in caplog.text
