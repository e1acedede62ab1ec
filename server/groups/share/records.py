"""The `__share_group_state` records, in Kafka's share coordinator format (KIP-932).

Kafka's share coordinator keeps each share partition's state in the compacted
`__share_group_state` as two record types keyed by (group id, topic id, partition), and so
does Trafka, byte for byte as Kafka's schemas lay them out
(share-coordinator/src/main/resources/common/message/ in apache/kafka: the KIP-932
early-access layout, where the key's version says the record type):

- ShareSnapshotKey (key version 0) / ShareSnapshotValue (value version 0, flexible): the
  whole state — SnapshotEpoch (uint16), StateEpoch, LeaderEpoch, StartOffset and the
  StateBatches (FirstOffset, LastOffset, DeliveryState 0 Available / 2 Acknowledged /
  4 Archived, DeliveryCount) covering every in-flight offset from the start offset on;
- ShareUpdateKey (key version 1) / ShareUpdateValue (value version 0, flexible): a change
  written between snapshots — the SnapshotEpoch of the snapshot it applies to, LeaderEpoch,
  StartOffset (-1: unchanged) and the StateBatches that changed.

Why both: a snapshot costs the whole in-flight window, an update only what one
acknowledgement changed; `share.coordinator.snapshot.update.records.per.snapshot` (Kafka's
setting) bounds how many updates follow a snapshot before the next one is written. Each
update Trafka writes holds every change since its snapshot (not only the last one), so the
newest snapshot plus the newest update of its epoch is the state: compaction, which keeps
one record per key and so one update per share partition, loses nothing.

On a single broker every group's configs (GROUP config resources of any group, consumer or
share: server/groups/group_configs.py) are kept here too, one record per group under a key
version of Trafka's own (CONFIG_KEY_VERSION, JSON): Kafka keeps group configs in its
metadata log, which Trafka does not have. The earlier JSON layout of share partition state never shipped in a release,
so it is not read.
"""

from __future__ import annotations

import json
import struct
import uuid
from dataclasses import dataclass, field

from wire.primitives import Reader, read_exact, read_uvarint, uvarint_bytes

from server.coordinator_log import BadRecord

STATE_TOPIC = "__share_group_state"
STATE_TOPIC_CONFIGS = {"cleanup.policy": "compact", "segment.bytes": "104857600"}
SNAPSHOT_KEY_VERSION = 0  # ShareSnapshotKey
UPDATE_KEY_VERSION = 1  # ShareUpdateKey
CONFIG_KEY_VERSION = 32767  # Trafka's own: a share group's configs (no Kafka record type uses it)
VALUE_VERSION = 0  # ShareSnapshotValue and ShareUpdateValue
CONFIG_VALUE_VERSION = 0
NO_START_OFFSET = -1  # ShareUpdateValue.StartOffset: not being updated
SNAPSHOT_EPOCH_MODULO = 1 << 16  # SnapshotEpoch is a uint16

_I16 = struct.Struct(">h")
_KEY_TAIL = struct.Struct(">16si")  # TopicId, Partition
_SNAPSHOT_HEAD = struct.Struct(">Hiiq")  # SnapshotEpoch, StateEpoch, LeaderEpoch, StartOffset
_UPDATE_HEAD = struct.Struct(">Hiq")  # SnapshotEpoch, LeaderEpoch, StartOffset
_BATCH = struct.Struct(">qqbh")  # FirstOffset, LastOffset, DeliveryState, DeliveryCount

StateBatch = tuple[int, int, int, int]  # (first offset, last offset, delivery state, delivery count)


@dataclass(frozen=True, slots=True)
class ShareStateKey:
    """ShareSnapshotKey (`update` False) or ShareUpdateKey (`update` True)."""

    group_id: str
    topic_id: uuid.UUID
    partition: int
    update: bool = False

    @property
    def share_partition(self) -> tuple[str, uuid.UUID, int]:
        return (self.group_id, self.topic_id, self.partition)


@dataclass(slots=True)
class ShareSnapshot:
    """ShareSnapshotValue."""

    snapshot_epoch: int
    state_epoch: int
    start_offset: int
    batches: list[StateBatch] = field(default_factory=list)
    leader_epoch: int = 0


@dataclass(slots=True)
class ShareUpdate:
    """ShareUpdateValue: `start_offset` NO_START_OFFSET when unchanged."""

    snapshot_epoch: int
    start_offset: int
    batches: list[StateBatch] = field(default_factory=list)
    leader_epoch: int = 0


@dataclass(frozen=True, slots=True)
class GroupConfigKey:
    group_id: str


# ---------------------------------------------------------------------- keys
def encode_key(key: ShareStateKey) -> bytes:
    group = key.group_id.encode()
    version = UPDATE_KEY_VERSION if key.update else SNAPSHOT_KEY_VERSION
    return _I16.pack(version) + _I16.pack(len(group)) + group + _KEY_TAIL.pack(key.topic_id.bytes, key.partition)


def encode_config_key(key: GroupConfigKey) -> bytes:
    return _I16.pack(CONFIG_KEY_VERSION) + json.dumps([key.group_id]).encode()


