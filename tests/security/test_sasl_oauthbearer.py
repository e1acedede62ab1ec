"""OAUTHBEARER: Kafka's unsecured JWS default with confluent-kafka's unsecure-JWT mode, and
signed JWTs checked against a JWKS file (OAuthBearerValidatorCallbackHandler) with tokens
signed by a key made here; refused tokens go through RFC 7628's invalid_token challenge."""

from __future__ import annotations

import base64
import json
import time
import uuid

import pytest

from tests.security.sasl_kit import Raw, sasl_broker
from wire.errors import ErrorCode

pytestmark = pytest.mark.timeout(120)

VALIDATOR = "org.apache.kafka.common.security.oauthbearer.OAuthBearerValidatorCallbackHandler"
ISSUER = "https://issuer.trafka.test"
AUDIENCE = "trafka-brokers"


def _b64(data: dict) -> str:
    return base64.urlsafe_b64encode(json.dumps(data).encode()).rstrip(b"=").decode()


def unsecured(claims: dict) -> str:
    return f"{_b64({'alg': 'none'})}.{_b64(claims)}."


def initial_response(token: str) -> bytes:
    return f"n,,\x01auth=Bearer {token}\x01\x01".encode()


def roundtrip(conf: dict, topic: str) -> list[bytes]:
    import confluent_kafka

    producer = confluent_kafka.Producer({**conf, "message.timeout.ms": 10000})
    errors = []
    for i in range(2):
        producer.produce(topic, f"m{i}".encode(), on_delivery=lambda e, m: errors.append(e))
    assert producer.flush(15) == 0 and errors == [None, None], errors
    consumer = confluent_kafka.Consumer({**conf, "group.id": f"g-{topic}", "auto.offset.reset": "earliest"})
    got = []
    try:
        consumer.subscribe([topic])
        deadline = time.monotonic() + 20
        while len(got) < 2 and time.monotonic() < deadline:
            msg = consumer.poll(0.5)
            if msg is not None and not msg.error():
                got.append(msg.value())
    finally:
        consumer.close()
    return got


def refused_with_invalid_token(port: int, token: str) -> str:
    """RFC 7628: the error challenge, then \\x01, then SASL_AUTHENTICATION_FAILED and a close."""
    with Raw(port) as raw:
        assert raw.handshake("OAUTHBEARER")["error_code"] == 0
        challenge = raw.authenticate(initial_response(token))
        assert challenge["error_code"] == ErrorCode.NONE
        assert json.loads(challenge["auth_bytes"]) == {"status": "invalid_token"}
        final = raw.authenticate(b"\x01")
        assert final["error_code"] == ErrorCode.SASL_AUTHENTICATION_FAILED
        assert raw.closed_by_broker()
        return final["error_message"]


# ------------------------------------------------------------------ unsecured (Kafka's default)

@pytest.fixture(scope="module")
def broker(tmp_path_factory):
    proc = sasl_broker(tmp_path_factory.mktemp("sasl-oauth") / "data")
    proc.start()
    try:
        yield proc
    finally:
        proc.stop()


def test_unsecured_jwt_with_confluent(broker):
    conf = {"bootstrap.servers": broker.bootstrap, "security.protocol": "SASL_PLAINTEXT",
            "sasl.mechanisms": "OAUTHBEARER", "sasl.oauthbearer.config": "principal=alice",
            "enable.sasl.oauthbearer.unsecure.jwt": True}
    assert roundtrip(conf, f"oauth-{uuid.uuid4().hex[:6]}") == [b"m0", b"m1"]
    assert "authenticated as User:alice with OAUTHBEARER" in broker.log_tail(200)


