"""SaslAuthenticate (36): one SASL token each way (KIP-152), KIP-368 session lifetime.

Implements v0-2. The token goes to the mechanism chosen by SaslHandshake
(server/security/sasl/); a refused credential is answered SASL_AUTHENTICATION_FAILED with
Kafka's message and the connection then closes. From v1 a successful answer carries
session_lifetime_ms (connections.max.reauth.ms, or sooner if the token expires sooner).
Mechanisms that may wait on the network (OAUTHBEARER with an http(s) JWKS) run in a
thread. On a listener without SASL: ILLEGAL_SASL_STATE, as Kafka.
"""

from __future__ import annotations

import trio

from wire.errors import ErrorCode
from wire.registry import ApiKey

from server.context import RequestContext

API_KEY = ApiKey.SASL_AUTHENTICATE
MAY_BLOCK = True  # a JWKS fetch may take a while: earlier answers go out first


async def handle(ctx: RequestContext, request: dict) -> dict:
    state = ctx.session.sasl
    if state is None:
        return {"error_code": ErrorCode.ILLEGAL_SASL_STATE, "auth_bytes": b"", "session_lifetime_ms": 0,
                "error_message": "SaslAuthenticate on a listener without SASL"}
    token = bytes(request.get("auth_bytes") or b"")
    mechanism = state.mechanism
    if mechanism is not None and getattr(mechanism, "blocking", False):
        result = await trio.to_thread.run_sync(state.authenticate, ctx.session, token, _step)
    else:
        result = state.authenticate(ctx.session, token, _step)
    code, message, answer, lifetime = result
    return {"error_code": code, "error_message": message, "auth_bytes": answer, "session_lifetime_ms": lifetime}


def _step(mechanism, token: bytes) -> bytes:
    return mechanism.step(token)
