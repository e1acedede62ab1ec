"""Transactions across the brokers of a 3-broker cluster on a real ZooKeeper (confluent-kafka):
markers sent to partitions other brokers lead (WriteTxnMarkers), KIP-890 verification asked
of a coordinator on another broker (AddPartitionsToTxn verify_only), producer ids from
ZooKeeper blocks, and the transaction coordinator's broker SIGKILLed mid-transaction."""

from __future__ import annotations

import time

import confluent_kafka as ck
import pytest

from tests.cluster.clusterkit import Cluster, read_topic
from wire.errors import ErrorCode
from wire.records import Record, build_batch, iter_headers
from wire.registry import ApiKey

pytestmark = pytest.mark.timeout(300)

TXN = {"transaction.timeout.ms": 60000, "message.timeout.ms": 60000}


def full_isr(cluster: Cluster, topic: str, index: int, size: int = 3):
    def check():
        p = cluster.partition(topic, index)
        return p if p and p["leader_id"] >= 0 and len(p["isr_nodes"]) == size else None
    return check


def spread_topic(cluster: Cluster, name: str, partitions: int = 3) -> dict[int, int]:
    """A topic (RF 3, min.insync.replicas 2) whose partitions are led by different brokers."""
    assert cluster.create_topic(name, partitions, 3, {"min.insync.replicas": "2"})["error_code"] == 0
    leaders = {p: cluster.wait_for(full_isr(cluster, name, p), 30, f"{name}-{p} with a full ISR")["leader_id"]
               for p in range(partitions)}
    assert len(set(leaders.values())) >= 2, f"leaders spread over brokers: {leaders}"
    return leaders


def read_committed(bootstrap: str, topic: str, expected: int) -> list[tuple[int, bytes]]:
    """(partition, value) of what a read_committed consumer gets from `topic`."""
    return [(p, v) for p, _o, v in read_topic(bootstrap, topic, expected, isolation="read_committed", settle_s=3)]

def coordinator_of(cluster: Cluster, transactional_id: str) -> int:
    def find():
        answer = cluster.call(ApiKey.FIND_COORDINATOR, 4, {"key_type": 1, "coordinator_keys": [transactional_id]})
        c = answer["coordinators"][0]
        return c["node_id"] if c["error_code"] == 0 else None
    return cluster.wait_for(find, 30, f"the coordinator of {transactional_id!r}")


def test_transactions_span_partitions_led_by_different_brokers(tmp_path, zk_connect):
    with Cluster(tmp_path, zk_connect) as cluster:
        leaders = spread_topic(cluster, "txn-out")
        producer = ck.Producer({"bootstrap.servers": cluster.bootstrap, "transactional.id": "spread", **TXN})
        producer.init_transactions(60)
        expected = []
        for round_, commit in enumerate((True, False, True, False, True)):
            producer.begin_transaction()
            for p in range(3):
                for i in range(5):
                    value = b"r%d-p%d-%d" % (round_, p, i)
                    producer.produce("txn-out", value=value, partition=p)
                    if commit:
                        expected.append((p, value))
            if commit:
                producer.commit_transaction(60)
            else:
                producer.flush(30)  # the aborted records are in the log before the ABORT markers
                producer.abort_transaction(60)
        got = read_committed(cluster.bootstrap, "txn-out", len(expected))
        assert sorted(got) == sorted(expected), f"leaders {leaders}"
        # Every partition (each led by another broker) got its markers: nothing is left open,
        # so the last stable offset is the log end on each.
        for p in range(3):
            answer = cluster.call(ApiKey.LIST_OFFSETS, 5, {
                "replica_id": -1, "isolation_level": 1,
                "topics": [{"name": "txn-out", "partitions": [{"partition_index": p, "current_leader_epoch": -1,
                                                                "timestamp": -1}]}]}, leaders[p])
            lso = answer["topics"][0]["partitions"][0]["offset"]
            assert lso == 5 * 5 + 5  # 25 records and 5 markers


