"""ListOffsets (2): earliest, latest, by timestamp, and max timestamp.

Implements v1-9. isolation_level (v2+) 1 (read_committed) sees the log up to the last
stable offset, 0 up to the high watermark. Special timestamps: -2 earliest (log start
offset), -1 latest (the high watermark, or the last stable offset for read_committed), -3
max timestamp (v7+, KIP-734), -4 earliest local (KIP-405; the log start offset, as all
data is local), -5 earliest pending upload (KIP-1005; none, so -1). A timestamp ≥ 0
gives the first offset whose timestamp is at or after it (below the high watermark), or -1
when there is none. Answers carry the partition's leader epoch; the client's
current_leader_epoch is checked by `Broker.partition` (KIP-320).
"""

from __future__ import annotations

from wire.errors import ErrorCode
from wire.registry import ApiKey

from server.context import RequestContext
from server.security.acls import AclOperation, ResourceType
from server.errors import InvalidRequest, error_code_for

API_KEY = ApiKey.LIST_OFFSETS
MAY_BLOCK = False

LATEST, EARLIEST, MAX_TIMESTAMP, EARLIEST_LOCAL, EARLIEST_PENDING_UPLOAD = -1, -2, -3, -4, -5


def _answer(index: int, code: ErrorCode, timestamp: int = -1, offset: int = -1, epoch: int = -1) -> dict:
    return {"partition_index": index, "error_code": code, "timestamp": timestamp, "offset": offset,
            "leader_epoch": epoch if code == ErrorCode.NONE and offset >= 0 else -1, "old_style_offsets": []}


def lookup(partition, timestamp: int, read_committed: bool = False) -> tuple[int, int]:
    """(timestamp, offset) for one partition and one ListOffsets timestamp."""
    plog = partition.log
    hw = partition.last_stable_offset if read_committed else partition.high_watermark
    if timestamp == LATEST:
        return -1, hw
    if timestamp in (EARLIEST, EARLIEST_LOCAL):
        return -1, plog.log_start_offset
    if timestamp == MAX_TIMESTAMP:
        offset, ts = plog.max_timestamp()
        return ts, offset
    if timestamp == EARLIEST_PENDING_UPLOAD:
        return -1, -1
    if timestamp < 0:
        raise ValueError(f"unknown special timestamp {timestamp}")
    found = plog.offset_for_timestamp(timestamp)
    if found is None or found[0] >= hw:
        return -1, -1
    offset, ts = found
    return ts, offset


async def handle(ctx: RequestContext, request: dict) -> dict:
    broker = ctx.broker
    read_committed = request.get("isolation_level", 0) == 1
    topics = []
    for topic in request["topics"]:
        name = topic["name"]
        answers = []
        if not ctx.authorize(AclOperation.DESCRIBE, ResourceType.TOPIC, name):
            topics.append({"name": name, "partitions": [_answer(p["partition_index"], ErrorCode.TOPIC_AUTHORIZATION_FAILED)
                                                        for p in topic["partitions"]]})
            continue
        for part in topic["partitions"]:
            index = part["partition_index"]
            timestamp = part["timestamp"]
            try:
                partition = broker.partition(name, index, part.get("current_leader_epoch", -1))
                if timestamp < EARLIEST_PENDING_UPLOAD:
                    raise InvalidRequest(f"unknown special timestamp {timestamp}")
                ts, offset = lookup(partition, timestamp, read_committed)
            except Exception as exc:
                answers.append(_answer(index, error_code_for(exc)))
                continue
            answers.append(_answer(index, ErrorCode.NONE, ts, offset, partition.leader_epoch))
        topics.append({"name": name, "partitions": answers})
    return {"throttle_time_ms": 0, "topics": topics}
