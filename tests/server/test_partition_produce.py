"""Produce through the `Partition`: idempotence under the partition lock, per-record errors
(KIP-467), producer-state snapshots across restarts.

All over real sockets against a broker subprocess; record errors also through librdkafka,
which is what turns them into per-message delivery errors.
"""

from __future__ import annotations

import socket
import struct
import time

import pytest

from tests.brokerproc import BrokerProcess, raw_request, recv_exact
from wire import decode_response, encode_request
from wire.errors import ErrorCode
from wire.records import Record, build_batch, iter_headers
from wire.registry import ApiKey

PRODUCE_V = 9
FETCH_V = 12


def _produce_frame(topic: str, batch: bytes, correlation: int, acks: int = -1) -> bytes:
    body = {"transactional_id": None, "acks": acks, "timeout_ms": 30000,
            "topic_data": [{"name": topic, "partition_data": [{"index": 0, "records": bytes(batch)}]}]}
    return encode_request(ApiKey.PRODUCE, PRODUCE_V, correlation, body)


def _read_response(sock: socket.socket, api_key: int, version: int) -> dict:
    size = struct.unpack(">i", recv_exact(sock, 4))[0]
    return decode_response(api_key, version, recv_exact(sock, size))[1]


def _partition_answer(response: dict) -> dict:
    return response["responses"][0]["partition_responses"][0]


def _create(broker: BrokerProcess, topic: str, configs: dict[str, str] | None = None) -> None:
    body = {"topics": [{"name": topic, "num_partitions": 1, "replication_factor": 1, "assignments": [],
                        "configs": [{"name": k, "value": v} for k, v in (configs or {}).items()]}],
            "timeout_ms": 10000, "validate_only": False}
    answer = raw_request("127.0.0.1", broker.port, ApiKey.CREATE_TOPICS, 5, body)
    assert answer["topics"][0]["error_code"] == 0, answer


def _init_producer(broker: BrokerProcess) -> tuple[int, int]:
    answer = raw_request("127.0.0.1", broker.port, ApiKey.INIT_PRODUCER_ID, 4,
                         {"transactional_id": None, "transaction_timeout_ms": 60000, "producer_id": -1,
                          "producer_epoch": -1})
    assert answer["error_code"] == 0, answer
    return answer["producer_id"], answer["producer_epoch"]


def _fetch_all(broker: BrokerProcess, topic: str) -> list[tuple[int, int]]:
    """(base offset, record count) of every stored batch."""
    out = []
    offset = 0
    while True:
        body = {"replica_id": -1, "max_wait_ms": 0, "min_bytes": 0, "max_bytes": 64 << 20, "isolation_level": 0,
                "session_id": 0, "session_epoch": -1,
                "topics": [{"topic": topic, "partitions": [{"partition": 0, "current_leader_epoch": -1,
                                                            "fetch_offset": offset, "log_start_offset": -1,
                                                            "partition_max_bytes": 64 << 20}]}],
                "forgotten_topics_data": [], "rack_id": ""}
        answer = raw_request("127.0.0.1", broker.port, ApiKey.FETCH, FETCH_V, body)
        part = answer["responses"][0]["partitions"][0]
        assert part["error_code"] == 0, part
        records = part["records"] or b""
        if not records:
            return out
        for _pos, header in iter_headers(bytes(records), check_crc=False):
            out.append((header.base_offset, header.record_count))
            offset = header.next_offset


