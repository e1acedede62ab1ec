"""The group coordinator: the classic consumer-group protocol and committed offsets.

How this works
--------------
Every group lives in memory as a `Group` (server/groups/group.py) in one of five states:
Empty, PreparingRebalance, CompletingRebalance, Stable, Dead. The rules are Apache Kafka's
GroupCoordinator's, decision for decision, because the clients are written against them:

- JoinGroup. A dynamic member's first join (v4+, empty member id) is answered at once with
  MEMBER_ID_REQUIRED and a fresh id (KIP-394); the id is "pending" until it joins with it,
  or for a session timeout. A join that changes the group (new member, new metadata, the
  leader rejoining) moves it to PreparingRebalance. Joins then *wait*: the phase ends when
  every member has rejoined and no pending id is outstanding, or when the rebalance timeout
  (the largest of the members') passes — members that did not rejoin are then removed.
  The end of the phase bumps the generation, picks the protocol every member supports that
  most members prefer, and answers every waiting join; the leader's answer carries all
  members' metadata. The group is then CompletingRebalance (or Empty if nobody is left).
  An Empty group's first rebalance waits group.initial.rebalance.delay.ms, extended while
  new members keep arriving, up to the rebalance timeout (KIP-134).
- SyncGroup. Followers wait; the leader's assignment is written to __consumer_offsets,
  handed to every waiting member, and the group becomes Stable. A sync in Stable gets the
  member's current assignment at once. Members that got a join answer but do not sync
  within the rebalance timeout are removed (Kafka 3.2's pending-sync timeout), so a dead
  leader cannot wedge the group.
- Heartbeat keeps a member's session alive and tells it about a rebalance
  (REBALANCE_IN_PROGRESS), a stale generation (ILLEGAL_GENERATION), that it was removed
  (UNKNOWN_MEMBER_ID), or that its static instance id was taken over (FENCED_INSTANCE_ID).
  A member silent for session.timeout.ms is removed and the group rebalances; a member
  blocked in JoinGroup or SyncGroup is not silent.
- LeaveGroup removes members at once (by member id, or by group.instance.id in v3+), so the
  rebalance starts without waiting for a timeout.
- Static membership (KIP-345): a join with an empty member id and a known instance id
  replaces the old member under a new id, keeps its assignment, fences the old id, and —
  if the group is Stable and the chosen protocol would not change — triggers no rebalance:
  the member syncs into the current generation and gets its assignment back. Static
  members that miss a rebalance stay in the group until their session times out.
- Offsets. OffsetCommit checks membership and generation (simple commits with generation
  -1 from consumers outside any group, as kcat and Spark send them, are accepted for an
  Empty group), appends the offsets to __consumer_offsets and only then answers and
  updates memory. OffsetFetch answers from memory. Offsets of a group that has been Empty
  for offsets.retention.minutes (or of a simple group, per commit time) are removed with
  tombstones, and an Empty group with no offsets left is deleted.
- Transactional offsets (TxnOffsetCommit, exactly-once consume-transform-produce). The
  producer's offsets are checked like a commit (v3+ carry the consumer's member id and
  generation, KIP-447; a group nobody joined is created Empty) and appended as one
  transactional batch under the producer's id and epoch. They are *pending*, per producer:
  OffsetFetch does not return them, and with require_stable answers UNSTABLE_OFFSET_COMMIT
  for their partitions. When the transaction coordinator has written the producer's COMMIT
  marker to the offsets partition it calls `complete_txn`: the offsets become committed
  unless a plain commit written after them already replaced them (each offset remembers
  its position in the log, Kafka's ordering rule); an ABORT drops them. Retention keeps
  an offset a transaction is about to replace and a group with an open transaction;
  OffsetDelete, DeleteGroups and topic deletion drop pending offsets with their tombstones.

Timers are trio deadlines in one heap (`_Timers`) served by `run()`: session expiry,
pending-member expiry, the end of a join phase, the pending-sync timeout, retention. Tests
run them on trio's MockClock. Wall-clock time (commit timestamps, the time a group became
Empty) comes from `self.now_ms`, which tests may replace.

Durability: every change clients rely on is appended to __consumer_offsets (records in
Kafka's formats, server/groups/records.py) before it is acknowledged; `load()` replays the
topic at start-up, so offsets and Stable groups (members, generation, assignments) come
back after a restart and members that keep heartbeating carry on without a rebalance.

Placement (a cluster). A group belongs to the __consumer_offsets partition its id hashes
to, and this broker coordinates it only while it leads that partition. `load_partition`
replays one partition when leadership arrives (in a worker thread, under the partition's
write lock) and `unload_partition` drops its groups when leadership leaves: they become
Dead, whoever waits in JoinGroup/SyncGroup is answered NOT_COORDINATOR, their timers stop.
Every entry point asks `group_status` first: NOT_COORDINATOR for a partition led
elsewhere, COORDINATOR_LOAD_IN_PROGRESS while it loads (SyncGroup then answers
REBALANCE_IN_PROGRESS and Heartbeat NONE, as Kafka does for clients that predate the
code). A single broker loads every partition at start-up and owns them all.
Replay resolves transactional offsets by the markers in the log; those whose marker is
not written yet stay pending until the transaction coordinator completes them.
Writes to one offsets partition are serialized by a lock held across the append and the
in-memory update, so memory and log agree on order.

KIP-848 consumer groups (group.protocol=consumer, ConsumerGroupHeartbeat) live in the same
`groups` map, log, locks and timers, driven by `self.consumer`
(server/groups/consumer/coordinator.py): a group id is one type at a time, a JoinGroup for
a consumer group with members answers INCONSISTENT_GROUP_PROTOCOL, and an empty one of
either type may change type. The offsets of both kinds are server/groups/offsets.py's.

Not implemented: plain commits in flight are not reported as unstable to require_stable
fetches (Kafka's pendingOffsetCommits); only transactional ones are.
"""

from __future__ import annotations

import heapq
import itertools
import logging
import math
import uuid
from collections.abc import AsyncIterator, Hashable
from contextlib import asynccontextmanager
from dataclasses import dataclass

import trio

from wire.errors import ErrorCode
from wire.records import Record

from server.coordinator_log import CoordinatorLog, ReplayCounts, append_error, wall_ms
from server.errors import error_code_for
from server.groups import records as rec
from server.groups.consumer import records as crec
from server.groups.consumer.coordinator import ConsumerGroupCoordinator
from server.groups.consumer.group import ConsumerGroup, is_consumer_group
from server.groups.group import (
    CommittedOffset,
    Group,
    GroupState,
    JoinResult,
    Member,
    Reply,
    SyncResult,
)
from server.groups.offsets import OffsetReplay, OffsetStore

log = logging.getLogger("trafka.groups")

OFFSETS_TOPIC = "__consumer_offsets"
# Kafka's offsets topic uses 100 MiB segments (offsets.topic.segment.bytes).
OFFSETS_TOPIC_CONFIGS = {"cleanup.policy": "compact", "segment.bytes": "104857600"}

S = GroupState
E = ErrorCode


