"""UpdateMetadata (6): the controller tells every broker the cluster's state.

Implements v0-8. Fills the metadata cache clients are answered from (live brokers,
controller, partition leaders/ISR/replicas); fenced by broker and controller epoch
(server/cluster/metadata_cache.py). A single broker has no controller: STALE_CONTROLLER_EPOCH
(the broker's mode decides, server/modes/).
"""

from __future__ import annotations

from wire.errors import ErrorCode
from wire.registry import ApiKey

from server.context import RequestContext
from server.security.acls import CLUSTER_NAME, AclOperation, ResourceType

API_KEY = ApiKey.UPDATE_METADATA
MAY_BLOCK = False


async def handle(ctx: RequestContext, request: dict) -> dict:
    if not ctx.authorize(AclOperation.CLUSTER_ACTION, ResourceType.CLUSTER, CLUSTER_NAME):
        return {"error_code": ErrorCode.CLUSTER_AUTHORIZATION_FAILED}
    return {"error_code": await ctx.broker.mode.update_metadata(request, ctx.api_version)}
