"""OAUTHBEARER (RFC 7628, KIP-255/KIP-768), server side.

The client's one message is `n,[a=<authzid>],\\x01auth=Bearer <token>\\x01[key=value\\x01]\\x01`.
Two validators, chosen as Kafka chooses them with
`listener.name.<l>.oauthbearer.sasl.server.callback.handler.class`:
- unset: Kafka's default unsecured validator (OAuthBearerUnsecuredValidatorCallbackHandler):
  the token is an unsigned JWS (`alg` "none"), the principal is its `sub` claim, `exp` must
  be in the future. For development only, as in Kafka.
- `...OAuthBearerValidatorCallbackHandler`: a signed JWT checked with PyJWT against the keys
  of `sasl.oauthbearer.jwks.endpoint.url` (file:// or http(s)://), with
  `sasl.oauthbearer.expected.issuer`, `sasl.oauthbearer.expected.audience` (a list) and the
  principal from `sasl.oauthbearer.sub.claim.name` (default sub).
A refused token is answered as RFC 7628 says: the server sends `{"status":"invalid_token"}`
as a challenge, the client answers \\x01, and only then does authentication fail.
The token's `exp` bounds the KIP-368 session lifetime.
"""

from __future__ import annotations

import base64
import json
import logging
import pathlib
import threading
import time
import urllib.parse

from server.security.sasl import AuthenticationFailed, Mechanism

log = logging.getLogger("trafka.security.oauthbearer")

INVALID_TOKEN = json.dumps({"status": "invalid_token"}).encode()
ASYMMETRIC_ALGORITHMS = ["RS256", "RS384", "RS512", "PS256", "PS384", "PS512", "ES256", "ES384", "ES512", "EdDSA"]


class TokenInvalid(Exception):
    """Why a token was refused (logged; the client sees invalid_token)."""


def parse_client_message(token: bytes) -> tuple[str, dict[str, str]]:
    """(bearer token, extensions) of the client's initial response."""
    try:
        text = token.decode("utf-8")
    except UnicodeDecodeError:
        raise TokenInvalid("message is not UTF-8") from None
    gs2, sep, rest = text.partition("\x01")
    if not sep or not (gs2.startswith("n,") or gs2.startswith("y,")) or not rest.endswith("\x01\x01"):
        raise TokenInvalid("invalid OAUTHBEARER client message")
    pairs = {}
    for item in rest[:-2].split("\x01"):
        key, eq, value = item.partition("=")
        if not eq:
            raise TokenInvalid(f"invalid key/value {item[:20]!r}")
        pairs[key] = value
    auth = pairs.pop("auth", "")
    scheme, _, bearer = auth.partition(" ")
    if scheme.lower() != "bearer" or not bearer.strip():
        raise TokenInvalid("no 'auth=Bearer <token>'")
    return bearer.strip(), pairs


def _b64url(part: str) -> bytes:
    return base64.urlsafe_b64decode(part + "=" * (-len(part) % 4))


class UnsecuredValidator:
    """Kafka's OAuthBearerUnsecuredValidatorCallbackHandler: alg none, sub, exp."""

    blocking = False

    def __init__(self, sub_claim: str = "sub", clock_skew_s: float = 0.0) -> None:
        self.sub_claim = sub_claim
        self.clock_skew_s = clock_skew_s

    def validate(self, token: str) -> tuple[str, float | None]:
        parts = token.split(".")
        if len(parts) != 3:
            raise TokenInvalid("not a JWS compact serialization (header.payload.signature)")
        try:
            header = json.loads(_b64url(parts[0]))
            claims = json.loads(_b64url(parts[1]))
        except (ValueError, TypeError) as exc:
            raise TokenInvalid(f"unreadable token: {exc}") from None
        if not isinstance(header, dict) or not isinstance(claims, dict):
            raise TokenInvalid("header and claims must be JSON objects")
        if header.get("alg") != "none":
            raise TokenInvalid(f"unsecured token must have alg none, not {header.get('alg')!r}")
        sub = claims.get(self.sub_claim)
        if not isinstance(sub, str) or not sub.strip():
            raise TokenInvalid(f"no '{self.sub_claim}' claim")
        exp = claims.get("exp")
        if not isinstance(exp, (int, float)):
            raise TokenInvalid("no numeric 'exp' claim")
        if exp + self.clock_skew_s <= time.time():
            raise TokenInvalid("token expired")
        return sub, float(exp)


