"""What a partition leader knows about each follower: Kafka's Replica state
(docs/design/replication.md#isr-shrink-and-expand).

A follower's position is what it asks for: a Fetch at offset f says "I have everything
below f", so f is its log end offset. It is *caught up* when f reached the leader's log end
offset at that fetch, or — for a leader that keeps growing — when it reached the end the
leader had at its previous fetch (KAFKA-4485: membership by "kept up", never by a count of
messages behind). A follower that has not been caught up for replica.lag.time.max.ms leaves
the ISR; one whose log end offset reaches the high watermark and the start of the leader's
epoch joins it again.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(slots=True)
class FollowerState:
    log_end_offset: int = -1  # unknown until its first fetch in this leader epoch
    last_caught_up_ms: int = 0
    last_fetch_leader_end: int = -1
    last_fetch_ms: int = 0

    def on_fetch(self, fetch_offset: int, leader_end: int, now_ms: int) -> None:
        if fetch_offset >= leader_end:
            self.last_caught_up_ms = now_ms
        elif fetch_offset >= self.last_fetch_leader_end:
            self.last_caught_up_ms = max(self.last_caught_up_ms, self.last_fetch_ms)
        self.last_fetch_leader_end = leader_end
        self.last_fetch_ms = now_ms
        self.log_end_offset = fetch_offset

    def caught_up(self, leader_end: int, now_ms: int, lag_ms: int) -> bool:
        return self.log_end_offset >= leader_end or now_ms - self.last_caught_up_ms <= lag_ms
