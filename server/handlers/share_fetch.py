"""ShareFetch (78): acquire records for a share consumer, and settle earlier ones (KIP-932).

Implements v1 (Kafka 4.1) and v0 (Kafka 3.9's early access, kafka-clients 3.9's
KafkaShareConsumer): v0 has no MaxRecords (DEFAULT_MAX_RECORDS applies) but a
PartitionMaxBytes per partition, which caps what that partition adds to the answer (kept
in the share session, as Kafka's share session keeps it); the v0 response has no
AcquisitionLockTimeoutMs (the codec leaves it out).

In a share session (ShareSessionEpoch 0 opens it and may not carry acknowledgements,
INVALID_REQUEST; -1 applies the acknowledgements and closes it, releasing what the member
still holds, and fetches nothing; other epochs must be the session's next:
SHARE_SESSION_NOT_FOUND / INVALID_SHARE_SESSION_EPOCH at the top level).
Topics add partitions to the session, ForgottenTopicsData removes them; the fetch covers
every partition of the session. The session ends too when the connection that opened it
closes (server/groups/share/sessions.py).

Piggy-backed acknowledgements are applied (and persisted) first, with their result in each
partition's AcknowledgeErrorCode. Then each partition's share partition acquires up to
MaxRecords in all (exceeded only to end a batch) below the high watermark: records
released or whose lock expired first, then new ones; the answer carries the stored
batches that hold them, whole and undecoded, and the AcquiredRecords ranges with their
delivery counts. Nothing to acquire: the request waits up to MaxWaitMs, woken by a produce
to one of its partitions or by records coming back (a release, an expired lock).

Isolation, the group config share.isolation.level as in Kafka: read_uncommitted (the
default) delivers records up to the high watermark; read_committed up to the last stable
offset, and archives the batches of aborted transactions instead of delivering them.
Transaction markers are never delivered.

In a cluster each partition is served by its leader (NOT_LEADER_OR_FOLLOWER elsewhere, with
KIP-951's CurrentLeader and NodeEndpoints), whose share partition reads its state back from
the share coordinator when it starts serving it (server/groups/share/coordinator.py); share
sessions are per broker, as Kafka's: a consumer keeps one with each leader it fetches from.
"""

from __future__ import annotations

import logging
import uuid

import trio

from wire.errors import ErrorCode
from wire.registry import ApiKey

from server.modes import FETCH_HINT_CODES
from server.context import RequestContext
from server.errors import InvalidRequest, KafkaError, NotLeaderOrFollower, error_code_for
from server.groups.share import FINAL_EPOCH, INITIAL_EPOCH, ISOLATION_LEVEL
from server.purgatory_timer import long_poll_deadline
from server.security.acls import AclOperation, ResourceType

API_KEY = ApiKey.SHARE_FETCH
MAY_BLOCK = True

log = logging.getLogger("trafka.share")
NO_LEADER = {"leader_id": -1, "leader_epoch": -1}
DEFAULT_MAX_RECORDS = 500


def _error(code: ErrorCode, message: str | None = None) -> dict:
    return {"throttle_time_ms": 0, "error_code": code, "error_message": message, "acquisition_lock_timeout_ms": 0,
            "responses": [], "node_endpoints": []}


def _entry(index: int, code: ErrorCode = ErrorCode.NONE, message: str | None = None) -> dict:
    return {"partition_index": index, "error_code": code, "error_message": message,
            "acknowledge_error_code": ErrorCode.NONE, "acknowledge_error_message": None,
            "current_leader": NO_LEADER, "records": b"", "acquired_records": []}


