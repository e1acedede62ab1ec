"""The broker's mode: the one interface a handler asks, whether this broker is alone or one
of a ZooKeeper cluster.

Why: a single broker is a cluster of one. Without this package every feature that reads
metadata, leadership or a shared store was written twice, once per mode, as a branch on
whether the broker had a cluster node. Handlers now ask `broker.mode` the question such a
branch decided — which topics exist and who leads them, where ACLs, quotas, topic configs
and v0 offsets are kept, who coordinates a group, how a topic is created, whether a
controller serves this request or sent that one — and the two implementations give the
two answers:

- `SingleBroker` (single_broker.py): this broker's own registry and partitions are the whole
  cluster; it leads every partition it has, keeps ACLs, client quotas and configs in its data
  directory, and answers admin requests as Kafka 4's KRaft controller does; it has no
  controller, so what only the active controller serves is NOT_CONTROLLER (NotController)
  and what a controller sends is STALE_CONTROLLER_EPOCH.
- `ZooKeeperCluster` (zookeeper.py): the metadata cache the controller fills
  (server/cluster/metadata_cache.py) is the cluster; leadership moves, stores live in
  ZooKeeper (server/cluster/), and admin requests are answered as a ZooKeeper-mode Kafka 3.9
  broker answers them: the active controller serves elections, reassignments, ISR changes
  and controlled shutdowns, and the cluster node applies the controller's requests.

Kafka 3.x has the same seam: its KafkaApis asks a `MetadataSupport` (ZkSupport or
RaftSupport). The mode is chosen once, when the broker is built (`Broker.__init__`), and
never changes. Start-up and the cluster's own machinery (server/cluster/) stay mode-specific.
"""

from __future__ import annotations

import uuid
from typing import TYPE_CHECKING, Any, Callable, Mapping

from storage import LogConfig
from wire.errors import ErrorCode

# KIP-951's leader hints: which answers carry them and from which version (handlers take
# them from here, never from server.cluster)
from server.errors import KafkaError
from server.topics import INTERNAL_TOPICS, validate_topic_name
from server.cluster.leader_hints import FETCH_HINT_CODES, FETCH_MIN_VERSION, PRODUCE_HINT_CODES, PRODUCE_MIN_VERSION

__all__ = ["FETCH_HINT_CODES", "FETCH_MIN_VERSION", "OFFSETS_TOPIC", "PRODUCE_HINT_CODES", "PRODUCE_MIN_VERSION",
           "REQUEST_PARTITION_LIMIT", "TXN_TOPIC", "BrokerAddress", "BrokerMode", "cluster_partition_state",
           "election_answer", "local_partition_state"]

if TYPE_CHECKING:
    from server.cluster.metadata_cache import MetadataCache, PartitionInfo
    from server.groups.share.partition import SharePartition
    from server.partition import Partition
    from server.security.acls import AclBinding, AclFilter

# Kafka's KRaft controller creates at most this many partitions per request
# (ReplicationControlManager: "Excessively large number of partitions per request.").
REQUEST_PARTITION_LIMIT = 10_000

# The internal topics whose partitions' leaders coordinate groups and transactions.
OFFSETS_TOPIC = "__consumer_offsets"
TXN_TOPIC = "__transaction_state"

# A broker as Metadata and DescribeCluster list it: (id, host, port, rack).
BrokerAddress = tuple[int, str, int, "str | None"]


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


def election_answer(results: Mapping[tuple[str, int], tuple[ErrorCode, str | None]], error_code: ErrorCode) -> dict:
    """An ElectLeaders answer from (topic, partition) -> (code, message), its topics in the
    order first met."""
    by_topic: dict[str, list[dict]] = {}
    for (topic, index), (code, message) in results.items():
        by_topic.setdefault(topic, []).append({"partition_id": index, "error_code": code, "error_message": message})
    return {"throttle_time_ms": 0, "error_code": error_code,
            "replica_election_results": [{"topic": t, "partition_result": ps} for t, ps in by_topic.items()]}


