"""SaslHandshake (17): the client names its SASL mechanism (KIP-43).

Implements v0-1. After v1 the tokens travel in SaslAuthenticate requests (KIP-152); after
a v0 handshake the client sends bare length-prefixed SASL tokens instead, which the network
loop hands to the connection's SASL state until the exchange ends (librdkafka needs v0
advertised to use SASL at all, though it then uses v1).
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
    code = state.handshake(ctx.session, request.get("mechanism") or "", ctx.api_version)
    return {"error_code": code, "mechanisms": state.enabled()}
