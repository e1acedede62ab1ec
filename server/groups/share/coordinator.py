"""`ShareCoordinator`: share groups (KIP-932) — membership, share sessions, share partitions.

What Kafka splits over its group coordinator (ShareGroupHeartbeat, the simple assignor),
its SharePartitionManager (share sessions, ShareFetch/ShareAcknowledge, acquisition locks)
and its share coordinator (`__share_group_state`) is one object here, because a single
broker leads every partition: `broker.share`. The handlers (share_group_heartbeat,
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

Durability: a share partition's state is appended to `__share_group_state`
(server/coordinator_log.py) as Kafka's share coordinator records (records.py): a
ShareSnapshot when it is initialised and after every
`share.coordinator.snapshot.update.records.per.snapshot` ShareUpdates, a ShareUpdate on
every acknowledgement before the answer goes out; releases and expired locks are written in
the background. At start-up the newest snapshot of each share partition with the newest
update of its snapshot epoch is replayed: accepted (and rejected) records are never
delivered again after a restart, records only acquired come back as available (with the
deliveries they had). Group membership and share sessions are not persisted: after a
restart members get UNKNOWN_MEMBER_ID / SHARE_SESSION_NOT_FOUND and join and open sessions
again, as clients do.

Single broker only: in a cluster (ZooKeeper mode) the share APIs answer UNSUPPORTED_VERSION,
Kafka's answer when share groups are turned off; placing share coordinators and moving share
state with partition leadership is not done.
"""

from __future__ import annotations

import base64
import logging
import uuid
from dataclasses import dataclass

import trio

from wire.errors import ErrorCode

from server.coordinator_log import CoordinatorLog, append_error
from server.errors import (
    FencedMemberEpoch,
    GroupIdNotFound,
    GroupMaxSizeReached,
    InvalidRequest,
    KafkaError,
    UnknownMemberId,
    UnknownTopicOrPartition,
    error_code_for,
)
from server.groups.share import records as rec
from server.groups.share.assignor import assign
from server.groups.share.group import ShareGroup, ShareMember
from server.groups.share.partition import SharePartition
from server.groups.share.sessions import ShareSessionCache

log = logging.getLogger("trafka.share")

AUTO_OFFSET_RESET = "share.auto.offset.reset"
ISOLATION_LEVEL = "share.isolation.level"
GROUP_CONFIG_DEFAULTS = {AUTO_OFFSET_RESET: "latest", ISOLATION_LEVEL: "read_uncommitted"}
GROUP_CONFIG_VALUES = {AUTO_OFFSET_RESET: ("latest", "earliest"),
                       ISOLATION_LEVEL: ("read_uncommitted", "read_committed")}
SWEEP_S = 0.1


@dataclass(slots=True)
class _Written:
    """A share partition's newest ShareSnapshot as written (epoch, offset -> (state, count),
    start offset) and how many ShareUpdates followed it."""

    snapshot_epoch: int
    states: dict[int, tuple[int, int]]
    start_offset: int
    updates: int


