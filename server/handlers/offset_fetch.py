"""OffsetFetch (9): a group's committed offsets.

Implements v0-9. v0 (clients before Kafka 0.8.2) reads what OffsetCommit v0 stored in
ZooKeeper: in a cluster the znode /consumers/<group>/offsets/<topic>/<partition>, a
partition without one answering UNKNOWN_TOPIC_OR_PARTITION (as a ZooKeeper-mode Kafka 3.9
does); a single broker has no ZooKeeper and answers every partition UNSUPPORTED_VERSION,
as a KRaft Kafka 3.9 does. v1-7 ask for one group (topics null from v2: every committed partition);
v8+ batch groups. A partition without a committed offset answers offset -1, leader epoch
-1, metadata "" and no error, as does an unknown group. Offsets of a transaction that has
not ended yet (TxnOffsetCommit) are never returned; with require_stable (v7+) a partition
that has one answers UNSTABLE_OFFSET_COMMIT instead of the older committed offset, so a
consumer taking over from an exactly-once producer retries until the transaction ends
(KIP-447). Named topics are answered as requested, entry by entry, as Kafka does (a topic
named twice is answered twice). v9's member id and epoch belong to the KIP-848 protocol and are ignored for
classic groups, as Kafka does.
"""

from __future__ import annotations

import logging

from wire.errors import ErrorCode
from wire.registry import ApiKey

from server.context import RequestContext
from server.errors import logged_error_code
from server.security.acls import AclOperation, ResourceType

API_KEY = ApiKey.OFFSET_FETCH
MAY_BLOCK = False

log = logging.getLogger("trafka.groups")


def _fetch_group(ctx: RequestContext, group_id: str, topics: list[dict] | None,
                 require_stable: bool, member_id: str | None = None,
                 member_epoch: int = -1) -> tuple[ErrorCode, list[dict]]:
    groups = ctx.broker.groups
    if not ctx.authorize(AclOperation.DESCRIBE, ResourceType.GROUP, group_id):
        code = ErrorCode.GROUP_AUTHORIZATION_FAILED
        if ctx.api_version >= 2:
            return code, []
        return code, [{"name": t["name"], "partitions": [
            {"partition_index": p, "committed_offset": -1, "committed_leader_epoch": -1, "metadata": "",
             "error_code": code} for p in t["partition_indexes"]]} for t in topics or []]
    if groups is None:
        return ErrorCode.COORDINATOR_NOT_AVAILABLE, []
    wanted = None if topics is None else [(t["name"], p) for t in topics for p in t["partition_indexes"]]
    code, offsets = groups.fetch_offsets(group_id, wanted, member_id, member_epoch)
    if code != ErrorCode.NONE:
        if ctx.api_version >= 2:
            return code, []
        # v1 has no group-level error: every partition asked for carries it.
        return code, [{"name": t["name"], "partitions": [
            {"partition_index": p, "committed_offset": -1, "committed_leader_epoch": -1, "metadata": "",
             "error_code": code} for p in t["partition_indexes"]]} for t in topics or []]
    unstable = groups.pending_txn_partitions(group_id) if require_stable else set()
    by_topic: dict[str, list[dict]] = {}
    for topic in (t["name"] for t in topics) if topics is not None else sorted({t for t, _ in offsets}):
        by_topic.setdefault(topic, [])
    items = wanted if wanted is not None else sorted(offsets)
    for tp in items:
        committed = None if tp in unstable else offsets.get(tp)
        by_topic[tp[0]].append({
            "partition_index": tp[1],
            "committed_offset": committed.offset if committed else -1,
            "committed_leader_epoch": committed.leader_epoch if committed else -1,
            "metadata": committed.metadata if committed else "",
            "error_code": ErrorCode.UNSTABLE_OFFSET_COMMIT if tp in unstable else ErrorCode.NONE,
        })
    if ctx.broker.authorizer is not None:
        # Kafka: topics the principal may not DESCRIBE are left out of an all-topics answer
        # and answer TOPIC_AUTHORIZATION_FAILED when named.
        for name in list(by_topic):
            if ctx.authorize(AclOperation.DESCRIBE, ResourceType.TOPIC, name, log_denied=topics is not None):
                continue
            if topics is None:
                del by_topic[name]
            else:
                for part in by_topic[name]:
                    part.update(committed_offset=-1, committed_leader_epoch=-1, metadata="",
                                error_code=ErrorCode.TOPIC_AUTHORIZATION_FAILED)
    if topics is None:
        return code, [{"name": name, "partitions": parts} for name, parts in by_topic.items()]
    # Kafka answers the topics as requested, entry by entry (a topic named twice, twice).
    answered = {(name, p["partition_index"]): p for name, parts in by_topic.items() for p in parts}
    return code, [{"name": t["name"], "partitions": [dict(answered[(t["name"], p)]) for p in t["partition_indexes"]]}
                  for t in topics]


