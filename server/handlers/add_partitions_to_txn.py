"""AddPartitionsToTxn (24): add partitions to a producer's transaction before it writes to them.

Implements v0-5. v0-3 carry one transaction (the producer's own request); v4+ (KIP-890)
batch several, each either adding its partitions or, with verify_only, asking whether they
are already in the transaction (the form a partition leader sends its coordinator before
a producer's first transactional write; on one broker Produce asks in-process). Partitions
of topics that do not exist answer UNKNOWN_TOPIC_OR_PARTITION and the others of the same
transaction OPERATION_NOT_ATTEMPTED, as Kafka does; otherwise every partition carries the
coordinator's answer (server/txn/coordinator.py): NONE, CONCURRENT_TRANSACTIONS (retried
by clients), PRODUCER_FENCED, INVALID_PRODUCER_ID_MAPPING, INVALID_TXN_STATE...
"""

from __future__ import annotations

import logging

from wire.errors import ErrorCode
from wire.registry import ApiKey

from server.context import RequestContext
from server.security.acls import AclOperation, ResourceType
from server.topics import INTERNAL_TOPICS
from server.txn.coordinator import for_version

API_KEY = ApiKey.ADD_PARTITIONS_TO_TXN
MAY_BLOCK = False

log = logging.getLogger("trafka.txn")


def _results(topics: list[dict], codes) -> list[dict]:
    """The answer shaped as the request, entry by entry (a topic or partition named twice
    is answered twice), as Kafka answers it."""
    return [{"name": t["name"], "results_by_partition": [{"partition_index": p, "partition_error_code": codes(t["name"], p)}
                                                         for p in t["partitions"]]}
            for t in topics]


async def _one(ctx: RequestContext, tid: str, pid: int, epoch: int, topics: list[dict], verify_only: bool) -> list[dict]:
    broker = ctx.broker
    partitions: dict[str, list[int]] = {}
    for t in topics:
        partitions.setdefault(t["name"], []).extend(t["partitions"])
    if not ctx.authorize(AclOperation.WRITE, ResourceType.TRANSACTIONAL_ID, tid):
        return _results(topics, lambda t, p: ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED)
    # Kafka: a client may never add an internal topic (__consumer_offsets goes in through
    # AddOffsetsToTxn): TOPIC_AUTHORIZATION_FAILED, with or without an authorizer.
    denied = {t for t in partitions
              if (t in INTERNAL_TOPICS and ctx.api_version <= 3)
              or not ctx.authorize(AclOperation.WRITE, ResourceType.TOPIC, t)}
    if denied:
        # Kafka: the denied topics fail, the rest is not attempted.
        return _results(topics, lambda t, p: ErrorCode.TOPIC_AUTHORIZATION_FAILED if t in denied
                        else ErrorCode.OPERATION_NOT_ATTEMPTED)
    unknown = set()
    for topic, indexes in partitions.items():
        for p in indexes:
            if not broker.partition_exists(topic, p):  # in a cluster: the metadata cache
                unknown.add((topic, p))
    if unknown:
        log.info("AddPartitionsToTxn from %s for %r: unknown partitions %s", ctx.client_id, tid, sorted(unknown))
        return _results(topics, lambda t, p: ErrorCode.UNKNOWN_TOPIC_OR_PARTITION if (t, p) in unknown
                        else ErrorCode.OPERATION_NOT_ATTEMPTED)
    txn = broker.txn
    if verify_only:
        return _results(topics, lambda t, p: txn.verify_partition(tid, pid, epoch, (t, p)))
    code = await txn.add_partitions(tid, pid, epoch, {(t, p) for t, ps in partitions.items() for p in ps})
    if code not in (ErrorCode.NONE, ErrorCode.CONCURRENT_TRANSACTIONS):
        log.info("AddPartitionsToTxn from %s for %r (producer %d epoch %d): %s", ctx.client_id, tid, pid, epoch,
                 code.name)
    code = for_version(code, ctx.api_version, 2)
    return _results(topics, lambda t, p: code)


async def handle(ctx: RequestContext, request: dict) -> dict:
    if ctx.api_version <= 3:
        results = await _one(ctx, request["v3_and_below_transactional_id"], request["v3_and_below_producer_id"],
                             request["v3_and_below_producer_epoch"], request["v3_and_below_topics"], False)
        return {"throttle_time_ms": 0, "results_by_topic_v3_and_below": results}
    out = []
    for txn in request["transactions"]:
        results = await _one(ctx, txn["transactional_id"], txn["producer_id"], txn["producer_epoch"], txn["topics"],
                             txn["verify_only"])
        out.append({"transactional_id": txn["transactional_id"], "topic_results": results})
    return {"throttle_time_ms": 0, "error_code": ErrorCode.NONE, "results_by_transaction": out}