def decode_key(raw: bytes | None) -> ShareStateKey | GroupConfigKey:
    try:
        (version,) = _I16.unpack_from(raw, 0)
        if version == CONFIG_KEY_VERSION:
            (group_id,) = json.loads(bytes(raw[2:]))
            return GroupConfigKey(group_id)
        if version not in (SNAPSHOT_KEY_VERSION, UPDATE_KEY_VERSION):
            raise BadRecord(f"share state key version {version}")
        (length,) = _I16.unpack_from(raw, 2)
        if length < 0 or 4 + length + _KEY_TAIL.size != len(raw):
            raise BadRecord(f"share state key of {len(raw)} bytes with a group id of {length}")
        group_id = bytes(raw[4:4 + length]).decode()
        topic_id, partition = _KEY_TAIL.unpack_from(raw, 4 + length)
        return ShareStateKey(group_id, uuid.UUID(bytes=topic_id), partition, version == UPDATE_KEY_VERSION)
    except (TypeError, ValueError, struct.error) as exc:
        if isinstance(exc, BadRecord):
            raise
        raise BadRecord(f"share state key: {exc}") from exc


# ---------------------------------------------------------------------- values
def _batches_bytes(batches: list[StateBatch]) -> bytes:
    """A flexible-version []StateBatch: compact array length, entries, each with empty tagged fields."""
    return uvarint_bytes(len(batches) + 1) + b"".join(_BATCH.pack(*b) + b"\x00" for b in batches)


def _read_batches(r: Reader) -> list[StateBatch]:
    count = read_uvarint(r) - 1
    if count < 0:
        raise BadRecord("StateBatches is null")
    out = []
    for _ in range(count):
        out.append(_BATCH.unpack(read_exact(r, _BATCH.size)))
        _skip_tagged(r)
    return out


def _skip_tagged(r: Reader) -> None:
    for _ in range(read_uvarint(r)):
        read_uvarint(r)  # tag
        read_exact(r, read_uvarint(r))


def encode_snapshot(snapshot: ShareSnapshot) -> bytes:
    return (_I16.pack(VALUE_VERSION)
            + _SNAPSHOT_HEAD.pack(snapshot.snapshot_epoch % SNAPSHOT_EPOCH_MODULO, snapshot.state_epoch,
                                  snapshot.leader_epoch, snapshot.start_offset)
            + _batches_bytes(snapshot.batches) + b"\x00")


def encode_update(update: ShareUpdate) -> bytes:
    return (_I16.pack(VALUE_VERSION)
            + _UPDATE_HEAD.pack(update.snapshot_epoch % SNAPSHOT_EPOCH_MODULO, update.leader_epoch,
                                update.start_offset)
            + _batches_bytes(update.batches) + b"\x00")


def _value_reader(raw: bytes, what: str) -> Reader:
    (version,) = _I16.unpack_from(raw, 0)
    if version != VALUE_VERSION:
        raise BadRecord(f"{what} version {version}")
    return Reader(memoryview(bytes(raw))[2:])


def decode_snapshot(raw: bytes) -> ShareSnapshot:
    try:
        r = _value_reader(raw, "ShareSnapshotValue")
        epoch, state_epoch, leader_epoch, start = _SNAPSHOT_HEAD.unpack(read_exact(r, _SNAPSHOT_HEAD.size))
        batches = _read_batches(r)
        _skip_tagged(r)
        return ShareSnapshot(epoch, state_epoch, start, batches, leader_epoch)
    except BadRecord:
        raise
    except Exception as exc:  # struct.error, KafkaFormatError: a truncated or garbled value
        raise BadRecord(f"ShareSnapshotValue: {exc}") from exc


def decode_update(raw: bytes) -> ShareUpdate:
    try:
        r = _value_reader(raw, "ShareUpdateValue")
        epoch, leader_epoch, start = _UPDATE_HEAD.unpack(read_exact(r, _UPDATE_HEAD.size))
        batches = _read_batches(r)
        _skip_tagged(r)
        return ShareUpdate(epoch, start, batches, leader_epoch)
    except BadRecord:
        raise
    except Exception as exc:
        raise BadRecord(f"ShareUpdateValue: {exc}") from exc


def encode_configs(configs: dict[str, str]) -> bytes:
    return _I16.pack(CONFIG_VALUE_VERSION) + json.dumps(configs, sort_keys=True).encode()


def decode_configs(raw: bytes) -> dict[str, str]:
    try:
        configs = json.loads(bytes(raw[2:]))
        return {str(k): str(v) for k, v in configs.items()}
    except (TypeError, ValueError, AttributeError) as exc:
        raise BadRecord(f"share group configs: {exc}") from exc


# ---------------------------------------------------------------------- replay
def apply_update(snapshot: ShareSnapshot, update: ShareUpdate) -> ShareSnapshot:
    """The state an update over its snapshot describes (Kafka's share coordinator merges
    the same way): the update's batches replace the snapshot's for their offsets, a new
    start offset drops what lies below it."""
    states: dict[int, tuple[int, int]] = {}
    for batches in (snapshot.batches, update.batches):
        for first, last, state, count in batches:
            for offset in range(first, last + 1):
                states[offset] = (state, count)
    start = snapshot.start_offset if update.start_offset == NO_START_OFFSET else update.start_offset
    return ShareSnapshot(snapshot.snapshot_epoch, snapshot.state_epoch, start,
                         runs({o: s for o, s in states.items() if o >= start}), update.leader_epoch)


def runs(states: dict[int, tuple[int, int]]) -> list[StateBatch]:
    """offset -> (state, count) as StateBatches: runs of consecutive offsets alike."""
    out: list[list[int]] = []
    for offset in sorted(states):
        state, count = states[offset]
        if out and out[-1][1] == offset - 1 and out[-1][2] == state and out[-1][3] == count:
            out[-1][1] = offset
        else:
            out.append([offset, offset, state, count])
    return [tuple(b) for b in out]
