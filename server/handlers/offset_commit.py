"""OffsetCommit (8): store a group's consumed positions in __consumer_offsets.

Implements v0-9. v0 (clients before Kafka 0.8.2) stores in ZooKeeper, not in the group:
in a cluster the znode /consumers/<group>/offsets/<topic>/<partition>, as a ZooKeeper-mode
Kafka 3.9 does (server/groups/zookeeper_offsets.py); a single broker has no ZooKeeper and
answers every partition UNSUPPORTED_VERSION, as a KRaft Kafka 3.9 does. v1 carries a commit
timestamp per partition, kept as given (-1: the time of the write); v2-4 a
retention_time_ms (-1: the broker's), which when set gives the offsets an expire timestamp
of now + it, written as an offset value v1 and honoured by the offsets retention (Kafka
3.9's GroupCoordinatorAdapter and getExpiredOffsets).

From v1, per partition: unknown topic or partition → UNKNOWN_TOPIC_OR_PARTITION;
metadata over 4096 bytes → OFFSET_METADATA_TOO_LARGE. For the group: generation -1 from a
consumer outside any group commits to an Empty group (kcat, Spark, `commit()` without
`subscribe()`); members must name the current generation (ILLEGAL_GENERATION), be known
(UNKNOWN_MEMBER_ID), not be fenced (FENCED_INSTANCE_ID), and the group must not be
between JoinGroup and SyncGroup (REBALANCE_IN_PROGRESS). The answer comes after the
offsets are written. v6+ carry the leader epoch, v7+ group.instance.id.
"""

from __future__ import annotations

import logging

from wire.errors import ErrorCode
from wire.registry import ApiKey

from server.context import RequestContext
from server.errors import logged_error_code
from server.security.acls import AclOperation, ResourceType
from server.groups import CommittedOffset
from server.groups.offsets import MAX_METADATA_BYTES

API_KEY = ApiKey.OFFSET_COMMIT
MAY_BLOCK = False


log = logging.getLogger("trafka.groups")
DEFAULT_RETENTION_TIME = -1  # OffsetCommit v2-4: the broker's offsets.retention.minutes


async def _commit_to_zookeeper(ctx: RequestContext, group_id: str,
                               offsets: dict[tuple[str, int], CommittedOffset]
                               ) -> dict[tuple[str, int], ErrorCode] | None:
    """v0: Kafka 3.9's commitOffsetsToZookeeper, per partition, after its checks that the
    partitions exist. Without ZooKeeper (a single broker) a request with any partition
    left to store fails whole, every partition UNSUPPORTED_VERSION (a KRaft broker's
    error response, denied partitions included): returned as None."""
    results: dict[tuple[str, int], ErrorCode] = {}
    for tp in offsets:
        if not ctx.broker.partition_exists(*tp):
            results[tp] = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    if not ctx.broker.mode.zookeeper_offsets:
        if len(results) == len(offsets):
            return results
        log.info("OffsetCommit v0 from %s for group %s: offsets in ZooKeeper need a cluster", ctx.client_id, group_id)
        return None
    for (topic, index), committed in offsets.items():
        if (topic, index) in results:
            continue
        if len(committed.metadata) > MAX_METADATA_BYTES:
            results[(topic, index)] = ErrorCode.OFFSET_METADATA_TOO_LARGE
        else:
            try:
                await ctx.broker.mode.commit_offset_v0(group_id, topic, index, committed.offset)
                results[(topic, index)] = ErrorCode.NONE
            except Exception as exc:
                results[(topic, index)] = logged_error_code(exc, log, f"OffsetCommit v0 of group {group_id}",
                                                            ctx.client_id)
    return results


async def handle(ctx: RequestContext, request: dict) -> dict:
    groups = ctx.broker.groups
    # One "now" per request, as Kafka's commitOffsets: the commit time of every offset without
    # one of its own (v1), and the base of v2-4's expire timestamps.
    now = groups.now_ms() if groups is not None else -1
    retention = request.get("retention_time_ms", DEFAULT_RETENTION_TIME)
    expire = now + retention if retention != DEFAULT_RETENTION_TIME and groups is not None else -1
    offsets: dict[tuple[str, int], CommittedOffset] = {}
    for topic in request["topics"]:
        for p in topic["partitions"]:
            commit_timestamp = p.get("commit_timestamp", -1)
            offsets[(topic["name"], p["partition_index"])] = CommittedOffset(
                p["committed_offset"], p.get("committed_leader_epoch", -1), p.get("committed_metadata") or "",
                now if commit_timestamp == -1 else commit_timestamp, expire)
    # Kafka: READ on the group, then READ on each topic; denied partitions are not committed.
    denied: dict[tuple[str, int], ErrorCode] = {}
    if not ctx.authorize(AclOperation.READ, ResourceType.GROUP, request["group_id"]):
        denied = {tp: ErrorCode.GROUP_AUTHORIZATION_FAILED for tp in offsets}
    else:
        for name in {tp[0] for tp in offsets}:
            if not ctx.authorize(AclOperation.READ, ResourceType.TOPIC, name):
                denied.update((tp, ErrorCode.TOPIC_AUTHORIZATION_FAILED) for tp in offsets if tp[0] == name)
    if denied:
        offsets = {tp: o for tp, o in offsets.items() if tp not in denied}
    if denied and not offsets:
        results = {}
    elif ctx.api_version == 0:
        results = await _commit_to_zookeeper(ctx, request["group_id"], offsets)
        if results is None:
            results, denied = {}, {tp: ErrorCode.UNSUPPORTED_VERSION for tp in {**offsets, **denied}}
    elif groups is None:
        results = {tp: ErrorCode.COORDINATOR_NOT_AVAILABLE for tp in offsets}
    else:
        results = await groups.commit_offsets(
            group_id=request["group_id"],
            generation_id=request.get("generation_id_or_member_epoch", -1),
            member_id=request.get("member_id") or "",
            group_instance_id=request.get("group_instance_id"),
            offsets=offsets,
            api_version=ctx.api_version,
        )
    results = {**results, **denied}
    return {
        "throttle_time_ms": 0,
        "topics": [{"name": topic["name"],
                    "partitions": [{"partition_index": p["partition_index"],
                                    "error_code": results[(topic["name"], p["partition_index"])]}
                                   for p in topic["partitions"]]}
                   for topic in request["topics"] if topic["partitions"]],  # Kafka: no answer for no partitions
    }
