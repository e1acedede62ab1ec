"""Fetch (1): serve stored batches, long-polling until min_bytes arrive or max_wait passes.

Implements v0-17 (topic ids from v13). From v4 stored bytes go out as they are: no record
is decoded. Before v4 the reader knows only magic 0/1 message sets, and the answer is
converted as Kafka 3.9 converts it (`_down_convert`, wire.legacy.down_convert;
docs/protocol-versions.md), with v0-2's hard size limit (a first batch over the limit is
not sent). Rules kept here:
- every requested partition is in the answer (full fetch responses must list them all,
  docs/design/clients.md#full-fetch-responses), in request order; as Kafka reads them into a
  map, a partition named
  twice is answered once and a topic without partitions not at all. An isolation level
  other than 0 or 1 fails the request with UNKNOWN_SERVER_ERROR, as Kafka's does; a
  consumer's partition whose read failed (OFFSET_OUT_OF_RANGE, ...) carries -1 for its
  high watermark, last stable offset and log start, as Kafka's;
- max_bytes caps the response and partition_max_bytes each partition, except that the
  first batch of the first partition with data is always sent whole (KIP-74) — only
  that one: librdkafka drops a response larger than it asked for;
- consumers read up to the high watermark; OFFSET_OUT_OF_RANGE for offsets outside
  [log start, log end]; fetching at the high watermark returns no records and waits;
- partitions are looked up with `Broker.partition`, which checks the client's
  current_leader_epoch (FENCED_LEADER_EPOCH / UNKNOWN_LEADER_EPOCH, KIP-320);
- isolation_level 1 (read_committed) reads stop at the last stable offset (the first offset
  of the oldest open transaction) and the answer lists the aborted transactions in the
  range read (producer id, first offset) from the partition's aborted-transaction index,
  which the clients use to drop aborted records; read_uncommitted gets null there. Every
  answer reports the last stable offset;
- fetch sessions (KIP-227): a request with session_id 0 and epoch -1 (librdkafka, aiokafka,
  our followers) is sessionless and takes the path it always took. Any other is resolved by
  the broker's `FetchSessionCache` (server/fetch_sessions.py, Kafka's FetchManager): a full
  fetch with epoch 0 may create a session (its id in the answer), an incremental one reads
  the session's partitions (after its added/altered ones and forgotten_topics_data) and
  answers only those with records or a changed high watermark, last stable offset or log
  start, an error, a preferred read replica or a diverging epoch. Session errors
  (FETCH_SESSION_ID_NOT_FOUND, INVALID_FETCH_SESSION_EPOCH, FETCH_SESSION_TOPIC_ID_ERROR)
  are answered at once with no partitions. The handler only asks the context what to read
  and what to send.
The wait is woken by produce (`Broker.wait_for_data`), so a waiting consumer sees a new
message at once instead of at the end of its max_wait; a follower's wait by an append only
(`Partition.replica_waiters`), not by the high watermark its peers' fetches move.

Followers (a cluster): a Fetch with a replica id (v0-14 top level, v15+ replica_state) is a
follower copying the leader. It reads up to the log end offset, not the high watermark;
its fetch offset is recorded as the follower's log end offset, which may take it back into
the ISR and advance the high watermark (completing acks=all produces). With
last_fetched_epoch (v12+) the leader first checks that the follower's log agrees with its
own: if the follower's last epoch ends earlier here, or is unknown, the answer is a
`diverging_epoch` (epoch, end offset) and no records, and the follower truncates (KIP-320;
docs/design/replication.md#leader-side-of-a-follower-fetch). A NOT_LEADER_OR_FOLLOWER or
FENCED_LEADER_EPOCH in a cluster carries the
current leader (v16+, KIP-951; server/cluster/leader_hints.py).

Fetch from the closest replica (KIP-392, a cluster): a consumer's Fetch v11+ carries client
metadata (its rack_id, `client.rack`), and such a fetch may read a follower, which serves
it up to its own high watermark (Kafka's FetchParams.fetchOnlyLeader: followers' and older
consumers' fetches stay leader-only). An offset past the follower's log end is
OFFSET_OUT_OF_RANGE, on which librdkafka and the Java consumer go back to the leader; one
between its high watermark and log end waits as at the leader's high watermark. On the
leader, with replica.selector.class rack-aware, a consumer whose rack has an in-sync
follower and not the leader is answered preferred_read_replica = that follower, no records,
at once (server/cluster/replica_selector.py); otherwise preferred_read_replica is -1.

Zero copy: a partition read of at least REGION_MIN_BYTES is not read into memory. The
handler pins the segment and puts a `FileRegion` in that `records` field; the codec
writes its length prefix and leaves it as a part of the response, which the server
sends with os.sendfile straight from the page cache (copies dominate a fetch's cost:
docs/design/performance.md#fetches-served-with-sendfile). Smaller reads are copied as before: a
pread and a copy cost less than the extra
syscalls. The regions of a returned body belong to the server, which releases them once
sent or dropped; until then (a pass that leads to a wait, an exception) `_Regions` does.
"""

