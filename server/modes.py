"""The broker's mode: one interface a handler asks, whether this broker is alone or one of a
ZooKeeper cluster.

Why: a single broker is a cluster of one. Without this module every feature that reads
metadata, leadership or a shared store was written twice, once per mode, as a branch on
whether the broker had a cluster node. Handlers now ask `broker.mode` the question the
branch decided — which topics exist, who leads, where ACLs and quotas are kept, which
answers carry leader hints — and the two implementations below give the two answers:

- `SingleBroker`: this broker's own registry and partitions are the whole cluster; it leads
  every partition it has, keeps ACLs, client quotas and configs in its data directory, and
  answers admin requests as Kafka 4's KRaft controller does.
- `ZooKeeperCluster`: the metadata cache the controller fills (server/cluster/metadata_cache.py)
  is the cluster; leadership moves, stores live in ZooKeeper (server/cluster/), and admin
  requests are answered as a ZooKeeper-mode Kafka 3.9 broker does.

Kafka 3.x had the same seam: KafkaApis asked a `MetadataSupport` (ZkSupport or RaftSupport)
instead of testing which mode it ran in. The mode is chosen once, when the broker is built
(`Broker.__init__`), and never changes.
"""

from __future__ import annotations

import uuid
from typing import TYPE_CHECKING, Any, Callable

from wire.errors import ErrorCode
from wire.primitives import ZERO_UUID

if TYPE_CHECKING:  # not server.broker: it builds the mode (an import circle otherwise)
    from server.cluster.metadata_cache import MetadataCache, PartitionInfo
    from server.cluster.node import ClusterNode
    from server.partition import Partition
    from server.security.acls import AclBinding, AclFilter
    from server.groups.share.partition import SharePartition


def local_partition_state(partition: "Partition") -> dict[str, Any]:
    """A hosted partition of a single broker, in the shape of Metadata's
    MetadataResponsePartition (error_code, partition_index, leader_id, leader_epoch,
    replica_nodes, isr_nodes, offline_replicas)."""
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


class BrokerMode:
    """What handlers ask about the cluster this broker belongs to. Every method is
    implemented by both modes; a handler never asks which mode it runs in."""

    broker: Any

    # ---- metadata -------------------------------------------------------------------
    def topic_names(self) -> list[str]:
        """Every topic this broker can describe, sorted by name."""
        raise NotImplementedError

    def topic_exists(self, name: str) -> bool:
        raise NotImplementedError

    def topic_id(self, name: str) -> uuid.UUID:
        """The topic's id, or the zero UUID when it is unknown."""
        raise NotImplementedError

    def topic_name_for_id(self, topic_id: uuid.UUID) -> str | None:
        """A topic's name from its id in the cluster's metadata, None when no topic has it."""
        raise NotImplementedError

    def partition_count(self, name: str) -> int:
        """How many partitions the topic has (0 when unknown)."""
        raise NotImplementedError

    def partition_states(self, name: str, start: int = 0, stop: int | None = None) -> list[dict[str, Any]]:
        """The Metadata-shaped entries of partitions `start` ≤ index < `stop` (default: all)
        of an existing topic, in index order; a partition not known yet is left out (Kafka
        logs and skips it too)."""
        raise NotImplementedError

    def partition_exists(self, topic: str, index: int) -> bool:
        """Whether the topic-partition exists anywhere in the cluster (a replica need not be
        on this broker)."""
        raise NotImplementedError

    def controller_id(self) -> int:
        raise NotImplementedError

    def brokers(self, listener: str | None) -> list[dict[str, Any]]:
        """DescribeCluster's brokers, by id, with their addresses on `listener` (a broker
        without that listener is left out)."""
        raise NotImplementedError

    # ---- leadership -----------------------------------------------------------------
    def leader_hints(self, responses: list[dict], partitions_key: str, codes: frozenset,
                     topic_name: Callable[[dict], str | None]) -> list[dict]:
        """KIP-951: fill `current_leader` of the partitions answered with one of `codes` and
        return the `node_endpoints` of the leaders named (server/cluster/leader_hints.py)."""
        raise NotImplementedError

    def leadership_moved(self, partition: "Partition", share_partition: "SharePartition") -> bool:
        """Whether a share partition's leadership moved while a ShareFetch waited: the next
        leader serves it then."""
        raise NotImplementedError

    # Whether a consumer's Fetch v11+ may read a follower (KIP-392).
    follower_fetch: bool
    # Whether Produce with acks=all waits for the ISR to fetch.
    acks_all_waits_for_replicas: bool

    def leader_quota(self, replica_id: int):
        """KIP-73: the throttle a leader applies to a follower's fetch (`replica_id` ≥ 0),
        None when there is none."""
        raise NotImplementedError

    # ---- stores ---------------------------------------------------------------------
    async def add_acls(self, bindings: list["AclBinding"]) -> None:
        raise NotImplementedError

    async def remove_acls(self, filters: list["AclFilter"]) -> list[list["AclBinding"]]:
        raise NotImplementedError

    async def alter_client_quotas(self, accepted: list[tuple[Any, dict[str, float | None]]]) -> None:
        """Store the client quota changes (the quotas take effect before the answer)."""
        raise NotImplementedError


