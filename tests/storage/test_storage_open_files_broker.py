"""A real broker under `ulimit -n 256` serves 2 000 partitions (segment files opened lazily,
idle ones closed: log.open.files.max defaults to half the soft limit), and when client
connections eat every descriptor it refuses connections and answers produce with success
or KAFKA_STORAGE_ERROR, with log lines, without crashing; once they are gone it serves
every partition again. A soft limit below the hard one is raised to it at start-up, with a
log line naming both (a container's default soft limit is the small one)."""

from __future__ import annotations

import os
import resource
import socket
import struct
import time

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition

from tests.brokerproc import BrokerProcess, recv_exact
from wire import decode_response, encode_request
from wire.records import Record, build_batch
from wire.registry import ApiKey

NOFILE = 256
PARTITIONS = 2000
KAFKA_STORAGE_ERROR = 56


def _limit_nofile() -> None:
    # The hard limit too: the broker raises its soft limit to the hard one at start-up.
    resource.setrlimit(resource.RLIMIT_NOFILE, (NOFILE, NOFILE))


def _soft_below_hard() -> None:
    resource.setrlimit(resource.RLIMIT_NOFILE, (NOFILE, 4 * NOFILE))


def _fds(pid: int) -> int:
    return len(os.listdir(f"/proc/{pid}/fd"))


def _produce_all(bootstrap: str, topic: str, tag: bytes) -> None:
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 20, "acks": "all",
                         "message.timeout.ms": 60000})
    failures = []

    def delivered(err, _msg):
        if err is not None:
            failures.append(err)

    for p in range(PARTITIONS):
        producer.produce(topic, value=tag + b"-%d" % p, partition=p, on_delivery=delivered)
        producer.poll(0)
    assert producer.flush(90) == 0
    assert failures == []


def _consume_all(bootstrap: str, topic: str, tag: bytes) -> dict[int, list[bytes]]:
    """Every partition's records from offset 0, until each has shown ``tag``'s record."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "fd-test", "enable.auto.commit": False,
                         "fetch.wait.max.ms": 50})
    consumer.assign([TopicPartition(topic, p, 0) for p in range(PARTITIONS)])
    got: dict[int, list[bytes]] = {}
    missing = set(range(PARTITIONS))
    deadline = time.monotonic() + 90
    try:
        while missing and time.monotonic() < deadline:
            for msg in consumer.consume(1000, timeout=1.0):
                assert msg.error() is None, msg.error()
                got.setdefault(msg.partition(), []).append(msg.value())
                if msg.value() == tag + b"-%d" % msg.partition():
                    missing.discard(msg.partition())
    finally:
        consumer.close()
    assert not missing, sorted(missing)[:20]
    return got


def _create(port: int, topic: str, partitions: int) -> None:
    """CreateTopics with room for 2 000 partitions' files and fsyncs (brokerproc's waits 10 s)."""
    body = {"topics": [{"name": topic, "num_partitions": partitions, "replication_factor": 1, "assignments": [],
                        "configs": []}], "timeout_ms": 120000, "validate_only": False}
    with socket.create_connection(("127.0.0.1", port), timeout=180) as sock:
        sock.sendall(encode_request(ApiKey.CREATE_TOPICS, 7, 1, body))
        size = struct.unpack(">i", recv_exact(sock, 4))[0]
        _cid, answer = decode_response(ApiKey.CREATE_TOPICS, 7, recv_exact(sock, size))
    assert answer["topics"][0]["error_code"] == 0, answer


def _produce_raw(sock: socket.socket, correlation: int, topic: str, partition: int) -> int:
    batch = build_batch([Record(0, 1_700_000_000_000, b"k", b"under pressure")])
    body = {"transactional_id": None, "acks": -1, "timeout_ms": 10000,
            "topic_data": [{"name": topic, "partition_data": [{"index": partition, "records": bytes(batch)}]}]}
    sock.sendall(encode_request(ApiKey.PRODUCE, 9, correlation, body))
    size = struct.unpack(">i", recv_exact(sock, 4))[0]
    got, answer = decode_response(ApiKey.PRODUCE, 9, recv_exact(sock, size))
    assert got == correlation
    return answer["responses"][0]["partition_responses"][0]["error_code"]


@pytest.mark.timeout(600)
def test_2000_partitions_under_256_descriptors(tmp_path):
    with BrokerProcess(tmp_path / "data", preexec_fn=_limit_nofile) as broker:
        pid = broker.proc.pid
        assert resource.prlimit(pid, resource.RLIMIT_NOFILE)[0] == NOFILE
        started = time.monotonic()
        _create(broker.port, "many", PARTITIONS)
        _create(broker.port, "fresh", 4)
        print(f"created {PARTITIONS} partitions in {time.monotonic() - started:.1f} s")
        _produce_all(broker.bootstrap, "many", b"first")
        got = _consume_all(broker.bootstrap, "many", b"first")
        assert {p: v for p, v in got.items()} == {p: [b"first-%d" % p] for p in range(PARTITIONS)}
        assert _fds(pid) <= NOFILE
        assert broker.proc.poll() is None

        # Pressure: a connection made first, then connections until the broker cannot
        # accept any more (its listen backlog holds the rest).
        held = socket.create_connection(("127.0.0.1", broker.port), timeout=30)
        hogs = []
        try:
            deadline = time.monotonic() + 60
            while "accept failed" not in broker.log_tail(200) and time.monotonic() < deadline:
                for _ in range(20):
                    hogs.append(socket.create_connection(("127.0.0.1", broker.port), timeout=10))
                time.sleep(0.05)
            assert "Too many open files" in broker.log_tail(200)
            # Appends to partitions written before need their segment file only: the
            # LRU closes an idle one to open it, so they go on succeeding.
            codes = [_produce_raw(held, n, "many", n * 37 % PARTITIONS) for n in range(1, 51)]
            assert codes == [0] * 50, codes
            # The first append to a partition also writes its leader-epoch-checkpoint, a
            # descriptor the process does not have: KAFKA_STORAGE_ERROR, and a log line.
            codes = [_produce_raw(held, 100 + p, "fresh", p) for p in range(4)]
            assert set(codes) == {KAFKA_STORAGE_ERROR}, codes
            assert _fds(pid) >= NOFILE - 8
            assert "Too many open files" in broker.log_tail(50)
            assert broker.proc.poll() is None
        finally:
            for sock in hogs:
                sock.close()
        # The pressure is gone: every partition takes and serves records again.
        _produce_all(broker.bootstrap, "many", b"second")
        got = _consume_all(broker.bootstrap, "many", b"second")
        assert all(v[0] == b"first-%d" % p and v[-1] == b"second-%d" % p for p, v in got.items())
        assert _produce_raw(held, 1000, "many", 0) == 0
        assert [_produce_raw(held, 2000 + p, "fresh", p) for p in range(4)] == [0] * 4
        held.close()
        assert broker.proc.poll() is None
        assert "Traceback" not in broker.log_path.read_text(errors="replace")


def test_soft_open_files_limit_raised_to_hard(tmp_path):
    with BrokerProcess(tmp_path / "data", preexec_fn=_soft_below_hard) as broker:
        assert resource.prlimit(broker.proc.pid, resource.RLIMIT_NOFILE) == (4 * NOFILE, 4 * NOFILE)
        assert (f"open files limit (RLIMIT_NOFILE): soft {NOFILE} raised to the hard limit {4 * NOFILE}"
                in broker.log_tail(200))
        _create(broker.port, "t", 4)
        with socket.create_connection(("127.0.0.1", broker.port), timeout=30) as sock:
            assert _produce_raw(sock, 1, "t", 0) == 0
