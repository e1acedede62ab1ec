"""`ShareCoordinator`: share groups (KIP-932) — membership, share sessions, share partitions.

What Kafka splits over its group coordinator (ShareGroupHeartbeat, the simple assignor) and
its SharePartitionManager (share sessions, ShareFetch/ShareAcknowledge, acquisition locks)
is one object here, `broker.share`, which answers each part only where Kafka would: in a
cluster membership on the group's coordinator (the leader of its `__consumer_offsets`
partition; NOT_COORDINATOR elsewhere) and share partitions on the data partition's leader
(NOT_LEADER_OR_FOLLOWER elsewhere). The share coordinator (`__share_group_state`) is
`ShareStateStore` (state.py), reached through `SharePersister` (persister.py): a local call
on a single broker or when this broker leads the key's partition, else Read/
WriteShareGroupState to its leader. The handlers (share_group_heartbeat,
share_group_describe, share_fetch, share_acknowledge) call it.

Membership follows GroupMetadataManager.shareGroupHeartbeat: MemberEpoch 0 joins (at v1 the
client makes up its member id, KIP-1082; at v0, Kafka 3.9's early access, a join with an
empty member id gets one from the coordinator, as 3.9 did), -1 leaves, anything else must equal the member's
epoch (FENCED_MEMBER_EPOCH) of a known member (UNKNOWN_MEMBER_ID). A change of members,
subscriptions or subscribed topics' partitions bumps the group epoch and recomputes the
assignment (server/groups/share/assignor.py), which members get on their next heartbeat
along with the new epoch. A member not heard from for `group.share.session.timeout.ms` is
removed, its share session closed and what it holds released; one that leaves keeps its
share session until it closes it (epoch -1) with its last acknowledgements; a share
session also ends with the connection that opened it. A group id is of one type: a share
request for a classic group's id is GROUP_ID_NOT_FOUND ("not a share group"), and a
JoinGroup for a share group's id UNKNOWN_MEMBER_ID, as Kafka answers.

Durability: a share partition's state is written through the share coordinator to
`__share_group_state` (server/coordinator_log.py) as Kafka's records (records.py): a
ShareSnapshot when it is initialised and after every
`share.coordinator.snapshot.update.records.per.snapshot` ShareUpdates, a ShareUpdate on
every acknowledgement before the answer goes out (a write that fails is answered with its
error and the acknowledgement rolled back in memory); releases and expired locks are
written in the background. At start-up the newest snapshot of each share partition with the newest
update of its snapshot epoch is replayed: accepted (and rejected) records are never
delivered again after a restart, records only acquired come back as available (with the
deliveries they had). Group membership and share sessions are not persisted: after a
restart members get UNKNOWN_MEMBER_ID / SHARE_SESSION_NOT_FOUND and join and open sessions
again, as clients do.

A cluster (ZooKeeper mode): a share partition is loaded by the broker leading its data
partition at its first ShareFetch there — read back from the share coordinator
(ReadShareGroupState at the leader epoch) or initialised at `share.auto.offset.reset` — and
written at once, which fences writes of earlier leaders (FENCED_LEADER_EPOCH). When the
leadership moves (LeaderAndIsr makes this broker a follower, or the leader epoch changed)
the share partition leaves memory; the next leader reads what was last written: accepted
records are never delivered again, records only acquired come back. Heartbeat-time
initialisation covers only partitions led here (Kafka's group coordinator sends
InitializeShareGroupState instead). Share groups leave memory with their
`__consumer_offsets` partition (members rejoin at the new coordinator); group configs are
kept in ZooKeeper (/config/groups/<group>, server/cluster/group_configs.py), followed by
every broker and read again when a share partition is loaded.

Group configs (server/groups/group_configs.py): a share group's own share.session.timeout.ms,
share.heartbeat.interval.ms, share.record.lock.duration.ms, share.delivery.count.limit,
share.partition.max.record.locks, share.auto.offset.reset (earliest, latest, by_duration)
and share.isolation.level apply to it, the broker's group.share.* settings to the others. A
change applies from the next heartbeat, fetch or share partition on (the limits of share
partitions held here at once).

Deleting a share group (DeleteGroups, empty groups only, else NON_EMPTY_GROUP) deletes the
state of every share partition it was assigned at their share coordinators
(DeleteShareGroupState), after retiring the group's share partitions held here so no later
write brings the state back. The share coordinator keeps the deleted share partition's
state epoch, bumped (state.py): share partitions other brokers lead still hold the old
state in memory, and their next write (a lock expiring, an acknowledgement of a session
still open) is FENCED_STATE_EPOCH — that leader then drops its copy (logged), and the next
ShareFetch there reads the state back (deleted: initialised afresh at
`share.auto.offset.reset`, at the new state epoch), as Kafka's SharePartitionManager drops a
fenced share partition. Until that first fenced write a ShareFetch at such a leader is
served from the old copy (Kafka's leaders learn of it the same way).
"""

