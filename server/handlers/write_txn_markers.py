"""WriteTxnMarkers (27): a transaction coordinator has this leader append COMMIT/ABORT markers.

Implements v0-1. Each marker names a producer, its epoch, the result and the partitions;
each partition answers on its own (UNKNOWN_TOPIC_OR_PARTITION for a deleted one,
INVALID_PRODUCER_EPOCH for a marker older than the producer's epoch there,
TRANSACTION_COORDINATOR_FENCED for an older coordinator). It is the same path the
coordinator of this broker uses in-process (server/txn/markers.py); it is served for the
cluster, where coordinators send it to other brokers.
"""

from __future__ import annotations

from wire.errors import ErrorCode
from wire.registry import ApiKey

from server.context import RequestContext
from server.security.acls import CLUSTER_NAME, AclOperation, ResourceType
from server.txn.markers import write_marker

API_KEY = ApiKey.WRITE_TXN_MARKERS
MAY_BLOCK = False


async def handle(ctx: RequestContext, request: dict) -> dict:
    broker = ctx.broker
    # Kafka 3.9: ALTER on the cluster (a principal allowed to alter it) or else CLUSTER_ACTION.
    allowed = ctx.authorize(AclOperation.ALTER, ResourceType.CLUSTER, CLUSTER_NAME, log_denied=False) \
        or ctx.authorize(AclOperation.CLUSTER_ACTION, ResourceType.CLUSTER, CLUSTER_NAME)
    # Kafka keys its answer by producer id, then topic-partition: a producer (or partition)
    # named twice is answered once (its last result), one without partitions not at all.
    answers: dict[int, dict[str, dict[int, ErrorCode]]] = {}
    for marker in request["markers"]:
        pid, epoch = marker["producer_id"], marker["producer_epoch"]
        commit, coordinator_epoch = marker["transaction_result"], marker["coordinator_epoch"]
        for topic in marker["topics"]:
            for index in topic["partition_indexes"]:
                code = await write_marker(broker, topic["name"], index, pid, epoch, commit, coordinator_epoch) \
                    if allowed else ErrorCode.CLUSTER_AUTHORIZATION_FAILED
                answers.setdefault(pid, {}).setdefault(topic["name"], {})[index] = code
    return {"markers": [{"producer_id": pid, "topics": [
        {"name": name, "partitions": [{"partition_index": i, "error_code": code} for i, code in parts.items()]}
        for name, parts in topics.items()]} for pid, topics in answers.items()]}
