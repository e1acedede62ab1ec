"""DescribeClientQuotas (48): the client quotas whose entity matches a filter (KIP-546).

Implements v0-1. Each filter component names an entity type and a match: EXACT (0) a
name, DEFAULT (1) the type's default entity, SPECIFIED (2) any entity with that type
(default included, as Kafka's ClientQuotasImage matches). Without `strict`, entities with
more types than the filter names match too; with it, only entities with exactly the
filter's types. An empty filter without `strict` lists every entity. Errors, in the
top-level error_code with null entries: an empty or repeated entity type, a match string
where the match type takes none (or none where EXACT needs one), ip combined with user or
client-id, an unknown match type → INVALID_REQUEST; an unknown entity type →
UNSUPPORTED_VERSION, as Kafka answers them.
"""

from __future__ import annotations

import logging

from wire.errors import ErrorCode
from wire.registry import ApiKey

from server.context import RequestContext
from server.security.acls import CLUSTER_NAME, AclOperation, ResourceType
from server.errors import KafkaError, logged_error_code
from server.security.client_quotas import entity_list

API_KEY = ApiKey.DESCRIBE_CLIENT_QUOTAS
MAY_BLOCK = False

log = logging.getLogger("trafka.admin")


async def handle(ctx: RequestContext, request: dict) -> dict:
    if not ctx.authorize(AclOperation.DESCRIBE_CONFIGS, ResourceType.CLUSTER, CLUSTER_NAME):  # Kafka's rule
        return {"throttle_time_ms": 0, "error_code": ErrorCode.CLUSTER_AUTHORIZATION_FAILED, "error_message": None,
                "entries": None}
    try:
        found = ctx.broker.quotas.configs.describe(request["components"], request["strict"])
    except KafkaError as exc:
        code = logged_error_code(exc, log, "DescribeClientQuotas", ctx.client_id)
        return {"throttle_time_ms": 0, "error_code": code, "error_message": str(exc), "entries": None}
    entries = [{"entity": entity_list(entity),
                "values": [{"key": key, "value": value} for key, value in sorted(config.items())]}
               for entity, config in found]
    # Kafka answers success with error_message "" (not null).
    return {"throttle_time_ms": 0, "error_code": ErrorCode.NONE, "error_message": "", "entries": entries}
