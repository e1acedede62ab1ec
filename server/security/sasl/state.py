"""One SASL connection's state machine, and the gate before each request.

Kafka's SaslServerAuthenticator, reduced to what the protocol shows: on a SASL_PLAINTEXT
or SASL_SSL listener a connection may send ApiVersions, SaslHandshake (names a mechanism)
and SaslAuthenticate (carries that mechanism's tokens) until it is authenticated; any
other request closes it ("Unexpected Kafka request of type X during SASL handshake").
A refused credential, an unsupported mechanism or a request out of order is answered,
then the connection is closed.

KIP-368: with `connections.max.reauth.ms` > 0 (or a token that expires) a successful
SaslAuthenticate v1+ tells the client its session lifetime; the client re-authenticates
on the same connection with a new SaslHandshake + SaslAuthenticate (same principal, as
Kafka demands). A connection whose session expired is closed at its next other request.
"""

from __future__ import annotations

import logging
import time

from wire.errors import ErrorCode
from wire.registry import ApiKey, api_name

from server.security.sasl import AuthenticationFailed, Mechanism
from server.security.sasl import settings as S

log = logging.getLogger("trafka.security.sasl")

HANDSHAKE_APIS = frozenset((ApiKey.SASL_HANDSHAKE, ApiKey.SASL_AUTHENTICATE))
PRE_AUTH_APIS = HANDSHAKE_APIS | {ApiKey.API_VERSIONS}


class SaslState:
    __slots__ = ("broker", "listener", "mechanism", "authenticated_as", "expires", "close_reason", "raw_tokens")

    def __init__(self, broker, listener: str | None) -> None:
        self.broker = broker
        self.listener = listener
        self.mechanism: Mechanism | None = None  # the exchange under way (after SaslHandshake)
        self.authenticated_as: tuple[str, str] | None = None  # (user, mechanism) once authenticated
        self.expires: float | None = None  # time.monotonic() when the session ends (KIP-368)
        self.close_reason: str | None = None  # set: close the connection once this answer is out
        # After a v0 SaslHandshake the client sends bare length-prefixed SASL tokens, not
        # requests, until the exchange ends (KIP-152 kept that mode for old clients).
        self.raw_tokens = False

    def enabled(self) -> list[str]:
        return S.enabled_mechanisms(self.broker.config, self.listener)

    # SaslHandshake
    def handshake(self, session, mechanism: str, version: int = 1) -> ErrorCode:
        enabled = self.enabled()
        if self.mechanism is not None:
            self.close_reason = "SaslHandshake received while another exchange was under way"
            return ErrorCode.ILLEGAL_SASL_STATE
        if version == 0 and self.authenticated_as is not None:
            self.close_reason = "re-authentication needs SaslHandshake v1 (KIP-368)"
            return ErrorCode.ILLEGAL_SASL_STATE
        if mechanism not in enabled or mechanism not in S.SUPPORTED:
            self.close_reason = f"unsupported SASL mechanism {mechanism!r} (enabled: {', '.join(enabled)})"
            return ErrorCode.UNSUPPORTED_SASL_MECHANISM
        self.mechanism = _build(self.broker, self.listener, mechanism)
        self.raw_tokens = version == 0
        return ErrorCode.NONE

    # SaslAuthenticate
    def authenticate(self, session, token: bytes, step) -> tuple[ErrorCode, str | None, bytes, int]:
        """(error code, error message, server token, session lifetime ms); `step` runs the
        mechanism's step (the handler may run it in a thread)."""
        mechanism = self.mechanism
        if mechanism is None:
            self.close_reason = "SaslAuthenticate without a SaslHandshake before it"
            return (ErrorCode.ILLEGAL_SASL_STATE,
                    "SaslAuthenticate request received without a preceding SaslHandshake", b"", 0)
        try:
            answer = step(mechanism, token)
            if mechanism.complete and self.authenticated_as is not None \
                    and self.authenticated_as != (mechanism.user, mechanism.name):
                raise AuthenticationFailed("Cannot change principals or mechanism during re-authentication",
                                           mechanism.user)
        except AuthenticationFailed as exc:
            self.mechanism = None
            self.close_reason = "authentication failed"
            log.warning("Failed authentication with %s (connection %d, listener %s, user=%s, mechanism=%s): %s",
                        session.host, session.connection_id, self.listener, exc.user, mechanism.name, exc)
            return ErrorCode.SASL_AUTHENTICATION_FAILED, str(exc), b"", 0
        if not mechanism.complete:
            return ErrorCode.NONE, None, answer, 0
        self.mechanism = None
        reauth = self.authenticated_as is not None
        self.authenticated_as = (mechanism.user, mechanism.name)
        session.principal = f"User:{mechanism.user}"
        lifetime = self._lifetime_ms(mechanism)
        self.expires = time.monotonic() + lifetime / 1000 if lifetime else None
        log.info("connection %d from %s %sauthenticated as %s with %s%s", session.connection_id, session.host,
                 "re-" if reauth else "", session.principal, mechanism.name,
                 f" (session lifetime {lifetime} ms)" if lifetime else "")
        return ErrorCode.NONE, None, answer, lifetime

    def raw_token(self, session, token: bytes) -> bytes | None:
        """One bare token after a v0 handshake: the server's token, length-prefixed, or None
        when authentication failed (v0 has no error response: the connection just closes)."""
        code, _message, answer, _lifetime = self.authenticate(session, token, lambda m, t: m.step(t))
        if code != ErrorCode.NONE:
            return None
        if self.mechanism is None:  # complete: requests follow
            self.raw_tokens = False
        return len(answer).to_bytes(4, "big") + answer

    def _lifetime_ms(self, mechanism: Mechanism) -> int:
        """KIP-368: connections.max.reauth.ms, shortened to the credential's own expiry."""
        text = S.listener_setting(self.broker.config, self.listener, "connections.max.reauth.ms", mechanism.name)
        try:
            reauth = int(text) if text else 0
        except ValueError:
            reauth = 0
        candidates = [v for v in (reauth if reauth > 0 else None, mechanism.lifetime_ms) if v is not None]
        return max(1, min(candidates)) if candidates else 0


