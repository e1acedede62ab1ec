"""A follower whose log end fell below its leader's log start (DeleteRecords or retention ran
at the leader while it was stopped) starts over at the leader's log start — Kafka's
truncateFullyAndStartAt — instead of asking for offsets the leader no longer has forever."""

from __future__ import annotations

import pytest

import confluent_kafka as ck

from tests.cluster.clusterkit import Cluster
from wire.registry import ApiKey

pytestmark = pytest.mark.timeout(180)


def full_isr(cluster: Cluster, topic: str, size: int = 3):
    def check():
        p = cluster.partition(topic, 0)
        return p if p and p["leader_id"] >= 0 and len(p["isr_nodes"]) == size else None
    return check


def test_follower_behind_the_leaders_log_start_starts_over_there(tmp_path, zk_connect):
    with Cluster(tmp_path, zk_connect) as cluster:
        assert cluster.create_topic("trimmed", 1, 3, {"min.insync.replicas": "1"})["error_code"] == 0
        state = cluster.wait_for(full_isr(cluster, "trimmed"), 30, "a full ISR")
        leader = state["leader_id"]
        follower = next(n for n in state["replica_nodes"] if n != leader)
        producer = ck.Producer({"bootstrap.servers": cluster.bootstrap, "acks": "all", "linger.ms": 0})
        for i in range(10):
            producer.produce("trimmed", value=b"before-%d" % i, partition=0)
        assert producer.flush(30) == 0

        cluster.brokers[follower].stop()
        cluster.wait_for(full_isr(cluster, "trimmed", 2), 30, "the stopped follower out of the ISR")
        for i in range(30):
            producer.produce("trimmed", value=b"while-away-%d" % i, partition=0)
        assert producer.flush(30) == 0
        body = {"topics": [{"name": "trimmed", "partitions": [{"partition_index": 0, "offset": 35}]}],
                "timeout_ms": 10000}
        answer = cluster.call(ApiKey.DELETE_RECORDS, 2, body, leader)["topics"][0]["partitions"][0]
        assert answer["error_code"] == 0 and answer["low_watermark"] == 35, answer

        cluster.brokers[follower].start()
        cluster.wait_for(full_isr(cluster, "trimmed"), 60, "the restarted follower back in the ISR")
        for i in range(5):
            producer.produce("trimmed", value=b"after-%d" % i, partition=0)
        assert producer.flush(30) == 0

        # Led by the follower that started over, the partition serves from 35 on, all of it.
        cluster.brokers[leader].stop()
        others = [n for n in state["replica_nodes"] if n not in (leader, follower)]
        for other in others:
            cluster.brokers[other].stop()
        cluster.wait_for(lambda: (p := cluster.partition("trimmed", 0, follower)) and p["leader_id"] == follower,
                         60, "the follower leading")
        assert cluster.list_offset("trimmed", -2, follower) == 35
        consumer = ck.Consumer({"bootstrap.servers": cluster.brokers[follower].bootstrap, "group.id": "unused",
                                "enable.auto.commit": False})
        consumer.assign([ck.TopicPartition("trimmed", 0, 35)])
        values = []
        while len(values) < 10:
            msg = consumer.poll(10)
            assert msg is not None, f"only {values} read"
            assert msg.error() is None, msg.error()
            values.append((msg.offset(), msg.value()))
        consumer.close()
        assert values == [(35 + i, b"while-away-%d" % (25 + i)) for i in range(5)] + \
            [(40 + i, b"after-%d" % i) for i in range(5)]
