"""`num.replica.fetchers`: a follower copies a leader's partitions with that many fetchers,
each with a connection of its own, the partitions spread by Kafka's hash
(AbstractFetcherManager.getFetcherId)."""

from __future__ import annotations

import os
import time

import confluent_kafka as ck
import pytest

from server.cluster.fetcher import fetcher_id
from tests.cluster.clusterkit import Cluster
from wire.registry import ApiKey

pytestmark = pytest.mark.timeout(180)


def test_fetcher_id_is_kafkas_hash():
    # "test".hashCode() == 3556498 in Java: Utils.abs(31 * 3556498 + p) % n
    assert [fetcher_id("test", p, 2) for p in range(4)] == [(31 * 3556498 + p) % 2 for p in range(4)]
    assert [fetcher_id("test", p, 3) for p in range(3)] == [(31 * 3556498 + p) % 3 for p in range(3)]
    assert all(fetcher_id("any-topic", p, 1) == 0 for p in range(10))
    # a hash that overflows int32 stays non-negative, as Utils.abs makes it
    assert all(0 <= fetcher_id("z" * 40, p, 5) < 5 for p in range(20))


def established_to(pid: int, port: int) -> int:
    """TCP connections of process `pid` established to 127.0.0.1:`port` (from /proc)."""
    inodes = set()
    for fd in os.listdir(f"/proc/{pid}/fd"):
        try:
            target = os.readlink(f"/proc/{pid}/fd/{fd}")
        except OSError:
            continue
        if target.startswith("socket:["):
            inodes.add(target[8:-1])
    count = 0
    with open(f"/proc/{pid}/net/tcp") as table:
        next(table)
        for line in table:
            fields = line.split()
            remote, state, inode = fields[2], fields[3], fields[9]
            if state == "01" and inode in inodes and int(remote.split(":")[1], 16) == port:
                count += 1
    return count


def test_two_fetchers_per_leader_replicate_everything(tmp_path, zk_connect):
    with Cluster(tmp_path, zk_connect, 3, "--set", "num.replica.fetchers=2") as cluster:
        controller = cluster.metadata()["controller_id"]
        # One leader, not the controller, for all four partitions: its followers talk to it
        # only through their fetchers (and the controller through its own channel). "spread" 0..3 hash to fetchers 1, 0, 1, 0.
        assert [fetcher_id("spread", p, 2) for p in range(4)] == [1, 0, 1, 0]
        leader = next(n for n in (1, 2, 3) if n != controller)
        followers = [n for n in (1, 2, 3) if n != leader]
        body = {"topics": [{"name": "spread", "num_partitions": -1, "replication_factor": -1,
                            "assignments": [{"partition_index": p, "broker_ids": [leader, *followers]}
                                            for p in range(4)],
                            "configs": [{"name": "min.insync.replicas", "value": "2"}]}],
                "timeout_ms": 20000, "validate_only": False}
        assert cluster.call(ApiKey.CREATE_TOPICS, 5, body)["topics"][0]["error_code"] == 0
        cluster.wait_for(lambda: all((p := cluster.partition("spread", i)) and len(p["isr_nodes"]) == 3
                                     and p["leader_id"] == leader for i in range(4)), 30, "full ISRs")
        producer = ck.Producer({"bootstrap.servers": cluster.bootstrap, "acks": "all", "enable.idempotence": True})
        for i in range(400):
            producer.produce("spread", value=b"m%d" % i, partition=i % 4)
        assert producer.flush(30) == 0
        for follower in followers:
            pid, port = cluster.brokers[follower].proc.pid, cluster.brokers[leader].port
            # the controller also has its own connection to every broker (LeaderAndIsr, UpdateMetadata)
            expected = 2 + (follower == controller)
            assert established_to(pid, port) == expected, f"broker {follower}: one connection per fetcher"

        # Every follower has every record: with the leader stopped, each in turn serves them all.
        cluster.brokers[leader].stop()
        for reader in followers:
            cluster.wait_for(lambda: all(cluster.partition("spread", i, reader)["leader_id"] == reader
                                         for i in range(4)), 60, "new leaders")
            got = read_everything(cluster, reader, 400)
            assert sorted(got) == sorted(b"m%d" % i for i in range(400))
            if reader == followers[0]:
                cluster.brokers[reader].stop()


def read_everything(cluster: Cluster, node: int, expected: int) -> list[bytes]:
    consumer = ck.Consumer({"bootstrap.servers": cluster.brokers[node].bootstrap, "group.id": "unused",
                            "enable.auto.commit": False})
    consumer.assign([ck.TopicPartition("spread", i, ck.OFFSET_BEGINNING) for i in range(4)])
    got = []
    deadline = time.monotonic() + 60
    while len(got) < expected and time.monotonic() < deadline:
        msg = consumer.poll(0.5)
        if msg is not None and msg.error() is None:
            got.append(msg.value())
    consumer.close()
    return got
