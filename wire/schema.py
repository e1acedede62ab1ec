"""Compile the generated definitions into one construct tree per (API, kind, version).

A field exists in a version when the version is inside its range; it is nullable,
tagged or compact (flexible) per the same rule. Trees are built on first use and cached,
so the cost is paid once per version a client actually speaks.
"""

from __future__ import annotations

import functools
import uuid
from typing import Any

from wire import primitives as p
from wire.definitions import MESSAGES


def in_range(version: int, rng) -> bool:
    if rng is None:
        return False
    lo, hi = rng
    return version >= lo and (hi is None or version <= hi)


def _default_value(default: Any, children_struct: p.KStruct | None) -> Any:
    if default == "uuid0":
        return p.ZERO_UUID
    if default == "struct":
        return children_struct.defaults() if children_struct is not None else {}
    return default


def _element(base: str, children, version: int, flexible: bool):
    """The type of one array element (elements are never nullable)."""
    if base == "struct":
        return compile_fields(children, version, flexible)
    if base == "string":
        return p.String(flexible, False, "")
    if base in ("bytes", "records"):
        return p.Bytes(flexible, False, b"")
    return p.FIXED_TYPES[base]


def _field_type(field: tuple, version: int, flexible: bool):
    """(construct type, default value) of one field at one version."""
    _name, typ, _versions, nullable_rng, _tagged, _tag, default, flex_override, children = field
    if flex_override != "inherit":
        flexible = in_range(version, flex_override)
    nullable = in_range(version, nullable_rng)
    if typ.startswith("[]"):
        if default is None and not nullable:
            default = []
        element = _element(typ[2:], children, version, flexible)
        return p.Array(element, flexible, nullable, default), default
    if typ == "struct":
        struct = compile_fields(children, version, flexible)
        if nullable:
            return _NullableStruct(struct), None
        return struct, struct.defaults()
    if typ == "string":
        if default is None and not nullable:
            default = ""
        return p.String(flexible, nullable, default), default
    if typ in ("bytes", "records"):
        if default is None and not nullable:
            default = b""
        cls = p.Records if typ == "records" else p.Bytes
        return cls(flexible, nullable, default), default
    return p.FIXED_TYPES[typ], _default_value(default, None)


class _NullableStruct(p.KafkaType):
    """A struct field that may be null: int8 marker -1 (null) or 1, then the struct."""

    nullable = True
    min_size = 1

    def __init__(self, struct: p.KStruct) -> None:
        super().__init__()
        self.struct = struct

    def _parse(self, stream, context, path):
        marker = p.INT8._parse(stream, context, path)
        if marker < 0:
            return None
        return self.struct._parse(stream, context, path)

    def _build(self, obj, stream, context, path):
        if obj is None:
            p.INT8._build(-1, stream, context, path)
        else:
            p.INT8._build(1, stream, context, path)
            self.struct._build(obj, stream, context, path)
        return obj


def compile_fields(fields: list[tuple], version: int, flexible: bool) -> p.KStruct:
    plain: list[tuple[str, Any, Any]] = []
    tagged: dict[int, tuple[str, Any, Any]] = {}
    for field in fields:
        name, _typ, versions, _nullable, tagged_rng, tag, _default, _flex, _children = field
        if not in_range(version, versions):
            continue
        typ, default = _field_type(field, version, flexible)
        if flexible and in_range(version, tagged_rng):
            tagged[tag] = (name, typ, default)
        else:
            plain.append((name, typ, default))
    return p.KStruct(plain, p.TaggedFields(tagged) if flexible else None)


def is_flexible(api_key: int, kind: str, version: int) -> bool:
    return in_range(version, MESSAGES[(api_key, kind)]["flexible"])


@functools.lru_cache(maxsize=None)
def message_struct(api_key: int, kind: str, version: int) -> p.KStruct:
    """The construct tree of one message at one version (kind: "request"/"response")."""
    msg = MESSAGES[(api_key, kind)]
    if not in_range(version, msg["valid"]):
        raise KeyError(f"{msg['name']} has no version {version}")
    return compile_fields(msg["fields"], version, in_range(version, msg["flexible"]))


def message_name(api_key: int, kind: str) -> str:
    return MESSAGES[(api_key, kind)]["name"]


def new_uuid() -> uuid.UUID:
    return uuid.uuid4()
