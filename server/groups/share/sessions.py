"""Share sessions (KIP-932): what a member fetches from this broker, and its epoch.

Why: like fetch sessions, a share session lets a ShareFetch name only what changed (new
partitions in Topics, removed ones in ForgottenTopicsData) and makes a lost or repeated
request detectable: ShareSessionEpoch 0 opens a session, -1 closes it, any other value
must be the epoch the broker expects next (then it increments, wrapping to 1), else
INVALID_SHARE_SESSION_EPOCH; a session the broker does not have is
SHARE_SESSION_NOT_FOUND (a restart, the member's removal from its group).

A session belongs to the connection that opened it (Kafka's ShareSessionCache keeps the
same map): when that connection closes, the session ends and what the member holds is
released at once instead of when its locks expire.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field

from server.errors import InvalidShareSessionEpoch, ShareSessionNotFound

INITIAL_EPOCH = 0
FINAL_EPOCH = -1
MAX_EPOCH = 0x7FFFFFFF


def next_epoch(epoch: int) -> int:
    return 1 if epoch >= MAX_EPOCH else epoch + 1


@dataclass(slots=True)
class ShareSession:
    group_id: str
    member_id: str
    epoch: int = 1  # the epoch the next request must carry
    connection_id: int = -1  # the connection that opened it
    # (topic id, partition) -> v0's PartitionMaxBytes (None at v1), in the order added.
    partitions: dict[tuple[uuid.UUID, int], int | None] = field(default_factory=dict)


class ShareSessionCache:
    def __init__(self) -> None:
        self.sessions: dict[tuple[str, str], ShareSession] = {}

    def get(self, group_id: str, member_id: str) -> ShareSession | None:
        return self.sessions.get((group_id, member_id))

    def open(self, group_id: str, member_id: str, connection_id: int = -1) -> ShareSession:
        """Epoch 0: a new session (replacing the member's previous one)."""
        session = self.sessions[(group_id, member_id)] = ShareSession(group_id, member_id,
                                                                       connection_id=connection_id)
        return session

    def opened_by(self, connection_id: int) -> list[ShareSession]:
        return [s for s in self.sessions.values() if s.connection_id == connection_id]

    def advance(self, group_id: str, member_id: str, epoch: int) -> ShareSession:
        """A request at `epoch` (> 0, or -1 to close) in an existing session."""
        session = self.sessions.get((group_id, member_id))
        if session is None:
            raise ShareSessionNotFound(f"no share session for member {member_id} of group {group_id}")
        if epoch == FINAL_EPOCH:
            return session
        if epoch != session.epoch:
            raise InvalidShareSessionEpoch(f"share session of member {member_id} of group {group_id} expects epoch "
                                           f"{session.epoch}, got {epoch}")
        session.epoch = next_epoch(epoch)
        return session

    def close(self, group_id: str, member_id: str) -> ShareSession | None:
        return self.sessions.pop((group_id, member_id), None)

    def close_group(self, group_id: str) -> None:
        for key in [k for k in self.sessions if k[0] == group_id]:
            del self.sessions[key]