from __future__ import annotations

import logging
import time

import trio

from storage import read_exact
from wire.errors import ErrorCode
from wire.legacy import UnsupportedDownConversion, down_convert
from wire.primitives import ZERO_UUID
from wire.registry import ApiKey

from server.modes import FETCH_HINT_CODES, FETCH_MIN_VERSION
from server.context import RequestContext
from server.security.acls import CLUSTER_NAME, AclOperation, ResourceType
from server.errors import KafkaError, error_code_for
from server.fetch_sessions import SESSION_ENTRY
from server.purgatory_timer import long_poll_deadline
from server.regions import FileRegion

API_KEY = ApiKey.FETCH
MAY_BLOCK = True

log = logging.getLogger("trafka.fetch")

_EMPTY = b""
_NONE = ErrorCode.NONE
# What Kafka's KafkaApis answers itself, before the read (FetchResponse.partitionResponse).
_REFUSED_BEFORE_READING = frozenset({ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, ErrorCode.UNKNOWN_TOPIC_ID,
                                     ErrorCode.TOPIC_AUTHORIZATION_FAILED})
REGION_MIN_BYTES = 64 * 1024
LAST_OLD_FORMAT_VERSION = 3  # v0-3 readers know magic 0/1 only (v4 brought magic 2, KIP-98)


class _Regions:
    """The regions pinned by the handler's current read pass, until the body that holds
    them is returned (then the server owns them) or dropped."""

    __slots__ = ("items",)

    def __init__(self) -> None:
        self.items: list[FileRegion] = []

    def add(self, region: FileRegion) -> None:
        self.items.append(region)

    def hand_over(self) -> None:
        """The body holding the regions is returned: the server releases them now."""
        self.items.clear()

    def release(self) -> None:
        for region in self.items:
            region.release()
        self.items.clear()


def _partition(index: int, code: ErrorCode, hw: int = -1, log_start: int = -1, records=_EMPTY,
               lso: int | None = None, aborted: list[dict] | None = None) -> dict:
    return {
        "partition_index": index,
        "error_code": code,
        "high_watermark": hw,
        "last_stable_offset": hw if lso is None else lso,
        "log_start_offset": log_start,
        "aborted_transactions": aborted,
        "preferred_read_replica": -1,
        "records": records,
    }


def _read_error(index: int, code: ErrorCode, hw: int, start: int, lso: int, replica_id: int) -> dict:
    """A partition whose read failed. A consumer gets Kafka's answer (ReplicaManager's
    failed LogReadResult): no high watermark, last stable offset or log start (-1). A
    follower gets them: Trafka's fetcher starts over at the leader's log start when its own
    log end fell below it (server/cluster/fetcher.py)."""
    if replica_id < 0:
        return _partition(index, code)
    return _partition(index, code, hw, start, lso=lso)


def _read(plog, offset: int, limit: int, zero_copy: bool, upto: int, min_one_batch: bool):
    """(records, size) for one partition: bytes, or a FileRegion when `zero_copy` allows.
    Only batches below `upto` (the high watermark) are read."""
    found = plog.read_pinned(offset, limit, max_offset=upto, min_one_batch=min_one_batch)
    if found is None:
        return _EMPTY, 0
    segment, position, length = found
    if zero_copy and length >= REGION_MIN_BYTES:
        return FileRegion(segment, position, length), length
    try:
        return read_exact(segment.fd, length, position), length
    finally:
        segment.unpin()


def _aborted(plog, offset: int, upto: int) -> list[dict]:
    return [{"producer_id": t.producer_id, "first_offset": t.first_offset}
            for t in plog.collect_aborted_txns(offset, upto)]


def _now_ms() -> int:
    return time.time_ns() // 1_000_000


