"""One consumer group's state: its members, generation, chosen protocol and offsets.

This module holds the data and the small rules that only look at one group (which
protocol to pick, which transitions are legal, who leads). The coordinator
(`server.groups.coordinator`) drives the transitions and owns the timers.

States, as in Kafka's GroupMetadata (the strings are what DescribeGroups and
ListGroups report)::

    Empty ──join──▶ PreparingRebalance ──all joined / rebalance timeout──▶ CompletingRebalance
      ▲                 ▲      │ (no member left)                               │ leader's SyncGroup
      │                 │      ▼                                                ▼
      └──last leaves────┴── Empty                        Stable ◀────────────────┘
                        ▲                                  │
                        └──join / leave / expiry──────────┘
    Empty ──delete / offsets expired──▶ Dead (removed from the coordinator)
"""

from __future__ import annotations

from dataclasses import dataclass, field

import trio

from wire.errors import ErrorCode

from server.groups.group_state import GroupState
from server.groups.group_offsets import CommittedOffset, GroupOffsets

__all__ = ["CommittedOffset", "Group", "GroupState", "JoinResult", "Member", "Reply", "SyncResult"]


S = GroupState

# Kafka's GroupMetadata.validPreviousStates: a transition from anywhere else is a bug.
VALID_PREVIOUS: dict[GroupState, frozenset[GroupState]] = {
    S.DEAD: frozenset({S.STABLE, S.PREPARING_REBALANCE, S.COMPLETING_REBALANCE, S.EMPTY, S.DEAD}),
    S.COMPLETING_REBALANCE: frozenset({S.PREPARING_REBALANCE}),
    S.STABLE: frozenset({S.COMPLETING_REBALANCE}),
    S.PREPARING_REBALANCE: frozenset({S.STABLE, S.COMPLETING_REBALANCE, S.EMPTY}),
    S.EMPTY: frozenset({S.PREPARING_REBALANCE}),
}


class Reply:
    """A response a blocked JoinGroup or SyncGroup is waiting for: set once, read once."""

    __slots__ = ("_event", "value")

    def __init__(self) -> None:
        self._event = trio.Event()
        self.value = None

    def set(self, value) -> None:
        if not self._event.is_set():
            self.value = value
            self._event.set()

    @property
    def done(self) -> bool:
        return self._event.is_set()

    async def wait(self):
        await self._event.wait()
        return self.value


@dataclass(slots=True)
class JoinResult:
    error: ErrorCode
    member_id: str = ""
    generation_id: int = -1
    protocol_type: str | None = None
    protocol_name: str | None = None
    leader_id: str = ""
    skip_assignment: bool = False
    # (member_id, group_instance_id, metadata) for the leader, empty for followers
    members: list[tuple[str, str | None, bytes]] = field(default_factory=list)


@dataclass(slots=True)
class SyncResult:
    error: ErrorCode
    assignment: bytes = b""
    protocol_type: str | None = None
    protocol_name: str | None = None


@dataclass(eq=False)
class Member:
    member_id: str
    group_instance_id: str | None
    client_id: str
    client_host: str
    session_timeout_ms: int
    rebalance_timeout_ms: int
    protocol_type: str
    protocols: list[tuple[str, bytes]]  # in the member's order of preference
    assignment: bytes = b""
    # trio time after which a silent member is removed (not while it waits in a join/sync)
    expires_at: float = 0.0
    join_reply: Reply | None = None
    sync_reply: Reply | None = None
    is_new: bool = True

    @property
    def is_static(self) -> bool:
        return self.group_instance_id is not None

    @property
    def awaiting_join(self) -> bool:
        return self.join_reply is not None

    @property
    def awaiting_sync(self) -> bool:
        return self.sync_reply is not None

    def metadata_for(self, protocol: str | None) -> bytes:
        for name, metadata in self.protocols:
            if name == protocol:
                return metadata
        return b""

    def matches(self, protocols: list[tuple[str, bytes]]) -> bool:
        return self.protocols == protocols

    def answer_join(self, result: JoinResult) -> None:
        if self.join_reply is not None:
            self.join_reply.set(result)
            self.join_reply = None

    def answer_sync(self, result: SyncResult) -> None:
        if self.sync_reply is not None:
            self.sync_reply.set(result)
            self.sync_reply = None


