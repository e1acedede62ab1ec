"""Fetch (1): serve stored batches, long-polling until min_bytes arrive or max_wait passes.

Implements v4-17 (topic ids from v13). Stored bytes go out as they are: no record is
decoded. Rules kept here:
- every requested partition is in the answer (full fetch responses must list them all,
  CLIENTS.md §9.7), in request order;
- max_bytes caps the response and partition_max_bytes each partition, except that the
  first batch of the first partition with data is always sent whole (KIP-74);
- OFFSET_OUT_OF_RANGE for offsets outside [log start, log end]; fetching at the log end
  returns no records and waits;
- last_stable_offset = high watermark (no transactions), preferred_read_replica = -1,
  leader epoch 0 (a current_leader_epoch above 0 is UNKNOWN_LEADER_EPOCH; -1 and 0 pass);
- fetch sessions (KIP-227) are declined: the answer always has session_id 0, which tells
  clients to keep sending full fetches; a request naming a session we never gave gets
  FETCH_SESSION_ID_NOT_FOUND.
The wait is woken by produce (`Broker.wait_for_data`), so a waiting consumer sees a new
message at once instead of at the end of its max_wait.
"""

from __future__ import annotations

import logging

import trio

from wire.errors import ErrorCode
from wire.primitives import ZERO_UUID
from wire.registry import ApiKey

from server.context import RequestContext
from server.errors import error_code_for

API_KEY = ApiKey.FETCH
MAY_BLOCK = True

log = logging.getLogger("trafka.fetch")

_EMPTY = b""


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


def _read_all(ctx: RequestContext, topics: list[tuple[str | None, object, list[dict]]], max_bytes: int):
    """One pass over the request: (response topics, bytes of records, any error)."""
    broker = ctx.broker
    budget = max_bytes
    total = 0
    errors = False
    out = []
    for name, topic_id, partitions in topics:
        results = []
        meta = broker.topics.get(name) if name is not None else None
        for part in partitions:
            index = part["partition"]
            if meta is None or not 0 <= index < meta.partitions:
                code = ErrorCode.UNKNOWN_TOPIC_ID if ctx.api_version >= 13 and name is None else ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
                results.append(_partition(index, code))
                errors = True
                continue
            if part.get("current_leader_epoch", -1) > 0:
                results.append(_partition(index, ErrorCode.UNKNOWN_LEADER_EPOCH))
                errors = True
                continue
            plog = broker.logs.log(name, index)
            hw = plog.high_watermark
            start = plog.log_start_offset
            offset = part["fetch_offset"]
            if offset < start or offset > hw:
                results.append(_partition(index, ErrorCode.OFFSET_OUT_OF_RANGE, hw, start))
                errors = True
                continue
            records = _EMPTY
            if offset < hw and budget > 0:
                limit = min(part["partition_max_bytes"], budget)
                try:
                    records = plog.read(offset, limit)
                except Exception as exc:
                    code = error_code_for(exc)
                    log.warning("fetch %s-%d at %d: %s (%s)", name, index, offset, code.name, exc)
                    results.append(_partition(index, code, hw, start))
                    errors = True
                    continue
                # The first batch is served whole even past the limits (KIP-74); after
                # that, the response budget stops further reads.
                budget -= max(len(records), 1)
                total += len(records)
            results.append(_partition(index, ErrorCode.NONE, hw, start, records))
        entry = {"partitions": results}
        if ctx.api_version >= 13:
            entry["topic_id"] = topic_id
        else:
            entry["topic"] = name
        out.append(entry)
    return out, total, errors


async def handle(ctx: RequestContext, request: dict) -> dict:
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
    tps = [(name, part["partition"]) for name, _id, parts in topics if name is not None for part in parts]
    while True:
        responses, total, errors = _read_all(ctx, topics, max_bytes)
        remaining = deadline - trio.current_time()
        if total >= min_bytes or errors or remaining <= 0 or not tps or broker.shutting_down:
            break
        await broker.wait_for_data(tps, remaining)
    return {"throttle_time_ms": 0, "error_code": ErrorCode.NONE, "session_id": 0, "responses": responses}
