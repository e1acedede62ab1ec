"""Fetch sessions (KIP-227): the broker's cache of incremental fetch sessions.

Why: a consumer of many partitions sends the same partition list in every Fetch and gets
every partition back, changed or not. With a session the broker remembers the list (and
what it last answered for each partition), so the client sends only what changed (an
incremental fetch: added or altered partitions, `forgotten_topics_data` for the removed
ones) and the broker answers only the partitions with news: records, a moved high
watermark / log start offset / last stable offset, a preferred read replica, a diverging
epoch or an error. Kafka's `core/.../server/FetchSession.scala` (FetchManager.newContext,
FetchSessionCacheShard, CachedPartition.maybeUpdateResponseData) is the model; this module
keeps its rules and names:

- request metadata (session_id, session_epoch): epoch INITIAL_EPOCH (0) or FINAL_EPOCH (-1)
  is a *full* fetch; a full fetch naming a session closes it first. FINAL_EPOCH makes the
  request sessionless (session_id 0 and epoch -1 is what librdkafka, aiokafka and our own
  followers send: that path is untouched); INITIAL_EPOCH asks for a new session, which the
  full response carries as its session_id (0 when the cache has no room). Any other epoch
  is *incremental*: an unknown id is FETCH_SESSION_ID_NOT_FOUND, a wrong epoch
  INVALID_FETCH_SESSION_EPOCH, a session that used topic ids (Fetch v13+) asked by a
  version without them or the reverse FETCH_SESSION_TOPIC_ID_ERROR; all three answer
  session_id 0 and no partitions. The next expected epoch is epoch + 1 (after
  2147483647 comes 1).
- the session is per broker, not per connection: a client that reconnects continues it.
- `max.incremental.fetch.session.cache.slots` sessions at most. When full, a new session
  evicts the least recently used one if it has been idle longer than
  `min.incremental.fetch.session.eviction.ms`; else the smallest (privileged, size, id) of
  the sessions it may evict, if that is not larger than its own (privileged, size, 0):
  privileged (follower) sessions are evictable only by other followers until they are
  older than the eviction time, consumer sessions by followers at once and by other
  consumers once older than it. Otherwise no session (session_id 0): the client keeps
  sending full fetches. No timer: like Kafka, an idle session goes only when its slot is
  wanted.

Record batches stay opaque: the cache keeps each partition's request fields (the decoded
partition dict of the request that added or last altered it) and three numbers of the last
answer; choosing what an incremental response lists looks at those and the records'
length only.
"""

from __future__ import annotations

import logging
import random
import time
from typing import Any, Hashable, Iterator

from wire.errors import ErrorCode

log = logging.getLogger("trafka.fetch_sessions")

INVALID_SESSION_ID = 0
INITIAL_EPOCH = 0
FINAL_EPOCH = -1
_INT32_MAX = 0x7FFFFFFF

# A partition's key in a session: (topic name, partition) for Fetch v7-12, (topic id,
# partition) for v13+ (a session uses one or the other for its whole life).
PartitionKey = tuple[Hashable, int]


def next_epoch(epoch: int) -> int:
    """Kafka's FetchMetadata.nextEpoch: the epoch the request after one at `epoch` carries."""
    if epoch < 0:
        return FINAL_EPOCH
    if epoch == _INT32_MAX:
        return 1
    return epoch + 1


def _monotonic_ms() -> int:
    return time.monotonic_ns() // 1_000_000


# The key under which a session's request partition dict points at its CachedPartition, so
# the fetch handler can skip an unchanged idle partition without a lookup.
SESSION_ENTRY = "_session_entry"


class CachedPartition:
    """One partition of a session: its request fields and what it was last answered."""

    __slots__ = ("req", "high_watermark", "last_stable_offset", "log_start_offset")

    def __init__(self, req: dict) -> None:
        self.req = req
        req[SESSION_ENTRY] = self
        self.high_watermark = -1
        self.last_stable_offset = -1
        self.log_start_offset = -1

    def must_respond(self, resp: dict) -> bool:
        """Kafka's maybeUpdateResponseData (updating): whether an incremental response lists
        this partition, remembering the answer's offsets when it does. Kafka compares the
        high watermark and log start offset; the last stable offset is compared too, so a
        read_committed consumer always hears when it moves."""
        respond = False
        records = resp["records"]
        if records is not None and len(records) > 0:
            respond = True
        hw = resp["high_watermark"]
        if hw != self.high_watermark:
            respond = True
            self.high_watermark = hw
        lso = resp["last_stable_offset"]
        if lso != self.last_stable_offset:
            respond = True
            self.last_stable_offset = lso
        start = resp["log_start_offset"]
        if start != self.log_start_offset:
            respond = True
            self.log_start_offset = start
        if resp["preferred_read_replica"] >= 0:
            respond = True
        if resp["error_code"] != ErrorCode.NONE:
            self.high_watermark = -1
            respond = True
        if resp.get("diverging_epoch") is not None:
            respond = True
        return respond


