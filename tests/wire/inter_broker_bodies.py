"""Representative bodies of the inter-broker APIs (LeaderAndIsr, StopReplica, UpdateMetadata,
ControlledShutdown, AlterPartition), shared by test_codec_inter_broker.py and
capture_inter_broker.py.

Each message has one *superset* body: every field of every version, with values a ZooKeeper
controller would send (three brokers, a topic with an id, a partition being reassigned, a
deleted partition, a broker without a rack, an epoch above 2^32). `body_at(key, kind,
version)` projects it onto the fields that version has, walking the compiled tree, so each
version gets exactly its own fields — the tree is the codec under test, but the *values*
come from here and the golden bytes from Kafka's own classes.
"""

from __future__ import annotations

import base64
import copy
import uuid
from typing import Any

from wire import primitives as p
from wire.registry import ApiKey
from wire.schema import _NullableStruct, message_struct

ORDERS_ID = uuid.UUID("6ba7b810-9dad-11d1-80b4-00c04fd430c8")
AUDIT_ID = uuid.UUID("00000000-0000-0000-0000-0000000000ff")
BIG_EPOCH = (1 << 32) + 17  # a broker epoch is a czxid: 64 bits, often above 2^32


def _lai_partition(topic: str, index: int, leader: int, isr: list[int], replicas: list[int], *,
                   adding: list[int] = (), removing: list[int] = (), is_new: bool = False,
                   recovering: bool = False) -> dict:
    return {
        "topic_name": topic, "partition_index": index, "controller_epoch": 7, "leader": leader,
        "leader_epoch": 12 + index, "isr": isr, "partition_epoch": 40 + index, "replicas": replicas,
        "adding_replicas": list(adding), "removing_replicas": list(removing), "is_new": is_new,
        "leader_recovery_state": 1 if recovering else 0,
    }


_LAI_PARTITIONS = [
    _lai_partition("orders", 0, 1, [1, 2, 3], [1, 2, 3]),
    _lai_partition("orders", 1, 2, [2, 3], [2, 3, 1, 4], adding=[4], removing=[1], is_new=True),
    _lai_partition("audit", 0, 3, [3], [3], recovering=True),
]


def _ungrouped_to_topics(partitions: list[dict], ids: dict[str, uuid.UUID]) -> list[dict]:
    topics: dict[str, list[dict]] = {}
    for state in partitions:
        topics.setdefault(state["topic_name"], []).append(state)
    return [{"topic_name": t, "topic_id": ids[t], "partition_states": ps} for t, ps in topics.items()]


_IDS = {"orders": ORDERS_ID, "audit": AUDIT_ID}

_UM_PARTITIONS = [
    {"topic_name": "orders", "partition_index": 0, "controller_epoch": 7, "leader": 1, "leader_epoch": 12,
     "isr": [1, 2], "zk_version": 40, "replicas": [1, 2, 3], "offline_replicas": [3]},
    {"topic_name": "orders", "partition_index": 1, "controller_epoch": 6, "leader": -1, "leader_epoch": 3,
     "isr": [2], "zk_version": 9, "replicas": [2, 3], "offline_replicas": [2, 3]},
    {"topic_name": "audit", "partition_index": 0, "controller_epoch": 7, "leader": -2, "leader_epoch": 1,
     "isr": [3], "zk_version": 0, "replicas": [3], "offline_replicas": []},
]


def _um_broker(broker_id: int, rack: str | None) -> dict:
    host = f"broker-{broker_id}.example"
    return {
        "id": broker_id, "v0_host": host, "v0_port": 9092,
        "endpoints": [
            {"port": 9092, "host": host, "listener": "PLAINTEXT", "security_protocol": 0},
            {"port": 9093, "host": host, "listener": "REPLICATION", "security_protocol": 1},
        ],
        "rack": rack,
    }


