"""AlterUserScramCredentials (51): create, replace and delete SCRAM credentials (KIP-554).

Implements v0. The client sends the salt and the salted password (never the password);
the broker stores StoredKey/ServerKey/salt/iterations (server/security/sasl/scram_store.py),
usable by the next authentication. One result per user, with KIP-554's errors: empty user
name or iterations outside 4096..16384 → UNACCEPTABLE_CREDENTIAL; an unknown mechanism →
UNSUPPORTED_SASL_MECHANISM; the same user and mechanism twice in one request →
DUPLICATE_RESOURCE; deleting a credential that does not exist → RESOURCE_NOT_FOUND. A user
with any error has none of its changes applied.
"""

from __future__ import annotations

import logging

from wire.errors import ErrorCode
from wire.registry import ApiKey

from server.context import RequestContext
from server.security.acls import CLUSTER_NAME, AclOperation, ResourceType
from server.security.sasl.scram import MAX_ITERATIONS, MECHANISMS, MIN_ITERATIONS, ScramCredential
from server.security.sasl.scram_store import store_of

API_KEY = ApiKey.ALTER_USER_SCRAM_CREDENTIALS
MAY_BLOCK = False

log = logging.getLogger("trafka.handlers.alter_user_scram_credentials")


async def handle(ctx: RequestContext, request: dict) -> dict:
    if not ctx.authorize(AclOperation.ALTER, ResourceType.CLUSTER, CLUSTER_NAME):  # Kafka: ALTER on the cluster
        names = dict.fromkeys(i["name"] for key in ("deletions", "upsertions") for i in request.get(key) or [])
        return {"throttle_time_ms": 0, "results": [
            {"user": name, "error_code": ErrorCode.CLUSTER_AUTHORIZATION_FAILED, "error_message": None}
            for name in names]}
    store = store_of(ctx.broker)
    existing = store.users()
    errors: dict[str, tuple[ErrorCode, str]] = {}
    order: list[str] = []
    seen: dict[tuple[str, int], int] = {}
    ops = [(d, None) for d in request.get("deletions") or []] + [(u, u) for u in request.get("upsertions") or []]
    for item, _ in ops:
        name = item["name"]
        if name not in order:
            order.append(name)
        seen[(name, item["mechanism"])] = seen.get((name, item["mechanism"]), 0) + 1

    def fail(user: str, code: ErrorCode, message: str) -> None:
        errors.setdefault(user, (code, message))

    changes: list[tuple[str, str, ScramCredential | None]] = []
    for item, upsert in ops:
        user, number = item["name"], item["mechanism"]
        if not user:
            fail(user, ErrorCode.UNACCEPTABLE_CREDENTIAL, "Username must not be empty")
            continue
        if seen[(user, number)] > 1:
            fail(user, ErrorCode.DUPLICATE_RESOURCE, "A user credential cannot be altered twice in the same request")
            continue
        mechanism = MECHANISMS.get(number)
        if mechanism is None:
            fail(user, ErrorCode.UNSUPPORTED_SASL_MECHANISM, f"Unknown SCRAM mechanism {number}")
            continue
        if upsert is None:
            if mechanism not in existing.get(user, {}):
                fail(user, ErrorCode.RESOURCE_NOT_FOUND, "Attempt to delete a user credential that does not exist")
                continue
            changes.append((user, mechanism, None))
            continue
        iterations = upsert["iterations"]
        if iterations < MIN_ITERATIONS:
            fail(user, ErrorCode.UNACCEPTABLE_CREDENTIAL, f"Too few iterations ({iterations} < {MIN_ITERATIONS})")
            continue
        if iterations > MAX_ITERATIONS:
            fail(user, ErrorCode.UNACCEPTABLE_CREDENTIAL, f"Too many iterations ({iterations} > {MAX_ITERATIONS})")
            continue
        salt, salted = bytes(upsert.get("salt") or b""), bytes(upsert.get("salted_password") or b"")
        if not salt or not salted:
            fail(user, ErrorCode.UNACCEPTABLE_CREDENTIAL, "Salt and salted password must not be empty")
            continue
        changes.append((user, mechanism, ScramCredential.from_salted_password(mechanism, salt, salted, iterations)))
    changes = [c for c in changes if c[0] not in errors]
    if changes:
        try:
            await store.write(changes)
        except Exception as exc:  # disk or ZooKeeper: the client is told, nothing half-applied here
            log.error("writing SCRAM credentials failed: %s", exc)
            for user, _m, _c in changes:
                fail(user, ErrorCode.KAFKA_STORAGE_ERROR if isinstance(exc, OSError) else ErrorCode.UNKNOWN_SERVER_ERROR,
                     f"writing the credentials failed: {exc}")
    for user, (code, message) in errors.items():
        log.info("AlterUserScramCredentials from %s: user %r: %s (%s)", ctx.client_id, user, code.name, message)
    for user, mechanism, credential in changes:
        if user not in errors:
            log.info("SCRAM credential of user %s for %s %s by %s", user, mechanism,
                     "deleted" if credential is None else f"set ({credential.iterations} iterations)",
                     ctx.session.principal)
    results = []
    for user in order:
        code, message = errors.get(user, (ErrorCode.NONE, None))
        results.append({"user": user, "error_code": code, "error_message": message})
    return {"throttle_time_ms": 0, "results": results}
