"""PROTOBUF schemas: .proto text (proto2, proto3) or a base64 FileDescriptorProto in, one
canonical text out.

How this works: a schema is turned into a `FileDescriptorProto`, whichever way it came —
.proto text through `proto-schema-parser`'s AST (names resolved here with protobuf's scoping
rules against the file itself, its references and the well-known google/protobuf files), or
a base64 serialized descriptor, which is what confluent-kafka's ProtobufSerializer
registers. The descriptor is then loaded into a fresh `DescriptorPool` with its
dependencies, so protobuf's own checks (duplicate numbers, a proto3 enum not starting at
zero, an unknown type) refuse what no serializer could use. The stored text is printed back
from the descriptor (`to_text`), every type name fully qualified: the same schema sent as
text with other spacing or comments, or as a descriptor, is one stored text and one id, as
Confluent stores `ProtobufSchema.canonicalString()`. `to_serialized` answers
`?format=serialized`, which the serializers and deserializers ask for.

Not supported, refused with 42201 (never dropped: a descriptor must come back whole from
the stored text, `check_kept`): proto2 groups, `extend` blocks and extensions, custom
options (`option (my.opt) = ...`), repeated or message-valued options, editions.
"""

from __future__ import annotations

import base64
import binascii
import re
from typing import Any, Iterable

from antlr4.error.ErrorListener import ErrorListener
from google.protobuf import descriptor_pb2, descriptor_pool
from google.protobuf.message import DecodeError
from proto_schema_parser import ast
from proto_schema_parser.parser import Parser

from http_common.protobuf_files import WELL_KNOWN, ImportError_, add_imports
from schema_registry.errors import invalid_schema

FDP = descriptor_pb2.FileDescriptorProto
Field = descriptor_pb2.FieldDescriptorProto

SCALARS = {
    "double": Field.TYPE_DOUBLE, "float": Field.TYPE_FLOAT, "int64": Field.TYPE_INT64,
    "uint64": Field.TYPE_UINT64, "int32": Field.TYPE_INT32, "fixed64": Field.TYPE_FIXED64,
    "fixed32": Field.TYPE_FIXED32, "bool": Field.TYPE_BOOL, "string": Field.TYPE_STRING,
    "bytes": Field.TYPE_BYTES, "uint32": Field.TYPE_UINT32, "sfixed32": Field.TYPE_SFIXED32,
    "sfixed64": Field.TYPE_SFIXED64, "sint32": Field.TYPE_SINT32, "sint64": Field.TYPE_SINT64,
}
SCALAR_NAMES = {v: k for k, v in SCALARS.items()}
FIELD_MAX = 536870911  # 2^29 - 1, the largest field number
ENUM_MAX = 2147483647




# ---- reading a schema ------------------------------------------------------------------
class _Raise(ErrorListener):
    """proto-schema-parser's ANTLR parser reports syntax errors and recovers; a registry
    must refuse the text instead."""

    def syntaxError(self, recognizer, offendingSymbol, line, column, msg, e):  # noqa: N802 (ANTLR's name)
        raise invalid_schema(f"line {line}:{column} {msg}")


def _raising(recognizer) -> None:
    recognizer.removeErrorListeners()
    recognizer.addErrorListener(_Raise())


def _parse_text(text: str) -> ast.File:
    return Parser(setup_lexer=_raising, setup_parser=_raising).parse(text)


_BASE64 = re.compile(r"^[A-Za-z0-9+/=\s]+$")


def is_serialized(text: str) -> bool:
    """Whether a submitted schema is a base64 descriptor rather than .proto text (no .proto
    file is only base64 letters: every one holds a `;`, `{` or `"`)."""
    return bool(text.strip()) and _BASE64.match(text) is not None \
        and not text.lstrip().startswith(("syntax", "message", "package", "enum"))


