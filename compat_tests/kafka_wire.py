"""The few raw Kafka protocol pieces the suite needs without any client library.

Used for broker readiness (an ApiVersions round trip proves the broker is really serving
Kafka, not just accepting TCP), for the raw handshake and long-poll scenarios, and by the
fault-injecting proxy. Deliberately independent of `wire/` (the code under test): a bug
there must not be able to hide itself in the suite that checks it.
"""

from __future__ import annotations

import io
import socket
import struct
import time
from dataclasses import dataclass

API_PRODUCE = 0
API_FETCH = 1
API_LIST_OFFSETS = 2
API_METADATA = 3
API_FIND_COORDINATOR = 10
API_CREATE_TOPICS = 19
API_API_VERSIONS = 18

UNSUPPORTED_VERSION = 35

# First flexible (KIP-482) request version per API key, for the keys the proxy inspects.
FLEXIBLE_FROM = {API_PRODUCE: 9, API_FETCH: 12, API_METADATA: 9, API_API_VERSIONS: 3}


class WireError(Exception):
    """The peer sent bytes that do not parse as the Kafka protocol."""


# --------------------------------------------------------------------------- primitives


def varint_unsigned(value: int) -> bytes:
    out = bytearray()
    while True:
        byte = value & 0x7F
        value >>= 7
        if value:
            out.append(byte | 0x80)
        else:
            out.append(byte)
            return bytes(out)


class Reader:
    """Cursor over a response or request body."""

    def __init__(self, data: bytes, pos: int = 0) -> None:
        self.data = data
        self.pos = pos

    def take(self, n: int) -> bytes:
        if n < 0 or self.pos + n > len(self.data):
            raise WireError(f"read of {n} bytes at {self.pos} past end {len(self.data)}")
        chunk = self.data[self.pos : self.pos + n]
        self.pos += n
        return chunk

    def int8(self) -> int:
        return struct.unpack(">b", self.take(1))[0]

    def int16(self) -> int:
        return struct.unpack(">h", self.take(2))[0]

    def int32(self) -> int:
        return struct.unpack(">i", self.take(4))[0]

    def int64(self) -> int:
        return struct.unpack(">q", self.take(8))[0]

    def uvarint(self) -> int:
        shift = 0
        value = 0
        while True:
            byte = self.take(1)[0]
            value |= (byte & 0x7F) << shift
            if not byte & 0x80:
                return value
            shift += 7
            if shift > 63:
                raise WireError("varint too long")

    def string(self, flexible: bool) -> str | None:
        n = self.uvarint() - 1 if flexible else self.int16()
        return None if n < 0 else self.take(n).decode()

    def bytes_(self, flexible: bool) -> bytes | None:
        n = self.uvarint() - 1 if flexible else self.int32()
        return None if n < 0 else self.take(n)

    def array_len(self, flexible: bool) -> int:
        return self.uvarint() - 1 if flexible else self.int32()

    def skip_tags(self) -> None:
        for _ in range(self.uvarint()):
            self.uvarint()  # tag
            self.take(self.uvarint())

    @property
    def remaining(self) -> int:
        return len(self.data) - self.pos


def string(value: str | None, flexible: bool = False) -> bytes:
    if value is None:
        return varint_unsigned(0) if flexible else struct.pack(">h", -1)
    raw = value.encode()
    return (varint_unsigned(len(raw) + 1) if flexible else struct.pack(">h", len(raw))) + raw


def request_header(api_key: int, api_version: int, correlation_id: int, client_id: str | None,
                   flexible: bool) -> bytes:
    """Request header v1 (client_id is never compact), plus the empty tag buffer of v2."""
    head = struct.pack(">hhi", api_key, api_version, correlation_id) + string(client_id)
    return head + (b"\x00" if flexible else b"")


def frame(payload: bytes) -> bytes:
    return struct.pack(">i", len(payload)) + payload


def recv_exact(sock: socket.socket, n: int) -> bytes:
    buf = bytearray()
    while len(buf) < n:
        chunk = sock.recv(n - len(buf))
        if not chunk:
            raise ConnectionError(f"connection closed after {len(buf)} of {n} bytes")
        buf += chunk
    return bytes(buf)


def read_frame(sock: socket.socket) -> bytes:
    (size,) = struct.unpack(">i", recv_exact(sock, 4))
    if size < 0 or size > 256 * 1024 * 1024:
        raise WireError(f"implausible frame size {size}")
    return recv_exact(sock, size)


def request_api(payload: bytes) -> tuple[int, int, int]:
    """(api_key, api_version, correlation_id) of a request frame payload."""
    return struct.unpack(">hhi", payload[:8])


# --------------------------------------------------------------------------- ApiVersions


@dataclass
class ApiVersionsResult:
    error_code: int
    versions: dict[int, tuple[int, int]]
    throttle_time_ms: int | None
    correlation_id: int
    raw_body: bytes


