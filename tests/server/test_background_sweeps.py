"""The broker's retention sweep, now run a chunk of logs at a time (issue 21): a topic
whose logs come after more than one chunk of other logs still has its expired segments
deleted, on a real broker process, seen by a client as a moved log start offset."""

from __future__ import annotations

import time

from server.broker import SWEEP_CHUNK
from tests.brokerproc import BrokerProcess, raw_request
from wire.records import Record, build_batch

OLD_MS = 1_000_000_000_000  # 2001: long past any retention.ms


def _create(port: int, name: str, partitions: int, configs: dict[str, str]) -> None:
    body = {"topics": [{"name": name, "num_partitions": partitions, "replication_factor": 1, "assignments": [],
                        "configs": [{"name": k, "value": v} for k, v in configs.items()]}],
            "timeout_ms": 60000, "validate_only": False}
    answer = raw_request("127.0.0.1", port, 19, 7, body)
    assert answer["topics"][0]["error_code"] == 0, answer


def _produce(port: int, topic: str, value: bytes) -> None:
    batch = build_batch([Record(offset=0, timestamp=OLD_MS, key=b"k", value=value)])
    body = {"transactional_id": None, "acks": 1, "timeout_ms": 10000,
            "topic_data": [{"name": topic, "partition_data": [{"index": 0, "records": bytes(batch)}]}]}
    part = raw_request("127.0.0.1", port, 0, 9, body)["responses"][0]["partition_responses"][0]
    assert part["error_code"] == 0, part


def _log_start(port: int, topic: str) -> int:
    body = {"replica_id": -1, "isolation_level": 0,
            "topics": [{"name": topic, "partitions": [{"partition_index": 0, "current_leader_epoch": -1,
                                                        "timestamp": -2}]}]}
    return raw_request("127.0.0.1", port, 2, 7, body)["topics"][0]["partitions"][0]["offset"]


def test_retention_sweep_reaches_logs_past_the_first_chunk(tmp_path):
    with BrokerProcess(tmp_path / "data", "--set", "log.retention.check.interval.ms=200") as broker:
        _create(broker.port, "aa-filler", SWEEP_CHUNK + 50, {})  # sorts first: the sweep reaches it first
        # one record per segment (segment.bytes below a batch), timestamps long expired
        _create(broker.port, "zz-retained", 1, {"segment.bytes": "100", "retention.ms": "60000",
                                                "file.delete.delay.ms": "0"})
        for i in range(5):
            _produce(broker.port, "zz-retained", b"v%d" % i * 20)
        deadline = time.monotonic() + 30
        while _log_start(broker.port, "zz-retained") < 5 and time.monotonic() < deadline:
            time.sleep(0.1)
        # Every record expired: every segment goes, the active one too (Kafka rolls a new,
        # empty one first), up to the high watermark, which on one broker is the log end.
        assert _log_start(broker.port, "zz-retained") == 5
