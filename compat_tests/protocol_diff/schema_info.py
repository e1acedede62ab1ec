"""What the generated codec leaves out of Kafka's JSON schemas but the differential needs:
each field's `entityType` (a topic name, a group id, a transactional id, a producer id, a
broker id) and whether it is a `mapKey` (its array is a map keyed by it).

`wire.definitions` keeps only what encoding needs; the hostile variants are chosen by what
a field means (an unknown topic, an empty group id), and keyed arrays are compared as maps,
so both facts are read from the same JSON schemas `wire` is generated from (Kafka 3.9.2's,
`.cache/kafka-protocol/messages`, or $KAFKA_PROTOCOL_MESSAGES), with the later versions of
`wire.newer_versions` applied by `wire.generate.load_schema`.
"""

from __future__ import annotations

import functools
import zipfile
from dataclasses import dataclass

from wire.definitions import MESSAGES
from wire.generate import load_schema, schema_dir, snake

Path = tuple[str, ...]  # snake_case field names from the message root, struct by struct


@dataclass(frozen=True)
class FieldInfo:
    entity: str | None  # Kafka's entityType: topicName, groupId, transactionalId, producerId, brokerId
    map_key: bool


class SchemasUnavailable(Exception):
    """Kafka's JSON message schemas are not on this machine."""


def _schema_files():
    folder = schema_dir()
    if folder.is_dir() and any(folder.glob("*.json")):
        return folder
    # Not extracted yet (.ci/kafka_protocol.py does it in CI): read them from the jar.
    from compat_tests import jvm

    try:
        jar = jvm.jar("kafka-3.9", "kafka-clients-3.9.2")
    except jvm.JvmUnavailable as exc:
        raise SchemasUnavailable(str(exc)) from exc
    folder.mkdir(parents=True, exist_ok=True)
    with zipfile.ZipFile(jar) as z:
        for name in z.namelist():
            if name.startswith("common/message/") and name.endswith(".json"):
                (folder / name.rsplit("/", 1)[1]).write_bytes(z.read(name))
    return folder


@functools.lru_cache(maxsize=None)
def field_info(api_key: int, kind: str) -> dict[Path, FieldInfo]:
    """Every field of one message (all versions), by its path."""
    schema = load_schema(_schema_files() / f"{MESSAGES[(api_key, kind)]['name']}.json")
    common = {c["name"]: c["fields"] for c in schema.get("commonStructs", [])}
    out: dict[Path, FieldInfo] = {}

    def walk(fields: list[dict], prefix: Path) -> None:
        for f in fields:
            path = prefix + (snake(f["name"]),)
            out[path] = FieldInfo(f.get("entityType"), bool(f.get("mapKey")))
            base = f["type"].removeprefix("[]")
            sub = f.get("fields") or common.get(base)
            if sub:
                walk(sub, path)

    walk(schema["fields"], ())
    return out


def map_keys(api_key: int, kind: str) -> dict[Path, tuple[str, ...]]:
    """Array path -> the names of its elements' map-key fields."""
    out: dict[Path, list[str]] = {}
    for path, info in field_info(api_key, kind).items():
        if info.map_key:
            out.setdefault(path[:-1], []).append(path[-1])
    return {k: tuple(v) for k, v in out.items()}
