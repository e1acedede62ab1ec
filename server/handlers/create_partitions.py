"""CreatePartitions (37): grow a topic to a larger partition count.

Implements v0-3, with Kafka's (KRaft ReplicationControlManager) checks in its order:
unknown topic → UNKNOWN_TOPIC_OR_PARTITION; a count that is not above the current one →
INVALID_PARTITIONS; assignments whose number differs from the partitions added, or that
name any broker but this one, or more than one replica → INVALID_REPLICA_ASSIGNMENT;
more than 10 000 partitions added to a topic, or more partitions in total than
trafka.max.partitions → POLICY_VIOLATION (what CreateTopics answers too); a topic named
twice in the request → INVALID_REQUEST, answered once; internal topics → INVALID_REQUEST
(their partition count is part of how groups are placed). validate_only runs every check
and creates nothing. The new partitions exist when the response is sent; as Kafka 4's
KRaft controller, a single broker answers timeout_ms <= 0 with REQUEST_TIMED_OUT and adds
nothing.

The messages are Kafka's, which kafka-topics --alter prints: a single broker's those of a
one-node Kafka 4.x (ReplicationControlManager), a cluster's those of Kafka's ZooKeeper mode
(ZkAdminManager), the design it shares.
"""

from __future__ import annotations

import logging

from wire.errors import ErrorCode
from wire.registry import ApiKey

from server.context import RequestContext
from server.errors import TopicAuthorizationFailed
from server.security.acls import AclOperation, ResourceType
from server.topics import INTERNAL_TOPICS
from server.errors import (InvalidPartitions, InvalidRequest, KafkaError, PolicyViolation, UnknownTopicOrPartition,
                           logged_error_code)

API_KEY = ApiKey.CREATE_PARTITIONS
MAY_BLOCK = False

# Kafka's KRaft controller adds at most this many partitions to a topic per request.
REQUEST_PARTITION_LIMIT = 10_000

log = logging.getLogger("trafka.admin")


def _check(ctx: RequestContext, topic: dict) -> int:
    """Validate one topic's request; the number of partitions it would add."""
    broker = ctx.broker
    name = topic["name"]
    meta = broker.topics.get(name)
    if meta is None:
        raise UnknownTopicOrPartition(f"topic {name} does not exist")
    if name in INTERNAL_TOPICS:
        raise InvalidRequest(f"{name} is an internal topic; its partition count cannot change")
    current, count = meta.partitions, topic["count"]
    if count == current:
        raise InvalidPartitions(f"Topic already has {current} partition(s).")
    if count < current:
        raise InvalidPartitions(f"The topic {name} currently has {current} partition(s); {count} would not be an "
                                f"increase.")
    added = count - current
    assignments = topic.get("assignments")
    if assignments is not None:
        if len(assignments) != added:
            raise KafkaError(f"Attempted to add {added} additional partition(s), but only {len(assignments)} "
                             f"assignment(s) were specified.", ErrorCode.INVALID_REPLICA_ASSIGNMENT)
        for index, assignment in enumerate(assignments):
            replicas = assignment["broker_ids"]
            if replicas != [broker.node_id]:
                raise KafkaError(f"assignment of new partition {current + index} is {replicas}; the only broker "
                                 f"is {broker.node_id} and the replication factor is 1",
                                 ErrorCode.INVALID_REPLICA_ASSIGNMENT)
    if added > REQUEST_PARTITION_LIMIT:
        raise PolicyViolation("Excessively large number of additional partitions per request.")
    limit = broker.config.get("trafka.max.partitions")
    if broker.total_partitions() + added > limit:
        raise PolicyViolation(f"{added} more partitions would exceed trafka.max.partitions={limit}")
    return added


async def _cluster_create(ctx: RequestContext, topic: dict, validate_only: bool, timeout_ms: int) -> None:
    """A cluster: new partitions placed by Kafka's algorithm (or the request's assignments,
    over live brokers) and written to ZooKeeper; the controller elects their leaders."""
    node = ctx.broker.cluster
    name = topic["name"]
    if name in INTERNAL_TOPICS:
        raise InvalidRequest(f"{name} is an internal topic; its partition count cannot change")
    known = node.cache.topics.get(name)
    if known is None:
        raise UnknownTopicOrPartition(f"The topic '{name}' does not exist.")
    current, count = len(known), topic["count"]
    if count < current:
        raise InvalidPartitions(f"Topic currently has {current} partitions, which is higher than the requested "
                                f"{count}.")
    if count == current:
        raise InvalidPartitions(f"Topic already has {current} partitions.")
    plan = None
    assignments = topic.get("assignments")
    if assignments is not None:
        if len(assignments) != count - current:
            raise KafkaError(f"adding {count - current} partitions needs as many assignments, got {len(assignments)}",
                             ErrorCode.INVALID_REPLICA_ASSIGNMENT)
        plan = {current + i: list(a["broker_ids"]) for i, a in enumerate(assignments)}
    if validate_only:
        if plan is not None:
            node.admin.check_assignment(plan)
        return
    await node.admin.create_partitions(name, count, plan, timeout_ms / 1000)
    log.info("CreatePartitions %s from %s: now %d partitions", name, ctx.client_id, count)


async def handle(ctx: RequestContext, request: dict) -> dict:
    broker = ctx.broker
    validate_only = bool(request.get("validate_only"))
    names = [t["name"] for t in request["topics"]]
    duplicated = {n for n in names if names.count(n) > 1}
    first: dict[str, dict] = {}  # Kafka answers each name once (its results are a map by name)
    for topic in request["topics"]:
        first.setdefault(topic["name"], topic)
    # A single broker answers as Kafka 4's KRaft controller: no time left changes nothing.
    timed_out = broker.cluster is None and request.get("timeout_ms", 30000) <= 0
    results = []
    for topic in first.values():
        name = topic["name"]
        result = {"name": name, "error_code": ErrorCode.NONE, "error_message": None}
        try:
            if name in duplicated:
                raise InvalidRequest(f"topic {name} appears more than once in the request")
            if not ctx.authorize(AclOperation.ALTER, ResourceType.TOPIC, name):
                raise TopicAuthorizationFailed(f"not authorized to alter topic {name}")
            if timed_out:
                raise KafkaError(f"timeout_ms {request['timeout_ms']} left no time to add partitions to {name}",
                                 ErrorCode.REQUEST_TIMED_OUT)
            if broker.cluster is not None:
                await _cluster_create(ctx, topic, validate_only, request.get("timeout_ms", 30000))
                results.append(result)
                continue
            _check(ctx, topic)
            if not validate_only:
                broker.create_partitions(name, topic["count"])
                log.info("CreatePartitions %s from %s: now %d partitions", name, ctx.client_id, topic["count"])
        except Exception as exc:
            code = logged_error_code(exc, log, f"CreatePartitions {name}", ctx.client_id)
            result.update(error_code=code, error_message=str(exc))
        results.append(result)
    return {"throttle_time_ms": 0, "results": results}