def test_retry_on_another_connection_while_the_first_copy_is_fsynced_is_not_written_twice(tmp_path):
    """Under trafka.fsync.policy=always an append waits for its fsync in a worker thread. A
    producer that times out and retries the same batch on a new connection meanwhile must
    get the first copy's offset back: the producer check has to run under the partition's
    lock, after the first copy is recorded (it used to run before the lock: written twice)."""
    rounds, records_per_batch = 12, 3
    value = b"x" * (256 << 10)  # big enough that the write + fsync take a while
    with BrokerProcess(tmp_path / "data", "--set", "trafka.fsync.policy=always") as broker:
        _create(broker, "dup")
        pid, epoch = _init_producer(broker)
        first = socket.create_connection(("127.0.0.1", broker.port), timeout=30)
        retry = socket.create_connection(("127.0.0.1", broker.port), timeout=30)
        try:
            for i in range(rounds):
                batch = build_batch([Record(j, int(time.time() * 1000), b"k", value) for j in range(records_per_batch)],
                                    producer_id=pid, producer_epoch=epoch, base_sequence=i * records_per_batch)
                first.sendall(_produce_frame("dup", batch, 2 * i))
                retry.sendall(_produce_frame("dup", batch, 2 * i + 1))
                a = _partition_answer(_read_response(first, ApiKey.PRODUCE, PRODUCE_V))
                b = _partition_answer(_read_response(retry, ApiKey.PRODUCE, PRODUCE_V))
                assert a["error_code"] == 0 and b["error_code"] == 0, (a, b)
                assert a["base_offset"] == b["base_offset"] == i * records_per_batch, (i, a, b)
        finally:
            first.close()
            retry.close()
        stored = _fetch_all(broker, "dup")
    assert stored == [(i * records_per_batch, records_per_batch) for i in range(rounds)]


def test_idempotent_state_survives_restart_through_a_snapshot(tmp_path):
    """A clean shutdown writes Kafka's <offset>.snapshot; after the restart a retry of the
    last batch is still recognised (and answered with its offset) without a log scan."""
    with BrokerProcess(tmp_path / "data") as broker:
        _create(broker, "snap")
        pid, epoch = _init_producer(broker)
        batches = [build_batch([Record(0, 1_700_000_000_000 + i, b"k", b"v%d" % i)], producer_id=pid,
                               producer_epoch=epoch, base_sequence=i) for i in range(3)]
        with socket.create_connection(("127.0.0.1", broker.port), timeout=10) as sock:
            for i, batch in enumerate(batches):
                sock.sendall(_produce_frame("snap", batch, i))
                assert _partition_answer(_read_response(sock, ApiKey.PRODUCE, PRODUCE_V))["base_offset"] == i
        broker.stop()
        snapshots = sorted(p.name for p in (tmp_path / "data" / "snap-0").glob("*.snapshot"))
        assert snapshots == [f"{3:020d}.snapshot"]
        broker.start()
        with socket.create_connection(("127.0.0.1", broker.port), timeout=10) as sock:
            sock.sendall(_produce_frame("snap", batches[2], 9))
            answer = _partition_answer(_read_response(sock, ApiKey.PRODUCE, PRODUCE_V))
        assert answer["error_code"] == 0 and answer["base_offset"] == 2
        assert "producer state rebuilt" not in broker.log_tail(200).split("listening")[-1]
        assert _fetch_all(broker, "snap") == [(0, 1), (1, 1), (2, 1)]


def test_a_clean_restart_reads_no_batch_header_of_non_idempotent_data(tmp_path):
    """A clean shutdown snapshots every log with data, an empty snapshot when no
    producer wrote to it, so the restart does not read the log's batch headers looking for
    producers; an empty log gets no file. An idempotent producer after the restart works."""
    with BrokerProcess(tmp_path / "data") as broker:
        _create(broker, "plain")
        _create(broker, "quiet")
        with socket.create_connection(("127.0.0.1", broker.port), timeout=10) as sock:
            for i in range(5):
                sock.sendall(_produce_frame("plain", build_batch([Record(0, 1_700_000_000_000, b"k", b"v")]), i))
                assert _partition_answer(_read_response(sock, ApiKey.PRODUCE, PRODUCE_V))["base_offset"] == i
        broker.stop()
        assert sorted(p.name for p in (tmp_path / "data" / "plain-0").glob("*.snapshot")) == [f"{5:020d}.snapshot"]
        assert list((tmp_path / "data" / "quiet-0").glob("*.snapshot")) == []
        broker.start()
        assert "producer state rebuilt" not in broker.log_tail(200).split("listening")[-1]
        pid, epoch = _init_producer(broker)
        with socket.create_connection(("127.0.0.1", broker.port), timeout=10) as sock:
            batch = build_batch([Record(0, 1_700_000_000_000, b"k", b"idem")], producer_id=pid,
                                producer_epoch=epoch, base_sequence=0)
            for correlation in (20, 21):  # the retry is recognised
                sock.sendall(_produce_frame("plain", batch, correlation))
                assert _partition_answer(_read_response(sock, ApiKey.PRODUCE, PRODUCE_V))["base_offset"] == 5
        broker.stop()
        assert sorted(p.name for p in (tmp_path / "data" / "plain-0").glob("*.snapshot")) == [f"{6:020d}.snapshot"]
        broker.start()
        assert "producer state rebuilt" not in broker.log_tail(200).split("listening")[-1]
        assert _fetch_all(broker, "plain") == [(i, 1) for i in range(6)]


