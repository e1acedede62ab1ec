"""DeleteAcls (31): remove the ACLs each filter matches and say which.

Implements v0-3. SECURITY_DISABLED without an authorizer; needs ALTER on the cluster
(CLUSTER_AUTHORIZATION_FAILED for every filter); a filter with UNKNOWN codes answers
INVALID_REQUEST for that filter while the others are applied.
"""

from __future__ import annotations

import logging

from wire.errors import ErrorCode
from wire.registry import ApiKey

from server.context import RequestContext
from server.errors import logged_error_code
from server.security.acls import CLUSTER_NAME, AclFilter, AclOperation, InvalidAcl, ResourceType

API_KEY = ApiKey.DELETE_ACLS
MAY_BLOCK = False

log = logging.getLogger("trafka.handlers.delete_acls")


def _failed(code: ErrorCode, message: str) -> dict:
    return {"error_code": code, "error_message": message, "matching_acls": []}


async def handle(ctx: RequestContext, request: dict) -> dict:
    items = request.get("filters") or []
    authorizer = ctx.broker.authorizer
    if authorizer is None:
        log.info("DeleteAcls from %s: no authorizer is configured (authorizer.class.name)", ctx.session.peer)
        return {"throttle_time_ms": 0,
                "filter_results": [_failed(ErrorCode.SECURITY_DISABLED, "No Authorizer is configured.")
                                   for _ in items]}
    if not ctx.authorize(AclOperation.ALTER, ResourceType.CLUSTER, CLUSTER_NAME):
        return {"throttle_time_ms": 0,
                "filter_results": [_failed(ErrorCode.CLUSTER_AUTHORIZATION_FAILED, "Cluster authorization failed.")
                                   for _ in items]}
    results: list[dict | None] = []
    filters, positions = [], []
    for item in items:
        acl_filter = AclFilter.from_wire(item)
        try:
            acl_filter.validate()
        except InvalidAcl as exc:
            log.info("DeleteAcls from %s: invalid filter %s: %s", ctx.session.peer, item, exc)
            results.append(_failed(ErrorCode.INVALID_REQUEST, str(exc)))
            continue
        positions.append(len(results))
        results.append(None)
        filters.append(acl_filter)
    try:
        removals = await ctx.broker.mode.remove_acls(filters)
    except Exception as exc:
        code = logged_error_code(exc, log, "DeleteAcls", ctx.client_id)
        return {"throttle_time_ms": 0, "filter_results": [
            r if r is not None else _failed(code, str(exc)) for r in results]}
    for position, removed in zip(positions, removals):
        for acl in removed:
            log.info("%s removed ACL %s", ctx.session.principal, acl.describe())
        results[position] = {"error_code": ErrorCode.NONE, "error_message": None, "matching_acls": [
            {"error_code": ErrorCode.NONE, "error_message": None, "resource_type": acl.resource_type,
             "resource_name": acl.name, "pattern_type": acl.pattern_type, "principal": acl.principal,
             "host": acl.host, "operation": acl.operation, "permission_type": acl.permission}
            for acl in removed]}
    return {"throttle_time_ms": 0, "filter_results": results}
