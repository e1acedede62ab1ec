"""Leader-epoch truncation on a real cluster
(docs/design/replication.md#leader-epochs-and-truncation):
a follower whose epoch cache
ends with an epoch it led without writing anything must drop that entry, or it fetches with
that epoch forever.

A new leader writes its epoch into the cache at the log end before any batch (KAFKA-7415).
If leadership moves on before it appends, the next leader never sees that epoch: asked for
it, the leader answers with the epoch below and where that one ends, which is exactly the
follower's log end. Nothing is to be cut from the log, but the empty entry is: Kafka's
UnifiedLog.truncateTo trims the epoch cache at the log end even when the log keeps
everything ("a conflicting epoch entry at the end of the log ... if this broker was a leader
and inserted the first start offset entry, but then failed to append any entries before
another leader was elected"). Without it the follower asked again with the same epoch, got
the same answer, and never copied another record nor rejoined the ISR.
"""

from __future__ import annotations

import confluent_kafka as ck
import pytest

from tests.cluster.clusterkit import Cluster
from tests.cluster.netproxy import CuttableProxy
from tests.cluster.test_cluster_failover import full_isr
from wire.registry import ApiKey

pytestmark = pytest.mark.timeout(180)


def led_by(cluster: Cluster, node: int, leader: int):
    return lambda: (lambda p: p if p and p["leader_id"] == leader else None)(cluster.partition("epochs", 0, node))


def test_follower_drops_an_epoch_it_led_without_writing(tmp_path, zk_connect):
    """Broker 2 leads epoch 1 and writes nothing; cut from ZooKeeper it loses the partition
    to broker 3 (epoch 2, whose cache knows epochs 0 and 2) and, healed, follows it without a
    restart (a restart would trim the entry when the log is opened)."""
    hosts, _, chroot = zk_connect.partition("/")
    zk_proxy = CuttableProxy(int(hosts.rsplit(":", 1)[1]))
    cluster = Cluster(tmp_path, zk_connect, 3)
    cluster.brokers[2].extra += ["--set", f"zookeeper.connect={zk_proxy.address}/{chroot}"]
    try:
        with cluster:
            body = {"topics": [{"name": "epochs", "num_partitions": -1, "replication_factor": -1,
                                "assignments": [{"partition_index": 0, "broker_ids": [1, 2, 3]}], "configs": []}],
                    "timeout_ms": 20000, "validate_only": False}
            assert cluster.call(ApiKey.CREATE_TOPICS, 5, body)["topics"][0]["error_code"] == 0
            cluster.wait_for(full_isr(cluster, "epochs", 0), 30, "a full ISR")
            produce(cluster.bootstrap, b"a")

            cluster.brokers[1].stop()  # broker 2 leads epoch 1, and nothing is written in it
            first = cluster.wait_for(led_by(cluster, 3, 2), 30, "broker 2 leading")
            zk_proxy.cut()  # its session expires: broker 3 leads the next epoch
            second = cluster.wait_for(led_by(cluster, 3, 3), 40, "broker 3 leading")
            assert second["leader_epoch"] > first["leader_epoch"]
            zk_proxy.heal()  # broker 2 registers again and follows broker 3

            produce(cluster.brokers[3].bootstrap, b"b")
            cluster.wait_for(lambda: (lambda p: p if p and sorted(p["isr_nodes"]) == [2, 3] else None)(
                cluster.partition("epochs", 0, 3)), 30, "broker 2 back in the ISR")

            # Broker 2 holds all 20 records: it leads once broker 3 stops, and serves them.
            cluster.brokers[3].stop()
            cluster.wait_for(led_by(cluster, 2, 2), 30, "broker 2 leading again")
            assert read(cluster.brokers[2].bootstrap, 20) == [b"a%d" % i for i in range(10)] + \
                [b"b%d" % i for i in range(10)]
    finally:
        zk_proxy.close()


def produce(bootstrap: str, prefix: bytes) -> None:
    producer = ck.Producer({"bootstrap.servers": bootstrap, "acks": "all", "enable.idempotence": True})
    for i in range(10):
        producer.produce("epochs", value=prefix + b"%d" % i)
    assert producer.flush(30) == 0


def read(bootstrap: str, expected: int) -> list[bytes]:
    consumer = ck.Consumer({"bootstrap.servers": bootstrap, "group.id": "unused", "enable.auto.commit": False})
    consumer.assign([ck.TopicPartition("epochs", 0, ck.OFFSET_BEGINNING)])
    values = []
    try:
        for _ in range(60):
            msg = consumer.poll(0.5)
            if msg is not None and msg.error() is None:
                values.append(msg.value())
            if len(values) >= expected:
                break
    finally:
        consumer.close()
    return values
