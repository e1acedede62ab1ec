"""OffsetForLeaderEpoch (23): where a leader epoch ends, for KIP-320 position checks and
(in a cluster) follower truncation.

Implements v0-4 (v0 answers no leader epoch; v0-1 carry no current leader epoch, v0-2 no
replica id; nothing else differs in Kafka 3.9). For the requested epoch, the answer is the largest epoch we know at or
below it and the offset where that epoch ends: the log end offset for the current epoch,
otherwise the start offset of the next higher epoch in the partition's leader-epoch
checkpoint (Kafka's LeaderEpochFileCache.endOffsetFor). An epoch below every known one is
answered -1/-1. The client's current_leader_epoch is checked by `Broker.partition`
(FENCED_LEADER_EPOCH / UNKNOWN_LEADER_EPOCH). Java consumers use this only when the max
advertised version is ≥ 3, librdkafka at v2 (docs/design/clients.md#leader-epoch-validation).
"""

from __future__ import annotations

from wire.errors import ErrorCode
from wire.registry import ApiKey

from server.context import RequestContext
from server.security.acls import CLUSTER_NAME, AclOperation, ResourceType
from server.errors import error_code_for

API_KEY = ApiKey.OFFSET_FOR_LEADER_EPOCH
MAY_BLOCK = False


async def handle(ctx: RequestContext, request: dict) -> dict:
    broker = ctx.broker
    topics = []
    # Kafka: a follower (CLUSTER_ACTION) may ask about any topic, a client needs DESCRIBE.
    follower = ctx.authorize(AclOperation.CLUSTER_ACTION, ResourceType.CLUSTER, CLUSTER_NAME, log_denied=False)
    for topic in request["topics"]:
        name = topic["topic"]
        answers = []
        if not follower and not ctx.authorize(AclOperation.DESCRIBE, ResourceType.TOPIC, name):
            topics.append({"topic": name, "partitions": [
                {"partition": p["partition"], "error_code": ErrorCode.TOPIC_AUTHORIZATION_FAILED, "leader_epoch": -1,
                 "end_offset": -1} for p in topic["partitions"]]})
            continue
        for part in topic["partitions"]:
            index = part["partition"]
            answer = {"partition": index, "error_code": ErrorCode.NONE, "leader_epoch": -1, "end_offset": -1}
            try:
                partition = broker.partition(name, index, part.get("current_leader_epoch", -1))
                answer["leader_epoch"], answer["end_offset"] = partition.end_offset_for_epoch(part["leader_epoch"])
            except Exception as exc:
                answer["error_code"] = error_code_for(exc)
            answers.append(answer)
        topics.append({"topic": name, "partitions": answers})
    return {"throttle_time_ms": 0, "topics": topics}
