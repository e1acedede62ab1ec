"""Compatibility levels over the per-type checks (avro.py, json_schema.py, protobuf.py).

BACKWARD: the new schema reads data written with the old (new = reader); FORWARD: the old
reads the new; FULL: both. Without _TRANSITIVE only the latest live version is checked, with
it every live version. NONE checks nothing.
"""

from __future__ import annotations

from schema_registry.compatibility import avro, json_schema, protobuf
from schema_registry.schemas import AVRO, JSON, PROTOBUF, ParsedSchema

LEVELS = ("BACKWARD", "BACKWARD_TRANSITIVE", "FORWARD", "FORWARD_TRANSITIVE", "FULL", "FULL_TRANSITIVE", "NONE")
DEFAULT_LEVEL = "BACKWARD"

_CHECKERS = {AVRO: avro.can_read, JSON: json_schema.can_read, PROTOBUF: protobuf.can_read}


def can_read(reader: ParsedSchema, writer: ParsedSchema) -> list[str]:
    """Why `reader` cannot read data written with `writer` (empty: it can)."""
    if reader.schema_type != writer.schema_type:
        return [f"TYPE_MISMATCH: schema type {reader.schema_type} vs {writer.schema_type}"]
    return _CHECKERS[reader.schema_type](reader, writer)


def check(level: str, new: ParsedSchema, previous: list[ParsedSchema]) -> list[str]:
    """Why `new` breaks `level` against `previous` (the live versions, oldest first)."""
    if level == "NONE" or not previous:
        return []
    against = previous if level.endswith("_TRANSITIVE") else previous[-1:]
    problems: list[str] = []
    for old in reversed(against):
        if level.startswith(("BACKWARD", "FULL")):
            problems += [f"{m} (new schema cannot read data written with an old one)" for m in can_read(new, old)]
        if level.startswith(("FORWARD", "FULL")):
            problems += [f"{m} (an old schema cannot read data written with the new one)" for m in can_read(old, new)]
        if problems:
            break
    return problems
