"""Kafka's ZooKeeper layout: znode paths and their JSON payloads (Kafka's `ZkData.scala`).

Pure: no kazoo, no trio. Every encoder writes what Kafka 3.9 writes, key by key, with the
quirks kept because other readers (Kafka's own brokers and tools, `zkCli.sh` users) rely on
them:

- JSON is compact UTF-8 (Jackson's output): no spaces, non-ASCII written as is.
- Some numbers are strings: the broker and controller `timestamp`, the cluster id's
  `"version":"1"`, the producer id block bounds. `/controller_epoch` is bare decimal text.
- Partition numbers are object keys, hence strings: `"partitions":{"0":[1,2]}`.
- Readers look keys up by name and ignore keys they do not know.

Key order follows Kafka's examples (docs/design/replication.md#znode-payloads; Kafka's Scala
maps of five or more
entries are hash maps, so Kafka's own order is whatever the hash gives; readers never
depend on it, but tests compare bytes, so ours is fixed).

Versions: broker registration v5 (IBP ≥ 2.7), topic assignment v3 (topic ids, 2.8),
partition state v1 (plus `leader_recovery_state` while RECOVERING, KIP-704), controller v2
(3.4+, with `kraftControllerEpoch`), config entity v1, config change notification v2.
"""

from __future__ import annotations

import base64
import json
import time
import uuid
from dataclasses import dataclass, field
from typing import Any, Mapping, NamedTuple

# --- paths -----------------------------------------------------------------------------

CLUSTER_ID_PATH = "/cluster/id"
CONTROLLER_PATH = "/controller"
CONTROLLER_EPOCH_PATH = "/controller_epoch"
CONSUMERS_PATH = "/consumers"
BROKERS_PATH = "/brokers"
BROKER_IDS_PATH = "/brokers/ids"
BROKER_SEQID_PATH = "/brokers/seqid"
TOPICS_PATH = "/brokers/topics"
CONFIG_PATH = "/config"
CONFIG_CHANGES_PATH = "/config/changes"
CONFIG_CHANGE_PREFIX = "config_change_"
ADMIN_PATH = "/admin"
DELETE_TOPICS_PATH = "/admin/delete_topics"
REASSIGN_PARTITIONS_PATH = "/admin/reassign_partitions"
PREFERRED_REPLICA_ELECTION_PATH = "/admin/preferred_replica_election"
ISR_CHANGE_NOTIFICATION_PATH = "/isr_change_notification"
LOG_DIR_EVENT_NOTIFICATION_PATH = "/log_dir_event_notification"
PRODUCER_ID_BLOCK_PATH = "/latest_producer_id_block"
FEATURE_PATH = "/feature"

# Kafka's ConfigType.ALL: the entity types under /config.
CONFIG_TYPES = ("topics", "clients", "users", "brokers", "ips")
# The entity name of cluster-wide defaults, e.g. /config/brokers/<default>.
DEFAULT_ENTITY = "<default>"

# ZkData.PersistentZkPaths, in Kafka's order: created (empty, if missing) by every broker
# at start, so later code can create children without `make_parents`.
PERSISTENT_PATHS: tuple[str, ...] = (
    CONSUMERS_PATH,  # the pre-0.9 consumer's path, still created
    BROKER_IDS_PATH,
    TOPICS_PATH,
    CONFIG_CHANGES_PATH,
    DELETE_TOPICS_PATH,
    BROKER_SEQID_PATH,
    ISR_CHANGE_NOTIFICATION_PATH,
    PRODUCER_ID_BLOCK_PATH,
    LOG_DIR_EVENT_NOTIFICATION_PATH,
) + tuple(f"{CONFIG_PATH}/{t}" for t in CONFIG_TYPES)


def broker_path(broker_id: int) -> str:
    return f"{BROKER_IDS_PATH}/{broker_id}"


def topic_path(topic: str) -> str:
    return f"{TOPICS_PATH}/{topic}"


def topic_partitions_path(topic: str) -> str:
    return f"{TOPICS_PATH}/{topic}/partitions"


