"""DescribeAcls (29): the ACLs matching one filter, grouped by resource pattern.

Implements v0-3. SECURITY_DISABLED without an authorizer; needs DESCRIBE on the cluster
(CLUSTER_AUTHORIZATION_FAILED); a filter with UNKNOWN codes answers INVALID_REQUEST.
The pattern type filter may be ANY, MATCH (the patterns that apply to the named resource),
LITERAL or PREFIXED.
"""

from __future__ import annotations

import logging

from wire.errors import ErrorCode
from wire.registry import ApiKey

from server.context import RequestContext
from server.security.acls import CLUSTER_NAME, AclFilter, AclOperation, InvalidAcl, ResourceType

API_KEY = ApiKey.DESCRIBE_ACLS
MAY_BLOCK = False

log = logging.getLogger("trafka.handlers.describe_acls")


def _error(code: ErrorCode, message: str) -> dict:
    return {"throttle_time_ms": 0, "error_code": code, "error_message": message, "resources": []}


async def handle(ctx: RequestContext, request: dict) -> dict:
    authorizer = ctx.broker.authorizer
    if authorizer is None:
        log.info("DescribeAcls from %s: no authorizer is configured (authorizer.class.name)", ctx.session.peer)
        return _error(ErrorCode.SECURITY_DISABLED, "No Authorizer is configured on the broker")
    if not ctx.authorize(AclOperation.DESCRIBE, ResourceType.CLUSTER, CLUSTER_NAME):
        return _error(ErrorCode.CLUSTER_AUTHORIZATION_FAILED, "Cluster authorization failed.")
    acl_filter = AclFilter.from_wire(request)
    try:
        acl_filter.validate()
    except InvalidAcl as exc:
        log.info("DescribeAcls from %s: invalid filter %s: %s", ctx.session.peer, request, exc)
        return _error(ErrorCode.INVALID_REQUEST, str(exc))
    resources: dict[tuple, dict] = {}
    for acl in authorizer.describe(acl_filter):
        key = (acl.resource_type, acl.name, acl.pattern_type)
        entry = resources.setdefault(key, {"resource_type": acl.resource_type, "resource_name": acl.name,
                                           "pattern_type": acl.pattern_type, "acls": []})
        entry["acls"].append({"principal": acl.principal, "host": acl.host, "operation": acl.operation,
                              "permission_type": acl.permission})
    if ctx.api_version == 0:
        # v0 knows LITERAL patterns only (Kafka leaves the others out of a v0 answer).
        resources = {k: v for k, v in resources.items() if k[2] == 3}
    return {"throttle_time_ms": 0, "error_code": ErrorCode.NONE, "error_message": None,
            "resources": list(resources.values())}
