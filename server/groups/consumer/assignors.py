"""Server-side partition assignors of KIP-848 consumer groups: `uniform` and `range`.

With group.protocol=consumer the coordinator, not a group leader, computes every member's
target assignment. Clients pick an assignor by name (ConsumerGroupHeartbeat's
ServerAssignor); without one the broker uses the first of group.consumer.assignors, which
Kafka defaults to "uniform, range".

These are pure functions of their input (no trio, no I/O) and deterministic: members, topics
and partitions are always visited in sorted order, so the same input gives the same output on
every broker and in every test. They follow Kafka's implementations
(group-coordinator/.../assignor/UniformAssignor.java, UniformHomogeneousAssignmentBuilder.java,
UniformHeterogeneousAssignmentBuilder.java, RangeAssignor.java in Kafka's trunk of October
2024, the 4.0 line); where they differ it is said at the place that differs. Neither assignor
looks at racks: Kafka's rack-aware variant (KAFKA-14702) was dropped when the uniform builders
were rewritten for speed, and its range assignor never had one. `rack_id` and
`partition_racks` are carried for a future rack-aware assignor.

Input is tolerated rather than trusted: subscriptions to topics missing from `topics` are
ignored (Kafka raises PartitionAssignorException instead), and a current assignment is cleaned
before use (partitions beyond the topic's count, of unsubscribed topics, or claimed by an
earlier member in sorted member-id order are dropped), because a target assignment computed
before a topic was deleted or a member left may still be passed in.
"""

from __future__ import annotations

import uuid
from collections.abc import Collection, Mapping
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Protocol

__all__ = [
    "ASSIGNORS",
    "DEFAULT_ASSIGNOR",
    "MemberSubscription",
    "PartitionAssignor",
    "RangeAssignor",
    "TopicInfo",
    "UniformAssignor",
]

Assignment = dict[uuid.UUID, frozenset[int]]


@dataclass(frozen=True)
class MemberSubscription:
    """What the assignor needs to know about one member (Kafka's MemberSubscriptionAndAssignment)."""

    topic_ids: frozenset[uuid.UUID]
    """The topics this member subscribes to, resolved to ids (only existing topics)."""
    rack_id: str | None = None
    assigned: Mapping[uuid.UUID, frozenset[int]] = field(default_factory=dict)
    """The member's current target assignment: what the sticky assignor tries to keep."""
    instance_id: str | None = None
    """group.instance.id of a static member: the range assignor orders static members by it."""


@dataclass(frozen=True)
class TopicInfo:
    """A subscribed topic's metadata (Kafka's TopicMetadata / SubscribedTopicDescriber)."""

    name: str
    partitions: int
    partition_racks: Mapping[int, frozenset[str]] = field(default_factory=dict)
    """partition -> racks of its replicas (empty: unknown). Unused: no assignor is rack-aware."""


class PartitionAssignor(Protocol):
    """A server-side assignor: members and topic metadata in, one assignment per member out."""

    name: str

    def assign(
        self, members: Mapping[str, MemberSubscription], topics: Mapping[uuid.UUID, TopicInfo]
    ) -> dict[str, dict[uuid.UUID, frozenset[int]]]:
        """Return an entry for every member (empty when it gets nothing); every partition of a
        subscribed topic goes to exactly one member subscribing to it."""
        ...


# --------------------------------------------------------------------------- shared helpers


def _subscriptions(
    members: Mapping[str, MemberSubscription], topics: Mapping[uuid.UUID, TopicInfo]
) -> dict[str, frozenset[uuid.UUID]]:
    """Each member's subscription narrowed to topics that exist, so a stale topic id can
    neither crash the assignor nor make an otherwise homogeneous group look heterogeneous."""
    return {m: frozenset(t for t in members[m].topic_ids if t in topics) for m in sorted(members)}


def _current_assignment(
    members: Mapping[str, MemberSubscription],
    topics: Mapping[uuid.UUID, TopicInfo],
    subscriptions: Mapping[str, frozenset[uuid.UUID]],
) -> dict[str, dict[uuid.UUID, list[int]]]:
    """The members' current assignments, cleaned so that the sticky algorithms can rely on what
    Kafka's GroupSpec guarantees: only subscribed, existing partitions, each owned at most once.

    Partition lists are sorted; topics appear in sorted id order. A partition claimed twice
    stays with the member whose id sorts first.
    """
    claimed: set[tuple[uuid.UUID, int]] = set()
    result: dict[str, dict[uuid.UUID, list[int]]] = {}
    for member_id in sorted(members):
        kept: dict[uuid.UUID, list[int]] = {}
        subscribed = subscriptions[member_id]
        assigned = members[member_id].assigned
        for topic_id in sorted(t for t in assigned if t in subscribed):
            count = topics[topic_id].partitions
            partitions = [
                p for p in sorted(assigned[topic_id]) if 0 <= p < count and (topic_id, p) not in claimed
            ]
            claimed.update((topic_id, p) for p in partitions)
            if partitions:
                kept[topic_id] = partitions
        result[member_id] = kept
    return result


