"""TxnOffsetCommit (28): a transactional producer commits a consumer group's offsets.

Implements v0-4. The offsets become part of the producer's transaction: they are written
to the group's __consumer_offsets partition as one transactional batch and become visible
to OffsetFetch only when the transaction commits (see server/groups/coordinator.py).

Per partition: an unknown topic or partition → UNKNOWN_TOPIC_OR_PARTITION; metadata over
4096 bytes → OFFSET_METADATA_TOO_LARGE; an empty group id → INVALID_GROUP_ID (and no group
"" is made). Then the transaction coordinator is asked whether
the group's offsets partition was added to the producer's ongoing transaction by
AddOffsetsToTxn (KIP-890 part 1, Kafka's verification); a refusal is the answer for every
partition: INVALID_TXN_STATE, INVALID_PRODUCER_ID_MAPPING, CONCURRENT_TRANSACTIONS (the
client retries), or a fenced producer, answered INVALID_PRODUCER_EPOCH as Kafka's
verification does (every client version knows that one). v3+ carry the consumer's group
metadata (KIP-447) and are checked like a member's commit: UNKNOWN_MEMBER_ID,
ILLEGAL_GENERATION, FENCED_INSTANCE_ID. The answer comes after the batch is written.
v0-1 clients get COORDINATOR_NOT_AVAILABLE for COORDINATOR_LOAD_IN_PROGRESS (KAFKA-7296).
"""

from __future__ import annotations

from wire.errors import ErrorCode
from wire.registry import ApiKey

from server.context import RequestContext
from server.security.acls import AclOperation, ResourceType
from server.groups import OFFSETS_TOPIC, CommittedOffset

API_KEY = ApiKey.TXN_OFFSET_COMMIT
MAY_BLOCK = False

# What Kafka's verification (AddPartitionsToTxnManager, maybeConvertOffsetCommitError)
# makes of the transaction coordinator's answer before a client sees it.
_VERIFY_ERRORS = {
    ErrorCode.PRODUCER_FENCED: ErrorCode.INVALID_PRODUCER_EPOCH,
    ErrorCode.NETWORK_EXCEPTION: ErrorCode.COORDINATOR_LOAD_IN_PROGRESS,
    ErrorCode.UNKNOWN_TOPIC_OR_PARTITION: ErrorCode.COORDINATOR_NOT_AVAILABLE,
    ErrorCode.NOT_LEADER_OR_FOLLOWER: ErrorCode.NOT_COORDINATOR,
}


async def _commit(ctx: RequestContext, request: dict,
                  offsets: dict[tuple[str, int], CommittedOffset]) -> dict[tuple[str, int], ErrorCode]:
    broker = ctx.broker
    groups = broker.groups
    if groups is None:
        return {tp: ErrorCode.COORDINATOR_NOT_AVAILABLE for tp in offsets}
    # Partitions that do not exist are answered without asking anyone (KafkaApis does so
    # before the coordinator), so a typo does not cost a verification.
    results: dict[tuple[str, int], ErrorCode] = {}
    known: dict[tuple[str, int], CommittedOffset] = {}
    if not ctx.authorize(AclOperation.WRITE, ResourceType.TRANSACTIONAL_ID, request["transactional_id"]):
        return {tp: ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED for tp in offsets}
    if not ctx.authorize(AclOperation.READ, ResourceType.GROUP, request["group_id"]):
        return {tp: ErrorCode.GROUP_AUTHORIZATION_FAILED for tp in offsets}
    for tp, committed in offsets.items():
        if not ctx.authorize(AclOperation.READ, ResourceType.TOPIC, tp[0]):
            results[tp] = ErrorCode.TOPIC_AUTHORIZATION_FAILED
        elif not broker.partition_exists(*tp):  # in a cluster: the metadata cache
            results[tp] = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
        else:
            known[tp] = committed
    if not known:
        return results
    group_id = request["group_id"]
    if not group_id:  # Kafka refuses an empty group id before anything else is looked at
        results.update({tp: ErrorCode.INVALID_GROUP_ID for tp in known})
        return results
    producer_id = request["producer_id"]
    producer_epoch = request["producer_epoch"]
    status = groups.group_status(group_id)
    if status != ErrorCode.NONE:  # before asking the transaction coordinator, as Kafka
        results.update({tp: status for tp in known})
        return results
    offsets_tp = (OFFSETS_TOPIC, groups.partition_for(group_id))
    # in a cluster the transaction coordinator may be another broker (server/txn/verification.py)
    verified = await broker.txn.verifier.verify(request["transactional_id"], producer_id, producer_epoch, offsets_tp)
    if verified != ErrorCode.NONE:
        code = _VERIFY_ERRORS.get(verified, verified)
        results.update({tp: code for tp in known})
        return results
    results.update(await groups.commit_txn_offsets(
        group_id=group_id,
        producer_id=producer_id,
        producer_epoch=producer_epoch,
        generation_id=request.get("generation_id", -1),
        member_id=request.get("member_id") or "",
        group_instance_id=request.get("group_instance_id"),
        offsets=known,
    ))
    return results


async def handle(ctx: RequestContext, request: dict) -> dict:
    offsets: dict[tuple[str, int], CommittedOffset] = {}
    for topic in request["topics"]:
        for p in topic["partitions"]:
            offsets[(topic["name"], p["partition_index"])] = CommittedOffset(
                p["committed_offset"], p.get("committed_leader_epoch", -1), p.get("committed_metadata") or "")
    results = await _commit(ctx, request, offsets)
    if ctx.api_version < 2:
        results = {tp: ErrorCode.COORDINATOR_NOT_AVAILABLE if code == ErrorCode.COORDINATOR_LOAD_IN_PROGRESS else code
                   for tp, code in results.items()}
    return {
        "throttle_time_ms": 0,
        "topics": [{"name": topic["name"],
                    "partitions": [{"partition_index": p["partition_index"],
                                    "error_code": results[(topic["name"], p["partition_index"])]}
                                   for p in topic["partitions"]]}
                   for topic in request["topics"] if topic["partitions"]],  # Kafka: no answer for no partitions
    }
