"""JoinGroup (11): join a consumer group, waiting for the rebalance to finish.

Implements v0-9; the rules live in server/groups/coordinator.py. Version differences:
v0 has no rebalance timeout (the session timeout stands in); v4+ get MEMBER_ID_REQUIRED
on a first join with an empty member id (KIP-394); v5+ carry group.instance.id (KIP-345);
v7+ answer the protocol type; v8+ send a reason (logged); v9+ can be told to skip the
assignment when a static leader returns (KIP-814). Before v7 the protocol name cannot be
null, so an error answer carries "".
A share group's id (KIP-932) is answered UNKNOWN_MEMBER_ID, as Kafka's classicGroupJoin
does for a group of another type.
"""

from __future__ import annotations

import logging

from wire.errors import ErrorCode
from wire.registry import ApiKey

from server.context import RequestContext
from server.security.acls import AclOperation, ResourceType

API_KEY = ApiKey.JOIN_GROUP
MAY_BLOCK = True  # the answer waits for the rebalance

log = logging.getLogger("trafka.groups")


async def handle(ctx: RequestContext, request: dict) -> dict:
    version = ctx.api_version
    groups = ctx.broker.groups
    if not ctx.authorize(AclOperation.READ, ResourceType.GROUP, request["group_id"]):
        return {"error_code": ErrorCode.GROUP_AUTHORIZATION_FAILED, "protocol_name": "" if version < 7 else None,
                "leader": "", "member_id": request["member_id"], "members": []}
    if groups is None:
        return {"error_code": ErrorCode.COORDINATOR_NOT_AVAILABLE, "protocol_name": "" if version < 7 else None,
                "leader": "", "member_id": request["member_id"], "members": []}
    if request["group_id"] in ctx.broker.share.groups:
        # A group id is of one type: Kafka's classicGroupJoin answers a share group's id so.
        log.info("JoinGroup %s from %s: UNKNOWN_MEMBER_ID (it is a share group)", request["group_id"], ctx.client_id)
        return {"error_code": ErrorCode.UNKNOWN_MEMBER_ID, "protocol_name": "" if version < 7 else None,
                "leader": "", "member_id": request["member_id"], "members": []}
    result = await groups.join_group(
        group_id=request["group_id"],
        member_id=request["member_id"],
        group_instance_id=request.get("group_instance_id"),
        client_id=ctx.client_id or "",
        client_host="/" + ctx.client_host,
        session_timeout_ms=request["session_timeout_ms"],
        # v0 has no rebalance timeout: the session timeout stands in (Kafka's JoinGroupRequest).
        # A later version's value is taken as sent, -1 included: Kafka then gives the
        # member no time to sync (it is removed as soon as its join is answered).
        rebalance_timeout_ms=request["rebalance_timeout_ms"] if version >= 1 else request["session_timeout_ms"],
        protocol_type=request["protocol_type"],
        protocols=[(p["name"], bytes(p["metadata"])) for p in request["protocols"]],
        require_known_member_id=version >= 4,
        skip_assignment_ok=version >= 9,
        reason=request.get("reason"),
    )
    protocol_name = result.protocol_name
    if protocol_name is None and version < 7:
        protocol_name = ""
    return {
        "throttle_time_ms": 0,
        "error_code": result.error,
        "generation_id": result.generation_id,
        "protocol_type": result.protocol_type,
        "protocol_name": protocol_name,
        "leader": result.leader_id,
        "skip_assignment": result.skip_assignment,
        "member_id": result.member_id,
        "members": [{"member_id": mid, "group_instance_id": iid, "metadata": metadata}
                    for mid, iid, metadata in result.members],
    }
