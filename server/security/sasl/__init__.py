"""SASL authentication, as Kafka's SaslServerAuthenticator does it.

- settings.py: the listener-prefixed settings (`listener.name.<l>.<mech>.sasl.jaas.config`)
  and the startup check of a SASL listener's configuration;
- jaas.py: the JAAS configuration syntax of `sasl.jaas.config`;
- plain.py, scram.py, oauthbearer.py: one server-side mechanism each (a step function
  from client token to server token);
- scram_store.py: SCRAM credentials (AlterUserScramCredentials), durable;
- state.py: one connection's state machine (handshake → authenticate → authenticated,
  KIP-368 expiry) and the gate the network loop asks before each request.
"""

from __future__ import annotations


class AuthenticationFailed(Exception):
    """The client's credentials were refused: SASL_AUTHENTICATION_FAILED, then the
    connection closes. `message` goes to the client; `user` names who tried (for the log,
    never with the secret)."""

    def __init__(self, message: str, user: str | None = None) -> None:
        super().__init__(message)
        self.user = user


class Mechanism:
    """One authentication exchange on one connection: `step` turns the client's token into
    the server's answer until `complete`; then `user` is the authenticated name.
    `lifetime_ms` is when the credential stops being valid (OAUTHBEARER's exp), if ever."""

    name = ""

    def __init__(self) -> None:
        self.complete = False
        self.user: str | None = None
        self.lifetime_ms: int | None = None

    def step(self, token: bytes) -> bytes:  # pragma: no cover - every mechanism overrides
        raise NotImplementedError
