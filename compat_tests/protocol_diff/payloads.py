"""Opaque payloads inside requests: record batches and the consumer protocol's bytes.

Record timestamps are fixed for the run — an hour before it started, on a whole minute —
so they compare as they are (the wall-clock normalisation only covers the run's own
window); only times a broker stamps itself are normalised. Not older: Kafka's retention
(7 days by default) would delete older records 30 s after start, in the middle of a run.
"""

from __future__ import annotations

import struct
import time

from wire.records import Record, build_batch

BASE_TS = (int(time.time() * 1000) // 60_000) * 60_000 - 3_600_000


def records(count: int, *, first: int = 0, tag: str = "r", producer_id: int = -1, producer_epoch: int = -1,
            base_sequence: int = -1, transactional: bool = False) -> bytes:
    """One batch of `count` records: keys k<i>, values <tag><i>, a header, fixed timestamps."""
    recs = [Record(offset=i, timestamp=BASE_TS + first + i, key=f"k{first + i}".encode(),
                   value=f"{tag}{first + i}".encode(), headers=[("h", f"{i}".encode())])
            for i in range(count)]
    return bytes(build_batch(recs, producer_id=producer_id, producer_epoch=producer_epoch,
                             base_sequence=base_sequence, is_transactional=transactional))


def _str(value: str) -> bytes:
    raw = value.encode()
    return struct.pack(">h", len(raw)) + raw


def subscription(topics: list[str]) -> bytes:
    """ConsumerProtocolSubscription v0: version, topics, user data (null)."""
    return struct.pack(">hi", 0, len(topics)) + b"".join(_str(t) for t in topics) + struct.pack(">i", -1)


def assignment(partitions: dict[str, list[int]]) -> bytes:
    """ConsumerProtocolAssignment v0: version, (topic, partitions)..., user data (null)."""
    out = struct.pack(">hi", 0, len(partitions))
    for topic, parts in partitions.items():
        out += _str(topic) + struct.pack(">i", len(parts)) + b"".join(struct.pack(">i", p) for p in parts)
    return out + struct.pack(">i", -1)
