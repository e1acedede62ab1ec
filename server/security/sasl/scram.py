"""SCRAM-SHA-256 and SCRAM-SHA-512 (RFC 5802, RFC 7677), server side.

The broker keeps, per user and mechanism, only what RFC 5802 lets a server keep: salt,
iterations, StoredKey = H(HMAC(SaltedPassword, "Client Key")) and ServerKey =
HMAC(SaltedPassword, "Server Key") — never the password. AlterUserScramCredentials sends
the salted password (KIP-554: the client salts it) and the keys are derived at once.

Exchange: client-first `n,,n=<user>,r=<cnonce>` → server-first `r=<cnonce+snonce>,s=<salt>,
i=<iterations>` → client-final `c=biws,r=<nonce>,p=<proof>` → server-final `v=<signature>`.
Channel binding is refused (Kafka too); Kafka's `tokenauth=true` extension (delegation
tokens) is refused, as Trafka has no delegation tokens.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import os
from dataclasses import dataclass

from server.security.sasl import AuthenticationFailed, Mechanism

# AlterUserScramCredentials' and DescribeUserScramCredentials' mechanism numbers (Kafka's ScramMechanism).
MECHANISMS = {1: "SCRAM-SHA-256", 2: "SCRAM-SHA-512"}
NUMBERS = {name: number for number, name in MECHANISMS.items()}
HASHES = {"SCRAM-SHA-256": hashlib.sha256, "SCRAM-SHA-512": hashlib.sha512}
MIN_ITERATIONS = 4096  # Kafka's ScramMechanism.minIterations
MAX_ITERATIONS = 16384  # Kafka's AlterUserScramCredentials limit

FAILED = "Authentication failed during authentication due to invalid credentials with SASL mechanism {}"


@dataclass(frozen=True)
class ScramCredential:
    salt: bytes
    stored_key: bytes
    server_key: bytes
    iterations: int

    @classmethod
    def from_salted_password(cls, mechanism: str, salt: bytes, salted: bytes, iterations: int) -> "ScramCredential":
        h = HASHES[mechanism]
        client_key = hmac.new(salted, b"Client Key", h).digest()
        return cls(salt, h(client_key).digest(), hmac.new(salted, b"Server Key", h).digest(), iterations)

    @classmethod
    def from_password(cls, mechanism: str, password: str, iterations: int = MIN_ITERATIONS,
                      salt: bytes | None = None) -> "ScramCredential":
        salt = salt if salt is not None else os.urandom(32)
        name = HASHES[mechanism]().name
        salted = hashlib.pbkdf2_hmac(name, password.encode(), salt, iterations)
        return cls.from_salted_password(mechanism, salt, salted, iterations)

    def to_kafka(self) -> str:
        """Kafka's ZooKeeper form: salt=..,stored_key=..,server_key=..,iterations=.. (ScramCredentialUtils)."""
        b64 = lambda b: base64.b64encode(b).decode()  # noqa: E731
        return (f"salt={b64(self.salt)},stored_key={b64(self.stored_key)},server_key={b64(self.server_key)},"
                f"iterations={self.iterations}")

    @classmethod
    def from_kafka(cls, text: str) -> "ScramCredential":
        fields = dict(part.split("=", 1) for part in text.split(",") if "=" in part)
        return cls(base64.b64decode(fields["salt"]), base64.b64decode(fields["stored_key"]),
                   base64.b64decode(fields["server_key"]), int(fields["iterations"]))


def _attributes(message: str) -> list[tuple[str, str]]:
    out = []
    for part in message.split(","):
        if len(part) < 2 or part[1] != "=":
            raise ValueError(f"invalid SCRAM attribute {part[:20]!r}")
        out.append((part[0], part[2:]))
    return out


def _username(encoded: str) -> str:
    """RFC 5802 saslname: ',' and '=' travel as =2C and =3D."""
    if "=" in encoded.replace("=2C", "").replace("=3D", ""):
        raise ValueError("invalid escape in user name")
    return encoded.replace("=2C", ",").replace("=3D", "=")


