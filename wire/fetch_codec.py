"""Fetch v12 as a replica fetcher writes and reads it, without the generic codec.

Why: a follower sends one Fetch per round trip of every acks=all produce (the next fetch is
what tells the leader that the follower has the batch), so the codec is on the replication
latency path twice per round. The generic codec walks the message schema field by field
and builds a dict per struct; the follower's request is the same bytes every time except
the correlation id and each partition's offsets and epochs, and of the response it needs a
handful of fields. Both are checked against the generic codec in
tests/cluster/test_fetch_codec.py.

- `ReplicaFetchRequest` keeps the constant parts encoded (request header v2 with the client
  id, the fixed top-level fields, each topic name) and packs only the per-partition fields.
- `decode_fetch_response` reads a v12 response into `FetchedPartition`s; `records` is a
  view of the frame (no copy: the follower copies once, into what it appends). Tagged
  fields: a partition's `diverging_epoch` (tag 0) is read, `current_leader` (tag 1) and
  `snapshot_id` (tag 2) and anything unknown are skipped, as the generic decoder keeps
  them but the fetcher does not look at them.
"""

from __future__ import annotations

import struct
from typing import Iterable

from wire.errors import MalformedFrame
from wire.primitives import uvarint_bytes
from wire.registry import ApiKey

VERSION = 12

_HEADER = struct.Struct(">ihhi")  # size, api_key, api_version, correlation_id
_FIXED = struct.Struct(">iiiibii")  # replica_id .. session_epoch
_PARTITION = struct.Struct(">iiqiqib")  # partition .. partition_max_bytes, empty tagged fields
_I16 = struct.Struct(">h")
_PART_HEAD = struct.Struct(">ihqqq")  # partition_index, error_code, high_watermark, lso, log_start
_TOP = struct.Struct(">ihi")  # correlation_id is read apart; throttle_time_ms, error_code, session_id
_DIVERGING = struct.Struct(">iq")
_MALFORMED = (struct.error, IndexError, ValueError)


def _compact_string(value: str) -> bytes:
    data = value.encode()
    return uvarint_bytes(len(data) + 1) + data


class ReplicaFetchRequest:
    """Encodes a follower's Fetch v12 (session-less, no forgotten topics, rack "")."""

    __slots__ = ("_prefix", "_fixed", "_topics")

    def __init__(self, client_id: str, replica_id: int, max_wait_ms: int, min_bytes: int, max_bytes: int) -> None:
        cid = client_id.encode()
        # api_key, api_version, correlation_id are packed per request; then client_id (a
        # nullable int16-length string in every header version) and the header's tags.
        self._prefix = _I16.pack(len(cid)) + cid + b"\x00"
        self._fixed = _FIXED.pack(replica_id, max_wait_ms, min_bytes, max_bytes, 0, 0, -1)
        self._topics: dict[str, bytes] = {}

    def encode(self, correlation_id: int, topics: Iterable[tuple[str, list[tuple]]]) -> bytes:
        """The whole frame (size prefix included). `topics`: (name, [(partition,
        current_leader_epoch, fetch_offset, last_fetched_epoch, log_start_offset,
        partition_max_bytes), ...])."""
        parts = [b"", self._prefix, self._fixed]
        topics = list(topics)
        parts.append(uvarint_bytes(len(topics) + 1))
        names = self._topics
        pack = _PARTITION.pack
        for name, partitions in topics:
            encoded = names.get(name)
            if encoded is None:
                encoded = names[name] = _compact_string(name)
            parts.append(encoded)
            parts.append(uvarint_bytes(len(partitions) + 1))
            for p in partitions:
                parts.append(pack(*p, 0))
            parts.append(b"\x00")  # the topic's tagged fields
        # forgotten_topics_data [], rack_id "", no tagged fields (cluster_id null)
        parts.append(b"\x01\x01\x00")
        body_size = sum(len(p) for p in parts)
        parts[0] = _HEADER.pack(body_size + 8, ApiKey.FETCH, VERSION, correlation_id)
        return b"".join(parts)


