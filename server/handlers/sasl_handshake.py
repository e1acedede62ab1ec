"""SaslHandshake (17): the client names its SASL mechanism (KIP-43).

Implements v1 only: after a v0 handshake Kafka expects raw SASL tokens framed by a length,
not Kafka requests, and Trafka does not serve that mode; v0 gets UNSUPPORTED_VERSION from
the network layer, and every client of the last years uses v1 + SaslAuthenticate (KIP-152).
On a listener without SASL the answer is ILLEGAL_SASL_STATE, as Kafka's KafkaApis gives.
An unsupported or disabled mechanism: UNSUPPORTED_SASL_MECHANISM with the enabled list,
then the connection closes (server/security/sasl/state.py).
"""

from __future__ import annotations

from wire.errors import ErrorCode
from wire.registry import ApiKey

from server.context import RequestContext

API_KEY = ApiKey.SASL_HANDSHAKE
MAY_BLOCK = False


async def handle(ctx: RequestContext, request: dict) -> dict:
    state = ctx.session.sasl
    if state is None:
        return {"error_code": ErrorCode.ILLEGAL_SASL_STATE, "mechanisms": []}
    code = state.handshake(ctx.session, request.get("mechanism") or "")
    return {"error_code": code, "mechanisms": state.enabled()}
