"""OffsetCommit (8): store a group's consumed positions in __consumer_offsets.

Implements v2-9. Per partition: unknown topic or partition → UNKNOWN_TOPIC_OR_PARTITION;
metadata over 4096 bytes → OFFSET_METADATA_TOO_LARGE. For the group: generation -1 from a
consumer outside any group commits to an Empty group (kcat, Spark, `commit()` without
`subscribe()`); members must name the current generation (ILLEGAL_GENERATION), be known
(UNKNOWN_MEMBER_ID), not be fenced (FENCED_INSTANCE_ID), and the group must not be
between JoinGroup and SyncGroup (REBALANCE_IN_PROGRESS). The answer comes after the
offsets are written. v2-4's retention_time_ms is ignored (offsets.retention.minutes
applies, as in Kafka 2.1+); v6+ carry the leader epoch, v7+ group.instance.id.
"""

from __future__ import annotations

from wire.errors import ErrorCode
from wire.registry import ApiKey

from server.context import RequestContext
from server.security.acls import AclOperation, ResourceType
from server.groups import CommittedOffset

API_KEY = ApiKey.OFFSET_COMMIT
MAY_BLOCK = False


async def handle(ctx: RequestContext, request: dict) -> dict:
    groups = ctx.broker.groups
    offsets: dict[tuple[str, int], CommittedOffset] = {}
    for topic in request["topics"]:
        for p in topic["partitions"]:
            offsets[(topic["name"], p["partition_index"])] = CommittedOffset(
                p["committed_offset"], p.get("committed_leader_epoch", -1), p.get("committed_metadata") or "")
    # Kafka: READ on the group, then READ on each topic; denied partitions are not committed.
    denied: dict[tuple[str, int], ErrorCode] = {}
    if not ctx.authorize(AclOperation.READ, ResourceType.GROUP, request["group_id"]):
        denied = {tp: ErrorCode.GROUP_AUTHORIZATION_FAILED for tp in offsets}
    else:
        for name in {tp[0] for tp in offsets}:
            if not ctx.authorize(AclOperation.READ, ResourceType.TOPIC, name):
                denied.update((tp, ErrorCode.TOPIC_AUTHORIZATION_FAILED) for tp in offsets if tp[0] == name)
    if denied:
        offsets = {tp: o for tp, o in offsets.items() if tp not in denied}
    if denied and not offsets:
        results = {}
    elif groups is None:
        results = {tp: ErrorCode.COORDINATOR_NOT_AVAILABLE for tp in offsets}
    else:
        results = await groups.commit_offsets(
            group_id=request["group_id"],
            generation_id=request.get("generation_id_or_member_epoch", -1),
            member_id=request.get("member_id") or "",
            group_instance_id=request.get("group_instance_id"),
            offsets=offsets,
            api_version=ctx.api_version,
        )
    results = {**results, **denied}
    return {
        "throttle_time_ms": 0,
        "topics": [{"name": topic["name"],
                    "partitions": [{"partition_index": p["partition_index"],
                                    "error_code": results[(topic["name"], p["partition_index"])]}
                                   for p in topic["partitions"]]}
                   for topic in request["topics"] if topic["partitions"]],  # Kafka: no answer for no partitions
    }