class SingleBroker(BrokerMode):
    """A broker alone: its registry and its partitions are the cluster, and it leads them all."""

    follower_fetch = False
    acks_all_waits_for_replicas = False

    def __init__(self, broker: Any) -> None:
        self.broker = broker

    # ---- metadata -------------------------------------------------------------------
    def topic_names(self) -> list[str]:
        return sorted(self.broker.topics)

    def topic_exists(self, name: str) -> bool:
        return name in self.broker.topics

    def topic_id(self, name: str) -> uuid.UUID:
        meta = self.broker.topics.get(name)
        return meta.topic_id if meta is not None else ZERO_UUID

    def topic_name_for_id(self, topic_id: uuid.UUID) -> str | None:
        return self.broker.topic_name_for_id(topic_id)

    def partition_count(self, name: str) -> int:
        meta = self.broker.topics.get(name)
        return meta.partitions if meta is not None else 0

    def partition_states(self, name: str, start: int = 0, stop: int | None = None) -> list[dict[str, Any]]:
        broker = self.broker
        meta = broker.topics[name]
        end = meta.partitions if stop is None else min(stop, meta.partitions)
        states = []
        for index in range(max(start, 0), end):
            partition = broker.partitions.get((name, index))
            if partition is not None:
                states.append(local_partition_state(partition))
        return states

    def partition_exists(self, topic: str, index: int) -> bool:
        meta = self.broker.topics.get(topic)
        return meta is not None and 0 <= index < meta.partitions

    def controller_id(self) -> int:
        return self.broker.node_id

    def brokers(self, listener: str | None) -> list[dict[str, Any]]:
        host, port = self.broker.config.advertised_for(listener)
        return [{"broker_id": self.broker.node_id, "host": host, "port": port, "rack": None}]

    # ---- leadership -----------------------------------------------------------------
    def leader_hints(self, responses: list[dict], partitions_key: str, codes: frozenset,
                     topic_name: Callable[[dict], str | None]) -> list[dict]:
        return []  # it leads every partition it has: there is no other leader to name

    def leadership_moved(self, partition: "Partition", share_partition: "SharePartition") -> bool:
        return False

    def leader_quota(self, replica_id: int):
        return None

    # ---- stores ---------------------------------------------------------------------
    async def add_acls(self, bindings: list["AclBinding"]) -> None:
        self.broker.authorizer.add(bindings)  # <data dir>/__security/acls.json

    async def remove_acls(self, filters: list["AclFilter"]) -> list[list["AclBinding"]]:
        return self.broker.authorizer.remove(filters)

    async def alter_client_quotas(self, accepted: list[tuple[Any, dict[str, float | None]]]) -> None:
        quotas = self.broker.quotas
        for entity, changes in accepted:
            quotas.configs.apply(entity, changes)
        quotas.configs.save()
        quotas.changed()


class ZooKeeperCluster(BrokerMode):
    """A member of a ZooKeeper-mode cluster: the controller's metadata cache is the cluster,
    and shared state lives in ZooKeeper."""

    follower_fetch = True
    acks_all_waits_for_replicas = True

    def __init__(self, broker: Any, node: "ClusterNode") -> None:
        self.broker = broker
        self.node = node

    # ---- metadata -------------------------------------------------------------------
    def topic_names(self) -> list[str]:
        return sorted(self.node.cache.topics)

    def topic_exists(self, name: str) -> bool:
        return name in self.node.cache.topics

    def topic_id(self, name: str) -> uuid.UUID:
        return self.node.cache.topic_ids.get(name, ZERO_UUID)

    def topic_name_for_id(self, topic_id: uuid.UUID) -> str | None:
        return next((n for n, i in self.node.cache.topic_ids.items() if i == topic_id), None)

    def partition_count(self, name: str) -> int:
        """The highest partition index the cache knows + 1, so that a gap (a partition
        UpdateMetadata has not described yet) shows in `partition_states` as a missing
        entry, not a shorter topic."""
        known = self.node.cache.topics.get(name)
        return max(known) + 1 if known else 0

    def partition_states(self, name: str, start: int = 0, stop: int | None = None) -> list[dict[str, Any]]:
        cache = self.node.cache
        known = cache.topics.get(name, {})
        indexes = sorted(i for i in known if i >= start and (stop is None or i < stop))
        return [cluster_partition_state(cache, i, known[i]) for i in indexes]

    def partition_exists(self, topic: str, index: int) -> bool:
        return self.node.cache.partition(topic, index) is not None

    def controller_id(self) -> int:
        return self.node.cache.controller_id

    def brokers(self, listener: str | None) -> list[dict[str, Any]]:
        return [{"broker_id": b.broker_id, "host": a[0], "port": a[1], "rack": b.rack}
                for b in sorted(self.node.cache.brokers.values(), key=lambda b: b.broker_id)
                if (a := b.address(listener)) is not None]

    # ---- leadership -----------------------------------------------------------------
    def leader_hints(self, responses: list[dict], partitions_key: str, codes: frozenset,
                     topic_name: Callable[[dict], str | None]) -> list[dict]:
        from server.cluster import leader_hints

        return leader_hints.add_hints(self.broker, responses, partitions_key, codes, topic_name)

    def leadership_moved(self, partition: "Partition", share_partition: "SharePartition") -> bool:
        sp = share_partition
        return (not partition.is_leader or partition.leader_epoch != sp.leader_epoch
                or self.broker.partitions.get((sp.topic, sp.index)) is not partition)

    def leader_quota(self, replica_id: int):
        return self.node.leader_quota if replica_id >= 0 else None

    # ---- stores ---------------------------------------------------------------------
    async def add_acls(self, bindings: list["AclBinding"]) -> None:
        await self.node.acls.add(bindings)  # ZooKeeper's /kafka-acl: every broker follows

    async def remove_acls(self, filters: list["AclFilter"]) -> list[list["AclBinding"]]:
        return await self.node.acls.remove(filters)

    async def alter_client_quotas(self, accepted: list[tuple[Any, dict[str, float | None]]]) -> None:
        await self.node.client_quotas.alter(accepted)
