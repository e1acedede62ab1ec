"""Hostile variants of a valid request, generated from its schema.

For every field of the valid body (in arrays, the first element stands for all), the
variants its type and meaning call for — one mutation per variant, everything else kept
valid, so the answer says how the broker treats that one bad value:

- a topic name (entityType topicName): unknown, empty, null where nullable, invalid
  characters, 250 characters (one over Kafka's limit), oversized (30 000 bytes);
- a group / transactional id: unknown, empty, null where nullable, oversized;
- any other string: empty, null where nullable, oversized;
- a partition index: -1 and 2^31-1;
- an offset: -5 and 10^12 (past every end);
- an epoch or generation: a wrong one (the valid one + 7);
- a producer id: one nobody allocated; a topic id: unknown and zero;
- enums (int8 type/operation fields): 99; timeouts: -1; acks: 2; counts and replication
  factors: 0, -2 and huge;
- records: empty, garbage, and a batch whose CRC does not match;
- arrays: empty, null where nullable, the first element twice, and (top level) 1000
  copies of it.

The values are the same for both brokers, so the two requests still differ only where a
broker's own ids are quoted.
"""

from __future__ import annotations

import copy
import uuid
from dataclasses import dataclass
from typing import Any

from compat_tests.protocol_diff.schema_info import field_info
from wire.definitions import MESSAGES
from wire.schema import in_range

UNKNOWN_TOPIC = "pd-unknown-topic"
UNKNOWN_GROUP = "pd-unknown-group"
UNKNOWN_TXN = "pd-unknown-txn"
UNKNOWN_PRODUCER_ID = 424242
UNKNOWN_TOPIC_ID = uuid.UUID("5eed0000-0000-4000-8000-00000000dead")
OVERSIZED = 30_000
OVERSIZED_VALUE = "pd-" + "o" * (OVERSIZED - 3 - 10)  # room for the tag
MANY = 1000

_ENUMS = ("resource_type", "resource_type_filter", "key_type", "isolation_level", "config_operation",
          "match_type", "operation", "permission_type", "pattern_type_filter", "resource_pattern_type",
          "mechanism", "election_type", "endpoint_type", "coordinator_type")
_EPOCHS = ("current_leader_epoch", "leader_epoch", "last_fetched_epoch", "producer_epoch", "generation_id",
           "member_epoch", "session_epoch", "share_session_epoch", "state_epoch", "committed_leader_epoch",
           "generation_id_or_member_epoch")
_PARTITIONS = ("partition", "partition_index", "index", "partitions", "partition_indexes")


@dataclass(frozen=True)
class Mutation:
    """Set the field at `path` to `value`, or (`copies` > 0) make the array at `path` that
    many copies of its first element — of the body it is applied to, so each broker's copy
    keeps that broker's own ids."""

    label: str  # "topics[0].name=unknown"
    path: tuple  # keys and indexes into the body
    value: Any = None
    copies: int = 0
    flip_last_byte: bool = False

    def apply(self, body: dict) -> dict:
        out = copy.deepcopy(body)
        target = out
        for step in self.path[:-1]:
            target = target[step]
        key = self.path[-1]
        if self.copies:
            target[key] = [copy.deepcopy(target[key][0]) for _ in range(self.copies)]
        elif self.flip_last_byte:
            bad = bytearray(target[key])
            bad[-1] ^= 0xFF  # in the last record: the batch CRC no longer matches
            target[key] = bytes(bad)
        else:
            target[key] = self.value
        return out


def _fields_at(fields: list[tuple], version: int) -> list[tuple]:
    return [f for f in fields if in_range(version, f[2])]


def mutations(api_key: int, version: int, body: dict, tag: str = "") -> list[Mutation]:
    """The hostile variants of `body` (a valid request of this API at this version).

    `tag` is appended to the unknown names, so that an "unknown" group or topic one
    version's variant created (Metadata auto-creates topics, JoinGroup v0 creates groups)
    is still unknown to the next version's."""
    info = field_info(api_key, "request")
    out: list[Mutation] = []
    _struct(MESSAGES[(api_key, "request")]["fields"], version, body, (), (), info, out, top=True)
    if tag:
        names = {UNKNOWN_TOPIC, UNKNOWN_GROUP, UNKNOWN_TXN, OVERSIZED_VALUE}
        out = [Mutation(m.label, m.path, f"{m.value}-{tag}", m.copies, m.flip_last_byte)
               if isinstance(m.value, str) and m.value in names else m for m in out]
    # Drop no-ops (a mutation to the value already there) and keep the first of equal labels.
    seen: set[str] = set()
    result = []
    for m in out:
        if m.label in seen:
            continue
        current: Any = body
        try:
            for step in m.path:
                current = current[step]
        except (KeyError, IndexError, TypeError):
            current = object()
        if not m.copies and not m.flip_last_byte and current == m.value and type(current) is type(m.value):
            continue
        seen.add(m.label)
        result.append(m)
    return result


