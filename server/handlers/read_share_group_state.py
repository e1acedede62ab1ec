"""ReadShareGroupState (84): a share-partition leader reads a share partition's state from
its share coordinator (KIP-932; v0, Kafka's broker-to-broker API).

Answered by the leader of the key's `__share_group_state` partition
(server/groups/share/state.py): per partition the state epoch, start offset and state
batches, StartOffset -1 when the share partition was never initialised or was deleted (then with
the state epoch a new initialisation must use); NOT_COORDINATOR /
COORDINATOR_LOAD_IN_PROGRESS elsewhere or while it loads; FENCED_LEADER_EPOCH for a leader
epoch older than one seen. Needs CLUSTER_ACTION, as Kafka's broker APIs do.
"""

from __future__ import annotations

from wire.registry import ApiKey

from server.context import RequestContext
from server.share_state_requests import per_partition

API_KEY = ApiKey.READ_SHARE_GROUP_STATE
MAY_BLOCK = False

# A share partition never initialised, and what a refused partition's answer carries.
NOT_INITIALISED = {"state_epoch": 0, "start_offset": -1, "state_batches": []}


async def handle(ctx: RequestContext, request: dict) -> dict:
    store = ctx.broker.share.store

    async def read(key, part: dict) -> dict:
        stored = store.read(key, part["leader_epoch"])
        if stored is None:  # never initialised
            return dict(NOT_INITIALISED)
        return {"state_epoch": stored.state_epoch, "start_offset": stored.start_offset, "state_batches": [
            {"first_offset": f, "last_offset": last, "delivery_state": s, "delivery_count": c}
            for f, last, s, c in stored.batches()]}

    return await per_partition(ctx, request, "ReadShareGroupState", read, defaults=NOT_INITIALISED)
