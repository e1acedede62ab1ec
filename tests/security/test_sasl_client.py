"""The client side of inter-broker SASL (server/security/sasl/client.py): its exchanges
run against the broker's own server mechanisms (PLAIN, SCRAM-SHA-256/512), and the
settings a SASL inter-broker listener needs are checked at start (ConfigError naming the
setting, exit code 2 from `trafka serve`)."""

from __future__ import annotations

import subprocess
import sys

import pytest

from server.config import ConfigError, load_config
from server.security.sasl import AuthenticationFailed
from server.security.sasl.client import Credentials, ServerNotProven, inter_broker_credentials
from server.security.sasl.plain import Plain
from server.security.sasl.scram import Scram, ScramCredential
from tests.brokerproc import REPO, free_port

pytestmark = pytest.mark.timeout(60)

SCRAM_JAAS = 'org.apache.kafka.common.security.scram.ScramLoginModule required username="broker" password="{}";'
PLAIN_JAAS = ('org.apache.kafka.common.security.plain.PlainLoginModule required username="broker" '
              'password="broker-secret" user_broker="broker-secret";')


def _run(exchange, server) -> None:
    token = exchange.first()
    while token is not None:
        answer = server.step(token)
        token = exchange.respond(answer)
    assert server.complete


@pytest.mark.parametrize("mechanism", ["SCRAM-SHA-256", "SCRAM-SHA-512"])
def test_scram_client_against_the_broker_mechanism(mechanism):
    stored = ScramCredential.from_password(mechanism, "s3cr=t,pw", iterations=4096)
    server = Scram(mechanism, lambda user, mech: stored if (user, mech) == ("bro,ker=1", mechanism) else None)
    _run(Credentials(mechanism, "bro,ker=1", "s3cr=t,pw").exchange(), server)
    assert server.user == "bro,ker=1"

    refusing = Scram(mechanism, lambda user, mech: stored)
    with pytest.raises(AuthenticationFailed):
        _run(Credentials(mechanism, "broker", "wrong").exchange(), refusing)


def test_scram_client_refuses_a_server_without_the_credential():
    exchange = Credentials("SCRAM-SHA-256", "broker", "pw").exchange()
    impostor = Scram("SCRAM-SHA-256", lambda u, m: ScramCredential.from_password(m, "other"))
    impostor_first = impostor.step(exchange.first())
    exchange.respond(impostor_first)
    with pytest.raises(ServerNotProven):
        exchange.respond(b"v=" + b"A" * 44)


def test_plain_client_against_the_broker_mechanism():
    server = Plain({"broker": "broker-secret"})
    _run(Credentials("PLAIN", "broker", "broker-secret").exchange(), server)
    assert server.user == "broker"
    with pytest.raises(AuthenticationFailed):
        _run(Credentials("PLAIN", "broker", "nope").exchange(), Plain({"broker": "broker-secret"}))
    assert "broker-secret" not in repr(Credentials("PLAIN", "broker", "broker-secret"))


def _config(**settings: str):
    base = {"listeners": "SASL_PLAINTEXT://127.0.0.1:9092", "zookeeper.connect": "127.0.0.1:2181",
            "sasl.enabled.mechanisms": "PLAIN,SCRAM-SHA-256"}
    return load_config(environ={}, overrides={**base, **settings})


def test_inter_broker_credentials_from_the_listener_jaas():
    config = _config(**{"sasl.mechanism.inter.broker.protocol": "PLAIN",
                        "listener.name.sasl_plaintext.plain.sasl.jaas.config": PLAIN_JAAS})
    assert inter_broker_credentials(config) == Credentials("PLAIN", "broker", "broker-secret")
    config = _config(**{"sasl.mechanism.inter.broker.protocol": "SCRAM-SHA-256",
                        "sasl.jaas.config": SCRAM_JAAS.format("x")})
    assert inter_broker_credentials(config) == Credentials("SCRAM-SHA-256", "broker", "x")
    # no other broker to talk to (no zookeeper.connect): nothing needed, as before
    single = load_config(environ={}, overrides={"listeners": "SASL_PLAINTEXT://127.0.0.1:9092"})
    assert inter_broker_credentials(single) is None


@pytest.mark.parametrize("settings,message", [
    ({}, "sasl.mechanism.inter.broker.protocol=GSSAPI"),  # Kafka's default: Kerberos
    ({"sasl.mechanism.inter.broker.protocol": "SCRAM-SHA-512"}, "must be in sasl.enabled.mechanisms"),
    ({"sasl.mechanism.inter.broker.protocol": "SCRAM-SHA-256"},
     "listener.name.sasl_plaintext.scram-sha-256.sasl.jaas.config"),
    ({"sasl.mechanism.inter.broker.protocol": "SCRAM-SHA-256", "sasl.jaas.config": PLAIN_JAAS}, "ScramLoginModule"),
    ({"sasl.mechanism.inter.broker.protocol": "PLAIN", "listener.name.sasl_plaintext.plain.sasl.jaas.config":
      'org.apache.kafka.common.security.plain.PlainLoginModule required user_broker="x";'}, 'username="..."'),
])
def test_unusable_inter_broker_sasl_is_a_config_error(settings, message):
    with pytest.raises(ConfigError, match=message.replace(".", r"\.").replace("(", r"\(")):
        inter_broker_credentials(_config(**settings))


def test_broker_refuses_to_start_without_inter_broker_credentials(tmp_path):
    jaas = 'org.apache.kafka.common.security.plain.PlainLoginModule required user_broker="x";'
    args = [sys.executable, "-m", "server", "serve", "--data-dir", str(tmp_path / "data"),
            "--set", f"listeners=SASL_PLAINTEXT://127.0.0.1:{free_port()}",
            "--set", "zookeeper.connect=127.0.0.1:1/none", "--set", "sasl.enabled.mechanisms=PLAIN",
            "--set", "sasl.mechanism.inter.broker.protocol=PLAIN",
            "--set", f"listener.name.sasl_plaintext.plain.sasl.jaas.config={jaas}"]
    done = subprocess.run(args, capture_output=True, text=True, timeout=30, cwd=REPO)
    assert done.returncode == 2, done.stderr
    assert "configuration error" in done.stderr and "plain.sasl.jaas.config" in done.stderr
