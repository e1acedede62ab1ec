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

import logging

from wire.errors import ErrorCode
from wire.registry import ApiKey

from server.context import RequestContext
from server.errors import ClusterAuthorizationFailed, error_code_for
from server.security.acls import CLUSTER_NAME, AclOperation, ResourceType

API_KEY = ApiKey.DELETE_SHARE_GROUP_STATE
MAY_BLOCK = True  # waits for the ISR

log = logging.getLogger("trafka.share")


async def handle(ctx: RequestContext, request: dict) -> dict:
    store = ctx.broker.share.store
    allowed = ctx.authorize(AclOperation.CLUSTER_ACTION, ResourceType.CLUSTER, CLUSTER_NAME)
    results = []
    for topic in request["topics"]:
        partitions = []
        for part in topic["partitions"]:
            index = part["partition"]
            code, message = ErrorCode.NONE, None
            try:
                if not allowed:
                    raise ClusterAuthorizationFailed("DeleteShareGroupState needs CLUSTER_ACTION")
                await store.delete((request["group_id"], topic["topic_id"], index))
            except Exception as exc:
                code = error_code_for(exc)
                message = str(exc)
                log.info("DeleteShareGroupState %s %s-%d from %s: %s (%s)", request["group_id"], topic["topic_id"],
                         index, ctx.client_id, code.name, exc)
            partitions.append({"partition": index, "error_code": code, "error_message": message})
        results.append({"topic_id": topic["topic_id"], "partitions": partitions})
    return {"results": results}
