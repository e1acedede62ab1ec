"""One KIP-848 consumer group in memory: the state its records describe.

A consumer group is Kafka's ConsumerGroup: a group epoch (bumped whenever the members or
their subscriptions, or the subscribed topics, change), the subscription metadata (the
subscribed topics' ids and partition counts when the epoch was set), a target assignment
computed by the server-side assignor at an assignment epoch, and members each with a
member epoch and their current assignment, reconciled towards their target
(server/groups/consumer/reconcile.py). Every field is set by `apply`, from a record
(server/groups/consumer/records.py), both when the coordinator replays __consumer_offsets
and after it appended a change: memory is what the log says.

Its state, as DescribeGroups/ListGroups/ConsumerGroupDescribe report it: Empty (no
members), Assigning (the group epoch is ahead of the target assignment), Reconciling (a
member has not reached the target yet), Stable.

Offsets are kept as for any group (`GroupOffsets`); the offset store (offsets.py) reads
`is_`/`state`/`protocol_type`/`subscribed_topics` as it does for a classic group, which is
why `state` is a classic `GroupState` (Empty while there are no members, Stable otherwise)
and `consumer_state` is the real one.

A member with `classic` metadata speaks JoinGroup/SyncGroup/Heartbeat/LeaveGroup: Kafka
4.0's online upgrade keeps a classic group's members when the first consumer-protocol
member arrives (server/groups/consumer/migration.py).
"""

from __future__ import annotations

import enum
import uuid
from dataclasses import dataclass, field

from server.groups import records as classic_rec
from server.groups.consumer import records as crec
from server.groups.consumer.reconcile import MemberAssignment, MemberState, Partitions
from server.groups.group_state import GroupState
from server.groups.group_offsets import GroupOffsets

LEAVE_EPOCH = -1
STATIC_LEAVE_EPOCH = -2


class ConsumerGroupState(enum.Enum):
    EMPTY = "Empty"
    ASSIGNING = "Assigning"
    RECONCILING = "Reconciling"
    STABLE = "Stable"
    DEAD = "Dead"

    def __str__(self) -> str:
        return self.value


@dataclass(eq=False)
class ConsumerMember:
    member_id: str
    instance_id: str | None = None
    rack_id: str | None = None
    client_id: str = ""
    client_host: str = ""
    subscribed_topic_names: list[str] = field(default_factory=list)
    subscribed_topic_regex: str | None = None
    rebalance_timeout_ms: int = -1
    server_assignor: str | None = None
    assignment: MemberAssignment = field(default_factory=MemberAssignment)
    # Set for a member that speaks the classic protocol (an upgraded group's old members).
    classic: crec.ClassicMemberMetadata | None = None

    @property
    def member_epoch(self) -> int:
        return self.assignment.member_epoch

    def metadata_value(self) -> crec.MemberMetadataValue:
        return crec.MemberMetadataValue(self.instance_id, self.rack_id, self.client_id, self.client_host,
                                        list(self.subscribed_topic_names), self.subscribed_topic_regex,
                                        self.rebalance_timeout_ms, self.server_assignor, self.classic)


