"""Fetch from the closest replica (KIP-392): which replica a consumer should read from.

Why: a consumer in another rack (availability zone) than the leader pays cross-rack
traffic for every byte it reads; a follower in its own rack has the same committed data.
The consumer says where it is with `client.rack` (the Fetch request's rack_id, v11+);
the leader, when `replica.selector.class` names Kafka's RackAwareReplicaSelector, answers
with preferred_read_replica and no records, and the consumer fetches from that follower
until it is told otherwise or the follower cannot serve it (fetch.py).

The candidates are Kafka's (ReplicaManager.findPreferredReadReplica): the leader and every
live in-sync follower whose log covers the fetch offset. RackAwareReplicaSelector picks the
leader when it is in the client's rack (or no candidate is, or the client has no rack),
else the most caught-up candidate of the rack (largest log end offset, then the shortest
time since it was caught up; the lowest id breaks a tie, where Kafka's choice is arbitrary).
A follower's own log start offset is not reported to the leader here, so the leader's
stands for it (followers copy the leader's retention).
No selector (Kafka's default, null) means the leader only.
"""

from __future__ import annotations

from server.config import RACK_AWARE_REPLICA_SELECTOR

NO_PREFERRED_REPLICA = -1


def is_rack_aware(config) -> bool:
    """Whether this broker's replica.selector.class is Kafka's RackAwareReplicaSelector
    (the setting is checked at startup: nothing else gets through)."""
    return config.get("replica.selector.class") == RACK_AWARE_REPLICA_SELECTOR


def preferred_read_replica(partition, cache, rack_id: str | None, fetch_offset: int, now_ms: int) -> int:
    """The follower a consumer in `rack_id` fetching at `fetch_offset` should read
    `partition` (led here) from, or NO_PREFERRED_REPLICA for the leader."""
    if not rack_id:
        return NO_PREFERRED_REPLICA
    leader = cache.brokers.get(partition.node_id)
    if leader is not None and leader.rack == rack_id:
        return NO_PREFERRED_REPLICA
    best: tuple[int, int, int] | None = None  # (log end offset, -lag ms, -id): max wins
    for replica, state in partition.followers.items():
        broker = cache.brokers.get(replica)
        if broker is None or broker.rack != rack_id or replica not in partition.isr:
            continue
        if not partition.log.log_start_offset <= fetch_offset <= state.log_end_offset:
            continue
        key = (state.log_end_offset, -(now_ms - state.last_caught_up_ms), -replica)
        if best is None or key > best:
            best = key
    return NO_PREFERRED_REPLICA if best is None else -best[2]
