"""Classic and consumer members in one group: Kafka 4.0's online upgrade and downgrade (KIP-848).

A running application moves from `group.protocol=classic` to `consumer` one process at a
time, so for a while one group holds both kinds of members. Kafka's
GroupMetadataManager does this, and so do we, governed by
`group.consumer.migration.policy` (BIDIRECTIONAL, Kafka 4.0's default; UPGRADE,
DOWNGRADE, DISABLED — 3.9's default, which keeps a group id one type at a time):

- Upgrade (`upgrade`, Kafka's convertToConsumerGroup / ConsumerGroup.fromClassicGroup):
  the first ConsumerGroupHeartbeat for a non-empty classic group of protocol type
  "consumer" turns it into a consumer group. Every classic member becomes a consumer
  member at epoch = the generation, Stable, owning (and targeted at) what its last
  SyncGroup gave it, subscribed to the topics of its ConsumerProtocol subscription, with
  ClassicMemberMetadata (session timeout, JoinGroup protocols) saying it still speaks the
  classic protocol. The records are the classic group's tombstone and the consumer-group
  records, written together with the joining member's own; the joining member then bumps
  the group epoch and the server-side assignor computes the new target as for any member.
- Classic members of a consumer group (`join`, `sync`, `heartbeat`, `leave`, Kafka's
  classicGroup*ToConsumerGroup): a JoinGroup is the classic member's "heartbeat with a
  subscription": it updates the member (subscription and owned partitions decoded from
  its protocol metadata) and reconciles it like ConsumerGroupHeartbeat does, answering at
  once with generation = member epoch and no leader (no client-side assignment). SyncGroup
  returns the reconciled partitions as ConsumerProtocol assignment bytes. Heartbeat
  answers REBALANCE_IN_PROGRESS when the member must rejoin: the group epoch moved past
  its epoch, it has partitions to revoke, or partitions it waits for became free.
  LeaveGroup fences it.
- Downgrade (`downgrade`, Kafka's convertToClassicGroup / ClassicGroup.fromConsumerGroup):
  when a member is fenced or leaves and everyone left speaks the classic protocol, the
  group becomes a classic group again at generation = group epoch, each member with its
  current assignment, and a rebalance starts (its members see REBALANCE_IN_PROGRESS and
  rejoin as in any classic group).

Not done (as in the brief's scope): Kafka's join/sync timeouts for classic members in a
consumer group (a classic member that never rejoins keeps its partitions until its
session or rebalance timeout fences it) and the downgrade by static-member replacement (a
classic member taking a consumer-protocol member's instance id is refused
UNRELEASED_INSTANCE_ID). A classic static member replacing a classic one works as Kafka's:
the new member id takes over the instance id's assignment, the old one is fenced.
"""

from __future__ import annotations

import enum
import logging
import uuid

from wire.errors import ErrorCode

from server.coordinator_log import BadRecord
from server.groups import records as classic_rec
from server.groups.consumer import consumer_protocol as cp
from server.groups.consumer import records as crec
from server.groups.consumer.coordinator_errors import Reject
from server.groups.consumer.group import ConsumerGroup, ConsumerMember
from server.groups.consumer.reconcile import MemberAssignment, MemberState, Partitions
from server.groups.group import Group, JoinResult, Member, SyncResult
from server.groups.group_state import GroupState

log = logging.getLogger("trafka.groups.consumer")
E = ErrorCode


class MigrationPolicy(enum.Enum):
    BIDIRECTIONAL = "bidirectional"
    UPGRADE = "upgrade"
    DOWNGRADE = "downgrade"
    DISABLED = "disabled"

    @classmethod
    def parse(cls, value: str) -> "MigrationPolicy":
        try:
            return cls(str(value).strip().lower())
        except ValueError:
            log.warning("group.consumer.migration.policy=%s is not one of %s; using bidirectional", value,
                        ", ".join(p.value for p in cls))
            return cls.BIDIRECTIONAL

    @property
    def upgrade(self) -> bool:
        return self in (MigrationPolicy.BIDIRECTIONAL, MigrationPolicy.UPGRADE)

    @property
    def downgrade(self) -> bool:
        return self in (MigrationPolicy.BIDIRECTIONAL, MigrationPolicy.DOWNGRADE)


