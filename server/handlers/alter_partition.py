"""AlterPartition (56): a partition leader asks the controller to change the ISR (KIP-497).

Implements v0-3. Served by the active controller only (NOT_CONTROLLER elsewhere, and on a
single broker, which has none: the broker's mode decides, server/modes/); checks and the
compare-and-set write are the controller's (server/cluster/controller.py,
docs/design/replication.md#isr-changes-through-the-controller).
"""

from __future__ import annotations

from wire.errors import ErrorCode
from wire.registry import ApiKey

from server.context import RequestContext
from server.errors import NotController
from server.security.acls import CLUSTER_NAME, AclOperation, ResourceType

API_KEY = ApiKey.ALTER_PARTITION
MAY_BLOCK = True


async def handle(ctx: RequestContext, request: dict) -> dict:
    if not ctx.authorize(AclOperation.CLUSTER_ACTION, ResourceType.CLUSTER, CLUSTER_NAME):
        return {"throttle_time_ms": 0, "error_code": ErrorCode.CLUSTER_AUTHORIZATION_FAILED, "topics": []}
    try:
        return await ctx.broker.mode.alter_partition(request, ctx.api_version)
    except NotController:
        return {"throttle_time_ms": 0, "error_code": ErrorCode.NOT_CONTROLLER, "topics": []}
