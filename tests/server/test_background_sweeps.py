"""The broker's retention sweep, run a chunk of logs at a time: a topic whose logs come
after more than one chunk of other logs still has its expired segments deleted, on a real
broker process, seen by a client as a moved log start offset. As on Apache Kafka, the
active segment goes too when all of it has expired, and the first check comes 30 s after
start-up."""

from __future__ import annotations

import time

import trio
import trio.testing

from server.broker import RETENTION_FIRST_CHECK_S, SWEEP_CHUNK, Broker
from server.config import load_config
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


def _list_offset(port: int, topic: str, timestamp: int) -> int:
    body = {"replica_id": -1, "isolation_level": 0,
            "topics": [{"name": topic, "partitions": [{"partition_index": 0, "current_leader_epoch": -1,
                                                        "timestamp": timestamp}]}]}
    return raw_request("127.0.0.1", port, 2, 7, body)["topics"][0]["partitions"][0]["offset"]


def _log_start(port: int, topic: str) -> int:
    return _list_offset(port, topic, -2)


def _latest(port: int, topic: str) -> int:
    return _list_offset(port, topic, -1)


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
        # Every segment gone, the active one too (Kafka rolls it first): the log is empty
        # at its end offset, and the next record lands there.
        assert _log_start(broker.port, "zz-retained") == 5
        _produce(broker.port, "zz-retained", b"after")
        assert _latest(broker.port, "zz-retained") == 6


def test_first_retention_check_comes_30_s_after_start_up(tmp_path):
    """Kafka's LogManager checks retention first 30 s after start-up (InitialTaskDelayMs),
    then every log.retention.check.interval.ms (5 minutes by default): records that expired
    while the broker was down go within half a minute. On a mock clock running 20 times
    real time: a topic of expired records (one segment, the active one) is whole before
    30 s and empty, at the same log end offset, well before the 5-minute interval."""
    broker = Broker(load_config(overrides={"log.dirs": str(tmp_path / "data"), "listeners": "127.0.0.1:0",
                                           "http.listeners": ""}, environ={}))
    broker.open()
    broker.create_topic("expired", 1, {"retention.ms": "60000"})
    partition = broker.partition("expired", 0)
    seen: list[tuple[float, int]] = []

    async def main():
        batch = build_batch([Record(offset=i, timestamp=OLD_MS, key=b"k", value=b"v") for i in range(3)])
        await broker.append(("expired", 0), bytearray(batch), 3)
        assert (partition.high_watermark, partition.log.log_end_offset) == (3, 3)
        async with trio.open_nursery() as nursery:
            t0 = trio.current_time()
            await nursery.start(broker.run_background)
            while partition.log.log_start_offset < 3 and trio.current_time() - t0 < 300:
                seen.append((trio.current_time() - t0, partition.log.log_start_offset))
                await trio.sleep(0.5)
            seen.append((trio.current_time() - t0, partition.log.log_start_offset))
            nursery.cancel_scope.cancel()

    try:
        trio.run(main, clock=trio.testing.MockClock(rate=20))
        assert all(start == 0 for t, start in seen if t < RETENTION_FIRST_CHECK_S - 0.5), seen
        gone_at, start = seen[-1]
        assert start == 3, f"still {start} after {gone_at:.0f} s: no retention check before the 5-minute interval"
        assert gone_at < 120, seen[-3:]
        assert partition.log.log_end_offset == 3
    finally:
        broker.close()
