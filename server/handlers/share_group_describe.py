"""ShareGroupDescribe (77): share groups' members, epochs and assignments (KIP-932).

Implements v1 (Kafka 4.1) and v0 (Kafka 3.9's early access; the same fields). A group id that is not a share group — unknown, or a classic
group's — is GROUP_ID_NOT_FOUND for that group, as Kafka answers; in a cluster a broker other than
the group's coordinator answers NOT_COORDINATOR. An empty group id is
INVALID_GROUP_ID, as Kafka's group coordinator answers it. Each error is logged.
"""

from __future__ import annotations

import logging

from wire.errors import ErrorCode
from wire.registry import ApiKey

from server.context import RequestContext
from server.security.acls import AclOperation, ResourceType

API_KEY = ApiKey.SHARE_GROUP_DESCRIBE
MAY_BLOCK = False

log = logging.getLogger("trafka.share")


def _error(group_id: str, code: ErrorCode, message: str | None = None) -> dict:
    return {"error_code": code, "error_message": message, "group_id": group_id, "group_state": "", "group_epoch": 0,
            "assignment_epoch": 0, "assignor_name": "", "members": [], "authorized_operations": -2147483648}


async def handle(ctx: RequestContext, request: dict) -> dict:
    groups = []
    for group_id in request["group_ids"]:
        if not group_id:
            log.info("ShareGroupDescribe of an empty group id from %s: INVALID_GROUP_ID", ctx.client_id)
            groups.append(_error(group_id, ErrorCode.INVALID_GROUP_ID, "The group id can't be empty."))
            continue
        if not ctx.authorize(AclOperation.DESCRIBE, ResourceType.GROUP, group_id):
            groups.append(_error(group_id, ErrorCode.GROUP_AUTHORIZATION_FAILED))
            continue
        entry = ctx.broker.share.describe(group_id)
        if entry["error_code"] != ErrorCode.NONE:
            log.info("ShareGroupDescribe %s from %s: %s (%s)", group_id, ctx.client_id,
                     ErrorCode(entry["error_code"]).name, entry["error_message"])
        groups.append(entry)
    return {"throttle_time_ms": 0, "groups": groups}
