"""The KIP-848 consumer group records in `__consumer_offsets`: Kafka's own formats.

Kafka's new group coordinator keeps a consumer group as a handful of compacted records,
each keyed by its kind (the key's int16 version says which) and the group (and member):

    key v3  ConsumerGroupMetadata                  group              -> Epoch (the group epoch)
    key v4  ConsumerGroupPartitionMetadata         group              -> Topics (id, name, partitions)
    key v5  ConsumerGroupMemberMetadata            group, member      -> the member's subscription
    key v6  ConsumerGroupTargetAssignmentMetadata  group              -> AssignmentEpoch
    key v7  ConsumerGroupTargetAssignmentMember    group, member      -> the member's target partitions
    key v8  ConsumerGroupCurrentMemberAssignment   group, member      -> epochs, state, assigned and
                                                                         pending-revocation partitions

Keys are non-flexible (int16 version, int16-length strings); values are int16 version 0
followed by a flexible struct (compact strings and arrays, tagged-field sections), as the
schemas in group-coordinator/src/main/resources/common/message/ConsumerGroup*.json say.
A null value is a tombstone. Writing Kafka's formats means a Kafka tool decoding our
offsets topic reads these too, and the replay is the same code path as the live updates
(`ConsumerGroup.apply`): state is what the records say.
"""

from __future__ import annotations

import struct
import uuid
from dataclasses import dataclass, field

from server.coordinator_log import BadRecord

METADATA, PARTITION_METADATA, MEMBER_METADATA, TARGET_METADATA, TARGET_MEMBER, CURRENT_ASSIGNMENT = 3, 4, 5, 6, 7, 8
KEY_VERSIONS = frozenset(range(3, 9))
_WITH_MEMBER = frozenset({MEMBER_METADATA, TARGET_MEMBER, CURRENT_ASSIGNMENT})

Partitions = dict[uuid.UUID, frozenset[int]]


@dataclass(frozen=True, slots=True)
class ConsumerKey:
    kind: int  # the key version, 3-8
    group: str
    member: str | None = None


@dataclass(frozen=True, slots=True)
class ClassicMemberMetadata:
    """A member that speaks the classic protocol (JoinGroup/SyncGroup/Heartbeat) inside a
    consumer group: its session timeout and the protocols of its last JoinGroup (name,
    ConsumerProtocol subscription bytes). Tag 0 of ConsumerGroupMemberMetadataValue."""

    session_timeout_ms: int
    supported_protocols: tuple[tuple[str, bytes], ...]


@dataclass(slots=True)
class MemberMetadataValue:
    instance_id: str | None
    rack_id: str | None
    client_id: str
    client_host: str
    subscribed_topic_names: list[str]
    subscribed_topic_regex: str | None
    rebalance_timeout_ms: int
    server_assignor: str | None
    classic: ClassicMemberMetadata | None = None


@dataclass(slots=True)
class CurrentAssignmentValue:
    member_epoch: int
    previous_member_epoch: int
    state: int
    assigned: Partitions = field(default_factory=dict)
    pending_revocation: Partitions = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class TopicMetadata:
    topic_id: uuid.UUID
    name: str
    partitions: int