def partition_path(topic: str, partition: int) -> str:
    return f"{TOPICS_PATH}/{topic}/partitions/{partition}"


def partition_state_path(topic: str, partition: int) -> str:
    return f"{TOPICS_PATH}/{topic}/partitions/{partition}/state"


def config_entity_path(entity_type: str, entity_name: str) -> str:
    return f"{CONFIG_PATH}/{entity_type}/{entity_name}"


def topic_config_path(topic: str) -> str:
    return config_entity_path("topics", topic)


def broker_config_path(broker_id: int | str) -> str:
    """`/config/brokers/<id>`; `DEFAULT_ENTITY` for the cluster-wide defaults."""
    return config_entity_path("brokers", str(broker_id))


def delete_topic_path(topic: str) -> str:
    return f"{DELETE_TOPICS_PATH}/{topic}"


def consumer_offset_path(group: str, topic: str, partition: int) -> str:
    """Where OffsetCommit v0 keeps a group's offset (Kafka's ConsumerOffset znode; its data is
    the offset in decimal)."""
    return f"{CONSUMERS_PATH}/{group}/offsets/{topic}/{partition}"


# --- JSON -------------------------------------------------------------------------------


def _dumps(doc: Mapping[str, Any]) -> bytes:
    return json.dumps(doc, separators=(",", ":"), ensure_ascii=False).encode("utf-8")


def _loads(data: bytes) -> dict[str, Any]:
    doc = json.loads(data.decode("utf-8"))
    if not isinstance(doc, dict):
        raise ValueError(f"expected a JSON object, got {data[:80]!r}")
    return doc


def _now_ms() -> int:
    return time.time_ns() // 1_000_000


# --- uuids: Kafka's Uuid.toString -------------------------------------------------------


def uuid_to_base64(value: uuid.UUID) -> str:
    """Kafka's `Uuid.toString`: URL-safe base64 of the 16 bytes, without padding (22 chars)."""
    return base64.urlsafe_b64encode(value.bytes).rstrip(b"=").decode("ascii")


def uuid_from_base64(text: str) -> uuid.UUID:
    """Kafka's `Uuid.fromString`."""
    if len(text) != 22:
        raise ValueError(f"a Kafka uuid is 22 base64 characters, got {text!r}")
    return uuid.UUID(bytes=base64.urlsafe_b64decode(text + "=="))


def new_cluster_id() -> str:
    """A fresh cluster id, as a first Kafka broker proposes one (`Uuid.randomUuid`)."""
    return uuid_to_base64(uuid.uuid4())


# --- /cluster/id --------------------------------------------------------------------------


def encode_cluster_id(cluster_id: str) -> bytes:
    # The version is the string "1" (ClusterIdZNode.toJson), unlike every other znode.
    return _dumps({"version": "1", "id": cluster_id})


def decode_cluster_id(data: bytes) -> str:
    return str(_loads(data)["id"])


# --- /controller and /controller_epoch ----------------------------------------------------


@dataclass(frozen=True)
class ControllerRegistration:
    """The payload of the ephemeral `/controller` znode (version 2 since Kafka 3.4)."""

    broker_id: int
    timestamp: int = field(default_factory=_now_ms)
    kraft_controller_epoch: int = -1  # -1: a ZooKeeper controller (KIP-866 migration field)

    def encode(self) -> bytes:
        return _dumps({"version": 2, "brokerid": self.broker_id, "timestamp": str(self.timestamp),
                       "kraftControllerEpoch": self.kraft_controller_epoch})

    @classmethod
    def decode(cls, data: bytes) -> ControllerRegistration:
        doc = _loads(data)  # version 1 (≤ 3.3) has no kraftControllerEpoch
        return cls(broker_id=int(doc["brokerid"]), timestamp=int(doc.get("timestamp", -1)),
                   kraft_controller_epoch=int(doc.get("kraftControllerEpoch", -1)))


def encode_controller_epoch(epoch: int) -> bytes:
    """Bare decimal text, not JSON (ControllerEpochZNode)."""
    return str(epoch).encode("ascii")


