"""After a clean shutdown the broker listens before it opens its logs. A partition
is served from the log-summary-checkpoint (Metadata) until its first use opens it, with its
producer state: an idempotent retry is still recognised, and a transaction left open keeps
read_committed readers below it. The warm-up opens the rest right after start-up; a topic
deleted before its logs were opened leaves no directory behind."""

from __future__ import annotations

import re
import socket
import time
import urllib.request

from confluent_kafka import Consumer, Producer, TopicPartition

from tests.brokerproc import BrokerProcess, raw_request
from tests.server.test_partition_produce import PRODUCE_V, _init_producer, _partition_answer, _read_response
from wire import encode_request
from wire.records import Record, build_batch
from wire.registry import ApiKey

PARTITIONS = 6


def _create(broker: BrokerProcess, topic: str, partitions: int) -> None:
    body = {"topics": [{"name": topic, "num_partitions": partitions, "replication_factor": 1, "assignments": [],
                        "configs": []}], "timeout_ms": 10000, "validate_only": False}
    answer = raw_request("127.0.0.1", broker.port, ApiKey.CREATE_TOPICS, 5, body)
    assert answer["topics"][0]["error_code"] == 0, answer


def _unopened(broker: BrokerProcess) -> int:
    text = urllib.request.urlopen(f"{broker.http_url}/metrics", timeout=10).read().decode()
    return int(float(re.search(r"^trafka_log_unopened_logs (\S+)$", text, re.M).group(1)))


def _offsets(broker: BrokerProcess, topic: str, partition: int, isolation: int) -> int:
    """ListOffsets latest (-1) at an isolation level: the high watermark or, read_committed,
    the last stable offset."""
    body = {"replica_id": -1, "isolation_level": isolation,
            "topics": [{"name": topic, "partitions": [{"partition_index": partition, "current_leader_epoch": -1,
                                                       "timestamp": -1}]}]}
    answer = raw_request("127.0.0.1", broker.port, ApiKey.LIST_OFFSETS, 5, body)
    part = answer["topics"][0]["partitions"][0]
    assert part["error_code"] == 0, part
    return part["offset"]


def _produce_idempotent(broker: BrokerProcess, pid: int, epoch: int, sequence: int, correlation: int,
                        partition: int) -> dict:
    batch = build_batch([Record(0, 1_700_000_000_000, b"k", b"v%d" % sequence)], producer_id=pid,
                        producer_epoch=epoch, base_sequence=sequence)
    body = {"transactional_id": None, "acks": -1, "timeout_ms": 30000,
            "topic_data": [{"name": "lazy", "partition_data": [{"index": partition, "records": bytes(batch)}]}]}
    with socket.create_connection(("127.0.0.1", broker.port), timeout=10) as sock:
        sock.sendall(encode_request(ApiKey.PRODUCE, PRODUCE_V, correlation, body))
        return _partition_answer(_read_response(sock, ApiKey.PRODUCE, PRODUCE_V))