def test_compacted_topic_names_the_records_without_a_key(tmp_path):
    """KIP-467: INVALID_RECORD with record_errors for exactly the keyless records."""
    with BrokerProcess(tmp_path / "data") as broker:
        _create(broker, "compacted", {"cleanup.policy": "compact"})
        keys = [b"a", None, b"c", None]
        batch = build_batch([Record(i, 1_700_000_000_000, k, b"v") for i, k in enumerate(keys)])
        with socket.create_connection(("127.0.0.1", broker.port), timeout=10) as sock:
            sock.sendall(_produce_frame("compacted", batch, 1))
            answer = _partition_answer(_read_response(sock, ApiKey.PRODUCE, PRODUCE_V))
    assert answer["error_code"] == ErrorCode.INVALID_RECORD
    assert [e["batch_index"] for e in answer["record_errors"]] == [1, 3]
    assert all("without key" in e["batch_index_error_message"] for e in answer["record_errors"])
    assert answer["error_message"].startswith("One or more records have been rejected due to 2 record errors")


def test_timestamp_bounds_name_the_records_outside_them(tmp_path):
    """KIP-937 bounds: INVALID_TIMESTAMP with record_errors for the records outside."""
    now = int(time.time() * 1000)
    with BrokerProcess(tmp_path / "data") as broker:
        _create(broker, "stamped", {"message.timestamp.before.max.ms": "60000",
                                    "message.timestamp.after.max.ms": "60000"})
        stamps = [now, now - 3_600_000, now + 1000, now + 3_600_000]
        batch = build_batch([Record(i, ts, b"k", b"v") for i, ts in enumerate(stamps)])
        with socket.create_connection(("127.0.0.1", broker.port), timeout=10) as sock:
            sock.sendall(_produce_frame("stamped", batch, 1))
            answer = _partition_answer(_read_response(sock, ApiKey.PRODUCE, PRODUCE_V))
            good = build_batch([Record(0, now, b"k", b"v")])
            sock.sendall(_produce_frame("stamped", good, 2))
            accepted = _partition_answer(_read_response(sock, ApiKey.PRODUCE, PRODUCE_V))
    assert answer["error_code"] == ErrorCode.INVALID_TIMESTAMP
    assert [e["batch_index"] for e in answer["record_errors"]] == [1, 3]
    assert accepted["error_code"] == 0 and accepted["base_offset"] == 0


def test_librdkafka_fails_only_the_invalid_records(tmp_path):
    """What a confluent-kafka user sees: the keyless messages fail with INVALID_RECORD, the
    others of the same batch with librdkafka's "different record" error — not all alike."""
    confluent_kafka = pytest.importorskip("confluent_kafka")
    with BrokerProcess(tmp_path / "data") as broker:
        _create(broker, "compacted", {"cleanup.policy": "compact"})
        producer = confluent_kafka.Producer({"bootstrap.servers": broker.bootstrap, "linger.ms": 200,
                                             "retries": 0, "enable.idempotence": False})
        results: dict[int, object] = {}
        for i, key in enumerate([b"a", None, b"c", None, b"e"]):
            producer.produce("compacted", key=key, value=b"v%d" % i, partition=0,
                             on_delivery=lambda err, msg, i=i: results.__setitem__(i, err))
        producer.flush(30)
    assert sorted(results) == [0, 1, 2, 3, 4]
    codes = {i: (err.code() if err is not None else None) for i, err in results.items()}
    invalid = confluent_kafka.KafkaError.INVALID_RECORD
    assert codes[1] == invalid and codes[3] == invalid, codes
    assert codes[0] not in (None, invalid) and codes[2] not in (None, invalid) and codes[4] not in (None, invalid), codes


def test_a_new_data_directory_is_not_called_unclean(tmp_path):
    with BrokerProcess(tmp_path / "data") as broker:
        broker.stop()
        first = broker.log_tail(200)
    assert "unclean" not in first, first
    assert "new data directory" in first
