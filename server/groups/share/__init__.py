"""Share groups (KIP-932, Kafka's queues): `ShareCoordinator` is what the broker holds as
`broker.share`; the share handlers in server/handlers/ call it.

coordinator.py  membership (ShareGroupHeartbeat), share sessions, share partitions, timers
group.py        one share group's members and epochs     assignor.py  the simple assignor
partition.py    one share partition's in-flight records   sessions.py  share sessions
records.py      the `__share_group_state` records
state.py        the share coordinator (`__share_group_state`: Read/WriteShareGroupState)
persister.py    how a share-partition leader reaches it (local call or inter-broker request)
"""

from server.groups.share.coordinator import ISOLATION_LEVEL, ShareCoordinator
from server.groups.share.partition import AcknowledgeType, RecordState, SharePartition
from server.groups.share.sessions import FINAL_EPOCH, INITIAL_EPOCH

__all__ = ["FINAL_EPOCH", "INITIAL_EPOCH", "ISOLATION_LEVEL", "AcknowledgeType", "RecordState", "ShareCoordinator",
           "SharePartition"]