def _diverging(partition, part: dict) -> dict | None:
    """A fetcher — a follower, or a consumer from v12, as Kafka's Partition.readRecords
    checks any last_fetched_epoch — whose last fetched epoch ends earlier here than where it
    fetches (or is unknown here) has a tail to cut: (epoch, end offset) it must truncate to."""
    last_epoch = part.get("last_fetched_epoch", -1)
    if last_epoch < 0:
        return None
    epoch, end = partition.end_offset_for_epoch(last_epoch)
    if epoch < 0 or epoch < last_epoch or end < part["fetch_offset"]:
        return {"epoch": epoch, "end_offset": end}
    return None


def _read_all(ctx: RequestContext, topics: list[tuple[str | None, object, list[dict]]], max_bytes: int,
              regions: _Regions | None = None, read_committed: bool = False, replica_id: int = -1,
              from_follower_ok: bool = False, select_rack: str | None = None, denied: frozenset = frozenset(),
              incremental: bool = False, served: list | None = None):
    """One pass over the request: (response topics, bytes of records, answer at once: an
    error, a diverging epoch or a preferred read replica).

    Limits (KIP-74): each partition reads at most partition_max_bytes and the whole
    response at most max_bytes; only the first partition that has data gets its first
    batch whole when that batch alone is larger. Reads stop at the high watermark.
    `from_follower_ok`: a consumer's Fetch v11+ in a cluster (may read a follower);
    `select_rack`: its rack, when this broker's replica selector is rack-aware;
    `incremental`: the partitions are a fetch session's (each part dict carries its cache
    entry): a caught-up one whose offsets are as last answered is left out at once, as the
    incremental answer would drop it (what keeps a session's idle partitions cheap);
    `served`: gets (partition, bytes) of each read, counted as BytesOut only for the pass that
    is answered (a long poll reads again after each wake-up)."""
    partition_for = ctx.broker.partition
    # KIP-73: a leader holds back out-of-sync followers of throttled partitions (cluster only).
    quota = ctx.broker.mode.leader_quota(replica_id)
    leader_only = not from_follower_ok
    by_id = ctx.api_version >= 13
    # v0-2 have a hard size limit (Kafka's FetchParams.hardMaxBytesLimit): a first batch
    # larger than the partition's limit is not sent whole. v0-3 answers are converted to an
    # old message format afterwards, from bytes (`_down_convert`), so they are never regions.
    min_one = ctx.api_version >= 3
    zero_copy = regions is not None and ctx.api_version > LAST_OLD_FORMAT_VERSION
    budget = max_bytes
    total = 0
    errors = False
    first_data = True
    out = []
    for name, topic_id, partitions in topics:
        results = []
        for part in partitions:
            index = part["partition"]
            if name in denied:
                results.append(_partition(index, ErrorCode.TOPIC_AUTHORIZATION_FAILED, aborted=[]))
                errors = True
                continue
            try:
                partition = partition_for(name, index, part.get("current_leader_epoch", -1), leader_only=leader_only)
            except KafkaError as exc:
                code = ErrorCode.UNKNOWN_TOPIC_ID if by_id and name is None else exc.code
                # Kafka refuses these before reading (an empty aborted list); a read that
                # fails answers null.
                results.append(_partition(index, code, aborted=[] if code in _REFUSED_BEFORE_READING else None))
                errors = True
                continue
            hw = partition.high_watermark
            lso = hw if partition.producers.first_unstable is None else partition.last_stable_offset
            upto = lso if read_committed else hw
            start = partition.log.log_start_offset
            offset = part["fetch_offset"]
            throttled = False
            if select_rack and partition.is_leader:
                preferred = ctx.broker.mode.preferred_read_replica(partition, select_rack, offset, _now_ms())
                if preferred >= 0:
                    entry = _partition(index, _NONE, hw, start, lso=lso)
                    entry["preferred_read_replica"] = preferred
                    results.append(entry)
                    errors = True  # answer at once: the consumer moves to that replica
                    continue
            if replica_id >= 0 and replica_id not in partition.followers:
                results.append(_partition(index, ErrorCode.NOT_LEADER_OR_FOLLOWER, hw, start, lso=lso))
                errors = True
                continue
            diverging = _diverging(partition, part)
            if diverging is not None:
                if diverging["epoch"] < 0 or offset < start:
                    results.append(_read_error(index, ErrorCode.OFFSET_OUT_OF_RANGE, hw, start, lso, replica_id))
                else:
                    entry = _partition(index, _NONE, hw, start, lso=lso)
                    entry["diverging_epoch"] = diverging
                    results.append(entry)
                errors = True  # answer at once: the fetcher must truncate first
                continue
            if replica_id >= 0:
                upto = partition.log_end_offset
                if offset <= upto:
                    partition.update_follower(replica_id, offset, _now_ms())
                    hw = partition.high_watermark
                if quota is not None and replica_id not in partition.isr and quota.is_throttled(partition):
                    if quota.exceeded():
                        upto = offset  # nothing for it this time: answered empty below
                    else:
                        throttled = True
            if offset == upto:
                # The common case of a caught-up consumer: nothing to read (a literal, not
                # _partition(): with 1000 partitions per fetch this loop is the cost).
                if incremental:
                    cached = part.get(SESSION_ENTRY)  # None: the session closed during a long poll
                    if cached is not None and cached.high_watermark == hw and cached.last_stable_offset == lso \
                            and cached.log_start_offset == start:
                        continue
                results.append({"partition_index": index, "error_code": _NONE, "high_watermark": hw,
                                "last_stable_offset": lso, "log_start_offset": start,
                                "aborted_transactions": [] if read_committed else None,
                                "preferred_read_replica": -1, "records": _EMPTY})
                continue
            if offset < start or offset > partition.log_end_offset:
                results.append(_read_error(index, ErrorCode.OFFSET_OUT_OF_RANGE, hw, start, lso, replica_id))
                errors = True
                continue
            records = _EMPTY
            aborted = None
            if budget > 0 and offset < upto:
                limit = min(part["partition_max_bytes"], budget)
                try:
                    records, size = _read(partition.log, offset, limit, zero_copy, upto, first_data and min_one)
                    if read_committed:
                        aborted = _aborted(partition.log, offset, upto)
                except Exception as exc:
                    code = error_code_for(exc)
                    log.warning("fetch %s-%d at %d: %s (%s)", name, index, offset, code.name, exc)
                    results.append(_read_error(index, code, hw, start, lso, replica_id))
                    errors = True
                    continue
                if size:
                    first_data = False
                    budget -= size
                    total += size
                    if served is not None:
                        served.append((partition, size))
                    if throttled:
                        quota.record(size)
            if type(records) is FileRegion:
                regions.add(records)
            if read_committed and aborted is None:
                aborted = []
            results.append(_partition(index, _NONE, hw, start, records, lso, aborted))
        entry = {"partitions": results}
        if by_id:
            entry["topic_id"] = topic_id
        else:
            entry["topic"] = name
        out.append(entry)
    return out, total, errors


