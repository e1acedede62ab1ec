"""Fetch (1): serve stored batches, long-polling until min_bytes arrive or max_wait passes.

Implements v4-17 (topic ids from v13). Stored bytes go out as they are: no record is
decoded. Rules kept here:
- every requested partition is in the answer (full fetch responses must list them all,
  CLIENTS.md §9.7), in request order;
- max_bytes caps the response and partition_max_bytes each partition, except that the
  first batch of the first partition with data is always sent whole (KIP-74) — only
  that one: librdkafka drops a response larger than it asked for;
- consumers read up to the high watermark; OFFSET_OUT_OF_RANGE for offsets outside
  [log start, log end]; fetching at the high watermark returns no records and waits;
- partitions are looked up with `Broker.partition`, which checks the client's
  current_leader_epoch (FENCED_LEADER_EPOCH / UNKNOWN_LEADER_EPOCH, KIP-320);
- last_stable_offset = high watermark (no transactions), preferred_read_replica = -1;
- fetch sessions (KIP-227) are declined: the answer always has session_id 0, which tells
  clients to keep sending full fetches; a request naming a session we never gave gets
  FETCH_SESSION_ID_NOT_FOUND.
The wait is woken by produce (`Broker.wait_for_data`), so a waiting consumer sees a new
message at once instead of at the end of its max_wait.

Zero copy: a partition read of at least REGION_MIN_BYTES is not read into memory. The
handler pins the segment, encodes the response with a 16-byte placeholder in that
`records` field, and splits the encoded frame around the placeholders into an
`EncodedResponse`: bytes pieces and `FileRegion`s that the server sends with
os.sendfile straight from the page cache (PERF.md: copies dominate a fetch's cost; the
codec would otherwise copy the records twice more). Smaller reads are copied as before:
a pread and a copy cost less than the extra syscalls.
"""

from __future__ import annotations

import logging
import os
import struct

import trio

from storage.segment import LogSegment, read_exact
from wire.connection import encode_response
from wire.errors import ErrorCode
from wire.primitives import ZERO_UUID, uvarint_bytes
from wire.registry import ApiKey
from wire.schema import is_flexible

from server.context import RequestContext
from server.errors import KafkaError, error_code_for

API_KEY = ApiKey.FETCH
MAY_BLOCK = True

log = logging.getLogger("trafka.fetch")

_EMPTY = b""
_NONE = ErrorCode.NONE
REGION_MIN_BYTES = 64 * 1024
_MARKER_INDEX = struct.Struct(">I")
_MARKER_SIZE = 16  # 12 random bytes per response + a 4-byte region index
_I32 = struct.Struct(">i")


class FileRegion:
    """`length` bytes at `position` of a pinned segment, to send with os.sendfile.

    The pin keeps the descriptor open through retention and topic deletion; `release`
    drops it (once; later calls do nothing)."""

    __slots__ = ("segment", "position", "length", "_pinned")

    def __init__(self, segment: LogSegment, position: int, length: int) -> None:
        self.segment = segment
        self.position = position
        self.length = length
        self._pinned = True

    @property
    def fd(self) -> int:
        return self.segment.fd

    def __len__(self) -> int:
        return self.length

    def release(self) -> None:
        if self._pinned:
            self._pinned = False
            self.segment.unpin()


class EncodedResponse:
    """A whole response frame (size prefix included) as bytes pieces and FileRegions, in
    order. Whoever holds it must call `release()` once it is sent or dropped."""

    __slots__ = ("parts",)

    def __init__(self, parts: list) -> None:
        self.parts = parts

    def __len__(self) -> int:
        return sum(len(p) for p in self.parts)

    def release(self) -> None:
        for part in self.parts:
            if type(part) is FileRegion:
                part.release()


