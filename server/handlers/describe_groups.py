"""DescribeGroups (15): state, protocol and members of groups.

Implements v0-6. State names are Kafka's ("Empty", "PreparingRebalance",
"CompletingRebalance", "Stable", "Dead"); an unknown group is described as Dead with no
error before v6, and from v6 on (Kafka 4.0, KIP-1043) as Dead with GROUP_ID_NOT_FOUND and
Kafka's message ("Group g not found.", or "Group g is not a classic group." for a KIP-848
group, which DescribeGroups does not describe); a group this broker does not coordinate answers
NOT_COORDINATOR, one whose offsets partition is loading COORDINATOR_LOAD_IN_PROGRESS. Member metadata and assignments are only shown while the
group is Stable (otherwise they are empty and protocol_data is ""), also as Kafka does.
Needs DESCRIBE on each group (GROUP_AUTHORIZATION_FAILED). With
include_authorized_operations (v3+) the authorizer's answer (KIP-430): READ, DELETE and
DESCRIBE when there is no authorizer.
"""

from __future__ import annotations

from wire.errors import ErrorCode
from wire.registry import ApiKey

from server.authorized_operations import NOT_REQUESTED, group_operations
from server.context import RequestContext
from server.security.acls import AclOperation, ResourceType
from server.groups import GroupState, is_consumer_group

API_KEY = ApiKey.DESCRIBE_GROUPS
MAY_BLOCK = False


def _describe(ctx: RequestContext, group_id: str, with_operations: bool) -> dict:
    answer = _describe_group(ctx, group_id, with_operations)
    answer.setdefault("error_message", None)
    return answer


def _describe_group(ctx: RequestContext, group_id: str, with_operations: bool) -> dict:
    if not ctx.authorize(AclOperation.DESCRIBE, ResourceType.GROUP, group_id):
        return {"error_code": ErrorCode.GROUP_AUTHORIZATION_FAILED, "group_id": group_id, "group_state": "",
                "protocol_type": "", "protocol_data": "", "members": [], "authorized_operations": NOT_REQUESTED}
    operations = group_operations(ctx, group_id) if with_operations else NOT_REQUESTED
    groups = ctx.broker.groups
    if groups is None:
        return {"error_code": ErrorCode.COORDINATOR_NOT_AVAILABLE, "group_id": group_id, "group_state": "",
                "protocol_type": "", "protocol_data": "", "members": [], "authorized_operations": operations}
    code, group = groups.describe_group(group_id)
    if code != ErrorCode.NONE:
        return {"error_code": code, "group_id": group_id, "group_state": "", "protocol_type": "",
                "protocol_data": "", "members": [], "authorized_operations": operations}
    if group is None or is_consumer_group(group):
        # A KIP-848 group is not a classic group: Kafka 3.9 describes it as Dead (its
        # members are seen with ConsumerGroupDescribe).
        answer = {"error_code": ErrorCode.NONE, "group_id": group_id, "group_state": str(GroupState.DEAD),
                  "protocol_type": "", "protocol_data": "", "members": [], "authorized_operations": operations}
        if ctx.api_version >= 6:
            answer.update(error_code=ErrorCode.GROUP_ID_NOT_FOUND,
                          error_message=f"Group {group_id} not found." if group is None
                          else f"Group {group_id} is not a classic group.")
        return answer
    stable = group.state == GroupState.STABLE
    members = [{
        "member_id": m.member_id,
        "group_instance_id": m.group_instance_id,
        "client_id": m.client_id,
        "client_host": m.client_host,
        "member_metadata": m.metadata_for(group.protocol_name) if stable else b"",
        "member_assignment": m.assignment if stable else b"",
    } for m in group.members.values()]
    return {
        "error_code": ErrorCode.NONE,
        "group_id": group_id,
        "group_state": str(group.state),
        "protocol_type": group.protocol_type or "",
        "protocol_data": (group.protocol_name or "") if stable else "",
        "members": members,
        "authorized_operations": operations,
    }


async def handle(ctx: RequestContext, request: dict) -> dict:
    with_operations = bool(request.get("include_authorized_operations"))
    return {"throttle_time_ms": 0,
            "groups": [_describe(ctx, group_id, with_operations) for group_id in request["groups"]]}