SUPERSETS: dict[tuple[int, str], dict[str, Any]] = {
    (ApiKey.LEADER_AND_ISR, "request"): {
        "controller_id": 1, "is_k_raft_controller": False, "controller_epoch": 7, "broker_epoch": BIG_EPOCH,
        "type": 0,
        "ungrouped_partition_states": _LAI_PARTITIONS,
        "topic_states": _ungrouped_to_topics(_LAI_PARTITIONS, _IDS),
        "live_leaders": [{"broker_id": b, "host_name": f"broker-{b}.example", "port": 9092} for b in (1, 2, 3)],
    },
    (ApiKey.LEADER_AND_ISR, "response"): {
        "error_code": 0,
        "partition_errors": [
            {"topic_name": "orders", "partition_index": 0, "error_code": 0},
            {"topic_name": "orders", "partition_index": 1, "error_code": 11},  # STALE_CONTROLLER_EPOCH
        ],
        "topics": [
            {"topic_id": ORDERS_ID, "partition_errors": [
                {"topic_name": "orders", "partition_index": 0, "error_code": 0},
                {"topic_name": "orders", "partition_index": 1, "error_code": 11},
            ]},
            {"topic_id": AUDIT_ID, "partition_errors": [{"topic_name": "audit", "partition_index": 0,
                                                         "error_code": 110}]},  # INCONSISTENT_TOPIC_ID
        ],
    },
    (ApiKey.STOP_REPLICA, "request"): {
        "controller_id": 1, "is_k_raft_controller": False, "controller_epoch": 7, "broker_epoch": BIG_EPOCH,
        "delete_partitions": True,
        "ungrouped_partitions": [{"topic_name": "orders", "partition_index": 0},
                                 {"topic_name": "orders", "partition_index": 1}],
        "topics": [{"name": "orders", "partition_indexes": [0, 1]}],
        "topic_states": [
            {"topic_name": "orders", "partition_states": [
                {"partition_index": 0, "leader_epoch": -2, "delete_partition": True},
                {"partition_index": 1, "leader_epoch": 13, "delete_partition": False},
            ]},
        ],
    },
    (ApiKey.STOP_REPLICA, "response"): {
        "error_code": 0,
        "partition_errors": [
            {"topic_name": "orders", "partition_index": 0, "error_code": 0},
            {"topic_name": "orders", "partition_index": 1, "error_code": 74},  # FENCED_LEADER_EPOCH
        ],
    },
    (ApiKey.UPDATE_METADATA, "request"): {
        "controller_id": 1, "is_k_raft_controller": False, "type": 1, "controller_epoch": 7,
        "broker_epoch": BIG_EPOCH,
        "ungrouped_partition_states": _UM_PARTITIONS,
        "topic_states": _ungrouped_to_topics(_UM_PARTITIONS, _IDS),
        "live_brokers": [_um_broker(1, "rack-a"), _um_broker(2, "rack-b"), _um_broker(3, None)],
    },
    (ApiKey.UPDATE_METADATA, "response"): {"error_code": 0},
    (ApiKey.CONTROLLED_SHUTDOWN, "request"): {"broker_id": 2, "broker_epoch": BIG_EPOCH},
    (ApiKey.CONTROLLED_SHUTDOWN, "response"): {
        "error_code": 0,
        "remaining_partitions": [{"topic_name": "orders", "partition_index": 1},
                                 {"topic_name": "audit", "partition_index": 0}],
    },
    (ApiKey.ALTER_PARTITION, "request"): {
        "broker_id": 1, "broker_epoch": BIG_EPOCH,
        "topics": [
            {"topic_name": "orders", "topic_id": ORDERS_ID, "partitions": [
                {"partition_index": 0, "leader_epoch": 12, "new_isr": [1, 2],
                 "new_isr_with_epochs": [{"broker_id": 1, "broker_epoch": -1}, {"broker_id": 2, "broker_epoch": -1}],
                 "leader_recovery_state": 0, "partition_epoch": 40},
                {"partition_index": 1, "leader_epoch": 13, "new_isr": [1, 2, 3],
                 "new_isr_with_epochs": [{"broker_id": 1, "broker_epoch": BIG_EPOCH},
                                         {"broker_id": 2, "broker_epoch": 5},
                                         {"broker_id": 3, "broker_epoch": 6}],
                 "leader_recovery_state": 1, "partition_epoch": 41},
            ]},
        ],
    },
    (ApiKey.ALTER_PARTITION, "response"): {
        "throttle_time_ms": 0, "error_code": 0,
        "topics": [
            {"topic_name": "orders", "topic_id": ORDERS_ID, "partitions": [
                {"partition_index": 0, "error_code": 0, "leader_id": 1, "leader_epoch": 12, "isr": [1, 2],
                 "leader_recovery_state": 0, "partition_epoch": 41},
                {"partition_index": 1, "error_code": 107, "leader_id": -1, "leader_epoch": -1, "isr": [],
                 "leader_recovery_state": 0, "partition_epoch": -1},  # INELIGIBLE_REPLICA
            ]},
        ],
    },
}


def project(node, value):
    """`value` cut down to the fields `node` (a compiled tree) has; tagged fields only
    when present (a decode returns a tagged field only when it was written)."""
    kind = type(node)
    if value is None:
        return None
    if kind is p.KStruct:
        out = {name: project(typ, value[name]) for name, typ, _d in node.fields}
        if node.tagged is not None:
            for name, typ, default in node.tagged.fields.values():
                if name in value and value[name] != default:
                    out[name] = project(typ, value[name])
        return out
    if kind is p.Array:
        return [project(node.element, v) for v in value]
    if kind is _NullableStruct:
        return project(node.struct, value)
    return value


def body_at(key: int, kind: str, version: int) -> dict:
    """The representative body of one message at one version."""
    return project(message_struct(key, kind, version), copy.deepcopy(SUPERSETS[(key, kind)]))


def _camel(name: str) -> str:
    head, *rest = name.split("_")
    return head + "".join(part[:1].upper() + part[1:] for part in rest)


def kafka_json(value):
    """A body in the JSON form of Kafka's generated `*JsonConverter`s: field names in
    camelCase as in the schemas, UUIDs as Kafka's URL-safe base64 without padding."""
    if isinstance(value, dict):
        return {_camel(k): kafka_json(v) for k, v in value.items()}
    if isinstance(value, list):
        return [kafka_json(v) for v in value]
    if isinstance(value, uuid.UUID):
        return base64.urlsafe_b64encode(value.bytes).rstrip(b"=").decode()
    return value