def read(text: str, dependencies: dict[str, FDP]) -> FDP:
    """The descriptor of a submitted schema (.proto text or base64 descriptor);
    `dependencies` maps import names to the referenced files. 42201 when not a schema."""
    if is_serialized(text):
        try:
            proto = FDP.FromString(base64.b64decode(text, validate=False))
        except (DecodeError, binascii.Error, ValueError) as exc:
            raise invalid_schema(f"neither .proto text nor a serialized FileDescriptorProto: {exc}") from None
        proto.name = "default"
        proto.ClearField("source_code_info")
        if not proto.syntax:
            proto.syntax = "proto2"
        return proto
    if not text.strip():
        raise invalid_schema("the schema is empty")
    try:
        proto = _Builder(dependencies).file(_parse_text(text))
    except RecursionError:
        raise invalid_schema("the schema nests too deep") from None
    except (ValueError, TypeError, AttributeError) as exc:  # a value the descriptor cannot hold
        raise invalid_schema(f"{type(exc).__name__}: {exc}") from None
    _check_reserved(proto.message_type, "")
    return proto


def _check_reserved(messages, outer: str) -> None:
    """protoc refuses a field that takes a reserved number or name; the pool does not check."""
    for msg in messages:
        name = f"{outer}{msg.name}"
        for fld in msg.field:
            if fld.name in msg.reserved_name:
                raise invalid_schema(f"field {name}.{fld.name} uses a reserved name")
            if any(r.start <= fld.number < r.end for r in msg.reserved_range):
                raise invalid_schema(f"field {name}.{fld.name} uses reserved number {fld.number}")
        _check_reserved(msg.nested_type, f"{name}.")


def check(proto: FDP, dependencies: dict[str, FDP]) -> None:
    """Load `proto` and its dependencies into a fresh pool: protobuf's own validation.
    42201 naming what is wrong."""
    pool = descriptor_pool.DescriptorPool()
    try:
        add_imports(pool, proto, dependencies)  # ImportError_ is a ValueError
        pool.Add(proto)
        pool.FindFileByName(proto.name)
    except (TypeError, ValueError, KeyError) as exc:
        raise invalid_schema(str(exc)) from None


def _comparable(proto: FDP) -> FDP:
    """`proto` without what carries no meaning for a schema: its file name, source info,
    json names equal to the default, an empty proto2 syntax."""
    out = FDP()
    out.CopyFrom(proto)
    out.name = "default"
    out.ClearField("source_code_info")
    if not out.syntax:
        out.syntax = "proto2"

    def walk(messages) -> None:
        for msg in messages:
            for fld in msg.field:
                if fld.json_name == _camel(fld.name):
                    fld.ClearField("json_name")
            walk(msg.nested_type)

    walk(out.message_type)
    return out


def check_kept(proto: FDP, text: str, dependencies: dict[str, FDP]) -> None:
    """A descriptor must come back whole from its stored text; what would not (extensions,
    custom or aggregate options the text cannot hold) is refused, never silently dropped."""
    try:
        back = read(text, dependencies)
    except Exception as exc:  # noqa: BLE001 (the printer made text its own parser refuses)
        raise invalid_schema(f"the descriptor cannot be kept as .proto text: {exc}") from None
    if _comparable(back) != _comparable(proto):
        lost = [f.name for f, _ in _comparable(proto).ListFields() if getattr(back, f.name) != getattr(proto, f.name)]
        raise invalid_schema("the descriptor holds what this registry cannot keep as .proto text "
                             f"(extensions, custom or aggregate options; differs in {', '.join(lost) or 'options'})")


def to_serialized(proto: FDP) -> str:
    """`?format=serialized`: the base64 FileDescriptorProto the Confluent clients decode."""
    return base64.standard_b64encode(proto.SerializeToString()).decode("ascii")


# ---- .proto AST → FileDescriptorProto ---------------------------------------------------
def _types_of(proto: FDP) -> dict[str, str]:
    """Full names (".pkg.Msg.Inner") of the messages and enums a file declares → kind."""
    found: dict[str, str] = {}

    def walk(prefix: str, messages: Iterable, enums: Iterable) -> None:
        for e in enums:
            found[f"{prefix}.{e.name}"] = "enum"
        for m in messages:
            found[f"{prefix}.{m.name}"] = "message"
            walk(f"{prefix}.{m.name}", m.nested_type, m.enum_type)

    walk("." + proto.package if proto.package else "", proto.message_type, proto.enum_type)
    return found


