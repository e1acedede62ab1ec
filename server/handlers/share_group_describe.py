"""ShareGroupDescribe (77): share groups' members, epochs and assignments (KIP-932).

Implements v1 (Kafka 4.1) and v0 (Kafka 3.9's early access; the same fields). A group id that is not a share group — unknown, or a classic
group's — is GROUP_ID_NOT_FOUND for that group, as Kafka answers; in a cluster every group is
UNSUPPORTED_VERSION (share groups work on a single broker).
"""

from __future__ import annotations

from wire.errors import ErrorCode
from wire.registry import ApiKey

from server.context import RequestContext
from server.security.acls import AclOperation, ResourceType

API_KEY = ApiKey.SHARE_GROUP_DESCRIBE
MAY_BLOCK = False


def _error(group_id: str, code: ErrorCode, message: str | None = None) -> dict:
    return {"error_code": code, "error_message": message, "group_id": group_id, "group_state": "", "group_epoch": 0,
            "assignment_epoch": 0, "assignor_name": "", "members": [], "authorized_operations": -2147483648}


async def handle(ctx: RequestContext, request: dict) -> dict:
    groups = []
    for group_id in request["group_ids"]:
        if not ctx.broker.share.enabled:
            groups.append(_error(group_id, ErrorCode.UNSUPPORTED_VERSION, "share groups need a single broker"))
            continue
        if not ctx.authorize(AclOperation.DESCRIBE, ResourceType.GROUP, group_id):
            groups.append(_error(group_id, ErrorCode.GROUP_AUTHORIZATION_FAILED))
            continue
        groups.append(ctx.broker.share.describe(group_id))
    return {"throttle_time_ms": 0, "groups": groups}