class ConsumerGroup(GroupOffsets):
    protocol_type = "consumer"
    is_consumer_group = True

    def __init__(self, group_id: str, now_ms: int) -> None:
        super().__init__()
        self.group_id = group_id
        self.group_epoch = 0
        self.assignment_epoch = 0
        self.subscription_metadata: dict[str, crec.TopicMetadata] = {}
        self.members: dict[str, ConsumerMember] = {}
        self.static_members: dict[str, str] = {}
        self.target: dict[str, Partitions] = {}
        self.dead = False
        self.state_timestamp = now_ms
        self.pending_members: dict[str, float] = {}  # the offset store asks; always empty here

    def __repr__(self) -> str:
        return f"<ConsumerGroup {self.group_id!r} {self.consumer_state} epoch {self.group_epoch}>"

    # -- what the offset store and the admin APIs read
    @property
    def consumer_state(self) -> ConsumerGroupState:
        if self.dead:
            return ConsumerGroupState.DEAD
        if not self.members:
            return ConsumerGroupState.EMPTY
        if self.group_epoch > self.assignment_epoch:
            return ConsumerGroupState.ASSIGNING
        for m in self.members.values():
            if m.assignment.state != MemberState.STABLE or m.member_epoch != self.assignment_epoch:
                return ConsumerGroupState.RECONCILING
        return ConsumerGroupState.STABLE

    @property
    def state(self) -> GroupState:
        if self.dead:
            return GroupState.DEAD
        return GroupState.STABLE if self.members else GroupState.EMPTY

    def is_(self, *states: GroupState) -> bool:
        return self.state in states

    def transition(self, state: GroupState, now_ms: int) -> None:
        """Only Dead is reachable from outside (deletion, expiry)."""
        if state == GroupState.DEAD:
            self.dead = True
            self.state_timestamp = now_ms

    def subscribed_topics(self) -> set[str] | None:
        return set(self.subscription_metadata)

    def is_subscribed_to(self, topic: str) -> bool:
        return topic in self.subscription_metadata

    def deletion_keys(self) -> list[bytes]:
        """The keys to tombstone when the (empty) group is deleted."""
        keys = [crec.ConsumerKey(crec.TARGET_METADATA, self.group_id),
                crec.ConsumerKey(crec.PARTITION_METADATA, self.group_id),
                crec.ConsumerKey(crec.METADATA, self.group_id)]
        return [crec.encode_key(k) for k in keys]

    # -- ownership
    def partition_epochs(self, exclude: str | None = None) -> dict[tuple[uuid.UUID, int], int]:
        """Who owns what: (topic id, partition) -> the owning member's epoch, for partitions
        assigned to or still being revoked by a member (Kafka's currentPartitionEpoch)."""
        out: dict[tuple[uuid.UUID, int], int] = {}
        for m in self.members.values():
            if m.member_id == exclude:
                continue
            for parts in (m.assignment.assigned, m.assignment.pending_revocation):
                for topic_id, ps in parts.items():
                    for p in ps:
                        out[(topic_id, p)] = m.member_epoch
        return out

    def static_member(self, instance_id: str | None) -> ConsumerMember | None:
        member_id = self.static_members.get(instance_id) if instance_id is not None else None
        return self.members.get(member_id) if member_id is not None else None

    # -- records
    def apply(self, key: crec.ConsumerKey, value: bytes | None) -> None:
        """Apply one record (a tombstone when `value` is None)."""
        kind = key.kind
        if kind == crec.METADATA:
            if value is not None:
                self.group_epoch = crec.decode_epoch(value)
        elif kind == crec.PARTITION_METADATA:
            topics = [] if value is None else crec.decode_partition_metadata(value)
            self.subscription_metadata = {t.name: t for t in topics}
        elif kind == crec.TARGET_METADATA:
            if value is not None:
                self.assignment_epoch = crec.decode_epoch(value)
        elif kind == crec.TARGET_MEMBER:
            if value is None:
                self.target.pop(key.member, None)
            else:
                self.target[key.member] = crec.decode_target_member(value)
        elif kind == crec.MEMBER_METADATA:
            if value is None:
                member = self.members.pop(key.member, None)
                if member is not None and member.instance_id is not None \
                        and self.static_members.get(member.instance_id) == member.member_id:
                    del self.static_members[member.instance_id]
                return
            v = crec.decode_member_metadata(value)
            member = self.members.get(key.member)
            if member is None:
                member = self.members[key.member] = ConsumerMember(key.member)
            member.instance_id, member.rack_id = v.instance_id, v.rack_id
            member.client_id, member.client_host = v.client_id, v.client_host
            member.subscribed_topic_names = list(v.subscribed_topic_names)
            member.subscribed_topic_regex = v.subscribed_topic_regex
            member.rebalance_timeout_ms, member.server_assignor = v.rebalance_timeout_ms, v.server_assignor
            member.classic = v.classic
            if v.instance_id is not None:
                self.static_members[v.instance_id] = key.member
        elif kind == crec.CURRENT_ASSIGNMENT:
            member = self.members.get(key.member)
            if value is None:
                if member is not None:
                    member.assignment = MemberAssignment()
                return
            if member is None:  # the assignment record may come before the member's (Kafka allows it)
                member = self.members[key.member] = ConsumerMember(key.member)
            v = crec.decode_current_assignment(value)
            try:
                state = MemberState(v.state)
            except ValueError:
                state = MemberState.UNKNOWN
            member.assignment = MemberAssignment(v.member_epoch, v.previous_member_epoch, state,
                                                 dict(v.assigned), dict(v.pending_revocation))


def is_consumer_group(group: object) -> bool:
    return getattr(group, "is_consumer_group", False)


def classic_deletion_keys(group_id: str) -> list[bytes]:
    return [classic_rec.encode_group_key(classic_rec.GroupKey(group_id))]