def test_unsecured_jwt_with_the_java_client(broker):
    """kafka-clients 3.9.2's own unsecured login module (unsecuredLoginStringClaim_sub), as
    a Kafka user would configure it for development."""
    from compat_tests.clients.base import Message
    from compat_tests.clients.java_client import JavaClient

    java = JavaClient(broker.bootstrap, {
        "security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "OAUTHBEARER",
        "sasl.jaas.config": "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule required "
                            'unsecuredLoginStringClaim_sub="alice";'})
    topic = f"oauth-java-{uuid.uuid4().hex[:6]}"
    try:
        java.create_topic(topic, 1)
        assert [d.offset for d in java.produce(topic, [Message(value=b"j0"), Message(value=b"j1")])] == [0, 1]
        assert [r.value for r in java.consume(topic, 2, group=f"g-{topic}")] == [b"j0", b"j1"]
    finally:
        java.close()


def test_unsecured_jwt_with_kafka_python(broker):
    """kafka-python's OAUTHBEARER takes a token provider; the token is Kafka's unsecured JWS."""
    import kafka
    try:
        from kafka.net.sasl.oauth import AbstractTokenProvider  # kafka-python 3
    except ImportError:
        from kafka.sasl.oauth import AbstractTokenProvider  # kafka-python 2

    class Provider(AbstractTokenProvider):
        def token(self):
            return unsecured({"sub": "alice", "iat": int(time.time()), "exp": int(time.time()) + 600})

    topic = f"oauth-kp-{uuid.uuid4().hex[:6]}"
    conf = dict(bootstrap_servers=broker.bootstrap, security_protocol="SASL_PLAINTEXT",
                sasl_mechanism="OAUTHBEARER", sasl_oauth_token_provider=Provider())
    producer = kafka.KafkaProducer(**conf, request_timeout_ms=10000)
    try:
        assert producer.send(topic, b"kp").get(timeout=15).offset == 0
    finally:
        producer.close(timeout=5)
    consumer = kafka.KafkaConsumer(topic, **conf, auto_offset_reset="earliest", consumer_timeout_ms=10000)
    try:
        assert [m.value for m in consumer][:1] == [b"kp"]
    finally:
        consumer.close()


def test_unsecured_token_lifetime_bounds_session(broker):
    with Raw(broker.port) as raw:
        assert raw.handshake("OAUTHBEARER")["error_code"] == 0
        answer = raw.authenticate(initial_response(unsecured({"sub": "bob", "exp": time.time() + 60})), version=1)
        assert answer["error_code"] == ErrorCode.NONE
        assert 50_000 < answer["session_lifetime_ms"] <= 60_000


@pytest.mark.parametrize("claims", [{"sub": "bob", "exp": time.time() - 5}, {"exp": time.time() + 60},
                                    {"sub": "bob"}])
def test_unsecured_bad_tokens_refused(broker, claims):
    assert refused_with_invalid_token(broker.port, unsecured(claims))


def test_garbage_token_refused(broker):
    assert refused_with_invalid_token(broker.port, "not-a-jwt")
    with Raw(broker.port) as raw:  # not even the message shape: also the challenge
        assert raw.handshake("OAUTHBEARER")["error_code"] == 0
        assert json.loads(raw.authenticate(b"garbage")["auth_bytes"]) == {"status": "invalid_token"}


# ------------------------------------------------------------------ JWKS validation

@pytest.fixture(scope="module")
def keys():
    from cryptography.hazmat.primitives.asymmetric import rsa

    return {"good": rsa.generate_private_key(public_exponent=65537, key_size=2048),
            "other": rsa.generate_private_key(public_exponent=65537, key_size=2048)}


@pytest.fixture(scope="module")
def jwks_broker(tmp_path_factory, keys):
    from jwt.algorithms import RSAAlgorithm

    root = tmp_path_factory.mktemp("sasl-jwks")
    jwk = json.loads(RSAAlgorithm.to_jwk(keys["good"].public_key()))
    jwk.update(kid="k1", alg="RS256", use="sig")
    jwks = root / "jwks.json"
    jwks.write_text(json.dumps({"keys": [jwk]}))
    prefix = "listener.name.sasl_plaintext.oauthbearer."
    proc = sasl_broker(root / "data", "--set", f"{prefix}sasl.server.callback.handler.class={VALIDATOR}",
                       "--set", f"sasl.oauthbearer.jwks.endpoint.url=file://{jwks}",
                       "--set", f"sasl.oauthbearer.expected.issuer={ISSUER}",
                       "--set", f"sasl.oauthbearer.expected.audience={AUDIENCE}",
                       mechanisms="OAUTHBEARER")
    proc.start()
    try:
        yield proc
    finally:
        proc.stop()