class _Regions:
    """The regions pinned by one read pass, with the partition entries whose `records`
    hold their placeholders."""

    __slots__ = ("token", "items")

    def __init__(self) -> None:
        self.token = b""  # drawn on first use: most fetches (small, tailing) need none
        self.items: list[tuple[dict, FileRegion]] = []

    def marker(self, i: int) -> bytes:
        if not self.token:
            self.token = os.urandom(_MARKER_SIZE - _MARKER_INDEX.size)
        return self.token + _MARKER_INDEX.pack(i)

    def release(self) -> None:
        for _entry, region in self.items:
            region.release()
        self.items.clear()


def _partition(index: int, code: ErrorCode, hw: int = -1, log_start: int = -1, records=_EMPTY) -> dict:
    return {
        "partition_index": index,
        "error_code": code,
        "high_watermark": hw,
        "last_stable_offset": hw,
        "log_start_offset": log_start,
        "aborted_transactions": None,
        "preferred_read_replica": -1,
        "records": records,
    }


def _read(plog, offset: int, limit: int, zero_copy: bool, upto: int, min_one_batch: bool):
    """(records, size) for one partition: bytes, or a FileRegion when `zero_copy` allows.
    Only batches below `upto` (the high watermark) are read."""
    found = plog.read_pinned(offset, limit, max_offset=upto, min_one_batch=min_one_batch)
    if found is None:
        return _EMPTY, 0
    segment, position, length = found
    if zero_copy and length >= REGION_MIN_BYTES:
        return FileRegion(segment, position, length), length
    try:
        return read_exact(segment.fd, length, position), length
    finally:
        segment.unpin()


def _read_all(ctx: RequestContext, topics: list[tuple[str | None, object, list[dict]]], max_bytes: int,
              regions: _Regions | None = None):
    """One pass over the request: (response topics, bytes of records, any error).

    Limits (KIP-74): each partition reads at most partition_max_bytes and the whole
    response at most max_bytes; only the first partition that has data gets its first
    batch whole when that batch alone is larger. Reads stop at the high watermark."""
    partition_for = ctx.broker.partition
    by_id = ctx.api_version >= 13
    budget = max_bytes
    total = 0
    errors = False
    first_data = True
    out = []
    for name, topic_id, partitions in topics:
        results = []
        for part in partitions:
            index = part["partition"]
            try:
                partition = partition_for(name, index, part.get("current_leader_epoch", -1))
            except KafkaError as exc:
                code = ErrorCode.UNKNOWN_TOPIC_ID if by_id and name is None else exc.code
                results.append(_partition(index, code))
                errors = True
                continue
            hw = partition.high_watermark
            start = partition.log.log_start_offset
            offset = part["fetch_offset"]
            if offset == hw:
                # The common case of a caught-up consumer: nothing to read (a literal, not
                # _partition(): with 1000 partitions per fetch this loop is the cost).
                results.append({"partition_index": index, "error_code": _NONE, "high_watermark": hw,
                                "last_stable_offset": hw, "log_start_offset": start, "aborted_transactions": None,
                                "preferred_read_replica": -1, "records": _EMPTY})
                continue
            if offset < start or offset > partition.log_end_offset:
                results.append(_partition(index, ErrorCode.OFFSET_OUT_OF_RANGE, hw, start))
                errors = True
                continue
            records = _EMPTY
            if budget > 0 and offset < hw:
                limit = min(part["partition_max_bytes"], budget)
                try:
                    records, size = _read(partition.log, offset, limit, regions is not None, hw, first_data)
                except Exception as exc:
                    code = error_code_for(exc)
                    log.warning("fetch %s-%d at %d: %s (%s)", name, index, offset, code.name, exc)
                    results.append(_partition(index, code, hw, start))
                    errors = True
                    continue
                if size:
                    first_data = False
                    budget -= size
                    total += size
            if type(records) is FileRegion:
                result = _partition(index, _NONE, hw, start, regions.marker(len(regions.items)))
                regions.items.append((result, records))
            else:
                result = _partition(index, _NONE, hw, start, records)
            results.append(result)
        entry = {"partitions": results}
        if by_id:
            entry["topic_id"] = topic_id
        else:
            entry["topic"] = name
        out.append(entry)
    return out, total, errors


