"""`trafka cluster info|health` on a 3-broker ZooKeeper-mode cluster: info names the
cluster, its brokers and controller; health is clean (exit 0) with every broker up, reports
the under-replicated partitions and the broker that is down (exit 1) once one is stopped,
and is clean again after it is back and caught up."""

from __future__ import annotations

import pytest

from tests.cluster.clusterkit import Cluster
from tests.tools.clikit import trafka

pytestmark = pytest.mark.timeout(400)


def health(cluster: Cluster):
    return trafka("cluster", "health", "--format", "json", bootstrap=cluster.bootstrap)


def test_info_and_health_with_a_broker_stopped(tmp_path, zk_connect):
    with Cluster(tmp_path, zk_connect, 3) as cluster:
        info = trafka("cluster", "info", "--format", "json", bootstrap=cluster.bootstrap).json()
        assert [b["id"] for b in info["brokers"]] == [1, 2, 3]
        assert {(b["host"], b["port"]) for b in info["brokers"]} == {("127.0.0.1", p.port)
                                                                      for p in cluster.brokers.values()}
        controller = info["controller"]
        assert controller in (1, 2, 3) and info["cluster_id"]
        assert [b["id"] for b in info["brokers"] if b["controller"]] == [controller]
        text = trafka("cluster", "info", bootstrap=cluster.bootstrap).ok().out
        assert f"CONTROLLER  {controller}" in text and f"CLUSTER-ID  {info['cluster_id']}" in text

        trafka("topic", "create", "replicated", "-p", "3", "-r", "3", bootstrap=cluster.bootstrap).ok()
        cluster.wait_for(lambda: health(cluster).code == 0, 60, "a healthy cluster")
        healthy = health(cluster).json()
        assert healthy["healthy"] and healthy["brokers"] == [1, 2, 3]
        assert healthy["under_replicated_partitions"] == [] and healthy["offline_partitions"] == []

        stopped = next(node for node in (3, 2, 1) if node != controller)
        cluster.brokers[stopped].stop()
        sick = cluster.wait_for(lambda: (lambda r: r if r.code == 1 and r.json_any()["under_replicated_partitions"]
                                         else None)(health(cluster)), 60, "under-replicated partitions")
        data = sick.json_any()
        assert not data["healthy"] and data["brokers_down"] == [stopped]
        assert stopped not in data["brokers"]
        under = {(p["topic"], p["partition"]) for p in data["under_replicated_partitions"]}
        assert {("replicated", 0), ("replicated", 1), ("replicated", 2)} <= under
        assert all(stopped in p["replicas"] and stopped not in p["isr"] for p in data["under_replicated_partitions"])
        text = trafka("cluster", "health", bootstrap=cluster.bootstrap)
        assert text.code == 1 and "HEALTHY                      no" in text.out
        assert f"BROKERS-DOWN                 [{stopped}]" in text.out and "under-replicated  replicated" in text.out

        cluster.brokers[stopped].start()
        cluster.wait_for(lambda: health(cluster).code == 0, 90, "healthy again after the broker came back")