def _expand(snapshot: rec.ShareSnapshot) -> dict[int, tuple[int, int]]:
    return {o: (state, count) for first, last, state, count in snapshot.batches
            for o in range(max(first, snapshot.start_offset), last + 1)}


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
        self.session_timeout_ms = cfg.get("group.share.session.timeout.ms")
        self.heartbeat_interval_ms = cfg.get("group.share.heartbeat.interval.ms")
        self.lock_duration_ms = cfg.get("group.share.record.lock.duration.ms")
        self.delivery_limit = cfg.get("group.share.delivery.count.limit")
        self.max_size = cfg.get("group.share.max.size")
        self.max_locks = cfg.get("group.share.partition.max.record.locks")
        self.updates_per_snapshot = cfg.get("share.coordinator.snapshot.update.records.per.snapshot")
        self.log = CoordinatorLog(broker, rec.STATE_TOPIC, cfg.get("share.coordinator.state.topic.num.partitions"),
                                  rec.STATE_TOPIC_CONFIGS)
        self.groups: dict[str, ShareGroup] = {}
        self.partitions: dict[tuple[str, uuid.UUID, int], SharePartition] = {}
        # What `__share_group_state` holds per share partition: the snapshot updates diff against.
        self._written: dict[tuple[str, uuid.UUID, int], _Written] = {}
        self.sessions = ShareSessionCache()
        # Group configs (Kafka's GROUP config resource): share.auto.offset.reset, share.isolation.level.
        self.group_configs: dict[str, dict[str, str]] = {}
        self._topic_ready = False
        self._nursery: trio.Nursery | None = None

    # ------------------------------------------------------------------ lifecycle
    def load(self) -> None:
        """Blocking, at start-up: replay `__share_group_state` if it exists (it is created
        on the first share partition's initialisation, so brokers without share groups
        have no such topic)."""
        if self.broker.topics.get(rec.STATE_TOPIC) is None:
            return
        self.log.ensure_topic()
        self._topic_ready = True
        # share partition -> [its newest snapshot, the newest update of that snapshot, updates since]
        found: dict[tuple[str, uuid.UUID, int], list] = {}

        def on_record(_partition, _header, record) -> None:
            key = rec.decode_key(record.key)
            if isinstance(key, rec.GroupConfigKey):
                if record.value is None:
                    self.group_configs.pop(key.group_id, None)
                else:
                    self.group_configs[key.group_id] = rec.decode_configs(record.value)
                return
            if record.value is None:  # a tombstone: the share partition's state is gone
                found.pop(key.share_partition, None)
                return
            if not key.update:
                found[key.share_partition] = [rec.decode_snapshot(record.value), None, 0]
                return
            update = rec.decode_update(record.value)
            entry = found.get(key.share_partition)
            # An update applies to the snapshot of its SnapshotEpoch, written before it;
            # one of an older snapshot (compaction keeps it ahead of the newer snapshot) is stale.
            if entry is not None and update.snapshot_epoch == entry[0].snapshot_epoch % rec.SNAPSHOT_EPOCH_MODULO:
                entry[1] = update
                entry[2] += 1

        counts = self.log.replay(on_record)
        for (group_id, topic_id, index), (snapshot, update, updates) in found.items():
            topic = self.broker.topic_name_for_id(topic_id)
            if topic is None:
                continue
            state = snapshot if update is None else rec.apply_update(snapshot, update)
            sp = self._new_partition(group_id, topic, topic_id, index, state.start_offset)
            sp.restore(state.start_offset, state.batches)
            sp.state_epoch = snapshot.state_epoch
            self._written[sp.key] = _Written(snapshot.snapshot_epoch, _expand(snapshot), snapshot.start_offset,
                                             updates)
        if found:
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
                         self.session_timeout_ms)
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

    @property
    def enabled(self) -> bool:
        """Share groups work on a single broker only (see the module docstring); in a
        cluster the share APIs answer UNSUPPORTED_VERSION, as Kafka does with share
        groups turned off."""
        return self.broker.cluster is None

    # ------------------------------------------------------------------ group configs
    def group_config(self, group_id: str, name: str) -> str:
        return self.group_configs.get(group_id, {}).get(name, GROUP_CONFIG_DEFAULTS[name])

    async def alter_group_configs(self, group_id: str, ops: list[tuple[str, int, str | None]],
                                  validate_only: bool) -> None:
        """IncrementalAlterConfigs on a GROUP resource: SET (0) or DELETE (1) of a share
        group config; persisted before the answer. INVALID_CONFIG for anything else."""
        if not group_id:
            raise KafkaError("group id is empty", ErrorCode.INVALID_GROUP_ID)
        if not self.enabled:
            raise InvalidRequest("share group configs need a single broker")
        configs = dict(self.group_configs.get(group_id, {}))
        for name, op, value in ops:
            if name not in GROUP_CONFIG_DEFAULTS:
                raise KafkaError(f"unknown group config {name} (supported: {', '.join(GROUP_CONFIG_DEFAULTS)})",
                                 ErrorCode.INVALID_CONFIG)
            if op == 1:
                configs.pop(name, None)
            elif op == 0:
                if value not in GROUP_CONFIG_VALUES[name]:
                    raise KafkaError(f"{name} must be one of {', '.join(GROUP_CONFIG_VALUES[name])}, not {value!r}",
                                     ErrorCode.INVALID_CONFIG)
                configs[name] = value
            else:
                raise KafkaError(f"{name} is not a list: only SET and DELETE apply", ErrorCode.INVALID_CONFIG)
        if validate_only:
            return
        if not self._topic_ready:
            self.log.ensure_topic()
            self._topic_ready = True
        partition = self.log.partition_for(group_id)
        async with self.log.lock(partition):
            await self.log.append(partition, [(rec.encode_config_key(rec.GroupConfigKey(group_id)),
                                               rec.encode_configs(configs))])
            self.group_configs[group_id] = configs
        log.info("share group %s configs now %s", group_id, configs)

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
        member.expires_at = trio.current_time() + self.session_timeout_ms / 1000
        target = self._target(group)
        if changed or target != group.target:
            group.group_epoch += 1
            group.target = target
            group.assignment_epoch = group.group_epoch
        new_assignment = group.target.get(member_id, {})
        send = member_epoch == 0 or new_assignment != member.assignment or member.member_epoch != group.group_epoch
        member.assignment = new_assignment
        member.member_epoch = group.group_epoch
        await self._initialise(group_id, new_assignment)
        answer = {"member_id": member_id, "member_epoch": member.member_epoch,
                  "heartbeat_interval_ms": self.heartbeat_interval_ms, "assignment": None}
        if send:
            answer["assignment"] = {"topic_partitions": self._topic_partitions(new_assignment)}
        return answer

    def _target(self, group: ShareGroup) -> dict[str, dict[str, list[int]]]:
        counts = {}
        for topic in group.subscribed_topics():
            meta = self.broker.topics.get(topic)
            if meta is not None:
                counts[topic] = meta.partitions
        return assign({m.member_id: m.subscribed_topic_names for m in group.members.values()}, counts)

    def _topic_partitions(self, assignment: dict[str, list[int]], *, names: bool = False) -> list[dict]:
        out = []
        for topic, parts in sorted(assignment.items()):
            meta = self.broker.topics.get(topic)
            if meta is None:
                continue
            entry = {"topic_id": meta.topic_id, "partitions": list(parts)}
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
        sp = SharePartition(group_id, topic, topic_id, index, start, delivery_limit=self.delivery_limit,
                            max_locks=self.max_locks)
        self.partitions[(group_id, topic_id, index)] = sp
        return sp

    async def _initialise(self, group_id: str, assignment: dict[str, list[int]]) -> None:
        """Initialise newly assigned share partitions (Kafka's InitializeShareGroupState), so
        their start is fixed at assignment time; a failure is logged and retried by the
        first ShareFetch, it does not fail the heartbeat."""
        for topic, parts in assignment.items():
            for index in parts:
                try:
                    await self.share_partition(group_id, topic, index)
                except KafkaError as exc:
                    log.warning("share group %s: initialising %s-%d failed: %s (%s)", group_id, topic, index,
                                exc.code.name, exc)

    async def share_partition(self, group_id: str, topic: str, index: int) -> SharePartition:
        """The share partition, initialised on first use at `share.auto.offset.reset`
        (latest: the high watermark; earliest: the log start offset) and persisted, so a
        restart does not move its start."""
        meta = self.broker.topics.get(topic)
        if meta is None:
            raise UnknownTopicOrPartition(f"topic {topic} does not exist")
        key = (group_id, meta.topic_id, index)
        sp = self.partitions.get(key)
        if sp is not None:
            return sp
        partition = self.broker.partition(topic, index)
        reset = self.group_config(group_id, AUTO_OFFSET_RESET)
        start = partition.log.log_start_offset if reset == "earliest" else partition.high_watermark
        sp = self.partitions.get(key)
        if sp is None:
            sp = self._new_partition(group_id, topic, meta.topic_id, index, start)
            log.info("%r initialised at %s offset %d", sp, reset, start)
            await self.persist(sp)
        return sp

    def lock_deadline(self) -> float:
        return trio.current_time() + self.lock_duration_ms / 1000

    async def acknowledge(self, sp: SharePartition, member_id: str, batches: list[dict]) -> None:
        """Apply and persist one partition's acknowledgements (KafkaError on refusal)."""
        sp.acknowledge(member_id, batches)
        partition = self.broker.partitions.get((sp.topic, sp.index))
        if partition is not None and sp.has_available():
            partition.wake()
        await self.persist(sp)

    async def persist(self, sp: SharePartition) -> None:
        """Write the share partition's state to `__share_group_state` (under the partition's
        write lock, so the newest state is written last): a ShareUpdate with what changed
        since the last ShareSnapshot, or a new ShareSnapshot when there is none yet or
        `share.coordinator.snapshot.update.records.per.snapshot` updates followed the last."""
        if not self._topic_ready:
            self.log.ensure_topic()  # the broker's own registry call, brief
            self._topic_ready = True
        partition = self.log.partition_for(sp.group_id)
        async with self.log.lock(partition):
            states = sp.state_map()
            written = self._written.get(sp.key)
            if written is None or written.updates >= self.updates_per_snapshot:
                epoch = 0 if written is None else (written.snapshot_epoch + 1) % rec.SNAPSHOT_EPOCH_MODULO
                key = rec.ShareStateKey(sp.group_id, sp.topic_id, sp.index)
                value = rec.encode_snapshot(rec.ShareSnapshot(epoch, sp.state_epoch, sp.start_offset, rec.runs(states)))
                after = _Written(epoch, states, sp.start_offset, 0)
            else:
                changed = {o: v for o, v in states.items() if written.states.get(o) != v}
                start = rec.NO_START_OFFSET if sp.start_offset == written.start_offset else sp.start_offset
                key = rec.ShareStateKey(sp.group_id, sp.topic_id, sp.index, update=True)
                value = rec.encode_update(rec.ShareUpdate(written.snapshot_epoch, start, rec.runs(changed)))
                after = _Written(written.snapshot_epoch, written.states, written.start_offset, written.updates + 1)
            try:
                await self.log.append(partition, [(rec.encode_key(key), value)])
            except Exception as exc:  # a storage failure too: answered with its code, never a crash
                code = error_code_for(exc)
                code = append_error(code) or code
                raise KafkaError(f"{sp!r}: share state not written ({exc})", code) from exc
            self._written[sp.key] = after

    async def acknowledge_topics(self, group_id: str, member_id: str,
                                 topics: list[dict]) -> dict[tuple[uuid.UUID, int], tuple[ErrorCode, str | None]]:
        """The AcknowledgementBatches of a ShareFetch or ShareAcknowledge, per partition:
        (topic id, partition) -> (error code, message); partitions without batches are left out."""
        results: dict[tuple[uuid.UUID, int], tuple[ErrorCode, str | None]] = {}
        for topic in topics:
            topic_id = topic["topic_id"]
            name = self.broker.topic_name_for_id(topic_id)
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
