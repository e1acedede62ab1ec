"""AlterPartitionReassignments (45): move partitions' replicas, or cancel a move (KIP-455).

Implements v0. In a cluster, served by the active controller only (NOT_CONTROLLER
elsewhere: Kafka's ZooKeeper brokers forward nothing here, the admin client finds the
controller through Metadata). The answer comes once each move has started (the topic znode
written, the new replicas told); the copy goes on in the background
(server/cluster/reassignment.py). Per partition: UNKNOWN_TOPIC_OR_PARTITION,
INVALID_REPLICA_ASSIGNMENT (empty, duplicates, negative ids, brokers not alive),
NO_REASSIGNMENT_IN_PROGRESS (replicas = null for a partition not moving).

A single broker is the controller of its one-broker cluster (Metadata names it): as a
one-node Kafka (4.x, ReplicationControlManager) it validates the target (empty, a broker
other than itself, a broker named twice: INVALID_REPLICA_ASSIGNMENT with Kafka's message)
and, the target being its own replica set, has nothing to move (NONE). No move is ever in
progress, so a cancellation is NO_REASSIGNMENT_IN_PROGRESS.
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
    responses = []
    for topic in request["topics"]:
        name = topic["name"]
        meta = ctx.broker.topics.get(name)
        results = []
        for p in topic["partitions"]:
            index, target = p["partition_index"], p.get("replicas")
            if meta is None:
                code, message = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"Unable to find a topic named {name}."
            elif not 0 <= index < meta.partitions:
                code, message = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"Unable to find partition {name}:{index}."
            elif target is None:
                code, message = ErrorCode.NO_REASSIGNMENT_IN_PROGRESS, "No partition reassignment is in progress."
            else:
                code, message = _check_target(target, ctx.broker.node_id)
            if code != ErrorCode.NONE:
                log.info("AlterPartitionReassignments %s-%d to %s from %s: %s (%s)", name, index, target,
                         ctx.client_id, code.name, message)
            results.append({"partition_index": index, "error_code": code, "error_message": message})
        responses.append({"name": name, "partitions": results})
    return {"throttle_time_ms": 0, "error_code": ErrorCode.NONE, "error_message": None, "responses": responses}


def _check_target(target: list[int], node_id: int) -> tuple[ErrorCode, str | None]:
    """Kafka's validateManualPartitionAssignment with this broker the only one registered."""
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
