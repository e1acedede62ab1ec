"""DeleteShareGroupState (86): the group coordinator deletes a share group's state at the
share coordinator of each of its share partitions (KIP-932; v0, Kafka's broker-to-broker API).

Answered by the leader of the key's `__share_group_state` partition
(server/groups/share/state.py), which writes tombstones for the share partition's
ShareSnapshot and ShareUpdate keys, then a ShareSnapshot with StartOffset -1 and the state
epoch bumped (writes of leaders still holding the old state are FENCED_STATE_EPOCH from
then on), before answering; NOT_COORDINATOR /
COORDINATOR_LOAD_IN_PROGRESS elsewhere or while it loads; CLUSTER_AUTHORIZATION_FAILED
without CLUSTER_ACTION.
"""

from __future__ import annotations

from wire.registry import ApiKey

from server.context import RequestContext
from server.share_state_requests import per_partition

API_KEY = ApiKey.DELETE_SHARE_GROUP_STATE
MAY_BLOCK = True  # waits for the ISR


async def handle(ctx: RequestContext, request: dict) -> dict:
    store = ctx.broker.share.store

    async def delete(key, part: dict) -> dict:
        await store.delete(key)
        return {}

    return await per_partition(ctx, request, "DeleteShareGroupState", delete)
