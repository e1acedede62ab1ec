"""Avro schema resolution (the Avro specification's "Schema Resolution"): can a reader
schema read data written with a writer schema?

Why its own module: every compatibility level is built from this one question —
BACKWARD asks it with the new schema as reader and an old one as writer, FORWARD the other
way round, FULL both. The rules follow Avro's SchemaCompatibility (Java), which Confluent's
registry uses: same types match (records by name, each reader field found in the writer by
name or alias or else having a default; enums: writer symbols known to the reader or a
reader default; fixed: same name and size; arrays/maps by their items/values); the
promotions int→long→float→double and string↔bytes; a writer union needs every branch
readable, a reader union needs one branch that reads the writer.
"""

from __future__ import annotations

from typing import Any

PRIMITIVES = {"null", "boolean", "int", "long", "float", "double", "bytes", "string"}
PROMOTIONS = {
    "int": {"long", "float", "double"},
    "long": {"float", "double"},
    "float": {"double"},
    "string": {"bytes"},
    "bytes": {"string"},
}


def _resolve(schema: Any, named: dict) -> Any:
    """A named-type reference (a full name string) becomes its definition."""
    if isinstance(schema, str) and schema not in PRIMITIVES:
        return named.get(schema, schema)
    return schema


def _type(schema: Any) -> str:
    if isinstance(schema, list):
        return "union"
    if isinstance(schema, dict):
        kind = schema.get("type")
        return kind if isinstance(kind, str) and kind in {"record", "error", "enum", "fixed", "array", "map"} | PRIMITIVES \
            else _type(kind)
    return str(schema)


def _short(name: str) -> str:
    return name.rsplit(".", 1)[-1]


def _names_match(reader: dict, writer: dict) -> bool:
    """Unqualified names match (Avro's resolution compares them so), or a reader alias does."""
    wname = writer.get("name", "")
    if _short(reader.get("name", "")) == _short(wname):
        return True
    return any(_short(a) == _short(wname) for a in reader.get("aliases", ()) or ())


class AvroChecker:
    """`check(reader, writer)` → messages, one per incompatibility (empty: compatible)."""

    def __init__(self, reader_named: dict, writer_named: dict) -> None:
        self.rnamed = reader_named
        self.wnamed = writer_named
        # record pairs under check, up the stack: assumed compatible there (recursive types end),
        # and only there, so a pair that fails fails wherever else it comes up
        self._assumed: set[tuple[int, int]] = set()

    def check(self, reader: Any, writer: Any, path: str = "/") -> list[str]:
        reader, writer = _resolve(reader, self.rnamed), _resolve(writer, self.wnamed)
        rt, wt = _type(reader), _type(writer)
        if wt == "union":
            problems = []
            for i, branch in enumerate(writer):
                problems += self.check(reader, branch, f"{path}{i}/")
            return problems
        if rt == "union":
            for branch in reader:
                if not self.check(branch, writer, path):
                    return []
            return [f"TYPE_MISMATCH at {path}: reader union {self._describe(reader)} has no branch for writer "
                    f"type {wt}"]
        if rt in ("record", "error") and wt in ("record", "error"):
            return self._record(reader, writer, path)
        if rt != wt:
            if wt in PROMOTIONS and rt in PROMOTIONS[wt]:
                return []
            return [f"TYPE_MISMATCH at {path}: reader type {rt} is not compatible with writer type {wt}"]
        if rt in PRIMITIVES:
            return []
        if rt == "enum":
            if not _names_match(reader, writer):
                return [f"NAME_MISMATCH at {path}: expected {writer.get('name')}, found {reader.get('name')}"]
            missing = [s for s in writer.get("symbols", []) if s not in reader.get("symbols", [])]
            if missing and "default" not in reader:
                return [f"MISSING_ENUM_SYMBOLS at {path}: reader lacks {missing}"]
            return []
        if rt == "fixed":
            if not _names_match(reader, writer):
                return [f"NAME_MISMATCH at {path}: expected {writer.get('name')}, found {reader.get('name')}"]
            if reader.get("size") != writer.get("size"):
                return [f"FIXED_SIZE_MISMATCH at {path}: expected {writer.get('size')}, found {reader.get('size')}"]
            return []
        if rt == "array":
            return self.check(reader.get("items"), writer.get("items"), f"{path}items/")
        if rt == "map":
            return self.check(reader.get("values"), writer.get("values"), f"{path}values/")
        return []

    def _record(self, reader: dict, writer: dict, path: str) -> list[str]:
        if not _names_match(reader, writer):
            return [f"NAME_MISMATCH at {path}: expected {writer.get('name')}, found {reader.get('name')}"]
        pair = (id(reader), id(writer))
        if pair in self._assumed:
            return []
        self._assumed.add(pair)
        try:
            return self._record_fields(reader, writer, path)
        finally:
            self._assumed.discard(pair)

    def _record_fields(self, reader: dict, writer: dict, path: str) -> list[str]:
        problems = []
        wfields = {f["name"]: f for f in writer.get("fields", [])}
        for i, field in enumerate(reader.get("fields", [])):
            found = wfields.get(field["name"])
            if found is None:
                found = next((wfields[a] for a in field.get("aliases", ()) or () if a in wfields), None)
            if found is None:
                if "default" not in field:
                    problems.append(f"READER_FIELD_MISSING_DEFAULT_VALUE at {path}fields/{i}: "
                                    f"{field['name']}")
                continue
            problems += self.check(field["type"], found["type"], f"{path}fields/{i}/type/")
        return problems

    @staticmethod
    def _describe(union: list) -> str:
        return "[" + ", ".join(_type(b) if not isinstance(b, str) else b for b in union) + "]"


def can_read(reader, writer) -> list[str]:
    """Incompatibilities of reading data written with `writer` using `reader` (both
    ParsedSchema of type AVRO)."""
    return AvroChecker(reader.named, writer.named).check(reader.parsed, writer.parsed)