class _W:
    def __init__(self, version: int) -> None:
        self.buf = bytearray(struct.pack(">h", version))

    def uvarint(self, n: int) -> "_W":
        while n >= 0x80:
            self.buf.append((n & 0x7F) | 0x80)
            n >>= 7
        self.buf.append(n)
        return self

    def i8(self, n: int) -> "_W":
        self.buf += struct.pack(">b", n)
        return self

    def i32(self, n: int) -> "_W":
        self.buf += struct.pack(">i", n)
        return self

    def string(self, s: str | None) -> "_W":  # non-flexible (keys)
        if s is None:
            self.buf += struct.pack(">h", -1)
        else:
            raw = s.encode()
            self.buf += struct.pack(">h", len(raw)) + raw
        return self

    def cstring(self, s: str | None) -> "_W":  # compact (values)
        if s is None:
            return self.uvarint(0)
        raw = s.encode()
        self.uvarint(len(raw) + 1)
        self.buf += raw
        return self

    def array(self, n: int) -> "_W":
        return self.uvarint(n + 1)

    def uuid(self, u: uuid.UUID) -> "_W":
        self.buf += u.bytes
        return self

    def no_tags(self) -> "_W":
        return self.uvarint(0)

    def partitions(self, parts: Partitions) -> "_W":
        items = [(t, ps) for t, ps in sorted(parts.items(), key=lambda kv: str(kv[0])) if ps]
        self.array(len(items))
        for topic_id, ps in items:
            self.uuid(topic_id).array(len(ps))
            for p in sorted(ps):
                self.i32(p)
            self.no_tags()
        return self


class _R:
    def __init__(self, raw: bytes) -> None:
        self.raw = memoryview(raw)
        self.pos = 0

    def _take(self, n: int) -> memoryview:
        if self.pos + n > len(self.raw):
            raise BadRecord("truncated consumer group record")
        out = self.raw[self.pos:self.pos + n]
        self.pos += n
        return out

    def i8(self) -> int:
        return struct.unpack(">b", self._take(1))[0]

    def i16(self) -> int:
        return struct.unpack(">h", self._take(2))[0]

    def i32(self) -> int:
        return struct.unpack(">i", self._take(4))[0]

    def uvarint(self) -> int:
        shift = out = 0
        while True:
            b = self._take(1)[0]
            out |= (b & 0x7F) << shift
            if not b & 0x80:
                return out
            shift += 7
            if shift > 35:
                raise BadRecord("varint too long")

    def string(self) -> str | None:
        n = self.i16()
        return None if n < 0 else bytes(self._take(n)).decode()

    def cstring(self) -> str | None:
        n = self.uvarint()
        return None if n == 0 else bytes(self._take(n - 1)).decode()

    def array(self) -> int:
        n = self.uvarint()
        return max(n - 1, 0)

    def uuid(self) -> uuid.UUID:
        return uuid.UUID(bytes=bytes(self._take(16)))

    def skip_tags(self) -> None:
        for _ in range(self.uvarint()):
            self.uvarint()
            self._take(self.uvarint())

    def partitions(self) -> Partitions:
        out: Partitions = {}
        for _ in range(self.array()):
            topic_id = self.uuid()
            out[topic_id] = frozenset(self.i32() for _ in range(self.array()))
            self.skip_tags()
        return out


# ---------------------------------------------------------------- keys
def encode_key(key: ConsumerKey) -> bytes:
    w = _W(key.kind).string(key.group)
    if key.kind in _WITH_MEMBER:
        w.string(key.member)
    return bytes(w.buf)


def key_version(raw: bytes) -> int:
    if len(raw) < 2:
        raise BadRecord("record key shorter than its version")
    return struct.unpack(">h", raw[:2])[0]


def decode_key(raw: bytes) -> ConsumerKey:
    r = _R(raw)
    kind = r.i16()
    if kind not in KEY_VERSIONS:
        raise BadRecord(f"not a consumer group key version: {kind}")
    group = r.string()
    member = r.string() if kind in _WITH_MEMBER else None
    if group is None or (kind in _WITH_MEMBER and member is None):
        raise BadRecord("consumer group key with a null group or member")
    return ConsumerKey(kind, group, member)


# ---------------------------------------------------------------- values
def encode_epoch(epoch: int) -> bytes:
    """ConsumerGroupMetadataValue and ConsumerGroupTargetAssignmentMetadataValue (one int32)."""
    return bytes(_W(0).i32(epoch).no_tags().buf)


def decode_epoch(raw: bytes) -> int:
    r = _R(raw)
    r.i16()
    return r.i32()