async def handle(ctx: RequestContext, request: dict) -> dict | EncodedResponse:
    broker = ctx.broker
    if request.get("session_id", 0) != 0:
        return {"error_code": ErrorCode.FETCH_SESSION_ID_NOT_FOUND, "session_id": 0, "responses": []}
    topics: list[tuple[str | None, object, list[dict]]] = []
    for item in request["topics"]:
        if ctx.api_version >= 13:
            topic_id = item.get("topic_id", ZERO_UUID)
            topics.append((broker.topic_name_for_id(topic_id), topic_id, item["partitions"]))
        else:
            topics.append((item["topic"], None, item["partitions"]))
    max_bytes = request.get("max_bytes", 0x7FFFFFFF)
    min_bytes = request.get("min_bytes", 1)
    wait_s = max(request.get("max_wait_ms", 0), 0) / 1000
    deadline = trio.current_time() + wait_s
    waiting_on = None  # built on the first wait: most fetches of a busy consumer do not wait
    regions = _Regions()
    try:
        while True:
            regions.release()  # a pass that led to a wait pinned nothing we still need
            responses, total, errors = _read_all(ctx, topics, max_bytes, regions)
            remaining = deadline - trio.current_time()
            if total >= min_bytes or errors or remaining <= 0 or broker.shutting_down:
                break
            if waiting_on is None:
                waiting_on = [broker.partitions[key] for key in
                              ((name, part["partition"]) for name, _id, parts in topics for part in parts)
                              if key in broker.partitions]
            if not waiting_on:
                break
            await broker.wait_for_data(waiting_on, remaining)
        body = {"throttle_time_ms": 0, "error_code": ErrorCode.NONE, "session_id": 0, "responses": responses}
        if not regions.items:
            return body
        return _encode_zero_copy(ctx, body, regions)
    except BaseException:
        regions.release()
        raise


def _encode_zero_copy(ctx: RequestContext, body: dict, regions: _Regions) -> EncodedResponse:
    """Encode `body` (whose region records are placeholders) and cut the frame around them.

    The codec writes each placeholder as <length prefix of 16><16 marker bytes>; that
    span is replaced by the prefix of the region's real length and the region. If a
    placeholder is not found where expected (a codec that writes records differently),
    the regions are read into memory and the body encoded the ordinary way.
    """
    frame = encode_response(API_KEY, ctx.api_version, ctx.correlation_id, body)
    compact = is_flexible(API_KEY, "response", ctx.api_version)
    placeholder_prefix = _length_prefix(_MARKER_SIZE, compact)
    parts: list = []
    at = 0
    for i, (_entry, region) in enumerate(regions.items):
        j = frame.find(regions.marker(i), at)
        k = j - len(placeholder_prefix)
        if j < 0 or frame[k:j] != placeholder_prefix:
            return _encode_copied(ctx, body, regions)
        parts.append(frame[at:k])
        parts.append(_length_prefix(region.length, compact))
        parts.append(region)
        at = j + _MARKER_SIZE
    parts.append(frame[at:])
    size = sum(len(p) for p in parts) - 4
    if size > 0x7FFFFFFF:  # pragma: no cover - max_bytes bounds responses far below this
        return _encode_copied(ctx, body, regions)
    head = bytearray(parts[0])
    _I32.pack_into(head, 0, size)
    parts[0] = bytes(head)
    regions.items.clear()  # the EncodedResponse owns the pins now
    return EncodedResponse(parts)


def _encode_copied(ctx: RequestContext, body: dict, regions: _Regions) -> dict:
    log.warning("fetch: records placeholder not found in the encoded response; sending copies")
    for entry, region in regions.items:
        entry["records"] = read_exact(region.fd, region.length, region.position)
    regions.release()
    return body


def _length_prefix(n: int, compact: bool) -> bytes:
    return uvarint_bytes(n + 1) if compact else _I32.pack(n)
