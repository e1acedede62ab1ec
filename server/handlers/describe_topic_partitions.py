"""DescribeTopicPartitions (75, KIP-966): topics and their partitions, paged with a cursor.

Why: the Java Admin (3.7+) describes topics with this API instead of Metadata as soon as
the broker advertises it, and pages through topics with many partitions. Semantics are
Kafka 3.9's DescribeTopicPartitionsRequestHandler and KRaftMetadataCache
.getTopicMetadataForDescribeTopicResponse:

- an empty topic list means every topic; named topics are deduplicated; either way they
  are answered sorted by name, and only those at or after the cursor's topic;
- named topics that do not exist answer UNKNOWN_TOPIC_OR_PARTITION (INVALID_TOPIC_EXCEPTION
  for an illegal name) and use none of the partition budget; an all-topics answer has
  no such entries;
- at most min(response_partition_limit, max.request.partition.size.limit), at least 1,
  partitions are described; where the budget runs out `next_cursor` names the topic and
  partition to go on from (a topic that is not started gets a cursor at its partition 0),
  and it is null when the listing is complete;
- a cursor whose topic is not among the named topics, or with a negative partition, is
  INVALID_REQUEST for every named topic (Kafka's getErrorResponse), nothing else;
- topics the principal may not DESCRIBE are left out of an all-topics answer and, when
  named, answered TOPIC_AUTHORIZATION_FAILED (zero topic id, after the described ones, as
  Kafka appends them); described topics carry their KIP-430 authorized operations always
  (the request has no flag to ask for them).

No ELR (KIP-966's eligible leader replicas) is kept, so `eligible_leader_replicas` and
`last_known_elr` are empty lists, what a Kafka broker without ELR sends. In a ZooKeeper
cluster the partitions come from the metadata cache, as Metadata's do
(server/partition_states.py); a partition without a live leader has leader -1 and no
error, as KRaft's cache answers.
"""

from __future__ import annotations

import logging
from typing import Any

from wire.errors import ErrorCode
from wire.primitives import ZERO_UUID
from wire.registry import ApiKey

from server.authorized_operations import topic_operations
from server.context import RequestContext
from server.errors import KafkaError
from server.partition_states import partition_count, partition_states, topic_exists, topic_id, topic_names
from server.security.acls import AclOperation, ResourceType
from server.topics import INTERNAL_TOPICS, validate_topic_name

API_KEY = ApiKey.DESCRIBE_TOPIC_PARTITIONS
MAY_BLOCK = False

log = logging.getLogger("trafka.admin")


def _error_topic(name: str | None, code: ErrorCode) -> dict[str, Any]:
    return {"error_code": code, "name": name, "topic_id": ZERO_UUID, "is_internal": False, "partitions": []}


def _invalid_request(ctx: RequestContext, requested: list[str], reason: str) -> dict[str, Any]:
    """Kafka's answer to an InvalidRequestException: every named topic with INVALID_REQUEST."""
    log.warning("DescribeTopicPartitions from %s (%s) is invalid: %s", ctx.client_id, ctx.session.principal, reason)
    return {"throttle_time_ms": 0, "topics": [_error_topic(n, ErrorCode.INVALID_REQUEST) for n in requested],
            "next_cursor": None}


def _unknown_topic_code(name: str) -> ErrorCode:
    try:
        validate_topic_name(name)
    except KafkaError:
        return ErrorCode.INVALID_TOPIC_EXCEPTION
    return ErrorCode.UNKNOWN_TOPIC_OR_PARTITION


async def handle(ctx: RequestContext, request: dict) -> dict:
    broker = ctx.broker
    requested = [t.get("name") for t in request.get("topics") or []]
    fetch_all = not requested
    cursor = request.get("cursor")
    cursor_topic = cursor["topic_name"] if cursor is not None else ""
    cursor_partition = cursor["partition_index"] if cursor is not None else 0
    if any(n is None for n in requested):
        return _invalid_request(ctx, requested, "a topic name is null")
    if cursor is not None and cursor_topic is None:
        return _invalid_request(ctx, requested, "the cursor's topic name is null")

    candidates = topic_names(broker) if fetch_all else sorted(set(requested))
    topics = [n for n in candidates if n >= cursor_topic]
    if not fetch_all and cursor is not None and cursor_topic not in topics:
        return _invalid_request(ctx, requested,
                                f"topic list should contain the cursor topic: {cursor_topic!r}")
    if cursor is not None and cursor_partition < 0:
        return _invalid_request(ctx, requested, f"cursor partition must be valid: {cursor_partition}")

    limit = max(min(broker.config.get("max.request.partition.size.limit"),
                    request.get("response_partition_limit", 2000)), 1)
    remaining = limit
    described: list[dict[str, Any]] = []
    unauthorized: list[dict[str, Any]] = []
    next_cursor = None
    for name in topics:
        if not ctx.authorize(AclOperation.DESCRIBE, ResourceType.TOPIC, name, log_denied=not fetch_all):
            if not fetch_all:
                unauthorized.append(_error_topic(name, ErrorCode.TOPIC_AUTHORIZATION_FAILED))
            continue
        if remaining <= 0:
            # The previous topics filled the budget exactly: go on at this one's start.
            next_cursor = {"topic_name": name, "partition_index": 0}
            break
        if not topic_exists(broker, name):
            if not fetch_all:
                code = _unknown_topic_code(name)
                log.info("DescribeTopicPartitions from %s for %r: %s", ctx.client_id, name, code.name)
                described.append({"error_code": code, "name": name, "topic_id": ZERO_UUID,
                                  "is_internal": name in INTERNAL_TOPICS, "partitions": [],
                                  "topic_authorized_operations": topic_operations(ctx, name)})
            continue
        start = cursor_partition if name == cursor_topic else 0
        count = partition_count(broker, name)
        upper = min(count, start + remaining)
        partitions = [dict(p, error_code=ErrorCode.NONE, eligible_leader_replicas=[], last_known_elr=[])
                      for p in partition_states(broker, name, start, upper)]
        described.append({"error_code": ErrorCode.NONE, "name": name, "topic_id": topic_id(broker, name),
                          "is_internal": name in INTERNAL_TOPICS, "partitions": partitions,
                          "topic_authorized_operations": topic_operations(ctx, name)})
        if upper < count:
            next_cursor = {"topic_name": name, "partition_index": upper}
            break
        remaining -= len(partitions)
    log.debug("DescribeTopicPartitions from %s: %s, limit %d, cursor %s -> %d partitions of %d topics, next cursor %s",
              ctx.client_id, "all topics" if fetch_all else f"{len(requested)} topics", limit,
              None if cursor is None else (cursor_topic, cursor_partition),
              sum(len(t["partitions"]) for t in described), len(described),
              None if next_cursor is None else (next_cursor["topic_name"], next_cursor["partition_index"]))
    return {"throttle_time_ms": 0, "topics": described + unauthorized, "next_cursor": next_cursor}
