"""SCRAM-SHA-256/512: credentials created with AlterUserScramCredentials by stock admin
clients, usable at once by four stock clients, described without secrets, kept across a
restart; KIP-554's error codes; refused proofs."""

from __future__ import annotations

import hashlib
import json
import os
import uuid

import pytest

from tests.security.sasl_kit import ROUNDTRIPS, USERS, Raw, client_conf, sasl_broker, scram_login
from wire import ApiKey
from wire.errors import ErrorCode

pytestmark = pytest.mark.timeout(120)

BOB = "bob-pass word,="  # characters SCRAM escapes in names/needs no escaping in passwords


@pytest.fixture(scope="module")
def broker(tmp_path_factory):
    proc = sasl_broker(tmp_path_factory.mktemp("sasl-scram") / "data")
    proc.start()
    try:
        yield proc
    finally:
        proc.stop()


@pytest.fixture(scope="module")
def bob(broker):
    """User bob, created through confluent-kafka's AdminClient (itself logged in with PLAIN)."""
    from confluent_kafka.admin import AdminClient, ScramCredentialInfo, ScramMechanism, UserScramCredentialUpsertion

    admin = AdminClient(client_conf(broker, "PLAIN", "admin", USERS["admin"]))
    futures = admin.alter_user_scram_credentials([
        UserScramCredentialUpsertion("bob", ScramCredentialInfo(ScramMechanism.SCRAM_SHA_256, 8192), BOB.encode()),
        UserScramCredentialUpsertion("bob", ScramCredentialInfo(ScramMechanism.SCRAM_SHA_512, 4096), BOB.encode()),
    ])
    for future in futures.values():
        assert future.result(timeout=15) is None
    return admin


def test_describe_shows_mechanisms_and_iterations_only(broker, bob):
    from confluent_kafka.admin import ScramMechanism

    description = bob.describe_user_scram_credentials(["bob"])["bob"].result(timeout=15)
    infos = sorted((i.mechanism, i.iterations) for i in description.scram_credential_infos)
    assert infos == sorted([(ScramMechanism.SCRAM_SHA_256, 8192), (ScramMechanism.SCRAM_SHA_512, 4096)])
    stored = json.loads((broker.data_dir / "__security" / "scram_credentials.json").read_text())
    text = json.dumps(stored)
    assert "iterations=8192" in stored["users"]["bob"]["SCRAM-SHA-256"]
    assert BOB not in text  # only salted keys on disk
    salted = hashlib.pbkdf2_hmac("sha256", BOB.encode(), b"x", 8192)
    assert salted.hex() not in text


@pytest.mark.parametrize("mechanism", ["SCRAM-SHA-256", "SCRAM-SHA-512"])
@pytest.mark.parametrize("client", sorted(ROUNDTRIPS))
def test_scram_produce_consume(broker, bob, client, mechanism):
    if client == "kcat" and "," in BOB:
        pass  # kcat takes -X sasl.password=VALUE whole: commas are fine
    topic = f"scram-{client}-{mechanism[-3:]}-{uuid.uuid4().hex[:6]}"
    got = ROUNDTRIPS[client](broker, mechanism, "bob", BOB, topic)
    assert got == [b"bob-0", b"bob-1", b"bob-2"]


def test_kafka_python_admin_creates_a_user(broker):
    from kafka.admin import KafkaAdminClient, ScramMechanism, UserScramCredentialUpsertion

    admin = KafkaAdminClient(bootstrap_servers=broker.bootstrap, security_protocol="SASL_PLAINTEXT",
                             sasl_mechanism="PLAIN", sasl_plain_username="admin",
                             sasl_plain_password=USERS["admin"])
    try:
        result = admin.alter_user_scram_credentials(
            [UserScramCredentialUpsertion("carol", ScramMechanism.SCRAM_SHA_512, "carol-secret", iterations=4096)])
        assert result == {"carol": None}
        described = admin.describe_user_scram_credentials(["carol"])
        assert described["carol"]["error"] is None
        assert [(int(i["mechanism"]), i["iterations"]) for i in described["carol"]["credential_infos"]] == [(2, 4096)]
    finally:
        admin.close()
    with Raw(broker.port) as raw:
        assert scram_login(raw, "SCRAM-SHA-512", "carol", "carol-secret")["error_code"] == ErrorCode.NONE
        assert raw.request(ApiKey.METADATA, 9, {"topics": []})["brokers"]


@pytest.mark.parametrize("user,password,mechanism", [("bob", "wrong", "SCRAM-SHA-256"),
                                                      ("bob", BOB[:-1], "SCRAM-SHA-512"),
                                                      ("nobody", BOB, "SCRAM-SHA-256"),
                                                      ("carol", "carol-secret", "SCRAM-SHA-256")])  # no 256 credential
def test_refused_scram_login(broker, bob, user, password, mechanism):
    with Raw(broker.port) as raw:
        answer = scram_login(raw, mechanism, user, password)
        assert answer["error_code"] == ErrorCode.SASL_AUTHENTICATION_FAILED
        assert mechanism in answer["error_message"]
        assert raw.closed_by_broker()
    assert f"user={user}, mechanism={mechanism}" in broker.log_tail(100)
    with Raw(broker.port) as raw:
        assert scram_login(raw, "SCRAM-SHA-256", "bob", BOB)["error_code"] == ErrorCode.NONE


