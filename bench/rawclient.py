"""A minimal Kafka client on a blocking socket, for load shapes librdkafka makes awkward.

The scaling bench needs hundreds of connections and a thousand partitions; one
librdkafka instance per connection would mean thousands of threads on two cores. This
client speaks just enough of the protocol (Metadata, CreateTopics, Produce v9, Fetch v12,
ListOffsets) through `wire`, keeps requests pipelined, and carries record batches as bytes
built once. It measures the broker, not a client library; it works against any broker.
"""

from __future__ import annotations

import socket
import struct
import time

from wire.connection import decode_response, encode_request
from wire.records import Record, build_batch

_SIZE = struct.Struct(">i")
PRODUCE_V = 9
FETCH_V = 12
METADATA_V = 12
CREATE_TOPICS_V = 7
LIST_OFFSETS_V = 7


def make_batch(count: int, size: int, timestamp_ms: int | None = None, seq: int = 0) -> bytearray:
    """One uncompressed magic-2 batch of `count` records of `size`-byte values."""
    ts = int(time.time() * 1000) if timestamp_ms is None else timestamp_ms
    value = (b"%016d" % seq).ljust(size, b"x")[:size]
    return build_batch([Record(offset=i, timestamp=ts, key=None, value=value) for i in range(count)])


class RawClient:
    """One connection. `send` queues a request; `recv` returns the next (correlation, body)."""

    def __init__(self, bootstrap: str, timeout_s: float = 30.0) -> None:
        host, port = bootstrap.rsplit(":", 1)
        self.sock = socket.create_connection((host, int(port)), timeout=timeout_s)
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self._corr = 0
        self._pending: dict[int, tuple[int, int]] = {}
        self._buf = bytearray()

    def close(self) -> None:
        try:
            self.sock.close()
        except OSError:
            pass

    def send(self, api_key: int, version: int, body: dict, frame: bytes | None = None) -> int:
        self._corr += 1
        corr = self._corr
        data = frame if frame is not None else encode_request(api_key, version, corr, body, client_id="bench")
        if frame is not None:  # a pre-encoded frame: patch the correlation id in place
            data = bytearray(frame)
            struct.pack_into(">i", data, 8, corr)
        self.sock.sendall(data)
        self._pending[corr] = (api_key, version)
        return corr

    def _read_frame(self) -> bytes:
        while True:
            if len(self._buf) >= 4:
                size = _SIZE.unpack_from(self._buf, 0)[0]
                if len(self._buf) >= 4 + size:
                    frame = bytes(self._buf[4:4 + size])
                    del self._buf[:4 + size]
                    return frame
            chunk = self.sock.recv(1 << 20)
            if not chunk:
                raise ConnectionError("broker closed the connection")
            self._buf += chunk

    def recv(self) -> tuple[int, dict]:
        frame = self._read_frame()
        corr = _SIZE.unpack_from(frame, 0)[0]
        api_key, version = self._pending.pop(corr)
        return decode_response(api_key, version, frame)

    def call(self, api_key: int, version: int, body: dict) -> dict:
        self.send(api_key, version, body)
        return self.recv()[1]

    # -- helpers -------------------------------------------------------------------

    def create_topic(self, name: str, partitions: int, configs: dict[str, str] | None = None) -> int:
        body = {"topics": [{"name": name, "num_partitions": partitions, "replication_factor": 1,
                            "assignments": [],
                            "configs": [{"name": k, "value": v} for k, v in (configs or {}).items()]}],
                "timeout_ms": 30000, "validate_only": False}
        resp = self.call(19, CREATE_TOPICS_V, body)
        return resp["topics"][0]["error_code"]

    def metadata(self, topics: list[str] | None) -> dict:
        body = {"topics": None if topics is None else [{"name": t, "topic_id": None} for t in topics],
                "allow_auto_topic_creation": False, "include_topic_authorized_operations": False}
        return self.call(3, METADATA_V, body)

    def wait_topic(self, name: str, partitions: int, timeout_s: float = 60.0) -> dict:
        """Until Metadata lists every partition with a leader AND the broker answers
        ListOffsets for each: Kafka's Metadata can name a new partition's leader a moment
        before its replica manager has made it one (a Produce then gets NOT_LEADER_OR_FOLLOWER)."""
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            md = self.metadata([name])
            for t in md["topics"]:
                if t["name"] == name and t["error_code"] == 0 and len(t["partitions"]) == partitions and all(
                        p["error_code"] == 0 and p["leader_id"] >= 0 for p in t["partitions"]) \
                        and self.leads_all(name, partitions):
                    return t
            time.sleep(0.1)
        raise TimeoutError(f"topic {name} not ready")

    def leads_all(self, name: str, partitions: int) -> bool:
        """Whether ListOffsets (latest) is answered without error for every partition."""
        resp = self.call(2, LIST_OFFSETS_V, {"replica_id": -1, "isolation_level": 0, "topics": [
            {"name": name, "partitions": [{"partition_index": p, "current_leader_epoch": -1, "timestamp": -1}
                                          for p in range(partitions)]}]})
        return all(p["error_code"] == 0 for t in resp["topics"] for p in t["partitions"])

    def produce_frame(self, topic: str, batches: dict[int, bytes], acks: int = 1) -> bytes:
        """A framed Produce request for {partition: batch bytes}, to resend with `send(frame=)`."""
        body = {"transactional_id": None, "acks": acks, "timeout_ms": 30000,
                "topic_data": [{"name": topic, "partition_data": [{"index": p, "records": bytes(b)}
                                                                  for p, b in batches.items()]}]}
        return encode_request(0, PRODUCE_V, 0, body, client_id="bench")

    def fetch_body(self, topic: str, offsets: dict[int, int], max_wait_ms: int = 500, min_bytes: int = 1,
                   max_bytes: int = 52428800, partition_max_bytes: int = 1048576) -> dict:
        return {"replica_id": -1, "max_wait_ms": max_wait_ms, "min_bytes": min_bytes, "max_bytes": max_bytes,
                "isolation_level": 0, "session_id": 0, "session_epoch": -1,
                "topics": [{"topic": topic, "partitions": [
                    {"partition": p, "current_leader_epoch": -1, "fetch_offset": o, "last_fetched_epoch": -1,
                     "log_start_offset": -1, "partition_max_bytes": partition_max_bytes}
                    for p, o in offsets.items()]}],
                "forgotten_topics_data": [], "rack_id": ""}

    def fetch(self, topic: str, offsets: dict[int, int], **kw) -> dict:
        return self.call(1, FETCH_V, self.fetch_body(topic, offsets, **kw))


def records_size(fetch_response: dict) -> int:
    return sum(len(p["records"] or b"") for t in fetch_response["responses"] for p in t["partitions"])


def next_offsets(fetch_response: dict, offsets: dict[int, int]) -> int:
    """Advance `offsets` past the whole batches in a fetch response; return records seen.
    A partial batch at the end of a partition's data (brokers may cut one) is skipped."""
    from wire.records import HEADER, HEADER_SIZE, LOG_OVERHEAD

    seen = 0
    for t in fetch_response["responses"]:
        for p in t["partitions"]:
            data = p["records"] or b""
            pos, end = 0, len(data)
            while pos + HEADER_SIZE <= end:
                base, length, *_rest, lod, _bt, _mt, _pid, _pe, _bs, count = HEADER.unpack_from(data, pos)
                if pos + length + LOG_OVERHEAD > end:
                    break
                offsets[p["partition_index"]] = base + lod + 1
                seen += count
                pos += length + LOG_OVERHEAD
    return seen
