"""ControlledShutdown (7): a broker about to stop asks the controller to move its leaderships.

Implements v0-3. The controller elects other ISR members for partitions the broker leads
and takes it out of the ISRs it is in; the answer lists partitions it still leads (the
broker retries, then stops regardless). NOT_CONTROLLER on any broker but the controller,
and on a single broker, which has none (the broker's mode decides, server/modes/).
"""

from __future__ import annotations

from wire.errors import ErrorCode
from wire.registry import ApiKey

from server.context import RequestContext
from server.errors import NotController
from server.security.acls import CLUSTER_NAME, AclOperation, ResourceType

API_KEY = ApiKey.CONTROLLED_SHUTDOWN
MAY_BLOCK = True


async def handle(ctx: RequestContext, request: dict) -> dict:
    if not ctx.authorize(AclOperation.CLUSTER_ACTION, ResourceType.CLUSTER, CLUSTER_NAME):
        return {"error_code": ErrorCode.CLUSTER_AUTHORIZATION_FAILED, "remaining_partitions": []}
    try:
        code, remaining = await ctx.broker.mode.controlled_shutdown(request["broker_id"],
                                                                    request.get("broker_epoch", -1))
    except NotController:
        return {"error_code": ErrorCode.NOT_CONTROLLER, "remaining_partitions": []}
    return {"error_code": code, "remaining_partitions": [{"topic_name": t, "partition_index": p} for t, p in remaining]}