def _alter(raw: Raw, deletions=(), upsertions=()) -> dict:
    return {r["user"]: (r["error_code"], r["error_message"]) for r in raw.request(
        ApiKey.ALTER_USER_SCRAM_CREDENTIALS, 0,
        {"deletions": list(deletions), "upsertions": list(upsertions)})["results"]}


def _upsert(name: str, mechanism: int = 1, iterations: int = 4096) -> dict:
    return {"name": name, "mechanism": mechanism, "iterations": iterations, "salt": os.urandom(16),
            "salted_password": os.urandom(32)}


def test_kip554_error_codes(broker, bob):
    with Raw(broker.port) as raw:
        assert raw.plain("admin", USERS["admin"])["error_code"] == 0
        results = _alter(raw, upsertions=[_upsert("few", iterations=4095), _upsert("many", iterations=16385),
                                          _upsert(""), _upsert("twice"), _upsert("twice"),
                                          _upsert("badmech", mechanism=3)],
                         deletions=[{"name": "ghost", "mechanism": 1}])
        assert results["few"][0] == ErrorCode.UNACCEPTABLE_CREDENTIAL
        assert results["many"][0] == ErrorCode.UNACCEPTABLE_CREDENTIAL
        assert results[""][0] == ErrorCode.UNACCEPTABLE_CREDENTIAL
        assert results["twice"][0] == ErrorCode.DUPLICATE_RESOURCE
        assert results["badmech"][0] == ErrorCode.UNSUPPORTED_SASL_MECHANISM
        assert results["ghost"][0] == ErrorCode.RESOURCE_NOT_FOUND
        described = raw.request(ApiKey.DESCRIBE_USER_SCRAM_CREDENTIALS, 0,
                                {"users": [{"name": "ghost"}, {"name": "twice"}, {"name": "bob"}, {"name": "bob"}]})
        codes = {r["user"]: r["error_code"] for r in described["results"]}
        assert codes == {"ghost": ErrorCode.RESOURCE_NOT_FOUND, "twice": ErrorCode.RESOURCE_NOT_FOUND,
                         "bob": ErrorCode.DUPLICATE_RESOURCE}
        everyone = raw.request(ApiKey.DESCRIBE_USER_SCRAM_CREDENTIALS, 0, {"users": None})
        assert "bob" in {r["user"] for r in everyone["results"]}
        assert "few" not in {r["user"] for r in everyone["results"]}
        # a deletion, then the credential no longer works
        assert _alter(raw, upsertions=[_upsert("dave")]) == {"dave": (0, None)}
        assert _alter(raw, deletions=[{"name": "dave", "mechanism": 1}]) == {"dave": (0, None)}


def test_credentials_survive_restart(broker, bob):
    broker.restart()
    with Raw(broker.port) as raw:
        assert scram_login(raw, "SCRAM-SHA-512", "bob", BOB)["error_code"] == ErrorCode.NONE
        described = raw.request(ApiKey.DESCRIBE_USER_SCRAM_CREDENTIALS, 0, {"users": [{"name": "bob"}]})
        assert sorted((i["mechanism"], i["iterations"]) for i in described["results"][0]["credential_infos"]) == \
            [(1, 8192), (2, 4096)]


def test_java_admin_creates_and_describes_a_user_who_then_logs_in(broker):
    """kafka-clients 3.9.2's Admin (what kafka-configs.sh --alter --add-config SCRAM-SHA-256=... calls):
    alterUserScramCredentials then describeUserScramCredentials, as admin over PLAIN; the new
    user then logs in with the Java client's own ScramLoginModule."""
    from compat_tests.clients.base import Message
    from compat_tests.clients.java_client import JavaClient

    def sasl(mechanism: str, module: str, user: str, password: str) -> dict:
        return {"security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": mechanism,
                "sasl.jaas.config": f'org.apache.kafka.common.security.{module} required '
                                    f'username="{user}" password="{password}";'}

    admin = JavaClient(broker.bootstrap, sasl("PLAIN", "plain.PlainLoginModule", "admin", USERS["admin"]))
    try:
        admin._call("alter_user_scram_credentials", user="dave", mechanism="SCRAM-SHA-256", iterations=8192,
                    password="dave-secret")
        described = admin._call("describe_user_scram_credentials", users=["dave"])["credentials"]
        assert described == {"dave": [["SCRAM-SHA-256", 8192]]}
    finally:
        admin.close()
    dave = JavaClient(broker.bootstrap, sasl("SCRAM-SHA-256", "scram.ScramLoginModule", "dave", "dave-secret"))
    topic = f"scram-java-{uuid.uuid4().hex[:6]}"
    try:
        dave.create_topic(topic, 1)
        assert [d.offset for d in dave.produce(topic, [Message(value=b"d0")])] == [0]
        assert [r.value for r in dave.consume(topic, 1, group=f"g-{topic}")] == [b"d0"]
    finally:
        dave.close()