class _Timers:
    """Deadlines keyed by what they guard. Setting a key again moves its deadline; the
    heap keeps stale entries until they surface and are skipped."""

    def __init__(self) -> None:
        self._due: dict[Hashable, float] = {}
        self._heap: list[tuple[float, int, Hashable]] = []
        self._seq = itertools.count()
        self.wakeup = trio.Event()
        self.sleeping_until = math.inf

    def set(self, key: Hashable, deadline: float) -> None:
        self._due[key] = deadline
        heapq.heappush(self._heap, (deadline, next(self._seq), key))
        if deadline < self.sleeping_until:
            self.wakeup.set()

    def due(self, key: Hashable) -> float | None:
        return self._due.get(key)

    def cancel(self, key: Hashable) -> None:
        self._due.pop(key, None)

    def cancel_group(self, group_id: str) -> None:
        """Every deadline of one group (keys are (kind, group id, ...))."""
        for key in [k for k in self._due if isinstance(k, tuple) and len(k) > 1 and k[1] == group_id]:
            del self._due[key]

    def next_deadline(self) -> float | None:
        heap = self._heap
        while heap:
            deadline, _, key = heap[0]
            if self._due.get(key) == deadline:
                return deadline
            heapq.heappop(heap)
        return None

    def pop_due(self, now: float) -> list[Hashable]:
        out = []
        heap = self._heap
        while heap and heap[0][0] <= now:
            deadline, _, key = heapq.heappop(heap)
            if self._due.get(key) == deadline:
                del self._due[key]
                out.append(key)
        return out

    def __len__(self) -> int:
        return len(self._due)


@dataclass(slots=True)
class _Join:
    """What a JoinGroup asks for, passed along the join paths."""

    client_id: str
    client_host: str
    session_timeout_ms: int
    rebalance_timeout_ms: int
    protocol_type: str
    protocols: list[tuple[str, bytes]]
    skip_assignment_ok: bool  # v9+ (KIP-814): a returning static leader can be told to skip


class _Loader(OffsetReplay):
    """Replay of __consumer_offsets, in log order: offsets (`OffsetReplay`) and the
    classic groups' metadata records."""

    def __init__(self) -> None:
        super().__init__()
        self.groups: dict[str, rec.GroupValue] = {}
        # KIP-848 consumer groups, rebuilt record by record as the live path applies them
        self.consumer_groups: dict[str, ConsumerGroup] = {}

    def on_group_record(self, key, record: Record) -> None:
        if isinstance(key, crec.ConsumerKey):
            group = self.consumer_groups.get(key.group)
            if group is None:
                if record.value is None:
                    return
                group = self.consumer_groups[key.group] = ConsumerGroup(key.group, -1)
            group.apply(key, record.value)
            if key.kind == crec.METADATA and record.value is None:
                del self.consumer_groups[key.group]  # the group was deleted
            return
        if record.value is None:
            self.groups.pop(key.group, None)
        else:
            self.groups[key.group] = rec.decode_group_value(record.value)