def _camel(name: str) -> str:
    """protoc's ToJsonName, also how a map field names its entry message."""
    out, upper = [], False
    for ch in name:
        if ch == "_":
            upper = True
        elif upper:
            out.append(ch.upper())
            upper = False
        else:
            out.append(ch)
    return "".join(out)


def _unescape(value: Any) -> Any:
    """proto-schema-parser hands string literals over with their escapes still in."""
    if isinstance(value, str) and "\\" in value:
        try:
            return value.encode("latin-1", "backslashreplace").decode("unicode_escape")
        except UnicodeDecodeError:
            raise invalid_schema(f"bad escape in string {value!r}") from None
    return value


def _ranges(specs: Iterable[str], maximum: int, end_exclusive: bool) -> list[tuple[int, int]]:
    out = []
    for spec in specs:
        parts = [p.strip() for p in str(spec).split("to")]
        try:
            start = int(parts[0], 0)
            end = start if len(parts) == 1 else (maximum if parts[1] == "max" else int(parts[1], 0))
        except ValueError:
            raise invalid_schema(f"bad range {spec!r}") from None
        if end < start:
            raise invalid_schema(f"range {spec!r} ends before it starts")
        out.append((start, end + 1 if end_exclusive else end))
    return out


class _Builder:
    def __init__(self, dependencies: dict[str, FDP]) -> None:
        self.files = {**WELL_KNOWN, **dependencies}
        self.known: dict[str, str] = {}
        self.package = ""
        self._pending: list[tuple[Any, str, str]] = []  # (field proto, written type name, scope)

    def file(self, tree: ast.File) -> FDP:
        if getattr(tree, "edition", None):  # proto-schema-parser 2.1 reads editions
            raise invalid_schema("protobuf editions are not supported; use proto2 or proto3 syntax")
        proto = FDP(name="default", syntax=tree.syntax or "proto2")
        if proto.syntax not in ("proto2", "proto3"):
            raise invalid_schema(f"unknown syntax {proto.syntax!r}")
        self.syntax = proto.syntax
        for element in tree.file_elements:
            if isinstance(element, ast.Package):
                proto.package = element.name
        self.package = proto.package
        scope = "." + proto.package if proto.package else ""
        for element in tree.file_elements:
            if isinstance(element, ast.Import):
                if element.name not in self.files:
                    raise invalid_schema(f"import {element.name!r} is neither a well-known google/protobuf file "
                                         "nor a reference")
                if element.public:
                    proto.public_dependency.append(len(proto.dependency))
                if element.weak:
                    proto.weak_dependency.append(len(proto.dependency))
                proto.dependency.append(element.name)
            elif isinstance(element, ast.Option):
                self._option(proto.options, element)
            elif isinstance(element, ast.Message):
                self._message(proto.message_type.add(), element, scope)
            elif isinstance(element, ast.Enum):
                self._enum(proto.enum_type.add(), element)
            elif isinstance(element, ast.Service):
                self._service(proto.service.add(), element, scope)
            elif isinstance(element, ast.Extension):
                raise invalid_schema("extend blocks are not supported")
        self._collect_known(proto)
        for fld, written, where in self._pending:
            full, kind = self._resolve(written, where)
            if isinstance(fld, descriptor_pb2.MethodDescriptorProto):
                if kind != "message":
                    raise invalid_schema(f"{written!r} is not a message type")
                if fld.input_type == "?":
                    fld.input_type = full
                else:
                    fld.output_type = full
                continue
            fld.type_name = full
            fld.type = Field.TYPE_MESSAGE if kind == "message" else Field.TYPE_ENUM
        return proto

    def _collect_known(self, proto: FDP) -> None:
        """Every type this file can name: its own, its imports' and their public imports'."""
        self.known = dict(_types_of(proto))
        seen: set[str] = set()

        def visible(name: str) -> None:
            if name in seen or name not in self.files:
                return
            seen.add(name)
            dep = self.files[name]
            self.known.update(_types_of(dep))
            for i in dep.public_dependency:
                visible(dep.dependency[i])

        for name in proto.dependency:
            visible(name)

    def _resolve(self, written: str, scope: str) -> tuple[str, str]:
        """Protobuf's scoping: a leading dot is absolute; otherwise the first part is looked
        up from the innermost scope outwards."""
        if written.startswith("."):
            if written in self.known:
                return written, self.known[written]
            raise invalid_schema(f"type {written!r} is not defined")
        first = written.split(".", 1)[0]
        parts = scope.split(".") if scope else [""]
        while True:
            base = ".".join(parts)
            candidate_first = f"{base}.{first}"
            full = f"{base}.{written}"
            if full in self.known:
                return full, self.known[full]
            if candidate_first in self.known and self.known[candidate_first] == "message" and full not in self.known:
                raise invalid_schema(f"type {written!r} is not defined (found {candidate_first[1:]} instead)")
            if not base:
                break
            parts = parts[:-1]
        raise invalid_schema(f"type {written!r} is not defined")

    def _option(self, options: Any, option: ast.Option) -> None:
        name = option.name
        if name.startswith("("):
            raise invalid_schema(f"custom option {name} is not supported (its extension cannot be defined here)")
        field = options.DESCRIPTOR.fields_by_name.get(name)
        if field is None or name == "map_entry":
            raise invalid_schema(f"option {name!r} unknown")
        value = _unescape(option.value)
        if isinstance(value, ast.Identifier):
            value = value.name
        try:
            if field.enum_type is not None:
                number = field.enum_type.values_by_name.get(str(value))
                if number is None:
                    raise invalid_schema(f"option {name}: {value!r} is not one of "
                                         f"{', '.join(field.enum_type.values_by_name)}")
                setattr(options, name, number.number)
            elif field.label == field.LABEL_REPEATED or field.message_type is not None:
                raise invalid_schema(f"option {name!r} is not a plain value")
            else:
                setattr(options, name, value)
        except (TypeError, ValueError) as exc:
            raise invalid_schema(f"option {name}: {exc}") from None

    def _field(self, fld: Any, node: Any, scope: str, oneof: int | None = None) -> None:
        fld.name = node.name
        fld.number = node.number
        card = node.cardinality.value if node.cardinality is not None else None
        if card == "REQUIRED":
            if self.syntax == "proto3":
                raise invalid_schema(f"field {node.name}: required fields are not allowed in proto3")
            fld.label = Field.LABEL_REQUIRED
        elif card == "REPEATED":
            fld.label = Field.LABEL_REPEATED
        else:
            fld.label = Field.LABEL_OPTIONAL
            if card == "OPTIONAL" and self.syntax == "proto3":
                fld.proto3_optional = True
        if oneof is not None:
            if card is not None:
                raise invalid_schema(f"field {node.name}: fields in a oneof take no label")
            fld.oneof_index = oneof
        if node.type in SCALARS:
            fld.type = SCALARS[node.type]
        else:
            self._pending.append((fld, node.type, scope))
        if _camel(node.name) != node.name:
            fld.json_name = _camel(node.name)
        for option in node.options:
            if option.name == "default":
                value = option.value.name if isinstance(option.value, ast.Identifier) else _unescape(option.value)
                fld.default_value = ("true" if value else "false") if isinstance(value, bool) else str(value)
            elif option.name == "json_name":
                fld.json_name = str(_unescape(option.value))
            else:
                self._option(fld.options, option)

    def _message(self, msg: Any, node: ast.Message, outer: str) -> None:
        msg.name = node.name
        scope = f"{outer}.{node.name}"
        optionals = []
        for element in node.elements:
            if isinstance(element, ast.Field):
                fld = msg.field.add()
                self._field(fld, element, scope)
                if fld.proto3_optional:
                    optionals.append(fld)
            elif isinstance(element, ast.MapField):
                self._map(msg, element, scope)
            elif isinstance(element, ast.OneOf):
                index = len(msg.oneof_decl)
                decl = msg.oneof_decl.add(name=element.name)
                for sub in element.elements:
                    if isinstance(sub, ast.Field):
                        self._field(msg.field.add(), sub, scope, index)
                    elif isinstance(sub, ast.Option):
                        self._option(decl.options, sub)
                    elif isinstance(sub, ast.Group):
                        raise invalid_schema("groups are not supported")
            elif isinstance(element, ast.Message):
                self._message(msg.nested_type.add(), element, scope)
            elif isinstance(element, ast.Enum):
                self._enum(msg.enum_type.add(), element)
            elif isinstance(element, ast.Option):
                self._option(msg.options, element)
            elif isinstance(element, ast.Reserved):
                for start, end in _ranges(element.ranges, FIELD_MAX, True):
                    msg.reserved_range.add(start=start, end=end)
                msg.reserved_name.extend(element.names)
            elif isinstance(element, ast.ExtensionRange):
                for start, end in _ranges(element.ranges, FIELD_MAX, True):
                    msg.extension_range.add(start=start, end=end)
            elif isinstance(element, ast.Group):
                raise invalid_schema("groups are not supported")
            elif isinstance(element, ast.Extension):
                raise invalid_schema("extend blocks are not supported")
        # proto3 `optional`: a synthetic oneof each, after the declared ones (as protoc does)
        for fld in optionals:
            fld.oneof_index = len(msg.oneof_decl)
            name = "_" + fld.name
            while any(o.name == name for o in msg.oneof_decl):
                name = "X" + name
            msg.oneof_decl.add(name=name)

    def _map(self, msg: Any, node: ast.MapField, scope: str) -> None:
        entry_name = _camel(node.name)
        entry_name = entry_name[:1].upper() + entry_name[1:] + "Entry"
        entry = msg.nested_type.add(name=entry_name)
        entry.options.map_entry = True
        for number, (name, written) in enumerate((("key", node.key_type), ("value", node.value_type)), 1):
            fld = entry.field.add(name=name, number=number, label=Field.LABEL_OPTIONAL, json_name=name)
            if written in SCALARS:
                fld.type = SCALARS[written]
            elif name == "key":
                raise invalid_schema(f"map {node.name}: a key must be a scalar type, not {written}")
            else:
                self._pending.append((fld, written, scope))
        fld = msg.field.add(name=node.name, number=node.number, label=Field.LABEL_REPEATED,
                            type=Field.TYPE_MESSAGE, type_name=f"{scope}.{entry_name}")
        if _camel(node.name) != node.name:
            fld.json_name = _camel(node.name)
        for option in node.options:
            self._option(fld.options, option)

    def _enum(self, enum: Any, node: ast.Enum) -> None:
        enum.name = node.name
        for element in node.elements:
            if isinstance(element, ast.EnumValue):
                value = enum.value.add(name=element.name, number=element.number)
                for option in element.options:
                    self._option(value.options, option)
            elif isinstance(element, ast.Option):
                self._option(enum.options, element)
            elif isinstance(element, ast.EnumReserved):
                for start, end in _ranges(element.ranges, ENUM_MAX, False):
                    enum.reserved_range.add(start=start, end=end)
                enum.reserved_name.extend(element.names)

    def _service(self, service: Any, node: ast.Service, scope: str) -> None:
        service.name = node.name
        for element in node.elements:
            if isinstance(element, ast.Method):
                method = service.method.add(name=element.name, input_type="?",
                                            client_streaming=element.input_type.stream,
                                            server_streaming=element.output_type.stream)
                self._pending.append((method, element.input_type.type, scope))
                self._pending.append((method, element.output_type.type, scope))
                for option in element.elements:
                    if isinstance(option, ast.Option):
                        self._option(method.options, option)
            elif isinstance(element, ast.Option):
                self._option(service.options, element)


