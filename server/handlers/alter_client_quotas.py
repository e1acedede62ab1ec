"""AlterClientQuotas (49): set and remove client quotas (KIP-546).

Implements v0-1. Each entry names an entity — `user`, `client-id`, `user` + `client-id`,
or `ip` alone; a null name is the type's default entity — and ops that set or remove
quota keys: producer_byte_rate, consumer_byte_rate, request_percentage and
controller_mutation_rate for user/client-id entities (controller_mutation_rate is stored
and described but not enforced: Trafka has no KIP-599 mutation throttling),
connection_creation_rate for ip entities. Errors per entry, as Kafka gives them, all
INVALID_REQUEST: an empty entity, an unknown entity type, a type named twice, ip combined
with user or client-id, an ip name that is not an address, an unknown key for the entity,
a key named twice, a fractional value for an integer key, a value that is not positive.
Entries are independent: a failing entry changes nothing and the others still apply.
validate_only checks everything and changes nothing. Removing a key that is not set is
not an error (Kafka neither).

On a single broker the table is written to `<data dir>/__security/client_quotas.json`
before the answer; in a cluster, in ZooKeeper (`/config/users/...`, `/config/clients/...`
with a `/config/changes` notice; server/cluster/client_quota_configs.py), and every broker
enforces the new table once the notice reaches it.
"""

from __future__ import annotations

import logging

from wire.errors import ErrorCode
from wire.registry import ApiKey

from server.context import RequestContext
from server.security.acls import CLUSTER_NAME, AclOperation, ResourceType
from server.errors import KafkaError, logged_error_code
from server.security.client_quotas import entity_of, entity_text, validate_ops

API_KEY = ApiKey.ALTER_CLIENT_QUOTAS
MAY_BLOCK = False

log = logging.getLogger("trafka.admin")


async def handle(ctx: RequestContext, request: dict) -> dict:
    if not ctx.authorize(AclOperation.ALTER_CONFIGS, ResourceType.CLUSTER, CLUSTER_NAME):  # Kafka's rule
        return {"throttle_time_ms": 0, "entries": [
            {"error_code": ErrorCode.CLUSTER_AUTHORIZATION_FAILED, "error_message": None, "entity": e["entity"]}
            for e in request["entries"]]}
    validate_only = request["validate_only"]
    results = []
    accepted = []
    accepted_answers = []
    for entry in request["entries"]:
        answer = {"error_code": ErrorCode.NONE, "error_message": None, "entity": entry["entity"]}
        results.append(answer)
        try:
            entity = entity_of(entry["entity"])
            changes = validate_ops(entity, entry["ops"])
            if any(entity == seen for seen, _ in accepted):
                raise KafkaError(f"entity {entity_text(entity)} appears more than once",
                                 ErrorCode.INVALID_REQUEST)
            accepted.append((entity, changes))
            accepted_answers.append(answer)
        except KafkaError as exc:
            answer["error_code"] = logged_error_code(exc, log, "AlterClientQuotas", ctx.client_id)
            answer["error_message"] = str(exc)
    if validate_only or not accepted:
        return {"throttle_time_ms": 0, "entries": results}
    try:
        await ctx.broker.mode.alter_client_quotas(accepted)
    except Exception as exc:  # ZooKeeper unreachable: each entry says so, the connection stays
        code = logged_error_code(exc, log, "AlterClientQuotas", ctx.client_id)
        for answer in accepted_answers:
            answer["error_code"], answer["error_message"] = code, str(exc)
        return {"throttle_time_ms": 0, "entries": results}
    for entity, changes in accepted:
        log.info("AlterClientQuotas %s from %s (%s): %s", entity_text(entity), ctx.client_id, ctx.session.principal,
                 {k: ("<removed>" if v is None else v) for k, v in changes.items()})
    return {"throttle_time_ms": 0, "entries": results}
