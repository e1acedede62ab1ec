"""The `__share_group_state` records: one share partition's state, written before an
acknowledgement is answered.

Kafka's share coordinator keeps ShareSnapshot / ShareUpdate records keyed by (group id,
topic id, partition) in the compacted `__share_group_state`. Trafka writes only snapshots
(each a whole share partition's state, so compaction keeps exactly the newest one per key
and replay needs no merging): the start offset, the end offset, the state epoch, and the
unsettled records as (first offset, last offset, state, delivery count) batches. A share
group's configs (share.auto.offset.reset, share.isolation.level; IncrementalAlterConfigs) are kept here
too, under a key of their own version. The layout is Trafka's own — a version, then
JSON — since no client reads this topic.
"""

from __future__ import annotations

import json
import struct
import uuid
from dataclasses import dataclass

from server.coordinator_log import BadRecord

STATE_TOPIC = "__share_group_state"
STATE_TOPIC_CONFIGS = {"cleanup.policy": "compact", "segment.bytes": "104857600"}
KEY_VERSION = 0
CONFIG_KEY_VERSION = 1  # a share group's configs (Kafka keeps them in the metadata log)
VALUE_VERSION = 0
_VERSION = struct.Struct(">h")


@dataclass(frozen=True, slots=True)
class ShareStateKey:
    group_id: str
    topic_id: uuid.UUID
    partition: int


@dataclass(slots=True)
class ShareSnapshot:
    state_epoch: int
    start_offset: int
    end_offset: int
    batches: list[tuple[int, int, int, int]]


def encode_key(key: ShareStateKey) -> bytes:
    body = json.dumps([key.group_id, str(key.topic_id), key.partition], separators=(",", ":"))
    return _VERSION.pack(KEY_VERSION) + body.encode()


@dataclass(frozen=True, slots=True)
class GroupConfigKey:
    group_id: str


def encode_config_key(key: GroupConfigKey) -> bytes:
    return _VERSION.pack(CONFIG_KEY_VERSION) + json.dumps([key.group_id]).encode()


def encode_configs(configs: dict[str, str]) -> bytes:
    return _VERSION.pack(VALUE_VERSION) + json.dumps(configs, sort_keys=True).encode()


def decode_configs(raw: bytes) -> dict[str, str]:
    try:
        configs = json.loads(bytes(raw[2:]))
        return {str(k): str(v) for k, v in configs.items()}
    except (TypeError, ValueError, AttributeError) as exc:
        raise BadRecord(f"share group configs: {exc}") from exc


def decode_key(raw: bytes | None) -> ShareStateKey | GroupConfigKey:
    try:
        (version,) = _VERSION.unpack_from(raw, 0)
        if version == CONFIG_KEY_VERSION:
            (group_id,) = json.loads(bytes(raw[2:]))
            return GroupConfigKey(group_id)
        if version != KEY_VERSION:
            raise BadRecord(f"share state key version {version}")
        group_id, topic_id, partition = json.loads(bytes(raw[2:]))
        return ShareStateKey(group_id, uuid.UUID(topic_id), int(partition))
    except (TypeError, ValueError, struct.error) as exc:
        raise BadRecord(f"share state key: {exc}") from exc


def encode_value(snapshot: ShareSnapshot) -> bytes:
    body = json.dumps({"stateEpoch": snapshot.state_epoch, "startOffset": snapshot.start_offset,
                       "endOffset": snapshot.end_offset, "stateBatches": [list(b) for b in snapshot.batches]},
                      separators=(",", ":"))
    return _VERSION.pack(VALUE_VERSION) + body.encode()


def decode_value(raw: bytes) -> ShareSnapshot:
    try:
        (version,) = _VERSION.unpack_from(raw, 0)
        if version != VALUE_VERSION:
            raise BadRecord(f"share state value version {version}")
        data = json.loads(bytes(raw[2:]))
        return ShareSnapshot(int(data["stateEpoch"]), int(data["startOffset"]), int(data["endOffset"]),
                             [tuple(int(x) for x in b) for b in data["stateBatches"]])
    except (TypeError, ValueError, KeyError, struct.error) as exc:
        raise BadRecord(f"share state value: {exc}") from exc
