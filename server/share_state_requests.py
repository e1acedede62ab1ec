"""What Read/Write/DeleteShareGroupState (APIs 84-86) share as requests to the share
coordinator: one CLUSTER_ACTION check (Kafka's broker-to-broker APIs need it), then the
same walk over GroupId / Topics / Partitions with a per-partition answer, where an error
becomes that partition's code and message with a log line. Each handler says only what it
does with one share-partition key."""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable

from wire.errors import ErrorCode

from server.context import RequestContext
from server.errors import ClusterAuthorizationFailed, error_code_for
from server.groups.share.state import ShareKey
from server.security.acls import CLUSTER_NAME, AclOperation, ResourceType

log = logging.getLogger("trafka.share")


async def per_partition(ctx: RequestContext, request: dict, api: str,
                        apply: Callable[[ShareKey, dict], Awaitable[dict]], *, defaults: dict | None = None) -> dict:
    """The response of a share-state request: `apply(key, partition request)` gives each
    partition's answer fields; `defaults` fills a refused partition's other fields."""
    allowed = ctx.authorize(AclOperation.CLUSTER_ACTION, ResourceType.CLUSTER, CLUSTER_NAME)
    results = []
    for topic in request["topics"]:
        partitions = []
        for part in topic["partitions"]:
            index = part["partition"]
            try:
                if not allowed:
                    raise ClusterAuthorizationFailed(f"{api} needs CLUSTER_ACTION")
                fields = await apply((request["group_id"], topic["topic_id"], index), part)
                code, message = ErrorCode.NONE, None
            except Exception as exc:
                code, message, fields = error_code_for(exc), str(exc), dict(defaults or {})
                log.info("%s %s %s-%d from %s: %s (%s)", api, request["group_id"], topic["topic_id"], index,
                         ctx.client_id, code.name, exc)
            partitions.append({"partition": index, "error_code": code, "error_message": message, **fields})
        results.append({"topic_id": topic["topic_id"], "partitions": partitions})
    return {"results": results}
