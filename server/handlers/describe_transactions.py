"""DescribeTransactions (65): the state of transactional ids (kafka-transactions.sh describe).

Implements v0. Each id answers its state by Kafka's name (Empty, Ongoing, PrepareCommit,
...), timeout, start time (-1 when no transaction runs), producer id and epoch, and the
partitions of its transaction; an id the coordinator does not know answers
TRANSACTIONAL_ID_NOT_FOUND, one coordinated by another broker NOT_COORDINATOR, one whose
partition is loading COORDINATOR_LOAD_IN_PROGRESS, an empty one INVALID_REQUEST; an error
answer carries 0 in the other fields, as Kafka's does.
"""

from __future__ import annotations

from wire.errors import ErrorCode
from wire.registry import ApiKey

from server.context import RequestContext
from server.security.acls import AclOperation, ResourceType

API_KEY = ApiKey.DESCRIBE_TRANSACTIONS
MAY_BLOCK = False


def _state(ctx: RequestContext, tid: str) -> dict:
    if not tid:
        # Kafka's TransactionCoordinator: an empty transactional id is an invalid request.
        return _error(tid, ErrorCode.INVALID_REQUEST)
    if not ctx.authorize(AclOperation.DESCRIBE, ResourceType.TRANSACTIONAL_ID, tid):
        code, m = ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED, None
    else:
        code, m = ctx.broker.txn.describe(tid)
    if code != ErrorCode.NONE or m is None:
        return _error(tid, code if code != ErrorCode.NONE else ErrorCode.TRANSACTIONAL_ID_NOT_FOUND)
    return {"error_code": ErrorCode.NONE, "transactional_id": tid, "transaction_state": m.state.kafka_name,
            "transaction_timeout_ms": m.timeout_ms, "transaction_start_time_ms": m.start_ms,
            "producer_id": m.producer_id, "producer_epoch": m.producer_epoch,
            "topics": [{"topic": t, "partitions": ps} for t, ps in m.partitions_by_topic().items()
                       # Kafka: only the topics the principal may DESCRIBE.
                       if ctx.authorize(AclOperation.DESCRIBE, ResourceType.TOPIC, t)]}


def _error(tid: str, code: ErrorCode) -> dict:
    """An id's error answer as Kafka gives it: the schema's defaults (0) beside the code."""
    return {"error_code": code, "transactional_id": tid, "transaction_state": "", "transaction_timeout_ms": 0,
            "transaction_start_time_ms": 0, "producer_id": 0, "producer_epoch": 0, "topics": []}


async def handle(ctx: RequestContext, request: dict) -> dict:
    return {"throttle_time_ms": 0,
            "transaction_states": [_state(ctx, tid) for tid in request["transactional_ids"] or []]}
