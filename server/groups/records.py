"""What the group coordinator writes to `__consumer_offsets`: Kafka's own record formats.

The keys and values are the ones Apache Kafka's GroupMetadataManager writes, so a tool
that decodes a Kafka offsets topic (kafka-console-consumer with the offsets formatter,
kcat piped through a decoder) reads ours too. Each is a big-endian struct that starts
with an int16 version; strings are int16 length + UTF-8 (-1: null), bytes int32 length.

    OffsetCommitKey    v1  group string, topic string, partition int32
    OffsetCommitValue  v3  offset int64, leader_epoch int32, metadata string,
                           commit_timestamp int64
                       v1  offset int64, metadata string, commit_timestamp int64,
                           expire_timestamp int64 (a commit that set its own retention)
    GroupMetadataKey   v2  group string
    GroupMetadataValue v3  protocol_type string, generation int32, protocol string?,
                           leader string?, current_state_timestamp int64,
                           members [member_id string, group_instance_id string?,
                                    client_id string, client_host string,
                                    rebalance_timeout int32, session_timeout int32,
                                    subscription bytes, assignment bytes]

A record with a null value is a tombstone: the offset was deleted or expired, or the
group was deleted. The topic is compacted, so the latest record per key is the state.
We write the versions above and read every non-flexible version Kafka ever wrote
(offset values v0-3, group values v0-3); key version 0 and 1 are the same layout.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass, field

from server.coordinator_log import BadRecord

_I16 = struct.Struct(">h")
_I32 = struct.Struct(">i")
_I64 = struct.Struct(">q")

OFFSET_KEY_VERSION = 1
GROUP_KEY_VERSION = 2
OFFSET_VALUE_VERSION = 3
GROUP_VALUE_VERSION = 3




@dataclass(frozen=True, slots=True)
class OffsetKey:
    group: str
    topic: str
    partition: int


@dataclass(frozen=True, slots=True)
class GroupKey:
    group: str


@dataclass(slots=True)
class OffsetValue:
    offset: int
    leader_epoch: int = -1
    metadata: str = ""
    commit_timestamp: int = -1
    # Only v1 values carry it; kept so old records read back as they were written.
    expire_timestamp: int = -1


@dataclass(slots=True)
class MemberValue:
    member_id: str
    group_instance_id: str | None
    client_id: str
    client_host: str
    rebalance_timeout: int
    session_timeout: int
    subscription: bytes
    assignment: bytes


@dataclass(slots=True)
class GroupValue:
    protocol_type: str
    generation: int
    protocol: str | None
    leader: str | None
    current_state_timestamp: int = -1
    members: list[MemberValue] = field(default_factory=list)


# ---------------------------------------------------------------- writing
class _Writer:
    __slots__ = ("buf",)

    def __init__(self) -> None:
        self.buf = bytearray()

    def i16(self, v: int) -> "_Writer":
        self.buf += _I16.pack(v)
        return self

    def i32(self, v: int) -> "_Writer":
        self.buf += _I32.pack(v)
        return self

    def i64(self, v: int) -> "_Writer":
        self.buf += _I64.pack(v)
        return self

    def string(self, v: str | None) -> "_Writer":
        if v is None:
            return self.i16(-1)
        raw = v.encode("utf-8")
        if len(raw) > 0x7FFF:
            raise ValueError(f"string of {len(raw)} bytes does not fit an int16 length")
        self.buf += _I16.pack(len(raw))
        self.buf += raw
        return self

    def bytes_(self, v: bytes | None) -> "_Writer":
        if v is None:
            return self.i32(-1)
        self.buf += _I32.pack(len(v))
        self.buf += v
        return self


def encode_offset_key(key: OffsetKey) -> bytes:
    return bytes(_Writer().i16(OFFSET_KEY_VERSION).string(key.group).string(key.topic).i32(key.partition).buf)


def encode_group_key(key: GroupKey) -> bytes:
    return bytes(_Writer().i16(GROUP_KEY_VERSION).string(key.group).buf)


def encode_offset_value(value: OffsetValue) -> bytes:
    """v3, or v1 when the commit set an expire timestamp (Kafka's offsetCommitValueVersion:
    only v1 has the field, and it has no leader epoch)."""
    if value.expire_timestamp >= 0:
        w = _Writer().i16(1).i64(value.offset).string(value.metadata or "").i64(value.commit_timestamp)
        return bytes(w.i64(value.expire_timestamp).buf)
    w = _Writer().i16(OFFSET_VALUE_VERSION).i64(value.offset).i32(value.leader_epoch)
    return bytes(w.string(value.metadata or "").i64(value.commit_timestamp).buf)


def encode_group_value(value: GroupValue) -> bytes:
    w = _Writer().i16(GROUP_VALUE_VERSION).string(value.protocol_type or "").i32(value.generation)
    w.string(value.protocol).string(value.leader).i64(value.current_state_timestamp)
    w.i32(len(value.members))
    for m in value.members:
        w.string(m.member_id).string(m.group_instance_id).string(m.client_id).string(m.client_host)
        w.i32(m.rebalance_timeout).i32(m.session_timeout).bytes_(m.subscription).bytes_(m.assignment)
    return bytes(w.buf)


# ---------------------------------------------------------------- reading
class _Reader:
    __slots__ = ("buf", "pos")

    def __init__(self, buf: bytes) -> None:
        self.buf = buf
        self.pos = 0

    def _take(self, s: struct.Struct) -> int:
        if self.pos + s.size > len(self.buf):
            raise BadRecord(f"truncated at byte {self.pos} of {len(self.buf)}")
        (v,) = s.unpack_from(self.buf, self.pos)
        self.pos += s.size
        return v

    def i16(self) -> int:
        return self._take(_I16)

    def i32(self) -> int:
        return self._take(_I32)

    def i64(self) -> int:
        return self._take(_I64)

    def _raw(self, n: int) -> bytes:
        if n < 0 or self.pos + n > len(self.buf):
            raise BadRecord(f"length {n} at byte {self.pos} overruns {len(self.buf)} bytes")
        out = bytes(self.buf[self.pos:self.pos + n])
        self.pos += n
        return out

    def string(self) -> str | None:
        n = self.i16()
        if n < 0:
            return None
        try:
            return self._raw(n).decode("utf-8")
        except UnicodeDecodeError as exc:
            raise BadRecord(f"string is not UTF-8: {exc}") from None

    def bytes_(self) -> bytes | None:
        n = self.i32()
        return None if n < 0 else self._raw(n)


def decode_key(raw: bytes) -> OffsetKey | GroupKey:
    r = _Reader(raw)
    version = r.i16()
    if version in (0, 1):
        group, topic, partition = r.string(), r.string(), r.i32()
        if group is None or topic is None:
            raise BadRecord("offset key with a null group or topic")
        return OffsetKey(group, topic, partition)
    if version == 2:
        group = r.string()
        if group is None:
            raise BadRecord("group key with a null group")
        return GroupKey(group)
    raise BadRecord(f"unknown key version {version}")


def decode_offset_value(raw: bytes) -> OffsetValue:
    r = _Reader(raw)
    version = r.i16()
    if version == 0:
        return OffsetValue(r.i64(), -1, r.string() or "", r.i64())
    if version == 1:
        offset, metadata, commit_ts, expire_ts = r.i64(), r.string() or "", r.i64(), r.i64()
        return OffsetValue(offset, -1, metadata, commit_ts, expire_ts)
    if version == 2:
        return OffsetValue(r.i64(), -1, r.string() or "", r.i64())
    if version == 3:
        return OffsetValue(r.i64(), r.i32(), r.string() or "", r.i64())
    raise BadRecord(f"unknown offset value version {version}")


def decode_group_value(raw: bytes) -> GroupValue:
    r = _Reader(raw)
    version = r.i16()
    if not 0 <= version <= 3:
        raise BadRecord(f"unknown group value version {version}")
    protocol_type = r.string() or ""
    generation = r.i32()
    protocol = r.string()
    leader = r.string()
    state_ts = r.i64() if version >= 2 else -1
    count = r.i32()
    members = []
    for _ in range(max(count, 0)):
        member_id = r.string() or ""
        instance_id = r.string() if version >= 3 else None
        client_id = r.string() or ""
        client_host = r.string() or ""
        rebalance_timeout = r.i32() if version >= 1 else -1
        session_timeout = r.i32()
        if version == 0:
            rebalance_timeout = session_timeout
        subscription = r.bytes_() or b""
        assignment = r.bytes_() or b""
        members.append(MemberValue(member_id, instance_id, client_id, client_host, rebalance_timeout,
                                   session_timeout, subscription, assignment))
    return GroupValue(protocol_type, generation, protocol, leader, state_ts, members)


def subscribed_topics(metadata: bytes) -> set[str] | None:
    """Topics in a ConsumerProtocolSubscription (any version: they all start with the
    int16 version and the topic array), or None when the bytes are not one."""
    try:
        r = _Reader(metadata)
        version = r.i16()
        if version < 0:
            return None
        count = r.i32()
        if count < 0 or count > len(metadata):
            return None
        topics = set()
        for _ in range(count):
            topic = r.string()
            if topic is None:
                return None
            topics.add(topic)
        return topics
    except BadRecord:
        return None


def assigned_topics(assignment: bytes) -> set[str] | None:
    """Topics in a ConsumerProtocolAssignment: int16 version, [topic string, [int32]]."""
    if not assignment:
        return set()
    try:
        r = _Reader(assignment)
        if r.i16() < 0:
            return None
        count = r.i32()
        if count < 0 or count > len(assignment):
            return None
        topics = set()
        for _ in range(count):
            topic = r.string()
            if topic is None:
                return None
            topics.add(topic)
            n = r.i32()
            if n < 0 or n * 4 > len(assignment):
                return None
            r.pos += 4 * n
        return topics
    except BadRecord:
        return None
