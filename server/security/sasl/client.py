"""The client side of SASL, for this broker's connections to other brokers.

When the inter-broker listener is SASL_PLAINTEXT or SASL_SSL, a broker authenticates to
the others as Kafka's brokers do: with `sasl.mechanism.inter.broker.protocol` (PLAIN,
SCRAM-SHA-256 or SCRAM-SHA-512 here; Kafka's default GSSAPI is not implemented) and the
`username` / `password` options of that listener's JAAS entry
(`listener.name.<l>.<mechanism>.sasl.jaas.config`, else `sasl.jaas.config`) — the same
entry whose `user_<name>` options list the PLAIN users the listener accepts.

`Credentials.exchange()` starts one exchange: `first()` is the first client token, then
`respond(server_token)` gives the next one (None: nothing more to send) and checks what
the server proved (SCRAM's server signature, RFC 5802 §3). The connection (SaslHandshake
v1, SaslAuthenticate v2) is server/cluster/client.py's; this module holds no sockets.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import os
from dataclasses import dataclass

from server.security.sasl import settings as S

CLIENT_MECHANISMS = (S.PLAIN, S.SCRAM_SHA_256, S.SCRAM_SHA_512)
SCRAM_LOGIN_MODULE = "org.apache.kafka.common.security.scram.ScramLoginModule"
_HASHES = {S.SCRAM_SHA_256: hashlib.sha256, S.SCRAM_SHA_512: hashlib.sha512}
_LOGIN_MODULES = {S.PLAIN: S.PLAIN_LOGIN_MODULE, S.SCRAM_SHA_256: SCRAM_LOGIN_MODULE,
                  S.SCRAM_SHA_512: SCRAM_LOGIN_MODULE}


class ServerNotProven(Exception):
    """The server's last SCRAM message is malformed or its signature is wrong: it does not
    hold this user's credential (RFC 5802: the client must then end the exchange)."""


@dataclass(frozen=True)
class Credentials:
    mechanism: str
    username: str
    password: str

    def exchange(self) -> "PlainExchange | ScramExchange":
        if self.mechanism == S.PLAIN:
            return PlainExchange(self.username, self.password)
        return ScramExchange(self.mechanism, self.username, self.password)

    def __repr__(self) -> str:  # never the password, in logs or tracebacks
        return f"Credentials({self.mechanism}, user {self.username!r})"


class PlainExchange:
    """RFC 4616: one message, `NUL user NUL password`; the server's answer is empty."""

    def __init__(self, username: str, password: str) -> None:
        self._username, self._password = username, password

    def first(self) -> bytes:
        return f"\0{self._username}\0{self._password}".encode()

    def respond(self, server_token: bytes) -> bytes | None:
        return None


def _saslname(name: str) -> str:
    return name.replace("=", "=3D").replace(",", "=2C")


class ScramExchange:
    """RFC 5802 client: client-first, client-final with the proof, then the server's
    signature is checked (a server that does not know the salted password cannot make it)."""

    def __init__(self, mechanism: str, username: str, password: str) -> None:
        self._hash = _HASHES[mechanism]
        self._password = password
        self._nonce = base64.b64encode(os.urandom(24)).decode().replace("+", "-").replace("/", "_")
        self._first_bare = f"n={_saslname(username)},r={self._nonce}"
        self._server_signature: bytes | None = None

    def first(self) -> bytes:
        return ("n,," + self._first_bare).encode()

    def respond(self, server_token: bytes) -> bytes | None:
        if self._server_signature is None:
            return self._final(server_token.decode("utf-8", "replace"))
        text = server_token.decode("utf-8", "replace")
        if text.startswith("e="):
            raise ServerNotProven(f"server error {text[2:]!r}")
        if not text.startswith("v=") or not hmac.compare_digest(
                base64.b64decode(text[2:].split(",")[0] + "=="), self._server_signature):
            raise ServerNotProven("invalid server signature")
        return None

    def _final(self, server_first: str) -> bytes:
        attrs = dict(part.split("=", 1) for part in server_first.split(",") if "=" in part)
        nonce, salt, iterations = attrs.get("r", ""), attrs.get("s"), attrs.get("i", "")
        if not nonce.startswith(self._nonce) or salt is None or not iterations.isdigit():
            raise ServerNotProven(f"invalid server-first message {server_first[:80]!r}")
        salted = hashlib.pbkdf2_hmac(self._hash().name, self._password.encode(), base64.b64decode(salt),
                                     int(iterations))
        without_proof = f"c=biws,r={nonce}"
        auth_message = f"{self._first_bare},{server_first},{without_proof}".encode()
        client_key = hmac.new(salted, b"Client Key", self._hash).digest()
        signature = hmac.new(self._hash(client_key).digest(), auth_message, self._hash).digest()
        proof = bytes(a ^ b for a, b in zip(client_key, signature))
        server_key = hmac.new(salted, b"Server Key", self._hash).digest()
        self._server_signature = hmac.new(server_key, auth_message, self._hash).digest()
        return f"{without_proof},p={base64.b64encode(proof).decode()}".encode()


def inter_broker_credentials(config) -> Credentials | None:
    """What this broker authenticates with to the others: None when the inter-broker
    listener is not SASL (or there are no other brokers: zookeeper.connect unset); a
    ConfigError naming the setting when the mechanism or its JAAS entry is unusable, so a
    broker that could never join its cluster refuses to start."""
    from server.security.sasl.jaas import JaasError, parse_jaas

    listener = next((l for l in config.listener_list if l.name == config.inter_broker_listener), None)
    if listener is None or listener.security_protocol not in S.SASL_PROTOCOLS or not config.clustered:
        return None
    mechanism = (S.raw(config, "sasl.mechanism.inter.broker.protocol") or "GSSAPI").strip().upper()
    if mechanism not in CLIENT_MECHANISMS:
        raise S.SaslConfigError(
            f"sasl.mechanism.inter.broker.protocol={mechanism}: the inter-broker listener {listener.name} is "
            f"{listener.security_protocol}; Trafka's brokers authenticate with {', '.join(CLIENT_MECHANISMS)}")
    enabled = S.enabled_mechanisms(config, listener.name)
    if mechanism not in enabled:
        raise S.SaslConfigError(
            f"sasl.mechanism.inter.broker.protocol={mechanism} must be in sasl.enabled.mechanisms of the "
            f"inter-broker listener {listener.name} ({', '.join(enabled)})")
    key = f"listener.name.{listener.name.lower()}.{mechanism.lower()}.sasl.jaas.config"
    text = S.listener_setting(config, listener.name, "sasl.jaas.config", mechanism)
    if not text:
        raise S.SaslConfigError(f"inter-broker SASL/{mechanism} needs {key} (or sasl.jaas.config) with "
                                f'{_LOGIN_MODULES[mechanism]} required username="..." password="...";')
    try:
        entry = parse_jaas(text)
    except JaasError as exc:
        raise S.SaslConfigError(f"{key}: {exc}") from None
    if entry.login_module != _LOGIN_MODULES[mechanism]:
        raise S.SaslConfigError(f"{key}: login module {entry.login_module} (expected "
                                f"{_LOGIN_MODULES[mechanism]} for {mechanism})")
    username, password = entry.options.get("username"), entry.options.get("password")
    if not username or password is None:
        raise S.SaslConfigError(f'{key}: the inter-broker client needs username="..." and password="..." '
                                f"(listener {listener.name}, {mechanism})")
    return Credentials(mechanism, username, password)

