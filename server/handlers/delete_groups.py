"""DeleteGroups (42): delete Empty groups and their committed offsets.

Implements v0-2. Per group: unknown → GROUP_ID_NOT_FOUND; members present →
NON_EMPTY_GROUP; otherwise tombstones for every offset and for the group go to
__consumer_offsets before the answer. A share group (KIP-932) known to this coordinator is
deleted by the share coordinator side (`broker.share.delete_group`): its share partitions'
state is tombstoned in `__share_group_state` (DeleteShareGroupState) before the answer.
"""

from __future__ import annotations

from wire.errors import ErrorCode
from wire.registry import ApiKey

from server.context import RequestContext
from server.security.acls import AclOperation, ResourceType

API_KEY = ApiKey.DELETE_GROUPS
MAY_BLOCK = False


async def handle(ctx: RequestContext, request: dict) -> dict:
    names = list(request["groups_names"])
    groups = ctx.broker.groups
    denied = {name: ErrorCode.GROUP_AUTHORIZATION_FAILED for name in dict.fromkeys(names)
              if not ctx.authorize(AclOperation.DELETE, ResourceType.GROUP, name)}
    allowed = [name for name in dict.fromkeys(names) if name not in denied]
    if groups is None:
        results = {name: ErrorCode.COORDINATOR_NOT_AVAILABLE for name in allowed}
    else:
        share = ctx.broker.share
        shares = [name for name in allowed if share.is_share_group(name)]
        others = [name for name in allowed if name not in shares]
        results = await groups.delete_groups(others) if others else {}
        for name in shares:
            results[name] = await share.delete_group(name)
    results.update(denied)
    return {"throttle_time_ms": 0,
            "results": [{"group_id": name, "error_code": results[name]} for name in dict.fromkeys(names)]}