class JwksValidator:
    """Kafka's OAuthBearerValidatorCallbackHandler: a signed JWT against a JWKS."""

    blocking = True  # an http(s) JWKS is fetched: run off the trio thread

    def __init__(self, jwks_url: str, *, issuer: str | None = None, audience: list[str] | None = None,
                 sub_claim: str = "sub", clock_skew_s: float = 30.0) -> None:
        import jwt  # PyJWT

        self._jwt = jwt
        self.url = jwks_url
        self.issuer = issuer
        self.audience = audience or None
        self.sub_claim = sub_claim
        self.clock_skew_s = clock_skew_s
        self._lock = threading.Lock()
        parsed = urllib.parse.urlparse(jwks_url)
        if parsed.scheme == "file":
            self._path = pathlib.Path(urllib.parse.unquote(parsed.path))
            self._client = None
        elif parsed.scheme in ("http", "https"):
            self._path = None
            self._client = jwt.PyJWKClient(jwks_url, cache_keys=True, lifespan=3600, timeout=10)
        else:
            raise ValueError(f"sasl.oauthbearer.jwks.endpoint.url must be file://, http:// or https://: {jwks_url}")
        self._file_keys: tuple[float, object] | None = None

    def _key(self, token: str):
        jwt = self._jwt
        if self._client is not None:
            return self._client.get_signing_key_from_jwt(token).key
        header = jwt.get_unverified_header(token)
        with self._lock:
            mtime = self._path.stat().st_mtime
            if self._file_keys is None or self._file_keys[0] != mtime:  # re-read when the file changes
                self._file_keys = (mtime, jwt.PyJWKSet.from_json(self._path.read_text()))
            keys = self._file_keys[1]
        kid = header.get("kid")
        for key in keys.keys:
            if kid is None or key.key_id == kid:
                return key.key
        raise TokenInvalid(f"no key {kid!r} in the JWKS")

    def validate(self, token: str) -> tuple[str, float | None]:
        jwt = self._jwt
        try:
            key = self._key(token)
            options = {"require": ["exp"], "verify_aud": self.audience is not None}
            claims = jwt.decode(token, key, algorithms=ASYMMETRIC_ALGORITHMS, audience=self.audience,
                                issuer=self.issuer, leeway=self.clock_skew_s, options=options)
        except TokenInvalid:
            raise
        except (jwt.PyJWTError, OSError, ValueError) as exc:
            raise TokenInvalid(f"{type(exc).__name__}: {exc}") from None
        sub = claims.get(self.sub_claim)
        if not isinstance(sub, str) or not sub.strip():
            raise TokenInvalid(f"no '{self.sub_claim}' claim")
        return sub, float(claims["exp"])


class OAuthBearer(Mechanism):
    name = "OAUTHBEARER"

    def __init__(self, validator) -> None:
        super().__init__()
        self._validator = validator
        self.blocking = validator.blocking
        self._error: str | None = None

    def step(self, token: bytes) -> bytes:
        if self._error is not None:
            if token == b"\x01":
                raise AuthenticationFailed(f"Authentication failed: {self._error}", self.user)
            raise AuthenticationFailed("Authentication failed: expected \\x01 after the error challenge", self.user)
        try:
            bearer, _extensions = parse_client_message(token)
            user, exp = self._validator.validate(bearer)
        except TokenInvalid as exc:
            self._error = str(exc)
            log.info("OAUTHBEARER token refused: %s", exc)
            return INVALID_TOKEN
        self.user = user
        if exp is not None:
            self.lifetime_ms = max(0, int(exp * 1000 - time.time() * 1000))
        self.complete = True
        return b""
