"""ConsumerGroupDescribe (69): a KIP-848 consumer group's epochs, members and assignments.

Implements v0. Per group: DESCRIBE on the group (GROUP_AUTHORIZATION_FAILED); an unknown
group, or a classic one, answers GROUP_ID_NOT_FOUND with Kafka's message; a group led
elsewhere NOT_COORDINATOR, one loading COORDINATOR_LOAD_IN_PROGRESS. Members carry their
current assignment and their target, with topic names. As Kafka 4.0 does, a group whose
members subscribe to or are assigned a topic the principal may not DESCRIBE answers
TOPIC_AUTHORIZATION_FAILED (its members are not shown). With
include_authorized_operations the authorizer's answer (KIP-430).
"""

from __future__ import annotations

from wire.errors import ErrorCode
from wire.registry import ApiKey

from server.authorized_operations import NOT_REQUESTED, group_operations
from server.context import RequestContext
from server.groups import is_consumer_group
from server.security.acls import AclOperation, ResourceType

API_KEY = ApiKey.CONSUMER_GROUP_DESCRIBE
MAY_BLOCK = False


def _error(group_id: str, code: ErrorCode, message: str | None = None, operations: int = NOT_REQUESTED) -> dict:
    # Kafka's error entries carry the schema's defaults: epochs 0.
    return {"error_code": code, "error_message": message, "group_id": group_id, "group_state": "",
            "group_epoch": 0, "assignment_epoch": 0, "assignor_name": "", "members": [],
            "authorized_operations": operations}


def _partitions(ctx: RequestContext, parts) -> list[dict]:
    out = []
    for topic_id, ps in sorted(parts.items(), key=lambda kv: str(kv[0])):
        if ps:
            out.append({"topic_id": topic_id, "topic_name": ctx.broker.topic_name_for_id(topic_id) or "",
                        "partitions": sorted(ps)})
    return out


def _describe(ctx: RequestContext, group_id: str, with_operations: bool) -> dict:
    if not group_id:
        return _error(group_id, ErrorCode.INVALID_GROUP_ID)  # Kafka checks this first
    if not ctx.authorize(AclOperation.DESCRIBE, ResourceType.GROUP, group_id):
        return _error(group_id, ErrorCode.GROUP_AUTHORIZATION_FAILED)
    operations = group_operations(ctx, group_id) if with_operations else NOT_REQUESTED
    groups = ctx.broker.groups
    if groups is None:
        return _error(group_id, ErrorCode.COORDINATOR_NOT_AVAILABLE, None, operations)
    code, group = groups.describe_group(group_id)
    if code != ErrorCode.NONE:
        return _error(group_id, code, None, operations)
    if group is None:
        return _error(group_id, ErrorCode.GROUP_ID_NOT_FOUND, f"Group {group_id} not found.", operations)
    if not is_consumer_group(group):
        return _error(group_id, ErrorCode.GROUP_ID_NOT_FOUND, f"Group {group_id} is not a consumer group.",
                      operations)
    members = []
    topics: set[str] = set()
    for m in group.members.values():
        current = _partitions(ctx, m.assignment.assigned)
        target = _partitions(ctx, group.target.get(m.member_id, {}))
        topics |= set(m.subscribed_topic_names) | {t["topic_name"] for t in current + target if t["topic_name"]}
        members.append({
            "member_id": m.member_id, "instance_id": m.instance_id, "rack_id": m.rack_id,
            "member_epoch": m.member_epoch, "client_id": m.client_id, "client_host": m.client_host,
            "subscribed_topic_names": list(m.subscribed_topic_names),
            "subscribed_topic_regex": m.subscribed_topic_regex or "",  # Kafka: "" when none
            "assignment": {"topic_partitions": current}, "target_assignment": {"topic_partitions": target},
        })
    if ctx.broker.authorizer is not None:
        denied = sorted(t for t in topics if not ctx.authorize(AclOperation.DESCRIBE, ResourceType.TOPIC, t))
        if denied:
            return _error(group_id, ErrorCode.TOPIC_AUTHORIZATION_FAILED,
                          "The group has described topic(s) that the client is not authorized to describe.",
                          operations)
    return {"error_code": ErrorCode.NONE, "error_message": None, "group_id": group_id,
            "group_state": str(group.consumer_state), "group_epoch": group.group_epoch,
            "assignment_epoch": group.assignment_epoch, "assignor_name": groups.consumer.assignor_name(group),
            "members": members, "authorized_operations": operations}


async def handle(ctx: RequestContext, request: dict) -> dict:
    with_operations = bool(request.get("include_authorized_operations"))
    return {"throttle_time_ms": 0,
            "groups": [_describe(ctx, group_id, with_operations) for group_id in request["group_ids"]]}
