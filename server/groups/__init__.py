"""Consumer groups: the group coordinator and the committed offsets it keeps.

`GroupCoordinator` (coordinator.py) is what the broker holds as `broker.groups`; the
group/offset handlers in server/handlers/ call it. group.py is one group's state,
records.py the `__consumer_offsets` record formats.
"""

from server.groups.coordinator import OFFSETS_TOPIC, GroupCoordinator
from server.groups.group import CommittedOffset, GroupState, JoinResult, SyncResult

__all__ = ["OFFSETS_TOPIC", "CommittedOffset", "GroupCoordinator", "GroupState", "JoinResult", "SyncResult"]
