"""A rolling restart: each of the three brokers in turn is stopped with SIGTERM (controlled
shutdown: its leaderships move first), started again and waited for until every ISR is
whole, while an idempotent acks=all producer and a consumer group run. Kafka's promise for
this operation is that clients do not notice: zero failed deliveries, nothing acknowledged
lost or duplicated, and the group reads everything."""

from __future__ import annotations

import os

import pytest

from tests.cluster.clusterkit import Cluster, Workload, whole_isrs

pytestmark = pytest.mark.timeout(420)

ROUNDS = int(os.environ.get("TRAFKA_ROLLING_ROUNDS", "3" if os.environ.get("TRAFKA_LONG_TESTS") else "1"))



def test_rolling_restart_under_load_gives_clients_no_errors(tmp_path, zk_connect):
    with Cluster(tmp_path, zk_connect) as cluster:
        assert cluster.create_topic("rolling", 3, 3, {"min.insync.replicas": "2"})["error_code"] == 0
        cluster.wait_for(whole_isrs(cluster, "rolling", 3), 30, "whole ISRs")
        with Workload(cluster, "rolling") as work:
            work.wait_for_progress(200, 60)
            for _round in range(ROUNDS):
                for broker_id in sorted(cluster.brokers):
                    broker = cluster.brokers[broker_id]
                    assert broker.stop() == 0, broker.log_tail()
                    assert "controlled shutdown of broker" in broker.log_tail(400), \
                        "the controller never moved the stopping broker's leaderships"
                    work.wait_for_progress(100, 60)
                    broker.start()
                    cluster.wait_for(whole_isrs(cluster, "rolling", 3), 90, f"whole ISRs after broker {broker_id}")
                    work.wait_for_progress(100, 60)
        checked = work.check()
        assert checked > 500
        assert not work.verifier.errors, work.verifier.errors[:3]
