"""DeleteRecords (21): move a partition's log start offset forward.

Implements v0-2. The offset is the new log start (records below it go; whole segments
below it are removed by storage); -1 means the high watermark, i.e. delete everything.
An offset below the current log start changes nothing. low_watermark in the answer is
the log start offset afterwards (-1 with an error).

Errors per partition, as Kafka's ReplicaManager: unknown topic or partition →
UNKNOWN_TOPIC_OR_PARTITION; internal topics → INVALID_TOPIC_EXCEPTION; a topic whose
cleanup.policy lacks delete (compact only) → POLICY_VIOLATION; an offset above the high
watermark or negative other than -1 → OFFSET_OUT_OF_RANGE. A partition named twice is
answered once, with its last offset, and a topic without partitions not at all (Kafka
reads the request into a map). timeout_ms is not needed with one replica: the answer is
sent when the log start offset has moved (and is checkpointed).
"""

from __future__ import annotations

import logging

import trio

from storage import OffsetOutOfRange
from wire.errors import ErrorCode
from wire.registry import ApiKey

from server.context import RequestContext
from server.errors import TopicAuthorizationFailed
from server.security.acls import AclOperation, ResourceType
from server.topics import INTERNAL_TOPICS
from server.errors import InvalidTopic, PolicyViolation, logged_error_code

API_KEY = ApiKey.DELETE_RECORDS
MAY_BLOCK = False

HIGH_WATERMARK = -1

log = logging.getLogger("trafka.admin")


async def _delete(ctx: RequestContext, topic: str, index: int, offset: int) -> int:
    """Delete below `offset`; the new log start offset."""
    broker = ctx.broker
    partition = broker.partition(topic, index)
    if topic in INTERNAL_TOPICS:
        raise InvalidTopic(f"cannot delete records of internal topic {topic}")
    if not partition.config.delete:
        raise PolicyViolation(f"records of {topic}-{index} cannot be deleted: cleanup.policy has no delete")
    plog = partition.log
    if offset == HIGH_WATERMARK:
        offset = partition.high_watermark
    if offset > partition.high_watermark:
        raise OffsetOutOfRange(offset, plog.log_start_offset, partition.high_watermark)
    if 0 <= offset <= plog.log_start_offset:
        return plog.log_start_offset  # nothing below it is left; no file work
    # Storage checks the range (OffsetOutOfRange above the high watermark) under the
    # partition's lock, so an append cannot interleave; the checkpoint write fsyncs, and
    # whole segments may be deleted, hence the worker thread.
    start = await trio.to_thread.run_sync(plog.delete_records_before, offset)
    log.info("DeleteRecords %s-%d from %s: log start offset now %d", topic, index, ctx.client_id, start)
    return start


def _merged(topics: list[dict]) -> list[tuple[str, list[dict]]]:
    """The request as Kafka reads it, into a map by partition: a partition named twice is
    answered once, with its last offset; a topic without partitions is not answered."""
    merged: dict[str, dict[int, dict]] = {}
    for topic in topics:
        for item in topic["partitions"]:
            merged.setdefault(topic["name"], {})[item["partition_index"]] = item
    return [(name, list(parts.values())) for name, parts in merged.items()]


async def handle(ctx: RequestContext, request: dict) -> dict:
    topics = []
    for name, items in _merged(request["topics"]):
        partitions = []
        for item in items:
            index = item["partition_index"]
            answer = {"partition_index": index, "low_watermark": -1, "error_code": ErrorCode.NONE}
            try:
                if not ctx.authorize(AclOperation.DELETE, ResourceType.TOPIC, name):
                    raise TopicAuthorizationFailed(f"not authorized to delete records of {name}")
                answer["low_watermark"] = await _delete(ctx, name, index, item["offset"])
            except Exception as exc:
                answer["error_code"] = logged_error_code(exc, log, f"DeleteRecords {name}-{index}", ctx.client_id)
            partitions.append(answer)
        topics.append({"name": name, "partitions": partitions})
    return {"throttle_time_ms": 0, "topics": topics}