from __future__ import annotations

import base64
import logging
import time
import uuid

import trio

from wire.errors import ErrorCode

from server.coordinator_log import CoordinatorLog
from server.errors import (
    FencedMemberEpoch,
    GroupIdNotFound,
    GroupMaxSizeReached,
    InvalidRequest,
    KafkaError,
    NotLeaderOrFollower,
    UnknownMemberId,
    UnknownTopicOrPartition,
)
from server.groups.group_config import BY_DURATION, parse_duration_ms
from server.groups.share import records as rec
from server.groups.share.assignor import assign
from server.groups.share.group import ShareGroup, ShareMember
from server.groups.share.partition import SharePartition
from server.groups.share.persister import SharePersister
from server.groups.share.sessions import ShareSessionCache
from server.groups.share.state import ShareStateStore

log = logging.getLogger("trafka.share")

AUTO_OFFSET_RESET = "share.auto.offset.reset"
ISOLATION_LEVEL = "share.isolation.level"
SESSION_TIMEOUT = "share.session.timeout.ms"
HEARTBEAT_INTERVAL = "share.heartbeat.interval.ms"
LOCK_DURATION = "share.record.lock.duration.ms"
DELIVERY_LIMIT = "share.delivery.count.limit"
MAX_LOCKS = "share.partition.max.record.locks"
SWEEP_S = 0.1