# ---- FileDescriptorProto → canonical text -----------------------------------------------
def _quote(value: str) -> str:
    return '"' + value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n") + '"'


def _value(field, value: Any) -> str:
    if field.enum_type is not None:
        return field.enum_type.values_by_number[value].name
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str):
        return _quote(value)
    if isinstance(value, bytes):
        return _quote(value.decode("latin-1"))
    return repr(value)


def _options(options: Any, *, skip: tuple[str, ...] = ()) -> list[tuple[str, str]]:
    return [(f.name, _value(f, v)) for f, v in options.ListFields() if f.name not in skip]


def _range_text(start: int, end: int, maximum: int) -> str:
    if end == maximum:
        return f"{start} to max"
    return str(start) if start == end else f"{start} to {end}"


def _default_text(fld: Any) -> str:
    if fld.type in (Field.TYPE_STRING, Field.TYPE_BYTES):
        return _quote(fld.default_value)
    return fld.default_value


def to_text(proto: FDP, *, normalize: bool = False) -> str:
    """The canonical .proto text of `proto`: type names fully qualified, one layout; with
    `normalize` also imports and options sorted (Confluent's `normalize=true`)."""
    out: list[str] = [f'syntax = "{proto.syntax or "proto2"}";']
    if proto.package:
        out.append(f"package {proto.package};")
    imports = []
    for i, name in enumerate(proto.dependency):
        kind = "public " if i in proto.public_dependency else "weak " if i in proto.weak_dependency else ""
        imports.append(f'import {kind}"{name}";')
    if imports:
        out += [""] + (sorted(imports) if normalize else imports)
    opts = _options(proto.options)
    if opts:
        out += [""] + [f"option {k} = {v};" for k, v in (sorted(opts) if normalize else opts)]
    proto3 = proto.syntax == "proto3"
    prefix = "." + proto.package if proto.package else ""
    for msg in proto.message_type:
        out += [""] + _message_text(msg, proto3, prefix, normalize)
    for enum in proto.enum_type:
        out += [""] + _enum_text(enum, "", normalize)
    for service in proto.service:
        out += [""] + _service_text(service, normalize)
    return "\n".join(out) + "\n"


