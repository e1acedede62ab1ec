"""One share group's membership (KIP-932): members, epochs, the target assignment.

Why apart from the classic group: a share group has no join/sync phases and no revocation
— the coordinator computes the assignment and hands it out on the next heartbeat, and the
member epoch is simply the group epoch at which the member got its current assignment.
"""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(slots=True)
class ShareMember:
    member_id: str
    member_epoch: int = 0
    rack_id: str | None = None
    client_id: str = ""
    client_host: str = ""
    subscribed_topic_names: frozenset[str] = frozenset()
    assignment: dict[str, list[int]] = field(default_factory=dict)  # topic name -> partitions
    expires_at: float = 0.0  # trio clock


@dataclass(slots=True)
class ShareGroup:
    group_id: str
    group_epoch: int = 0
    assignment_epoch: int = 0
    members: dict[str, ShareMember] = field(default_factory=dict)
    target: dict[str, dict[str, list[int]]] = field(default_factory=dict)
    # Every (topic id, partition) ever assigned: the share partitions whose state
    # DeleteGroups deletes (Kafka keeps them in ShareGroupStatePartitionMetadata).
    share_partitions: set = field(default_factory=set)

    @property
    def state(self) -> str:
        """ShareGroupState: Empty or Stable (assignments are handed out at once)."""
        return "Stable" if self.members else "Empty"

    def subscribed_topics(self) -> set[str]:
        return {t for m in self.members.values() for t in m.subscribed_topic_names}
