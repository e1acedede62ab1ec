"""Protobuf compatibility the way Confluent's ProtobufSchema decides it (its `diff/`
package): compare the old file with the new one, list the differences, and call the
schemas compatible when every difference is in Confluent's COMPATIBLE_CHANGES.

Why diffs and not a reader/writer walk as for Avro: protobuf data carries field numbers, so
what breaks readers is a number whose meaning changes — its kind (scalar, message, map),
its scalar wire group, the message it names — or a required field that appears or
disappears; renames, added or removed optional fields, enum changes, added messages and
oneofs are all fine. Confluent applies the same rules in both directions (BACKWARD compares
old → new, FORWARD new → old), so `can_read(reader, writer)` is the diff from writer to
reader.

Incompatible (reported): PACKAGE_CHANGED, MESSAGE_REMOVED, FIELD_KIND_CHANGED,
FIELD_SCALAR_KIND_CHANGED, FIELD_NAMED_TYPE_CHANGED, REQUIRED_FIELD_ADDED,
REQUIRED_FIELD_REMOVED, ONEOF_FIELD_REMOVED, MULTIPLE_FIELDS_MOVED_TO_ONEOF,
FIELD_MOVED_TO_EXISTING_ONEOF. Compatible (not reported): MESSAGE_ADDED, MESSAGE_MOVED,
ENUM_ADDED/REMOVED, ENUM_CONST_ADDED/CHANGED/REMOVED, FIELD_ADDED, FIELD_REMOVED,
FIELD_NAME_CHANGED, FIELD_STRING_OR_BYTES_LABEL_CHANGED, ONEOF_ADDED, ONEOF_REMOVED,
ONEOF_FIELD_ADDED.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from google.protobuf import descriptor_pb2

from schema_registry.protobuf import WELL_KNOWN

Field = descriptor_pb2.FieldDescriptorProto

# Scalars grouped by wire compatibility (protobuf's "Updating A Message Type"), as Confluent
# groups them; an enum counts as GENERAL_NUMBER.
SCALAR_KIND = {
    Field.TYPE_INT32: "GENERAL_NUMBER", Field.TYPE_INT64: "GENERAL_NUMBER", Field.TYPE_UINT32: "GENERAL_NUMBER",
    Field.TYPE_UINT64: "GENERAL_NUMBER", Field.TYPE_BOOL: "GENERAL_NUMBER", Field.TYPE_ENUM: "GENERAL_NUMBER",
    Field.TYPE_SINT32: "SIGNED_NUMBER", Field.TYPE_SINT64: "SIGNED_NUMBER",
    Field.TYPE_STRING: "STRING_OR_BYTES", Field.TYPE_BYTES: "STRING_OR_BYTES",
    Field.TYPE_FIXED32: "FIXED32", Field.TYPE_SFIXED32: "FIXED32",
    Field.TYPE_FIXED64: "FIXED64", Field.TYPE_SFIXED64: "FIXED64",
    Field.TYPE_FLOAT: "FLOAT", Field.TYPE_DOUBLE: "DOUBLE",
}


@dataclass
class _Type:
    message: Any
    package: str
    is_map: bool


def _types(proto, imports: dict) -> dict[str, _Type]:
    """Every message a side can name, by full name with the leading dot."""
    found: dict[str, _Type] = {}

    def walk(prefix: str, package: str, messages) -> None:
        for m in messages:
            found[f"{prefix}.{m.name}"] = _Type(m, package, m.options.map_entry)
            walk(f"{prefix}.{m.name}", package, m.nested_type)

    for file in [*WELL_KNOWN.values(), *imports.values(), proto]:
        walk("." + file.package if file.package else "", file.package, file.message_type)
    return found


class ProtobufDiff:
    """`compare(original, update)` → the incompatible differences, as messages."""

    def __init__(self, original_types: dict[str, _Type], update_types: dict[str, _Type]) -> None:
        self.types = (original_types, update_types)
        self.problems: list[str] = []
        self._comparing: set[tuple[str, str]] = set()  # message pairs up the stack (recursive types end)

    def add(self, kind: str, path: str, detail: str) -> None:
        self.problems.append(f"{kind} at {path}: {detail}")

    def compare_files(self, original, update) -> list[str]:
        if original.package != update.package:
            self.add("PACKAGE_CHANGED", "#/", f"package {original.package!r} became {update.package!r}")
        self._type_elements(original.message_type, update.message_type,
                            "." + original.package if original.package else "",
                            "." + update.package if update.package else "", "#")
        return self.problems

    def _type_elements(self, original, update, oscope: str, uscope: str, path: str) -> None:
        olds = {m.name: m for m in original}
        news = {m.name: m for m in update}
        for name, old in olds.items():
            if name not in news:
                if not old.options.map_entry:
                    self.add("MESSAGE_REMOVED", f"{path}/{name}", f"message {name} was removed")
                continue
            self._message(old, news[name], f"{oscope}.{name}", f"{uscope}.{name}", f"{path}/{name}")

    def _message(self, original, update, oname: str, uname: str, path: str) -> None:
        pair = (oname, uname)
        if pair not in self._comparing:
            self._comparing.add(pair)
            try:
                self._fields(original, update, path)
            finally:
                self._comparing.discard(pair)
        self._type_elements(original.nested_type, update.nested_type, oname, uname, path)

    @staticmethod
    def _split(message) -> tuple[dict[int, Any], dict[str, dict[int, Any]]]:
        """Top-level fields by number (proto3 `optional` ones included: their oneof is
        synthetic) and the real oneofs' fields by oneof name and number."""
        top: dict[int, Any] = {}
        oneofs: dict[str, dict[int, Any]] = {}
        for fld in message.field:
            if fld.HasField("oneof_index") and not fld.proto3_optional:
                oneofs.setdefault(message.oneof_decl[fld.oneof_index].name, {})[fld.number] = fld
            else:
                top[fld.number] = fld
        return top, oneofs

    def _fields(self, original, update, path: str) -> None:
        otop, oneofs_o = self._split(original)
        utop, oneofs_u = self._split(update)
        oall = {**otop, **{n: f for fs in oneofs_o.values() for n, f in fs.items()}}
        uall = {**utop, **{n: f for fs in oneofs_u.values() for n, f in fs.items()}}
        otag_oneof = {n: name for name, fs in oneofs_o.items() for n in fs}
        utag_oneof = {n: name for name, fs in oneofs_u.items() for n in fs}
        otop_left = dict(otop)
        for name, fields in oneofs_u.items():
            moved = existing = 0
            for number in fields:
                if otop_left.pop(number, None) is not None:
                    moved += 1
                elif number in otag_oneof:
                    existing += 1
            if moved > 1:
                self.add("MULTIPLE_FIELDS_MOVED_TO_ONEOF", f"{path}/{name}",
                         f"{moved} fields moved into oneof {name}")
            elif moved == 1 and existing:
                self.add("FIELD_MOVED_TO_EXISTING_ONEOF", f"{path}/{name}",
                         f"a field moved into oneof {name}, which holds fields of an old oneof")
        for name in sorted(set(oneofs_o) & set(oneofs_u)):
            old, new = oneofs_o[name], oneofs_u[name]
            for number in sorted(set(old) | set(new)):
                if number not in new:
                    self.add("ONEOF_FIELD_REMOVED", f"{path}/{name}/{number}",
                             f"field {old[number].name} left oneof {name}")
                elif number in old:
                    self._field(old[number], new[number], f"{path}/{name}/{number}")
        for number in sorted(set(otop_left) | set(utop)):
            old, new = otop_left.get(number), utop.get(number)
            if new is None:
                if old.label == Field.LABEL_REQUIRED:
                    self.add("REQUIRED_FIELD_REMOVED", f"{path}/{number}", f"required field {old.name} was removed")
            elif old is None:
                if new.label == Field.LABEL_REQUIRED:
                    self.add("REQUIRED_FIELD_ADDED", f"{path}/{number}", f"required field {new.name} was added")
            else:
                self._field(old, new, f"{path}/{number}")
        # fields whose oneof changed (renamed oneof, moved in or out): contents still compared
        for number in sorted(set(oall) & set(uall)):
            oone, uone = otag_oneof.get(number), utag_oneof.get(number)
            if (oone is None and uone is None) or (oone is not None and oone == uone):
                continue
            self._field(oall[number], uall[number], f"{path}/{number}")

    def _kind(self, fld, side: int) -> tuple[str, Any]:
        if fld.type == Field.TYPE_MESSAGE or (fld.type_name and fld.type != Field.TYPE_ENUM):
            found = self.types[side].get(fld.type_name)
            if found is not None and found.is_map:
                return "MAP", found
            return "MESSAGE", found
        if fld.type == Field.TYPE_GROUP:
            return "MESSAGE", self.types[side].get(fld.type_name)
        return "SCALAR", None

    def _field(self, original, update, path: str) -> None:
        self._compare_types(original, update, path)

    def _compare_types(self, original, update, path: str) -> None:
        okind, otype = self._kind(original, 0)
        ukind, utype = self._kind(update, 1)
        if okind != ukind:
            self.add("FIELD_KIND_CHANGED", path, f"a {okind.lower()} field became a {ukind.lower()} field")
        elif okind == "SCALAR":
            og, ug = SCALAR_KIND.get(original.type), SCALAR_KIND.get(update.type)
            if og != ug:
                self.add("FIELD_SCALAR_KIND_CHANGED", path,
                         f"{_scalar(original)} ({og}) became {_scalar(update)} ({ug})")
        elif okind == "MAP":
            self._compare_types(otype.message.field[0], utype.message.field[0], path + "/key")
            self._compare_types(otype.message.field[1], utype.message.field[1], path + "/value")
        else:
            self._named(original, update, otype, utype, path)

    def _named(self, original, update, otype, utype, path: str) -> None:
        if otype is None or utype is None:
            if original.type_name != update.type_name:
                self.add("FIELD_NAMED_TYPE_CHANGED", path, f"{original.type_name} became {update.type_name}")
            return
        olocal = _local(original.type_name, otype.package)
        ulocal = _local(update.type_name, utype.package)
        if olocal != ulocal:
            self.add("FIELD_NAMED_TYPE_CHANGED", path, f"{original.type_name} became {update.type_name}")
            return
        pair = (original.type_name, update.type_name)
        if pair in self._comparing:
            return
        before = len(self.problems)
        self._comparing.add(pair)
        try:
            self._fields(otype.message, utype.message, f"#/{olocal.replace('.', '/')}")
        finally:
            self._comparing.discard(pair)
        if len(self.problems) > before:
            self.add("FIELD_NAMED_TYPE_CHANGED", path, f"{original.type_name} changed incompatibly")


def _local(full: str, package: str) -> str:
    full = full.lstrip(".")
    return full[len(package) + 1:] if package and full.startswith(package + ".") else full


def _scalar(fld) -> str:
    return Field.Type.Name(fld.type).removeprefix("TYPE_").lower()


def can_read(reader, writer) -> list[str]:
    """Incompatibilities of reading `writer`'s data with `reader` (both ParsedSchema of type
    PROTOBUF): Confluent's diff from the writer's file to the reader's."""
    diff = ProtobufDiff(_types(writer.parsed, writer.named), _types(reader.parsed, reader.named))
    return list(dict.fromkeys(diff.compare_files(writer.parsed, reader.parsed)))  # a nested message is reached twice
