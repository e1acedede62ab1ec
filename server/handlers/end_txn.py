"""EndTxn (26): commit or abort the producer's transaction.

Implements v0-4. The coordinator writes PrepareCommit/PrepareAbort to __transaction_state
and answers; the markers and the Complete state follow in the background, during which
further requests for the id get CONCURRENT_TRANSACTIONS (clients retry). Retrying the same
end after it completed is NONE; ending the other way, or with nothing open, is
INVALID_TXN_STATE; an older epoch is PRODUCER_FENCED (server/txn/coordinator.py).
"""

from __future__ import annotations

import logging

from wire.errors import ErrorCode
from wire.registry import ApiKey

from server.context import RequestContext
from server.security.acls import AclOperation, ResourceType
from server.txn.coordinator import for_version

API_KEY = ApiKey.END_TXN
MAY_BLOCK = False

log = logging.getLogger("trafka.txn")


async def handle(ctx: RequestContext, request: dict) -> dict:
    tid = request["transactional_id"]
    commit = request["committed"]
    if not ctx.authorize(AclOperation.WRITE, ResourceType.TRANSACTIONAL_ID, tid):
        return {"throttle_time_ms": 0, "error_code": ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED}
    code = await ctx.broker.txn.end_txn(tid, request["producer_id"], request["producer_epoch"], commit)
    if code not in (ErrorCode.NONE, ErrorCode.CONCURRENT_TRANSACTIONS):
        log.info("EndTxn (%s) from %s for %r producer %d epoch %d: %s", "commit" if commit else "abort",
                 ctx.client_id, tid, request["producer_id"], request["producer_epoch"], code.name)
    return {"throttle_time_ms": 0, "error_code": for_version(code, ctx.api_version, 2)}
