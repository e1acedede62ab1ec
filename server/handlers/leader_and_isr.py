"""LeaderAndIsr (4): the controller makes local replicas leaders or followers.

Implements v0-7. Only in a cluster (no controller exists otherwise: a single broker answers
STALE_CONTROLLER_EPOCH, it has no controller to obey; the broker's mode decides,
server/modes/). The request is fenced by broker epoch and controller epoch, and applied per
partition only for a newer leader epoch (server/cluster/node.py,
docs/design/replication.md#checks-a-broker-applies); v5+ answers per topic id.
"""

from __future__ import annotations

from wire.errors import ErrorCode
from wire.primitives import ZERO_UUID
from wire.registry import ApiKey

from server.context import RequestContext
from server.security.acls import CLUSTER_NAME, AclOperation, ResourceType

API_KEY = ApiKey.LEADER_AND_ISR
MAY_BLOCK = False


async def handle(ctx: RequestContext, request: dict) -> dict:
    if not ctx.authorize(AclOperation.CLUSTER_ACTION, ResourceType.CLUSTER, CLUSTER_NAME):
        return {"error_code": ErrorCode.CLUSTER_AUTHORIZATION_FAILED, "partition_errors": [], "topics": []}
    version = ctx.api_version
    code, results = await ctx.broker.mode.leader_and_isr(request, version)
    if version >= 5:
        ids = {t["topic_name"]: t.get("topic_id") or ZERO_UUID for t in request["topic_states"]}
        by_topic: dict[str, list[dict]] = {}
        for topic, index, err in results:
            by_topic.setdefault(topic, []).append({"partition_index": index, "error_code": err})
        return {"error_code": code, "topics": [{"topic_id": ids.get(t, ZERO_UUID), "partition_errors": ps}
                                               for t, ps in by_topic.items()]}
    return {"error_code": code, "partition_errors": [{"topic_name": t, "partition_index": i, "error_code": e}
                                                     for t, i, e in results]}
