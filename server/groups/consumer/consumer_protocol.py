"""The ConsumerProtocol bytes classic members put in JoinGroup and get from SyncGroup.

A classic member inside a consumer group (the online upgrade, migration.py) tells the
coordinator its subscription only inside its JoinGroup protocol metadata, and learns its
assignment only from the SyncGroup bytes, so the coordinator must speak the embedded
format itself (Kafka's ConsumerProtocolSubscription / ConsumerProtocolAssignment, v0-3,
non-flexible: int16 version, int32-counted arrays, int16 strings, int32 bytes).
"""

from __future__ import annotations

import struct
from dataclasses import dataclass, field

from server.coordinator_log import BadRecord
from server.groups.records import _Reader

PROTOCOL_TYPE = "consumer"


@dataclass(slots=True)
class Subscription:
    version: int
    topics: list[str]
    owned: dict[str, frozenset[int]] = field(default_factory=dict)
    generation_id: int = -1
    rack_id: str | None = None


def decode_subscription(raw: bytes) -> Subscription:
    """A ConsumerProtocolSubscription; BadRecord when the bytes are not one."""
    r = _Reader(raw)
    version = r.i16()
    if version < 0:
        raise BadRecord(f"subscription version {version}")
    topics = [_string(r) for _ in range(_count(r, raw))]
    r.bytes_()  # user data (the client-side assignor's)
    sub = Subscription(version, topics)
    if version >= 1 and r.pos < len(raw):
        for _ in range(_count(r, raw)):
            topic = _string(r)
            sub.owned[topic] = frozenset(r.i32() for _ in range(_count(r, raw)))
    if version >= 2 and r.pos < len(raw):
        sub.generation_id = r.i32()
    if version >= 3 and r.pos < len(raw):
        sub.rack_id = r.string()
    return sub


def subscription_version(raw: bytes) -> int:
    try:
        return max(0, min(3, struct.unpack_from(">h", raw)[0]))
    except struct.error:
        return 0


def encode_assignment(partitions: dict[str, frozenset[int]], version: int = 0) -> bytes:
    """A ConsumerProtocolAssignment (no user data), in the member's subscription version."""
    out = bytearray(struct.pack(">hi", max(0, min(version, 3)), len(partitions)))
    for topic in sorted(partitions):
        raw = topic.encode()
        ps = sorted(partitions[topic])
        out += struct.pack(">h", len(raw)) + raw + struct.pack(">i", len(ps))
        out += b"".join(struct.pack(">i", p) for p in ps)
    out += struct.pack(">i", -1)
    return bytes(out)


def decode_assignment(raw: bytes) -> dict[str, frozenset[int]]:
    """A ConsumerProtocolAssignment's partitions (empty bytes: nothing assigned)."""
    if not raw:
        return {}
    r = _Reader(raw)
    if r.i16() < 0:
        raise BadRecord("assignment version")
    out: dict[str, frozenset[int]] = {}
    for _ in range(_count(r, raw)):
        topic = _string(r)
        out[topic] = out.get(topic, frozenset()) | frozenset(r.i32() for _ in range(_count(r, raw)))
    return out


def _count(r: _Reader, raw: bytes) -> int:
    n = r.i32()
    if n < 0 or n > len(raw):
        if n == -1:
            return 0
        raise BadRecord(f"array length {n}")
    return n


def _string(r: _Reader) -> str:
    s = r.string()
    if s is None:
        raise BadRecord("null topic name")
    return s
