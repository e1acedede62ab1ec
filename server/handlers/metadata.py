"""Metadata (3): brokers, topics, partitions, their leader, replicas, ISR and leader epoch.

Implements v0-12. Topics: null (v1+) means all, an empty list none (v0: empty means
all). Unknown topics are created when auto.create.topics.enable is on and the request
allows it (v4+ allow_auto_topic_creation), and answered at once as ready — Kafka answers
LEADER_NOT_AVAILABLE first and makes clients retry. Leader, leader epoch, replicas and ISR
are each partition's own (server/partition.py). Topic ids appear from v10; v10+ requests
may name a topic by id with a null or empty name (the Java admin's
describeTopics(TopicCollection.ofTopicIds(...))): it is answered by id, with its name, or
UNKNOWN_TOPIC_ID. As Kafka's KafkaApis: before v12 a topic id or a null name refuses the
whole request (every requested topic INVALID_REQUEST, no brokers, no cluster id); from v12,
once any topic is named by id only the ids are answered; a topic named twice is answered
once. With an authorizer (authorizer.class.name): topics the principal may not
DESCRIBE are left out of an all-topics answer and answer TOPIC_AUTHORIZATION_FAILED when
named; auto-creation needs CREATE on the cluster or the topic (else TOPIC_AUTHORIZATION_FAILED, as Kafka);
KIP-430 authorized operations are the authorizer's answer when asked for.

In a cluster the answer comes from the metadata cache the controller fills
(server/cluster/metadata_cache.py): every live broker, the controller id, each partition's
leader (LEADER_NOT_AVAILABLE with leader -1 while it has none), leader epoch, replicas, ISR
and offline replicas. Auto-creation writes the topic to ZooKeeper and answers
LEADER_NOT_AVAILABLE until the controller has given it leaders, as Kafka does.
"""

from __future__ import annotations

import uuid

from wire.errors import ErrorCode
from wire.primitives import ZERO_UUID
from wire.registry import ApiKey

from server.topics import INTERNAL_TOPICS, validate_topic_name
from server.authorized_operations import NOT_REQUESTED, cluster_operations, topic_operations
from server.security.acls import CLUSTER_NAME, AclOperation, ResourceType
from server.context import RequestContext
from server.errors import KafkaError

API_KEY = ApiKey.METADATA
MAY_BLOCK = False



def _visible(ctx: RequestContext, name: str) -> bool:
    """Kafka leaves topics the principal may not DESCRIBE out of an all-topics answer
    (without logging each denial)."""
    return ctx.authorize(AclOperation.DESCRIBE, ResourceType.TOPIC, name, log_denied=False)


def _may_create(ctx: RequestContext, name: str) -> bool:
    """Auto-creation needs CREATE on the cluster or on the topic (Kafka's KafkaApis)."""
    return ctx.authorize(AclOperation.CREATE, ResourceType.CLUSTER, CLUSTER_NAME, log_denied=False) \
        or ctx.authorize(AclOperation.CREATE, ResourceType.TOPIC, name)


def topic_entry(ctx: RequestContext, name: str, with_ops: bool) -> dict:
    broker = ctx.broker
    return {
        "error_code": ErrorCode.NONE,
        "name": name,
        "topic_id": broker.mode.topic_id(name),
        "is_internal": name in INTERNAL_TOPICS,
        "partitions": broker.mode.partition_states(name),
        "topic_authorized_operations": topic_operations(ctx, name) if with_ops else NOT_REQUESTED,
    }


def error_entry(name: str | None, code: ErrorCode, topic_id: uuid.UUID = ZERO_UUID) -> dict:
    return {"error_code": code, "name": name, "topic_id": topic_id, "is_internal": False, "partitions": []}


def _refused(requested: list[dict]) -> dict:
    """Kafka's MetadataRequest.getErrorResponse for an InvalidRequestException: each
    requested topic (a null name as "") with INVALID_REQUEST, and nothing else."""
    return {
        "throttle_time_ms": 0, "brokers": [], "cluster_id": None, "controller_id": -1,
        "topics": [{"error_code": ErrorCode.INVALID_REQUEST, "name": item.get("name") or "",
                    "topic_id": item.get("topic_id") or ZERO_UUID, "is_internal": False, "partitions": []}
                   for item in requested],
    }


