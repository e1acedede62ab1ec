"""Each partition's leader, leader epoch, replicas, ISR and offline replicas, as clients see them.

Why a module of its own: Metadata (3) and DescribeTopicPartitions (75) answer the same
per-partition facts and handlers never import each other. The broker's mode (server/modes.py)
answers: a single broker reads each `server.partition.Partition`; a ZooKeeper cluster member
reads the metadata cache the controller fills (server/cluster/metadata_cache.py), where a
leader that is not alive is answered as -1 (no leader), as Kafka does.

Entries are in the shape of Metadata's MetadataResponsePartition (error_code,
partition_index, leader_id, leader_epoch, replica_nodes, isr_nodes, offline_replicas);
callers add what their response has beyond that.
"""

from __future__ import annotations

import uuid
from typing import TYPE_CHECKING, Any

from server.modes import cluster_partition_state, local_partition_state

if TYPE_CHECKING:
    from server.broker import Broker

__all__ = ["cluster_partition_state", "local_partition_state", "partition_count", "partition_states",
           "topic_exists", "topic_id", "topic_names"]


def topic_names(broker: "Broker") -> list[str]:
    """Every topic this broker can describe, sorted by name (in a cluster: the cache's)."""
    return broker.mode.topic_names()


def topic_exists(broker: "Broker", name: str) -> bool:
    return broker.mode.topic_exists(name)


def topic_id(broker: "Broker", name: str) -> uuid.UUID:
    """The topic's id, or the zero UUID when it is unknown."""
    return broker.mode.topic_id(name)


def partition_count(broker: "Broker", name: str) -> int:
    """How many partitions the topic has (0 when unknown; see BrokerMode.partition_count)."""
    return broker.mode.partition_count(name)


def partition_states(broker: "Broker", name: str, start: int = 0, stop: int | None = None) -> list[dict[str, Any]]:
    """The entries of partitions `start` ≤ index < `stop` (default: all) of an existing
    topic, in index order; a partition this broker does not know yet is left out (Kafka
    logs and skips it too)."""
    return broker.mode.partition_states(name, start, stop)
