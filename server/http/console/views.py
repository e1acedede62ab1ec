"""The console's read-only views of the broker: brokers, topics, partitions, groups, rates.

Why here and read this way: the same state the Metadata and DescribeCluster handlers answer
from (`server/partition_states.py`: the broker's own partitions alone, or the metadata cache
the controller fills in ZooKeeper mode) and the same counters `/metrics` reads, taken
without a Kafka round trip. These functions only read and run on the trio thread between
two awaits, so they see one consistent state; they are cheap (a pass over partitions).

Offsets and sizes exist only for partitions with a replica on this broker: in a cluster a
partition hosted elsewhere shows its leader, replicas and ISR from the cache and `null`
offsets, and the page says which broker leads it.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any

from server.groups import is_consumer_group
from server.groups.consumer.consumer_protocol import decode_assignment
from server.partition_states import partition_states, topic_exists, topic_id, topic_names
from server.topics import INTERNAL_TOPICS

if TYPE_CHECKING:  # pragma: no cover
    from server.broker import Broker
    from server.partition import Partition


def brokers(broker: "Broker") -> dict[str, Any]:
    """The live brokers and the controller (a single broker is its own controller)."""
    if broker.cluster is not None:
        cache = broker.cluster.cache
        listeners = broker.config.listener_list
        listener = listeners[0].name if listeners else None
        live = []
        for b in sorted(cache.brokers.values(), key=lambda b: b.broker_id):
            host, port = b.address(listener) or (b.host, b.port)
            live.append({"node_id": b.broker_id, "host": host, "port": port, "rack": b.rack})
        controller = cache.controller_id
        mode = "zookeeper"
    else:
        host, port = broker.config.advertised
        live = [{"node_id": broker.node_id, "host": host, "port": port, "rack": None}]
        controller = broker.node_id
        mode = "single"
    for b in live:
        b["controller"] = b["node_id"] == controller
        b["this"] = b["node_id"] == broker.node_id
    return {"cluster_id": broker.cluster_id, "mode": mode, "node_id": broker.node_id,
            "controller_id": controller, "brokers": live}


def _local(partition: "Partition | None") -> dict[str, Any]:
    """Offsets and size of a replica on this broker (nulls when there is none)."""
    if partition is None:
        return {"local": False, "log_start_offset": None, "log_end_offset": None, "high_watermark": None,
                "size": None, "segments": None}
    plog = partition.log
    segments = list(plog.segments)
    return {"local": True, "log_start_offset": plog.log_start_offset, "log_end_offset": plog.log_end_offset,
            "high_watermark": partition.high_watermark, "size": sum(s.size for s in segments),
            "segments": len(segments)}


def partitions(broker: "Broker", name: str) -> list[dict[str, Any]]:
    """Each partition's leader, replicas, ISR (Metadata's entries) and, when hosted here,
    its offsets and size on disk."""
    hosted = broker.partitions
    out = []
    for state in partition_states(broker, name):
        index = state["partition_index"]
        out.append({"partition": index, "leader": state["leader_id"], "leader_epoch": state["leader_epoch"],
                    "replicas": list(state["replica_nodes"]), "isr": list(state["isr_nodes"]),
                    "offline_replicas": list(state["offline_replicas"]), **_local(hosted.get((name, index)))})
    return out


def topics(broker: "Broker") -> list[dict[str, Any]]:
    """Every topic with its partition count, replication factor, messages and size here."""
    out = []
    for name in topic_names(broker):
        parts = partitions(broker, name)
        local = [p for p in parts if p["local"]]
        out.append({
            "name": name, "topic_id": str(topic_id(broker, name)), "internal": name in INTERNAL_TOPICS,
            "partitions": len(parts), "replication_factor": max((len(p["replicas"]) for p in parts), default=0),
            "under_replicated": sum(1 for p in parts if len(p["isr"]) < len(p["replicas"])),
            "messages": sum(p["high_watermark"] - p["log_start_offset"] for p in local) if local else None,
            "size": sum(p["size"] for p in local) if local else None,
        })
    return out


def topic(broker: "Broker", name: str) -> dict[str, Any] | None:
    """One topic with its partitions and configs overriding the defaults; None when unknown."""
    if not topic_exists(broker, name):
        return None
    meta = broker.topics.get(name)
    configs = dict(meta.configs) if meta is not None else {}
    return {"name": name, "topic_id": str(topic_id(broker, name)), "internal": name in INTERNAL_TOPICS,
            "configs": configs, "partitions": partitions(broker, name)}


def _high_watermark(broker: "Broker", tp: tuple[str, int]) -> int | None:
    """The high watermark, known to the leader only (a follower's may lag)."""
    partition = broker.partitions.get(tp)
    if partition is None or partition.leader_id != broker.node_id:
        return None
    return partition.high_watermark


def _state(group) -> str:
    return str(group.consumer_state if is_consumer_group(group) else group.state)


def _members(broker: "Broker", group) -> list[dict[str, Any]]:
    """Members and their assigned partitions: a KIP-848 member's current assignment, a
    classic member's ConsumerProtocolAssignment (other protocols' bytes are opaque)."""
    out = []
    if is_consumer_group(group):
        for m in group.members.values():
            assigned = {}
            for tid, ps in m.assignment.assigned.items():
                assigned[broker.topic_name_for_id(tid) or str(tid)] = sorted(ps)
            out.append({"member_id": m.member_id, "instance_id": m.instance_id, "client_id": m.client_id,
                        "client_host": m.client_host, "member_epoch": m.member_epoch,
                        "assignment": [{"topic": t, "partitions": ps} for t, ps in sorted(assigned.items())]})
        return out
    for m in group.members.values():
        assignment = []
        if group.protocol_type == "consumer" and m.assignment:
            try:
                assignment = [{"topic": t, "partitions": sorted(ps)}
                              for t, ps in sorted(decode_assignment(m.assignment).items())]
            except Exception:  # a member's own bytes: shown as none rather than failing the page
                assignment = []
        out.append({"member_id": m.member_id, "instance_id": m.group_instance_id, "client_id": m.client_id,
                    "client_host": m.client_host, "member_epoch": None, "assignment": assignment})
    return out


def groups(broker: "Broker") -> list[dict[str, Any]]:
    """The groups this broker coordinates (in a cluster: those whose __consumer_offsets
    partition it leads, as ListGroups answers), with state, members and total lag."""
    coordinator = broker.groups
    if coordinator is None:
        return []
    _code, listed = coordinator.list_groups()
    out = []
    for group in sorted(listed, key=lambda g: g.group_id):
        lags = [lag for lag in (_lag(broker, tp, c.offset) for tp, c in list(group.offsets.items()))
                if lag is not None]
        out.append({"group_id": group.group_id, "type": "consumer" if is_consumer_group(group) else "classic",
                    "protocol_type": group.protocol_type or "", "state": _state(group),
                    "members": len(group.members), "lag": sum(lags) if lags else None})
    return out


def _lag(broker: "Broker", tp: tuple[str, int], offset: int) -> int | None:
    hw = _high_watermark(broker, tp)
    return None if hw is None else max(hw - offset, 0)


def group(broker: "Broker", group_id: str) -> dict[str, Any] | None:
    """One group: state, members with assignments, committed offsets and lag per partition."""
    coordinator = broker.groups
    if coordinator is None:
        return None
    _code, found = coordinator.describe_group(group_id)
    if found is None:
        return None
    offsets = []
    for (t, p), committed in sorted(list(found.offsets.items())):
        hw = _high_watermark(broker, (t, p))
        offsets.append({"topic": t, "partition": p, "committed": committed.offset, "metadata": committed.metadata,
                        "high_watermark": hw, "lag": None if hw is None else max(hw - committed.offset, 0)})
    return {"group_id": group_id, "type": "consumer" if is_consumer_group(found) else "classic",
            "protocol_type": found.protocol_type or "", "protocol": getattr(found, "protocol_name", None),
            "state": _state(found), "members": _members(broker, found), "offsets": offsets}


def rates(broker: "Broker") -> dict[str, Any]:
    """The running totals the page turns into per-second rates (Kafka's MessagesInPerSec,
    BytesInPerSec, BytesOutPerSec are rates of these counters): the page samples them every
    couple of seconds, so the broker keeps no history."""
    messages_in = bytes_in = bytes_out = 0
    for p in list(broker.partitions.values()):
        messages_in += p.messages_in
        bytes_in += p.bytes_in
        bytes_out += p.bytes_out
    return {"time": time.time(), "messages_in": messages_in, "bytes_in": bytes_in, "bytes_out": bytes_out}
