"""`trafka cluster info` (cluster id, brokers, controller) and `trafka cluster health`
(offline and under-replicated partitions, brokers that replicas name but that are gone;
exit code 1 when unhealthy, so a script or a probe can act on it)."""

from __future__ import annotations

import argparse
from typing import Any

from cli.tools.common import add_output_format, admin_client, emit, result, table, timeout


def register(sub: argparse._SubParsersAction, parent: argparse.ArgumentParser) -> None:
    """Add `cluster` and its verbs to the root parser."""
    cluster = sub.add_parser("cluster", help="cluster id, brokers, controller and health")
    verbs = cluster.add_subparsers(dest="verb", required=True, metavar="VERB")
    info = verbs.add_parser("info", parents=[parent], help="cluster id, brokers and the controller")
    add_output_format(info)
    info.set_defaults(handler=cluster_info)
    health = verbs.add_parser("health", parents=[parent],
                              help="offline / under-replicated partitions; exit code 1 when unhealthy")
    add_output_format(health)
    health.set_defaults(handler=cluster_health)


def cluster_info(args: argparse.Namespace) -> int:
    described = result(admin_client(args).describe_cluster(request_timeout=timeout()))
    controller = described.controller.id if described.controller is not None else None
    brokers = [{"id": n.id, "host": n.host, "port": n.port, "rack": n.rack, "controller": n.id == controller}
               for n in sorted(described.nodes, key=lambda n: n.id)]
    data = {"cluster_id": described.cluster_id, "controller": controller, "brokers": brokers}
    emit(args, data, lambda d: "\n".join([
        f"CLUSTER-ID  {d['cluster_id']}", f"CONTROLLER  {d['controller']}", "",
        table(["ID", "HOST", "PORT", "RACK", "CONTROLLER"],
              [(b["id"], b["host"], b["port"], b["rack"] or "-", "*" if b["controller"] else "")
               for b in d["brokers"]])]))
    return 0


def cluster_health(args: argparse.Namespace) -> int:
    """Healthy means: a controller, every partition led, every ISR complete (what rpk's
    `cluster health` and kafka-topics' --under-replicated-partitions report)."""
    metadata = admin_client(args).list_topics(timeout=timeout())
    live = set(metadata.brokers)
    offline: list[dict[str, Any]] = []
    under: list[dict[str, Any]] = []
    down: set[int] = set()
    for name, topic in sorted(metadata.topics.items()):
        for pid, part in sorted(topic.partitions.items()):
            row = {"topic": name, "partition": pid, "leader": part.leader, "replicas": list(part.replicas),
                   "isr": list(part.isrs)}
            down.update(r for r in part.replicas if r not in live)
            if part.leader < 0:
                offline.append(row)
            elif len(part.isrs) < len(part.replicas):
                under.append(row)
    controller = metadata.controller_id
    healthy = not offline and not under and not down and controller >= 0
    data = {"healthy": healthy, "controller": controller if controller >= 0 else None, "brokers": sorted(live),
            "brokers_down": sorted(down), "offline_partitions": offline, "under_replicated_partitions": under}
    emit(args, data, _health_text)
    return 0 if healthy else 1


def _health_text(d: dict[str, Any]) -> str:
    lines = [f"HEALTHY                      {'yes' if d['healthy'] else 'no'}",
             f"CONTROLLER                   {d['controller'] if d['controller'] is not None else 'none'}",
             f"BROKERS                      {_ids(d['brokers'])}",
             f"BROKERS-DOWN                 {_ids(d['brokers_down'])}",
             f"OFFLINE-PARTITIONS           {len(d['offline_partitions'])}",
             f"UNDER-REPLICATED-PARTITIONS  {len(d['under_replicated_partitions'])}"]
    rows = [("offline", p["topic"], p["partition"], p["leader"], _ids(p["replicas"]), _ids(p["isr"]))
            for p in d["offline_partitions"]]
    rows += [("under-replicated", p["topic"], p["partition"], p["leader"], _ids(p["replicas"]), _ids(p["isr"]))
             for p in d["under_replicated_partitions"]]
    if rows:
        lines += ["", table(["PROBLEM", "TOPIC", "PARTITION", "LEADER", "REPLICAS", "ISR"], rows)]
    return "\n".join(lines)


def _ids(ids: list[int]) -> str:
    return "[" + ",".join(str(i) for i in ids) + "]"