def signed(key, **overrides) -> str:
    import jwt

    now = int(time.time())
    claims = {"sub": "carol", "iss": ISSUER, "aud": AUDIENCE, "iat": now, "exp": now + 300}
    claims.update(overrides)
    claims = {k: v for k, v in claims.items() if v is not None}
    return jwt.encode(claims, key, algorithm="RS256", headers={"kid": "k1"})


def test_jwks_token_with_confluent_oauth_cb(jwks_broker, keys):
    calls = []

    def oauth_cb(_config):
        calls.append(1)
        return signed(keys["good"]), time.time() + 300

    conf = {"bootstrap.servers": jwks_broker.bootstrap, "security.protocol": "SASL_PLAINTEXT",
            "sasl.mechanisms": "OAUTHBEARER", "oauth_cb": oauth_cb}
    assert roundtrip(conf, f"jwks-{uuid.uuid4().hex[:6]}") == [b"m0", b"m1"]
    assert calls
    assert "authenticated as User:carol with OAUTHBEARER" in jwks_broker.log_tail(200)


@pytest.mark.parametrize("case", ["other key", "wrong audience", "wrong issuer", "expired", "no sub", "unsecured"])
def test_jwks_refuses(jwks_broker, keys, case):
    token = {
        "other key": lambda: signed(keys["other"]),
        "wrong audience": lambda: signed(keys["good"], aud="someone-else"),
        "wrong issuer": lambda: signed(keys["good"], iss="https://evil.test"),
        "expired": lambda: signed(keys["good"], exp=int(time.time()) - 120),
        "no sub": lambda: signed(keys["good"], sub=None),
        "unsecured": lambda: unsecured({"sub": "carol", "exp": time.time() + 60}),
    }[case]()
    refused_with_invalid_token(jwks_broker.port, token)
    with Raw(jwks_broker.port) as raw:  # a good token still works beside them
        assert raw.handshake("OAUTHBEARER")["error_code"] == 0
        assert raw.authenticate(initial_response(signed(keys["good"])))["error_code"] == ErrorCode.NONE


def test_jwks_over_http(tmp_path, keys):
    """An http(s) JWKS endpoint is fetched (off the event loop) and its keys cached."""
    import http.server
    import threading

    from jwt.algorithms import RSAAlgorithm

    jwk = json.loads(RSAAlgorithm.to_jwk(keys["good"].public_key()))
    jwk.update(kid="k1", alg="RS256", use="sig")
    body = json.dumps({"keys": [jwk]}).encode()
    hits = []

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self):  # noqa: N802 - http.server's name
            hits.append(self.path)
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args):
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    url = f"http://127.0.0.1:{server.server_address[1]}/jwks.json"
    proc = sasl_broker(tmp_path / "data", "--set", f"sasl.server.callback.handler.class={VALIDATOR}",
                       "--set", f"sasl.oauthbearer.jwks.endpoint.url={url}",
                       "--set", f"sasl.oauthbearer.expected.issuer={ISSUER}", mechanisms="OAUTHBEARER")
    try:
        with proc:
            for _ in range(2):
                with Raw(proc.port) as raw:
                    assert raw.handshake("OAUTHBEARER")["error_code"] == 0
                    answer = raw.authenticate(initial_response(signed(keys["good"], aud=None)), version=1)
                    assert answer["error_code"] == ErrorCode.NONE
                    assert 0 < answer["session_lifetime_ms"] <= 300_000
            refused_with_invalid_token(proc.port, signed(keys["other"], aud=None))
    finally:
        server.shutdown()
        server.server_close()
    assert hits and all(h == "/jwks.json" for h in hits)
