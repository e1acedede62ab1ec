"""Parsing a submitted schema per type: AVRO (fastavro), JSON (jsonschema) and PROTOBUF
(.proto text or a serialized descriptor, protobuf.py).

Why: a registry must refuse what its serializers could not use (42201), and must know two
submissions are "the same schema" so a schema registered twice, or under two subjects, gets
one id. The stored text is the schema's compact JSON (Confluent stores Avro's
`Schema.toString()`, also compact), so whitespace never makes a new id; `normalize=true`
goes further (keys sorted, Avro names fully qualified), as Confluent's normalization does.
A PROTOBUF schema is stored as the canonical .proto text printed from its descriptor, so text
and descriptor submissions of one schema are one id.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

import fastavro
import jsonschema
from fastavro.schema import SchemaParseException, UnknownType

from schema_registry import protobuf
from schema_registry.errors import invalid_schema

AVRO, JSON, PROTOBUF = "AVRO", "JSON", "PROTOBUF"
TYPES = (JSON, AVRO, PROTOBUF)


@dataclass(frozen=True)
class Reference:
    """A schema reference: `name` (an Avro full name, a JSON `$ref` target) is the schema
    registered as `subject` at `version`."""

    name: str
    subject: str
    version: int

    def to_json(self) -> dict:
        return {"name": self.name, "subject": self.subject, "version": self.version}


@dataclass
class ParsedSchema:
    """A schema checked by its type's parser: `text` is what is stored and served,
    `parsed` what the compatibility checks read (Avro: fastavro's parse plus its named
    types; JSON: the document; PROTOBUF: the FileDescriptorProto, with `named` its imports
    by file name). `name` is the reference name it was resolved under, if any."""

    schema_type: str
    text: str
    parsed: Any
    references: tuple[Reference, ...] = ()
    named: dict = field(default_factory=dict)
    name: str = ""

    def fingerprint(self) -> tuple:
        return (self.schema_type, self.text, tuple((r.name, r.subject, r.version) for r in self.references))


def compact(document: Any, *, sort_keys: bool = False) -> str:
    return json.dumps(document, separators=(",", ":"), sort_keys=sort_keys, ensure_ascii=False)


def parse_references(raw: Any) -> tuple[Reference, ...]:
    """The `references` of a request body; 42201 when malformed."""
    if raw is None:
        return ()
    if not isinstance(raw, list):
        raise invalid_schema("references must be a list")
    refs = []
    for item in raw:
        if not isinstance(item, dict) or not isinstance(item.get("name"), str) \
                or not isinstance(item.get("subject"), str) or not isinstance(item.get("version"), int) \
                or isinstance(item.get("version"), bool):
            raise invalid_schema(f"a reference needs a name, a subject and an integer version: {item!r}")
        refs.append(Reference(item["name"], item["subject"], item["version"]))
    return tuple(refs)


def parse(schema_type: str, text: str, references: tuple[Reference, ...] = (),
          resolved: list["ParsedSchema"] | None = None, *, normalize: bool = False) -> ParsedSchema:
    """Check `text` as a `schema_type` schema; `resolved` are the referenced schemas (and
    theirs), already parsed, dependencies first. InvalidSchema (42201) when it is not one."""
    if not isinstance(text, str):
        raise invalid_schema("the schema must be a string")
    if schema_type == PROTOBUF:
        return _parse_protobuf(text, references, resolved or [], normalize)
    try:
        document = json.loads(text)
    except (ValueError, RecursionError) as exc:  # RecursionError: nested deeper than the parser goes
        raise invalid_schema(f"not JSON: {exc}") from None
    if schema_type == AVRO:
        return _parse_avro(document, references, resolved or [], normalize)
    if schema_type == JSON:
        return _parse_json(document, references, normalize)
    raise invalid_schema(f"unsupported schema type {schema_type!r} (supported: {', '.join(TYPES)})")


def _parse_avro(document: Any, references: tuple[Reference, ...], resolved: list[ParsedSchema],
                normalize: bool) -> ParsedSchema:
    named: dict = {}
    for dep in resolved:
        named.update(dep.named)
    known = dict(named)
    try:
        parsed = fastavro.parse_schema(document, named_schemas=named, _write_hint=False)
    except (SchemaParseException, UnknownType, ValueError, TypeError, KeyError, AttributeError) as exc:
        raise invalid_schema(f"{type(exc).__name__}: {exc}") from None
    own = {name: value for name, value in named.items() if name not in known}
    text = compact(parsed, sort_keys=True) if normalize else compact(document)
    return ParsedSchema(AVRO, text, parsed, references, {**known, **own})


def _parse_json(document: Any, references: tuple[Reference, ...], normalize: bool) -> ParsedSchema:
    if not isinstance(document, (dict, bool)):
        raise invalid_schema("a JSON schema is an object or a boolean")
    try:
        validator = jsonschema.validators.validator_for(document, default=jsonschema.Draft7Validator)
        validator.check_schema(document)
    except jsonschema.SchemaError as exc:
        raise invalid_schema(exc.message) from None
    except Exception as exc:  # an unknown $schema, a broken document: still the client's error
        raise invalid_schema(f"{type(exc).__name__}: {exc}") from None
    return ParsedSchema(JSON, compact(document, sort_keys=normalize), document, references)


def _parse_protobuf(text: str, references: tuple[Reference, ...], resolved: list[ParsedSchema],
                    normalize: bool) -> ParsedSchema:
    imports: dict = {}
    for dep in resolved:
        if dep.schema_type != PROTOBUF:
            raise invalid_schema(f"reference {dep.name} is a {dep.schema_type} schema, not PROTOBUF")
        proto = protobuf.FDP()
        proto.CopyFrom(dep.parsed)
        proto.name = dep.name
        imports[dep.name] = proto
    try:
        proto = protobuf.read(text, imports)
        protobuf.check(proto, imports)
        stored = protobuf.to_text(proto)
        if protobuf.is_serialized(text):
            protobuf.check_kept(proto, stored, imports)
        if normalize:
            stored = protobuf.to_text(proto, normalize=True)
    except RecursionError:  # a descriptor nested deeper than the printer goes
        raise invalid_schema("the schema nests too deep") from None
    except (TypeError, ValueError, KeyError, AttributeError) as exc:  # a descriptor the printer cannot write
        raise invalid_schema(f"the descriptor cannot be kept as .proto text: {type(exc).__name__}: {exc}") from None
    return ParsedSchema(PROTOBUF, stored, proto, references, imports)