def _down_convert(ctx: RequestContext, topics: list, responses: list[dict], from_follower: bool) -> None:
    """What Kafka 3.9 does to an answer before v4 (KafkaApis.maybeConvertFetchedData), in
    place: a partition of a topic with compression.type=zstd answers
    UNSUPPORTED_COMPRESSION_TYPE (such readers cannot know zstd, KIP-110); the records read
    are converted to magic 0 (v0-1) or 1 (v2-3) by `wire.legacy.down_convert`, unless the
    topic's message.downconversion.enable is false (UNSUPPORTED_VERSION); a zstd batch among
    the first ones converted answers UNSUPPORTED_COMPRESSION_TYPE. Kafka 3.9 converts every
    old fetch whatever was stored (its log format is magic 2), and so does this. Errors
    replace the whole partition answer, offsets -1 included, as Kafka's
    FetchResponse.partitionResponse. (Kafka 3.9 also refuses v4-9 on a zstd topic; Kafka 4
    serves them, and so does Trafka: those versions follow the current Kafka.)"""
    magic = 0 if ctx.api_version <= 1 else 1
    for (name, _id, parts), topic in zip(topics, responses):
        by_index = {p["partition"]: p for p in parts}
        for i, answer in enumerate(topic["partitions"]):
            partition = ctx.broker.partitions.get((name, answer["partition_index"]))
            if partition is None:
                continue  # not a local partition: Kafka has no log config to act on either
            config = partition.config
            code = _NONE
            if config.compression_type == "zstd":
                code = ErrorCode.UNSUPPORTED_COMPRESSION_TYPE
            elif not from_follower and config.extras.get("message.downconversion.enable", "true") == "false":
                code = ErrorCode.UNSUPPORTED_VERSION
            else:
                try:
                    answer["records"] = down_convert(answer["records"], magic,
                                                     by_index[answer["partition_index"]]["fetch_offset"])
                except UnsupportedDownConversion as exc:
                    log.info("fetch v%d of %s-%d from %s: %s", ctx.api_version, name,
                             answer["partition_index"], ctx.client_id, exc)
                    code = ErrorCode.UNSUPPORTED_COMPRESSION_TYPE
            if code != _NONE:
                topic["partitions"][i] = _partition(answer["partition_index"], code, lso=-1, records=None)