def _freeze(assignment: Mapping[uuid.UUID, Collection[int]]) -> Assignment:
    """Drop empty topics and freeze: the coordinator stores and compares these values."""
    return {t: frozenset(ps) for t, ps in sorted(assignment.items()) if ps}


def _is_homogeneous(subscriptions: Mapping[str, frozenset[uuid.UUID]]) -> bool:
    """Kafka's SubscriptionType.HOMOGENEOUS: every member subscribes to the same topics."""
    return len(set(subscriptions.values())) <= 1


# --------------------------------------------------------------------------- uniform


class UniformAssignor:
    """Kafka's UniformAssignor: spread partitions evenly, move as few as possible.

    All members subscribing to the same topics (the common case) takes the homogeneous path,
    which guarantees member counts differing by at most one. Otherwise the heterogeneous path
    keeps every still-valid partition, hands out the rest to the least loaded subscribers and
    then moves partitions from the most to the least loaded subscribers of each topic until no
    move improves balance (balanced as far as the subscriptions allow).
    """

    name = "uniform"

    def assign(
        self, members: Mapping[str, MemberSubscription], topics: Mapping[uuid.UUID, TopicInfo]
    ) -> dict[str, dict[uuid.UUID, frozenset[int]]]:
        """Compute the target assignment; see the class docstring."""
        if not members:
            return {}
        subscriptions = _subscriptions(members, topics)
        current = _current_assignment(members, topics, subscriptions)
        if _is_homogeneous(subscriptions):
            return _assign_uniform_homogeneous(subscriptions, current, topics)
        return _assign_uniform_heterogeneous(subscriptions, current, topics)


def _assign_uniform_homogeneous(
    subscriptions: Mapping[str, frozenset[uuid.UUID]],
    current: Mapping[str, Mapping[uuid.UUID, list[int]]],
    topics: Mapping[uuid.UUID, TopicInfo],
) -> dict[str, Assignment]:
    """Kafka's UniformHomogeneousAssignmentBuilder: quotas first, then keep, then fill.

    Every member's quota is total // members, and total % members of them get one more. A
    member keeps its current partitions up to its quota; the partitions over quota join the
    never-assigned ones, and members under quota take contiguous runs of that list in member
    order.

    Difference from Kafka: Kafka hands the extra partitions to the first members in iteration
    order whatever they hold, so a member holding quota + 1 can lose a partition while another
    member that had fewer is given room for one more. Here the extras go first to members that
    currently hold more than the minimum quota (then by member id). The result is as balanced,
    and strictly stickier: when a member leaves a balanced group nobody loses a partition, and
    when one joins nobody loses more than balance requires.
    """
    member_ids = sorted(subscriptions)
    topic_ids = sorted(next(iter(subscriptions.values())))
    result: dict[str, Assignment] = {m: {} for m in member_ids}
    if not topic_ids:
        return result

    owned = {(t, p) for held in current.values() for t, ps in held.items() for p in ps}
    unassigned = [
        (t, p) for t in topic_ids for p in range(topics[t].partitions) if (t, p) not in owned
    ]
    total = sum(topics[t].partitions for t in topic_ids)
    min_quota, extras = divmod(total, len(member_ids))

    def held(member_id: str) -> int:
        return sum(len(ps) for ps in current[member_id].values())

    by_need_for_extra = sorted(member_ids, key=lambda m: (held(m) <= min_quota, m))
    quotas = {m: min_quota + (i < extras) for i, m in enumerate(by_need_for_extra)}

    kept: dict[str, dict[uuid.UUID, list[int]]] = {}
    for member_id in member_ids:
        room = quotas[member_id]
        mine: dict[uuid.UUID, list[int]] = {}
        for topic_id, partitions in current[member_id].items():
            mine[topic_id] = partitions[:room]
            unassigned.extend((topic_id, p) for p in partitions[room:])
            room -= len(mine[topic_id])
        kept[member_id] = mine

    next_index = 0
    for member_id in member_ids:
        room = quotas[member_id] - sum(len(ps) for ps in kept[member_id].values())
        for topic_id, partition in unassigned[next_index : next_index + room]:
            kept[member_id].setdefault(topic_id, []).append(partition)
        next_index += room
    assert next_index >= len(unassigned), "quotas sum to the partition count"
    return {m: _freeze(kept[m]) for m in member_ids}


