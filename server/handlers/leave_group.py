"""LeaveGroup (13): members leave now, so the rebalance need not wait for a timeout.

Implements v0-5. v0-2 name one member (its error is the top-level error); v3+ name a
batch, each by member id or by group.instance.id (a static member's id may be unknown to
the admin client removing it), and get one error per member. v5+ add a reason (logged).
"""

from __future__ import annotations

import logging

from wire.errors import ErrorCode
from wire.registry import ApiKey

from server.context import RequestContext
from server.security.acls import AclOperation, ResourceType

API_KEY = ApiKey.LEAVE_GROUP
MAY_BLOCK = False

log = logging.getLogger("trafka.groups")


async def handle(ctx: RequestContext, request: dict) -> dict:
    groups = ctx.broker.groups
    group_id = request["group_id"]
    if ctx.api_version < 3:
        leaving = [(request["member_id"], None)]
    else:
        leaving = [(m["member_id"], m.get("group_instance_id")) for m in request.get("members") or []]
        for m in request.get("members") or []:
            if m.get("reason"):
                log.info("group %s: %s leaves: %s", group_id, m["member_id"] or m.get("group_instance_id"), m["reason"])
    if not ctx.authorize(AclOperation.READ, ResourceType.GROUP, group_id):
        top, errors = ErrorCode.GROUP_AUTHORIZATION_FAILED, [ErrorCode.GROUP_AUTHORIZATION_FAILED] * len(leaving)
    elif groups is None:
        top, errors = ErrorCode.COORDINATOR_NOT_AVAILABLE, [ErrorCode.COORDINATOR_NOT_AVAILABLE] * len(leaving)
    elif (mixed := groups.consumer_group_with_members(group_id)) is not None:
        # Classic members of a KIP-848 consumer group (the online upgrade).
        top, errors = await groups.consumer.migration.leave(mixed, leaving)
    else:
        top, errors = groups.leave_group(group_id, leaving)
    if ctx.api_version < 3:
        return {"throttle_time_ms": 0, "error_code": top if top != ErrorCode.NONE else errors[0]}
    if top != ErrorCode.NONE:
        # Kafka's group-level error answer (LeaveGroupRequest.getErrorResponse) lists no members.
        return {"throttle_time_ms": 0, "error_code": top, "members": []}
    return {
        "throttle_time_ms": 0,
        "error_code": top,
        "members": [{"member_id": mid, "group_instance_id": iid, "error_code": code}
                    for (mid, iid), code in zip(leaving, errors)],
    }
