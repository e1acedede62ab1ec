"""OffsetDelete (47): remove committed offsets of partitions a group no longer consumes.

Implements v0. Unknown group → GROUP_ID_NOT_FOUND. An Empty group loses any offset asked
for; an active consumer group only those of topics none of its members subscribes to
(the others → GROUP_SUBSCRIBED_TO_TOPIC); an active group of another protocol type →
NON_EMPTY_GROUP. Unknown topics or partitions → UNKNOWN_TOPIC_OR_PARTITION.
"""

from __future__ import annotations

from wire.errors import ErrorCode
from wire.registry import ApiKey

from server.context import RequestContext
from server.security.acls import AclOperation, ResourceType
from server.errors import KafkaError

API_KEY = ApiKey.OFFSET_DELETE
MAY_BLOCK = False


async def handle(ctx: RequestContext, request: dict) -> dict:
    groups = ctx.broker.groups
    if not ctx.authorize(AclOperation.DELETE, ResourceType.GROUP, request["group_id"]):
        return {"error_code": ErrorCode.GROUP_AUTHORIZATION_FAILED, "throttle_time_ms": 0, "topics": []}
    if groups is None:
        return {"error_code": ErrorCode.COORDINATOR_NOT_AVAILABLE, "throttle_time_ms": 0, "topics": []}
    if not request["group_id"]:
        return {"error_code": ErrorCode.INVALID_GROUP_ID, "throttle_time_ms": 0, "topics": []}  # as Kafka
    errors: dict[tuple[str, int], ErrorCode] = {}
    asked = []
    for topic in request["topics"]:
        for p in topic["partitions"]:
            tp = (topic["name"], p["partition_index"])
            if not ctx.authorize(AclOperation.READ, ResourceType.TOPIC, tp[0]):
                errors[tp] = ErrorCode.TOPIC_AUTHORIZATION_FAILED
                continue
            try:
                ctx.broker.partition(*tp)
            except KafkaError as exc:
                errors[tp] = exc.code
            else:
                asked.append(tp)
    code, results = await groups.delete_offsets(request["group_id"], asked)
    if code != ErrorCode.NONE:
        return {"error_code": code, "throttle_time_ms": 0, "topics": []}
    errors.update(results)
    return {
        "error_code": ErrorCode.NONE,
        "throttle_time_ms": 0,
        "topics": [{"name": topic["name"],
                    "partitions": [{"partition_index": p["partition_index"],
                                    "error_code": errors.get((topic["name"], p["partition_index"]), ErrorCode.NONE)}
                                   for p in topic["partitions"]]}
                   for topic in request["topics"] if topic["partitions"]],  # Kafka: no answer for no partitions
    }