class FetchSession:
    """A session: its partitions in order (those just answered with records move to the
    end, so a partition that keeps getting data cannot starve the others of max_bytes)."""

    __slots__ = ("id", "privileged", "partitions", "uses_topic_ids", "creation_ms", "last_used_ms", "epoch",
                 "cached_size", "client_id", "incremental_fetches", "_plan")

    def __init__(self, session_id: int, privileged: bool, partitions: dict[PartitionKey, CachedPartition],
                 uses_topic_ids: bool, now: int, client_id: str) -> None:
        self.id = session_id
        self.privileged = privileged
        self.partitions = partitions
        self.uses_topic_ids = uses_topic_ids
        self.creation_ms = now
        self.last_used_ms = now
        self.epoch = next_epoch(INITIAL_EPOCH)
        self.cached_size = len(partitions)
        self.client_id = client_id
        self.incremental_fetches = 0
        self._plan = None  # read_plan() until the partitions or their order change

    def evictable_key(self) -> tuple[bool, int, int]:
        return (self.privileged, self.cached_size, self.id)

    def update(self, topics: list[tuple[Hashable, list[dict]]],
               forgotten: list[tuple[Hashable, list[int]]]) -> tuple[int, int, int]:
        """An incremental request's partitions (added, or their fields altered) and
        forgotten ones (removed): (added, updated, removed) counts."""
        added = updated = removed = 0
        parts = self.partitions
        if topics or forgotten:
            self._plan = None
        for key, partitions in topics:
            for part in partitions:
                cached = parts.get((key, part["partition"]))
                if cached is None:
                    parts[(key, part["partition"])] = CachedPartition(part)
                    added += 1
                else:
                    cached.req = part
                    part[SESSION_ENTRY] = cached
                    updated += 1
        for key, indexes in forgotten:
            for index in indexes:
                entry = parts.pop((key, index), None)
                if entry is not None:
                    entry.req.pop(SESSION_ENTRY, None)
                    removed += 1
        return added, updated, removed

    def read_plan(self) -> list[tuple[Hashable, list[dict]]]:
        """The partitions to read, grouped by topic in session order (consecutive runs of a
        topic, as Kafka's response groups them); kept while the session's partitions stay as they are (an idle consumer's case)."""
        if self._plan is not None:
            return self._plan
        plan: list[tuple[Hashable, list[dict]]] = []
        last = _MISSING
        current: list[dict] = []
        for (key, _index), entry in self.partitions.items():
            if key != last:
                current = []
                plan.append((key, current))
                last = key
            current.append(entry.req)
        self._plan = plan
        return plan


_MISSING = object()


