"""KIP-368 re-authentication: connections.max.reauth.ms becomes SaslAuthenticate's
session_lifetime_ms; an expired session is closed at its next request; a new handshake on
the same connection renews it (same principal only); librdkafka re-authenticates by itself."""

from __future__ import annotations

import time
import uuid

import pytest

from tests.security.sasl_kit import USERS, Raw, client_conf, sasl_broker, wait_for
from wire import ApiKey, encode_request
from wire.errors import ErrorCode

pytestmark = pytest.mark.timeout(120)

REAUTH_MS = 1500


@pytest.fixture(scope="module")
def broker(tmp_path_factory):
    proc = sasl_broker(tmp_path_factory.mktemp("sasl-reauth") / "data",
                       "--set", f"connections.max.reauth.ms={REAUTH_MS}", mechanisms="PLAIN")
    proc.start()
    try:
        yield proc
    finally:
        proc.stop()


def metadata(raw: Raw) -> dict:
    return raw.request(ApiKey.METADATA, 9, {"topics": []})


def test_lifetime_announced_and_expired_session_closed(broker):
    with Raw(broker.port) as raw:
        answer = raw.plain("alice", USERS["alice"], version=1)
        assert answer["error_code"] == ErrorCode.NONE
        assert answer["session_lifetime_ms"] == REAUTH_MS
        assert metadata(raw)["brokers"]
        time.sleep(REAUTH_MS / 1000 + 0.2)
        raw.sock.sendall(encode_request(ApiKey.METADATA, 9, 99, {"topics": []}, client_id="late"))
        assert raw.closed_by_broker()
    assert "expired (connections.max.reauth.ms)" in broker.log_tail(50)


def test_reauthentication_on_the_same_connection(broker):
    with Raw(broker.port) as raw:
        assert raw.plain("alice", USERS["alice"], version=1)["error_code"] == ErrorCode.NONE
        time.sleep(REAUTH_MS / 1000 * 0.6)
        again = raw.plain("alice", USERS["alice"], version=1)
        assert again["error_code"] == ErrorCode.NONE and again["session_lifetime_ms"] == REAUTH_MS
        time.sleep(REAUTH_MS / 1000 * 0.6)  # past the first session's end, inside the second
        assert metadata(raw)["brokers"]
    assert "re-authenticated as User:alice with PLAIN" in broker.log_tail(50)


def test_reauthentication_cannot_change_principal(broker):
    with Raw(broker.port) as raw:
        assert raw.plain("alice", USERS["alice"], version=1)["error_code"] == ErrorCode.NONE
        answer = raw.plain("admin", USERS["admin"], version=1)
        assert answer["error_code"] == ErrorCode.SASL_AUTHENTICATION_FAILED
        assert "re-authentication" in answer["error_message"]
        assert raw.closed_by_broker()


def test_librdkafka_reauthenticates_by_itself(broker):
    import confluent_kafka

    producer = confluent_kafka.Producer({**client_conf(broker, "PLAIN", "alice", USERS["alice"]),
                                         "message.timeout.ms": 10000})
    topic = f"reauth-{uuid.uuid4().hex[:6]}"
    errors = []
    deadline = time.monotonic() + REAUTH_MS / 1000 * 2.5
    while time.monotonic() < deadline:  # keep producing across more than one session lifetime
        producer.produce(topic, b"x", on_delivery=lambda e, m: errors.append(e))
        producer.flush(10)
        time.sleep(0.2)
    assert errors and all(e is None for e in errors), errors
    wait_for(lambda: "re-authenticated as User:alice" in broker.log_tail(200), 5, "a re-authentication")


def test_v0_authenticate_has_no_lifetime_field_but_still_expires(broker):
    with Raw(broker.port) as raw:
        answer = raw.plain("alice", USERS["alice"], version=0)
        assert answer["error_code"] == ErrorCode.NONE and "session_lifetime_ms" not in answer
        assert metadata(raw)["brokers"]
        time.sleep(REAUTH_MS / 1000 + 0.2)
        raw.sock.sendall(encode_request(ApiKey.METADATA, 9, 98, {"topics": []}, client_id="late"))
        assert raw.closed_by_broker()


def test_reauthentication_needs_handshake_v1(broker):
    with Raw(broker.port) as raw:
        assert raw.plain("alice", USERS["alice"], version=1)["error_code"] == ErrorCode.NONE
        answer = raw.request(ApiKey.SASL_HANDSHAKE, 0, {"mechanism": "PLAIN"})
        assert answer["error_code"] == ErrorCode.ILLEGAL_SASL_STATE
        assert raw.closed_by_broker()