def _requested(version: int, requested: list[dict]) -> list[dict] | None:
    """The topics to answer, as Kafka's KafkaApis reads them; None: refuse the request.

    Before v12 names only (a topic id, or a null name, is an invalid request); from v12,
    when any topic is named by id, its ids (the names are ignored); each topic once."""
    if version < 12:
        if any(item.get("name") is None or (item.get("topic_id") or ZERO_UUID) != ZERO_UUID for item in requested):
            return None
    else:
        ids = [item["topic_id"] for item in requested if (item.get("topic_id") or ZERO_UUID) != ZERO_UUID]
        if ids:
            return [{"name": None, "topic_id": topic_id} for topic_id in dict.fromkeys(ids)]
    seen: set = set()
    out = []
    for item in requested:
        if item.get("name") not in seen:
            seen.add(item.get("name"))
            out.append(item)
    return out


async def handle(ctx: RequestContext, request: dict) -> dict:
    broker = ctx.broker
    mode = broker.mode
    version = ctx.api_version
    with_ops = bool(request.get("include_topic_authorized_operations"))
    requested = request.get("topics")
    if requested:
        requested = _requested(version, requested)
        if requested is None:
            return _refused(request["topics"])
    if requested is None or (version == 0 and not requested):
        topics = [topic_entry(ctx, n, with_ops) for n in mode.topic_names() if _visible(ctx, n)]
    else:
        allow_create = request.get("allow_auto_topic_creation", True) if version >= 4 else True
        topics = []
        for item in requested:
            name = item.get("name")
            topic_id = item.get("topic_id") or ZERO_UUID
            if not name and topic_id != ZERO_UUID:
                name = mode.topic_name_for_id(topic_id)
                if name is None:
                    topics.append(error_entry(None, ErrorCode.UNKNOWN_TOPIC_ID, topic_id))
                    continue
            if not ctx.authorize(AclOperation.DESCRIBE, ResourceType.TOPIC, name):
                # Kafka: asked by id, the name stays hidden (null); asked by name, the id does.
                topics.append(error_entry(None if not item.get("name") else name,
                                          ErrorCode.TOPIC_AUTHORIZATION_FAILED, topic_id))
                continue
            if mode.topic_exists(name):
                topics.append(topic_entry(ctx, name, with_ops))
                continue
            try:
                validate_topic_name(name)
            except KafkaError:
                topics.append(error_entry(name, ErrorCode.INVALID_TOPIC_EXCEPTION))
                continue
            auto = allow_create and name not in INTERNAL_TOPICS and broker.config.get("auto.create.topics.enable")
            if auto and not _may_create(ctx, name):
                # Kafka: a topic the request would auto-create without CREATE → TOPIC_AUTHORIZATION_FAILED.
                topics.append(error_entry(name, ErrorCode.TOPIC_AUTHORIZATION_FAILED))
                continue
            try:
                # in a cluster LEADER_NOT_AVAILABLE until the controller has elected its leaders
                code = await mode.auto_create_topic(name) if auto else ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
            except KafkaError as exc:
                topics.append(error_entry(name, exc.code))
                continue
            topics.append(topic_entry(ctx, name, with_ops) if code == ErrorCode.NONE else error_entry(name, code))
    return {
        "throttle_time_ms": 0,
        # the live brokers at the addresses of the client's own listener (a broker without
        # it left out, as Kafka does)
        "brokers": [{"node_id": node_id, "host": host, "port": port, "rack": rack}
                    for node_id, host, port, rack in mode.brokers(ctx.session.listener)],
        "cluster_id": broker.cluster_id,
        "controller_id": mode.controller_id(),
        "topics": topics,
        "cluster_authorized_operations": cluster_operations(ctx)
        if request.get("include_cluster_authorized_operations")
        else NOT_REQUESTED,
    }
