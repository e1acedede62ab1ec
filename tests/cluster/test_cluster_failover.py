"""Failures in a 3-broker cluster (RF=3, min.insync.replicas=2) on a real ZooKeeper: the
leader SIGKILLed repeatedly under idempotent acks=all producers loses nothing acknowledged
and duplicates nothing; the controller SIGKILLed is replaced; a stopped follower truncates
and catches up."""

from __future__ import annotations

import threading
import time

import confluent_kafka as ck
import pytest

from tests.cluster.clusterkit import Cluster, read_topic

pytestmark = pytest.mark.timeout(300)


def full_isr(cluster: Cluster, topic: str, index: int, size: int = 3):
    def check():
        p = cluster.partition(topic, index)
        return p if p and p["leader_id"] >= 0 and len(p["isr_nodes"]) == size else None
    return check


def test_leader_killed_repeatedly_loses_nothing_acknowledged(tmp_path, zk_connect):
    with Cluster(tmp_path, zk_connect) as cluster:
        assert cluster.create_topic("durable", 1, 3, {"min.insync.replicas": "2"})["error_code"] == 0
        cluster.wait_for(full_isr(cluster, "durable", 0), 30, "a full ISR")
        acked: dict[bytes, int] = {}
        failed: list = []
        stop = threading.Event()

        def produce() -> None:
            producer = ck.Producer({"bootstrap.servers": ",".join(b.bootstrap for b in cluster.brokers.values()),
                                    "acks": "all", "enable.idempotence": True, "linger.ms": 5,
                                    "message.timeout.ms": 120000})

            def report(err, msg):
                if err is None:
                    acked[msg.value()] = msg.offset()
                else:
                    failed.append(err)
            i = 0
            while not stop.is_set():
                producer.produce("durable", value=b"v%06d" % i, on_delivery=report)
                producer.poll(0)
                i += 1
                time.sleep(0.002)
            producer.flush(120)

        thread = threading.Thread(target=produce)
        thread.start()
        try:
            for _round in range(3):
                time.sleep(2)
                leader = cluster.wait_for(lambda: cluster.partition("durable", 0)["leader_id"], 30, "a leader")
                before = len(acked)
                cluster.brokers[leader].kill()
                new_leader = cluster.wait_for(
                    lambda: (lambda p: p["leader_id"] if p["leader_id"] not in (-1, leader) else None)(
                        cluster.partition("durable", 0)), 40, "a new leader")
                assert new_leader != leader
                cluster.wait_for(lambda: len(acked) > before + 50, 40, "writes acknowledged by the new leader")
                cluster.brokers[leader].start()
                cluster.wait_for(full_isr(cluster, "durable", 0), 60, "the ISR back to 3")
        finally:
            stop.set()
            thread.join(180)
        assert not failed, failed[:3]
        records = read_topic(cluster.bootstrap, "durable", len(acked))
        values = [v for _p, _o, v in records]
        assert len(values) == len(set(values)), "duplicates in the log"
        offsets = {v: o for _p, o, v in records}
        missing = [v for v in acked if v not in offsets]
        assert not missing, f"{len(missing)} acknowledged messages lost, e.g. {missing[:3]}"
        moved = [v for v, o in acked.items() if offsets[v] != o]
        assert not moved, f"acknowledged at one offset, stored at another: {moved[:3]}"


def test_controller_killed_is_replaced(tmp_path, zk_connect):
    with Cluster(tmp_path, zk_connect) as cluster:
        assert cluster.create_topic("moving", 3, 3)["error_code"] == 0
        for p in range(3):
            cluster.wait_for(full_isr(cluster, "moving", p), 30, "a full ISR")
        controller = cluster.metadata()["controller_id"]
        cluster.brokers[controller].kill()
        new = cluster.wait_for(lambda: (lambda c: c if c not in (-1, controller) else None)(
            cluster.metadata()["controller_id"]), 40, "a new controller")
        # The new controller moves leadership off the dead broker.
        for p in range(3):
            cluster.wait_for(lambda: (lambda x: x if x["leader_id"] not in (-1, controller) else None)(
                cluster.partition("moving", p)), 40, f"partition {p} led by a live broker")
        assert cluster.create_topic("after", 2, 2)["error_code"] == 0  # the new controller creates topics
        cluster.brokers[controller].start()
        for p in range(3):
            cluster.wait_for(full_isr(cluster, "moving", p), 60, "the ISR back to 3")
        assert cluster.metadata()["controller_id"] == new


