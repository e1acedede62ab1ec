"""ZooKeeper trouble, with an idempotent acks=all producer and a consumer group running
through it (tests/cluster/clusterkit.Workload): nothing acknowledged is lost or duplicated.

- ZooKeeper restarted mid-stream (down for a couple of seconds, shorter than the brokers'
  session timeout): sessions resume, brokers keep serving what they lead, zero failed
  deliveries.
- One member of a 3-member ensemble killed (`zookeeper.connect` with three hosts): the
  quorum of two goes on; the brokers move their sessions and keep serving.
- A broker paused (SIGSTOP) past its session timeout: the controller takes it out of the
  ISRs and leads without it; resumed, it finds its session expired, registers again (a new
  broker epoch), truncates/catches up and is back in every ISR.
"""

from __future__ import annotations

import os
import signal
import time

import pytest

from cli.zookeeper_server import ZooKeeperEnsemble, ZooKeeperServer
from tests.cluster.clusterkit import Cluster, Workload, whole_isrs

pytestmark = pytest.mark.timeout(360)



def test_zookeeper_restarted_mid_stream(tmp_path, zookeeper: ZooKeeperServer, zk_connect):
    with Cluster(tmp_path, zk_connect, 3, "--set", "zookeeper.session.timeout.ms=15000") as cluster:
        assert cluster.create_topic("zkrestart", 3, 3, {"min.insync.replicas": "2"})["error_code"] == 0
        cluster.wait_for(whole_isrs(cluster, "zkrestart", 3), 30, "whole ISRs")
        with Workload(cluster, "zkrestart") as work:
            work.wait_for_progress(200, 60)
            zookeeper.kill()
            try:
                # ZooKeeper is down: the leaders keep taking writes (the ISRs need no change).
                work.wait_for_progress(200, 30)
                time.sleep(1)
            finally:
                zookeeper.start()
            work.wait_for_progress(200, 60)
            # Still one cluster: a topic created after the restart gets leaders.
            assert cluster.create_topic("after-restart", 1, 3)["error_code"] == 0
            cluster.wait_for(whole_isrs(cluster, "after-restart", 1), 60, "the new topic's ISR")
        work.check()
        for b in cluster.brokers.values():
            assert "registered again" not in b.log_tail(2000), "a session expired during a short outage"


def test_one_of_three_zookeeper_members_killed(tmp_path):
    if ZooKeeperServer.unavailable_reason():
        pytest.skip(f"no ZooKeeper: {ZooKeeperServer.unavailable_reason()}")
    with ZooKeeperEnsemble(3, tmp_path / "ensemble") as ensemble:
        connect = ensemble.chroot_connect_string()
        with Cluster(tmp_path / "brokers", connect, 3, "--set", "zookeeper.session.timeout.ms=10000") as cluster:
            assert cluster.create_topic("quorum", 3, 3, {"min.insync.replicas": "2"})["error_code"] == 0
            cluster.wait_for(whole_isrs(cluster, "quorum", 3), 30, "whole ISRs")
            with Workload(cluster, "quorum") as work:
                work.wait_for_progress(200, 60)
                # Kill the member most brokers talk to is unknowable from here; kill member 1,
                # the first host of every broker's zookeeper.connect.
                ensemble.members[1].kill()
                work.wait_for_progress(300, 60)
                # The cluster still changes state through the two remaining members.
                assert cluster.create_topic("quorum-after", 1, 3)["error_code"] == 0
                cluster.wait_for(whole_isrs(cluster, "quorum-after", 1), 60, "a topic created on two members")
                work.wait_for_progress(200, 60)
            work.check()


def test_broker_paused_past_its_session_timeout_rejoins(tmp_path, zk_connect):
    with Cluster(tmp_path, zk_connect) as cluster:  # zookeeper.session.timeout.ms=6000
        assert cluster.create_topic("paused", 3, 3, {"min.insync.replicas": "2"})["error_code"] == 0
        cluster.wait_for(whole_isrs(cluster, "paused", 3), 30, "whole ISRs")
        controller = cluster.metadata()["controller_id"]
        victim = next(b for b in sorted(cluster.brokers) if b != controller)
        other = next(b for b in sorted(cluster.brokers) if b not in (victim, controller))
        with Workload(cluster, "paused") as work:
            work.wait_for_progress(200, 60)
            os.kill(cluster.brokers[victim].proc.pid, signal.SIGSTOP)
            try:
                # Its session expires: no partition is led by it, none has it in the ISR.
                cluster.wait_for(lambda: all(
                    (p := cluster.partition("paused", i, other)) and victim not in p["isr_nodes"]
                    and p["leader_id"] not in (-1, victim) for i in range(3)), 60, "the paused broker fenced")
                work.wait_for_progress(200, 60)
            finally:
                os.kill(cluster.brokers[victim].proc.pid, signal.SIGCONT)
            cluster.wait_for(lambda: "registered again after a session expiry" in
                             cluster.brokers[victim].log_tail(2000), 60, "the broker registered again")
            cluster.wait_for(whole_isrs(cluster, "paused", 3, other), 90, "the broker back in every ISR")
            work.wait_for_progress(200, 60)
        work.check()