class FetchContext:
    """What one Fetch does with sessions. `kind`: "sessionless", "full" (may create a
    session), "incremental" or "error" (`error` set; answered with no partitions).
    `topics` is what to read: the request's own (sessionless, full) or the session's."""

    __slots__ = ("kind", "error", "session", "topics", "request_epoch", "_cache", "_privileged",
                 "_uses_topic_ids", "_client_id")

    def __init__(self, kind: str, topics: list[tuple[Hashable, list[dict]]], *, error: ErrorCode = ErrorCode.NONE,
                 session: FetchSession | None = None, request_epoch: int = FINAL_EPOCH, cache: "FetchSessionCache | None" = None,
                 privileged: bool = False, uses_topic_ids: bool = False, client_id: str = "") -> None:
        self.kind = kind
        self.error = error
        self.session = session
        self.topics = topics
        self.request_epoch = request_epoch
        self._cache = cache
        self._privileged = privileged
        self._uses_topic_ids = uses_topic_ids
        self._client_id = client_id

    def finish(self, responses: list[dict]) -> tuple[ErrorCode, int, list[dict]]:
        """(error_code, session_id, responses) of the answer, from the response topics read
        for `topics` (same order). A full fetch creates its session here, from what it
        answered; an incremental one keeps only the partitions with news."""
        if self.kind == "full":
            return ErrorCode.NONE, self._cache.create(self.topics, responses, self._privileged,
                                                      self._uses_topic_ids, self._client_id), responses
        if self.kind == "incremental":
            session = self.session
            if session.epoch != next_epoch(self.request_epoch):
                # another request of this session came in while this one waited (Kafka: "possible
                # duplicate request"); its answer would confuse the client's view of the session
                log.info("fetch session %d of %s: expected epoch %d but the session is at %d (a duplicate "
                         "request?): INVALID_FETCH_SESSION_EPOCH", session.id, session.client_id,
                         next_epoch(self.request_epoch), session.epoch)
                return ErrorCode.INVALID_FETCH_SESSION_EPOCH, session.id, []
            return ErrorCode.NONE, session.id, self._select(session, responses)
        return ErrorCode.NONE, INVALID_SESSION_ID, responses

    def _select(self, session: FetchSession, responses: list[dict]) -> list[dict]:
        """The partitions with news. The handler already left out the caught-up partitions
        whose offsets are as last answered, so a response may hold fewer than were read."""
        parts = session.partitions
        moved: list[PartitionKey] = []
        out = []
        for (key, _parts), topic in zip(self.topics, responses):
            kept = []
            for resp in topic["partitions"]:
                entry = parts.get((key, resp["partition_index"]))
                if entry is None or entry.must_respond(resp):
                    kept.append(resp)
                    if len(resp["records"]):
                        moved.append((key, resp["partition_index"]))
            if kept:
                topic["partitions"] = kept
                out.append(topic)
        for pkey in moved:  # Kafka: partitions that got records go to the end of the session
            entry = parts.pop(pkey, None)
            if entry is not None:
                parts[pkey] = entry
        if moved:
            session._plan = None
        return out