def _label(path: tuple) -> str:
    text = ""
    for step in path:
        text += f"[{step}]" if isinstance(step, int) else (f".{step}" if text else step)
    return text


def _struct(fields, version, body, path, schema_path, info, out, top=False) -> None:
    if not isinstance(body, dict):
        return
    for f in _fields_at(fields, version):
        name, typ, _versions, nullable_rng, _tagged, _tag, _default, _flex, children = f
        if name not in body:
            continue
        value = body[name]
        fpath = path + (name,)
        spath = schema_path + (name,)
        nullable = in_range(version, nullable_rng)
        entity = info.get(spath).entity if spath in info else None
        if typ.startswith("[]"):
            _array(name, typ[2:], children, version, value, fpath, spath, nullable, entity, info, out, top)
        elif typ == "struct":
            if value is not None:
                _struct(children, version, value, fpath, spath, info, out)
            if nullable:
                out.append(Mutation(f"{_label(fpath)}=null", fpath, None))
        else:
            _scalar(name, typ, fpath, nullable, entity, value, out)


def _array(name, base, children, version, value, fpath, spath, nullable, entity, info, out, top) -> None:
    label = _label(fpath)
    if value is None:
        return
    out.append(Mutation(f"{label}=empty", fpath, []))
    if nullable:
        out.append(Mutation(f"{label}=null", fpath, None))
    if not value:
        return
    first = value[0]
    out.append(Mutation(f"{label}=first-twice", fpath, copies=2))
    if top:
        out.append(Mutation(f"{label}={MANY}-copies", fpath, copies=MANY))
    if base == "struct":
        _struct(children, version, first, fpath + (0,), spath, info, out)
    else:
        _scalar(name, base, fpath + (0,), False, entity, first, out)


def _scalar(name, typ, fpath, nullable, entity, value, out) -> None:
    label = _label(fpath)

    def add(what: str, new: Any) -> None:
        out.append(Mutation(f"{label}={what}", fpath, new))

    if typ == "string":
        if entity == "topicName":
            add("unknown", UNKNOWN_TOPIC)
            add("empty", "")
            add("invalid-chars", "pd bad/name")
            add("250-chars", "pd-" + "x" * 247)
        elif entity == "groupId":
            add("unknown", UNKNOWN_GROUP)
            add("empty", "")
        elif entity == "transactionalId":
            add("unknown", UNKNOWN_TXN)
            add("empty", "")
        else:
            add("empty", "")
            add("unknown", "pd-bogus")
        if nullable:
            add("null", None)
        add("oversized", OVERSIZED_VALUE)
        return
    if typ == "uuid":
        add("unknown", UNKNOWN_TOPIC_ID)
        add("zero", uuid.UUID(int=0))
        return
    if typ == "records":
        add("empty", b"")
        add("garbage", b"\x00\x01garbage-not-a-batch\xff")
        if nullable:
            add("null", None)
        if isinstance(value, (bytes, bytearray)) and len(value) > 61:
            out.append(Mutation(f"{label}=bad-crc", fpath, flip_last_byte=True))
        return
    if typ in ("bytes", "bool", "float64"):
        return
    # integers
    if name in _PARTITIONS:
        add("-1", -1)
        add("huge", 2**31 - 1)
    elif "offset" in name and typ == "int64":
        add("-5", -5)
        add("past-end", 10**12)
    elif name in _EPOCHS:
        wrong = (value + 7) if isinstance(value, int) and value >= 0 else 7
        add("wrong-epoch", wrong)
    elif name == "producer_id" and typ == "int64":
        add("unknown", UNKNOWN_PRODUCER_ID)
    elif name == "timestamp":
        add("-99", -99)
    elif name.endswith("timeout_ms"):
        add("-1", -1)
    elif name == "acks":
        add("2", 2)
    elif name in ("num_partitions", "count"):
        add("0", 0)
        add("-2", -2)
        add("huge", 2**31 - 1)
    elif name == "replication_factor":
        add("0", 0)
        add("-2", -2)
        add("3", 3)
    elif name in _ENUMS and typ == "int8":
        add("99", 99)
