"""InitProducerId (22): producer ids and epochs for idempotent producers.

Implements v0-5. Without producer_id (or -1) a new id at epoch 0; with the current id
and epoch (v3+, KIP-360) the epoch is bumped so the producer can reset its sequences
after an error. A stale epoch is PRODUCER_FENCED. Transactions are not implemented: a
transactional_id gets UNSUPPORTED_VERSION, the code Kafka uses for "not supported" — a
fatal and explicit error, never an authorization error (which would send a user looking for
an ACL that does not exist) nor a coordinator that never answers.
"""

from __future__ import annotations

import logging

from wire.errors import ErrorCode
from wire.registry import ApiKey

from server.context import RequestContext
from server.errors import KafkaError

API_KEY = ApiKey.INIT_PRODUCER_ID
MAY_BLOCK = False

log = logging.getLogger("trafka.producers")


async def handle(ctx: RequestContext, request: dict) -> dict:
    if request.get("transactional_id") is not None:
        log.warning("client %s asked for transactional id %r: transactions are not supported",
                    ctx.client_id, request["transactional_id"])
        return {"throttle_time_ms": 0, "error_code": ErrorCode.UNSUPPORTED_VERSION, "producer_id": -1,
                "producer_epoch": -1}
    try:
        pid, epoch = ctx.broker.producers.init_producer(request.get("producer_id", -1), request.get("producer_epoch", -1))
    except KafkaError as exc:
        log.info("InitProducerId from %s: %s", ctx.client_id, exc)
        return {"error_code": exc.code, "producer_id": -1, "producer_epoch": -1}
    return {"throttle_time_ms": 0, "error_code": ErrorCode.NONE, "producer_id": pid, "producer_epoch": epoch}
