"""JSON Schema compatibility: does the reader schema accept every document the writer
schema accepts?

Why this shape: for JSON Schema, "the new schema can read old data" means the set of
documents valid under the writer is inside the set valid under the reader. Deciding that
in general is not practical; this checks the structure the way Confluent's and Karapace's
checkers do for the common cases, each with Confluent's difference name:

- `type`: the reader's types must include the writer's (integer is inside number):
  TYPE_CHANGED / TYPE_NARROWED; widening is fine.
- objects: a property only the writer has is fine unless the reader's additionalProperties
  refuses it (PROPERTY_REMOVED_FROM_CLOSED_CONTENT_MODEL) or its schema does not accept it;
  a property only the reader has is fine when the writer's content model is closed
  (additionalProperties false), else it must accept anything
  (PROPERTY_ADDED_TO_OPEN_CONTENT_MODEL); common properties are checked recursively;
  a reader `required` property the writer does not require: REQUIRED_ATTRIBUTE_ADDED;
  closing an open model: ADDITIONAL_PROPERTIES_REMOVED.
- ranges: maximum/minimum (and exclusive), maxLength/minLength, maxItems/minItems,
  maxProperties/minProperties may only widen; `enum` may only gain values; `const`
  must stay; `pattern` must stay; array `items` recursively.
- `anyOf`/`oneOf`: every writer branch must be accepted by some reader branch.
- local `$ref` (`#/definitions/..`, `#/$defs/..`) are followed; references to other
  registered schemas are not (their own subjects check them).
"""

from __future__ import annotations

from typing import Any

# "accepts anything" as one object: a pair under check is known by its objects' ids, so a
# fresh {} each time `true` is met would never be seen twice and a recursive schema
# ({"properties": {"a": {"$ref": "#"}}} against an open model) would recurse forever
ANYTHING: dict = {}

UPPER = ("maximum", "exclusiveMaximum", "maxLength", "maxItems", "maxProperties")
LOWER = ("minimum", "exclusiveMinimum", "minLength", "minItems", "minProperties")


def _types(schema: dict) -> set[str] | None:
    kind = schema.get("type")
    if kind is None:
        return None
    return {kind} if isinstance(kind, str) else set(kind)


