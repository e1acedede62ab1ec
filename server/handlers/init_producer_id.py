"""InitProducerId (22): producer ids and epochs for idempotent and transactional producers.

Implements v0-5. Idempotent (no transactional_id): always a new id at epoch 0, also when
the request names the producer's current id and epoch (v3+, KIP-360: a producer resetting
after an error), as Kafka answers.
In a cluster new ids come from blocks allocated in ZooKeeper, so no two brokers hand out the
same id (server/cluster/producer_ids.py); without a block the answer is
COORDINATOR_LOAD_IN_PROGRESS, which clients retry. Transactional:
the transaction coordinator (server/txn/coordinator.py) keeps one producer id per
transactional.id and bumps its epoch on every call, fencing older instances; an ongoing
transaction is aborted first (CONCURRENT_TRANSACTIONS, retried by clients);
transaction_timeout_ms outside (0, transaction.max.timeout.ms] is INVALID_TRANSACTION_TIMEOUT.
A producer id without an epoch, or an epoch without an id (v3+), is INVALID_REQUEST, as
Kafka answers.
"""

from __future__ import annotations

import logging

from wire.errors import ErrorCode
from wire.registry import ApiKey

from server.context import RequestContext
from server.security.acls import CLUSTER_NAME, AclOperation, ResourceType
from server.txn.coordinator import for_version
from server.errors import KafkaError

API_KEY = ApiKey.INIT_PRODUCER_ID
MAY_BLOCK = False

log = logging.getLogger("trafka.producers")


def _denied(ctx: RequestContext, tid: str | None) -> ErrorCode | None:
    """Kafka: WRITE on the transactional id; an idempotent producer needs IDEMPOTENT_WRITE
    on the cluster or WRITE on at least one topic."""
    if tid is not None:
        if not ctx.authorize(AclOperation.WRITE, ResourceType.TRANSACTIONAL_ID, tid):
            return ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED
        return None
    authorizer = ctx.broker.authorizer
    if authorizer is None or ctx.authorize(AclOperation.IDEMPOTENT_WRITE, ResourceType.CLUSTER, CLUSTER_NAME,
                                           log_denied=False):
        return None
    if authorizer.authorize_any(ctx.session.principal, ctx.session.host, AclOperation.WRITE, ResourceType.TOPIC):
        return None
    return ErrorCode.CLUSTER_AUTHORIZATION_FAILED


async def handle(ctx: RequestContext, request: dict) -> dict:
    tid = request.get("transactional_id")
    denied = _denied(ctx, tid)
    if denied is not None:
        return {"throttle_time_ms": 0, "error_code": denied, "producer_id": -1, "producer_epoch": -1}
    if (request.get("producer_id", -1) == -1) != (request.get("producer_epoch", -1) == -1):
        # Kafka's KafkaApis: a producer id without an epoch, or an epoch without an id.
        return {"throttle_time_ms": 0, "error_code": ErrorCode.INVALID_REQUEST, "producer_id": -1,
                "producer_epoch": -1}
    if tid is not None:
        result = await ctx.broker.txn.init_producer_id(tid, request["transaction_timeout_ms"],
                                                       request.get("producer_id", -1), request.get("producer_epoch", -1))
        if result.error not in (ErrorCode.NONE, ErrorCode.CONCURRENT_TRANSACTIONS):
            log.info("InitProducerId from %s for transactional id %r: %s", ctx.client_id, tid, result.error.name)
        return {"throttle_time_ms": 0, "error_code": for_version(result.error, ctx.api_version, 4),
                "producer_id": result.producer_id,
                "producer_epoch": result.producer_epoch}
    try:
        pid, epoch = await ctx.broker.producers.init_producer(request.get("producer_id", -1),
                                                              request.get("producer_epoch", -1))
    except KafkaError as exc:
        log.info("InitProducerId from %s: %s", ctx.client_id, exc)
        return {"error_code": exc.code, "producer_id": -1, "producer_epoch": -1}
    return {"throttle_time_ms": 0, "error_code": ErrorCode.NONE, "producer_id": pid, "producer_epoch": epoch}
