"""ListPartitionReassignments (46): the partitions being moved, with their replicas, adding
and removing replicas (KIP-455).

Implements v0. In a cluster served by the active controller only (NOT_CONTROLLER
elsewhere); a single broker, like a one-node Kafka 4, never moves a partition and answers
an empty list (the broker's mode decides, server/modes/). (Answering NOT_CONTROLLER there
made the admin client re-read Metadata, find the same controller and retry until its
timeout: kafka-topics --describe hung a minute.) topics = null lists every move;
named partitions that are not moving are left out of the answer, as Kafka does.
"""

from __future__ import annotations

from wire.errors import ErrorCode
from wire.registry import ApiKey

from server.context import RequestContext
from server.errors import NotController
from server.security.acls import CLUSTER_NAME, AclOperation, ResourceType

API_KEY = ApiKey.LIST_PARTITION_REASSIGNMENTS
MAY_BLOCK = True


async def handle(ctx: RequestContext, request: dict) -> dict:
    if not ctx.authorize(AclOperation.DESCRIBE, ResourceType.CLUSTER, CLUSTER_NAME):
        return {"throttle_time_ms": 0, "error_code": ErrorCode.CLUSTER_AUTHORIZATION_FAILED, "error_message": None, "topics": []}
    try:
        return await ctx.broker.mode.list_reassignments(request)
    except NotController:
        return {"throttle_time_ms": 0, "error_code": ErrorCode.NOT_CONTROLLER, "error_message": None, "topics": []}
