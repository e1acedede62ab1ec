"""AlterPartitionReassignments (45): move partitions' replicas, or cancel a move (KIP-455).

Implements v0. In a cluster served by the active controller only (NOT_CONTROLLER
elsewhere: Kafka's ZooKeeper brokers forward nothing here, the admin client finds the
controller through Metadata). A single broker answers as a one-node Kafka 4 (KRaft)
controller does (the broker's mode answers, server/modes/): its partitions can only
stay where they are, so reassigning one to this broker is done at once, any other replica
list is INVALID_REPLICA_ASSIGNMENT, a cancel NO_REASSIGNMENT_IN_PROGRESS; topics are
answered as asked; timeout_ms <= 0 is REQUEST_TIMED_OUT. The answer comes once each move has
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
from server.errors import NotController
from server.security.acls import CLUSTER_NAME, AclOperation, ResourceType

API_KEY = ApiKey.ALTER_PARTITION_REASSIGNMENTS
MAY_BLOCK = True

log = logging.getLogger("trafka.admin")


async def handle(ctx: RequestContext, request: dict) -> dict:
    if not ctx.authorize(AclOperation.ALTER, ResourceType.CLUSTER, CLUSTER_NAME):
        return {"throttle_time_ms": 0, "error_code": ErrorCode.CLUSTER_AUTHORIZATION_FAILED, "error_message": None, "responses": []}
    try:
        return await ctx.broker.mode.alter_reassignments(request)
    except NotController:
        return {"throttle_time_ms": 0, "error_code": ErrorCode.NOT_CONTROLLER, "error_message": None, "responses": []}