class FetchSessionCache:
    """The broker's sessions (Kafka's FetchSessionCacheShard; one shard: one event loop)."""

    def __init__(self, max_entries: int, eviction_ms: int, clock=_monotonic_ms) -> None:
        self.max_entries = max(0, max_entries)
        self.eviction_ms = eviction_ms
        self.sessions: dict[int, FetchSession] = {}
        # least recently used first: a touch moves a session to the end
        self._last_used: dict[int, FetchSession] = {}
        self._clock = clock
        self._random = random.Random()
        self.created = 0
        self.incremental_fetches = 0
        self.evictions = 0
        self.refused = 0

    # ---- FetchManager.newContext ----------------------------------------------------
    def new_context(self, version: int, session_id: int, epoch: int, replica_id: int,
                    topics: list[tuple[Hashable, list[dict]]], forgotten: list[tuple[Hashable, list[int]]],
                    client_id: str = "") -> FetchContext:
        """The context of one Fetch from its session metadata (see the module docstring).
        `topics`/`forgotten`: the request's, keyed by topic name (v7-12) or id (v13+)."""
        uses_topic_ids = version >= 13
        if epoch in (INITIAL_EPOCH, FINAL_EPOCH):
            if session_id != INVALID_SESSION_ID:
                closed = self.remove(session_id)
                if closed is not None:
                    log.debug("fetch session %d of %s closed by a full fetch after %d incremental fetches",
                              closed.id, closed.client_id, closed.incremental_fetches)
            if epoch == FINAL_EPOCH:
                return FetchContext("sessionless", topics)
            return FetchContext("full", topics, cache=self, privileged=replica_id >= 0,
                                uses_topic_ids=uses_topic_ids, client_id=client_id)
        session = self.sessions.get(session_id)
        if session is None:
            log.info("fetch from %s: session %d not found (evicted, closed, or never given): "
                     "FETCH_SESSION_ID_NOT_FOUND", client_id, session_id)
            return FetchContext("error", [], error=ErrorCode.FETCH_SESSION_ID_NOT_FOUND)
        if session.epoch != epoch:
            log.info("fetch session %d of %s: expected epoch %d, got %d: INVALID_FETCH_SESSION_EPOCH",
                     session_id, client_id, session.epoch, epoch)
            return FetchContext("error", [], error=ErrorCode.INVALID_FETCH_SESSION_EPOCH)
        if session.uses_topic_ids != uses_topic_ids:
            log.info("fetch session %d of %s %s topic ids but Fetch v%d %s: FETCH_SESSION_TOPIC_ID_ERROR",
                     session_id, client_id, "uses" if session.uses_topic_ids else "does not use", version,
                     "has them" if uses_topic_ids else "has none")
            return FetchContext("error", [], error=ErrorCode.FETCH_SESSION_TOPIC_ID_ERROR)
        added, updated, removed = session.update(topics, forgotten)
        if not session.partitions:
            log.debug("fetch session %d of %s closed: no partitions left", session_id, client_id)
            self.remove(session_id)
            return FetchContext("sessionless", topics)
        self.touch(session, self._clock())
        session.epoch = next_epoch(session.epoch)
        session.incremental_fetches += 1
        self.incremental_fetches += 1
        return FetchContext("incremental", session.read_plan(), session=session, request_epoch=epoch)

    # ---- the cache --------------------------------------------------------------------
    def create(self, topics: list[tuple[Hashable, list[dict]]], responses: list[dict], privileged: bool,
               uses_topic_ids: bool, client_id: str) -> int:
        """maybeCreateSession: a new session of a full fetch's partitions, or
        INVALID_SESSION_ID when the cache is full and nothing may be evicted."""
        size = sum(len(parts) for _key, parts in topics)
        now = self._clock()
        if len(self.sessions) >= self.max_entries and not self._try_evict(privileged, size, now):
            self.refused += 1
            log.debug("no fetch session for %s (%d partitions): the cache is full", client_id, size)
            return INVALID_SESSION_ID
        partitions: dict[PartitionKey, CachedPartition] = {}
        for (key, parts), topic in zip(topics, responses):
            for part, resp in zip(parts, topic["partitions"]):
                entry = CachedPartition(part)
                entry.high_watermark = resp["high_watermark"] if resp["error_code"] == ErrorCode.NONE else -1
                entry.last_stable_offset = resp["last_stable_offset"]
                entry.log_start_offset = resp["log_start_offset"]
                partitions[(key, part["partition"])] = entry
        session_id = self._new_id()
        session = FetchSession(session_id, privileged, partitions, uses_topic_ids, now, client_id)
        self.sessions[session_id] = session
        self._last_used[session_id] = session
        self.created += 1
        log.debug("fetch session %d created for %s: %d partitions%s", session_id, client_id, len(partitions),
                  " (follower)" if privileged else "")
        return session_id

    def _new_id(self) -> int:
        while True:
            candidate = self._random.randint(1, _INT32_MAX)
            if candidate not in self.sessions:
                return candidate

    def _try_evict(self, privileged: bool, size: int, now: int) -> bool:
        """Kafka's tryEvict: the least recently used session if stale, else the smallest
        evictable one if the new session's key is not smaller."""
        oldest = next(iter(self._last_used.values()), None)
        if oldest is None:
            return False
        if now - oldest.last_used_ms > self.eviction_ms:
            self._evict(oldest, f"idle for {now - oldest.last_used_ms} ms")
            return True
        candidates = self._evictable(privileged, now)
        victim = min(candidates, key=FetchSession.evictable_key, default=None)
        if victim is None or (privileged, size, 0) < victim.evictable_key():
            return False
        self._evict(victim, f"{victim.cached_size} partitions, for a new session of {size}")
        return True

    def _evictable(self, privileged: bool, now: int) -> Iterator[FetchSession]:
        """Kafka's evictableByPrivileged / evictableByAll, as of each session's last touch."""
        for session in self.sessions.values():
            old = session.last_used_ms - session.creation_ms > self.eviction_ms
            if old or (privileged and not session.privileged):
                yield session

    def _evict(self, session: FetchSession, why: str) -> None:
        self.remove(session.id)
        self.evictions += 1
        log.info("fetch session %d of %s evicted (%s) after %d incremental fetches", session.id, session.client_id,
                 why, session.incremental_fetches)

    def remove(self, session_id: int) -> FetchSession | None:
        session = self.sessions.pop(session_id, None)
        if session is not None:
            self._last_used.pop(session_id, None)
            for entry in session.partitions.values():  # part dict <-> entry: freed now, not by the GC
                entry.req.pop(SESSION_ENTRY, None)
        return session

    def touch(self, session: FetchSession, now: int) -> None:
        session.last_used_ms = now
        session.cached_size = len(session.partitions)
        last_used = self._last_used
        last_used.pop(session.id, None)
        last_used[session.id] = session

    def stats(self) -> dict[str, Any]:
        """Counters for the log line at shutdown and for tests."""
        return {"sessions": len(self.sessions), "created": self.created,
                "incremental_fetches": self.incremental_fetches, "evictions": self.evictions,
                "refused": self.refused}
