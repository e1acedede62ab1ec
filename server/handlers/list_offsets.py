"""ListOffsets (2): earliest, latest, by timestamp, and max timestamp.

Implements v1-9. isolation_level (v2+) 1 (read_committed) sees the log up to the last
stable offset, 0 up to the high watermark. Special timestamps: -2 earliest (log start
offset), -1 latest (the high watermark, or the last stable offset for read_committed), -3
max timestamp (v7+, KIP-734), -4 earliest local (KIP-405; the log start offset, as all
data is local), -5 earliest pending upload (KIP-1005; none, so -1). A timestamp ≥ 0
gives the first offset whose timestamp is at or after it (below the high watermark), or -1
when there is none; another negative timestamp, or a special one below the version that
introduced it (-3: v7, -4: v8, -5: v9), is UNSUPPORTED_VERSION, as Kafka 4 answers it. Answers carry the partition's leader epoch; the client's current_leader_epoch is
checked by `Broker.partition` (KIP-320). As Kafka: a partition named twice is answered
once, INVALID_REQUEST; a topic without partitions is not answered; an isolation level
other than 0 or 1 fails every partition with UNKNOWN_SERVER_ERROR.
"""

from __future__ import annotations

from wire.errors import ErrorCode
from wire.registry import ApiKey

from server.context import RequestContext
from server.security.acls import AclOperation, ResourceType
from server.errors import KafkaError, error_code_for

API_KEY = ApiKey.LIST_OFFSETS
MAY_BLOCK = False

LATEST, EARLIEST, MAX_TIMESTAMP, EARLIEST_LOCAL, EARLIEST_PENDING_UPLOAD = -1, -2, -3, -4, -5
# The first version each special timestamp exists in (Kafka answers UNSUPPORTED_VERSION below).
_SINCE = {MAX_TIMESTAMP: 7, EARLIEST_LOCAL: 8, EARLIEST_PENDING_UPLOAD: 9}


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


def _merged(topics: list[dict]) -> tuple[list[tuple[str, list[dict]]], set[tuple[str, int]]]:
    """The request's partitions as Kafka reads them, once each (a topic without partitions is
    not answered), and those named more than once (ListOffsetsRequest.duplicatePartitions),
    which Kafka answers INVALID_REQUEST."""
    merged: dict[str, dict[int, dict]] = {}
    duplicates: set[tuple[str, int]] = set()
    for topic in topics:
        partitions = merged.setdefault(topic["name"], {})
        for part in topic["partitions"]:
            if part["partition_index"] in partitions:
                duplicates.add((topic["name"], part["partition_index"]))
            partitions[part["partition_index"]] = part
    return [(name, list(parts.values())) for name, parts in merged.items() if parts], duplicates


async def handle(ctx: RequestContext, request: dict) -> dict:
    broker = ctx.broker
    if request.get("isolation_level", 0) not in (0, 1):
        # Kafka's IsolationLevel.forId throws: ListOffsetsRequest.getErrorResponse answers
        # every requested partition UNKNOWN_SERVER_ERROR.
        return {"throttle_time_ms": 0, "topics": [
            {"name": t["name"], "partitions": [_answer(p["partition_index"], ErrorCode.UNKNOWN_SERVER_ERROR)
                                               for p in t["partitions"]]} for t in request["topics"]]}
    read_committed = request.get("isolation_level", 0) == 1
    topics = []
    merged, duplicates = _merged(request["topics"])
    for name, partitions in merged:
        answers = []
        if not ctx.authorize(AclOperation.DESCRIBE, ResourceType.TOPIC, name):
            topics.append({"name": name, "partitions": [_answer(p["partition_index"], ErrorCode.TOPIC_AUTHORIZATION_FAILED)
                                                        for p in partitions]})
            continue
        for part in partitions:
            index = part["partition_index"]
            timestamp = part["timestamp"]
            if (name, index) in duplicates:
                answers.append(_answer(index, ErrorCode.INVALID_REQUEST))
                continue
            try:
                partition = broker.partition(name, index, part.get("current_leader_epoch", -1))
                if timestamp < EARLIEST_PENDING_UPLOAD or ctx.api_version < _SINCE.get(timestamp, 0):
                    # What Kafka 4 answers a negative timestamp it has no meaning for, or one
                    # newer than the request's version.
                    raise KafkaError(f"special timestamp {timestamp} is not known at v{ctx.api_version}",
                                     ErrorCode.UNSUPPORTED_VERSION)
                ts, offset = lookup(partition, timestamp, read_committed)
            except Exception as exc:
                answers.append(_answer(index, error_code_for(exc)))
                continue
            answers.append(_answer(index, ErrorCode.NONE, ts, offset, partition.leader_epoch))
        topics.append({"name": name, "partitions": answers})
    return {"throttle_time_ms": 0, "topics": topics}
