"""Each partition's leader, leader epoch, replicas, ISR and offline replicas, as clients see them.

Why a module of its own: Metadata (3) and DescribeTopicPartitions (75) answer the same
per-partition facts and handlers never import each other. Both broker modes are here:
single-broker mode reads each `server.partition.Partition`; ZooKeeper cluster mode reads the
metadata cache the controller fills (server/cluster/metadata_cache.py), where a leader that
is not alive is answered as -1 (no leader), as Kafka does.

Entries are in the shape of Metadata's MetadataResponsePartition (error_code,
partition_index, leader_id, leader_epoch, replica_nodes, isr_nodes, offline_replicas);
callers add what their response has beyond that.
"""

from __future__ import annotations

import uuid
from typing import TYPE_CHECKING, Any

from wire.errors import ErrorCode
from wire.primitives import ZERO_UUID

if TYPE_CHECKING:
    from server.broker import Broker
    from server.cluster.metadata_cache import MetadataCache, PartitionInfo
    from server.partition import Partition


def local_partition_state(partition: "Partition") -> dict[str, Any]:
    """A hosted partition of a single-broker (or not yet clustered) broker."""
    return {
        "error_code": ErrorCode.NONE,
        "partition_index": partition.index,
        "leader_id": partition.leader_id,
        "leader_epoch": partition.leader_epoch,
        "replica_nodes": partition.replicas,
        "isr_nodes": partition.isr,
        "offline_replicas": [],
    }


def cluster_partition_state(cache: "MetadataCache", index: int, info: "PartitionInfo") -> dict[str, Any]:
    """A partition as the controller's UpdateMetadata described it. A leader that is not
    alive is no leader (-1, LEADER_NOT_AVAILABLE: Metadata's error; DescribeTopicPartitions
    answers NONE with leader -1 as KRaft's cache does and overrides it)."""
    alive = info.leader >= 0 and cache.alive(info.leader)
    return {
        "error_code": ErrorCode.NONE if alive else ErrorCode.LEADER_NOT_AVAILABLE,
        "partition_index": index,
        "leader_id": info.leader if alive else -1,
        "leader_epoch": info.leader_epoch,
        "replica_nodes": list(info.replicas),
        "isr_nodes": list(info.isr),
        "offline_replicas": list(info.offline_replicas),
    }


def topic_names(broker: "Broker") -> list[str]:
    """Every topic this broker can describe, sorted by name (in a cluster: the cache's)."""
    if broker.cluster is not None:
        return sorted(broker.cluster.cache.topics)
    return sorted(broker.topics)


def topic_exists(broker: "Broker", name: str) -> bool:
    if broker.cluster is not None:
        return name in broker.cluster.cache.topics
    return name in broker.topics


def topic_id(broker: "Broker", name: str) -> uuid.UUID:
    """The topic's id, or the zero UUID when it is unknown."""
    if broker.cluster is not None:
        return broker.cluster.cache.topic_ids.get(name, ZERO_UUID)
    meta = broker.topics.get(name)
    return meta.topic_id if meta is not None else ZERO_UUID


def partition_count(broker: "Broker", name: str) -> int:
    """How many partitions the topic has (0 when unknown). In a cluster: the highest
    partition index the cache knows + 1, so a gap (a partition UpdateMetadata has not
    described yet) is visible to `partition_states` as a missing entry, not a shorter topic."""
    if broker.cluster is not None:
        known = broker.cluster.cache.topics.get(name)
        return max(known) + 1 if known else 0
    meta = broker.topics.get(name)
    return meta.partitions if meta is not None else 0


def partition_states(broker: "Broker", name: str, start: int = 0, stop: int | None = None) -> list[dict[str, Any]]:
    """The entries of partitions `start` ≤ index < `stop` (default: all) of an existing
    topic, in index order; a partition this broker does not know yet is left out (Kafka
    logs and skips it too)."""
    if broker.cluster is not None:
        cache = broker.cluster.cache
        known = cache.topics.get(name, {})
        indexes = sorted(i for i in known if i >= start and (stop is None or i < stop))
        return [cluster_partition_state(cache, i, known[i]) for i in indexes]
    meta = broker.topics[name]
    end = meta.partitions if stop is None else min(stop, meta.partitions)
    states = []
    for index in range(max(start, 0), end):
        partition = broker.partitions.get((name, index))
        if partition is not None:
            states.append(local_partition_state(partition))
    return states