def decode_controller_epoch(data: bytes) -> int:
    return int(data.decode("ascii"))


# --- /brokers/ids/<id> ------------------------------------------------------------------


class EndPoint(NamedTuple):
    """One advertised listener: `LISTENER_NAME://host:port` plus its security protocol."""

    listener_name: str
    host: str
    port: int
    security_protocol: str

    @property
    def connection_string(self) -> str:
        # Kafka's Utils.formatAddress: IPv6 literals in brackets.
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"{self.listener_name}://{host}:{self.port}"

    @classmethod
    def parse(cls, text: str, protocol_map: Mapping[str, str] | None = None) -> EndPoint:
        """Parse `NAME://host:port`. Without a protocol map (registrations before v4) the
        listener name must be a security protocol name, as in Kafka."""
        name, sep, address = text.partition("://")
        if not sep:
            raise ValueError(f"not an endpoint: {text!r}")
        host, _, port = address.rpartition(":")
        if host.startswith("[") and host.endswith("]"):
            host = host[1:-1]
        protocol = (protocol_map or {}).get(name, name if protocol_map is None else None)
        if protocol is None:
            raise ValueError(f"no security protocol for listener {name!r} in {dict(protocol_map or {})}")
        return cls(name, host, int(port), protocol)


BROKER_REGISTRATION_VERSION = 5


@dataclass(frozen=True)
class BrokerRegistration:
    """The payload of `/brokers/ids/<id>` (BrokerIdZNode, JSON v5).

    `host`/`port` mirror the first PLAINTEXT endpoint for clients older than 0.10
    (None/-1 when there is none); left at their defaults they are derived from `endpoints`.
    `listener_security_protocol_map` likewise defaults to the endpoints' protocols.
    `features` maps a feature name to its (min_version, max_version) (KIP-584).
    """

    broker_id: int
    endpoints: tuple[EndPoint, ...]
    rack: str | None = None
    host: str | None = None
    port: int = -1
    listener_security_protocol_map: Mapping[str, str] = field(default_factory=dict)
    timestamp: int = field(default_factory=_now_ms)
    jmx_port: int = -1
    features: Mapping[str, tuple[int, int]] = field(default_factory=dict)
    version: int = BROKER_REGISTRATION_VERSION

    def __post_init__(self) -> None:
        object.__setattr__(self, "endpoints", tuple(EndPoint(*e) for e in self.endpoints))
        if self.host is None and self.port == -1:
            plaintext = next((e for e in self.endpoints if e.security_protocol == "PLAINTEXT"), None)
            if plaintext is not None:
                object.__setattr__(self, "host", plaintext.host)
                object.__setattr__(self, "port", plaintext.port)
        if not self.listener_security_protocol_map:
            object.__setattr__(self, "listener_security_protocol_map",
                               {e.listener_name: e.security_protocol for e in self.endpoints})

    def endpoint(self, listener_name: str) -> EndPoint | None:
        return next((e for e in self.endpoints if e.listener_name == listener_name), None)

    def encode(self) -> bytes:
        doc: dict[str, Any] = {
            "version": BROKER_REGISTRATION_VERSION,
            "host": self.host,
            "port": self.port,
            "jmx_port": self.jmx_port,
            "timestamp": str(self.timestamp),
            "endpoints": [e.connection_string for e in self.endpoints],
            "listener_security_protocol_map": dict(self.listener_security_protocol_map),
        }
        if self.rack is not None:
            doc["rack"] = self.rack
        doc["features"] = {name: {"min_version": lo, "max_version": hi}
                           for name, (lo, hi) in self.features.items()}
        return _dumps(doc)

    @classmethod
    def decode(cls, broker_id: int, data: bytes) -> BrokerRegistration:
        """Any version Kafka reads (1 and up): v1 has only host/port, v2+ endpoints, v3+
        rack, v4+ the protocol map, v5 features."""
        doc = _loads(data)
        version = int(doc["version"])
        if version < 1:
            raise ValueError(f"unsupported broker registration version {version}: {data!r}")
        if version == 1:
            endpoints: tuple[EndPoint, ...] = (EndPoint("PLAINTEXT", doc["host"], int(doc["port"]), "PLAINTEXT"),)
            protocol_map: dict[str, str] = {"PLAINTEXT": "PLAINTEXT"}
        else:
            raw_map = doc.get("listener_security_protocol_map")
            protocol_map = dict(raw_map) if raw_map is not None else {}
            endpoints = tuple(EndPoint.parse(e, raw_map) for e in doc["endpoints"])
            if raw_map is None:
                protocol_map = {e.listener_name: e.security_protocol for e in endpoints}
        features = {name: (int(r.get("min_version", 1)), int(r["max_version"]))
                    for name, r in (doc.get("features") or {}).items()}
        port = doc.get("port")
        return cls(broker_id=broker_id, endpoints=endpoints, rack=doc.get("rack"), host=doc.get("host"),
                   port=-1 if port is None else int(port), listener_security_protocol_map=protocol_map,
                   timestamp=int(doc.get("timestamp", -1)), jmx_port=int(doc.get("jmx_port", -1)),
                   features=features, version=version)