def api_versions_request(version: int = 0, correlation_id: int = 1,
                         client_id: str = "trafka-compat") -> bytes:
    flexible = version >= 3
    body = b""
    if flexible:
        # client_software_name, client_software_version (compact strings) + tags (KIP-511)
        body = string("trafka-compat", True) + string("0.1", True) + b"\x00"
    return frame(request_header(API_API_VERSIONS, version, correlation_id, client_id, flexible) + body)


def parse_api_versions(payload: bytes, version: int) -> ApiVersionsResult:
    """Parse an ApiVersions response payload (header v0 at every version, KIP-511).

    On UNSUPPORTED_VERSION a broker answers with a v0 body whatever was asked, so the body
    is parsed as v0 in that case.
    """
    r = Reader(payload)
    correlation_id = r.int32()
    body_start = r.pos
    error_code = r.int16()
    flexible = version >= 3 and error_code != UNSUPPORTED_VERSION
    versions: dict[int, tuple[int, int]] = {}
    for _ in range(r.array_len(flexible)):
        key, lo, hi = r.int16(), r.int16(), r.int16()
        versions[key] = (lo, hi)
        if flexible:
            r.skip_tags()
    throttle = None
    if version >= 1 and error_code != UNSUPPORTED_VERSION:
        throttle = r.int32()
    if flexible:
        r.skip_tags()
    return ApiVersionsResult(error_code, versions, throttle, correlation_id, payload[body_start:])


def api_versions(host: str, port: int, version: int = 0, timeout: float = 5.0) -> ApiVersionsResult:
    """One ApiVersions round trip on a fresh connection."""
    with socket.create_connection((host, port), timeout=timeout) as sock:
        sock.settimeout(timeout)
        sock.sendall(api_versions_request(version, correlation_id=7))
        payload = read_frame(sock)
    result = parse_api_versions(payload, version)
    if result.correlation_id != 7:
        raise WireError(f"correlation id {result.correlation_id} != 7")
    return result


def wait_until_serving(host: str, port: int, deadline: float, alive=lambda: True) -> ApiVersionsResult:
    """Poll until an ApiVersions v0 round trip succeeds, `alive()` turns false, or the deadline."""
    last: Exception | None = None
    while time.monotonic() < deadline:
        if not alive():
            raise ConnectionError("process exited before serving")
        try:
            return api_versions(host, port, 0, timeout=2.0)
        except (OSError, WireError, struct.error) as exc:
            last = exc
            time.sleep(0.05)
    raise TimeoutError(f"no ApiVersions answer from {host}:{port}: {last!r}")


# --------------------------------------------------------------------------- Fetch (raw long-poll)


def fetch_request_v4(topic: str, partition: int, offset: int, max_wait_ms: int,
                     min_bytes: int = 1, correlation_id: int = 11) -> bytes:
    """Fetch v4: non-flexible, read_uncommitted; every broker in scope serves it."""
    body = struct.pack(">iiiib", -1, max_wait_ms, min_bytes, 1 << 20, 0)
    body += struct.pack(">i", 1) + string(topic)
    body += struct.pack(">i", 1) + struct.pack(">iqi", partition, offset, 1 << 20)
    return frame(request_header(API_FETCH, 4, correlation_id, "trafka-compat", False) + body)


@dataclass
class FetchPartitionV4:
    error_code: int
    high_watermark: int
    records: bytes


def parse_fetch_v4(payload: bytes) -> dict[tuple[str, int], FetchPartitionV4]:
    r = Reader(payload)
    r.int32()  # correlation id
    r.int32()  # throttle
    out = {}
    for _ in range(r.int32()):
        topic = r.string(False)
        for _ in range(r.int32()):
            index, err, hwm = r.int32(), r.int16(), r.int64()
            r.int64()  # last_stable_offset
            aborted = r.int32()
            for _ in range(max(aborted, 0)):
                r.int64(), r.int64()
            records = r.bytes_(False) or b""
            out[(topic, index)] = FetchPartitionV4(err, hwm, records)
    return out


def wait_partition_served(host: str, port: int, topic: str, partition: int,
                          timeout: float = 15.0) -> None:
    """Poll with a zero-wait Fetch v4 until the broker serves the partition (error 0).

    Metadata can name a leader before that leader serves: a KRaft broker publishes the new
    metadata image to its cache before its replica manager applies the topic delta, and a
    Fetch in between is answered NOT_LEADER_OR_FOLLOWER (6). Clients retry on that; a test
    that times a raw Fetch has to wait for it first."""
    deadline = time.monotonic() + timeout
    last = None
    while True:
        with socket.create_connection((host, port), timeout=5.0) as sock:
            sock.sendall(fetch_request_v4(topic, partition, 0, max_wait_ms=0))
            last = parse_fetch_v4(read_frame(sock))[(topic, partition)].error_code
        if last == 0:
            return
        if time.monotonic() > deadline:
            raise TimeoutError(f"{topic}-{partition} not served by {host}:{port} after {timeout}s: error {last}")
        time.sleep(0.1)