def _alphanumeric(length: int) -> str:
    alphabet = "0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
    return "".join(alphabet[b % 62] for b in os.urandom(length))


class Scram(Mechanism):
    def __init__(self, mechanism: str, lookup) -> None:
        """`lookup(user, mechanism)` gives the user's ScramCredential or None."""
        super().__init__()
        self.name = mechanism
        self._hash = HASHES[mechanism]
        self._lookup = lookup
        self._state = "first"
        self._credential: ScramCredential | None = None

    def _fail(self, why: str) -> AuthenticationFailed:
        return AuthenticationFailed(FAILED.format(self.name) + f" ({why})" if why else FAILED.format(self.name),
                                    self.user)

    def step(self, token: bytes) -> bytes:
        try:
            text = token.decode("utf-8")
        except UnicodeDecodeError:
            raise self._fail("message is not UTF-8") from None
        if self._state == "first":
            return self._client_first(text)
        if self._state == "final":
            return self._client_final(text)
        raise self._fail("unexpected message after the exchange completed")

    def _client_first(self, text: str) -> bytes:
        gs2, sep, bare = text.partition(",")
        authzid, sep2, bare = bare.partition(",")
        if not sep or not sep2 or gs2 not in ("n", "y"):
            raise self._fail("channel binding is not supported" if gs2.startswith("p=") else "invalid client-first message")
        fields = bare.split(",")
        try:
            attrs = _attributes(",".join(fields[:2]))
            if len(attrs) < 2 or attrs[0][0] != "n" or attrs[1][0] != "r" or not attrs[1][1]:
                raise ValueError("expected n=<user>,r=<nonce>")
            user = _username(attrs[0][1])
        except ValueError as exc:
            raise self._fail(f"invalid client-first message: {exc}") from None
        self.user = user
        if "tokenauth=true" in fields[2:]:
            raise self._fail("delegation tokens (tokenauth) are not supported")
        if authzid and authzid != f"a={attrs[0][1]}":
            raise self._fail("authorization id differs from the user name")
        credential = self._lookup(user, self.name)
        if credential is None:
            raise self._fail("")
        self._credential = credential
        self._gs2 = f"{gs2},{authzid},"
        self._client_first_bare = bare
        # Alphanumeric, as Kafka's (ScramFormatter.secureRandomString): some clients mangle '+' and '/'.
        self._nonce = attrs[1][1] + _alphanumeric(24)
        self._server_first = (f"r={self._nonce},s={base64.b64encode(credential.salt).decode()},"
                              f"i={credential.iterations}")
        self._state = "final"
        return self._server_first.encode()

    def _client_final(self, text: str) -> bytes:
        without_proof, sep, proof = text.rpartition(",p=")
        try:
            if not sep:
                raise ValueError("no proof")
            attrs = dict(_attributes(without_proof))
            client_proof = base64.b64decode(proof, validate=True)
            binding = base64.b64decode(attrs.get("c", ""), validate=True).decode()
        except (ValueError, UnicodeDecodeError) as exc:
            raise self._fail(f"invalid client-final message: {exc}") from None
        # endswith, as Kafka's ScramSaslServer checks: older librdkafka (Debian's kcat) sends
        # the client nonce followed by the whole server nonce, which starts with it again.
        if not (attrs.get("r") or "").endswith(self._nonce):
            raise self._fail("invalid nonce")
        if binding != self._gs2:
            raise self._fail("invalid channel binding")
        credential = self._credential
        auth_message = f"{self._client_first_bare},{self._server_first},{without_proof}".encode()
        signature = hmac.new(credential.stored_key, auth_message, self._hash).digest()
        if len(client_proof) != len(signature):
            raise self._fail("")
        client_key = bytes(a ^ b for a, b in zip(client_proof, signature))
        if not hmac.compare_digest(self._hash(client_key).digest(), credential.stored_key):
            raise self._fail("")
        self._state = "done"
        self.complete = True
        server_signature = hmac.new(credential.server_key, auth_message, self._hash).digest()
        return b"v=" + base64.b64encode(server_signature)
