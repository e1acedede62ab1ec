"""StopReplica (5): the controller stops (and with delete_partition deletes) local replicas.

Implements v0-4. Fenced by broker and controller epoch; per partition by leader epoch
(-2 = the topic is being deleted). Replicas of __consumer_offsets / __transaction_state
also unload their coordinator state (server/cluster/node.py). A single broker has no
controller to obey: STALE_CONTROLLER_EPOCH (the broker's mode decides, server/modes/).
"""

from __future__ import annotations

from wire.errors import ErrorCode
from wire.registry import ApiKey

from server.context import RequestContext
from server.security.acls import CLUSTER_NAME, AclOperation, ResourceType

API_KEY = ApiKey.STOP_REPLICA
MAY_BLOCK = False


async def handle(ctx: RequestContext, request: dict) -> dict:
    if not ctx.authorize(AclOperation.CLUSTER_ACTION, ResourceType.CLUSTER, CLUSTER_NAME):
        return {"error_code": ErrorCode.CLUSTER_AUTHORIZATION_FAILED, "partition_errors": []}
    code, results = await ctx.broker.mode.stop_replica(request, ctx.api_version)
    return {"error_code": code, "partition_errors": [{"topic_name": t, "partition_index": i, "error_code": e}
                                                     for t, i, e in results]}
