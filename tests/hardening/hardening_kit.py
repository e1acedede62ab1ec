"""Shared pieces of the hardening suite: raw frames, process probes, background traffic.

How this works: every test here runs a real broker process (tests.brokerproc) and talks
to it over loopback, either with raw frames built by `wire.encode_request` or with real
clients (confluent-kafka). `Traffic` is the "other clients" of the issue: one idempotent
producer and one consumer in threads beside whatever a test does to the broker; at the
end `Traffic.finish()` says whether anything was lost, duplicated or reordered.

Bounds: every loop here is limited by a count and a deadline. `LONG` (env
TRAFKA_LONG_TESTS=1) turns on the long versions of the tests; `scaled(ci, long)` picks
the count for the current mode.
"""

from __future__ import annotations

import os
import socket
import struct
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

from wire import ApiKey, decode_response, encode_request
from wire.errors import ErrorCode
from wire.errors import CorruptRecords
from wire.records import HEADER_SIZE, LOG_OVERHEAD, Record, build_batch, iter_records, parse_header

LONG = os.environ.get("TRAFKA_LONG_TESTS", "") not in ("", "0")


def scaled(ci: int, long: int) -> int:
    """`ci` in the default (CI) run, `long` with TRAFKA_LONG_TESTS=1."""
    return long if LONG else ci


# --------------------------------------------------------------------------- process probes


def proc_status(pid: int) -> dict[str, str]:
    out = {}
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            key, _, value = line.partition(":")
            out[key] = value.strip()
    return out


def rss_kb(pid: int) -> int:
    """Resident set size of `pid` in KiB (VmRSS)."""
    return int(proc_status(pid)["VmRSS"].split()[0])


def fd_count(pid: int) -> int:
    return len(os.listdir(f"/proc/{pid}/fd"))


def socket_fd_count(pid: int) -> int:
    """Open sockets of `pid` (listeners and connections)."""
    count = 0
    for name in os.listdir(f"/proc/{pid}/fd"):
        try:
            if os.readlink(f"/proc/{pid}/fd/{name}").startswith("socket:"):
                count += 1
        except OSError:
            pass  # closed while we looked
    return count


def wait_until(predicate, timeout: float, interval: float = 0.05) -> bool:
    """Poll `predicate` until true or `timeout` seconds pass; returns its last value."""
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value or time.monotonic() >= deadline:
            return value
        time.sleep(interval)


def alive(broker) -> bool:
    return broker.proc is not None and broker.proc.poll() is None


def log_text(broker) -> str:
    try:
        return broker.log_path.read_text(errors="replace")
    except OSError:
        return ""


# --------------------------------------------------------------------------- raw frames


def recv_exact(sock: socket.socket, n: int) -> bytes:
    out = bytearray()
    while len(out) < n:
        chunk = sock.recv(n - len(out))
        if not chunk:
            raise ConnectionError(f"closed after {len(out)} of {n} bytes")
        out += chunk
    return bytes(out)


def read_frame(sock: socket.socket) -> bytes:
    size = struct.unpack(">i", recv_exact(sock, 4))[0]
    return recv_exact(sock, size)


def connect(port: int, timeout: float = 10.0) -> socket.socket:
    return socket.create_connection(("127.0.0.1", port), timeout=timeout)


def request(sock: socket.socket, api_key: int, version: int, body: dict, correlation_id: int = 1) -> dict:
    """One round trip on an open socket; returns the decoded response body."""
    sock.sendall(encode_request(api_key, version, correlation_id, body, client_id="hardening"))
    cid, response = decode_response(api_key, version, read_frame(sock))
    assert cid == correlation_id, f"correlation id {cid}, expected {correlation_id}"
    return response


def roundtrip(port: int, api_key: int, version: int, body: dict, timeout: float = 10.0) -> dict:
    with connect(port, timeout) as sock:
        return request(sock, api_key, version, body)


def api_versions_ok(port: int, timeout: float = 5.0) -> bool:
    try:
        return roundtrip(port, ApiKey.API_VERSIONS, 0, {}, timeout)["error_code"] == ErrorCode.NONE
    except (OSError, ConnectionError):
        return False


def closed_by_peer(sock: socket.socket, timeout: float) -> bool:
    """True if the peer closes (EOF or reset) within `timeout`; data read meanwhile is dropped."""
    sock.settimeout(timeout)
    deadline = time.monotonic() + timeout
    try:
        while time.monotonic() < deadline:
            if not sock.recv(65536):
                return True
    except (ConnectionResetError, BrokenPipeError):
        return True
    except socket.timeout:
        return False
    return False


