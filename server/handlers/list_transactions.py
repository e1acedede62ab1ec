"""ListTransactions (66): the transactional ids this coordinator knows (kafka-transactions.sh list).

Implements v0-1. Filters: states by Kafka's names (case-insensitive; names that are not a
state come back in unknown_state_filters), producer ids, and (v1, KIP-994) transactions
running longer than duration_filter ms (-1: no filter) — as Kafka computes it, now minus
the start time, so ids with no transaction running (start -1) pass any filter.
"""

from __future__ import annotations

from wire.registry import ApiKey

from server.context import RequestContext
from server.security.acls import AclOperation, ResourceType

API_KEY = ApiKey.LIST_TRANSACTIONS
MAY_BLOCK = False


async def handle(ctx: RequestContext, request: dict) -> dict:
    txn = ctx.broker.txn
    states = set(request.get("state_filters") or [])
    producer_ids = set(request.get("producer_id_filters") or [])
    code, found, unknown = txn.list(states or None, producer_ids or None, request.get("duration_filter", -1))
    # Kafka lists the transactional ids the principal may DESCRIBE.
    found = [m for m in found
             if ctx.authorize(AclOperation.DESCRIBE, ResourceType.TRANSACTIONAL_ID, m.transactional_id, log_denied=False)]
    return {"throttle_time_ms": 0, "error_code": code, "unknown_state_filters": unknown,
            "transaction_states": [{"transactional_id": m.transactional_id, "producer_id": m.producer_id,
                                    "transaction_state": m.state.kafka_name} for m in found]}