async def handle(ctx: RequestContext, request: dict) -> dict:
    broker = ctx.broker
    share = broker.share
    group_id = request.get("group_id")
    member_id = request.get("member_id")
    epoch = request["share_session_epoch"]
    topics = request["topics"]
    if group_id and not ctx.authorize(AclOperation.READ, ResourceType.GROUP, group_id):
        return _error(ErrorCode.GROUP_AUTHORIZATION_FAILED)
    has_acks = any(p.get("acknowledgement_batches") for t in topics for p in t["partitions"])
    try:
        if not group_id or not member_id:
            raise InvalidRequest("ShareFetch needs a group id and a member id")
        if epoch == INITIAL_EPOCH:
            if has_acks:
                raise InvalidRequest("Acknowledge data present on initial epoch")
            session = share.sessions.open(group_id, member_id, ctx.connection_id)
        else:
            session = share.sessions.advance(group_id, member_id, epoch)
    except KafkaError as exc:
        log.info("ShareFetch %s/%s@%d from %s: %s (%s)", group_id, member_id, epoch, ctx.client_id, exc.code.name, exc)
        return _error(exc.code, str(exc))
    for topic in topics:
        for part in topic["partitions"]:
            # v0's PartitionMaxBytes (None at v1: only MaxBytes / MaxRecords bound it).
            session.partitions[(topic["topic_id"], part["partition_index"])] = part.get("partition_max_bytes")
    for topic in request.get("forgotten_topics_data") or []:
        for index in topic["partitions"]:
            session.partitions.pop((topic["topic_id"], index), None)

    acks = await share.acknowledge_topics(group_id, member_id, topics) if has_acks else {}
    entries: dict[tuple[uuid.UUID, int], dict] = {}
    for key, (code, message) in acks.items():
        entry = entries[key] = _entry(key[1])
        entry["acknowledge_error_code"], entry["acknowledge_error_message"] = code, message
    if epoch == FINAL_EPOCH:
        share.close_session(group_id, member_id)
        return _answer(broker, group_id, entries)
    if epoch == INITIAL_EPOCH:
        for key in session.partitions:
            entries.setdefault(key, _entry(key[1]))

    # Which share partitions to acquire from (errors answered per partition).
    sources = []
    for key in list(session.partitions):
        topic_id, index = key
        name = share.topic_name(topic_id)
        try:
            if name is None:
                raise KafkaError(f"topic id {topic_id} is not known", ErrorCode.UNKNOWN_TOPIC_ID)
            partition = broker.partition(name, index)
            if not ctx.authorize(AclOperation.READ, ResourceType.TOPIC, name):
                raise KafkaError(f"no READ on topic {name}", ErrorCode.TOPIC_AUTHORIZATION_FAILED)
            sp = await share.share_partition(group_id, name, index)
        except Exception as exc:
            code = error_code_for(exc)
            log.info("ShareFetch %s-%d for %s of share group %s: %s (%s)", name, index, member_id, group_id,
                     code.name, exc)
            entry = entries.setdefault(key, _entry(index))
            entry["error_code"], entry["error_message"] = code, str(exc)
            continue
        sources.append((key, partition, sp, session.partitions.get(key)))

    read_committed = share.group_config(group_id, ISOLATION_LEVEL) == "read_committed"
    max_records = request.get("max_records") or DEFAULT_MAX_RECORDS
    max_bytes = request.get("max_bytes", 0x7FFFFFFF)
    deadline = long_poll_deadline(request.get("max_wait_ms", 0))
    while True:
        got = 0
        budget_records, budget_bytes = max_records, max_bytes
        lock_deadline = share.lock_deadline(group_id)
        for key, partition, sp, partition_max_bytes in sources:
            if budget_records <= 0 or budget_bytes <= 0:
                break
            limit = budget_bytes if partition_max_bytes is None else min(budget_bytes, max(partition_max_bytes, 1))
            try:
                if broker.mode.leadership_moved(partition, sp):
                    # Leadership moved during the wait: the next leader serves it (its state reread).
                    raise NotLeaderOrFollower(f"{partition.name} is no longer led here in epoch {sp.leader_epoch}")
                upto = partition.last_stable_offset if read_committed else partition.high_watermark
                found = sp.acquire(partition.log, upto, member_id, budget_records, limit, lock_deadline,
                                   read_committed=read_committed)
            except Exception as exc:
                code = error_code_for(exc)
                log.warning("ShareFetch %r: %s (%s)", sp, code.name, exc)
                entry = entries.setdefault(key, _entry(key[1]))
                entry["error_code"], entry["error_message"] = code, str(exc)
                continue
            if found.count:
                entry = entries.setdefault(key, _entry(key[1]))
                entry["records"] = b"".join(found.records)
                entry["acquired_records"] = found.ranges
                got += found.count
                budget_records -= found.count
                budget_bytes -= found.size
        remaining = deadline - trio.current_time()
        if got or remaining <= 0 or broker.shutting_down or not sources:
            break
        await broker.wait_for_data([p for _k, p, _s, _m in sources], remaining, purgatory="ShareFetch")
    return _answer(broker, group_id, entries)


def key_name(sp) -> tuple[str, int]:
    return (sp.topic, sp.index)


def _answer(broker, group_id: str, entries: dict[tuple[uuid.UUID, int], dict]) -> dict:
    by_topic: dict[uuid.UUID, list[dict]] = {}
    for (topic_id, _index), entry in entries.items():
        by_topic.setdefault(topic_id, []).append(entry)
    responses = [{"topic_id": t, "partitions": parts} for t, parts in by_topic.items()]
    # KIP-951's hints, as Kafka's ShareFetch answers a partition led elsewhere.
    endpoints = broker.mode.leader_hints(responses, "partitions", FETCH_HINT_CODES,
                                         lambda t: broker.share.topic_name(t["topic_id"]))
    return {"throttle_time_ms": 0, "error_code": ErrorCode.NONE, "error_message": None,
            "acquisition_lock_timeout_ms": broker.share.lock_duration_ms(group_id), "responses": responses,
            "node_endpoints": endpoints}