def create_topic(port: int, name: str, partitions: int = 1, configs: dict[str, str] | None = None) -> None:
    body = {"topics": [{"name": name, "num_partitions": partitions, "replication_factor": 1,
                        "configs": [{"name": k, "value": v} for k, v in (configs or {}).items()]}],
            "timeout_ms": 10000}
    result = roundtrip(port, ApiKey.CREATE_TOPICS, 5, body)["topics"][0]
    assert result["error_code"] == ErrorCode.NONE, result


def make_batch(values: list[bytes], key: bytes | None = b"k", *, producer_id: int = -1, producer_epoch: int = -1,
               base_sequence: int = -1) -> bytearray:
    now = int(time.time() * 1000)
    return build_batch([Record(i, now, key, v) for i, v in enumerate(values)], producer_id=producer_id,
                       producer_epoch=producer_epoch, base_sequence=base_sequence)


def produce_body(topic: str, partition: int, records: bytes, acks: int = -1) -> dict:
    return {"transactional_id": None, "acks": acks, "timeout_ms": 10000,
            "topic_data": [{"name": topic, "partition_data": [{"index": partition, "records": records}]}]}


PRODUCE_VERSION = 9


def produce(port: int, topic: str, partition: int, records: bytes, acks: int = -1,
            version: int = PRODUCE_VERSION) -> dict:
    """Produce one partition's records; returns that partition's response."""
    body = roundtrip(port, ApiKey.PRODUCE, version, produce_body(topic, partition, records, acks))
    return body["responses"][0]["partition_responses"][0]


FETCH_VERSION = 12


def fetch_body(topic: str, partition: int, offset: int, max_wait_ms: int = 0, max_bytes: int = 1 << 20,
               min_bytes: int = 1) -> dict:
    return {"replica_id": -1, "max_wait_ms": max_wait_ms, "min_bytes": min_bytes, "max_bytes": max_bytes,
            "isolation_level": 0, "session_id": 0, "session_epoch": -1,
            "topics": [{"topic": topic, "partitions": [{"partition": partition, "current_leader_epoch": -1,
                                                         "fetch_offset": offset, "log_start_offset": -1,
                                                         "partition_max_bytes": max_bytes}]}],
            "forgotten_topics_data": [], "rack_id": ""}


def fetch(port: int, topic: str, partition: int, offset: int, max_bytes: int = 1 << 20) -> dict:
    """Fetch one partition (no wait); returns that partition's response."""
    body = roundtrip(port, ApiKey.FETCH, FETCH_VERSION, fetch_body(topic, partition, offset, 0, max_bytes))
    assert body["error_code"] == ErrorCode.NONE, body
    return body["responses"][0]["partitions"][0]


def read_values(port: int, topic: str, partition: int, start: int = 0) -> list[tuple[int, bytes | None]]:
    """Every (offset, value) of a partition from `start` to its high watermark, by raw Fetch."""
    out: list[tuple[int, bytes | None]] = []
    offset = start
    for _ in range(100_000):
        part = fetch(port, topic, partition, offset, max_bytes=4 << 20)
        assert part["error_code"] == ErrorCode.NONE, part
        data = bytes(part["records"])
        for record in iter_records_tolerant(data):
            if record.offset >= offset:
                out.append((record.offset, record.value))
                offset = record.offset + 1
        if offset >= part["high_watermark"] or not data:
            return out
    raise AssertionError("read_values did not reach the high watermark")


def iter_records_tolerant(data: bytes):
    """Records of every whole batch in a fetch blob (a partial batch at the end is normal)."""
    pos = 0
    while pos + LOG_OVERHEAD <= len(data):
        size = struct.unpack_from(">i", data, pos + 8)[0] + LOG_OVERHEAD
        if pos + size > len(data):
            break
        yield from iter_records(data[pos:pos + size], check_crc=True)
        pos += size


def segment_batches(path: Path) -> list[tuple[int, int, int]]:
    """(position, size, base offset) of each whole batch in a .log file, in order."""
    data = path.read_bytes()
    out = []
    pos = 0
    while pos + HEADER_SIZE <= len(data):
        try:
            header = parse_header(data, pos)
        except CorruptRecords:
            break
        size = header.batch_length + LOG_OVERHEAD
        if pos + size > len(data):
            break
        out.append((pos, size, header.base_offset))
        pos += size
    return out


# --------------------------------------------------------------------------- background traffic


