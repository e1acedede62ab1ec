"""ShareGroupHeartbeat (76): join, stay in and leave a share group (KIP-932).

Implements v1 (Kafka 4.1). MemberEpoch 0 joins (with SubscribedTopicNames), -1 leaves, any
other value must be the member's current epoch. Errors: INVALID_REQUEST (empty group or
member id, no topics on join), UNKNOWN_MEMBER_ID (rejoin at epoch 0), FENCED_MEMBER_EPOCH
(rejoin), GROUP_ID_NOT_FOUND (the id is a classic group's), GROUP_MAX_SIZE_REACHED,
GROUP_AUTHORIZATION_FAILED. The work is the share coordinator's (server/groups/share/).
"""

from __future__ import annotations

import logging

from wire.errors import ErrorCode
from wire.registry import ApiKey

from server.context import RequestContext
from server.errors import logged_error_code
from server.security.acls import AclOperation, ResourceType

API_KEY = ApiKey.SHARE_GROUP_HEARTBEAT
MAY_BLOCK = False

log = logging.getLogger("trafka.share")


def _error(code: ErrorCode, message: str | None = None) -> dict:
    return {"throttle_time_ms": 0, "error_code": code, "error_message": message, "member_id": None,
            "member_epoch": 0, "heartbeat_interval_ms": 0, "assignment": None}


async def handle(ctx: RequestContext, request: dict) -> dict:
    if not ctx.broker.share.enabled:
        return _error(ErrorCode.UNSUPPORTED_VERSION, "share groups need a single broker")
    group_id = request["group_id"]
    if not ctx.authorize(AclOperation.READ, ResourceType.GROUP, group_id):
        return _error(ErrorCode.GROUP_AUTHORIZATION_FAILED)
    try:
        answer = await ctx.broker.share.heartbeat(
            group_id=group_id, member_id=request["member_id"], member_epoch=request["member_epoch"],
            rack_id=request.get("rack_id"), subscribed_topic_names=request.get("subscribed_topic_names"),
            client_id=ctx.client_id or "", client_host=f"/{ctx.client_host}")
    except Exception as exc:
        code = logged_error_code(exc, log, f"ShareGroupHeartbeat {group_id}/{request['member_id']}"
                                           f"@{request['member_epoch']}", ctx.client_id)
        return _error(code, str(exc))
    return {"throttle_time_ms": 0, "error_code": ErrorCode.NONE, "error_message": None, **answer}
