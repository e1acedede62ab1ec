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

import logging

from wire.errors import ErrorCode
from wire.registry import ApiKey

from server.context import RequestContext
from server.errors import error_code_for
from server.security.acls import CLUSTER_NAME, AclOperation, ResourceType

API_KEY = ApiKey.READ_SHARE_GROUP_STATE
MAY_BLOCK = False

log = logging.getLogger("trafka.share")


def _entry(index: int, code: ErrorCode = ErrorCode.NONE, message: str | None = None) -> dict:
    return {"partition": index, "error_code": code, "error_message": message, "state_epoch": 0, "start_offset": -1,
            "state_batches": []}


async def handle(ctx: RequestContext, request: dict) -> dict:
    store = ctx.broker.share.store
    allowed = ctx.authorize(AclOperation.CLUSTER_ACTION, ResourceType.CLUSTER, CLUSTER_NAME)
    results = []
    for topic in request["topics"]:
        partitions = []
        for part in topic["partitions"]:
            index = part["partition"]
            if not allowed:
                partitions.append(_entry(index, ErrorCode.CLUSTER_AUTHORIZATION_FAILED))
                continue
            try:
                stored = store.read((request["group_id"], topic["topic_id"], index), part["leader_epoch"])
            except Exception as exc:
                code = error_code_for(exc)
                log.info("ReadShareGroupState %s %s-%d from %s: %s (%s)", request["group_id"], topic["topic_id"],
                         index, ctx.client_id, code.name, exc)
                partitions.append(_entry(index, code, str(exc)))
                continue
            entry = _entry(index)
            if stored is not None:
                entry.update(state_epoch=stored.state_epoch, start_offset=stored.start_offset, state_batches=[
                    {"first_offset": f, "last_offset": last, "delivery_state": s, "delivery_count": c}
                    for f, last, s, c in stored.batches()])
            partitions.append(entry)
        results.append({"topic_id": topic["topic_id"], "partitions": partitions})
    return {"results": results}