def _field_type(fld: Any, entries: dict[str, Any]) -> str:
    if fld.type_name in entries:
        entry = entries[fld.type_name]
        key, value = entry.field[0], entry.field[1]
        return f"map<{_field_type(key, {})}, {_field_type(value, {})}>"
    if fld.type in (Field.TYPE_MESSAGE, Field.TYPE_ENUM) or fld.type_name:
        return fld.type_name
    return SCALAR_NAMES[fld.type]


def _field_text(fld: Any, proto3: bool, entries: dict[str, Any], in_oneof: bool, normalize: bool) -> str:
    kind = _field_type(fld, entries)
    label = ""
    if not in_oneof and fld.type_name not in entries:
        if fld.label == Field.LABEL_REPEATED:
            label = "repeated "
        elif fld.label == Field.LABEL_REQUIRED:
            label = "required "
        elif fld.label == Field.LABEL_OPTIONAL and (not proto3 or fld.proto3_optional):
            label = "optional "
    opts = []
    if fld.HasField("default_value"):
        opts.append(("default", _default_text(fld)))
    if fld.HasField("json_name") and fld.json_name != _camel(fld.name):
        opts.append(("json_name", _quote(fld.json_name)))
    opts += _options(fld.options)
    if normalize:
        opts.sort()
    suffix = f" [{', '.join(f'{k} = {v}' for k, v in opts)}]" if opts else ""
    return f"{label}{kind} {fld.name} = {fld.number}{suffix};"


