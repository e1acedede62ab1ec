"""ListOffsets (2): earliest, latest, by timestamp, and max timestamp.

Implements v0-9. v0 (clients before Kafka 0.10.1: Burrow, Sarama's default, kafka-python
with an old api_version) asks for up to max_num_offsets segment boundaries before a time
and gets them in old_style_offsets, newest first (`Log.offsets_before`, Kafka's
legacyFetchOffsetsBefore); only -1 and -2 are special there (others: UNSUPPORTED_VERSION),
and a consumer's list starts at the high watermark. Topics the principal may not DESCRIBE
come after the others, as Kafka answers them.

From v1: isolation_level (v2+) 1 (read_committed) sees the log up to the last stable
offset, 0 up to the high watermark. Special timestamps: -2 earliest (log start offset), -1
latest (the high watermark, or the last stable offset for read_committed), -3 max
timestamp (v7+, KIP-734), -4 earliest local (v8+, KIP-405; the log start offset, as all
data is local), -5 earliest pending upload (v9+, KIP-1005; none, so -1); one asked at an
earlier version, or an unknown one, is UNSUPPORTED_VERSION. A timestamp ≥ 0
gives the first offset whose timestamp is at or after it (below the high watermark), or -1
when there is none. As Kafka 4 answers (found by the protocol differential): a partition
named twice, in one topic entry or two, is answered once, INVALID_REQUEST
(ListOffsetsRequest.duplicatePartitions); a topic without partitions is not answered; an
isolation level other than 0 or 1 fails every requested partition with
UNKNOWN_SERVER_ERROR (IsolationLevel.forId throws). Answers carry the partition's leader epoch; the client's
current_leader_epoch is checked by `Broker.partition` (KIP-320).
"""

from __future__ import annotations

from wire.errors import ErrorCode
from wire.registry import ApiKey

from server.context import RequestContext
from server.security.acls import AclOperation, ResourceType
from server.errors import error_code_for

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


# The first version that may ask for each special timestamp (Kafka's
# timestampMinSupportedVersion); an earlier version, or an unknown one, is UNSUPPORTED_VERSION.
SPECIAL_MIN_VERSION = {LATEST: 1, EARLIEST: 1, MAX_TIMESTAMP: 7, EARLIEST_LOCAL: 8, EARLIEST_PENDING_UPLOAD: 9}
CONSUMER_REPLICA_ID = -1


def _legacy_offsets(partition, timestamp: int, max_num_offsets: int, from_consumer: bool) -> list[int]:
    """v0: segment boundaries before `timestamp`, newest first; a consumer's list never goes
    past the high watermark (Kafka's Partition.legacyFetchOffsetsForTimestamp)."""
    if max_num_offsets < 0:
        raise ValueError(f"max_num_offsets {max_num_offsets} is negative")
    offsets = partition.log.offsets_before(timestamp, max_num_offsets)
    if not from_consumer:
        return offsets
    hw = partition.high_watermark
    if any(o > hw for o in offsets):
        return [hw] + [o for o in offsets if o <= hw]  # offsets are descending: dropWhile(_ > hw)
    return offsets


def _handle_v0(ctx: RequestContext, request: dict) -> dict:
    from_consumer = request.get("replica_id", CONSUMER_REPLICA_ID) == CONSUMER_REPLICA_ID
    allowed, denied = [], []
    for topic in request["topics"]:
        name = topic["name"]
        if not ctx.authorize(AclOperation.DESCRIBE, ResourceType.TOPIC, name):
            denied.append({"name": name, "partitions": [_answer(p["partition_index"], ErrorCode.TOPIC_AUTHORIZATION_FAILED)
                                                        for p in topic["partitions"]]})
            continue
        answers = []
        for part in topic["partitions"]:
            index = part["partition_index"]
            timestamp = part["timestamp"]
            if timestamp < EARLIEST:
                answers.append(_answer(index, ErrorCode.UNSUPPORTED_VERSION))
                continue
            try:
                partition = ctx.broker.partition(name, index)
                offsets = _legacy_offsets(partition, timestamp, part.get("max_num_offsets", 1), from_consumer)
            except Exception as exc:
                answers.append(_answer(index, error_code_for(exc)))
                continue
            answer = _answer(index, ErrorCode.NONE)
            answer["old_style_offsets"] = offsets
            answers.append(answer)
        allowed.append({"name": name, "partitions": answers})
    return {"throttle_time_ms": 0, "topics": allowed + denied}


def _merged(topics: list[dict]) -> tuple[list[tuple[str, list[dict]]], set[tuple[str, int]]]:
    """The request's partitions as Kafka reads them, once each (a topic without partitions is
    not answered), and those named more than once, which Kafka answers INVALID_REQUEST."""
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
    if ctx.api_version == 0:
        return _handle_v0(ctx, request)
    broker = ctx.broker
    if request.get("isolation_level", 0) not in (0, 1):
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
                if timestamp < 0 and ctx.api_version < SPECIAL_MIN_VERSION.get(timestamp, 1 << 15):
                    answers.append(_answer(index, ErrorCode.UNSUPPORTED_VERSION))
                    continue
                partition = broker.partition(name, index, part.get("current_leader_epoch", -1))
                ts, offset = lookup(partition, timestamp, read_committed)
            except Exception as exc:
                answers.append(_answer(index, error_code_for(exc)))
                continue
            answers.append(_answer(index, ErrorCode.NONE, ts, offset, partition.leader_epoch))
        topics.append({"name": name, "partitions": answers})
    return {"throttle_time_ms": 0, "topics": topics}
