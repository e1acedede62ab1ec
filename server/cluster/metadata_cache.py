"""What a cluster member knows of the whole cluster: Kafka's ZkMetadataCache (CLUSTER.md §6).

Why only from UpdateMetadata: every broker must tell clients the same story, and the
controller is the one that decides it. So the cache is filled by the controller's
UpdateMetadata requests, and nothing else: the live brokers and the controller id are
*replaced* by each request, partition states are *merged* into what is known, and a leader
of -2 means "the topic is being deleted" and drops the partition.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field

LEADER_DURING_DELETE = -2


@dataclass(frozen=True, slots=True)
class BrokerInfo:
    broker_id: int
    host: str
    port: int
    rack: str | None = None


@dataclass(slots=True)
class PartitionInfo:
    leader: int
    leader_epoch: int
    isr: list[int]
    replicas: list[int]
    offline_replicas: list[int] = field(default_factory=list)
    zk_version: int = 0
    controller_epoch: int = 0


class MetadataCache:
    def __init__(self) -> None:
        self.brokers: dict[int, BrokerInfo] = {}
        self.controller_id = -1
        self.controller_epoch = 0
        self.topics: dict[str, dict[int, PartitionInfo]] = {}
        self.topic_ids: dict[str, uuid.UUID] = {}
        self.version = 0  # bumped by every update: waiters for "the cache shows X" re-check

    def update(self, request: dict, api_version: int) -> list[tuple[str, int]]:
        """Apply an UpdateMetadata request; returns the partitions it deleted."""
        brokers: dict[int, BrokerInfo] = {}
        for b in request["live_brokers"]:
            if api_version == 0:
                host, port = b["v0_host"], b["v0_port"]
            else:
                endpoints = b["endpoints"]
                if not endpoints:
                    continue
                host, port = endpoints[0]["host"], endpoints[0]["port"]
            brokers[b["id"]] = BrokerInfo(b["id"], host, port, b.get("rack") or None)
        self.brokers = brokers
        self.controller_id = request["controller_id"]
        self.controller_epoch = max(self.controller_epoch, request["controller_epoch"])
        deleted: list[tuple[str, int]] = []
        states: list[tuple[str, dict]] = []
        if api_version >= 5:
            for topic in request["topic_states"]:
                name = topic["topic_name"]
                topic_id = topic.get("topic_id")
                if topic_id is not None and topic_id.int != 0:
                    self.topic_ids[name] = topic_id
                states.extend((name, p) for p in topic["partition_states"])
        else:
            states.extend((p["topic_name"], p) for p in request["ungrouped_partition_states"])
        for name, p in states:
            index = p["partition_index"]
            if p["leader"] == LEADER_DURING_DELETE:
                partitions = self.topics.get(name)
                if partitions is not None:
                    partitions.pop(index, None)
                    if not partitions:
                        del self.topics[name]
                        self.topic_ids.pop(name, None)
                deleted.append((name, index))
                continue
            self.topics.setdefault(name, {})[index] = PartitionInfo(
                p["leader"], p["leader_epoch"], list(p["isr"]), list(p["replicas"]),
                list(p.get("offline_replicas") or []), p["zk_version"], p["controller_epoch"])
        self.version += 1
        return deleted

    def partition(self, topic: str, index: int) -> PartitionInfo | None:
        return self.topics.get(topic, {}).get(index)

    def leader_of(self, topic: str, index: int) -> BrokerInfo | None:
        info = self.partition(topic, index)
        if info is None:
            return None
        return self.brokers.get(info.leader)

    def alive(self, broker_id: int) -> bool:
        return broker_id in self.brokers