class Migration:
    """The conversions and the classic protocol inside a consumer group; `cc` is the
    ConsumerGroupCoordinator (its records, reconciliation and timers are reused)."""

    def __init__(self, cc) -> None:
        self.cc = cc
        self.policy = MigrationPolicy.parse(cc.c.broker.config.get("group.consumer.migration.policy"))

    @property
    def mixed_allowed(self) -> bool:
        """Classic members may live in a consumer group (DISABLED keeps one type per id)."""
        return self.policy != MigrationPolicy.DISABLED

    # ------------------------------------------------------------------ names and ids
    def _ids(self, parts: dict[str, frozenset[int]]) -> Partitions:
        view = self.cc._topic_view()
        return {view[n][0]: frozenset(ps) for n, ps in parts.items() if n in view and ps}

    def _names(self, parts: Partitions) -> dict[str, frozenset[int]]:
        names = {topic_id: name for name, (topic_id, _) in self.cc._topic_view().items()}
        return {names[t]: ps for t, ps in parts.items() if t in names and ps}

    # ------------------------------------------------------------------ upgrade
    def can_upgrade(self, group: Group) -> bool:
        """Kafka's validateOnlineUpgrade."""
        if not self.policy.upgrade:
            log.info("group %s: cannot upgrade the classic group: the online upgrade is disabled", group.group_id)
            return False
        if group.protocol_type != cp.PROTOCOL_TYPE or not group.protocol_name:
            log.info("group %s: cannot upgrade the classic group: it does not use the consumer protocol",
                     group.group_id)
            return False
        if len(group.members) > self.cc.max_size:
            return False
        return True

    def upgrade(self, group: Group) -> tuple[ConsumerGroup, list[tuple[bytes, bytes | None]]]:
        """The consumer group the classic group becomes (not installed yet) and the records
        that say so: the classic group's tombstone, then Kafka's createConsumerGroupRecords.
        BadRecord when a member's embedded protocol cannot be decoded."""
        gid = group.group_id
        converted = ConsumerGroup(gid, self.cc.c.now_ms())
        converted.offsets = group.offsets
        converted.pending_txn_offsets = group.pending_txn_offsets
        epoch = group.generation_id
        records: list[tuple[crec.ConsumerKey, bytes]] = []
        members: list[ConsumerMember] = []
        for m in group.members.values():
            sub = cp.decode_subscription(m.metadata_for(group.protocol_name))
            assigned = self._ids(cp.decode_assignment(m.assignment))
            member = ConsumerMember(m.member_id, m.group_instance_id, sub.rack_id, m.client_id, m.client_host,
                                    list(sub.topics), None, m.rebalance_timeout_ms, None,
                                    MemberAssignment(epoch, epoch, MemberState.STABLE, assigned, {}),
                                    crec.ClassicMemberMetadata(m.session_timeout_ms, tuple(m.protocols)))
            members.append(member)
            records.append((crec.ConsumerKey(crec.MEMBER_METADATA, gid, m.member_id),
                            crec.encode_member_metadata(member.metadata_value())))
            records.append((crec.ConsumerKey(crec.TARGET_MEMBER, gid, m.member_id),
                            crec.encode_target_member(assigned)))
            records.append((crec.ConsumerKey(crec.CURRENT_ASSIGNMENT, gid, m.member_id),
                            self.cc._assignment_value(member.assignment)))
        metadata = self.cc._subscription_metadata(members, self.cc._topic_view())
        records.append((crec.ConsumerKey(crec.PARTITION_METADATA, gid),
                        crec.encode_partition_metadata(list(metadata.values()))))
        records.append((crec.ConsumerKey(crec.METADATA, gid), crec.encode_epoch(epoch)))
        records.append((crec.ConsumerKey(crec.TARGET_METADATA, gid), crec.encode_epoch(epoch)))
        for key, value in records:
            converted.apply(key, value)
        entries: list[tuple[bytes, bytes | None]] = [(k, None) for k in group.deletion_keys()]
        entries += [(crec.encode_key(k), v) for k, v in records]
        log.info("group %s: upgrading the classic group (generation %d, %d members) to a consumer group", gid,
                 epoch, len(group.members))
        return converted, entries

    def upgraded(self, old: Group, group: ConsumerGroup) -> None:
        """After the upgrade's records are written: the classic members waiting in a join
        or sync rejoin (REBALANCE_IN_PROGRESS), the classic timers go, the members' consumer
        session timers start with their own session timeouts."""
        for member in old.members.values():
            member.answer_join(JoinResult(E.REBALANCE_IN_PROGRESS, member.member_id))
            member.answer_sync(SyncResult(E.REBALANCE_IN_PROGRESS))
        old.transition(GroupState.DEAD, self.cc.c.now_ms())
        # Only the classic group's timers exist yet: the joining member's start after this.
        self.cc.c._timers.cancel_group(old.group_id)
        for member_id in old.members:
            if member_id in group.members:
                self.cc._arm_session(group.group_id, member_id)
        log.info("group %s: is now a consumer group at epoch %d", group.group_id, group.group_epoch)

    # ------------------------------------------------------------------ classic members
    async def join(self, group: ConsumerGroup, *, member_id: str, instance_id: str | None, client_id: str,
                   client_host: str, session_timeout_ms: int, rebalance_timeout_ms: int, protocol_type: str,
                   protocols: list[tuple[str, bytes]], require_known_member_id: bool) -> JoinResult:
        """Kafka's classicGroupJoinToConsumerGroup (the caller holds no lock)."""
        if protocol_type != cp.PROTOCOL_TYPE or not protocols:
            return JoinResult(E.INCONSISTENT_GROUP_PROTOCOL, member_id)
        try:
            sub = cp.decode_subscription(protocols[0][1])
        except BadRecord:
            return JoinResult(E.INCONSISTENT_GROUP_PROTOCOL, member_id)
        if not member_id and require_known_member_id and instance_id is None:
            # KIP-394, as for a classic group; the id is not remembered (Kafka neither).
            return JoinResult(E.MEMBER_ID_REQUIRED, f"{client_id or 'member'}-{uuid.uuid4()}")
        member_id = member_id or f"{client_id or 'member'}-{uuid.uuid4()}"
        gid = group.group_id
        async with self.cc.c._locked(gid) as status:
            if status != E.NONE:
                return JoinResult(status, member_id)
            current = self.cc.c.groups.get(gid)
            if current is not group:
                return JoinResult(E.REBALANCE_IN_PROGRESS, member_id)  # converted meanwhile: rejoin
            existing = group.members.get(member_id)
            if existing is not None and existing.classic is None:
                return JoinResult(E.UNKNOWN_MEMBER_ID, member_id)
            static = group.static_member(instance_id) if existing is None and instance_id is not None else None
            if static is not None and static.classic is None:
                # A classic member taking a consumer-protocol member's instance id: Kafka
                # downgrades the group if that was the last one (not done here).
                return JoinResult(E.UNRELEASED_INSTANCE_ID, member_id)
            epoch = existing.member_epoch if existing is not None else 0
            classic = crec.ClassicMemberMetadata(session_timeout_ms, tuple(protocols))
            try:
                result = await self.cc._heartbeat(
                    gid, member_id, epoch, instance_id, sub.rack_id, rebalance_timeout_ms, list(sub.topics), None,
                    None, self._ids(sub.owned), client_id, client_host, classic=classic,
                    # Kafka's classicGroupJoinToConsumerGroup: a static member joining with an
                    # unknown member id replaces its instance id's current member, which is
                    # fenced (FENCED_INSTANCE_ID) and whose assignment the new one inherits.
                    replace_static=existing is None)
            except Reject as r:
                log.info("group %s: JoinGroup from classic member %s: %s %s", gid, member_id, r.code.name, r.message)
                return JoinResult(E.UNKNOWN_MEMBER_ID if r.code == E.FENCED_MEMBER_EPOCH else r.code, member_id)
            if result.error != E.NONE:
                return JoinResult(result.error, member_id)
            member = group.members[member_id]
            log.info("group %s: classic member %s joined at epoch %d (%s)", gid, member_id, member.member_epoch,
                     member.assignment.state.label)
            return JoinResult(E.NONE, member_id, member.member_epoch, cp.PROTOCOL_TYPE, protocols[0][0], "")

    def _classic_member(self, group: ConsumerGroup, member_id: str, instance_id: str | None
                        ) -> tuple[ErrorCode, ConsumerMember | None]:
        """Kafka's validateConsumerGroupMember + throwIfMemberDoesNotUseClassicProtocol."""
        if instance_id is not None:
            member = group.static_member(instance_id)
            if member is None:
                return E.UNKNOWN_MEMBER_ID, None
            if member.member_id != member_id:
                return E.FENCED_INSTANCE_ID, None
        else:
            member = group.members.get(member_id)
        if member is None or member.classic is None:
            return E.UNKNOWN_MEMBER_ID, None
        return E.NONE, member

    def sync(self, group: ConsumerGroup, *, generation_id: int, member_id: str, instance_id: str | None,
             protocol_type: str | None, protocol_name: str | None) -> SyncResult:
        """Kafka's classicGroupSyncToConsumerGroup: the member's reconciled partitions."""
        error, member = self._classic_member(group, member_id, instance_id)
        if member is None:
            return SyncResult(error)
        if generation_id != member.member_epoch:
            return SyncResult(E.ILLEGAL_GENERATION)
        names = [n for n, _ in member.classic.supported_protocols]
        if (protocol_type is not None and protocol_type != cp.PROTOCOL_TYPE) or (
                protocol_name is not None and protocol_name not in names):
            return SyncResult(E.INCONSISTENT_GROUP_PROTOCOL)
        if group.group_epoch > member.member_epoch and member.assignment.state != MemberState.UNREVOKED_PARTITIONS:
            return SyncResult(E.REBALANCE_IN_PROGRESS)
        self.cc._arm_session(group.group_id, member.member_id)
        version = cp.subscription_version(member.classic.supported_protocols[0][1])
        assignment = cp.encode_assignment(self._names(member.assignment.assigned), version)
        return SyncResult(E.NONE, assignment, cp.PROTOCOL_TYPE, protocol_name or names[0])

    def heartbeat(self, group: ConsumerGroup, *, generation_id: int, member_id: str,
                  instance_id: str | None) -> ErrorCode:
        """Kafka's classicGroupHeartbeatToConsumerGroup."""
        error, member = self._classic_member(group, member_id, instance_id)
        if member is None:
            return error
        if generation_id != member.member_epoch:
            return E.ILLEGAL_GENERATION
        self.cc._arm_session(group.group_id, member.member_id)
        state = member.assignment.state
        if member.member_epoch < group.group_epoch or state == MemberState.UNREVOKED_PARTITIONS or (
                state == MemberState.UNRELEASED_PARTITIONS and not self._waiting_on_unreleased(group, member)):
            return E.REBALANCE_IN_PROGRESS
        return E.NONE

    @staticmethod
    def _waiting_on_unreleased(group: ConsumerGroup, member: ConsumerMember) -> bool:
        """Whether a partition of the member's target is still owned by another member."""
        owners = group.partition_epochs(exclude=member.member_id)
        for topic_id, ps in group.target.get(member.member_id, {}).items():
            missing = ps - member.assignment.assigned.get(topic_id, frozenset())
            if any((topic_id, p) in owners for p in missing):
                return True
        return False

    async def leave(self, group: ConsumerGroup, leaving: list[tuple[str, str | None]]
                    ) -> tuple[ErrorCode, list[ErrorCode]]:
        """Kafka's classicGroupLeaveToConsumerGroup: each named classic member is fenced."""
        gid = group.group_id
        errors: list[ErrorCode] = []
        async with self.cc.c._locked(gid) as status:
            if status != E.NONE:
                return status, [status] * len(leaving)
            for member_id, instance_id in leaving:
                current = self.cc.c.groups.get(gid)
                if current is not group:  # downgraded by the previous leave
                    errors.append(E.UNKNOWN_MEMBER_ID)
                    continue
                if instance_id is not None and not member_id:
                    member = group.static_member(instance_id)
                    member_id = member.member_id if member is not None else ""
                error, member = self._classic_member(group, member_id, instance_id)
                if member is None:
                    errors.append(error)
                    continue
                try:
                    await self.cc._fence(group, member, "left the group (LeaveGroup)")
                except Reject as r:
                    errors.append(r.code)
                    continue
                errors.append(E.NONE)
        return E.NONE, errors

    # ------------------------------------------------------------------ downgrade
    def can_downgrade(self, group: ConsumerGroup, leaving_member_id: str) -> bool:
        """Kafka's validateOnlineDowngradeWithFencedMember."""
        others = [m for mid, m in group.members.items() if mid != leaving_member_id]
        if not others or any(m.classic is None for m in others):
            return False
        if not self.policy.downgrade:
            log.info("group %s: cannot downgrade to a classic group: the online downgrade is disabled",
                     group.group_id)
            return False
        return len(others) <= self.cc.c.max_group_size

    async def downgrade(self, group: ConsumerGroup, leaving_member_id: str) -> None:
        """The consumer group, without the leaving member, becomes a classic group (the
        caller holds the partition's lock): the consumer records' tombstones and the
        classic GroupMetadata record, then a rebalance."""
        c = self.cc.c
        gid = group.group_id
        now = c.now_ms()
        classic = Group(gid, now, GroupState.STABLE)
        classic.offsets = group.offsets
        classic.pending_txn_offsets = group.pending_txn_offsets
        classic.generation_id = group.group_epoch
        for m in group.members.values():
            if m.member_id == leaving_member_id or m.classic is None:
                continue
            protocols = list(m.classic.supported_protocols)
            version = cp.subscription_version(protocols[0][1])
            member = Member(m.member_id, m.instance_id, m.client_id, m.client_host, m.classic.session_timeout_ms,
                            m.rebalance_timeout_ms if m.rebalance_timeout_ms > 0 else m.classic.session_timeout_ms,
                            cp.PROTOCOL_TYPE, protocols,
                            cp.encode_assignment(self._names(m.assignment.assigned), version), is_new=False)
            classic.add(member)
        classic.protocol_name = classic.select_protocol()
        tombstones: list[tuple[bytes, bytes | None]] = []
        for mid in group.members:
            tombstones += [(crec.encode_key(k), None) for k, _ in self.cc._removal_records(gid, mid)]
        tombstones += [(k, None) for k in group.deletion_keys()]
        entries = tombstones + [(classic_rec.encode_group_key(classic_rec.GroupKey(gid)), c._group_value(classic))]
        try:
            await c._append(c.partition_for(gid), entries)
        except Exception as exc:
            raise Reject(c._write_error(exc, f"downgrading group {gid}", group_write=True),
                                 "writing to __consumer_offsets failed") from None
        for mid in group.members:
            self.cc._cancel_member_timers(gid, mid)
        group.members.clear()
        group.dead = True
        c.groups[gid] = classic
        for member in classic.members.values():
            c._touch(classic, member)
        log.info("group %s: downgraded to a classic group at generation %d (%d members)", gid,
                 classic.generation_id, len(classic.members))
        c._prepare_rebalance(classic, f"downgrade of group {gid} from consumer to classic")