def reset_offset(partition, reset: str) -> int:
    """Where a new share partition starts (share.auto.offset.reset): earliest is the log
    start offset; by_duration:<d> the first record stamped at or after now - d (the high
    watermark when there is none); latest the high watermark."""
    if reset == "earliest":
        return partition.log.log_start_offset
    if reset.startswith(BY_DURATION):
        millis = parse_duration_ms(reset[len(BY_DURATION):]) or 0
        found = partition.log.offset_for_timestamp(time.time_ns() // 1_000_000 - millis)
        if found is not None and found[0] < partition.high_watermark:
            return found[0]
    return partition.high_watermark


def kafka_uuid() -> str:
    """A random id as Kafka's Uuid.randomUuid().toString() spells it: URL-safe base64 of 16
    bytes without padding, never starting with '-' (Kafka avoids that, it reads as an option)."""
    while True:
        text = base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")
        if not text.startswith("-"):
            return text


class ShareCoordinator:
    def __init__(self, broker) -> None:
        cfg = broker.config
        self.broker = broker
        # The share.* group configs (server/groups/group_configs.py): each group's own
        # timings and limits, else the broker's group.share.* settings.
        self.configs = broker.group_configs
        self.configs.add_listener(self._configs_changed)
        self.max_size = cfg.get("group.share.max.size")
        self.log = CoordinatorLog(broker, rec.STATE_TOPIC, cfg.get("share.coordinator.state.topic.num.partitions"),
                                  rec.STATE_TOPIC_CONFIGS)
        # The share coordinator (`__share_group_state`) and the way to it from a share-partition leader.
        self.store = ShareStateStore(broker, self.log,
                                     cfg.get("share.coordinator.snapshot.update.records.per.snapshot"),
                                     on_config=self.configs.replayed)
        self.persister = SharePersister(broker, self.store)
        self.groups: dict[str, ShareGroup] = {}
        self.partitions: dict[tuple[str, uuid.UUID, int], SharePartition] = {}
        # Per share partition: writes in order (the newest state last), one initialisation at a time.
        self._write_locks: dict[tuple[str, uuid.UUID, int], trio.Lock] = {}
        self._init_locks: dict[tuple[str, uuid.UUID, int], trio.Lock] = {}
        self.sessions = ShareSessionCache()
        self._topic_ready = False
        self._nursery: trio.Nursery | None = None

    # ------------------------------------------------------------------ lifecycle
    def load(self) -> None:
        """Blocking, at start-up of a single broker: replay `__share_group_state` if it exists
        (it is created on the first share partition's initialisation, so brokers without
        share groups have no such topic). In a cluster the share coordinator loads the
        partitions it leads (`store.load_partition`) and share-partition leaders read their
        state from it when they start serving a share partition."""
        if self.broker.topics.get(rec.STATE_TOPIC) is None:
            return
        self._topic_ready = True
        counts = self.store.load()
        for (group_id, topic_id, index), stored in self.store.states.items():
            topic = self.broker.topic_name_for_id(topic_id)
            if topic is None or stored.deleted:  # a deleted one is initialised afresh at its first use
                continue
            sp = self._new_partition(group_id, topic, topic_id, index, stored.start_offset)
            sp.restore(stored.start_offset, stored.batches())
            sp.state_epoch = stored.state_epoch
        if self.store.states:
            log.info("share state loaded: %d share partitions from %d records (%d skipped)", len(self.partitions),
                     counts.records, counts.skipped)

    async def run(self, task_status=trio.TASK_STATUS_IGNORED) -> None:
        """The share timers: member sessions and acquisition locks, swept every 100 ms."""
        async with trio.open_nursery() as nursery:
            self._nursery = nursery
            task_status.started()
            try:
                while True:
                    await trio.sleep(SWEEP_S)
                    try:
                        self._sweep(trio.current_time())
                    except Exception:
                        log.exception("share timers failed")
            finally:
                self._nursery = None

    def _sweep(self, now: float) -> None:
        for group in list(self.groups.values()):
            for member in [m for m in group.members.values() if m.expires_at <= now]:
                log.info("share group %s: member %s session timed out after %d ms", group.group_id, member.member_id,
                         self.configs.int_value(group.group_id, SESSION_TIMEOUT))
                self._remove_member(group, member)
        for sp in self.partitions.values():
            if sp.next_lock_deadline() <= now:
                expired = sp.expire_locks(now)
                if expired:
                    log.debug("%r: %d acquisition locks expired", sp, expired)
                    self._changed(sp)

    def _changed(self, sp: SharePartition) -> None:
        """Records became available: wake waiting ShareFetches and persist the state."""
        partition = self.broker.partitions.get((sp.topic, sp.index))
        if partition is not None:
            partition.wake()
        if self._nursery is not None:
            self._nursery.start_soon(self._persist_logged, sp)

    async def _persist_logged(self, sp: SharePartition) -> None:
        try:
            await self.persist(sp)
        except Exception as exc:
            log.warning("%r: persisting share state failed: %s", sp, exc)

    # ------------------------------------------------------------------ leadership (a cluster)
    def leadership_lost(self, topic: str, index: int) -> None:
        """This broker no longer leads `topic`-`index`: its share partitions leave memory
        (the new leader reads their state from the share coordinator); what members held
        acquired here comes back there, as the state says AVAILABLE for it."""
        gone = [k for k, sp in self.partitions.items() if sp.topic == topic and sp.index == index]
        for key in gone:
            del self.partitions[key]
            lock = self._write_locks.get(key)
            if lock is not None and not lock.locked():
                del self._write_locks[key]
        if gone:
            log.info("%s-%d: led elsewhere now; %d share partitions dropped", topic, index, len(gone))

    def groups_unloaded(self, partition: int) -> None:
        """`__consumer_offsets`-`partition` is led elsewhere now: the share groups it
        coordinates leave memory (their members get UNKNOWN_MEMBER_ID / NOT_COORDINATOR and
        join the new coordinator, as after a restart)."""
        gone = [g for g in self.groups if self.broker.groups.partition_for(g) == partition]
        for group_id in gone:
            del self.groups[group_id]
        if gone:
            log.info("__consumer_offsets-%d: led elsewhere now; share groups %s dropped", partition, gone)

    def _check_coordinator(self, group_id: str) -> None:
        """Membership is answered by the group coordinator of `group_id` (the leader of its
        `__consumer_offsets` partition; a single broker is every group's)."""
        code = self.broker.groups.group_status(group_id)
        if code != ErrorCode.NONE:
            raise KafkaError(f"broker {self.broker.node_id} is not the coordinator of group {group_id}", code)

    # ------------------------------------------------------------------ group configs
    def group_config(self, group_id: str, name: str) -> str:
        """A STRING share.* group config as the group has it (share.auto.offset.reset, share.isolation.level)."""
        return self.configs.text_value(group_id, name)

    def lock_duration_ms(self, group_id: str) -> int:
        return self.configs.int_value(group_id, LOCK_DURATION)

    def _configs_changed(self, group_id: str) -> None:
        """The group's configs changed: its share partitions held here take the new
        delivery count limit and record lock limit at once (records already delivered
        keep their count; Kafka's share partitions read both per use)."""
        delivery_limit = self.configs.int_value(group_id, DELIVERY_LIMIT)
        max_locks = self.configs.int_value(group_id, MAX_LOCKS)
        for sp in self.partitions.values():
            if sp.group_id == group_id:
                sp.delivery_limit = max(delivery_limit, 1)
                sp.max_locks = max(max_locks, 1)

    async def write_group_configs(self, group_id: str, configs: dict[str, str]) -> None:
        """A single broker: the group's configs as one record of `__share_group_state`
        (created on first use), written before the change is answered."""
        if not self._topic_ready:
            self.log.ensure_topic()
            self._topic_ready = True
        partition = self.log.partition_for(group_id)
        async with self.log.lock(partition):
            await self.log.append(partition, [(rec.encode_config_key(rec.GroupConfigKey(group_id)),
                                               rec.encode_configs(configs))])

    # ------------------------------------------------------------------ membership
    def _check_share_group_id(self, group_id: str) -> None:
        if group_id in self.broker.groups.groups:
            raise GroupIdNotFound(f"Group {group_id} is not a share group.")

    async def heartbeat(self, *, group_id: str, member_id: str, member_epoch: int, rack_id: str | None,
                        subscribed_topic_names: list[str] | None, client_id: str, client_host: str,
                        version: int = 1) -> dict:
        """ShareGroupHeartbeat: the response body (errors raised as KafkaError)."""
        if not group_id:
            raise InvalidRequest("GroupId can't be empty.")
        if version == 0 and member_epoch == 0 and not member_id:
            # Kafka 3.9 (v0): the coordinator names a joining member; kafka-clients 3.9's
            # KafkaShareConsumer joins with an empty id and parses the one answered as a
            # Kafka Uuid (Uuid.fromString: 22 characters of URL-safe base64), so it must be one.
            member_id = kafka_uuid()
        if not member_id:
            raise InvalidRequest("MemberId can't be empty.")
        if rack_id == "":
            raise InvalidRequest("RackId can't be empty.")  # null (unchanged) or a rack, as Kafka checks
        if member_epoch < -1:
            raise InvalidRequest(f"MemberEpoch is {member_epoch}, must be -1, 0 or positive.")
        if member_epoch == 0 and not subscribed_topic_names:
            raise InvalidRequest("SubscribedTopicNames must be set in first request.")
        self._check_coordinator(group_id)
        self._check_share_group_id(group_id)
        group = self.groups.get(group_id)
        member = group.members.get(member_id) if group is not None else None
        if member_epoch == -1:
            if member is None:
                raise UnknownMemberId(f"member {member_id} is not in share group {group_id}")
            log.info("share group %s: member %s left", group_id, member_id)
            # Its share session stays: a closing consumer leaves first and then sends its
            # last acknowledgements with ShareSessionEpoch -1 (librdkafka, as Kafka allows).
            self._remove_member(group, member, end_session=False)
            return {"member_id": member_id, "member_epoch": -1, "heartbeat_interval_ms": 0, "assignment": None}
        if member_epoch > 0:
            if member is None:
                raise UnknownMemberId(f"member {member_id} is not in share group {group_id}")
            if member_epoch != member.member_epoch:
                raise FencedMemberEpoch(f"member {member_id} of share group {group_id} sent epoch {member_epoch}, "
                                        f"its epoch is {member.member_epoch}")
        if group is None:
            group = self.groups[group_id] = ShareGroup(group_id)
        changed = False
        if member is None:
            if len(group.members) >= self.max_size:
                raise GroupMaxSizeReached(f"share group {group_id} has {len(group.members)} members "
                                          f"(group.share.max.size)")
            member = group.members[member_id] = ShareMember(member_id, client_id=client_id, client_host=client_host)
            log.info("share group %s: member %s (%s) joined", group_id, member_id, client_id)
            changed = True
        if subscribed_topic_names is not None and frozenset(subscribed_topic_names) != member.subscribed_topic_names:
            member.subscribed_topic_names = frozenset(subscribed_topic_names)
            changed = True
        if rack_id is not None:
            member.rack_id = rack_id
        member.expires_at = trio.current_time() + self.configs.int_value(group_id, SESSION_TIMEOUT) / 1000
        target = self._target(group)
        if changed or target != group.target:
            group.group_epoch += 1
            group.target = target
            group.assignment_epoch = group.group_epoch
        self._remember_partitions(group)
        new_assignment = group.target.get(member_id, {})
        send = member_epoch == 0 or new_assignment != member.assignment or member.member_epoch != group.group_epoch
        member.assignment = new_assignment
        member.member_epoch = group.group_epoch
        if self.broker.cluster is None:
            await self._initialise(group_id, new_assignment)
        elif self._nursery is not None:
            # In the background: reaching a share coordinator that is moving may take seconds,
            # which a heartbeat must not wait for.
            self._nursery.start_soon(self._initialise, group_id, new_assignment)
        answer = {"member_id": member_id, "member_epoch": member.member_epoch,
                  "heartbeat_interval_ms": self.configs.int_value(group_id, HEARTBEAT_INTERVAL), "assignment": None}
        if send:
            answer["assignment"] = {"topic_partitions": self._topic_partitions(new_assignment)}
        return answer

    def _topic_info(self, topic: str) -> tuple[uuid.UUID, int] | None:
        """(topic id, partition count): in a cluster as the metadata cache has it (every
        partition of the topic, wherever it is led), else the broker's own registry."""
        cluster = self.broker.cluster
        if cluster is not None:
            parts = cluster.cache.topics.get(topic)
            topic_id = cluster.cache.topic_ids.get(topic)
            if not parts or topic_id is None:
                return None
            return topic_id, len(parts)
        meta = self.broker.topics.get(topic)
        return None if meta is None else (meta.topic_id, meta.partitions)

    def _remember_partitions(self, group: ShareGroup) -> None:
        for assignment in group.target.values():
            for topic, parts in assignment.items():
                info = self._topic_info(topic)
                if info is not None:
                    group.share_partitions.update((info[0], p) for p in parts)

    def is_share_group(self, group_id: str) -> bool:
        """A share group this broker knows: its members, or share state held here (a group
        whose members are gone since a restart)."""
        return group_id in self.groups \
            or any(k[0] == group_id and not v.deleted for k, v in self.store.states.items()) \
            or any(k[0] == group_id for k in self.partitions)

    async def delete_group(self, group_id: str) -> ErrorCode:
        """DeleteGroups of a share group, at its group coordinator: NON_EMPTY_GROUP while it
        has members; else the state of every share partition it had is deleted at its share
        coordinator (DeleteShareGroupState: tombstones in `__share_group_state`) before the
        group goes, as Kafka's group coordinator does."""
        status = self.broker.groups.group_status(group_id)
        if status != ErrorCode.NONE:
            return status
        group = self.groups.get(group_id)
        if group is not None and group.members:
            return ErrorCode.NON_EMPTY_GROUP
        keys = {(group_id, t, p) for t, p in group.share_partitions} if group is not None else set()
        keys |= {k for k in self.partitions if k[0] == group_id}
        keys |= {k for k, v in self.store.states.items() if k[0] == group_id and not v.deleted}
        if group is None and not keys:
            return ErrorCode.GROUP_ID_NOT_FOUND
        # The group's share partitions here go first and write nothing more: a write of one
        # (a release when a session closes) after the tombstones would bring its state back.
        for key in [k for k in self.partitions if k[0] == group_id]:
            self.partitions.pop(key).retired = True
        self.sessions.close_group(group_id)
        for key in sorted(keys, key=lambda k: (str(k[1]), k[2])):
            try:
                async with self._write_locks.setdefault(key, trio.Lock()):  # after a write under way
                    await self.persister.delete(key)
            except KafkaError as exc:
                log.warning("share group %s: deleting the state of %s-%d failed: %s (%s)", group_id, key[1], key[2],
                            exc.code.name, exc)
                return exc.code
            self._write_locks.pop(key, None)
        if group is not None and self.groups.get(group_id) is group and not group.members:
            del self.groups[group_id]
        log.info("share group %s: deleted with the state of %d share partitions", group_id, len(keys))
        return ErrorCode.NONE

    def _target(self, group: ShareGroup) -> dict[str, dict[str, list[int]]]:
        counts = {}
        for topic in group.subscribed_topics():
            info = self._topic_info(topic)
            if info is not None:
                counts[topic] = info[1]
        return assign({m.member_id: m.subscribed_topic_names for m in group.members.values()}, counts)

    def _topic_partitions(self, assignment: dict[str, list[int]], *, names: bool = False) -> list[dict]:
        out = []
        for topic, parts in sorted(assignment.items()):
            info = self._topic_info(topic)
            if info is None:
                continue
            entry = {"topic_id": info[0], "partitions": list(parts)}
            if names:
                entry["topic_name"] = topic
            out.append(entry)
        return out

    def _remove_member(self, group: ShareGroup, member: ShareMember, *, end_session: bool = True) -> None:
        """A member leaves the group; one that timed out (`end_session`) also loses its share
        session and what it holds acquired."""
        group.members.pop(member.member_id, None)
        group.group_epoch += 1
        group.target = self._target(group)
        group.assignment_epoch = group.group_epoch
        if end_session:
            self.sessions.close(group.group_id, member.member_id)
            self.release(group.group_id, member.member_id)

    def release(self, group_id: str, member_id: str, keys=None) -> None:
        """What `member_id` holds in `group_id`'s share partitions (those of `keys`, else
        all) comes back, as when it closes its share session or leaves."""
        for key, sp in self.partitions.items():
            if key[0] != group_id or (keys is not None and (key[1], key[2]) not in keys):
                continue
            if sp.release_member(member_id):
                self._changed(sp)

    # ------------------------------------------------------------------ describe
    def describe(self, group_id: str) -> dict:
        """One ShareGroupDescribe entry."""
        entry = {"error_code": ErrorCode.NONE, "error_message": None, "group_id": group_id, "group_state": "",
                 "group_epoch": 0, "assignment_epoch": 0, "assignor_name": "simple", "members": [],
                 "authorized_operations": -2147483648}
        status = self.broker.groups.group_status(group_id)
        if status != ErrorCode.NONE:
            return {**entry, "error_code": status,
                    "error_message": f"broker {self.broker.node_id} is not the coordinator of group {group_id}"}
        group = self.groups.get(group_id)
        if group is None:
            code = ErrorCode.GROUP_ID_NOT_FOUND
            message = f"Group {group_id} is not a share group." if group_id in self.broker.groups.groups \
                else f"Group {group_id} not found."
            return {**entry, "error_code": code, "error_message": message}
        entry.update(group_state=group.state, group_epoch=group.group_epoch, assignment_epoch=group.assignment_epoch)
        for member in group.members.values():
            entry["members"].append({
                "member_id": member.member_id, "rack_id": member.rack_id, "member_epoch": member.member_epoch,
                "client_id": member.client_id, "client_host": member.client_host,
                "subscribed_topic_names": sorted(member.subscribed_topic_names),
                "assignment": {"topic_partitions": self._topic_partitions(member.assignment, names=True)},
            })
        return entry

    # ------------------------------------------------------------------ share partitions
    def _new_partition(self, group_id: str, topic: str, topic_id: uuid.UUID, index: int, start: int) -> SharePartition:
        sp = SharePartition(group_id, topic, topic_id, index, start, **self._limits(group_id))
        self.partitions[(group_id, topic_id, index)] = sp
        return sp

    async def _initialise(self, group_id: str, assignment: dict[str, list[int]]) -> None:
        """Initialise newly assigned share partitions (Kafka's InitializeShareGroupState), so
        their start is fixed at assignment time; a failure is logged and retried by the
        first ShareFetch, it does not fail the heartbeat. In a cluster only those whose
        leader is this broker, in the background: the others are initialised by their
        leaders at the first ShareFetch (Kafka's group coordinator sends
        InitializeShareGroupState instead)."""
        for topic, parts in assignment.items():
            for index in parts:
                if self.broker.cluster is not None:
                    local = self.broker.partitions.get((topic, index))
                    if local is None or not local.is_leader:
                        continue
                try:
                    await self.share_partition(group_id, topic, index)
                except KafkaError as exc:
                    log.warning("share group %s: initialising %s-%d failed: %s (%s)", group_id, topic, index,
                                exc.code.name, exc)
                except Exception:  # never the timers' nursery's end (it runs there in a cluster)
                    log.exception("share group %s: initialising %s-%d failed", group_id, topic, index)

    async def share_partition(self, group_id: str, topic: str, index: int) -> SharePartition:
        """The share partition, initialised on first use at `share.auto.offset.reset`
        (latest: the high watermark; earliest: the log start offset) and persisted, so a
        restart does not move its start. In a cluster this broker must lead the partition
        (NotLeaderOrFollower otherwise), and a share partition it starts serving — first
        use, or leadership regained at a new leader epoch — is read back from the share
        coordinator first (ReadShareGroupState): what was accepted stays settled, what was
        only acquired under an earlier leader is AVAILABLE again."""
        if self.broker.cluster is not None:
            return await self._led_share_partition(group_id, topic, index)
        meta = self.broker.topics.get(topic)
        if meta is None:
            raise UnknownTopicOrPartition(f"topic {topic} does not exist")
        key = (group_id, meta.topic_id, index)
        sp = self.partitions.get(key)
        if sp is not None:
            return sp
        partition = self.broker.partition(topic, index)
        reset = self.group_config(group_id, AUTO_OFFSET_RESET)
        start = reset_offset(partition, reset)
        sp = self.partitions.get(key)
        if sp is None:
            sp = self._new_partition(group_id, topic, meta.topic_id, index, start)
            stored = self.store.states.get(key)  # the share coordinator is this broker
            if stored is not None and stored.deleted:
                sp.state_epoch = stored.state_epoch  # a deleted share partition's epoch, bumped
            log.info("%r initialised at %s offset %d (state epoch %d)", sp, reset, start, sp.state_epoch)
            await self.persist(sp)
        return sp

    async def _led_share_partition(self, group_id: str, topic: str, index: int) -> SharePartition:
        partition = self.broker.partition(topic, index)
        key = (group_id, partition.topic_id, index)
        sp = self.partitions.get(key)
        if sp is not None and sp.leader_epoch == partition.leader_epoch:
            return sp
        lock = self._init_locks.setdefault(key, trio.Lock())
        async with lock:
            partition = self.broker.partition(topic, index)
            epoch = partition.leader_epoch
            sp = self.partitions.get(key)
            if sp is not None:
                if sp.leader_epoch == epoch:
                    return sp
                del self.partitions[key]  # served under an earlier leadership: stale
            stored = await self.persister.read(key, epoch)
            if stored is None or stored.deleted:
                await self.configs.refresh(group_id)
                reset = self.group_config(group_id, AUTO_OFFSET_RESET)
                start = reset_offset(partition, reset)
                sp = SharePartition(group_id, topic, partition.topic_id, index, start, **self._limits(group_id))
                if stored is not None:  # deleted: a new life at the bumped state epoch
                    sp.state_epoch = stored.state_epoch
                what = f"initialised at {reset} offset {start} (state epoch {sp.state_epoch})"
            else:
                await self.configs.refresh(group_id)
                sp = SharePartition(group_id, topic, partition.topic_id, index, stored.start_offset,
                                    **self._limits(group_id))
                sp.restore(stored.start_offset, stored.batches())
                sp.state_epoch = stored.state_epoch
                what = f"read back from the share coordinator at leader epoch {epoch}"
            sp.leader_epoch = epoch
            # Written at once: the initial start is fixed, and the share coordinator now
            # fences writes of earlier leaders (its leader epoch is this one).
            await self.persist(sp)
            if partition.leader_epoch != epoch or self.broker.partitions.get((topic, index)) is not partition:
                raise NotLeaderOrFollower(f"{topic}-{index}: leadership moved while its share partition was loaded")
            self.partitions[key] = sp
            log.info("%r %s", sp, what)
            self._init_locks.pop(key, None)
            return sp

    def _limits(self, group_id: str) -> dict[str, int]:
        return {"delivery_limit": self.configs.int_value(group_id, DELIVERY_LIMIT),
                "max_locks": self.configs.int_value(group_id, MAX_LOCKS)}

    def lock_deadline(self, group_id: str) -> float:
        return trio.current_time() + self.lock_duration_ms(group_id) / 1000

    async def acknowledge(self, sp: SharePartition, member_id: str, batches: list[dict]) -> None:
        """Apply and persist one partition's acknowledgements (KafkaError on refusal). When
        the state cannot be written the acknowledgement is answered with the error and
        rolled back in memory, never left settled: the records stay acquired by the member
        until their locks expire, then are delivered again."""
        undo = sp.acknowledge(member_id, batches)
        applied = {offset: entry.state for offset, entry, _before in undo}
        partition = self.broker.partitions.get((sp.topic, sp.index))
        if partition is not None and sp.has_available():
            partition.wake()
        try:
            await self.persist(sp)
        except KafkaError as exc:
            undone = sp.rollback(undo, applied)
            log.warning("%r: acknowledgement of %d records by %s not written (%s): %d rolled back", sp, len(undo),
                        member_id, exc.code.name, undone)
            raise

    async def persist(self, sp: SharePartition) -> None:
        """Write the share partition's state through the share coordinator (a local call on
        a single broker, WriteShareGroupState to the leader of its `__share_group_state`
        partition in a cluster), one write at a time per share partition, each with the
        state as it is when its turn comes, so the newest state is written last. KafkaError
        when it cannot be written. FENCED_STATE_EPOCH (the share partition was deleted since:
        its group was deleted) or FENCED_LEADER_EPOCH (a newer leader wrote) means this copy
        is stale: it leaves memory and writes nothing more; the next ShareFetch here reads
        the state back (Kafka's SharePartitionManager drops a fenced share partition)."""
        if not self._topic_ready and self.broker.cluster is None:
            self.log.ensure_topic()  # the broker's own registry call, brief
            self._topic_ready = True
        lock = self._write_locks.setdefault(sp.key, trio.Lock())
        async with lock:
            if sp.retired:
                return
            try:
                await self.persister.write(sp.key, leader_epoch=sp.leader_epoch, state_epoch=sp.state_epoch,
                                           start_offset=sp.start_offset, states=sp.state_map())
            except KafkaError as exc:
                if exc.code in (ErrorCode.FENCED_STATE_EPOCH, ErrorCode.FENCED_LEADER_EPOCH):
                    self._drop_fenced(sp, exc)
                raise

    def _drop_fenced(self, sp: SharePartition, exc: KafkaError) -> None:
        sp.retired = True
        if self.partitions.get(sp.key) is sp:
            del self.partitions[sp.key]
        log.info("%r: the share coordinator fenced its write (%s: %s); dropped, the next ShareFetch reads the "
                 "state back", sp, exc.code.name, exc)

    async def acknowledge_topics(self, group_id: str, member_id: str,
                                 topics: list[dict]) -> dict[tuple[uuid.UUID, int], tuple[ErrorCode, str | None]]:
        """The AcknowledgementBatches of a ShareFetch or ShareAcknowledge, per partition:
        (topic id, partition) -> (error code, message); partitions without batches are left out."""
        results: dict[tuple[uuid.UUID, int], tuple[ErrorCode, str | None]] = {}
        for topic in topics:
            topic_id = topic["topic_id"]
            name = self.topic_name(topic_id)
            for part in topic["partitions"]:
                batches = part.get("acknowledgement_batches") or []
                if not batches:
                    continue
                index = part["partition_index"]
                key = (topic_id, index)
                try:
                    if name is None:
                        raise KafkaError(f"topic id {topic_id} is not known", ErrorCode.UNKNOWN_TOPIC_ID)
                    sp = self.partitions.get((group_id, topic_id, index))
                    if self.broker.cluster is not None:
                        partition = self.broker.partition(name, index)  # NotLeaderOrFollower elsewhere
                        if sp is not None and sp.leader_epoch != partition.leader_epoch:
                            raise NotLeaderOrFollower(f"{name}-{index}: its share partition is served under "
                                                      f"leader epoch {partition.leader_epoch} now")
                    if sp is None:
                        raise KafkaError(f"share group {group_id} has no share partition {name}-{index}",
                                         ErrorCode.INVALID_RECORD_STATE)
                    await self.acknowledge(sp, member_id, batches)
                    results[key] = (ErrorCode.NONE, None)
                except KafkaError as exc:
                    log.info("acknowledgement of %s-%d by %s of share group %s: %s (%s)", name, index, member_id,
                             group_id, exc.code.name, exc)
                    results[key] = (exc.code, str(exc))
        return results

    def topic_name(self, topic_id: uuid.UUID) -> str | None:
        """A topic's name from its id: this broker's registry, in a cluster else the metadata cache."""
        name = self.broker.topic_name_for_id(topic_id)
        if name is None and self.broker.cluster is not None:
            from server.cluster.leader_hints import topic_name_by_id

            name = topic_name_by_id(self.broker, topic_id)
        return name

    def connection_closed(self, connection_id: int) -> None:
        """The connection that opened share sessions is gone (the consumer died or closed):
        the sessions end and their members' records come back now (Kafka's
        ShareSessionCache disconnect listener)."""
        for session in self.sessions.opened_by(connection_id):
            log.info("share group %s: connection %d of member %s closed; its share session ends",
                     session.group_id, connection_id, session.member_id)
            self.sessions.close(session.group_id, session.member_id)
            self.release(session.group_id, session.member_id)

    def close_session(self, group_id: str, member_id: str) -> None:
        """ShareSessionEpoch -1: the session ends and what the member still holds comes back."""
        session = self.sessions.close(group_id, member_id)
        if session is not None:
            self.release(group_id, member_id, keys=set(session.partitions))
