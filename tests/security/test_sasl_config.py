"""SASL settings checked at start, and the SASL APIs on a listener without SASL."""

from __future__ import annotations

import subprocess
import sys

import pytest

from tests.security.sasl_kit import PLAIN_JAAS, Raw
from tests.brokerproc import REPO, BrokerProcess, free_port
from wire import ApiKey
from wire.errors import ErrorCode

pytestmark = pytest.mark.timeout(60)


@pytest.mark.parametrize("settings,message", [
    ([], "GSSAPI"),  # Kafka's default mechanism list: Kerberos, not implemented
    (["sasl.enabled.mechanisms=PLAIN"], "plain.sasl.jaas.config"),
    (["sasl.enabled.mechanisms=PLAIN", "sasl.jaas.config=org.example.Other required;"], "PlainLoginModule"),
    (["sasl.enabled.mechanisms=PLAIN", 'sasl.jaas.config=org.apache.kafka.common.security.plain.PlainLoginModule '
      'required user_a="unterminated;'], "sasl.jaas.config"),
    (["sasl.enabled.mechanisms=SCRAM-SHA-1"], "SCRAM-SHA-1 not supported"),
    (["sasl.enabled.mechanisms=OAUTHBEARER", "listener.name.sasl_plaintext.oauthbearer.sasl.server.callback.handler."
      "class=org.apache.kafka.common.security.oauthbearer.OAuthBearerValidatorCallbackHandler"], "jwks.endpoint.url"),
])
def test_unusable_sasl_listener_refuses_to_start(tmp_path, settings, message):
    args = [sys.executable, "-m", "server", "serve", "--data-dir", str(tmp_path / "data"),
            "--set", f"listeners=SASL_PLAINTEXT://127.0.0.1:{free_port()}"]
    for item in settings:
        args += ["--set", item]
    done = subprocess.run(args, capture_output=True, text=True, timeout=30, cwd=REPO)
    assert done.returncode == 2, done.stderr
    assert "configuration error" in done.stderr and message in done.stderr


def test_named_listener_mapped_to_sasl(tmp_path):
    port = free_port()
    with BrokerProcess(tmp_path / "data", "--set", f"listeners=CLIENT://127.0.0.1:{port}",
                       "--set", "listener.security.protocol.map=CLIENT:SASL_PLAINTEXT",
                       "--set", "listener.name.client.sasl.enabled.mechanisms=PLAIN",
                       "--set", f"listener.name.client.plain.sasl.jaas.config={PLAIN_JAAS}", port=port) as broker:
        with Raw(broker.port) as raw:
            assert raw.handshake("SCRAM-SHA-256")["mechanisms"] == ["PLAIN"]
        with Raw(broker.port) as raw:
            assert raw.plain("alice", "alice-secret")["error_code"] == ErrorCode.NONE


def test_sasl_apis_on_a_plaintext_listener(tmp_path):
    with BrokerProcess(tmp_path / "data") as broker:
        with Raw(broker.port) as raw:
            assert raw.handshake("PLAIN")["error_code"] == ErrorCode.ILLEGAL_SASL_STATE
            assert raw.authenticate(b"\0a\0b")["error_code"] == ErrorCode.ILLEGAL_SASL_STATE
            assert raw.request(ApiKey.METADATA, 9, {"topics": []})["brokers"]  # no gate here