def test_a_partition_left_for_first_use_serves_as_an_opened_one(tmp_path):
    with BrokerProcess(tmp_path / "data", "--set", "trafka.log.warmup.enable=false", http=True) as broker:
        _create(broker, "lazy", PARTITIONS)
        pid, epoch = _init_producer(broker)
        for seq in range(3):
            assert _produce_idempotent(broker, pid, epoch, seq, seq, 2)["base_offset"] == seq
        # A transaction left open on partition 4 across the restart, after 2 committed records.
        txn = Producer({"bootstrap.servers": broker.bootstrap, "transactional.id": "lazy-txn",
                        "transaction.timeout.ms": 300000})
        txn.init_transactions(30)
        txn.begin_transaction()
        for i in range(2):
            txn.produce("lazy", value=b"c%d" % i, partition=4)
        txn.commit_transaction(30)
        txn.begin_transaction()
        for i in range(3):
            txn.produce("lazy", value=b"o%d" % i, partition=4)
        txn.flush(30)
        end_before = _offsets(broker, "lazy", 4, 0)
        lso_before = _offsets(broker, "lazy", 4, 1)
        assert lso_before < end_before
        broker.stop()

        broker.start()
        unopened = _unopened(broker)
        assert unopened >= PARTITIONS, unopened  # the topic's logs, and internal ones not used yet
        # Metadata needs no log: every partition, led here, from the summary.
        meta = raw_request("127.0.0.1", broker.port, ApiKey.METADATA, 9,
                           {"topics": [{"name": "lazy"}], "allow_auto_topic_creation": False,
                            "include_cluster_authorized_operations": False,
                            "include_topic_authorized_operations": False})
        parts = meta["topics"][0]["partitions"]
        assert sorted(p["partition_index"] for p in parts) == list(range(PARTITIONS))
        assert all(p["error_code"] == 0 and p["leader_id"] == meta["brokers"][0]["node_id"] and p["leader_epoch"] == 0 for p in parts), parts
        assert _unopened(broker) == unopened
        # read_committed stops where the open transaction starts, as before the restart: the
        # first use loaded the producer state along with the log.
        assert _offsets(broker, "lazy", 4, 1) == lso_before
        assert _offsets(broker, "lazy", 4, 0) == end_before
        assert _unopened(broker) == unopened - 1
        # The idempotent producer's last batch, retried, is recognised: not written twice.
        again = _produce_idempotent(broker, pid, epoch, 2, 9, 2)
        assert again["error_code"] == 0 and again["base_offset"] == 2, again
        assert _produce_idempotent(broker, pid, epoch, 3, 10, 2)["base_offset"] == 3
        assert _unopened(broker) == unopened - 2
        txn.abort_transaction(30)
        assert _offsets(broker, "lazy", 4, 1) == _offsets(broker, "lazy", 4, 0) == end_before + 1  # the marker
        consumer = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": "lazy-reader",
                             "isolation.level": "read_committed", "auto.offset.reset": "earliest",
                             "enable.auto.commit": False})
        try:
            consumer.assign([TopicPartition("lazy", 4, 0), TopicPartition("lazy", 2, 0)])
            values = set()
            deadline = time.monotonic() + 30
            while len(values) < 6 and time.monotonic() < deadline:
                msg = consumer.poll(0.5)
                if msg is not None and not msg.error():
                    values.add(msg.value())
        finally:
            consumer.close()
        assert values == {b"c0", b"c1", b"v0", b"v1", b"v2", b"v3"}
        txn.flush(5)
        # A partition untouched across a second clean restart still knows its offsets.
        broker.stop()
        broker.start()
        assert _offsets(broker, "lazy", 2, 0) == 4
        assert _offsets(broker, "lazy", 4, 1) == end_before + 1


def test_the_warm_up_opens_every_log_after_the_broker_listens(tmp_path):
    with BrokerProcess(tmp_path / "data", http=True) as broker:
        _create(broker, "warm", 40)
        _create(broker, "gone", 3)
        broker.stop()
        broker.start()
        deadline = time.monotonic() + 30
        while "warm-up:" not in broker.log_tail(400) and time.monotonic() < deadline:
            time.sleep(0.1)
        line = next(l for l in broker.log_tail(400).splitlines() if "warm-up:" in l)
        assert re.search(r"warm-up: (4[3-9]|[5-9]\d) partition logs opened", line), line
        assert _unopened(broker) == 0
        broker.stop()
        # With the warm-up off, a topic deleted before its logs were opened goes whole.
        broker.extra += ["--set", "trafka.log.warmup.enable=false"]
        broker.start()
        assert _unopened(broker) >= 43
        answer = raw_request("127.0.0.1", broker.port, ApiKey.DELETE_TOPICS, 4,
                             {"topic_names": ["gone"], "timeout_ms": 10000})
        assert answer["responses"][0]["error_code"] == 0, answer
        assert not any(p.name.startswith("gone-") for p in (tmp_path / "data").iterdir())
        broker.stop()
        broker.start()
        names = [t["name"] for t in raw_request("127.0.0.1", broker.port, ApiKey.METADATA, 9, {
            "topics": None, "allow_auto_topic_creation": False, "include_cluster_authorized_operations": False,
            "include_topic_authorized_operations": False})["topics"]]
        assert "gone" not in names and "warm" in names
        assert not any("gone" in p.name for p in (tmp_path / "data").iterdir())  # nor set aside as stray
