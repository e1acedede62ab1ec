"""DescribeUserScramCredentials (50): which SCRAM mechanisms a user has, and iterations (KIP-554).

Implements v0. No users (null or empty list): every user with a credential. A named user
without one → RESOURCE_NOT_FOUND; a user named twice → DUPLICATE_RESOURCE. Salts and keys
are never shown.
"""

from __future__ import annotations

from wire.errors import ErrorCode
from wire.registry import ApiKey

from server.context import RequestContext
from server.security.acls import CLUSTER_NAME, AclOperation, ResourceType
from server.security.sasl.scram import NUMBERS
from server.security.sasl.scram_store import store_of

API_KEY = ApiKey.DESCRIBE_USER_SCRAM_CREDENTIALS
MAY_BLOCK = False


async def handle(ctx: RequestContext, request: dict) -> dict:
    if not ctx.authorize(AclOperation.DESCRIBE, ResourceType.CLUSTER, CLUSTER_NAME):  # Kafka: DESCRIBE on the cluster
        return {"throttle_time_ms": 0, "error_code": ErrorCode.CLUSTER_AUTHORIZATION_FAILED, "error_message": None,
                "results": []}
    users = store_of(ctx.broker).users()
    wanted = [u["name"] for u in request.get("users") or []]
    results = []
    if not wanted:
        wanted = sorted(users)
    counts = {name: wanted.count(name) for name in wanted}
    done = set()
    for name in wanted:
        if name in done:
            continue
        done.add(name)
        if counts[name] > 1:
            results.append({"user": name, "error_code": ErrorCode.DUPLICATE_RESOURCE, "credential_infos": [],
                            "error_message": "Cannot describe SCRAM credentials for the same user twice in a "
                                             "single request"})
        elif name not in users:
            results.append({"user": name, "error_code": ErrorCode.RESOURCE_NOT_FOUND, "credential_infos": [],
                            "error_message": "Attempt to describe a user credential that does not exist"})
        else:
            infos = [{"mechanism": NUMBERS[m], "iterations": it} for m, it in sorted(users[name].items())]
            results.append({"user": name, "error_code": ErrorCode.NONE, "error_message": None,
                            "credential_infos": infos})
    # Kafka answers success with error_message "" (not null).
    return {"throttle_time_ms": 0, "error_code": ErrorCode.NONE, "error_message": "", "results": results}