def admit(session, api_key: int) -> str | None:
    """None if the request may go on, else why the connection must close (logged by the caller)."""
    state: SaslState = session.sasl
    if api_key in HANDSHAKE_APIS:
        return None
    if state.authenticated_as is None:
        if api_key == ApiKey.API_VERSIONS and state.mechanism is None:
            return None
        return f"Unexpected Kafka request of type {api_name(api_key)} during SASL handshake"
    if state.expires is not None and time.monotonic() >= state.expires:
        return (f"session of {session.principal} expired (connections.max.reauth.ms) and was not "
                f"re-authenticated; {api_name(api_key)} refused")
    return None


def _build(broker, listener: str | None, name: str) -> Mechanism:
    config = broker.config
    if name == S.PLAIN:
        from server.security.sasl.plain import Plain, users_from_jaas

        return Plain(users_from_jaas(S.listener_setting(config, listener, "sasl.jaas.config", name) or ""))
    if name in (S.SCRAM_SHA_256, S.SCRAM_SHA_512):
        from server.security.sasl.scram import Scram
        from server.security.sasl.scram_store import store_of

        return Scram(name, store_of(broker).get)
    from server.security.sasl.oauthbearer import OAuthBearer

    return OAuthBearer(_oauth_validator(config, listener))


_validators: dict[tuple, object] = {}


def _oauth_validator(config, listener: str | None):
    """The validator Kafka's settings pick; the JWKS one is kept per setting values (its key cache)."""
    from server.security.sasl.oauthbearer import JwksValidator, UnsecuredValidator

    def get(name: str) -> str | None:
        return S.listener_setting(config, listener, name, S.OAUTHBEARER)

    handler = get("sasl.server.callback.handler.class")
    skew = float(get("sasl.oauthbearer.clock.skew.seconds") or 30)
    sub = get("sasl.oauthbearer.sub.claim.name") or "sub"
    if handler and handler.strip() == S.OAUTH_VALIDATOR:
        audience = [a.strip() for a in (get("sasl.oauthbearer.expected.audience") or "").split(",") if a.strip()]
        key = (get("sasl.oauthbearer.jwks.endpoint.url"), get("sasl.oauthbearer.expected.issuer"),
               tuple(audience), sub, skew)
        validator = _validators.get(key)
        if validator is None:
            if not key[0]:
                raise AuthenticationFailed("OAUTHBEARER: sasl.oauthbearer.jwks.endpoint.url is not set")
            validator = _validators[key] = JwksValidator(key[0], issuer=key[1], audience=audience or None,
                                                         sub_claim=sub, clock_skew_s=skew)
        return validator
    options = {}
    jaas = get("sasl.jaas.config")
    if jaas:
        from server.security.sasl.jaas import JaasError, parse_jaas

        try:
            options = parse_jaas(jaas).options
        except JaasError:
            options = {}
    return UnsecuredValidator(options.get("unsecuredValidatorPrincipalClaimName", "sub"),
                              int(options.get("unsecuredValidatorAllowableClockSkewMs", "0") or 0) / 1000)
