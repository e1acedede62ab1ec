"""WriteShareGroupState (85): a share-partition leader persists a share partition's state at
its share coordinator (KIP-932; v0, Kafka's broker-to-broker API).

Trafka's leaders send the whole in-flight state (StartOffset and a StateBatch for every
offset from it to the end), and the coordinator appends a ShareUpdate or ShareSnapshot to
`__share_group_state` (server/groups/share/state.py), answering once the ISR has it.
Errors per partition: NOT_COORDINATOR / COORDINATOR_LOAD_IN_PROGRESS (not led here, or
loading), FENCED_LEADER_EPOCH (a deposed leader), FENCED_STATE_EPOCH (a state epoch older than
the coordinator's: the share partition was deleted since), INVALID_REQUEST (a malformed batch),
CLUSTER_AUTHORIZATION_FAILED without CLUSTER_ACTION.
"""

from __future__ import annotations

from wire.registry import ApiKey

from server.context import RequestContext
from server.errors import InvalidRequest
from server.groups.share.state import expand
from server.share_state_requests import per_partition

API_KEY = ApiKey.WRITE_SHARE_GROUP_STATE
MAY_BLOCK = True  # waits for the ISR

STATES = (0, 2, 4)  # Available, Acknowledged, Archived
# A share partition's in-flight window is bounded by group.share.partition.max.record.locks
# (plus the batch that crosses it); far more is a malformed request, refused before the
# per-offset state is built.
MAX_STATE_OFFSETS = 1_000_000


def _batches(part: dict) -> list[tuple[int, int, int, int]]:
    out = []
    span = 0
    for b in part["state_batches"]:
        first, last, state, count = b["first_offset"], b["last_offset"], b["delivery_state"], b["delivery_count"]
        if first < part["start_offset"] or last < first or state not in STATES or count < 0:
            raise InvalidRequest(f"state batch [{first}, {last}] state {state} count {count} is not valid "
                                 f"(start offset {part['start_offset']})")
        span += last - first + 1
        if span > MAX_STATE_OFFSETS:
            raise InvalidRequest(f"state batches cover more than {MAX_STATE_OFFSETS} offsets")
        out.append((first, last, state, count))
    return out


async def handle(ctx: RequestContext, request: dict) -> dict:
    store = ctx.broker.share.store

    async def write(key, part: dict) -> dict:
        if part["start_offset"] < 0:
            raise InvalidRequest("StartOffset must be given: Trafka's leaders write the whole state")
        await store.write(key, leader_epoch=part["leader_epoch"], state_epoch=part["state_epoch"],
                          start_offset=part["start_offset"], states=expand(part["start_offset"], _batches(part)))
        return {}

    return await per_partition(ctx, request, "WriteShareGroupState", write)