class IllegalTransition(RuntimeError):
    pass


class Group(GroupOffsets):
    def __init__(self, group_id: str, now_ms: int, state: GroupState = S.EMPTY) -> None:
        GroupOffsets.__init__(self)
        self.group_id = group_id
        self.state = state
        self.state_timestamp = now_ms  # wall ms of the last transition (offset retention)
        self.protocol_type: str | None = None
        self.protocol_name: str | None = None
        self.generation_id = 0
        self.leader_id: str | None = None
        self.members: dict[str, Member] = {}
        self.static_members: dict[str, str] = {}  # group_instance_id -> member_id
        # KIP-394: member ids handed out with MEMBER_ID_REQUIRED, not yet used to join
        self.pending_members: dict[str, float] = {}  # member_id -> trio expiry
        # members that got this generation's JoinGroup answer but have not synced yet
        self.pending_sync: set[str] = set()
        # trio deadline of the running join phase (rebalance or initial delay), or None
        self.join_deadline: float | None = None
        self.in_initial_delay = False  # the join phase is the initial delay (KIP-134)
        self.initial_delay_left_ms = 0  # KIP-134 initial delay budget still unused
        self.new_member_added = False
        self.sync_deadline: float | None = None

    def __repr__(self) -> str:
        return f"<Group {self.group_id!r} {self.state} gen {self.generation_id} {len(self.members)} members>"

    # -- state
    def is_(self, *states: GroupState) -> bool:
        return self.state in states

    def transition(self, state: GroupState, now_ms: int) -> None:
        if self.state not in VALID_PREVIOUS[state]:
            raise IllegalTransition(f"group {self.group_id}: {self.state} -> {state} is not a valid transition")
        self.state = state
        self.state_timestamp = now_ms
        if state in (S.PREPARING_REBALANCE, S.EMPTY, S.DEAD):
            self.pending_sync.clear()
            self.sync_deadline = None

    def deletion_keys(self) -> list[bytes]:
        """The keys to tombstone when the (empty) group is deleted."""
        from server.groups.records import GroupKey, encode_group_key

        return [encode_group_key(GroupKey(self.group_id))]

    # -- members
    @property
    def is_empty(self) -> bool:
        return not self.members

    def has(self, member_id: str) -> bool:
        return member_id in self.members

    def is_leader(self, member_id: str) -> bool:
        return self.leader_id == member_id

    def add(self, member: Member) -> None:
        if not self.members:
            self.protocol_type = member.protocol_type
        self.members[member.member_id] = member
        if member.group_instance_id is not None:
            self.static_members[member.group_instance_id] = member.member_id
        if self.leader_id is None:
            self.leader_id = member.member_id
        self.pending_members.pop(member.member_id, None)

    def remove(self, member_id: str) -> Member | None:
        member = self.members.pop(member_id, None)
        if member is None:
            return None
        if member.group_instance_id is not None and self.static_members.get(member.group_instance_id) == member_id:
            del self.static_members[member.group_instance_id]
        self.pending_sync.discard(member_id)
        if self.leader_id == member_id:
            self.leader_id = next(iter(self.members), None)
        return member

    def replace_static_member(self, instance_id: str, old_id: str, new_id: str) -> Member:
        """KIP-345: a static member came back with a new member id; it inherits the old
        one's place, assignment and leadership. Whoever still waits as the old id is fenced."""
        member = self.members.pop(old_id)
        member.answer_join(JoinResult(ErrorCode.FENCED_INSTANCE_ID, old_id))
        member.answer_sync(SyncResult(ErrorCode.FENCED_INSTANCE_ID))
        member.member_id = new_id
        self.members[new_id] = member
        self.static_members[instance_id] = new_id
        if self.leader_id == old_id:
            self.leader_id = new_id
        if old_id in self.pending_sync:
            self.pending_sync.discard(old_id)
            self.pending_sync.add(new_id)
        return member

    def static_member_id(self, instance_id: str | None) -> str | None:
        return None if instance_id is None else self.static_members.get(instance_id)

    def member_error(self, member_id: str, instance_id: str | None) -> ErrorCode | None:
        """Kafka's ClassicGroup.validateMember: a request naming an instance id (even "") is
        from that static member, which must exist (else UNKNOWN_MEMBER_ID) and be this member
        id (else FENCED_INSTANCE_ID, KIP-345); without one the member id must be known."""
        if instance_id is not None:
            current = self.static_member_id(instance_id)
            if current is None:
                return ErrorCode.UNKNOWN_MEMBER_ID
            return ErrorCode.FENCED_INSTANCE_ID if current != member_id else None
        return None if member_id in self.members else ErrorCode.UNKNOWN_MEMBER_ID

    def is_static_member_fenced(self, member_id: str, instance_id: str | None) -> bool:
        """A request that names a known instance id with some other member id comes from a
        zombie: the instance restarted and another process now holds its id (KIP-345)."""
        current = self.static_member_id(instance_id)
        return current is not None and current != member_id

    def awaiting_join_count(self) -> int:
        return sum(1 for m in self.members.values() if m.awaiting_join)

    def all_joined(self) -> bool:
        return not self.pending_members and all(m.awaiting_join for m in self.members.values())

    def not_yet_rejoined(self) -> list[Member]:
        return [m for m in self.members.values() if not m.awaiting_join]

    def rebalance_timeout_ms(self) -> int:
        return max((m.rebalance_timeout_ms for m in self.members.values()), default=0)

    def elect_joined_leader(self) -> bool:
        """Keep the leader if it rejoined, else pick a member that did (Kafka's
        maybeElectNewJoinedLeader); False when nobody rejoined."""
        leader = self.members.get(self.leader_id) if self.leader_id is not None else None
        if leader is not None and leader.awaiting_join:
            return True
        for member in self.members.values():
            if member.awaiting_join:
                self.leader_id = member.member_id
                return True
        return False

    # -- protocols
    def candidate_protocols(self, exclude: str | None = None) -> set[str] | None:
        """Protocols every member (but `exclude`) supports; None when there is no such member."""
        candidates: set[str] | None = None
        for member in self.members.values():
            if member.member_id == exclude:
                continue
            names = {name for name, _ in member.protocols}
            candidates = names if candidates is None else candidates & names
        return candidates

    def supports_protocols(self, protocol_type: str, protocols: list[tuple[str, bytes]],
                           member_id: str | None = None) -> bool:
        names = {name for name, _ in protocols}
        others = self.candidate_protocols(exclude=member_id)
        if others is None:
            return bool(protocol_type) and bool(names)
        return protocol_type == self.protocol_type and bool(names & others)

    def select_protocol(self) -> str:
        """Each member votes for the first protocol on its list that every member supports;
        the most votes win (ties go to the leader's preference)."""
        candidates = self.candidate_protocols() or set()
        if not candidates:
            raise IllegalTransition(f"group {self.group_id}: members share no protocol")
        votes: dict[str, int] = {}
        for member in self.members.values():
            for name, _ in member.protocols:
                if name in candidates:
                    votes[name] = votes.get(name, 0) + 1
                    break
        leader = self.members.get(self.leader_id) if self.leader_id else None
        order = [name for name, _ in leader.protocols] if leader else sorted(candidates)
        rank = {name: i for i, name in enumerate(order)}
        return max(votes, key=lambda name: (votes[name], -rank.get(name, len(rank))))

    def member_metadata(self) -> list[tuple[str, str | None, bytes]]:
        """What the leader gets in its JoinGroup answer: every member's subscription."""
        return [(m.member_id, m.group_instance_id, m.metadata_for(self.protocol_name))
                for m in self.members.values()]

    def subscribed_topics(self) -> set[str] | None:
        """Topics the members subscribe to, for a consumer group (None: unknown)."""
        from server.groups.records import subscribed_topics

        if self.protocol_type != "consumer" or self.protocol_name is None:
            return None
        topics: set[str] = set()
        for member in self.members.values():
            found = subscribed_topics(member.metadata_for(self.protocol_name))
            if found is None:
                return None
            topics |= found
        return topics

    def is_subscribed_to(self, topic: str) -> bool:
        topics = self.subscribed_topics()
        return True if topics is None else topic in topics
