"""AddOffsetsToTxn (25): put a group's offsets partition into the producer's transaction.

Implements v0-4. sendOffsetsToTransaction first adds the __consumer_offsets partition of
the group (where Kafka puts it: hash of the group id) to the transaction, so the COMMIT or
ABORT marker also lands there and decides the offsets the following TxnOffsetCommit
writes. Errors are the coordinator's, as for AddPartitionsToTxn.
"""

from __future__ import annotations

import logging

from wire.errors import ErrorCode
from wire.registry import ApiKey

from server.context import RequestContext
from server.security.acls import AclOperation, ResourceType
from server.txn.coordinator import for_version
from server.txn.markers import OFFSETS_TOPIC

API_KEY = ApiKey.ADD_OFFSETS_TO_TXN
MAY_BLOCK = False

log = logging.getLogger("trafka.txn")


async def handle(ctx: RequestContext, request: dict) -> dict:
    broker = ctx.broker
    group_id = request["group_id"]
    if not ctx.authorize(AclOperation.WRITE, ResourceType.TRANSACTIONAL_ID, request["transactional_id"]):
        return {"throttle_time_ms": 0, "error_code": ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED}
    if not ctx.authorize(AclOperation.READ, ResourceType.GROUP, group_id):
        return {"throttle_time_ms": 0, "error_code": ErrorCode.GROUP_AUTHORIZATION_FAILED}
    tp = (OFFSETS_TOPIC, broker.groups.partition_for(group_id))
    code = await broker.txn.add_partitions(request["transactional_id"], request["producer_id"],
                                           request["producer_epoch"], {tp})
    if code not in (ErrorCode.NONE, ErrorCode.CONCURRENT_TRANSACTIONS):
        log.info("AddOffsetsToTxn from %s for %r group %r: %s", ctx.client_id, request["transactional_id"],
                 group_id, code.name)
    return {"throttle_time_ms": 0, "error_code": for_version(code, ctx.api_version, 2)}