def encode_partition_metadata(topics: list[TopicMetadata]) -> bytes:
    w = _W(0).array(len(topics))
    for t in sorted(topics, key=lambda t: t.name):
        w.uuid(t.topic_id).cstring(t.name).i32(t.partitions).array(0).no_tags()
    return bytes(w.no_tags().buf)


def decode_partition_metadata(raw: bytes) -> list[TopicMetadata]:
    r = _R(raw)
    r.i16()
    out = []
    for _ in range(r.array()):
        topic_id, name, partitions = r.uuid(), r.cstring() or "", r.i32()
        for _ in range(r.array()):  # PartitionMetadata (racks): not used
            r.i32()
            for _ in range(r.array()):
                r.cstring()
            r.skip_tags()
        r.skip_tags()
        out.append(TopicMetadata(topic_id, name, partitions))
    return out


def encode_member_metadata(v: MemberMetadataValue) -> bytes:
    w = _W(0).cstring(v.instance_id).cstring(v.rack_id).cstring(v.client_id).cstring(v.client_host)
    w.array(len(v.subscribed_topic_names))
    for name in v.subscribed_topic_names:
        w.cstring(name)
    w.cstring(v.subscribed_topic_regex).i32(v.rebalance_timeout_ms).cstring(v.server_assignor)
    if v.classic is None:
        return bytes(w.no_tags().buf)
    # Tagged field 0, ClassicMemberMetadata: SessionTimeoutMs, SupportedProtocols [Name, Metadata].
    c = _W(0)
    del c.buf[:]
    c.i32(v.classic.session_timeout_ms).array(len(v.classic.supported_protocols))
    for name, metadata in v.classic.supported_protocols:
        c.cstring(name).uvarint(len(metadata) + 1)
        c.buf += metadata
        c.no_tags()
    c.no_tags()
    w.uvarint(1).uvarint(0).uvarint(len(c.buf))
    w.buf += c.buf
    return bytes(w.buf)


def decode_member_metadata(raw: bytes) -> MemberMetadataValue:
    r = _R(raw)
    r.i16()
    instance_id, rack_id, client_id, client_host = r.cstring(), r.cstring(), r.cstring() or "", r.cstring() or ""
    names = [r.cstring() or "" for _ in range(r.array())]
    regex, rebalance_timeout, assignor = r.cstring(), r.i32(), r.cstring()
    classic = None
    for _ in range(r.uvarint()):
        tag, size = r.uvarint(), r.uvarint()
        if tag != 0:
            r._take(size)
            continue
        session_timeout = r.i32()
        protocols = []
        for _ in range(r.array()):
            name = r.cstring() or ""
            n = r.uvarint()
            protocols.append((name, bytes(r._take(n - 1)) if n else b""))
            r.skip_tags()
        r.skip_tags()
        classic = ClassicMemberMetadata(session_timeout, tuple(protocols))
    return MemberMetadataValue(instance_id, rack_id, client_id, client_host, names, regex, rebalance_timeout,
                               assignor, classic)


def encode_target_member(parts: Partitions) -> bytes:
    return bytes(_W(0).partitions(parts).no_tags().buf)


def decode_target_member(raw: bytes) -> Partitions:
    r = _R(raw)
    r.i16()
    return r.partitions()


def encode_current_assignment(v: CurrentAssignmentValue) -> bytes:
    w = _W(0).i32(v.member_epoch).i32(v.previous_member_epoch).i8(v.state)
    return bytes(w.partitions(v.assigned).partitions(v.pending_revocation).no_tags().buf)


def decode_current_assignment(raw: bytes) -> CurrentAssignmentValue:
    r = _R(raw)
    r.i16()
    member_epoch, previous, state = r.i32(), r.i32(), r.i8()
    # Kafka 3.7's value had a TargetMemberEpoch and partitions pending assignment in tags;
    # the current schema's fields are these.
    return CurrentAssignmentValue(member_epoch, previous, state, r.partitions(), r.partitions())
