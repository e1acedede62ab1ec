"""CreateAcls (30): add ACLs to the authorizer.

Implements v0-3 (v0 has no pattern type: LITERAL). Without an authorizer
(authorizer.class.name empty) every creation answers SECURITY_DISABLED, as Kafka does.
Needs ALTER on the cluster (CLUSTER_AUTHORIZATION_FAILED for each creation otherwise).
A creation Kafka would refuse (ANY/UNKNOWN/MATCH codes, an empty name, a CLUSTER name
other than kafka-cluster, a malformed principal, an operation the resource type does not
have) answers INVALID_REQUEST with the reason; the valid ones of the same request are added
(to `<data dir>/__security/acls.json`, or in a cluster to ZooKeeper's /kafka-acl).
"""

from __future__ import annotations

import logging

from wire.errors import ErrorCode
from wire.registry import ApiKey

from server.context import RequestContext
from server.errors import logged_error_code
from server.security.acls import CLUSTER_NAME, AclOperation, InvalidAcl, ResourceType, binding_from_wire

API_KEY = ApiKey.CREATE_ACLS
MAY_BLOCK = False

log = logging.getLogger("trafka.handlers.create_acls")


def _result(code: ErrorCode, message: str | None = None) -> dict:
    return {"error_code": code, "error_message": message}


async def handle(ctx: RequestContext, request: dict) -> dict:
    creations = request.get("creations") or []
    authorizer = ctx.broker.authorizer
    if authorizer is None:
        log.info("CreateAcls from %s: no authorizer is configured (authorizer.class.name)", ctx.session.peer)
        return {"throttle_time_ms": 0, "results": [
            _result(ErrorCode.SECURITY_DISABLED, "No Authorizer is configured.") for _ in creations]}
    if not ctx.authorize(AclOperation.ALTER, ResourceType.CLUSTER, CLUSTER_NAME):
        return {"throttle_time_ms": 0, "results": [
            _result(ErrorCode.CLUSTER_AUTHORIZATION_FAILED, "Cluster authorization failed.") for _ in creations]}
    results, valid = [], []
    for item in creations:
        binding = binding_from_wire(item)
        try:
            binding.validate()
        except InvalidAcl as exc:
            log.info("CreateAcls from %s: invalid ACL %s: %s", ctx.session.peer, item, exc)
            results.append(_result(ErrorCode.INVALID_REQUEST, str(exc)))
            continue
        valid.append(binding)
        results.append(_result(ErrorCode.NONE))
    if valid:
        try:
            await ctx.broker.mode.add_acls(valid)  # in a cluster, ZooKeeper: every broker follows
        except Exception as exc:
            code = logged_error_code(exc, log, "CreateAcls", ctx.client_id)
            return {"throttle_time_ms": 0, "results": [
                r if r["error_code"] != ErrorCode.NONE else _result(code, str(exc)) for r in results]}
        for binding in valid:
            log.info("%s added ACL %s", ctx.session.principal, binding.describe())
    return {"throttle_time_ms": 0, "results": results}
