"""CreateTopics (19): new topics with partitions, configs, and validate_only.

Implements v0-7 (v0-1 as v2, without their later fields: Kafka 3.9 has no other rule
for them). Replication factor must be 1 (or -1, the broker default) on a single
broker → INVALID_REPLICATION_FACTOR; manual assignments must name this broker →
INVALID_REPLICA_ASSIGNMENT; partitions ≤ 0 (other than -1, the default) →
INVALID_PARTITIONS; bad names → INVALID_TOPIC_EXCEPTION; unknown or invalid configs →
INVALID_CONFIG; an existing topic → TOPIC_ALREADY_EXISTS; a name twice in one request →
INVALID_REQUEST, answered once. validate_only runs every check and creates nothing (the
answer carries a fresh topic id, as Kafka 4's). As Kafka 4's KRaft controller, a single
broker answers timeout_ms <= 0 with REQUEST_TIMED_OUT (nothing created) and more than
10 000 partitions in one request with POLICY_VIOLATION. With an
authorizer: CREATE on the cluster or the topic (else TOPIC_AUTHORIZATION_FAILED), and, as
Kafka, a topic's configs, partitions and replication factor only with DESCRIBE_CONFIGS on it
(else -1s, no configs and v5+ topic_config_error_code TOPIC_AUTHORIZATION_FAILED).

In a cluster: replication factor up to the live brokers (-1: default.replication.factor),
assignments over live brokers (INVALID_REPLICA_ASSIGNMENT otherwise), replicas placed by
Kafka's algorithm (rack-aware), and the topic written to ZooKeeper
(server/cluster/admin.py); the answer waits until the controller has given every partition
a leader (REQUEST_TIMED_OUT after timeout_ms).
"""

from __future__ import annotations

import logging

from wire.errors import ErrorCode
from wire.registry import ApiKey

from server.context import RequestContext
from server.errors import TopicAuthorizationFailed
from server.security.acls import CLUSTER_NAME, AclOperation, ResourceType
from server.errors import KafkaError, error_code_for
from server.topic_configs import creatable_topic_configs

API_KEY = ApiKey.CREATE_TOPICS
MAY_BLOCK = False

log = logging.getLogger("trafka.admin")


def _hide_configs(result: dict) -> dict:
    result.update(num_partitions=-1, replication_factor=-1, configs=[],
                  topic_config_error_code=ErrorCode.TOPIC_AUTHORIZATION_FAILED)
    result.pop("topic_id", None)
    return result


def _partitions_asked(ctx: RequestContext, topic: dict) -> int:
    if topic.get("assignments"):
        return len(topic["assignments"])
    count = topic["num_partitions"]
    return ctx.broker.config.get("num.partitions") if count == -1 else max(count, 0)


async def handle(ctx: RequestContext, request: dict) -> dict:
    broker = ctx.broker
    names = [t["name"] for t in request["topics"]]
    duplicated = {n for n in names if names.count(n) > 1}
    # Kafka answers each name once (its results are a map by name).
    first: dict[str, dict] = {}
    for topic in request["topics"]:
        first.setdefault(topic["name"], topic)
    topics = list(first.values())
    # A single broker answers as Kafka 4's KRaft controller does: no time left (timeout_ms
    # <= 0) is REQUEST_TIMED_OUT and nothing is created; more partitions in one request than
    # its limit is POLICY_VIOLATION for every topic.
    timed_out = not broker.mode.admin_time_left(request.get("timeout_ms", 30000))
    limit = broker.mode.request_partition_limit
    too_many = limit is not None and sum(_partitions_asked(ctx, t) for t in topics if t["name"] not in duplicated) > limit
    results = []
    for topic in topics:
        name = topic["name"]
        result = {"name": name, "error_code": ErrorCode.NONE, "error_message": None, "num_partitions": -1,
                  "replication_factor": -1, "configs": []}
        # Kafka: without DESCRIBE_CONFIGS on the topic its configs (and partitions, replication
        # factor, id) stay out of the answer, and v5+ topic_config_error_code says why.
        hidden = not ctx.authorize(AclOperation.DESCRIBE_CONFIGS, ResourceType.TOPIC, name, log_denied=False)
        if name in duplicated:
            result.update(error_code=ErrorCode.INVALID_REQUEST, error_message=f"topic {name} appears more than once")
            results.append(_hide_configs(result) if hidden else result)
            continue
        try:
            if not ctx.authorize(AclOperation.CREATE, ResourceType.CLUSTER, CLUSTER_NAME, log_denied=False) \
                    and not ctx.authorize(AclOperation.CREATE, ResourceType.TOPIC, name):
                raise TopicAuthorizationFailed(f"not authorized to create topic {name}")
            if timed_out:
                raise KafkaError(f"timeout_ms {request['timeout_ms']} left no time to create {name}",
                                 ErrorCode.REQUEST_TIMED_OUT)
            if too_many:
                raise KafkaError("Excessively large number of partitions per request.", ErrorCode.POLICY_VIOLATION)
            topic_id, partitions, replication, configs = await broker.mode.create_topic(
                topic, bool(request.get("validate_only")), request.get("timeout_ms", 30000))
            if topic_id is not None:
                result["topic_id"] = topic_id
            result.update(num_partitions=partitions, replication_factor=replication,
                          configs=creatable_topic_configs(broker, configs))
            if hidden:
                _hide_configs(result)
        except TopicAuthorizationFailed as exc:
            log.info("CreateTopics %s from %s: TOPIC_AUTHORIZATION_FAILED (%s)", name, ctx.client_id, exc)
            result.update(error_code=ErrorCode.TOPIC_AUTHORIZATION_FAILED, error_message=str(exc))
            if hidden:
                _hide_configs(result)
        except Exception as exc:
            code = error_code_for(exc)
            log.info("CreateTopics %s from %s: %s (%s)", name, ctx.client_id, code.name, exc)
            result.update(error_code=code, error_message=str(exc))
        results.append(result)
    return {"throttle_time_ms": 0, "topics": results}