class _LoadBalancer:
    """Kafka's MemberAssignmentBalancer: yields least / most loaded subscribers of one topic.

    The subscribers are sorted by (partition count, member index). A "least loaded range" at
    the left grows rightwards and a "most loaded range" at the right grows leftwards; within a
    range members are served round-robin, so consecutive partitions go to (or come from)
    different members and counts rise (or fall) level by level. Kept as Kafka has it, including
    the way excluding a member reorders the most loaded range, so that outputs match Kafka's.
    """

    def __init__(self, sizes: list[int]) -> None:
        self.sizes = sizes  # shared with the builder: partition count per member index
        self.sorted: list[int] = []
        self.least_end = self.least_level = self.next_least = 0
        self.most_start = self.most_end = self.most_level = self.next_most = 0

    def initialize(self, members: list[int]) -> int:
        """Reset for a topic's subscribers; return max - min partition count among them."""
        self.sorted = sorted(members, key=lambda i: (self.sizes[i], i))
        n = len(self.sorted)
        self.least_end = 0  # least loaded range: [0, least_end)
        self.least_level = self.sizes[self.sorted[0]] - 1
        self.next_least = 0
        self.most_start = n  # most loaded range: [most_start, most_end)
        self.most_end = n
        self.most_level = self.sizes[self.sorted[-1]] + 1
        self.next_most = n - 1
        return self.sizes[self.sorted[-1]] - self.sizes[self.sorted[0]]

    def next_least_loaded(self) -> int:
        """The member to give the next partition to (assumes it then holds one more)."""
        if self.next_least >= self.least_end:
            # Everyone in the range got one: raise its level and take in members at that level.
            self.least_level += 1
            while (
                self.least_end < len(self.sorted)
                and self.sizes[self.sorted[self.least_end]] == self.least_level
            ):
                self.least_end += 1
            self.next_least = 0
        member = self.sorted[self.next_least]
        self.next_least += 1
        return member

    def next_most_loaded(self) -> int:
        """The member to take the next partition from, or -1 when no one is left."""
        if self.next_most < self.most_start:
            if self.most_end <= self.most_start and self.most_start > 0:
                # The range emptied through exclusions: restart at the next member's level.
                self.most_level = self.sizes[self.sorted[self.most_start - 1]]
            else:
                self.most_level -= 1
            while self.most_start > 0 and self.sizes[self.sorted[self.most_start - 1]] == self.most_level:
                self.most_start -= 1
            self.next_most = self.most_end - 1
        if self.next_most < 0:
            return -1
        member = self.sorted[self.next_most]
        self.next_most -= 1
        return member

    def exclude_most_loaded(self) -> None:
        """Drop the member last returned by next_most_loaded (it has nothing left to give)."""
        i, last = self.next_most + 1, self.most_end - 1
        self.sorted[i], self.sorted[last] = self.sorted[last], self.sorted[i]
        self.most_end -= 1

    def is_balanced(self) -> bool:
        """Moving a partition between the two ranges would no longer improve balance."""
        return self.most_level - self.least_level <= 1


_MAX_BALANCE_ITERATIONS = 16
"""Kafka's cap on rounds over all topics: overlapping subscriptions can converge slowly, and
each round roughly halves the imbalance."""


