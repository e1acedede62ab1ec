"""ListGroups (16): every group, with its protocol type (and state, v4+; type, v5+).

Implements v0-5. states_filter (v4+) and types_filter (v5+) match case-insensitively, as
Kafka does; a group is "classic" (JoinGroup/SyncGroup), "consumer" (KIP-848,
ConsumerGroupHeartbeat; states Empty, Assigning, Reconciling, Stable) or "share" (KIP-932,
protocol type "share", states Empty or Stable; from the share coordinator,
server/groups/share/). In a cluster each broker lists the groups it coordinates (clients ask
every broker), with COORDINATOR_LOAD_IN_PROGRESS while one of its partitions loads.
"""

from __future__ import annotations

from wire.errors import ErrorCode
from wire.registry import ApiKey

from server.context import RequestContext
from server.groups import is_consumer_group
from server.security.acls import CLUSTER_NAME, AclOperation, ResourceType

API_KEY = ApiKey.LIST_GROUPS
MAY_BLOCK = False


def _entry(group) -> dict:
    if is_consumer_group(group):
        return {"group_id": group.group_id, "protocol_type": "consumer", "group_state": str(group.consumer_state),
                "group_type": "consumer"}
    return {"group_id": group.group_id, "protocol_type": group.protocol_type or "", "group_state": str(group.state),
            "group_type": "classic"}


async def handle(ctx: RequestContext, request: dict) -> dict:
    groups = ctx.broker.groups
    if groups is None:
        return {"throttle_time_ms": 0, "error_code": ErrorCode.COORDINATOR_NOT_AVAILABLE, "groups": []}
    states = request.get("states_filter") or None
    types = request.get("types_filter") or None
    code, listed = groups.list_groups(
        states={s.lower() for s in states} if states else None,
        types={t.lower() for t in types} if types else None,
    )
    if not ctx.authorize(AclOperation.DESCRIBE, ResourceType.CLUSTER, CLUSTER_NAME, log_denied=False):
        # Kafka: without DESCRIBE on the cluster, the groups the principal may DESCRIBE.
        listed = [g for g in listed
                  if ctx.authorize(AclOperation.DESCRIBE, ResourceType.GROUP, g.group_id, log_denied=False)]
    entries = [_entry(g) for g in listed]
    if types is None or "share" in {t.lower() for t in types}:
        wanted = {s.lower() for s in states} if states else None
        for group in ctx.broker.share.groups.values():
            if wanted is not None and group.state.lower() not in wanted:
                continue
            if not ctx.authorize(AclOperation.DESCRIBE, ResourceType.CLUSTER, CLUSTER_NAME, log_denied=False) \
                    and not ctx.authorize(AclOperation.DESCRIBE, ResourceType.GROUP, group.group_id, log_denied=False):
                continue
            entries.append({"group_id": group.group_id, "protocol_type": "share", "group_state": group.state,
                            "group_type": "share"})
    return {"throttle_time_ms": 0, "error_code": code, "groups": entries}