def test_stopped_follower_truncates_and_catches_up(tmp_path, zk_connect):
    with Cluster(tmp_path, zk_connect) as cluster:
        assert cluster.create_topic("catchup", 1, 3, {"min.insync.replicas": "2"})["error_code"] == 0
        cluster.wait_for(full_isr(cluster, "catchup", 0), 30, "a full ISR")
        leader = cluster.partition("catchup", 0)["leader_id"]
        follower = next(b for b in (1, 2, 3) if b != leader)
        cluster.brokers[follower].stop()
        producer = ck.Producer({"bootstrap.servers": cluster.brokers[leader].bootstrap, "acks": "all",
                                "enable.idempotence": True})
        for i in range(500):
            producer.produce("catchup", value=b"c%d" % i)
        assert producer.flush(60) == 0
        cluster.wait_for(full_isr(cluster, "catchup", 0, 2), 30, "the ISR shrunk to 2")
        cluster.brokers[follower].start()
        cluster.wait_for(full_isr(cluster, "catchup", 0), 60, "the follower back in the ISR")
        # It has every record: make it the only live replica but the leader's... read from it after
        # the others stop would need unclean election; instead compare its log end through ListOffsets
        # once it leads: stop the other two in turn.
        others = [b for b in (1, 2, 3) if b != follower]
        for b in others:
            cluster.brokers[b].stop()
            if b == others[0]:
                cluster.wait_for(lambda: cluster.partition("catchup", 0, follower)["leader_id"] in (follower, others[1]),
                                 40, "leadership moved")
        # With two of three replicas gone the remaining leader (the follower) keeps the data.
        cluster.wait_for(lambda: cluster.partition("catchup", 0, follower)["leader_id"] == follower, 40,
                         "the caught-up follower leads")
        records = read_topic(cluster.brokers[follower].bootstrap, "catchup", 500, timeout=30)
        assert sorted(v for _p, _o, v in records) == sorted(b"c%d" % i for i in range(500))


def test_a_stopping_leader_hands_over_before_it_goes(tmp_path, zk_connect):
    """SIGTERM: the broker asks the controller to move its leaderships (ControlledShutdown)
    before it stops, so the new leader is there before its ZooKeeper session ends."""
    with Cluster(tmp_path, zk_connect, 3, "--set", "zookeeper.session.timeout.ms=30000") as cluster:
        assert cluster.create_topic("handover", 1, 3)["error_code"] == 0
        cluster.wait_for(full_isr(cluster, "handover", 0), 30, "a full ISR")
        leader = cluster.partition("handover", 0)["leader_id"]
        started = time.monotonic()
        cluster.brokers[leader].stop()
        other = next(b for b in (1, 2, 3) if b != leader)
        cluster.wait_for(lambda: cluster.partition("handover", 0, other)["leader_id"] not in (-1, leader), 20,
                         "a new leader")
        assert time.monotonic() - started < 15, "leadership moved only when the 30 s session expired"
        assert "controlled shutdown of broker" in cluster.brokers[leader].log_tail(400)


def test_a_new_controller_takes_dead_brokers_out_of_the_isrs(tmp_path, zk_connect):
    """The controller dies: its broker's replicas are on no live broker when the next
    controller starts, which must take them out of every ISR (found by the compat suite: the
    ISR kept the dead broker for as long as it stayed away). Followers are given two minutes
    before their leader would drop them, so only the controller can do it here."""
    with Cluster(tmp_path, zk_connect, 3, "--set", "replica.lag.time.max.ms=120000") as cluster:
        assert cluster.create_topic("orphans", 3, 3)["error_code"] == 0
        for p in range(3):
            cluster.wait_for(full_isr(cluster, "orphans", p), 30, "a full ISR")
        controller = cluster.metadata()["controller_id"]
        cluster.brokers[controller].kill()
        cluster.wait_for(lambda: cluster.metadata()["controller_id"] not in (-1, controller), 40, "a new controller")
        for p in range(3):
            cluster.wait_for(lambda: (lambda x: x if controller not in x["isr_nodes"] else None)(
                cluster.partition("orphans", p)), 30, f"partition {p} without the dead broker in its ISR")