@dataclass
class TrafficResult:
    acked: list[int]
    failed: list[tuple[int, str]]
    consumed: list[tuple[int, int, int]]  # (partition, offset, seq)

    def problems(self) -> list[str]:
        out = []
        if self.failed:
            out.append(f"{len(self.failed)} delivery errors, first: {self.failed[:3]}")
        seqs = [seq for _p, _o, seq in self.consumed]
        duplicates = len(seqs) - len(set(seqs))
        if duplicates:
            out.append(f"{duplicates} messages consumed twice")
        missing = set(self.acked) - set(seqs)
        if missing:
            out.append(f"{len(missing)} acknowledged messages never consumed, e.g. {sorted(missing)[:5]}")
        by_partition: dict[int, list[int]] = {}
        for partition, _offset, seq in self.consumed:
            by_partition.setdefault(partition, []).append(seq)
        for partition, partition_seqs in by_partition.items():
            if partition_seqs != sorted(partition_seqs):
                out.append(f"partition {partition}: messages out of order")
        return out


@dataclass
class Traffic:
    """A confluent-kafka producer and consumer running beside a test, losing nothing.

    Messages are numbered; the producer is idempotent with acks=all and a bounded rate,
    the consumer reads every partition from the start by assignment (no group).
    """

    bootstrap: str
    topic: str
    partitions: int = 2
    rate_per_s: float = 200.0
    max_messages: int = 100_000
    _stop: threading.Event = field(default_factory=threading.Event)
    _acked: list[int] = field(default_factory=list)
    _failed: list[tuple[int, str]] = field(default_factory=list)
    _consumed: list[tuple[int, int, int]] = field(default_factory=list)
    _produced: int = 0
    _errors: list[BaseException] = field(default_factory=list)

    def start(self) -> "Traffic":
        self._producer_thread = threading.Thread(target=self._guard, args=(self._produce,), daemon=True)
        self._consumer_stop = threading.Event()
        self._consumer_thread = threading.Thread(target=self._guard, args=(self._consume,), daemon=True)
        self._producer_thread.start()
        self._consumer_thread.start()
        return self

    def _guard(self, target) -> None:
        try:
            target()
        except BaseException as exc:  # reported by finish()
            self._errors.append(exc)

    def _produce(self) -> None:
        import confluent_kafka as ck

        producer = ck.Producer({"bootstrap.servers": self.bootstrap, "enable.idempotence": True, "acks": "all",
                                "linger.ms": 5, "message.timeout.ms": 60000, "log_level": 3})

        def report(err, msg):
            seq = int(msg.value())
            if err is None:
                self._acked.append(seq)
            else:
                self._failed.append((seq, str(err)))

        interval = 1.0 / self.rate_per_s
        next_at = time.monotonic()
        seq = 0
        while not self._stop.is_set() and seq < self.max_messages:
            producer.produce(self.topic, key=str(seq % 13).encode(), value=str(seq).encode(), on_delivery=report)
            seq += 1
            self._produced = seq
            next_at += interval
            producer.poll(max(0.0, next_at - time.monotonic()))
        remaining = producer.flush(60)
        if remaining:
            self._failed.append((-1, f"{remaining} messages still unflushed after 60 s"))

    def _consume(self) -> None:
        import confluent_kafka as ck

        consumer = ck.Consumer({"bootstrap.servers": self.bootstrap, "group.id": f"{self.topic}-reader",
                                "enable.auto.commit": False, "fetch.wait.max.ms": 100, "log_level": 3})
        consumer.assign([ck.TopicPartition(self.topic, p, ck.OFFSET_BEGINNING) for p in range(self.partitions)])
        try:
            while not self._consumer_stop.is_set():
                for msg in consumer.consume(500, 0.2):
                    if msg.error():
                        continue  # partition EOF and transient errors: the count check decides
                    self._consumed.append((msg.partition(), msg.offset(), int(msg.value())))
        finally:
            consumer.close()

    @property
    def acked_count(self) -> int:
        return len(self._acked)

    def finish(self, timeout: float = 60.0) -> TrafficResult:
        """Stop producing, wait for every acked message to be consumed, return the tally."""
        self._stop.set()
        self._producer_thread.join(timeout)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if {s for _p, _o, s in self._consumed} >= set(self._acked):
                break
            time.sleep(0.1)
        time.sleep(0.3)  # let a duplicate, if any, arrive too
        self._consumer_stop.set()
        self._consumer_thread.join(timeout)
        if self._errors:
            raise self._errors[0]
        return TrafficResult(list(self._acked), list(self._failed), list(self._consumed))
