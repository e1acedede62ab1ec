"""The fencing proof: a partition's leader cut off from ZooKeeper and from its peers is
fenced, and no write acknowledged by it is lost or duplicated.

Broker 1 reaches ZooKeeper only through a proxy, and its peers reach it (their follower
fetches, the controller's requests) only through another proxy, its advertised address;
clients pass through that proxy untouched. Cutting both proxies is a network partition
that leaves broker 1 reachable by the producer but by nobody else: its ZooKeeper session
expires, the controller elects a new leader from the ISR, and broker 1, which still
believes it leads, must not acknowledge an acks=all write (no follower fetches from it, so
its high watermark cannot pass what the ISR had). A second producer, which knows only
brokers 2 and 3, writes to the new leader meanwhile: the two leaders' logs diverge at the
same offsets. Healed, broker 1 learns its session expired,
registers again, becomes a follower and truncates what it appended alone. Every
acknowledged message is then in the log exactly once, at the offset it was acknowledged
with, on every replica: read by a client from the new leader and from broker 1 made
leader, and read from each broker's log files once the cluster stopped.

"Healed" is judged by every broker's own metadata, broker 1's included: until broker 1 has
heard from the new controller its metadata still shows itself leading a full ISR in the old
epoch (that stale answer once let the test move on before broker 1 was back). Clients read
with assigned partitions, not a consumer group: a group needs `__consumer_offsets`, which a
consumer created while broker 1 was still away places on brokers 2 and 3 only, so with those
two stopped no coordinator was left and broker 1 could not be read at all.
"""

from __future__ import annotations


import threading
import time

import confluent_kafka as ck
import pytest

from tests.cluster.clusterkit import Cluster, read_topic
from tests.cluster.netproxy import CuttableProxy
from tests.cluster.test_cluster_failover import full_isr
from storage import PartitionLog
from storage.config import LogConfig
from wire.records import iter_records
from wire.registry import ApiKey

pytestmark = pytest.mark.timeout(300)

# The leader's followers count as out of sync only after the controller has noticed the
# leader's session is gone (replica.lag.time.max.ms > zookeeper.session.timeout.ms, as
# Kafka's defaults 30 s > 18 s): otherwise the cut-off leader would shrink the ISR to itself
# first and the partition could only stay offline.
SETTINGS = ("--set", "replica.lag.time.max.ms=10000", "--set", "zookeeper.session.timeout.ms=6000")


def is_peer(client_id: str | None) -> bool:
    """Inter-broker connections (fetchers, the controller) as opposed to Kafka clients."""
    return client_id is not None and (client_id == "trafka" or client_id.startswith("controller-"))


def healed(cluster: Cluster, topic: str, old_epoch: int):
    """Every broker, the cut-off one too, reports a full ISR under a leader elected after the
    cut: broker 1 has heard from the new controller (its own metadata is stale until then)."""
    def check():
        views = [cluster.partition(topic, 0, node) for node in cluster.brokers]
        ok = all(p and p["leader_id"] >= 0 and p["leader_epoch"] > old_epoch and len(p["isr_nodes"]) == 3
                 for p in views)
        return views if ok else None
    return check


def read_partition(bootstrap: str, topic: str, expected: int, timeout: float = 60) -> list[tuple[int, bytes]]:
    """(offset, value) of the topic's one partition up to its high watermark."""
    return [(o, v) for _p, o, v in read_topic(bootstrap, topic, expected, timeout)]

def stored_records(data_dir, topic: str) -> list[tuple[int, bytes]]:
    """(offset, value) of every record in a stopped broker's log of partition 0."""
    plog = PartitionLog.open(data_dir / f"{topic}-0", LogConfig(), clean=True)
    try:
        return [(r.offset, r.value) for _header, batch in plog.iter_batches(0) for r in iter_records(batch)
                if not r.is_control]
    finally:
        plog.close()


