"""AlterPartitionReassignments (45): move partitions' replicas, or cancel a move (KIP-455).

Implements v0. In a cluster served by the active controller only (NOT_CONTROLLER
elsewhere: Kafka's ZooKeeper brokers forward nothing here, the admin client finds the
controller through Metadata). A single broker answers as a one-node Kafka 4 (KRaft)
controller does (`_single_broker`): its partitions can only stay where they are, so
reassigning one to this broker is done at once, any other replica list is
INVALID_REPLICA_ASSIGNMENT, a cancel NO_REASSIGNMENT_IN_PROGRESS; topics are answered as
asked; timeout_ms <= 0 is REQUEST_TIMED_OUT. The answer comes once each move has
started (the topic znode written, the new replicas told); the copy goes on in the
background (server/cluster/reassignment.py). Per partition: UNKNOWN_TOPIC_OR_PARTITION,
INVALID_REPLICA_ASSIGNMENT (empty, duplicates, negative ids, brokers not alive),
NO_REASSIGNMENT_IN_PROGRESS (replicas = null for a partition not moving).
"""

from __future__ import annotations

import logging

from wire.errors import ErrorCode
from wire.registry import ApiKey

from server.context import RequestContext
from server.security.acls import CLUSTER_NAME, AclOperation, ResourceType

API_KEY = ApiKey.ALTER_PARTITION_REASSIGNMENTS
MAY_BLOCK = True

log = logging.getLogger("trafka.admin")


async def handle(ctx: RequestContext, request: dict) -> dict:
    if not ctx.authorize(AclOperation.ALTER, ResourceType.CLUSTER, CLUSTER_NAME):
        return {"throttle_time_ms": 0, "error_code": ErrorCode.CLUSTER_AUTHORIZATION_FAILED, "error_message": None, "responses": []}
    node = ctx.broker.cluster
    if node is None:
        return _single_broker(ctx, request)
    if not node.controller.active:
        return {"throttle_time_ms": 0, "error_code": ErrorCode.NOT_CONTROLLER, "error_message": None, "responses": []}
    return await node.controller.reassignments.alter(request)


def _single_broker(ctx: RequestContext, request: dict) -> dict:
    broker = ctx.broker
    if request.get("timeout_ms", 60000) <= 0:
        return {"throttle_time_ms": 0, "error_code": ErrorCode.REQUEST_TIMED_OUT, "error_message": None,
                "responses": [{"name": t["name"], "partitions": [
                    {"partition_index": p["partition_index"], "error_code": ErrorCode.REQUEST_TIMED_OUT,
                     "error_message": None} for p in t["partitions"]]} for t in request["topics"]]}
    responses = []
    for topic in request["topics"]:
        name = topic["name"]
        meta = broker.topics.get(name)
        partitions = []
        for part in topic["partitions"]:
            index, replicas = part["partition_index"], part.get("replicas")
            code, message = ErrorCode.NONE, None
            if meta is None:
                code, message = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"Unable to find a topic named {name}."
            elif not 0 <= index < meta.partitions:
                code, message = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"Unable to find partition {name}:{index}."
            elif replicas is None:
                code = ErrorCode.NO_REASSIGNMENT_IN_PROGRESS
            else:
                code, message = _check_target(replicas, broker.node_id)
            if code != ErrorCode.NONE:
                log.info("AlterPartitionReassignments %s-%d to %s from %s: %s (%s)", name, index, replicas,
                         ctx.client_id, code.name, message)
            partitions.append({"partition_index": index, "error_code": code, "error_message": message})
        responses.append({"name": name, "partitions": partitions})
    # Kafka answers an empty request with error_message "".
    return {"throttle_time_ms": 0, "error_code": ErrorCode.NONE, "error_message": None if responses else "",
            "responses": responses}


def _check_target(target: list[int], node_id: int) -> tuple[ErrorCode, str | None]:
    """Kafka's validateManualPartitionAssignment with this broker the only one registered:
    the broker ids are checked in sorted order, so the message names the lowest offender."""
    if not target:
        return ErrorCode.INVALID_REPLICA_ASSIGNMENT, "The manual partition assignment includes an empty replica list."
    previous = None
    for broker_id in sorted(target):
        if broker_id != node_id:
            return ErrorCode.INVALID_REPLICA_ASSIGNMENT, (f"The manual partition assignment includes broker "
                                                          f"{broker_id}, but no such broker is registered.")
        if broker_id == previous:
            return ErrorCode.INVALID_REPLICA_ASSIGNMENT, (f"The manual partition assignment includes the broker "
                                                          f"{previous} more than once.")
        previous = broker_id
    return ErrorCode.NONE, None
