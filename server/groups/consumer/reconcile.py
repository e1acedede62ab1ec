"""Reconciling one member towards its target assignment (Kafka's CurrentAssignmentBuilder).

The rule that makes KIP-848 incremental: a member is never given a partition that
another member still owns, and a member that must give partitions up keeps its epoch
until it reports (in its heartbeat's owned partitions) that it has revoked them. So
revocations always come first, and the member's epoch only moves to the target epoch
once nothing is left to revoke. Member states (the int8 Kafka stores):
STABLE 0, UNREVOKED_PARTITIONS 1, UNRELEASED_PARTITIONS 2, UNKNOWN 127.
"""

from __future__ import annotations

import enum
import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace

Partitions = dict[uuid.UUID, frozenset[int]]


class MemberState(enum.IntEnum):
    STABLE = 0
    UNREVOKED_PARTITIONS = 1
    UNRELEASED_PARTITIONS = 2
    UNKNOWN = 127

    @property
    def label(self) -> str:
        return self.name.lower()


@dataclass(slots=True)
class MemberAssignment:
    """The reconciled part of a member: what it has and is giving up, at which epoch."""

    member_epoch: int = 0
    previous_member_epoch: int = -1
    state: MemberState = MemberState.STABLE
    assigned: Partitions = field(default_factory=dict)
    pending_revocation: Partitions = field(default_factory=dict)


class FencedMember(Exception):
    """The member must give up every partition and rejoin (FENCED_MEMBER_EPOCH)."""


def owns_any(owned: Mapping[uuid.UUID, frozenset[int]] | None, partitions: Partitions) -> bool:
    """Whether the member's reported partitions (None: not reported) include any of these."""
    if owned is None:
        return True
    return any(owned.get(t, frozenset()) & ps for t, ps in partitions.items())


def reconcile(current: MemberAssignment, target_epoch: int, target: Partitions,
              owned: Mapping[uuid.UUID, frozenset[int]] | None,
              partition_epoch: Callable[[uuid.UUID, int], int]) -> MemberAssignment:
    """The member's next assignment state (`current` itself when nothing changes).
    `partition_epoch` is the epoch of the member owning a partition, -1 when it is free."""
    state = current.state
    if state == MemberState.STABLE:
        if current.member_epoch == target_epoch:
            return current
        return _next(current, current.member_epoch, target_epoch, target, owned, partition_epoch)
    if state == MemberState.UNREVOKED_PARTITIONS:
        if owns_any(owned, current.pending_revocation):
            return current
        return _next(current, current.member_epoch + 1, target_epoch, target, owned, partition_epoch)
    if state == MemberState.UNRELEASED_PARTITIONS:
        return _next(current, current.member_epoch, target_epoch, target, owned, partition_epoch)
    if owned is None or any(owned.values()):
        raise FencedMember("the member is in an unknown state")
    return _next(current, target_epoch, target_epoch, target, owned, partition_epoch)


def _with_epoch(current: MemberAssignment, epoch: int, **changes) -> MemberAssignment:
    if epoch != current.member_epoch:
        changes["previous_member_epoch"] = current.member_epoch
    return replace(current, member_epoch=epoch, **changes)


def _next(current: MemberAssignment, member_epoch: int, target_epoch: int, target: Partitions,
          owned: Mapping[uuid.UUID, frozenset[int]] | None,
          partition_epoch: Callable[[uuid.UUID, int], int]) -> MemberAssignment:
    assigned: Partitions = {}
    revoking: Partitions = {}
    pending_assignment: Partitions = {}
    unreleased = False
    for topic_id in set(target) | set(current.assigned):
        want = target.get(topic_id, frozenset())
        have = current.assigned.get(topic_id, frozenset())
        keep = have & want
        if keep:
            assigned[topic_id] = keep
        if have - keep:
            revoking[topic_id] = have - keep
        free = set()
        for p in want - keep:
            if partition_epoch(topic_id, p) != -1:
                unreleased = True
            else:
                free.add(p)
        if free:
            pending_assignment[topic_id] = frozenset(free)
    if revoking and owns_any(owned, revoking):
        return _with_epoch(current, member_epoch, state=MemberState.UNREVOKED_PARTITIONS, assigned=assigned,
                           pending_revocation=revoking)
    for topic_id, ps in pending_assignment.items():
        assigned[topic_id] = assigned.get(topic_id, frozenset()) | ps
    state = MemberState.UNRELEASED_PARTITIONS if unreleased else MemberState.STABLE
    return _with_epoch(current, target_epoch, state=state, assigned=assigned, pending_revocation={})