class GroupCoordinator(OffsetStore):
    """The groups whose __consumer_offsets partition this broker leads (all of them on a
    single broker)."""

    def __init__(self, broker) -> None:
        self.broker = broker
        cfg = broker.config
        self.min_session_ms = cfg.get("group.min.session.timeout.ms")
        self.max_session_ms = cfg.get("group.max.session.timeout.ms")
        self.initial_delay_ms = cfg.get("group.initial.rebalance.delay.ms")
        self.max_group_size = cfg.get("group.max.size")
        self.retention_ms = cfg.get("offsets.retention.minutes") * 60_000
        self.retention_check_ms = max(cfg.get("offsets.retention.check.interval.ms"), 1)
        self.log = CoordinatorLog(broker, OFFSETS_TOPIC, cfg.get("offsets.topic.num.partitions"), OFFSETS_TOPIC_CONFIGS)
        self.log.now_ms = lambda: self.now_ms()
        self.groups: dict[str, Group] = {}
        self.now_ms = wall_ms
        self.loaded = False
        self._timers = _Timers()
        self._nursery: trio.Nursery | None = None
        self._members_to_arm: list[tuple[Group, Member]] = []
        # producer id -> groups holding its pending transactional offsets (Kafka's
        # openGroupsForProducer), so a transaction marker finds them without a scan
        self._txn_groups: dict[int, set[str]] = {}
        # transaction markers written to a partition while it loads: applied after the load
        self._deferred_txn: dict[int, list[tuple[int, bool]]] = {}
        # KIP-848 groups (group.protocol=consumer) share `groups`, the log, locks and timers
        self.consumer = ConsumerGroupCoordinator(self)

    # ------------------------------------------------------------------ lifecycle
    @property
    def partitions(self) -> int:
        return self.log.partitions

    def start_clustered(self) -> None:
        """In a cluster: nothing is loaded at start; `load_partition` runs for each partition
        of the internal topic this broker comes to lead (LeaderAndIsr)."""
        self.log.start_clustered()
        self.loaded = True

    def load(self) -> None:
        """Blocking, at start-up on a single broker: create __consumer_offsets if missing and
        load every partition of it (groups, committed offsets, pending transactional
        offsets), at each partition's leader epoch."""
        self.log.ensure_topic()
        counts = ReplayCounts()
        for partition in range(self.log.partitions):
            load_id = self.log.begin_load(partition, self.log.leader_epoch(partition))
            if load_id is None:
                continue
            try:
                loader = self._replay_partition(partition, counts)
            except BaseException:
                self.log.abandon_load(partition, load_id)
                raise
            if self.log.finish_load(partition, load_id):
                self._install(partition, loader)
        self.loaded = True
        log.info("loaded %d groups (%d with members), %d committed offsets and %d pending transactional offsets "
                 "from %d records of %s%s",
                 len(self.groups), sum(1 for g in self.groups.values() if g.members),
                 sum(len(g.offsets) for g in self.groups.values()),
                 sum(len(p) for g in self.groups.values() for p in g.pending_txn_offsets.values()),
                 counts.records, OFFSETS_TOPIC,
                 f" ({counts.skipped} unreadable records skipped)" if counts.skipped else "")

    async def load_partition(self, partition: int, epoch: int) -> None:
        """This broker now leads __consumer_offsets-`partition` at leader epoch `epoch`:
        replay it (in a worker thread: disk I/O) and coordinate its groups. Until the
        replay is done its groups' requests get COORDINATOR_LOAD_IN_PROGRESS. A load at an
        epoch older than the newest seen for the partition is skipped, as is one for a
        partition already owned or loading. Holding the partition's write lock keeps
        writes that were waiting for it behind the load."""
        load_id = self.log.begin_load(partition, epoch)
        if load_id is None:
            return
        try:
            async with self._lock(partition):
                if not self.log.load_current(partition, load_id):
                    return
                counts = ReplayCounts()
                loader = await trio.to_thread.run_sync(self._replay_partition, partition, counts)
                if not self.log.finish_load(partition, load_id):
                    log.info("%s-%d: unloaded while loading; replayed state dropped", OFFSETS_TOPIC, partition)
                    return
                loaded = self._install(partition, loader)
        except Exception:
            self.log.abandon_load(partition, load_id)
            log.exception("%s-%d: loading at epoch %d failed; not coordinating its groups", OFFSETS_TOPIC,
                          partition, epoch)
            return
        except BaseException:
            self.log.abandon_load(partition, load_id)
            raise
        log.info("%s-%d: loaded %d groups from %d records at coordinator epoch %d%s", OFFSETS_TOPIC, partition,
                 len(loaded), counts.records, epoch,
                 f" ({counts.skipped} unreadable records skipped)" if counts.skipped else "")

    def unload_partition(self, partition: int, epoch: int | None) -> None:
        """__consumer_offsets-`partition` is led elsewhere now (or deleted: epoch None): its
        groups become Dead and leave memory, members waiting in JoinGroup or SyncGroup are
        answered NOT_COORDINATOR (they find the new coordinator), their timers stop. An
        unload at an epoch older than the newest seen is skipped."""
        if not self.log.begin_unload(partition, epoch):
            return
        self._deferred_txn.pop(partition, None)
        now = self.now_ms()
        gone = [g for gid, g in self.groups.items() if self.partition_for(gid) == partition]
        for group in gone:
            self._answer_waiting(group, E.NOT_COORDINATOR)
            group.transition(S.DEAD, now)
            del self.groups[group.group_id]
            self._timers.cancel_group(group.group_id)
            for producer_id in group.pending_txn_offsets:
                ids = self._txn_groups.get(producer_id)
                if ids is not None:
                    ids.discard(group.group_id)
                    if not ids:
                        del self._txn_groups[producer_id]
        if self._members_to_arm:
            self._members_to_arm = [(g, m) for g, m in self._members_to_arm if g not in gone]
        log.info("%s-%d: unloaded %d groups (coordinator epoch %s)", OFFSETS_TOPIC, partition, len(gone),
                 "-" if epoch is None else epoch)

    def owns(self, partition: int) -> bool:
        return self.log.owns(partition)

    def group_status(self, group_id: str) -> ErrorCode:
        """What a request for `group_id` is answered before anything else: NONE when this
        broker coordinates the group and has loaded it, NOT_COORDINATOR when its offsets
        partition is led elsewhere, COORDINATOR_LOAD_IN_PROGRESS while it loads."""
        return self.log.status(self.partition_for(group_id))

    def _replay_partition(self, partition: int, counts: ReplayCounts) -> _Loader:
        """Blocking: the replayed state of one offsets partition."""
        loader = _Loader()
        self.log.replay_partition(partition, loader.on_record, loader.on_marker, counts)
        return loader

    def _install(self, partition: int, loader: _Loader) -> list[Group]:
        """Put the groups replayed from one partition in memory (the partition is owned now)."""
        now = self.now_ms()
        pending_by_group: dict[str, dict[int, dict[tuple[str, int], CommittedOffset]]] = {}
        for (_partition, producer_id), pending in loader.pending.items():
            for (group_id, tp), committed in pending.items():
                pending_by_group.setdefault(group_id, {}).setdefault(producer_id, {})[tp] = committed
        offsets = loader.offsets
        ids = ({g for g, per_group in offsets.items() if per_group} | set(loader.groups) | set(pending_by_group)
               | set(loader.consumer_groups))
        installed = []
        to_arm: list[tuple[Group, Member]] = []
        consumer_groups = []
        for group_id in ids:
            consumer_group = loader.consumer_groups.get(group_id)
            if consumer_group is not None:
                group = consumer_group
                group.state_timestamp = now
                consumer_groups.append(group)
            else:
                group = Group(group_id, now)
            value = loader.groups.get(group_id)
            if value is not None and consumer_group is None:
                to_arm.extend((group, m) for m in self._restore_group(group, value))
            group.offsets.update(offsets.get(group_id, {}))
            for producer_id, pending in pending_by_group.get(group_id, {}).items():
                group.pending_txn_offsets[producer_id] = pending
                self._txn_groups.setdefault(producer_id, set()).add(group_id)
            self.groups[group_id] = group
            installed.append(group)
        if self._nursery is None:
            self._members_to_arm.extend(to_arm)  # `run` arms them: no trio clock before it
        else:
            deadline_base = trio.current_time()
            for group, member in to_arm:
                member.expires_at = deadline_base + member.session_timeout_ms / 1000
                self._arm_session(group, member)
        self.consumer.arm_loaded(consumer_groups)
        for producer_id, commit in self._deferred_txn.pop(partition, []):
            self.complete_txn(partition, producer_id, commit)
        return installed

    def _restore_group(self, group: Group, value: rec.GroupValue) -> list[Member]:
        group.protocol_type = value.protocol_type or None
        group.generation_id = value.generation
        group.protocol_name = value.protocol
        if value.current_state_timestamp >= 0:
            group.state_timestamp = value.current_state_timestamp
        for m in value.members:
            member = Member(m.member_id, m.group_instance_id, m.client_id, m.client_host, m.session_timeout,
                            m.rebalance_timeout, value.protocol_type, [(value.protocol or "", m.subscription)],
                            m.assignment, is_new=False)
            group.members[m.member_id] = member
            if m.group_instance_id is not None:
                group.static_members[m.group_instance_id] = m.member_id
        group.leader_id = value.leader if value.leader in group.members else next(iter(group.members), None)
        # A group stored with members was Stable (it is stored when its assignment is).
        group.state = S.STABLE if group.members else S.EMPTY
        return list(group.members.values())

    async def run(self, task_status=trio.TASK_STATUS_IGNORED) -> None:
        """The group timers: sessions, join phases, pending syncs, offsets retention."""
        async with trio.open_nursery() as nursery:
            self._nursery = nursery
            now = trio.current_time()
            for group, member in self._members_to_arm:
                member.expires_at = now + member.session_timeout_ms / 1000
                self._arm_session(group, member)
            self._members_to_arm.clear()
            self.consumer.start()
            self._timers.set(("retention",), now + self.retention_check_ms / 1000)
            task_status.started()
            try:
                await self._timer_loop()
            finally:
                self._nursery = None

    async def _timer_loop(self) -> None:
        timers = self._timers
        while True:
            now = trio.current_time()
            for key in timers.pop_due(now):
                try:
                    self._fire(key, now)
                except Exception:
                    log.exception("group timer %s failed", key)
            deadline = timers.next_deadline()
            timers.wakeup = trio.Event()
            timers.sleeping_until = math.inf if deadline is None else deadline
            with trio.move_on_at(timers.sleeping_until):
                await timers.wakeup.wait()
            timers.sleeping_until = math.inf

    def close(self) -> None:
        """Blocking, at shutdown: answer whoever still waits so no handler hangs."""
        for group in self.groups.values():
            self._answer_waiting(group, E.NOT_COORDINATOR)

    @staticmethod
    def _answer_waiting(group: Group, error: ErrorCode) -> None:
        if is_consumer_group(group):
            return  # its members do not wait in a request
        for member in group.members.values():
            member.answer_join(JoinResult(error, member.member_id))
            member.answer_sync(SyncResult(error))

    def statistics(self) -> dict[str, int]:
        out: dict[str, int] = {"groups": len(self.groups), "timers": len(self._timers)}
        for group in self.groups.values():
            out[str(group.state)] = out.get(str(group.state), 0) + 1
        out["members"] = sum(len(g.members) for g in self.groups.values())
        out["offsets"] = sum(len(g.offsets) for g in self.groups.values())
        out["pending_txn_offsets"] = sum(len(p) for g in self.groups.values() for p in g.pending_txn_offsets.values())
        return out

    def _spawn(self, fn, *args) -> None:
        if self._nursery is None:
            log.warning("group coordinator not running; dropped background task %s", getattr(fn, "__name__", fn))
            return
        self._nursery.start_soon(fn, *args)

    # ------------------------------------------------------------------ timers
    def _fire(self, key: tuple, now: float) -> None:
        kind = key[0]
        if kind == "retention":
            self._timers.set(("retention",), now + self.retention_check_ms / 1000)
            self._spawn(self.expire_offsets)
            return
        if kind in ("cg-session", "cg-rebalance"):
            self.consumer.on_timer(key)
            return
        group = self.groups.get(key[1])
        if group is None or is_consumer_group(group):
            return
        if kind == "session":
            member = group.members.get(key[2])
            if member is not None:
                self._check_session(group, member, now)
        elif kind == "pending":
            if group.pending_members.pop(key[2], None) is not None:
                log.info("group %s: pending member %s never joined; forgetting its id", group.group_id, key[2])
                if group.is_(S.PREPARING_REBALANCE):
                    self._try_complete_join(group)
        elif kind == "join":
            self._on_join_deadline(group)
        elif kind == "sync":
            self._on_sync_deadline(group, key[2])

    def _arm_session(self, group: Group, member: Member) -> None:
        key = ("session", group.group_id, member.member_id)
        due = self._timers.due(key)
        if due is None or due > member.expires_at:
            self._timers.set(key, member.expires_at)

    def _touch(self, group: Group, member: Member) -> None:
        """A sign of life: the session restarts now."""
        member.expires_at = trio.current_time() + member.session_timeout_ms / 1000
        self._arm_session(group, member)

    def _check_session(self, group: Group, member: Member, now: float) -> None:
        key = ("session", group.group_id, member.member_id)
        if member.awaiting_join or member.awaiting_sync:
            # Blocked in a JoinGroup/SyncGroup is alive; the join/sync phase has its own timeout.
            member.expires_at = now + member.session_timeout_ms / 1000
            self._timers.set(key, member.expires_at)
        elif member.expires_at > now:
            self._timers.set(key, member.expires_at)
        else:
            self._remove_member_and_update(
                group, member, f"member {member.member_id} timed out after {member.session_timeout_ms} ms without a heartbeat")

    # ------------------------------------------------------------------ rebalancing
    def _new_group(self, group_id: str) -> Group:
        group = Group(group_id, self.now_ms())
        self.groups[group_id] = group
        return group

    def _maybe_prepare_rebalance(self, group: Group, reason: str) -> None:
        if group.is_(S.STABLE, S.COMPLETING_REBALANCE, S.EMPTY):
            self._prepare_rebalance(group, reason)

    def _prepare_rebalance(self, group: Group, reason: str) -> None:
        if group.is_(S.COMPLETING_REBALANCE):
            self._reset_assignments(group, E.REBALANCE_IN_PROGRESS)
        was_empty = group.is_(S.EMPTY)
        group.transition(S.PREPARING_REBALANCE, self.now_ms())
        self._timers.cancel(("sync", group.group_id, group.generation_id))
        rebalance_ms = group.rebalance_timeout_ms()
        now = trio.current_time()
        if was_empty and self.initial_delay_ms > 0:
            delay = min(self.initial_delay_ms, rebalance_ms)
            group.initial_delay_left_ms = max(rebalance_ms - delay, 0)
            group.in_initial_delay = True
            group.new_member_added = False
            group.join_deadline = now + delay / 1000
        else:
            group.in_initial_delay = False
            group.join_deadline = now + rebalance_ms / 1000
        self._timers.set(("join", group.group_id), group.join_deadline)
        log.info("group %s: preparing rebalance from generation %d (%s)", group.group_id, group.generation_id, reason)
        self._try_complete_join(group)

    def _try_complete_join(self, group: Group) -> None:
        if group.is_(S.PREPARING_REBALANCE) and not group.in_initial_delay and group.all_joined():
            self._complete_join(group)

    def _on_join_deadline(self, group: Group) -> None:
        if not group.is_(S.PREPARING_REBALANCE):
            return
        if group.in_initial_delay:
            if group.new_member_added and group.initial_delay_left_ms > 0:
                # KIP-134: members are still arriving; wait another delay, within the budget.
                group.new_member_added = False
                delay = min(self.initial_delay_ms, group.initial_delay_left_ms)
                group.initial_delay_left_ms -= delay
                group.join_deadline = trio.current_time() + delay / 1000
                self._timers.set(("join", group.group_id), group.join_deadline)
                return
            group.in_initial_delay = False
        self._complete_join(group)

    def _complete_join(self, group: Group) -> None:
        self._timers.cancel(("join", group.group_id))
        group.join_deadline = None
        group.in_initial_delay = False
        for member in group.not_yet_rejoined():
            if not member.is_static:
                log.info("group %s: removing member %s, which did not rejoin within the rebalance timeout",
                         group.group_id, member.member_id)
                self._remove_member(group, member)
        if group.members and not group.elect_joined_leader():
            # Only static members that have not rejoined are left: give them another
            # rebalance timeout (their sessions expire them if they never come back).
            log.info("group %s: no member rejoined; waiting another rebalance timeout", group.group_id)
            group.join_deadline = trio.current_time() + group.rebalance_timeout_ms() / 1000
            self._timers.set(("join", group.group_id), group.join_deadline)
            return
        group.generation_id += 1
        now_ms = self.now_ms()
        if not group.members:
            group.protocol_name = None
            group.transition(S.EMPTY, now_ms)
            log.info("group %s: generation %d is empty", group.group_id, group.generation_id)
            self._spawn(self._store_group_quietly, group)
            return
        group.protocol_name = group.select_protocol()
        group.transition(S.COMPLETING_REBALANCE, now_ms)
        log.info("group %s: generation %d with %d members, protocol %s, leader %s", group.group_id,
                 group.generation_id, len(group.members), group.protocol_name, group.leader_id)
        now = trio.current_time()
        leader_view = group.member_metadata()
        for member in group.members.values():
            if member.awaiting_join:
                member.answer_join(JoinResult(
                    E.NONE, member.member_id, group.generation_id, group.protocol_type, group.protocol_name,
                    group.leader_id or "", False, leader_view if group.is_leader(member.member_id) else []))
                member.is_new = False
                group.pending_sync.add(member.member_id)
            member.expires_at = now + member.session_timeout_ms / 1000
            self._arm_session(group, member)
        group.sync_deadline = now + group.rebalance_timeout_ms() / 1000
        self._timers.set(("sync", group.group_id, group.generation_id), group.sync_deadline)

    def _on_sync_deadline(self, group: Group, generation: int) -> None:
        if generation != group.generation_id or not group.is_(S.COMPLETING_REBALANCE, S.STABLE):
            return
        if not group.pending_sync:
            return
        late = sorted(group.pending_sync)
        log.info("group %s: removing members that did not sync generation %d in time: %s",
                 group.group_id, generation, ", ".join(late))
        for member_id in late:
            member = group.members.get(member_id)
            if member is not None:
                self._remove_member(group, member)
        group.pending_sync.clear()
        self._prepare_rebalance(group, "members did not send SyncGroup within the rebalance timeout")

    def _reset_assignments(self, group: Group, error: ErrorCode) -> None:
        for member in group.members.values():
            member.assignment = b""
            member.answer_sync(SyncResult(error))

    def _remove_member(self, group: Group, member: Member) -> None:
        member.answer_join(JoinResult(E.UNKNOWN_MEMBER_ID, member.member_id))
        member.answer_sync(SyncResult(E.UNKNOWN_MEMBER_ID))
        group.remove(member.member_id)
        self._timers.cancel(("session", group.group_id, member.member_id))

    def _remove_member_and_update(self, group: Group, member: Member, reason: str) -> None:
        self._remove_member(group, member)
        if group.is_(S.STABLE, S.COMPLETING_REBALANCE):
            self._prepare_rebalance(group, reason)
        elif group.is_(S.PREPARING_REBALANCE):
            log.info("group %s: %s", group.group_id, reason)
            self._try_complete_join(group)

    # ------------------------------------------------------------------ JoinGroup
    async def join_group(self, *, group_id: str, member_id: str, group_instance_id: str | None,
                         client_id: str, client_host: str, session_timeout_ms: int,
                         rebalance_timeout_ms: int, protocol_type: str, protocols: list[tuple[str, bytes]],
                         require_known_member_id: bool, skip_assignment_ok: bool = False,
                         reason: str | None = None) -> JoinResult:
        """Join (or rejoin) a group; returns when the join phase ends (or at once on error,
        for MEMBER_ID_REQUIRED, and for rejoins that change nothing)."""
        if not group_id:
            return JoinResult(E.INVALID_GROUP_ID, member_id)
        status = self.group_status(group_id)
        if status != E.NONE:
            return JoinResult(status, member_id)
        if not self.min_session_ms <= session_timeout_ms <= self.max_session_ms:
            return JoinResult(E.INVALID_SESSION_TIMEOUT, member_id)
        if rebalance_timeout_ms <= 0:  # JoinGroup v0 has no rebalance timeout
            rebalance_timeout_ms = session_timeout_ms
        group = self.groups.get(group_id)
        if is_consumer_group(group):
            if group.members and self.consumer.migration.mixed_allowed:
                # A classic member in a consumer group (KIP-848 online upgrade, migration.py).
                return await self.consumer.migration.join(
                    group, member_id=member_id, instance_id=group_instance_id, client_id=client_id,
                    client_host=client_host, session_timeout_ms=session_timeout_ms,
                    rebalance_timeout_ms=rebalance_timeout_ms, protocol_type=protocol_type, protocols=protocols,
                    require_known_member_id=require_known_member_id)
            if group.members:
                log.info("group %s: JoinGroup from %s refused: it is a consumer group with members "
                         "(group.consumer.migration.policy=disabled)", group_id, member_id or client_id)
                return JoinResult(E.INCONSISTENT_GROUP_PROTOCOL, member_id)
            error = await self._retire_consumer_group(group)
            if error != E.NONE:
                return JoinResult(error, member_id)
            group = self.groups.get(group_id)
        if group is None:
            if member_id:
                return JoinResult(E.UNKNOWN_MEMBER_ID, member_id)
            if not protocol_type or not protocols:
                return JoinResult(E.INCONSISTENT_GROUP_PROTOCOL, member_id)
            group = self._new_group(group_id)
        if group.is_(S.DEAD):
            # Being deleted right now; the client retries and finds a fresh group.
            return JoinResult(E.COORDINATOR_NOT_AVAILABLE, member_id)
        own_id = member_id if member_id in group.members else group.static_member_id(group_instance_id)
        if not group.supports_protocols(protocol_type, protocols, own_id):
            return JoinResult(E.INCONSISTENT_GROUP_PROTOCOL, member_id)
        args = _Join(client_id, client_host, session_timeout_ms, rebalance_timeout_ms, protocol_type,
                     list(protocols), skip_assignment_ok)
        if reason:
            log.debug("group %s: join from %s (%s): %s", group_id, member_id or client_id, group_instance_id, reason)
        if not member_id:
            return await self._join_unknown_member(group, group_instance_id, require_known_member_id, args)
        return await self._join_known_member(group, member_id, group_instance_id, args)

    async def _retire_consumer_group(self, group: ConsumerGroup) -> ErrorCode:
        """An empty KIP-848 group becomes a classic one (a JoinGroup for it): its records
        are tombstoned, its offsets carried over to a new classic group."""
        async with self._locked(group.group_id) as status:
            if status != E.NONE:
                return status
            if self.groups.get(group.group_id) is not group or group.members:
                return E.NONE if self.groups.get(group.group_id) is not group else E.INCONSISTENT_GROUP_PROTOCOL
            try:
                await self._append(self.partition_for(group.group_id), [(k, None) for k in group.deletion_keys()])
            except Exception as exc:
                return self._write_error(exc, f"converting group {group.group_id} to the classic protocol",
                                         group_write=True)
            classic = Group(group.group_id, self.now_ms())
            classic.offsets = group.offsets
            classic.pending_txn_offsets = group.pending_txn_offsets
            self.groups[group.group_id] = classic
            log.info("group %s: empty consumer group converted to a classic group", group.group_id)
        return E.NONE

    def _accepts_new_member(self, group: Group) -> bool:
        if group.is_(S.EMPTY, S.DEAD):
            return True
        return len(group.members) + len(group.pending_members) < self.max_group_size

    async def _join_unknown_member(self, group: Group, instance_id: str | None, require_known_member_id: bool,
                                   args: _Join) -> JoinResult:
        # Kafka's ClassicGroup.generateMemberId: a static member is named for its instance.
        new_id = f"{instance_id if instance_id is not None else args.client_id or 'member'}-{uuid.uuid4()}"
        if instance_id is not None:
            old_id = group.static_member_id(instance_id)
            if old_id is not None:
                return await self._replace_static_member(group, instance_id, old_id, new_id, args)
        if not self._accepts_new_member(group):
            return JoinResult(E.GROUP_MAX_SIZE_REACHED, "")
        if instance_id is None and require_known_member_id:
            # KIP-394: hand out the id first, so a client that retries a lost JoinGroup
            # answer rejoins as the same member instead of leaving a ghost behind.
            deadline = trio.current_time() + args.session_timeout_ms / 1000
            group.pending_members[new_id] = deadline
            self._timers.set(("pending", group.group_id, new_id), deadline)
            return JoinResult(E.MEMBER_ID_REQUIRED, new_id)
        return await self._add_member_and_rebalance(group, new_id, instance_id, args)

    async def _join_known_member(self, group: Group, member_id: str, instance_id: str | None,
                                 args: _Join) -> JoinResult:
        if member_id in group.pending_members:
            # Admitted against group.max.size when the id was handed out.
            return await self._add_member_and_rebalance(group, member_id, instance_id, args)
        if group.is_static_member_fenced(member_id, instance_id):
            return JoinResult(E.FENCED_INSTANCE_ID, member_id)
        member = group.members.get(member_id)
        if member is None or group.is_(S.EMPTY):
            return JoinResult(E.UNKNOWN_MEMBER_ID, member_id)
        protocols = args.protocols
        if group.is_(S.PREPARING_REBALANCE):
            return await self._update_member_and_rebalance(group, member, args, f"member {member_id} rejoined")
        if group.is_(S.COMPLETING_REBALANCE):
            if member.matches(protocols):
                # The member lost our answer and asked again: same generation, same answer.
                self._touch(group, member)
                return self._current_generation(group, member_id, with_members=group.is_leader(member_id))
            return await self._update_member_and_rebalance(
                group, member, args, f"member {member_id} changed its metadata during CompletingRebalance")
        # Stable
        if group.is_leader(member_id):
            # The leader rejoins to rebalance on changes the metadata does not show
            # (new partitions, a changed subscription pattern).
            return await self._update_member_and_rebalance(group, member, args, f"leader {member_id} rejoined")
        if not member.matches(protocols):
            return await self._update_member_and_rebalance(group, member, args,
                                                           f"member {member_id} changed its metadata")
        self._touch(group, member)
        return self._current_generation(group, member_id, with_members=False)

    def _current_generation(self, group: Group, member_id: str, with_members: bool,
                            leader_id: str | None = None, skip_assignment: bool = False) -> JoinResult:
        return JoinResult(E.NONE, member_id, group.generation_id, group.protocol_type, group.protocol_name,
                          (leader_id if leader_id is not None else group.leader_id) or "", skip_assignment,
                          group.member_metadata() if with_members else [])

    async def _add_member_and_rebalance(self, group: Group, member_id: str, instance_id: str | None,
                                        args: _Join) -> JoinResult:
        member = Member(member_id, instance_id, args.client_id, args.client_host, args.session_timeout_ms,
                        args.rebalance_timeout_ms, args.protocol_type, list(args.protocols))
        reply = member.join_reply = Reply()
        if group.is_(S.PREPARING_REBALANCE) and group.in_initial_delay:
            group.new_member_added = True
        group.add(member)
        self._timers.cancel(("pending", group.group_id, member_id))
        self._touch(group, member)
        self._maybe_prepare_rebalance(group, f"new member {member_id} joined")
        self._try_complete_join(group)
        return await reply.wait()

    async def _update_member_and_rebalance(self, group: Group, member: Member, args: _Join,
                                           reason: str) -> JoinResult:
        member.protocols = list(args.protocols)
        member.session_timeout_ms = args.session_timeout_ms
        member.rebalance_timeout_ms = args.rebalance_timeout_ms
        # A join this one supersedes (sent on a connection the client gave up on) ends now.
        member.answer_join(JoinResult(E.REBALANCE_IN_PROGRESS, member.member_id))
        reply = member.join_reply = Reply()
        self._touch(group, member)
        self._maybe_prepare_rebalance(group, reason)
        self._try_complete_join(group)
        return await reply.wait()

    async def _replace_static_member(self, group: Group, instance_id: str, old_id: str, new_id: str,
                                     args: _Join) -> JoinResult:
        old_leader = group.leader_id
        was_leader = old_leader == old_id
        member = group.replace_static_member(instance_id, old_id, new_id)
        self._timers.cancel(("session", group.group_id, old_id))
        member.protocols = list(args.protocols)
        member.session_timeout_ms = args.session_timeout_ms
        member.rebalance_timeout_ms = args.rebalance_timeout_ms
        member.client_id = args.client_id
        member.client_host = args.client_host
        self._touch(group, member)
        log.info("group %s: static member %s came back as %s (was %s)", group.group_id, instance_id, new_id, old_id)
        if group.is_(S.STABLE):
            if group.protocol_name == group.select_protocol():
                # KIP-345: nothing changes for the group; the member syncs into the current
                # generation and gets its old assignment. The leader id we return is the
                # old one, so a returning leader does not compute a trivial assignment —
                # unless it speaks v9, which says so with skip_assignment (KIP-814).
                error = await self._store_group_for(group)
                if error != E.NONE:
                    return JoinResult(error, new_id)
                if was_leader and args.skip_assignment_ok:
                    return self._current_generation(group, new_id, with_members=True, leader_id=new_id,
                                                    skip_assignment=True)
                return self._current_generation(group, new_id, with_members=False, leader_id=old_leader or "")
            reply = member.join_reply = Reply()
            self._prepare_rebalance(group, f"static member {instance_id} rejoined with another protocol")
            return await reply.wait()
        reply = member.join_reply = Reply()
        if group.is_(S.COMPLETING_REBALANCE):
            self._prepare_rebalance(group, f"static member {instance_id} rejoined during CompletingRebalance")
        else:  # PreparingRebalance: it simply counts as joined now
            self._try_complete_join(group)
        return await reply.wait()

    # ------------------------------------------------------------------ SyncGroup
    async def sync_group(self, *, group_id: str, generation_id: int, member_id: str,
                         group_instance_id: str | None, protocol_type: str | None, protocol_name: str | None,
                         assignments: dict[str, bytes]) -> SyncResult:
        if not group_id:
            return SyncResult(E.INVALID_GROUP_ID)
        status = self.group_status(group_id)
        if status == E.COORDINATOR_LOAD_IN_PROGRESS:
            # The state of the rebalance is not known yet: the member rejoins (Kafka answers
            # so because older clients do not know COORDINATOR_LOAD_IN_PROGRESS here).
            return SyncResult(E.REBALANCE_IN_PROGRESS)
        if status != E.NONE:
            return SyncResult(status)
        group = self.groups.get(group_id)
        if is_consumer_group(group) and group.members:
            return self.consumer.migration.sync(group, generation_id=generation_id, member_id=member_id,
                                                instance_id=group_instance_id, protocol_type=protocol_type,
                                                protocol_name=protocol_name)
        if group is None or is_consumer_group(group):
            return SyncResult(E.UNKNOWN_MEMBER_ID)
        if group.is_(S.DEAD):
            return SyncResult(E.COORDINATOR_NOT_AVAILABLE)
        refused = group.member_error(member_id, group_instance_id)
        if refused is not None:
            return SyncResult(refused)
        member = group.members[member_id]
        if generation_id != group.generation_id:
            return SyncResult(E.ILLEGAL_GENERATION)
        if (protocol_type is not None and protocol_type != group.protocol_type) or (
                protocol_name is not None and protocol_name != group.protocol_name):
            return SyncResult(E.INCONSISTENT_GROUP_PROTOCOL)
        if group.is_(S.EMPTY):
            return SyncResult(E.UNKNOWN_MEMBER_ID)
        if group.is_(S.PREPARING_REBALANCE):
            return SyncResult(E.REBALANCE_IN_PROGRESS)
        self._touch(group, member)
        group.pending_sync.discard(member_id)
        if group.is_(S.STABLE):
            return SyncResult(E.NONE, member.assignment, group.protocol_type, group.protocol_name)
        # CompletingRebalance: wait for the leader's assignment.
        member.answer_sync(SyncResult(E.REBALANCE_IN_PROGRESS))
        reply = member.sync_reply = Reply()
        if group.is_leader(member_id):
            generation = group.generation_id
            full = {mid: bytes(assignments.get(mid, b"")) for mid in group.members}
            unknown = set(assignments) - set(full)
            if unknown:
                log.info("group %s: leader assigned to unknown members %s; ignored", group_id, sorted(unknown))
            error = await self._store_group_for(group, full)
            # The group may have moved on while the write was in flight.
            if group.is_(S.COMPLETING_REBALANCE) and group.generation_id == generation:
                if error != E.NONE:
                    self._reset_assignments(group, error)
                    self._prepare_rebalance(group, f"storing the assignment failed with {error.name}")
                else:
                    for mid, m in group.members.items():
                        m.assignment = full.get(mid, b"")
                        m.answer_sync(SyncResult(E.NONE, m.assignment, group.protocol_type, group.protocol_name))
                    group.transition(S.STABLE, self.now_ms())
                    log.info("group %s: generation %d is stable", group_id, generation)
        return await reply.wait()

    # ------------------------------------------------------------------ Heartbeat, LeaveGroup
    def heartbeat(self, *, group_id: str, generation_id: int, member_id: str,
                  group_instance_id: str | None) -> ErrorCode:
        if not group_id:
            return E.INVALID_GROUP_ID
        status = self.group_status(group_id)
        if status == E.COORDINATOR_LOAD_IN_PROGRESS:
            return E.NONE  # the group is still loading: answered blindly, as Kafka does
        if status != E.NONE:
            return status
        group = self.groups.get(group_id)
        if is_consumer_group(group) and group.members:
            return self.consumer.migration.heartbeat(group, generation_id=generation_id, member_id=member_id,
                                                     instance_id=group_instance_id)
        if group is None or is_consumer_group(group):
            return E.UNKNOWN_MEMBER_ID
        if group.is_(S.DEAD):
            return E.COORDINATOR_NOT_AVAILABLE
        refused = group.member_error(member_id, group_instance_id)
        if refused is not None:
            return refused
        member = group.members[member_id]
        if group.is_(S.EMPTY):
            return E.UNKNOWN_MEMBER_ID
        if generation_id != group.generation_id:
            return E.ILLEGAL_GENERATION
        self._touch(group, member)
        if group.is_(S.PREPARING_REBALANCE):
            return E.REBALANCE_IN_PROGRESS
        return E.NONE

    def consumer_group_with_members(self, group_id: str) -> ConsumerGroup | None:
        """A non-empty KIP-848 group, whose classic members leave through
        `consumer.migration.leave` (it writes records, so it is async; this path is not)."""
        group = self.groups.get(group_id)
        if is_consumer_group(group) and group.members and self.group_status(group_id) == E.NONE:
            return group
        return None

    def leave_group(self, group_id: str, leaving: list[tuple[str, str | None]]
                    ) -> tuple[ErrorCode, list[ErrorCode]]:
        """Remove members, each named by member id and/or group.instance.id; returns the
        group-level error and one error per member."""
        if not group_id:
            return E.INVALID_GROUP_ID, [E.INVALID_GROUP_ID] * len(leaving)
        status = self.group_status(group_id)
        if status != E.NONE:
            return status, [status] * len(leaving)
        group = self.groups.get(group_id)
        if group is None or is_consumer_group(group):
            return E.NONE, [E.UNKNOWN_MEMBER_ID] * len(leaving)
        if group.is_(S.DEAD):
            return E.COORDINATOR_NOT_AVAILABLE, [E.COORDINATOR_NOT_AVAILABLE] * len(leaving)
        errors = []
        for member_id, instance_id in leaving:
            if not member_id and instance_id is not None:
                member_id = group.static_member_id(instance_id) or ""
                if not member_id:
                    errors.append(E.UNKNOWN_MEMBER_ID)
                    continue
            elif group.is_static_member_fenced(member_id, instance_id):
                errors.append(E.FENCED_INSTANCE_ID)
                continue
            if group.pending_members.pop(member_id, None) is not None:
                self._timers.cancel(("pending", group_id, member_id))
                self._try_complete_join(group)
                errors.append(E.NONE)
                continue
            member = group.members.get(member_id)
            if member is None:
                errors.append(E.UNKNOWN_MEMBER_ID)
                continue
            self._remove_member_and_update(group, member, f"member {member_id} left the group")
            errors.append(E.NONE)
        return E.NONE, errors

    # ------------------------------------------------------------------ offsets
    def _lock(self, partition: int) -> trio.Lock:
        return self.log.lock(partition)

    @asynccontextmanager
    async def _locked(self, group_id: str) -> AsyncIterator[ErrorCode]:
        """The write lock of the group's offsets partition, yielding `group_status`: checked
        before waiting (a request for a group led elsewhere does not queue) and again once
        the lock is held (the partition may have been unloaded meanwhile). The lock is
        held only when the status is NONE."""
        status = self.group_status(group_id)
        if status != E.NONE:
            yield status
            return
        async with self._lock(self.partition_for(group_id)):
            yield self.group_status(group_id)

    def partition_for(self, group_id: str) -> int:
        return self.log.partition_for(group_id)

    async def _append(self, partition: int, entries: list[tuple[bytes, bytes | None]]) -> int:
        """Append key/value records (value None: tombstone) to one offsets partition;
        returns the offset of the first."""
        return await self.log.append(partition, entries)

    @staticmethod
    def _write_error(exc: BaseException, what: str, *, group_write: bool = False) -> ErrorCode:
        """What the client is told when a write to __consumer_offsets failed (Kafka's
        GroupMetadataManager): no longer the partition's leader → NOT_COORDINATOR, the
        partition missing or short of replicas → COORDINATOR_NOT_AVAILABLE; too large →
        INVALID_COMMIT_OFFSET_SIZE for offsets (UNKNOWN_SERVER_ERROR for the group record);
        a timed-out group record (SyncGroup) → REBALANCE_IN_PROGRESS, a timed-out commit
        REQUEST_TIMED_OUT; anything else COORDINATOR_NOT_AVAILABLE, which clients retry."""
        code = error_code_for(exc)
        if code in (E.MESSAGE_TOO_LARGE, E.RECORD_LIST_TOO_LARGE, E.INVALID_FETCH_SIZE):
            if not group_write:
                return E.INVALID_COMMIT_OFFSET_SIZE
            log.error("%s: writing to %s failed: %r", what, OFFSETS_TOPIC, exc)
            return E.UNKNOWN_SERVER_ERROR
        mapped = append_error(code)
        if mapped is None:
            if code == E.REQUEST_TIMED_OUT:
                mapped = E.REBALANCE_IN_PROGRESS if group_write else E.REQUEST_TIMED_OUT
            else:
                mapped = E.COORDINATOR_NOT_AVAILABLE
        log.error("%s: writing to %s failed: %r (answered %s)", what, OFFSETS_TOPIC, exc, mapped.name)
        return mapped

    def _group_value(self, group: Group, assignments: dict[str, bytes] | None = None) -> bytes:
        members = [rec.MemberValue(m.member_id, m.group_instance_id, m.client_id, m.client_host,
                                   m.rebalance_timeout_ms, m.session_timeout_ms, m.metadata_for(group.protocol_name),
                                   (assignments or {}).get(m.member_id, m.assignment))
                   for m in group.members.values()]
        return rec.encode_group_value(rec.GroupValue(group.protocol_type or "", group.generation_id,
                                                     group.protocol_name, group.leader_id,
                                                     group.state_timestamp, members))

    async def _store_group_for(self, group: Group, assignments: dict[str, bytes] | None = None) -> ErrorCode:
        partition = self.partition_for(group.group_id)
        async with self._lock(partition):
            if not self.log.owns(partition):
                return E.NOT_COORDINATOR  # unloaded while this write waited
            if group.is_(S.DEAD) or self.groups.get(group.group_id) is not group:
                return E.NONE  # deleted while this write waited: its tombstone must stay last
            value = self._group_value(group, assignments)
            try:
                await self._append(partition, [(rec.encode_group_key(rec.GroupKey(group.group_id)), value)])
            except Exception as exc:
                return self._write_error(exc, f"group {group.group_id}", group_write=True)
        return E.NONE

    async def _store_group_quietly(self, group: Group) -> None:
        await self._store_group_for(group)

    def _commit_check(self, group: Group | None, generation_id: int, member_id: str,
                      instance_id: str | None) -> ErrorCode:
        if group is None:
            return E.NONE if generation_id < 0 else E.ILLEGAL_GENERATION
        if is_consumer_group(group):
            return self.consumer.commit_check(group, generation_id, member_id, transactional=False)
        if group.is_(S.DEAD):
            return E.COORDINATOR_NOT_AVAILABLE
        if generation_id < 0 and group.is_(S.EMPTY):
            return E.NONE  # the group only stores offsets (simple consumer, kcat -C, Spark)
        refused = group.member_error(member_id, instance_id)
        if refused is not None:
            return refused
        member = group.members[member_id]
        if generation_id != group.generation_id:
            return E.ILLEGAL_GENERATION
        if group.is_(S.COMPLETING_REBALANCE):
            # The member saw the new generation's JoinGroup answer but not its assignment.
            return E.REBALANCE_IN_PROGRESS
        self._touch(group, member)
        return E.NONE

    def _txn_commit_check(self, group: Group | None, group_id: str, generation_id: int, member_id: str,
                          instance_id: str | None) -> ErrorCode:
        """Kafka's validateOffsetCommit for transactional commits: v3+ producers send the
        consumer's group metadata (KIP-447) and are checked like members (without the
        heartbeat and the rebalance check); older ones send none and are not checked. A
        group nobody joined yet is checked as an empty one (the commit creates it)."""
        if group is None:
            group = Group(group_id, self.now_ms())
        if is_consumer_group(group):
            if generation_id < 0 and not member_id:
                return E.COORDINATOR_NOT_AVAILABLE if group.dead else E.NONE
            return self.consumer.commit_check(group, generation_id, member_id, transactional=True)
        if group.is_(S.DEAD):
            return E.COORDINATOR_NOT_AVAILABLE
        if generation_id < 0 and group.is_(S.EMPTY):
            return E.NONE
        if generation_id >= 0 or member_id or instance_id is not None:
            if instance_id is not None:
                current = group.static_member_id(instance_id)
                if current is None:
                    return E.UNKNOWN_MEMBER_ID
                if current != member_id:
                    return E.FENCED_INSTANCE_ID
            if member_id not in group.members:
                return E.UNKNOWN_MEMBER_ID
            if generation_id != group.generation_id:
                return E.ILLEGAL_GENERATION
        return E.NONE
    def _fetch_check(self, group: Group | ConsumerGroup, member_id: str | None, member_epoch: int) -> ErrorCode:
        """OffsetFetch v9's member id and epoch: checked for KIP-848 groups, as Kafka does;
        a classic group's members do not send them."""
        if is_consumer_group(group):
            return self.consumer.fetch_check(group, member_id, member_epoch)
        return E.NONE

    # ------------------------------------------------------------------ admin
    def describe_group(self, group_id: str) -> tuple[ErrorCode, Group | None]:
        """(`group_status`, the group or None when unknown or being deleted)."""
        status = self.group_status(group_id)
        if status != E.NONE:
            return status, None
        group = self.groups.get(group_id)
        return E.NONE, None if group is None or group.is_(S.DEAD) else group

    def list_groups(self, states: set[str] | None = None, types: set[str] | None = None
                    ) -> tuple[ErrorCode, list[Group]]:
        """The groups this broker coordinates, filtered by state names and group types
        (case-insensitive, as Kafka); the code is COORDINATOR_LOAD_IN_PROGRESS while a
        partition loads (its groups are not listed yet), as Kafka answers."""
        code = E.COORDINATOR_LOAD_IN_PROGRESS if self.log.loading else E.NONE
        out = []
        for group in self.groups.values():
            if group.is_(S.DEAD):
                continue
            consumer = is_consumer_group(group)
            if types is not None and ("consumer" if consumer else "classic") not in types:
                continue
            state = group.consumer_state if consumer else group.state
            if states is not None and str(state).lower() not in states:
                continue
            out.append(group)
        return code, out

    async def delete_groups(self, group_ids: list[str]) -> dict[str, ErrorCode]:
        results: dict[str, ErrorCode] = {}
        for group_id in group_ids:
            partition = self.partition_for(group_id)
            async with self._locked(group_id) as status:
                if status != E.NONE:
                    results[group_id] = status
                    continue
                group = self.groups.get(group_id)
                if group is None or group.is_(S.DEAD):
                    results[group_id] = E.GROUP_ID_NOT_FOUND
                    continue
                if not group.is_(S.EMPTY) or group.pending_members:
                    results[group_id] = E.NON_EMPTY_GROUP
                    continue
                # Dead first, so nobody joins while the tombstones are written.
                group.transition(S.DEAD, self.now_ms())
                # Pending transactional offsets go too (tombstoned, so a later COMMIT
                # marker does not bring them back on replay), as Kafka's DeleteGroups does.
                gone = group.offsets.keys() | group.pending_txn_partitions()
                entries = [(rec.encode_offset_key(rec.OffsetKey(group_id, t, p)), None) for t, p in sorted(gone)]
                entries.extend((k, None) for k in group.deletion_keys())
                try:
                    await self._append(partition, entries)
                except Exception as exc:
                    if is_consumer_group(group):
                        group.dead = False
                    else:
                        group.state = S.EMPTY  # not deleted after all (a direct reset: Dead is final otherwise)
                    results[group_id] = self._write_error(exc, f"deleting group {group_id}")
                    continue
                if self.groups.get(group_id) is group:
                    del self.groups[group_id]
                log.info("group %s: deleted with %d committed offsets", group_id, len(group.offsets))
                results[group_id] = E.NONE
        return results
