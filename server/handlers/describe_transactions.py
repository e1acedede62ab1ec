"""DescribeTransactions (65): the state of transactional ids (kafka-transactions.sh describe).

Implements v0. Each id answers its state by Kafka's name (Empty, Ongoing, PrepareCommit,
...), timeout, start time (-1 when no transaction runs), producer id and epoch, and the
partitions of its transaction; an id the coordinator does not know answers
TRANSACTIONAL_ID_NOT_FOUND, one coordinated by another broker NOT_COORDINATOR, one whose
partition is loading COORDINATOR_LOAD_IN_PROGRESS.
"""

from __future__ import annotations

from wire.errors import ErrorCode
from wire.registry import ApiKey

from server.context import RequestContext
from server.security.acls import AclOperation, ResourceType

API_KEY = ApiKey.DESCRIBE_TRANSACTIONS
MAY_BLOCK = False


def _state(ctx: RequestContext, tid: str) -> dict:
    if not ctx.authorize(AclOperation.DESCRIBE, ResourceType.TRANSACTIONAL_ID, tid):
        code, m = ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED, None
    else:
        code, m = ctx.broker.txn.describe(tid)
    if code != ErrorCode.NONE or m is None:
        return {"error_code": code if code != ErrorCode.NONE else ErrorCode.TRANSACTIONAL_ID_NOT_FOUND,
                "transactional_id": tid,
                "transaction_state": "", "transaction_timeout_ms": 0, "transaction_start_time_ms": -1,
                "producer_id": -1, "producer_epoch": -1, "topics": []}
    return {"error_code": ErrorCode.NONE, "transactional_id": tid, "transaction_state": m.state.kafka_name,
            "transaction_timeout_ms": m.timeout_ms, "transaction_start_time_ms": m.start_ms,
            "producer_id": m.producer_id, "producer_epoch": m.producer_epoch,
            "topics": [{"topic": t, "partitions": ps} for t, ps in m.partitions_by_topic().items()
                       # Kafka: only the topics the principal may DESCRIBE.
                       if ctx.authorize(AclOperation.DESCRIBE, ResourceType.TOPIC, t)]}


async def handle(ctx: RequestContext, request: dict) -> dict:
    return {"throttle_time_ms": 0,
            "transaction_states": [_state(ctx, tid) for tid in request["transactional_ids"] or []]}