@pytest.mark.parametrize("controller_too", [True, False], ids=["leader-and-controller", "leader-only"])
def test_cut_off_leader_is_fenced_and_acknowledges_nothing(tmp_path, zk_connect, controller_too):
    """Broker 1 started first becomes the controller too (its successor must be elected);
    started last it is not, and its attempts to shrink the ISR reach the live controller,
    which refuses them. min.insync.replicas 2, and the default 1: the high watermark alone
    has to hold the acknowledgements back."""
    hosts, _, chroot = zk_connect.partition("/")
    zk_port = int(hosts.rsplit(":", 1)[1])
    cluster = Cluster(tmp_path, zk_connect, 3, *SETTINGS)
    zk_proxy = CuttableProxy(zk_port)
    peer_proxy = CuttableProxy(cluster.brokers[1].port, only=is_peer)
    cluster.brokers[1].extra += ["--set", f"zookeeper.connect={zk_proxy.address}/{chroot}",
                                 "--advertised", peer_proxy.address]
    if not controller_too:
        cluster.brokers = {n: cluster.brokers[n] for n in (2, 3, 1)}  # started in this order
    try:
        with cluster:
            body = {"topics": [{"name": "fenced", "num_partitions": -1, "replication_factor": -1,
                                "assignments": [{"partition_index": 0, "broker_ids": [1, 2, 3]}],
                                "configs": [{"name": "min.insync.replicas", "value": "2" if controller_too else "1"}]}],
                    "timeout_ms": 20000, "validate_only": False}
            assert cluster.call(ApiKey.CREATE_TOPICS, 5, body)["topics"][0]["error_code"] == 0
            info = cluster.wait_for(full_isr(cluster, "fenced", 0), 30, "a full ISR")
            assert info["leader_id"] == 1, info
            assert (cluster.metadata()["controller_id"] == 1) == controller_too
            old_epoch = info["leader_epoch"]

            acked: dict[bytes, int] = {}
            acked_at: dict[bytes, float] = {}
            failed: list = []
            stop = threading.Event()

            def produce() -> None:
                producer = ck.Producer({"bootstrap.servers": ",".join(b.bootstrap for b in cluster.brokers.values()),
                                        "acks": "all", "enable.idempotence": True, "linger.ms": 5,
                                        "request.timeout.ms": 5000, "message.timeout.ms": 120000,
                                        "topic.metadata.refresh.interval.ms": 2000})

                def report(err, msg):
                    if err is None:
                        acked[msg.value()] = msg.offset()
                        acked_at[msg.value()] = time.monotonic()
                    else:
                        failed.append(err)
                i = 0
                while not stop.is_set():
                    producer.produce("fenced", value=b"v%06d" % i, on_delivery=report)
                    producer.poll(0)
                    i += 1
                    time.sleep(0.005)
                producer.flush(120)

            thread = threading.Thread(target=produce)
            thread.start()
            try:
                cluster.wait_for(lambda: len(acked) > 100, 30, "writes acknowledged before the cut")
                zk_proxy.cut()
                peer_proxy.cut()
                cut_at = time.monotonic()
                time.sleep(1.0)  # fetches already on their way may still land
                fenced_hw = cluster.list_offset("fenced", -1, 1)
                assert fenced_hw > 0

                new = cluster.wait_for(
                    lambda: (lambda p: p if p and p["leader_id"] in (2, 3) and p["leader_epoch"] > old_epoch
                             else None)(cluster.partition("fenced", 0, 2)), 40, "a new leader elected")
                # A second producer that knows only brokers 2 and 3 writes to the new leader
                # while broker 1 still believes it leads (the first one may well stay with broker 1:
                # librdkafka asks its least idle broker for metadata, and broker 1's is stale).
                other = ck.Producer({"bootstrap.servers": f"{cluster.brokers[2].bootstrap},{cluster.brokers[3].bootstrap}",
                                     "acks": "all", "enable.idempotence": True, "linger.ms": 5})

                def report_other(err, msg):
                    if err is None:
                        acked[msg.value()] = msg.offset()
                    else:
                        failed.append(err)
                for i in range(200):
                    other.produce("fenced", value=b"w%06d" % i, on_delivery=report_other)
                    other.poll(0)
                assert other.flush(60) == 0
                assert all(b"w%06d" % i in acked for i in range(200))
                # Long enough for broker 1 to find its followers out of sync and try to shrink the
                # ISR to itself (refused, or never answered): it must still acknowledge nothing.
                time.sleep(max(0.0, cut_at + 16 - time.monotonic()))
                # Broker 1 still believes it leads; its high watermark has not moved since the cut.
                assert cluster.partition("fenced", 0, 1)["leader_id"] == 1
                assert cluster.list_offset("fenced", -1, 1) == fenced_hw
                during = len(acked)

                zk_proxy.heal()
                peer_proxy.heal()
                cluster.wait_for(healed(cluster, "fenced", old_epoch), 60, "broker 1 back in the ISR, by every broker")
                cluster.wait_for(lambda: len(acked) > during + 100, 60, "the first producer writing again")
            finally:
                stop.set()
                thread.join(180)
            assert not failed, failed[:3]
            assert new["leader_id"] != 1
            # Caught up: the ISR, as every broker knows it, is whole after the last acknowledgement,
            # so each replica holds every acknowledged message (a member's log end offset is at
            # least the high watermark, which passed them all).
            cluster.wait_for(healed(cluster, "fenced", old_epoch), 60, "the ISR whole after the last write")

            def check(records: list[tuple[int, bytes]], where: str) -> None:
                values = [v for _o, v in records]
                assert len(values) == len(set(values)), f"duplicates in the log read from {where}"
                offsets = {v: o for o, v in records}
                missing = [v for v in acked if v not in offsets]
                assert not missing, f"{len(missing)} acknowledged messages missing from {where}, e.g. {missing[:3]}"
                moved = [v for v, o in acked.items() if offsets[v] != o]
                assert not moved, f"{len(moved)} acknowledged at one offset, at another in {where}: {moved[:3]}"

            check(read_partition(cluster.bootstrap, "fenced", len(acked)), "the new leader")
            # After the cut broker 1 acknowledged nothing: every acknowledgement after it lies
            # above the high watermark the ISR had given broker 1 (they came from the new leader).
            late = [v for v, t in acked_at.items() if t > cut_at + 1.0]
            assert late and all(acked[v] >= fenced_hw for v in late)
            assert all(acked[b"w%06d" % i] >= fenced_hw for i in range(200))

            # Broker 1 truncated its own tail: make it the leader (the others stop, leadership
            # moves to it as an ISR member) and read everything from it.
            for node in (2, 3):
                cluster.brokers[node].stop()
            cluster.wait_for(lambda: cluster.partition("fenced", 0, 1)["leader_id"] == 1, 40, "broker 1 leads again")
            check(read_partition(cluster.brokers[1].bootstrap, "fenced", len(acked), timeout=60), "broker 1")
        # Every replica's log, as it lies on disk: the same messages at the same offsets.
        for node, broker in cluster.brokers.items():
            check(stored_records(broker.data_dir, "fenced"), f"broker {node}'s log files")
    finally:
        zk_proxy.close()
        peer_proxy.close()