# --- /brokers/topics/<t> ----------------------------------------------------------------


TOPIC_ASSIGNMENT_VERSION = 3


@dataclass(frozen=True)
class TopicAssignment:
    """The payload of `/brokers/topics/<t>` (TopicZNode, JSON v3).

    `partitions[p]` is the replica list in preference order (its head is the preferred
    leader). `adding_replicas`/`removing_replicas` list only partitions under reassignment
    (KIP-455). `topic_id` is None for topics written before Kafka 2.8 (no id yet).
    """

    partitions: Mapping[int, list[int]]
    topic_id: uuid.UUID | None = None
    adding_replicas: Mapping[int, list[int]] = field(default_factory=dict)
    removing_replicas: Mapping[int, list[int]] = field(default_factory=dict)

    def encode(self) -> bytes:
        def by_partition(m: Mapping[int, list[int]]) -> dict[str, list[int]]:
            return {str(p): list(m[p]) for p in sorted(m) if m[p]}

        doc: dict[str, Any] = {"version": TOPIC_ASSIGNMENT_VERSION}
        if self.topic_id is not None:
            doc["topic_id"] = uuid_to_base64(self.topic_id)
        doc["partitions"] = {str(p): list(self.partitions[p]) for p in sorted(self.partitions)}
        doc["adding_replicas"] = by_partition(self.adding_replicas)
        doc["removing_replicas"] = by_partition(self.removing_replicas)
        return _dumps(doc)

    @classmethod
    def decode(cls, data: bytes) -> TopicAssignment:
        doc = _loads(data)

        def by_partition(key: str) -> dict[int, list[int]]:
            return {int(p): [int(r) for r in rs] for p, rs in (doc.get(key) or {}).items()}

        raw_id = doc.get("topic_id")
        return cls(partitions=by_partition("partitions"),
                   topic_id=uuid_from_base64(raw_id) if raw_id else None,
                   adding_replicas=by_partition("adding_replicas"),
                   removing_replicas=by_partition("removing_replicas"))


# --- /brokers/topics/<t>/partitions/<p>/state ----------------------------------------------

LEADER_RECOVERED = 0
LEADER_RECOVERING = 1  # after an unclean election, IBP ≥ 3.2 (KIP-704)
NO_LEADER = -1


