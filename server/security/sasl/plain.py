"""PLAIN (RFC 4616) against the users of the listener's JAAS configuration.

Kafka's PlainServerCallbackHandler takes the users from the PlainLoginModule options
`user_<name>="<password>"`. The client's one message is `authzid NUL authcid NUL passwd`;
an authorization id other than empty or the user itself is refused, as Kafka does.
Passwords are compared in constant time (hmac.compare_digest).
"""

from __future__ import annotations

import hmac

from server.security.sasl import AuthenticationFailed, Mechanism
from server.security.sasl.jaas import parse_jaas


def users_from_jaas(text: str) -> dict[str, str]:
    """user name -> password, from the `user_<name>` options of a PlainLoginModule entry."""
    options = parse_jaas(text).options
    return {key[5:]: value for key, value in options.items() if key.startswith("user_") and len(key) > 5}


class Plain(Mechanism):
    name = "PLAIN"

    def __init__(self, users: dict[str, str]) -> None:
        super().__init__()
        self._users = users

    def step(self, token: bytes) -> bytes:
        parts = token.split(b"\x00")
        if len(parts) != 3:
            raise AuthenticationFailed("Invalid SASL/PLAIN response: expected 3 tokens, got "
                                       f"{len(parts)}")
        try:
            authzid, user, password = (p.decode("utf-8") for p in parts)
        except UnicodeDecodeError:
            raise AuthenticationFailed("Invalid SASL/PLAIN response: not UTF-8") from None
        if not user:
            raise AuthenticationFailed("Authentication failed: username not specified")
        if not password:
            raise AuthenticationFailed("Authentication failed: password not specified", user)
        expected = self._users.get(user)
        # Compared even for an unknown user, so timing does not tell which users exist.
        ok = hmac.compare_digest((expected or "\x00" + password).encode(), password.encode())
        if expected is None or not ok:
            raise AuthenticationFailed("Authentication failed: Invalid username or password", user)
        if authzid and authzid != user:
            raise AuthenticationFailed("Authentication failed: Client requested an authorization id that is "
                                       "different from username", user)
        self.user = user
        self.complete = True
        return b""