def _message_text(msg: Any, proto3: bool, outer: str, normalize: bool) -> list[str]:
    pad = "  "
    out = [f"message {msg.name} {{"]
    for k, v in sorted(_options(msg.options)) if normalize else _options(msg.options):
        out.append(f"{pad}option {k} = {v};")
    scope = f"{outer}.{msg.name}"
    entries = {f"{scope}.{n.name}": n for n in msg.nested_type if n.options.map_entry}
    synthetic = {f.oneof_index for f in msg.field if f.proto3_optional and f.HasField("oneof_index")}
    printed_oneofs: set[int] = set()
    fields = sorted(msg.field, key=lambda f: f.number) if normalize else list(msg.field)

    def field_lines(fld) -> list[str]:
        if not (fld.HasField("oneof_index") and fld.oneof_index not in synthetic):
            return [f"{pad}{_field_text(fld, proto3, entries, False, normalize)}"]
        index = fld.oneof_index
        if index in printed_oneofs:
            return []
        printed_oneofs.add(index)
        decl = msg.oneof_decl[index]
        lines = [f"{pad}oneof {decl.name} {{"]
        lines += [f"{pad}{pad}option {k} = {v};" for k, v in _options(decl.options)]
        lines += [f"{pad}{pad}{_field_text(m, proto3, entries, True, normalize)}" for m in fields
                  if m.HasField("oneof_index") and m.oneof_index == index]
        return lines + [f"{pad}}}"]

    # Fields and nested messages are two lists, and a map field adds to both (its entry
    # message): nested messages are printed where the reparse puts them back in the same
    # order around the map entries — after the fields when no map entry follows them.
    by_entry = {fld.type_name: i for i, fld in enumerate(fields) if fld.type_name in entries}
    next_field = 0
    pending: list[Any] = []
    for nested in msg.nested_type:
        if not nested.options.map_entry:
            pending.append(nested)
            continue
        upto = by_entry.get(f"{scope}.{nested.name}")
        if upto is None or upto < next_field:
            continue
        for fld in fields[next_field:upto]:
            out += field_lines(fld)
        for message in pending:
            out += [pad + line for line in _message_text(message, proto3, scope, normalize)]
        pending = []
        out += field_lines(fields[upto])
        next_field = upto + 1
    for fld in fields[next_field:]:
        out += field_lines(fld)
    for message in pending:
        out += [pad + line for line in _message_text(message, proto3, scope, normalize)]
    for enum in msg.enum_type:
        out += [pad + line for line in _enum_text(enum, scope, normalize)]
    if msg.reserved_range:
        out.append(f"{pad}reserved " + ", ".join(_range_text(r.start, r.end - 1, FIELD_MAX)
                                                 for r in msg.reserved_range) + ";")
    if msg.reserved_name:
        out.append(f"{pad}reserved " + ", ".join(_quote(n) for n in msg.reserved_name) + ";")
    if msg.extension_range:
        out.append(f"{pad}extensions " + ", ".join(_range_text(r.start, r.end - 1, FIELD_MAX)
                                                   for r in msg.extension_range) + ";")
    out.append("}")
    return out