@dataclass(frozen=True)
class PartitionState:
    """The payload of a partition's `state` znode (TopicPartitionStateZNode, JSON v1).

    `zk_version` is the znode's stat version, carried alongside and never encoded: in
    ZooKeeper mode it *is* the partition epoch, and every update of the znode is a
    compare-and-set against it. -1 = not read from ZooKeeper (matches any version).
    """

    leader: int
    leader_epoch: int
    isr: list[int]
    controller_epoch: int
    leader_recovery_state: int = LEADER_RECOVERED
    zk_version: int = -1

    def encode(self) -> bytes:
        doc: dict[str, Any] = {"controller_epoch": self.controller_epoch, "leader": self.leader, "version": 1,
                               "leader_epoch": self.leader_epoch, "isr": list(self.isr)}
        if self.leader_recovery_state != LEADER_RECOVERED:
            doc["leader_recovery_state"] = self.leader_recovery_state
        return _dumps(doc)

    @classmethod
    def decode(cls, data: bytes, zk_version: int = -1) -> PartitionState:
        doc = _loads(data)
        return cls(leader=int(doc["leader"]), leader_epoch=int(doc["leader_epoch"]),
                   isr=[int(r) for r in doc["isr"]], controller_epoch=int(doc["controller_epoch"]),
                   leader_recovery_state=int(doc.get("leader_recovery_state", LEADER_RECOVERED)),
                   zk_version=zk_version)


# --- /config/<type>/<entity> and /config/changes ---------------------------------------------


def encode_entity_config(config: Mapping[str, str]) -> bytes:
    """`{"version":1,"config":{...}}` for /config/topics/<t>, /config/brokers/<id>, ...
    (values are strings, like a java.util.Properties)."""
    return _dumps({"version": 1, "config": {k: str(v) for k, v in config.items()}})


def decode_entity_config(data: bytes | None) -> dict[str, str]:
    """Kafka's ConfigEntityZNode.decode: no data or no `config` object = no overrides."""
    if not data:
        return {}
    config = _loads(data).get("config")
    if not isinstance(config, dict):
        return {}
    return {str(k): str(v) for k, v in config.items()}


def encode_config_change_notification(entity_path: str) -> bytes:
    """The payload of `/config/changes/config_change_<seq>` (v2), e.g. entity_path
    `topics/orders`: written after each config write so every broker re-reads it."""
    return _dumps({"version": 2, "entity_path": entity_path})


def decode_config_change_notification(data: bytes) -> str:
    """The entity path of a notice; v1 notices (`entity_type` + `entity_name`) still parse."""
    doc = _loads(data)
    if int(doc.get("version", 1)) == 1:
        return f"{doc['entity_type']}/{doc['entity_name']}"
    return str(doc["entity_path"])


# --- /admin/preferred_replica_election ----------------------------------------------------


def encode_preferred_replica_election(partitions: list[tuple[str, int]]) -> bytes:
    """`/admin/preferred_replica_election` (Kafka's PreferredReplicaElectionZNode, what
    kafka-preferred-replica-election.sh wrote before KIP-460): the partitions whose
    preferred replica should lead; the controller deletes it when done."""
    return _dumps({"version": 1, "partitions": [{"topic": t, "partition": p} for t, p in partitions]})


def decode_preferred_replica_election(data: bytes) -> list[tuple[str, int]]:
    return [(str(e["topic"]), int(e["partition"])) for e in _loads(data).get("partitions", [])]


# --- /latest_producer_id_block --------------------------------------------------------------

PRODUCER_ID_BLOCK_SIZE = 1000  # Kafka's ProducerIdsBlock.PRODUCER_ID_BLOCK_SIZE


@dataclass(frozen=True)
class ProducerIdBlock:
    """The last block of producer ids handed out, cluster-wide (ProducerIdBlockZNode): ids
    `first`..`last` inclusive, taken by broker `broker_id`. The bounds are strings in the
    JSON (Kafka writes the Longs with toString)."""

    broker_id: int
    first: int
    last: int

    def next_block(self, broker_id: int, size: int = PRODUCER_ID_BLOCK_SIZE) -> ProducerIdBlock:
        return ProducerIdBlock(broker_id, self.last + 1, self.last + size)

    def encode(self) -> bytes:
        return _dumps({"version": 1, "broker": self.broker_id, "block_start": str(self.first),
                       "block_end": str(self.last)})

    @classmethod
    def decode(cls, data: bytes | None) -> ProducerIdBlock | None:
        """None for the empty znode every broker creates at start (no block taken yet)."""
        if not data:
            return None
        doc = _loads(data)
        return cls(int(doc["broker"]), int(doc["block_start"]), int(doc["block_end"]))
