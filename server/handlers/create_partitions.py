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
from server.errors import InvalidRequest, KafkaError, logged_error_code

API_KEY = ApiKey.CREATE_PARTITIONS
MAY_BLOCK = False

log = logging.getLogger("trafka.admin")


async def handle(ctx: RequestContext, request: dict) -> dict:
    broker = ctx.broker
    validate_only = bool(request.get("validate_only"))
    names = [t["name"] for t in request["topics"]]
    duplicated = {n for n in names if names.count(n) > 1}
    first: dict[str, dict] = {}  # Kafka answers each name once (its results are a map by name)
    for topic in request["topics"]:
        first.setdefault(topic["name"], topic)
    # A single broker answers as Kafka 4's KRaft controller: no time left changes nothing.
    timed_out = not broker.mode.admin_time_left(request.get("timeout_ms", 30000))
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
            await broker.mode.create_partitions(topic, validate_only, request.get("timeout_ms", 30000))
            if not validate_only:
                log.info("CreatePartitions %s from %s: now %d partitions", name, ctx.client_id, topic["count"])
        except Exception as exc:
            code = logged_error_code(exc, log, f"CreatePartitions {name}", ctx.client_id)
            result.update(error_code=code, error_message=str(exc))
        results.append(result)
    return {"throttle_time_ms": 0, "results": results}