def _log_redirects(ctx: RequestContext, rack: str, topics: list, responses: list[dict]) -> None:
    """One line per answer that sends a consumer elsewhere: rare (a client asks the leader
    again only when its preferred replica fails or its metadata ages), and what an operator
    looks for when checking that consumers read in their own rack."""
    moved = [f"{name}-{p['partition_index']}->{p['preferred_read_replica']}"
             for (name, _id, _parts), topic in zip(topics, responses) for p in topic["partitions"]
             if p["preferred_read_replica"] >= 0]
    if moved:
        log.info("consumer %s in rack %s sent to its rack's replicas: %s", ctx.client_id, rack, " ".join(moved))


def _name_for_id(broker, topic_id) -> str | None:
    # in a cluster a broker with no replica still knows the name (NOT_LEADER_OR_FOLLOWER,
    # not UNKNOWN_TOPIC_ID, as Kafka resolves ids through its metadata cache)
    return broker.topic_name_for_id(topic_id) or broker.mode.topic_name_for_id(topic_id)


def _session_context(ctx: RequestContext, request: dict, session_id: int, epoch: int, replica_id: int):
    """The fetch session context (server/fetch_sessions.py) of a request that names a
    session or asks for one, and the topics to read as (name, topic id, partitions)."""
    by_id = ctx.api_version >= 13
    field = "topic_id" if by_id else "topic"
    requested = [(item.get(field, ZERO_UUID) if by_id else item["topic"], item["partitions"])
                 for item in request["topics"]]
    forgotten = [(item.get(field, ZERO_UUID) if by_id else item["topic"], item["partitions"])
                 for item in request.get("forgotten_topics_data") or ()]
    context = ctx.broker.fetch_sessions.new_context(ctx.api_version, session_id, epoch, replica_id, requested,
                                                    forgotten, ctx.client_id or "")
    if by_id:
        topics = [(_name_for_id(ctx.broker, key), key, parts) for key, parts in context.topics]
    else:
        topics = [(key, None, parts) for key, parts in context.topics]
    return context, topics


def _merged(items: list[dict], by_id: bool) -> list[tuple]:
    """The topics of a sessionless fetch as Kafka reads them, into a map keyed by
    topic-partition: a partition (or topic) named twice is read once, with its last entry,
    at its first place; a topic without partitions is not answered."""
    merged: dict = {}
    for item in items:
        key = item.get("topic_id", ZERO_UUID) if by_id else item["topic"]
        partitions = merged.setdefault(key, {})
        for part in item["partitions"]:
            partitions[part["partition"]] = part
    return [(key, list(partitions.values())) for key, partitions in merged.items() if partitions]


def _failed(ctx: RequestContext, request: dict, code: ErrorCode) -> dict:
    """Kafka's FetchRequest.getErrorResponse: the error at the top (v7+) and, below v13, for
    every requested partition (an empty aborted list, no records)."""
    topics = []
    if ctx.api_version < 13:
        topics = [{"topic": item.get("topic", ""), "topic_id": item.get("topic_id", ZERO_UUID),
                   "partitions": [_partition(part["partition"], code, aborted=[]) for part in item["partitions"]]}
                  for item in request["topics"]]
    return {"throttle_time_ms": 0, "error_code": code, "session_id": request.get("session_id", 0),
            "responses": topics}