class FetchedPartition:
    """One partition of a Fetch response as the fetcher reads it."""

    __slots__ = ("topic", "partition_index", "error_code", "high_watermark", "log_start_offset", "records",
                 "diverging_epoch", "diverging_end_offset")

    def __init__(self, topic: str, partition_index: int, error_code: int, high_watermark: int,
                 log_start_offset: int, records, diverging_epoch: int = -1, diverging_end_offset: int = -1) -> None:
        self.topic = topic
        self.partition_index = partition_index
        self.error_code = error_code
        self.high_watermark = high_watermark
        self.log_start_offset = log_start_offset
        self.records = records
        self.diverging_epoch = diverging_epoch
        self.diverging_end_offset = diverging_end_offset

    def __repr__(self) -> str:
        return (f"<FetchedPartition {self.topic}-{self.partition_index} error {self.error_code} hw "
                f"{self.high_watermark} {len(self.records or b'')} bytes diverging {self.diverging_epoch}>")


def _uvarint(buf, pos: int) -> tuple[int, int]:
    b = buf[pos]
    if b < 0x80:
        return b, pos + 1
    value = 0
    shift = 0
    for i in range(5):
        b = buf[pos + i]
        value |= (b & 0x7F) << shift
        if b < 0x80:
            return value, pos + i + 1
        shift += 7
    raise ValueError("varint longer than 5 bytes")


def _skip_tags(buf, pos: int) -> int:
    count, pos = _uvarint(buf, pos)
    for _ in range(count):
        _tag, pos = _uvarint(buf, pos)
        size, pos = _uvarint(buf, pos)
        pos += size
    return pos


def decode_fetch_response(frame: bytes | bytearray | memoryview) -> tuple[int, list[FetchedPartition]]:
    """(top-level error_code, partitions) of a Fetch v12 response frame (no size prefix,
    correlation id first). MalformedFrame if it does not decode."""
    buf = memoryview(frame)
    try:
        end = len(buf)
        pos = _skip_tags(buf, 4)  # correlation id, response header v1 tags
        _throttle, error_code, _session = _TOP.unpack_from(buf, pos)
        pos += _TOP.size
        out: list[FetchedPartition] = []
        n_topics, pos = _uvarint(buf, pos)
        for _ in range(n_topics - 1):
            size, pos = _uvarint(buf, pos)
            if size == 0:
                raise ValueError("null topic name")
            topic = str(buf[pos:pos + size - 1], "utf-8")
            pos += size - 1
            n_parts, pos = _uvarint(buf, pos)
            for _ in range(n_parts - 1):
                index, code, hw, _lso, log_start = _PART_HEAD.unpack_from(buf, pos)
                pos += _PART_HEAD.size
                n_aborted, pos = _uvarint(buf, pos)
                for _ in range(n_aborted - 1):  # none (0) or n + 1
                    pos = _skip_tags(buf, pos + 16)
                pos += 4  # preferred_read_replica
                size, pos = _uvarint(buf, pos)
                if size == 0:
                    records = None
                else:
                    if pos + size - 1 > end:
                        raise ValueError("records past the end of the frame")
                    records = buf[pos:pos + size - 1]
                    pos += size - 1
                entry = FetchedPartition(topic, index, code, hw, log_start, records)
                count, pos = _uvarint(buf, pos)
                for _ in range(count):
                    tag, pos = _uvarint(buf, pos)
                    size, pos = _uvarint(buf, pos)
                    if tag == 0:  # diverging_epoch
                        entry.diverging_epoch, entry.diverging_end_offset = _DIVERGING.unpack_from(buf, pos)
                    pos += size
                out.append(entry)
            pos = _skip_tags(buf, pos)
        pos = _skip_tags(buf, pos)
    except _MALFORMED as exc:
        raise MalformedFrame(f"cannot decode a Fetch v{VERSION} response: {exc}", api_key=ApiKey.FETCH,
                             api_version=VERSION) from None
    if pos != end:
        raise MalformedFrame(f"{end - pos} trailing bytes after a Fetch v{VERSION} response", api_key=ApiKey.FETCH,
                             api_version=VERSION)
    return error_code, out
