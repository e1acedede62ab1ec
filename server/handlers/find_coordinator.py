"""FindCoordinator (10): every group and transactional id is coordinated by this broker.

Implements v0-6. v0-3 ask for one key (key_type from v1: 0 group, 1 transaction); v4+
batch several `coordinator_keys` and get one answer per key. The answer is this broker's
node id and advertised address. An unknown key type is INVALID_REQUEST; while the group
coordinator (or the transaction
coordinator) is not loaded the answer is COORDINATOR_NOT_AVAILABLE, which clients retry.
Not implemented: key type 2 (share groups, KIP-932; clients only send it at v6 when they
use share consumers).
"""

from __future__ import annotations

import logging

from wire.errors import ErrorCode
from wire.registry import ApiKey

from server.context import RequestContext
from server.security.acls import AclOperation, ResourceType
from server.coordinator_log import partition_for_key

log = logging.getLogger("trafka.coordinator")

API_KEY = ApiKey.FIND_COORDINATOR
MAY_BLOCK = False

GROUP, TRANSACTION = 0, 1


async def _cluster_answer(ctx: RequestContext, key: str, key_type: int) -> dict:
    """A cluster: the coordinator is the leader of the key's partition of the internal topic,
    created on first use (COORDINATOR_NOT_AVAILABLE meanwhile, which clients retry)."""
    broker = ctx.broker
    node = broker.cluster
    topic = "__consumer_offsets" if key_type == GROUP else "__transaction_state"
    partitions = node.cache.topics.get(topic)
    if not partitions:
        try:
            await node.auto_create_topic(topic)
        except Exception as exc:
            log.warning("creating %s failed: %r", topic, exc)
        return {"key": key, "node_id": -1, "host": "", "port": -1, "error_code": ErrorCode.COORDINATOR_NOT_AVAILABLE,
                "error_message": f"{topic} is being created"}
    index = partition_for_key(key, len(partitions))
    leader = node.cache.leader_of(topic, index)
    if leader is None:
        return {"key": key, "node_id": -1, "host": "", "port": -1, "error_code": ErrorCode.COORDINATOR_NOT_AVAILABLE,
                "error_message": f"{topic}-{index} has no leader"}
    address = leader.address(ctx.session.listener)  # on the client's own listener
    if address is None:
        return {"key": key, "node_id": -1, "host": "", "port": -1, "error_code": ErrorCode.COORDINATOR_NOT_AVAILABLE,
                "error_message": f"broker {leader.broker_id} has no listener {ctx.session.listener}"}
    return {"key": key, "node_id": leader.broker_id, "host": address[0], "port": address[1],
            "error_code": ErrorCode.NONE, "error_message": None}


def _answer(ctx: RequestContext, key: str, key_type: int) -> dict:
    broker = ctx.broker
    if key_type not in (GROUP, TRANSACTION):
        code, message = ErrorCode.INVALID_REQUEST, f"unknown coordinator key type {key_type}"
    elif key_type == GROUP and (broker.groups is None or not broker.groups.loaded):
        code, message = ErrorCode.COORDINATOR_NOT_AVAILABLE, "the group coordinator is loading"
    elif key_type == TRANSACTION and not broker.txn.loaded:
        code, message = ErrorCode.COORDINATOR_NOT_AVAILABLE, "the transaction coordinator is loading"
    else:
        host, port = broker.config.advertised_for(ctx.session.listener)  # the client's own listener
        return {"key": key, "node_id": broker.node_id, "host": host, "port": port,
                "error_code": ErrorCode.NONE, "error_message": None}
    return {"key": key, "node_id": -1, "host": "", "port": -1, "error_code": code, "error_message": message}


def _denied(ctx: RequestContext, key: str, key_type: int) -> ErrorCode | None:
    """Kafka: DESCRIBE on the group or the transactional id the coordinator is asked for."""
    if key_type == GROUP and not ctx.authorize(AclOperation.DESCRIBE, ResourceType.GROUP, key):
        return ErrorCode.GROUP_AUTHORIZATION_FAILED
    if key_type == TRANSACTION and not ctx.authorize(AclOperation.DESCRIBE, ResourceType.TRANSACTIONAL_ID, key):
        return ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED
    return None


async def handle(ctx: RequestContext, request: dict) -> dict:
    key_type = request.get("key_type", GROUP)
    clustered = ctx.broker.cluster is not None and key_type in (GROUP, TRANSACTION)

    async def answer_for(key: str) -> dict:
        denied = _denied(ctx, key, key_type)
        if denied is not None:
            return {"key": key, "node_id": -1, "host": "", "port": -1, "error_code": denied,
                    "error_message": denied.name}
        return await _cluster_answer(ctx, key, key_type) if clustered else _answer(ctx, key, key_type)

    if ctx.api_version >= 4:
        coordinators = [await answer_for(key) for key in request.get("coordinator_keys") or []]
        for answer in coordinators:
            if answer["error_code"] == ErrorCode.NONE:
                answer["error_message"] = ""  # what Kafka sends with a found coordinator (v4+)
        return {"throttle_time_ms": 0, "coordinators": coordinators}
    answer = await answer_for(request.get("key") or "")
    del answer["key"]
    if answer["error_code"] == ErrorCode.NONE:
        answer["error_message"] = "NONE"  # Kafka's Errors.NONE.message() (v1-3)
    answer["throttle_time_ms"] = 0
    return answer