async def handle(ctx: RequestContext, request: dict) -> dict:
    broker = ctx.broker
    if request.get("isolation_level", 0) not in (0, 1):
        # Kafka's IsolationLevel.forId throws, and the request fails as a whole.
        log.warning("fetch from %s: isolation level %d is unknown", ctx.client_id, request["isolation_level"])
        return _failed(ctx, request, ErrorCode.UNKNOWN_SERVER_ERROR)
    if ctx.api_version >= 15:
        replica_id = (request.get("replica_state") or {}).get("replica_id", -1)
    else:
        replica_id = request.get("replica_id", -1)
    session_id = request.get("session_id", 0)
    session_epoch = request.get("session_epoch", -1)
    session = None
    incremental = False
    if session_id != 0 or session_epoch != -1:
        session, topics = _session_context(ctx, request, session_id, session_epoch, replica_id)
        if session.error != _NONE:
            return {"throttle_time_ms": 0, "error_code": session.error, "session_id": 0, "responses": []}
        incremental = session.kind == "incremental"
    else:  # sessionless (librdkafka, aiokafka, followers): the request is the whole story
        topics = []
        for key, partitions in _merged(request["topics"], ctx.api_version >= 13):
            if ctx.api_version >= 13:
                topics.append((_name_for_id(broker, key), key, partitions))
            else:
                topics.append((key, None, partitions))
    max_bytes = request.get("max_bytes", 0x7FFFFFFF)
    min_bytes = request.get("min_bytes", 1)
    deadline = long_poll_deadline(request.get("max_wait_ms", 0))
    waiting_on = None  # built on the first wait: most fetches of a busy consumer do not wait
    regions = _Regions()
    read_committed = request.get("isolation_level", 0) == 1
    # KIP-392: Kafka gives a consumer's Fetch v11+ client metadata (its rack may be empty)
    from_follower_ok = replica_id < 0 and ctx.api_version >= 11 and broker.mode.follower_fetch
    denied: frozenset = frozenset()
    if broker.authorizer is not None:
        # Kafka: a follower's fetch needs CLUSTER_ACTION, a consumer's READ on each topic.
        if replica_id >= 0:
            if not ctx.authorize(AclOperation.CLUSTER_ACTION, ResourceType.CLUSTER, CLUSTER_NAME):
                denied = frozenset(name for name, _id, _parts in topics)
        else:
            denied = frozenset(name for name, _id, _parts in topics
                               if name is not None and not ctx.authorize(AclOperation.READ, ResourceType.TOPIC, name))
    select_rack = None
    if from_follower_ok and request.get("rack_id") and broker.mode.selects_replicas_by_rack():
        select_rack = request["rack_id"]
    # Kafka's BytesOutPerSec: what consumers are sent (followers are counted apart)
    served: list | None = [] if replica_id < 0 else None
    try:
        while True:
            regions.release()  # a pass that led to a wait pinned nothing we still need
            if served:
                served.clear()
            responses, total, errors = _read_all(ctx, topics, max_bytes, regions, read_committed, replica_id,
                                                 from_follower_ok, select_rack, denied, incremental, served)
            remaining = deadline - trio.current_time()
            if total >= min_bytes or errors or remaining <= 0 or broker.shutting_down:
                break
            if waiting_on is None:
                waiting_on = [broker.partitions[key] for key in
                              ((name, part["partition"]) for name, _id, parts in topics for part in parts)
                              if key in broker.partitions]
            if not waiting_on:
                break
            # A follower waits for the log end offset to move, not the high watermark: one
            # moved by the other followers' fetches has nothing for it.
            await broker.wait_for_data(waiting_on, remaining, appends_only=replica_id >= 0)
        if select_rack is not None and errors:
            _log_redirects(ctx, select_rack, topics, responses)
        if ctx.api_version <= LAST_OLD_FORMAT_VERSION:
            _down_convert(ctx, topics, responses, replica_id >= 0)
        error_code = _NONE
        answer_session = 0
        if session is not None:
            # a full fetch may create its session now; an incremental one keeps only the
            # partitions with news (every partition with records among them)
            error_code, answer_session, responses = session.finish(responses)
            if error_code != _NONE:
                regions.release()  # nothing read is sent
                served = None
        if served:
            for partition, size in served:
                partition.bytes_out += size
        regions.hand_over()  # the body holds them; the server sends and releases them
        answer = {"throttle_time_ms": 0, "error_code": error_code, "session_id": answer_session,
                  "responses": responses}
        if errors and ctx.api_version >= FETCH_MIN_VERSION:
            endpoints = broker.mode.leader_hints(responses, "partitions", FETCH_HINT_CODES,
                                                 lambda t: _name_for_id(broker, t["topic_id"]))
            if endpoints:
                answer["node_endpoints"] = endpoints
        return answer
    except BaseException:
        regions.release()
        raise
