"""Heartbeat (12): keep a group member's session alive; learn about rebalances.

Implements v0-4 (v3+ carry group.instance.id). Errors a member acts on:
REBALANCE_IN_PROGRESS (rejoin), ILLEGAL_GENERATION and UNKNOWN_MEMBER_ID (rejoin from
scratch), FENCED_INSTANCE_ID (another process took this static instance id: stop).
"""

from __future__ import annotations

from wire.errors import ErrorCode
from wire.registry import ApiKey

from server.context import RequestContext
from server.security.acls import AclOperation, ResourceType

API_KEY = ApiKey.HEARTBEAT
MAY_BLOCK = False


async def handle(ctx: RequestContext, request: dict) -> dict:
    groups = ctx.broker.groups
    if not ctx.authorize(AclOperation.READ, ResourceType.GROUP, request["group_id"]):
        return {"throttle_time_ms": 0, "error_code": ErrorCode.GROUP_AUTHORIZATION_FAILED}
    if groups is None:
        return {"throttle_time_ms": 0, "error_code": ErrorCode.COORDINATOR_NOT_AVAILABLE}
    code = groups.heartbeat(group_id=request["group_id"], generation_id=request["generation_id"],
                            member_id=request["member_id"], group_instance_id=request.get("group_instance_id"))
    return {"throttle_time_ms": 0, "error_code": code}