class JsonChecker:
    def __init__(self, reader_root: Any, writer_root: Any) -> None:
        self.roots = (reader_root, writer_root)
        # pairs under check, up the stack: assumed compatible there (recursive schemas end),
        # and only there, so a pair that fails fails wherever else it comes up
        self._seen: set[tuple[int, int]] = set()

    def _deref(self, schema: Any, root: Any) -> Any:
        for _ in range(32):
            if not (isinstance(schema, dict) and isinstance(schema.get("$ref"), str)
                    and schema["$ref"].startswith("#")):
                return schema
            node = root
            for part in schema["$ref"].lstrip("#").strip("/").split("/"):
                if not part:
                    continue
                if not isinstance(node, dict) or part not in node:
                    return {}
                node = node[part]
            schema = node
        return schema

    def check(self, reader: Any, writer: Any, path: str = "#") -> list[str]:
        reader = self._deref(reader, self.roots[0])
        writer = self._deref(writer, self.roots[1])
        if reader is True or reader == {} or writer is False:
            return []
        if reader is False:
            return [f"SCHEMA_NARROWED at {path}: the reader accepts nothing"]
        if writer is True:
            writer = ANYTHING
        if not isinstance(reader, dict) or not isinstance(writer, dict):
            return []
        pair = (id(reader), id(writer))
        if pair in self._seen:
            return []
        self._seen.add(pair)
        try:
            return self._check_pair(reader, writer, path)
        finally:
            self._seen.discard(pair)

    def _check_pair(self, reader: dict, writer: dict, path: str) -> list[str]:
        for combinator in ("anyOf", "oneOf"):
            if combinator in writer:
                problems = []
                for i, branch in enumerate(writer[combinator]):
                    problems += self.check(reader, branch, f"{path}/{combinator}/{i}")
                return problems
            if combinator in reader:
                if any(not self.check(branch, writer, path) for branch in reader[combinator]):
                    return []
                return [f"COMBINED_TYPE_SUBSCHEMAS_CHANGED at {path}: no {combinator} branch of the reader "
                        "accepts the writer's documents"]
        problems: list[str] = []
        rtypes, wtypes = _types(reader), _types(writer)
        if rtypes is not None:
            if wtypes is None:
                problems.append(f"TYPE_NARROWED at {path}: the reader restricts the type to {sorted(rtypes)}")
            else:
                lost = {t for t in wtypes if t not in rtypes and not (t == "integer" and "number" in rtypes)}
                if lost:
                    kind = "TYPE_NARROWED" if len(rtypes) >= 1 and rtypes & wtypes else "TYPE_CHANGED"
                    problems.append(f"{kind} at {path}: writer type(s) {sorted(lost)} not accepted by the reader "
                                    f"{sorted(rtypes)}")
        for key in UPPER:
            if key in reader and (key not in writer or _num(writer[key]) > _num(reader[key])):
                problems.append(f"{key.upper()}_ADDED_OR_DECREASED at {path}: {writer.get(key)} -> {reader[key]}")
        for key in LOWER:
            if key in reader and (key not in writer or _num(writer[key]) < _num(reader[key])):
                problems.append(f"{key.upper()}_ADDED_OR_INCREASED at {path}: {writer.get(key)} -> {reader[key]}")
        if "enum" in reader:
            if "enum" not in writer or any(v not in reader["enum"] for v in writer["enum"]):
                problems.append(f"ENUM_ARRAY_NARROWED at {path}")
        if "const" in reader and writer.get("const", object()) != reader["const"]:
            problems.append(f"CONST_CHANGED at {path}")
        if "pattern" in reader and writer.get("pattern") != reader["pattern"]:
            problems.append(f"PATTERN_ADDED_OR_CHANGED at {path}")
        problems += self._object(reader, writer, path)
        if "items" in reader or "items" in writer:
            ritems, witems = reader.get("items", ANYTHING), writer.get("items", ANYTHING)
            if isinstance(ritems, (dict, bool)) and isinstance(witems, (dict, bool)):
                problems += self.check(ritems, witems, f"{path}/items")
        return problems

    def _object(self, reader: dict, writer: dict, path: str) -> list[str]:
        problems = []
        rprops, wprops = reader.get("properties", {}) or {}, writer.get("properties", {}) or {}
        radd, wadd = reader.get("additionalProperties", True), writer.get("additionalProperties", True)
        for name, wschema in wprops.items():
            if name in rprops:
                problems += self.check(rprops[name], wschema, f"{path}/properties/{name}")
            elif radd is False:
                problems.append(f"PROPERTY_REMOVED_FROM_CLOSED_CONTENT_MODEL at {path}/properties/{name}")
            elif isinstance(radd, dict) and self.check(radd, wschema, path):
                problems.append(f"PROPERTY_REMOVED_NOT_COVERED_BY_PARTIALLY_OPEN_CONTENT_MODEL at "
                                f"{path}/properties/{name}")
        for name, rschema in rprops.items():
            if name in wprops or wadd is False:
                continue
            if self.check(rschema, wadd if isinstance(wadd, dict) else True, f"{path}/properties/{name}"):
                problems.append(f"PROPERTY_ADDED_TO_OPEN_CONTENT_MODEL at {path}/properties/{name}")
        if radd is False and wadd is not False:
            problems.append(f"ADDITIONAL_PROPERTIES_REMOVED at {path}")
        elif isinstance(radd, dict) and wadd is not False:
            problems += self.check(radd, wadd if isinstance(wadd, dict) else True, f"{path}/additionalProperties")
        added = [n for n in reader.get("required", []) or [] if n not in (writer.get("required", []) or [])]
        if added:
            problems.append(f"REQUIRED_ATTRIBUTE_ADDED at {path}: {added}")
        return problems


def _num(value: Any) -> float:
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else 0.0


def can_read(reader, writer) -> list[str]:
    """Incompatibilities of `reader` (a ParsedSchema of type JSON) accepting the documents
    `writer` accepts."""
    try:
        return JsonChecker(reader.parsed, writer.parsed).check(reader.parsed, writer.parsed)
    except RecursionError:  # nested deeper than Python's stack: refused, never a 500
        return ["SCHEMA_TOO_DEEP at #: the schemas nest too deep to compare"]