def _enum_text(enum: Any, outer: str, normalize: bool) -> list[str]:
    out = [f"enum {enum.name} {{"]
    opts = _options(enum.options)
    for k, v in sorted(opts) if normalize else opts:
        out.append(f"  option {k} = {v};")
    for value in enum.value:
        vopts = _options(value.options)
        suffix = f" [{', '.join(f'{k} = {v}' for k, v in vopts)}]" if vopts else ""
        out.append(f"  {value.name} = {value.number}{suffix};")
    if enum.reserved_range:
        out.append("  reserved " + ", ".join(_range_text(r.start, r.end, ENUM_MAX) for r in enum.reserved_range) + ";")
    if enum.reserved_name:
        out.append("  reserved " + ", ".join(_quote(n) for n in enum.reserved_name) + ";")
    out.append("}")
    return out


def _service_text(service: Any, normalize: bool) -> list[str]:
    out = [f"service {service.name} {{"]
    for k, v in _options(service.options):
        out.append(f"  option {k} = {v};")
    for m in service.method:
        body = ";"
        mopts = _options(m.options)
        if mopts:
            body = " {\n" + "".join(f"    option {k} = {v};\n" for k, v in mopts) + "  }"
        out.append(f"  rpc {m.name}({'stream ' if m.client_streaming else ''}{m.input_type}) returns "
                   f"({'stream ' if m.server_streaming else ''}{m.output_type}){body}")
    out.append("}")
    return out
