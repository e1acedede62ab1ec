"""FindCoordinator (10): every group and transactional id is coordinated by this broker.

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

API_KEY = ApiKey.FIND_COORDINATOR
MAY_BLOCK = False

GROUP, TRANSACTION = 0, 1


def _answer(ctx: RequestContext, key: str, key_type: int) -> dict:
    broker = ctx.broker
    if key_type not in (GROUP, TRANSACTION):
        code, message = ErrorCode.INVALID_REQUEST, f"unknown coordinator key type {key_type}"
    elif key_type == GROUP and (broker.groups is None or not broker.groups.loaded):
        code, message = ErrorCode.COORDINATOR_NOT_AVAILABLE, "the group coordinator is loading"
    elif key_type == TRANSACTION and not broker.txn.loaded:
        code, message = ErrorCode.COORDINATOR_NOT_AVAILABLE, "the transaction coordinator is loading"
    else:
        host, port = broker.config.advertised
        return {"key": key, "node_id": broker.node_id, "host": host, "port": port,
                "error_code": ErrorCode.NONE, "error_message": None}
    return {"key": key, "node_id": -1, "host": "", "port": -1, "error_code": code, "error_message": message}


async def handle(ctx: RequestContext, request: dict) -> dict:
    key_type = request.get("key_type", GROUP)
    if ctx.api_version >= 4:
        return {"throttle_time_ms": 0,
                "coordinators": [_answer(ctx, key, key_type) for key in request.get("coordinator_keys") or []]}
    answer = _answer(ctx, request.get("key") or "", key_type)
    del answer["key"]
    answer["throttle_time_ms"] = 0
    return answer
