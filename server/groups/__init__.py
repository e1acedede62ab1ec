"""Consumer groups: the group coordinator and the committed offsets it keeps.

`GroupCoordinator` (coordinator.py) is what the broker holds as `broker.groups`; the
group/offset handlers in server/handlers/ call it. group.py is one group's state,
records.py the `__consumer_offsets` record formats, offsets.py the committed offsets of
every kind of group, consumer/ the KIP-848 consumer groups (group.protocol=consumer).
"""

from server.groups.coordinator import OFFSETS_TOPIC, GroupCoordinator
from server.groups.consumer.group import ConsumerGroup, ConsumerGroupState, is_consumer_group
from server.groups.group import CommittedOffset, GroupState, JoinResult, SyncResult

__all__ = ["OFFSETS_TOPIC", "CommittedOffset", "ConsumerGroup", "ConsumerGroupState", "GroupCoordinator", "GroupState",
           "JoinResult", "SyncResult", "is_consumer_group"]
