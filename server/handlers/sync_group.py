"""SyncGroup (14): the leader hands out the assignment; every member gets its share.

Implements v0-5. Followers wait until the leader's SyncGroup has been stored; a member of
a Stable group gets its assignment at once. v3+ carry group.instance.id; v5+ carry the
protocol type and name, which must match the group's (INCONSISTENT_GROUP_PROTOCOL) and
are echoed back.
"""

from __future__ import annotations

from wire.errors import ErrorCode
from wire.registry import ApiKey

from server.context import RequestContext
from server.security.acls import AclOperation, ResourceType

API_KEY = ApiKey.SYNC_GROUP
MAY_BLOCK = True  # followers wait for the leader


async def handle(ctx: RequestContext, request: dict) -> dict:
    groups = ctx.broker.groups
    if ctx.api_version >= 5 and (request.get("protocol_type") is None or request.get("protocol_name") is None):
        # Kafka's SyncGroupRequest.areMandatoryProtocolTypeAndNamePresent, checked first.
        return {"throttle_time_ms": 0, "error_code": ErrorCode.INCONSISTENT_GROUP_PROTOCOL, "protocol_type": None,
                "protocol_name": None, "assignment": b""}
    if not ctx.authorize(AclOperation.READ, ResourceType.GROUP, request["group_id"]):
        return {"error_code": ErrorCode.GROUP_AUTHORIZATION_FAILED, "assignment": b""}
    if groups is None:
        return {"error_code": ErrorCode.COORDINATOR_NOT_AVAILABLE, "assignment": b""}
    assignments: dict[str, bytes] = {}
    for entry in request.get("assignments") or []:
        assignments[entry["member_id"]] = bytes(entry["assignment"])
    result = await groups.sync_group(
        group_id=request["group_id"],
        generation_id=request["generation_id"],
        member_id=request["member_id"],
        group_instance_id=request.get("group_instance_id"),
        protocol_type=request.get("protocol_type"),
        protocol_name=request.get("protocol_name"),
        assignments=assignments,
    )
    return {
        "throttle_time_ms": 0,
        "error_code": result.error,
        "protocol_type": result.protocol_type,
        "protocol_name": result.protocol_name,
        "assignment": result.assignment,
    }
