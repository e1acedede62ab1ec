"""FindCoordinator (10): who coordinates a group or transactional id: a single broker
itself; in a cluster the leader of the key's partition of __consumer_offsets or
__transaction_state, created on first use (the broker's mode answers: server/modes/).

Implements v0-6. v0-3 ask for one key (key_type from v1: 0 group, 1 transaction); v4+
batch several `coordinator_keys` and get one answer per key. The answer is this broker's
node id and advertised address. An unknown key type is INVALID_REQUEST; while the group
coordinator (or the transaction
coordinator) is not loaded the answer is COORDINATOR_NOT_AVAILABLE, which clients retry.
Not implemented: key type 2 (share groups, KIP-932; clients only send it at v6 when they
use share consumers).
"""

from __future__ import annotations

from wire.errors import ErrorCode
from wire.registry import ApiKey

from server.context import RequestContext
from server.security.acls import AclOperation, ResourceType
from server.modes import OFFSETS_TOPIC, TXN_TOPIC

API_KEY = ApiKey.FIND_COORDINATOR
MAY_BLOCK = False

GROUP, TRANSACTION = 0, 1


def _denied(ctx: RequestContext, key: str, key_type: int) -> ErrorCode | None:
    """Kafka: DESCRIBE on the group or the transactional id the coordinator is asked for."""
    if key_type == GROUP and not ctx.authorize(AclOperation.DESCRIBE, ResourceType.GROUP, key):
        return ErrorCode.GROUP_AUTHORIZATION_FAILED
    if key_type == TRANSACTION and not ctx.authorize(AclOperation.DESCRIBE, ResourceType.TRANSACTIONAL_ID, key):
        return ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED
    return None


async def handle(ctx: RequestContext, request: dict) -> dict:
    key_type = request.get("key_type", GROUP)

    async def answer_for(key: str) -> dict:
        denied = _denied(ctx, key, key_type)
        if denied is not None:
            return {"key": key, "node_id": -1, "host": "", "port": -1, "error_code": denied,
                    "error_message": denied.name}
        if key_type not in (GROUP, TRANSACTION):
            return {"key": key, "node_id": -1, "host": "", "port": -1, "error_code": ErrorCode.INVALID_REQUEST,
                    "error_message": f"unknown coordinator key type {key_type}"}
        # the leader of the key's partition of the internal topic (a single broker: itself)
        return await ctx.broker.mode.find_coordinator(key, OFFSETS_TOPIC if key_type == GROUP else TXN_TOPIC,
                                                      ctx.session.listener)

    if ctx.api_version >= 4:
        coordinators = [await answer_for(key) for key in request.get("coordinator_keys") or []]
        for answer in coordinators:
            if answer["error_code"] == ErrorCode.NONE:
                answer["error_message"] = ""  # what Kafka sends with a found coordinator (v4+)
        return {"throttle_time_ms": 0, "coordinators": coordinators}
    answer = await answer_for(request.get("key") or "")
    del answer["key"]
    if answer["error_code"] == ErrorCode.NONE:
        answer["error_message"] = "NONE"  # Kafka's Errors.NONE.message() (v1-3)
    answer["throttle_time_ms"] = 0
    return answer
