"""DeleteTopics (20): remove topics, by name or (v6+) by topic id.

Implements v0-6. delete.topic.enable=false answers every topic TOPIC_DELETION_DISABLED
before any other check (INVALID_REQUEST before v3, which has no such code), as Kafka does.
Unknown names → UNKNOWN_TOPIC_OR_PARTITION, unknown ids → UNKNOWN_TOPIC_ID, internal
topics → INVALID_TOPIC_EXCEPTION; a topic named twice → INVALID_REQUEST, answered once; a
v6 entry with both a name and an id, or neither → INVALID_REQUEST; errors carry a message
(v5+), as Kafka's. As Kafka 4's KRaft controller, a single broker answers timeout_ms <= 0
with REQUEST_TIMED_OUT and deletes nothing. Authorization as Kafka's: no DELETE on
the topic → TOPIC_AUTHORIZATION_FAILED (even for a topic that does not exist), and a topic
asked for by id without DESCRIBE on it → TOPIC_AUTHORIZATION_FAILED with a null name. The files go at once; fetches
waiting on the topic are woken and see it gone; groups' committed offsets for the topic
are removed (tombstoned), as Kafka does, so a topic re-created under the name starts clean.
"""

from __future__ import annotations

import logging

from wire.errors import ErrorCode
from wire.primitives import ZERO_UUID
from wire.registry import ApiKey

from server.context import RequestContext
from server.security.acls import AclOperation, ResourceType
from server.topics import INTERNAL_TOPICS
from server.errors import error_code_for

API_KEY = ApiKey.DELETE_TOPICS
MAY_BLOCK = False

log = logging.getLogger("trafka.admin")


async def handle(ctx: RequestContext, request: dict) -> dict:
    broker = ctx.broker
    wanted: list[tuple[str | None, object]] = []
    if ctx.api_version >= 6:
        for item in request["topics"]:
            wanted.append((item.get("name"), item.get("topic_id", ZERO_UUID)))
    else:
        wanted = [(name, ZERO_UUID) for name in request["topic_names"]]
    if not broker.config.get("delete.topic.enable"):
        code = ErrorCode.INVALID_REQUEST if ctx.api_version < 3 else ErrorCode.TOPIC_DELETION_DISABLED
        log.info("DeleteTopics from %s: delete.topic.enable is false", ctx.client_id)
        return {"throttle_time_ms": 0, "responses": [
            {"name": name, "topic_id": topic_id, "error_code": code, "error_message": None} for name, topic_id in wanted]}
    # Kafka answers a topic named (or id given) twice once, INVALID_REQUEST.
    keys = [name if topic_id == ZERO_UUID else topic_id for name, topic_id in wanted]
    repeated = {k for k in keys if keys.count(k) > 1}
    wanted = list(dict.fromkeys(wanted))
    # A single broker answers as Kafka 4's KRaft controller: no time left deletes nothing.
    timed_out = not broker.mode.admin_time_left(request.get("timeout_ms", 30000))
    results = []
    for name, topic_id in wanted:
        result = {"name": name, "topic_id": topic_id, "error_code": ErrorCode.NONE, "error_message": None}
        results.append(result)
        if (name if topic_id == ZERO_UUID else topic_id) in repeated:
            result.update(error_code=ErrorCode.INVALID_REQUEST, error_message="the topic is named more than once")
            continue
        if ctx.api_version >= 6 and (name is None) == (topic_id == ZERO_UUID):
            # Kafka: a v6 entry names its topic by name or by id, never both or neither.
            result.update(error_code=ErrorCode.INVALID_REQUEST,
                          error_message="You may not specify both topic name and topic id." if name is not None
                          else "Neither topic name nor id were specified.")
            continue
        if name is None and topic_id != ZERO_UUID:
            name = broker.mode.topic_name_for_id(topic_id)
            result["name"] = name
            if name is None:
                result.update(error_code=ErrorCode.UNKNOWN_TOPIC_ID, error_message=f"no topic has id {topic_id}")
                continue
        if topic_id != ZERO_UUID and not ctx.authorize(AclOperation.DESCRIBE, ResourceType.TOPIC, name):
            # Kafka: asked by id, a principal that may not DESCRIBE the topic does not learn its name.
            result["name"] = None
            result["error_code"] = ErrorCode.TOPIC_AUTHORIZATION_FAILED
        elif not ctx.authorize(AclOperation.DELETE, ResourceType.TOPIC, name):
            result["error_code"] = ErrorCode.TOPIC_AUTHORIZATION_FAILED
        elif not broker.mode.topic_exists(name):
            result.update(error_code=ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, error_message=f"no topic {name}")
        elif name in INTERNAL_TOPICS:
            result["error_code"] = ErrorCode.INVALID_TOPIC_EXCEPTION
            result["error_message"] = "internal topics cannot be deleted"
        elif timed_out:
            result.update(error_code=ErrorCode.REQUEST_TIMED_OUT,
                          error_message=f"timeout_ms {request['timeout_ms']} left no time to delete {name}")
        else:
            result["topic_id"] = broker.mode.topic_id(name)
            try:  # in a cluster: /admin/delete_topics/<t>, and the controller deletes it everywhere
                await broker.mode.delete_topic(name, request.get("timeout_ms", 30000))
            except Exception as exc:
                result["error_code"] = error_code_for(exc)
                result["error_message"] = str(exc)
                log.warning("DeleteTopics %s: %s", name, exc)
    return {"throttle_time_ms": 0, "responses": results}
