"""What a cluster member knows of the whole cluster: Kafka's ZkMetadataCache
(docs/design/replication.md#metadata-served-to-clients).

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
_PROTOCOL_NAMES = {0: "PLAINTEXT", 1: "SSL", 2: "SASL_PLAINTEXT", 3: "SASL_SSL"}


@dataclass(frozen=True, slots=True)
class BrokerInfo:
    """A live broker; `host`/`port` are its inter-broker listener's address (what other
    brokers connect to), `endpoints` every listener's: {name: (host, port)}."""

    broker_id: int
    host: str
    port: int
    rack: str | None = None
    endpoints: tuple = ()  # ((listener name, host, port), ...)

    def address(self, listener: str | None) -> tuple[str, int] | None:
        """The address of `listener` on this broker (None: it has no such listener; Kafka
        leaves such a broker out of the Metadata of clients on that listener). No name:
        the inter-broker one."""
        if listener is None or not self.endpoints:
            return self.host, self.port
        return next(((h, p) for n, h, p in self.endpoints if n == listener), None)


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
    def __init__(self, inter_broker_listener: str = "PLAINTEXT") -> None:
        self.inter_broker_listener = inter_broker_listener
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
                listeners: tuple = (("PLAINTEXT", host, port),)
            else:
                endpoints = b["endpoints"]
                if not endpoints:
                    continue
                # before v3 an endpoint is named by its security protocol (Kafka's rule)
                listeners = tuple((e.get("listener") or _PROTOCOL_NAMES.get(e.get("security_protocol"), "PLAINTEXT"),
                                   e["host"], e["port"]) for e in endpoints)
                host, port = next(((h, p) for n, h, p in listeners if n == self.inter_broker_listener),
                                  listeners[0][1:])
            brokers[b["id"]] = BrokerInfo(b["id"], host, port, b.get("rack") or None, listeners)
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