class BrokerMode:
    """What handlers ask about the cluster this broker belongs to. Both modes implement
    every method; a handler never asks which mode it runs in."""

    # Whether a consumer's Fetch v11+ may read a follower (KIP-392): a single broker has none.
    follower_fetch: bool
    # Whether Produce with acks=all waits for the ISR to fetch: a single broker's ISR is itself.
    acks_all_waits_for_replicas: bool
    # Whether OffsetCommit/OffsetFetch v0 keep offsets in ZooKeeper (Kafka 3.9's ZooKeeper
    # mode); a single broker answers them as a KRaft broker does, UNSUPPORTED_VERSION.
    zookeeper_offsets: bool
    # At most this many partitions per CreateTopics request (None: no limit).
    request_partition_limit: int | None

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

    def brokers(self, listener: str | None) -> list[BrokerAddress]:
        """The live brokers by id, at their addresses on the client's `listener` (a broker
        without that listener is left out, as Kafka does)."""
        raise NotImplementedError

    async def auto_create_topic(self, name: str) -> ErrorCode:
        """Metadata's auto-creation of an unknown topic: the code this request answers it with,
        NONE when it can be described now, LEADER_NOT_AVAILABLE while it is being created
        (a cluster, as Kafka 3.9), UNKNOWN_TOPIC_OR_PARTITION when it is not there yet or was
        not created (one broker, as Kafka 4.4); KafkaError when creating it failed."""
        raise NotImplementedError

    # ---- leadership and coordinators --------------------------------------------------
    def leader_hints(self, responses: list[dict], partitions_key: str, codes: frozenset,
                     topic_name: Callable[[dict], str | None]) -> list[dict]:
        """KIP-951: fill `current_leader` of the partitions answered with one of `codes` and
        return the `node_endpoints` of the leaders named (server/cluster/leader_hints.py)."""
        raise NotImplementedError

    def leadership_moved(self, partition: "Partition", share_partition: "SharePartition") -> bool:
        """Whether a share partition's leadership moved while a ShareFetch waited (the next
        leader serves it then)."""
        raise NotImplementedError

    def selects_replicas_by_rack(self) -> bool:
        """KIP-392: whether a consumer's rack picks the replica it reads (Kafka's
        RackAwareReplicaSelector is this broker's replica.selector.class)."""
        raise NotImplementedError

    def preferred_read_replica(self, partition: "Partition", rack_id: str, fetch_offset: int, now_ms: int) -> int:
        """KIP-392: the replica a consumer in `rack_id` should read `partition` (led here)
        from, -1 for this leader."""
        raise NotImplementedError

    def leader_quota(self, replica_id: int):
        """KIP-73: the throttle a leader applies to a follower's fetch (`replica_id` ≥ 0),
        None when there is none."""
        raise NotImplementedError

    async def find_coordinator(self, key: str, internal_topic: str, listener: str | None) -> dict:
        """FindCoordinator's entry for a group or transactional id, whose coordinator is the
        leader of its partition of `internal_topic` (OFFSETS_TOPIC or TXN_TOPIC), at its
        address on the client's `listener`."""
        raise NotImplementedError

    # ---- stores ---------------------------------------------------------------------
    async def add_acls(self, bindings: list["AclBinding"]) -> None:
        raise NotImplementedError

    async def remove_acls(self, filters: list["AclFilter"]) -> list[list["AclBinding"]]:
        raise NotImplementedError

    async def alter_client_quotas(self, accepted: list[tuple[Any, dict[str, float | None]]]) -> None:
        """Store the client quota changes (they take effect before the answer)."""
        raise NotImplementedError

    async def topic_configs(self, name: str) -> tuple[dict[str, str], "LogConfig | None"]:
        """A topic's explicit settings and, when this broker hosts it, its live config."""
        raise NotImplementedError

    def check_topic_for_config_change(self, name: str) -> None:
        """UnknownTopicOrPartition when this mode can tell before the change that the topic
        does not exist."""
        raise NotImplementedError

    async def alter_topic_configs(self, name: str, change: Callable[[dict[str, str]], Mapping[str, str]],
                                  validate_only: bool) -> None:
        """Make change(current explicit settings) the topic's settings, validated first."""
        raise NotImplementedError

    async def commit_offset_v0(self, group_id: str, topic: str, index: int, offset: int) -> None:
        raise NotImplementedError

    async def fetch_offset_v0(self, group_id: str, topic: str, index: int) -> int | None:
        raise NotImplementedError

    # ---- topics (the controller's side) ------------------------------------------------
    def admin_time_left(self, timeout_ms: int) -> bool:
        """Whether an admin request's timeout leaves time to act at all."""
        raise NotImplementedError

    async def create_topic(self, topic: dict, validate_only: bool,
                           timeout_ms: int) -> tuple[uuid.UUID | None, int, int, dict[str, str]]:
        """CreateTopics for one CreatableTopic entry: (topic id or None, partitions,
        replication factor, configs); a KafkaError says why not."""
        raise NotImplementedError

    async def create_partitions(self, topic: dict, validate_only: bool, timeout_ms: int) -> None:
        """CreatePartitions for one CreatePartitionsTopic entry; a KafkaError says why not."""
        raise NotImplementedError

    async def delete_topic(self, name: str, timeout_ms: int) -> None:
        raise NotImplementedError

    # ---- the controller's requests to this broker -----------------------------------------
    async def leader_and_isr(self, request: dict, version: int) -> tuple[ErrorCode, list[tuple[str, int, ErrorCode]]]:
        """LeaderAndIsr: (top-level code, (topic, partition, code) per partition applied)."""
        raise NotImplementedError

    async def stop_replica(self, request: dict, version: int) -> tuple[ErrorCode, list[tuple[str, int, ErrorCode]]]:
        """StopReplica: (top-level code, (topic, partition, code) per partition stopped)."""
        raise NotImplementedError

    async def update_metadata(self, request: dict, version: int) -> ErrorCode:
        """UpdateMetadata: the code of the answer once the metadata cache took the request."""
        raise NotImplementedError

    # ---- requests the active controller serves ----------------------------------------------
    async def alter_partition(self, request: dict, version: int) -> dict:
        """AlterPartition's answer from the active controller; NotController on any other
        broker."""
        raise NotImplementedError

    async def controlled_shutdown(self, broker_id: int, broker_epoch: int) -> tuple[ErrorCode, list[tuple[str, int]]]:
        """ControlledShutdown: (code, the partitions `broker_id` still leads) once the
        controller moved what it could; NotController on any other broker."""
        raise NotImplementedError

    async def list_reassignments(self, request: dict) -> dict:
        """ListPartitionReassignments' answer (KIP-455); NotController on a broker of a
        cluster that is not the active controller."""
        raise NotImplementedError

    async def alter_reassignments(self, request: dict) -> dict:
        """AlterPartitionReassignments' answer once each move has started (KIP-455);
        NotController on a broker of a cluster that is not the active controller."""
        raise NotImplementedError

    async def elect_leaders(self, asked: list[dict] | None, election_type: int, timeout_ms: int,
                            client_id: str | None) -> dict:
        """ElectLeaders' answer (KIP-460) for ElectLeadersRequest's `topic_partitions`
        (`asked`; None: every partition), its election type already checked."""
        raise NotImplementedError


def new_topic_configs(topic: dict, defaults: "LogConfig") -> dict[str, str]:
    """A CreateTopics entry's configs as a dict, checked as Kafka checks them (a null value is
    INVALID_CONFIG; LogConfig.from_kafka raises InvalidConfig for a bad one): both modes'
    controller side uses it."""
    configs: dict[str, str] = {}
    for entry in topic.get("configs") or []:
        if entry["value"] is None:
            raise KafkaError(f"config {entry['name']} has a null value", ErrorCode.INVALID_CONFIG)
        configs[entry["name"]] = entry["value"]
    LogConfig.from_kafka(configs, defaults)
    return configs


def check_new_topic(name: str, exists: bool) -> None:
    """The checks of a topic to create that come before its plan, in Kafka's order."""
    validate_topic_name(name)
    if exists:
        raise KafkaError(f"Topic '{name}' already exists.", ErrorCode.TOPIC_ALREADY_EXISTS)
    if name in INTERNAL_TOPICS:
        raise KafkaError(f"{name} is an internal topic", ErrorCode.INVALID_REQUEST)