def _assign_uniform_heterogeneous(
    subscriptions: Mapping[str, frozenset[uuid.UUID]],
    current: Mapping[str, Mapping[uuid.UUID, list[int]]],
    topics: Mapping[uuid.UUID, TopicInfo],
) -> dict[str, Assignment]:
    """Kafka's UniformHeterogeneousAssignmentBuilder: keep, fill the least loaded, rebalance.

    1. Every member keeps all its current partitions of topics it still subscribes to.
    2. Unowned partitions go, topic by topic, to that topic's least loaded subscribers. Topics
       with the most partitions per subscriber go first (then fewer subscribers, then topic
       id): they are the hardest to balance, so they are placed while there is most freedom.
    3. Repeatedly, per topic, partitions move from its most loaded subscribers to its least
       loaded ones until the counts differ by at most one, round after round over all topics
       until a full round moves nothing (or 16 rounds).
    """
    member_ids = sorted(subscriptions)
    subscribers: dict[uuid.UUID, list[int]] = {}
    for index, member_id in enumerate(member_ids):
        for topic_id in subscriptions[member_id]:
            subscribers.setdefault(topic_id, []).append(index)

    owners: dict[uuid.UUID, list[int]] = {t: [-1] * topics[t].partitions for t in subscribers}
    sizes = [0] * len(member_ids)
    target: list[dict[uuid.UUID, set[int]]] = []
    for index, member_id in enumerate(member_ids):
        target.append({t: set(ps) for t, ps in current[member_id].items()})
        for topic_id, partitions in current[member_id].items():
            sizes[index] += len(partitions)
            for p in partitions:
                owners[topic_id][p] = index

    def topic_order(topic_id: uuid.UUID) -> tuple[Fraction, int, uuid.UUID]:
        count = len(subscribers[topic_id])
        return (-Fraction(topics[topic_id].partitions, count), count, topic_id)

    def move(topic_id: uuid.UUID, partition: int, to: int) -> None:
        old = owners[topic_id][partition]
        if old != -1:
            target[old][topic_id].discard(partition)
            sizes[old] -= 1
        target[to].setdefault(topic_id, set()).add(partition)
        owners[topic_id][partition] = to
        sizes[to] += 1

    balancer = _LoadBalancer(sizes)

    # 2. Place the unowned partitions.
    for topic_id in sorted(subscribers, key=topic_order):
        free = [p for p, owner in enumerate(owners[topic_id]) if owner == -1]
        if not free:
            continue
        balancer.initialize(subscribers[topic_id])
        for partition in free:
            move(topic_id, partition, balancer.next_least_loaded())

    # 3. Rebalance, only topics with a choice of subscriber.
    def balance_topic(topic_id: uuid.UUID) -> int:
        if balancer.initialize(subscribers[topic_id]) <= 1:
            return 0
        # Each member's partitions of this topic, taken from the highest down.
        held: dict[int, list[int]] = {}
        for p, owner in enumerate(owners[topic_id]):
            held.setdefault(owner, []).append(p)
        moved = 0
        while not balancer.is_balanced():
            giver = balancer.next_most_loaded()
            while giver != -1 and not held.get(giver):
                balancer.exclude_most_loaded()
                giver = balancer.next_most_loaded()
            if giver == -1:
                break  # nobody loaded has a partition of this topic left to give
            partition = held[giver].pop()
            taker = balancer.next_least_loaded()
            if balancer.is_balanced():
                break
            move(topic_id, partition, taker)
            moved += 1
        return moved

    movable = sorted((t for t in subscribers if len(subscribers[t]) >= 2), key=topic_order)
    last_rebalanced = -1
    for _ in range(_MAX_BALANCE_ITERATIONS):
        for position, topic_id in enumerate(movable):
            if position == last_rebalanced:
                # A full round since the last move without moving anything: done.
                return {m: _freeze(target[i]) for i, m in enumerate(member_ids)}
            if balance_topic(topic_id) > 0 or last_rebalanced == -1:
                last_rebalanced = position
    return {m: _freeze(target[i]) for i, m in enumerate(member_ids)}


# --------------------------------------------------------------------------- range


class RangeAssignor:
    """Kafka's (4.0 line) RangeAssignor: per topic, contiguous ranges in member order.

    Each topic's partitions are cut into contiguous ranges over the members subscribing to it:
    partitions // subscribers each, the first partitions % subscribers members one more.
    Members are ordered static members first by group.instance.id, then the others by member
    id. So members with the same subscription get the same partition numbers of topics with
    equal partition counts (co-partitioning, what joins across topics need).

    Kafka dropped the older sticky variant (KAFKA-16944): stickiness and co-partitioning could
    not both be had, so the target is recomputed from scratch every time; ordering static
    members by instance id is what keeps a restarted static member on its partitions. The
    current assignment is therefore ignored here too.
    """

    name = "range"

    def assign(
        self, members: Mapping[str, MemberSubscription], topics: Mapping[uuid.UUID, TopicInfo]
    ) -> dict[str, dict[uuid.UUID, frozenset[int]]]:
        """Compute the target assignment; see the class docstring."""
        subscriptions = _subscriptions(members, topics)
        ordered = sorted(members, key=lambda m: _static_first(m, members[m]))
        result: dict[str, dict[uuid.UUID, frozenset[int]]] = {m: {} for m in ordered}
        for topic_id in sorted({t for ts in subscriptions.values() for t in ts}):
            takers = [m for m in ordered if topic_id in subscriptions[m]]
            quota, extras = divmod(topics[topic_id].partitions, len(takers))
            start = 0
            for i, member_id in enumerate(takers):
                end = start + quota + (i < extras)
                if end > start:
                    result[member_id][topic_id] = frozenset(range(start, end))
                start = end
        return {m: dict(sorted(result[m].items())) for m in sorted(result)}


def _static_first(member_id: str, member: MemberSubscription) -> tuple[bool, str, str]:
    """Kafka's range member order: static members by instance id, then dynamic by member id
    (member id also breaks the tie of two members claiming one instance id)."""
    if member.instance_id is not None:
        return (False, member.instance_id, member_id)
    return (True, member_id, member_id)


ASSIGNORS: dict[str, PartitionAssignor] = {"uniform": UniformAssignor(), "range": RangeAssignor()}
DEFAULT_ASSIGNOR = "uniform"  # Kafka's group.consumer.assignors default order: uniform, range
