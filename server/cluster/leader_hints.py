"""KIP-951: tell a client that wrote to or fetched from the wrong broker who leads now.

Why: a client answered NOT_LEADER_OR_FOLLOWER (or FENCED_LEADER_EPOCH on a fetch) would
otherwise refresh its metadata before retrying, a round trip during every leader change.
Produce v10+ and Fetch v16+ carry, per failed partition, `current_leader` {leader_id,
leader_epoch}, and at the top level (tagged) `node_endpoints`: the host and port of each
leader named, so the client can go there at once (docs/design/replication.md#leader-hints).

The leader is whichever of this broker's own replica and its metadata cache knows the
newer leader epoch: a replica that has just been demoted knows first, a broker hosting no
replica only has the cache. Nothing is added on a single broker (it leads everything).
"""

from __future__ import annotations

from wire.errors import ErrorCode

PRODUCE_HINT_CODES = frozenset({ErrorCode.NOT_LEADER_OR_FOLLOWER})
FETCH_HINT_CODES = frozenset({ErrorCode.NOT_LEADER_OR_FOLLOWER, ErrorCode.FENCED_LEADER_EPOCH})

PRODUCE_MIN_VERSION = 10
FETCH_MIN_VERSION = 16


def current_leader(broker, topic: str, index: int) -> tuple[int, int]:
    """(leader id, leader epoch), (-1, -1) when unknown."""
    best = (-1, -1)
    partition = broker.partitions.get((topic, index))
    if partition is not None and partition.leader_epoch >= 0:
        best = (partition.leader_id, partition.leader_epoch)
    info = broker.cluster.cache.partition(topic, index)
    if info is not None and info.leader_epoch > best[1]:
        best = (info.leader, info.leader_epoch)
    return best


def add_hints(broker, responses: list[dict], partitions_key: str, codes: frozenset, topic_name) -> list[dict]:
    """Fill `current_leader` of the partitions answered with one of `codes`; returns the
    `node_endpoints` entries of the leaders named. `topic_name(topic_entry)` gives the
    topic's name (Fetch v13+ names topics by id)."""
    cache = broker.cluster.cache
    endpoints: dict[int, dict] = {}
    for topic in responses:
        name = None
        for part in topic[partitions_key]:
            if part["error_code"] not in codes:
                continue
            if name is None:
                name = topic_name(topic)
                if name is None:
                    break
            index = part.get("partition_index", part.get("index"))
            leader, epoch = current_leader(broker, name, index)
            part["current_leader"] = {"leader_id": leader, "leader_epoch": epoch}
            node = cache.brokers.get(leader)
            if node is not None and leader not in endpoints:
                endpoints[leader] = {"node_id": node.broker_id, "host": node.host, "port": node.port,
                                     "rack": node.rack}
    return [endpoints[k] for k in sorted(endpoints)]


def topic_name_by_id(broker, topic_id) -> str | None:
    """A topic's name from its id: a local topic, else the metadata cache."""
    name = broker.topic_name_for_id(topic_id)
    if name is not None:
        return name
    for candidate, known in broker.cluster.cache.topic_ids.items():
        if known == topic_id:
            return candidate
    return None