def test_consume_transform_produce_across_brokers(tmp_path, zk_connect):
    with Cluster(tmp_path, zk_connect) as cluster:
        spread_topic(cluster, "ctp-in")
        spread_topic(cluster, "ctp-out")
        source = ck.Producer({"bootstrap.servers": cluster.bootstrap, "acks": "all"})
        for i in range(90):
            source.produce("ctp-in", value=b"v%d" % i, partition=i % 3)
        assert source.flush(30) == 0
        consumer = ck.Consumer({"bootstrap.servers": cluster.bootstrap, "group.id": "ctp",
                                "isolation.level": "read_committed", "enable.auto.commit": False,
                                "auto.offset.reset": "earliest"})
        consumer.subscribe(["ctp-in"])
        producer = ck.Producer({"bootstrap.servers": cluster.bootstrap, "transactional.id": "ctp-1", **TXN})
        producer.init_transactions(60)
        done = 0
        deadline = time.monotonic() + 120
        while done < 90 and time.monotonic() < deadline:
            batch = [m for m in consumer.consume(30, 1.0) if m.error() is None]
            if not batch:
                continue
            producer.begin_transaction()
            for m in batch:
                producer.produce("ctp-out", value=m.value().upper(), partition=m.partition())
            producer.send_offsets_to_transaction(consumer.position(consumer.assignment()),
                                                 consumer.consumer_group_metadata(), 60)
            producer.commit_transaction(60)
            done += len(batch)
        consumer.close()
        assert done == 90
        got = read_committed(cluster.bootstrap, "ctp-out", 90)
        assert sorted(v for _p, v in got) == sorted(b"V%d" % i for i in range(90))
        # The group's offsets were committed with the transactions: a new member starts at the end.
        check = ck.Consumer({"bootstrap.servers": cluster.bootstrap, "group.id": "ctp",
                             "isolation.level": "read_committed", "enable.auto.commit": False})
        committed = check.committed([ck.TopicPartition("ctp-in", p) for p in range(3)], 30)
        check.close()
        assert [tp.offset for tp in committed] == [30, 30, 30]


def test_coordinator_killed_mid_transaction_new_producer_fences_and_aborts(tmp_path, zk_connect):
    with Cluster(tmp_path, zk_connect) as cluster:
        spread_topic(cluster, "kill-out")
        tid = "survivor"
        first = ck.Producer({"bootstrap.servers": cluster.bootstrap, "transactional.id": tid, **TXN})
        first.init_transactions(60)
        first.begin_transaction()
        for p in range(3):
            first.produce("kill-out", value=b"committed-%d" % p, partition=p)
        first.commit_transaction(60)
        first.begin_transaction()
        for p in range(3):
            first.produce("kill-out", value=b"open-%d" % p, partition=p)
        first.flush(30)
        coordinator = coordinator_of(cluster, tid)
        time.sleep(2)  # the followers of __transaction_state fetch the Ongoing state
        cluster.brokers[coordinator].kill()
        new_coordinator = cluster.wait_for(lambda: (lambda c: c if c != coordinator else None)(
            coordinator_of(cluster, tid)), 60, "a new transaction coordinator")
        assert new_coordinator != coordinator

        second = ck.Producer({"bootstrap.servers": cluster.bootstrap, "transactional.id": tid, **TXN})
        second.init_transactions(90)  # fences `first` and aborts its open transaction
        second.begin_transaction()
        for p in range(3):
            second.produce("kill-out", value=b"after-%d" % p, partition=p)
        second.commit_transaction(60)

        with pytest.raises(ck.KafkaException) as fenced:
            first.commit_transaction(60)
        assert fenced.value.args[0].code() in (ck.KafkaError._FENCED, ck.KafkaError.PRODUCER_FENCED,
                                               ck.KafkaError.INVALID_PRODUCER_EPOCH), fenced.value

        expected = sorted([(p, b"committed-%d" % p) for p in range(3)] + [(p, b"after-%d" % p) for p in range(3)])
        got = read_committed(cluster.bootstrap, "kill-out", len(expected))
        assert sorted(got) == expected


