"""Fetch over real sockets on both send paths: copied (small) and sendfile (≥ 64 KiB),
at a non-flexible (v11, int32 length) and a flexible (v12, varint length) version, and a
slow reader draining a multi-MB backlog without stalls."""

from __future__ import annotations

import socket
import struct
import time

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition

from tests.brokerproc import BrokerProcess, create_topic, recv_exact
from wire import ApiKey, decode_response, encode_request
from wire.records import iter_headers, iter_records


@pytest.fixture(scope="module")
def broker(tmp_path_factory):
    with BrokerProcess(tmp_path_factory.mktemp("fetch") / "data") as proc:
        yield proc



def _produce(bootstrap: str, topic: str, count: int, size: int) -> None:
    p = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5, "compression.codec": "none"})
    for i in range(count):
        p.produce(topic, value=i.to_bytes(8, "big") + b"x" * (size - 8))
    assert p.flush(30) == 0


@pytest.mark.parametrize("version", [11, 12])
@pytest.mark.parametrize("max_bytes", [4096, 1 << 20])
def test_raw_fetch_returns_whole_valid_batches(broker, version, max_bytes):
    topic = f"fetch-raw-{version}-{max_bytes}"
    _produce(broker.bootstrap, topic, 3000, 1000)
    body = {"replica_id": -1, "max_wait_ms": 100, "min_bytes": 1, "max_bytes": 50 << 20, "isolation_level": 0,
            "session_id": 0, "session_epoch": -1,
            "topics": [{"topic": topic, "partitions": [{"partition": 0, "fetch_offset": 0, "log_start_offset": -1,
                                                         "partition_max_bytes": max_bytes,
                                                         "current_leader_epoch": -1}]}],
            "forgotten_topics_data": [], "rack_id": ""}
    with socket.create_connection(("127.0.0.1", broker.port), timeout=10) as sock:
        sock.sendall(encode_request(ApiKey.FETCH, version, 3, body))
        size = struct.unpack(">i", recv_exact(sock, 4))[0]
        frame = recv_exact(sock, size)
    cid, resp = decode_response(ApiKey.FETCH, version, frame)
    part = resp["responses"][0]["partitions"][0]
    assert cid == 3 and part["error_code"] == 0 and part["high_watermark"] == 3000
    records = bytes(part["records"])
    headers = [h for _pos, h in iter_headers(records)]  # CRC-checked, whole batches only
    assert headers[0].base_offset == 0
    assert len(records) <= max(max_bytes, headers[0].size)
    offsets = [r.offset for pos, h in iter_headers(records)
               for r in iter_records(memoryview(records)[pos:pos + h.size])]
    assert offsets == list(range(len(offsets)))


def test_slow_reader_drains_a_backlog_without_stalls(broker):
    topic = "fetch-backlog"
    count, size = 8000, 1024  # ~8 MB
    _produce(broker.bootstrap, topic, count, size)
    c = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": "slow", "enable.auto.commit": False,
                  "fetch.max.bytes": 2 << 20, "max.partition.fetch.bytes": 1 << 20, "socket.receive.buffer.bytes": 65536})
    c.assign([TopicPartition(topic, 0, 0)])
    seen = []
    long_gaps = 0
    last = time.monotonic()
    deadline = last + 60
    try:
        while len(seen) < count and time.monotonic() < deadline:
            msg = c.poll(1.0)
            now = time.monotonic()
            if msg is None or msg.error():
                continue
            if now - last >= 0.18:
                long_gaps += 1
            last = now
            seen.append(int.from_bytes(msg.value()[:8], "big"))
            if len(seen) % 500 == 0:
                time.sleep(0.05)  # a slow application
    finally:
        c.close()
    assert seen == list(range(count))
    # A sendfile path that stalls on a full socket buffer shows up as a ~200 ms gap per
    # fetch (8+ here); a scheduling hiccup or two is not that.
    assert long_gaps <= 2, f"{long_gaps} gaps of 180 ms or more between messages"


def test_an_empty_long_poll_is_answered_a_millisecond_tick_after_max_wait(broker):
    """kafka-go's Conn.Read with a deadline sends its remaining time truncated to whole
    milliseconds as max_wait_ms and reports a timeout only if the empty answer arrives after
    its deadline; answered within the truncated fraction, the Read returned (0, nil). Kafka's
    answer comes after its millisecond timer's tick: so does Trafka's (purgatory_timer.EXPIRY_TICK_S)."""
    create_topic(broker.port, "fetch-empty-poll", 1)
    body = {"replica_id": -1, "max_wait_ms": 20, "min_bytes": 1, "max_bytes": 1 << 20, "isolation_level": 0,
            "topics": [{"topic": "fetch-empty-poll", "partitions": [{"partition": 0, "fetch_offset": 0,
                                                                     "log_start_offset": -1,
                                                                     "partition_max_bytes": 1 << 20}]}]}
    held = []
    with socket.create_connection(("127.0.0.1", broker.port), timeout=10) as sock:
        for cid in range(40):
            started = time.monotonic()
            sock.sendall(encode_request(ApiKey.FETCH, 4, cid, body))
            size = struct.unpack(">i", recv_exact(sock, 4))[0]
            _cid, resp = decode_response(ApiKey.FETCH, 4, recv_exact(sock, size))
            held.append(time.monotonic() - started)
            part = resp["responses"][0]["partitions"][0]
            assert part["error_code"] == 0 and part["high_watermark"] == 0 and not part["records"]
    assert min(held) >= 0.021, f"answered {min(held) * 1000:.2f} ms after a 20 ms max_wait"
