"""OffsetForLeaderEpoch (23): where a leader epoch ends, for KIP-320 position checks.

Implements v2-4. Every batch is stored with leader epoch 0 and the epoch never changes
on one broker, so for epoch 0 (or any epoch at or below it, -1 included) the answer is
epoch 0 ending at the log end offset; an epoch above ours is UNKNOWN_LEADER_EPOCH, and a
current_leader_epoch above ours likewise (a client ahead of us). Java consumers use this
only when the max advertised version is ≥ 3, librdkafka at v2 (CLIENTS.md §7).
"""

from __future__ import annotations

from wire.errors import ErrorCode
from wire.registry import ApiKey

from server.context import RequestContext

API_KEY = ApiKey.OFFSET_FOR_LEADER_EPOCH
MAY_BLOCK = False


async def handle(ctx: RequestContext, request: dict) -> dict:
    broker = ctx.broker
    topics = []
    for topic in request["topics"]:
        name = topic["topic"]
        meta = broker.topics.get(name)
        answers = []
        for part in topic["partitions"]:
            index = part["partition"]
            answer = {"partition": index, "error_code": ErrorCode.NONE, "leader_epoch": -1, "end_offset": -1}
            if meta is None or not 0 <= index < meta.partitions:
                answer["error_code"] = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
            elif part.get("current_leader_epoch", -1) > 0 or part["leader_epoch"] > 0:
                answer["error_code"] = ErrorCode.UNKNOWN_LEADER_EPOCH
            else:
                answer["leader_epoch"] = 0
                answer["end_offset"] = broker.logs.log(name, index).log_end_offset
            answers.append(answer)
        topics.append({"topic": name, "partitions": answers})
    return {"throttle_time_ms": 0, "topics": topics}