def _v0_partition(index: int, code: ErrorCode, offset: int = -1) -> dict:
    return {"partition_index": index, "committed_offset": offset, "committed_leader_epoch": -1, "metadata": "",
            "error_code": code}


async def _fetch_from_zookeeper(ctx: RequestContext, request: dict) -> dict:
    """v0: Kafka 3.9's handleOffsetFetchRequestFromZookeeper."""
    group_id = request["group_id"]
    topics = request["topics"] or []
    if not ctx.authorize(AclOperation.DESCRIBE, ResourceType.GROUP, group_id):
        code = ErrorCode.GROUP_AUTHORIZATION_FAILED
    elif not ctx.broker.mode.zookeeper_offsets:
        log.info("OffsetFetch v0 from %s for group %s: offsets in ZooKeeper need a cluster", ctx.client_id, group_id)
        code = ErrorCode.UNSUPPORTED_VERSION
    else:
        code = None
    out = []
    for topic in topics:
        name = topic["name"]
        if code is not None:
            out.append({"name": name, "partitions": [_v0_partition(p, code) for p in topic["partition_indexes"]]})
            continue
        allowed = ctx.authorize(AclOperation.DESCRIBE, ResourceType.TOPIC, name)
        parts = []
        for index in topic["partition_indexes"]:
            if not allowed:
                parts.append(_v0_partition(index, ErrorCode.TOPIC_AUTHORIZATION_FAILED))
                continue
            if not ctx.broker.partition_exists(name, index):
                parts.append(_v0_partition(index, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION))
                continue
            try:
                offset = await ctx.broker.mode.fetch_offset_v0(group_id, name, index)
            except Exception as exc:
                parts.append(_v0_partition(index, logged_error_code(exc, log, f"OffsetFetch v0 of group {group_id}",
                                                                    ctx.client_id)))
                continue
            parts.append(_v0_partition(index, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION) if offset is None
                         else _v0_partition(index, ErrorCode.NONE, offset))
        out.append({"name": name, "partitions": parts})
    return {"throttle_time_ms": 0, "topics": out, "error_code": ErrorCode.NONE}


async def handle(ctx: RequestContext, request: dict) -> dict:
    if ctx.api_version == 0:
        return await _fetch_from_zookeeper(ctx, request)
    require_stable = bool(request.get("require_stable", False))
    if ctx.api_version >= 8:
        out = []
        for group in request["groups"]:
            # v9: a KIP-848 member names itself and its epoch (STALE_MEMBER_EPOCH, UNKNOWN_MEMBER_ID)
            code, topics = _fetch_group(ctx, group["group_id"], group.get("topics"), require_stable,
                                        group.get("member_id"), group.get("member_epoch", -1))
            out.append({"group_id": group["group_id"], "topics": topics, "error_code": code})
        return {"throttle_time_ms": 0, "groups": out}
    code, topics = _fetch_group(ctx, request["group_id"], request.get("topics"), require_stable)
    return {"throttle_time_ms": 0, "topics": topics, "error_code": code}