def test_idempotent_producers_never_share_a_producer_id(tmp_path, zk_connect):
    with Cluster(tmp_path, zk_connect) as cluster:
        assert cluster.create_topic("idem", 1, 3)["error_code"] == 0
        leader = cluster.wait_for(full_isr(cluster, "idem", 0), 30, "a full ISR")["leader_id"]
        # Bootstrapped at one broker each and started together, so InitProducerId goes to
        # every broker before any of them has seen another's id in the log.
        producers = [(node, i, ck.Producer({"bootstrap.servers": broker.bootstrap, "enable.idempotence": True,
                                            "acks": "all"}))
                     for node, broker in cluster.brokers.items() for i in range(3)]
        for node, i, producer in producers:
            producer.produce("idem", value=b"b%d-%d" % (node, i), partition=0)
        for _node, _i, producer in producers:
            assert producer.flush(30) == 0
        answer = cluster.call(ApiKey.FETCH, 11, {
            "replica_id": -1, "max_wait_ms": 0, "min_bytes": 0, "max_bytes": 1 << 20, "isolation_level": 0,
            "session_id": 0, "session_epoch": -1, "rack_id": "", "forgotten_topics_data": [],
            "topics": [{"topic": "idem", "partitions": [{"partition": 0, "current_leader_epoch": -1, "fetch_offset": 0,
                                                         "log_start_offset": -1, "partition_max_bytes": 1 << 20}]}]},
            leader)
        records = answer["responses"][0]["partitions"][0]["records"]
        producer_ids = [header.producer_id for _pos, header in iter_headers(bytearray(records))]
        assert len(producer_ids) == 9
        assert len(set(producer_ids)) == 9, producer_ids


def _txn_produce(cluster: Cluster, node: int, tid: str, topic: str, index: int, pid: int, epoch: int, seq: int) -> int:
    batch = build_batch([Record(0, int(time.time() * 1000), None, b"x")], producer_id=pid, producer_epoch=epoch,
                        base_sequence=seq, is_transactional=True)
    body = {"transactional_id": tid, "acks": -1, "timeout_ms": 30000,
            "topic_data": [{"name": topic, "partition_data": [{"index": index, "records": bytes(batch)}]}]}
    return cluster.call(ApiKey.PRODUCE, 9, body, node)["responses"][0]["partition_responses"][0]["error_code"]


def test_leader_verifies_with_a_coordinator_on_another_broker(tmp_path, zk_connect):
    """KIP-890: a leader asks the transactional id's coordinator, on another broker, whether
    the partition is in the transaction (AddPartitionsToTxn verify_only)."""
    with Cluster(tmp_path, zk_connect) as cluster:
        leaders = spread_topic(cluster, "verified")
        tid = "verify-remote"
        coordinator = coordinator_of(cluster, tid)
        index = next(p for p, leader in leaders.items() if leader != coordinator)
        leader = leaders[index]
        init = cluster.wait_for(lambda: (lambda a: a if a["error_code"] == 0 else None)(cluster.call(
            ApiKey.INIT_PRODUCER_ID, 4, {"transactional_id": tid, "transaction_timeout_ms": 60000, "producer_id": -1,
                                         "producer_epoch": -1}, coordinator)), 30, "InitProducerId")
        pid, epoch = init["producer_id"], init["producer_epoch"]
        # Not added to the transaction: the coordinator (elsewhere) says so.
        assert _txn_produce(cluster, leader, tid, "verified", index, pid, epoch, 0) == ErrorCode.INVALID_TXN_STATE
        added = cluster.call(ApiKey.ADD_PARTITIONS_TO_TXN, 3, {
            "v3_and_below_transactional_id": tid, "v3_and_below_producer_id": pid, "v3_and_below_producer_epoch": epoch,
            "v3_and_below_topics": [{"name": "verified", "partitions": [index]}]}, coordinator)
        assert added["results_by_topic_v3_and_below"][0]["results_by_partition"][0]["partition_error_code"] == 0
        assert _txn_produce(cluster, leader, tid, "verified", index, pid, epoch, 0) == ErrorCode.NONE
        # A new instance fences this one (its open transaction is aborted first): the fenced
        # producer's next write elsewhere gets INVALID_PRODUCER_EPOCH, what a partition tells a zombie.
        cluster.wait_for(lambda: cluster.call(ApiKey.INIT_PRODUCER_ID, 4, {
            "transactional_id": tid, "transaction_timeout_ms": 60000, "producer_id": -1,
            "producer_epoch": -1}, coordinator)["error_code"] == 0, 30, "a new producer instance")
        other = next(p for p in leaders if p != index)
        assert _txn_produce(cluster, leaders[other], tid, "verified", other, pid, epoch, 0) \
            == ErrorCode.INVALID_PRODUCER_EPOCH
