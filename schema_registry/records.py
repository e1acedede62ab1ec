"""The `_schemas` topic's records in Confluent's format.

Why the same format: an operator can point Confluent's tools (or a Confluent registry in
read-only mode) at the topic, and the keys compact the way Confluent's do — one key per
subject version, per subject config and mode, per subject deletion; a hard delete is a
tombstone. Keys are written with one fixed field order so equal keys are equal bytes.
"""

from __future__ import annotations

import json
from typing import Any

from schema_registry.schemas import AVRO


def _dumps(value: Any) -> bytes:
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False).encode()


def schema_key(subject: str, version: int) -> bytes:
    return _dumps({"keytype": "SCHEMA", "subject": subject, "version": version, "magic": 1})


def schema_value(subject: str, version: int, schema_id: int, schema_type: str, schema: str,
                 references: list[dict], deleted: bool) -> bytes:
    value: dict[str, Any] = {"subject": subject, "version": version, "id": schema_id}
    if schema_type != AVRO:
        value["schemaType"] = schema_type
    if references:
        value["references"] = references
    value["schema"] = schema
    value["deleted"] = deleted
    return _dumps(value)


def config_key(subject: str | None) -> bytes:
    return _dumps({"keytype": "CONFIG", "subject": subject, "magic": 0})


def config_value(level: str) -> bytes:
    return _dumps({"compatibilityLevel": level})


def mode_key(subject: str | None) -> bytes:
    return _dumps({"keytype": "MODE", "subject": subject, "magic": 0})


def mode_value(mode: str) -> bytes:
    return _dumps({"mode": mode})


def delete_subject_key(subject: str) -> bytes:
    return _dumps({"keytype": "DELETE_SUBJECT", "subject": subject, "magic": 0})


def delete_subject_value(subject: str, version: int) -> bytes:
    return _dumps({"subject": subject, "version": version})


def decode(key: bytes | None, value: bytes | None) -> tuple[dict, dict | None]:
    """A record as (key, value or None for a tombstone); ValueError when it is not JSON of
    the expected shape."""
    if key is None:
        raise ValueError("record without a key")
    parsed_key = _json(key)
    if not isinstance(parsed_key, dict) or not isinstance(parsed_key.get("keytype"), str):
        raise ValueError(f"not a registry key: {key[:100]!r}")
    parsed_value = _json(value) if value is not None else None
    if parsed_value is not None and not isinstance(parsed_value, dict):
        raise ValueError(f"not a registry value: {value[:100]!r}")
    return parsed_key, parsed_value


def _json(data: bytes):
    """JSON, or ValueError: a record nested deeper than the parser goes (RecursionError) is as
    unreadable as one that is not JSON, and anyone allowed to produce to _schemas can write one."""
    try:
        return json.loads(data)
    except RecursionError:
        raise ValueError(f"JSON nested too deep: {data[:100]!r}") from None