def batch_offsets(records: bytes) -> list[tuple[int, int]]:
    """(base_offset, last_offset) of each whole record batch in a records blob."""
    out = []
    stream = io.BytesIO(records)
    while True:
        head = stream.read(12)
        if len(head) < 12:
            return out
        base, length = struct.unpack(">qi", head)
        body = stream.read(length)
        if len(body) < length:
            return out
        last_delta = struct.unpack(">i", body[11:15])[0]
        out.append((base, base + last_delta))


# --------------------------------------------------------------------------- cluster views


@dataclass
class PartitionState:
    leader: int
    replicas: list[int]
    isr: list[int]
    error_code: int


@dataclass
class ClusterView:
    """What one broker says about the cluster (Metadata v1): live brokers, the controller,
    and each partition's leader, replicas (assignment order) and ISR."""

    brokers: dict[int, tuple[str, int]]
    controller_id: int
    topics: dict[str, dict[int, PartitionState]]
    topic_errors: dict[str, int]


def _round_trip(host: str, port: int, request: bytes, timeout: float) -> Reader:
    with socket.create_connection((host, port), timeout=timeout) as sock:
        sock.settimeout(timeout)
        sock.sendall(request)
        r = Reader(read_frame(sock))
    r.int32()  # correlation id
    return r


def metadata_v1(host: str, port: int, topics: list[str] | None = None,
                timeout: float = 5.0) -> ClusterView:
    """Metadata v1 (the first with controller_id; non-flexible): `topics=None` asks for all.
    v1 has no allow_auto_topic_creation, so ask only for topics that exist."""
    body = struct.pack(">i", -1) if topics is None else (
        struct.pack(">i", len(topics)) + b"".join(string(t) for t in topics))
    r = _round_trip(host, port, frame(request_header(API_METADATA, 1, 21, "trafka-compat", False)
                                      + body), timeout)
    brokers = {}
    for _ in range(r.int32()):
        node, host_, port_ = r.int32(), r.string(False), r.int32()
        r.string(False)  # rack
        brokers[node] = (host_, port_)
    controller = r.int32()
    out: dict[str, dict[int, PartitionState]] = {}
    errors: dict[str, int] = {}
    for _ in range(r.int32()):
        err, name = r.int16(), r.string(False)
        r.int8()  # is_internal
        errors[name] = err
        parts = out.setdefault(name, {})
        for _ in range(r.int32()):
            perr, index, leader = r.int16(), r.int32(), r.int32()
            replicas = [r.int32() for _ in range(r.int32())]
            isr = [r.int32() for _ in range(r.int32())]
            parts[index] = PartitionState(leader, replicas, isr, perr)
    return ClusterView(brokers, controller, out, errors)


def find_coordinator_v1(host: str, port: int, key: str, key_type: int = 0,
                        timeout: float = 5.0) -> tuple[int, int]:
    """FindCoordinator v1 for a group (key_type 0): (error_code, coordinator node id)."""
    body = string(key) + struct.pack(">b", key_type)
    r = _round_trip(host, port, frame(request_header(API_FIND_COORDINATOR, 1, 22, "trafka-compat",
                                                     False) + body), timeout)
    r.int32()  # throttle
    err = r.int16()
    r.string(False)  # error message
    return err, r.int32()


def create_topic_v2(host: str, port: int, name: str, partitions: int, replication_factor: int,
                    configs: dict[str, str] | None = None, timeout_ms: int = 20000,
                    assignment: dict[int, list[int]] | None = None) -> int:
    """CreateTopics v2 (the oldest Kafka 3.9 serves) for one topic: its error code. The
    broker places the replicas unless `assignment` (partition -> replicas) names them (then
    partitions and replication factor are sent as -1, as Kafka requires)."""
    configs = configs or {}
    if assignment:
        partitions, replication_factor = -1, -1
    body = struct.pack(">i", 1) + string(name) + struct.pack(">ih", partitions, replication_factor)
    body += struct.pack(">i", len(assignment or {}))
    for index, replicas in sorted((assignment or {}).items()):
        body += struct.pack(">ii", index, len(replicas)) + b"".join(struct.pack(">i", r) for r in replicas)
    body += struct.pack(">i", len(configs)) + b"".join(string(k) + string(v) for k, v in configs.items())
    body += struct.pack(">ib", timeout_ms, 0)  # validate_only false
    r = _round_trip(host, port, frame(request_header(API_CREATE_TOPICS, 2, 23, "trafka-compat",
                                                     False) + body), timeout_ms / 1000 + 10)
    r.int32()  # throttle
    r.int32()  # one topic
    r.string(False)
    return r.int16()
