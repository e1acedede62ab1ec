"""Kafka's primitive types as `construct` classes.

Each class is a `construct.Construct`: construct gives the declarative shape (a message
version is a tree of these, see `wire.schema`), and the classes skip construct's generic
machinery where it costs per field.

How this works:
- Decoding reads from a `Reader` — a memoryview plus a position — instead of a stream,
  so nothing is copied on the way in: fixed-width fields are `unpack_from` the frame,
  strings decode straight out of it, and `records` come back as a view of the frame
  itself (the broker patches base offsets in place, so a produced batch is never copied
  between the socket buffer and the log file).
- Every length and count is checked against the bytes left before anything is allocated
  or looped over, so a lying prefix fails fast instead of allocating or spinning.
- Each struct (a message version, or a struct inside one) compiles its own parse and
  build functions once: no per-field dispatch, and consecutive fixed-width fields are
  packed and unpacked with one precompiled `struct.Struct`.
- Encoding writes to any object with `write` (an `io.BytesIO`), as construct does.

Naming follows the protocol guide: "compact" types carry unsigned-varint lengths plus one
(flexible versions, KIP-482), the others int16/int32 lengths; -1 (or 0 when compact)
means null.
"""

from __future__ import annotations

import io
import struct
import uuid as _uuid
from typing import Any, Protocol

import construct

_I8 = struct.Struct(">b")
_I16 = struct.Struct(">h")
_I32 = struct.Struct(">i")
_I64 = struct.Struct(">q")
_U16 = struct.Struct(">H")
_U32 = struct.Struct(">I")
_F64 = struct.Struct(">d")
_BOOL = struct.Struct(">?")

ZERO_UUID = _uuid.UUID(int=0)

# Kafka's unsigned varints hold 32 bits: at most 5 bytes (ByteUtils.readUnsignedVarint).
_UVARINT_MAX_BYTES = 5
# Zigzag varlongs hold 64 bits: at most 10 bytes.
_VARLONG_MAX_BYTES = 10


class KafkaFormatError(construct.ConstructError):
    """Bytes that do not decode as the declared Kafka type, or a value that cannot be encoded."""


class Reader:
    """A read position over a byte buffer: what every `_parse` here takes.

    `end` bounds the readable part, so a tagged field's value is parsed from a Reader
    over the same memory instead of a copy. Writable input (a bytearray, or a view of
    one) gives writable `records` views.
    """

    __slots__ = ("buf", "pos", "end")

    def __init__(self, data: bytes | bytearray | memoryview, pos: int = 0, end: int | None = None) -> None:
        buf = data if type(data) is memoryview else memoryview(data)
        if buf.format != "B" or buf.ndim != 1:
            buf = buf.cast("B")
        self.buf = buf
        self.pos = pos
        self.end = len(buf) if end is None else end

    def sub(self, end: int) -> "Reader":
        """A reader over [pos, end) of the same buffer."""
        r = Reader.__new__(Reader)
        r.buf = self.buf
        r.pos = self.pos
        r.end = end
        return r

    @property
    def remaining(self) -> int:
        return self.end - self.pos

    # The file-like subset construct's own classes expect of a stream.
    def read(self, n: int = -1) -> bytes:
        pos = self.pos
        end = self.end if n < 0 else min(self.end, pos + n)
        self.pos = end
        return bytes(self.buf[pos:end])

    def tell(self) -> int:
        return self.pos

    def seek(self, offset: int, whence: int = 0) -> int:
        base = (0, self.pos, self.end)[whence]
        self.pos = base + offset
        return self.pos


def _truncated(what: str, needed: int, left: int) -> KafkaFormatError:
    return KafkaFormatError(f"{what} needs {needed} bytes, {max(left, 0)} left")


def read_exact(r: Reader, n: int) -> bytes:
    pos = r.pos
    end = pos + n
    if n < 0 or end > r.end:
        raise _truncated("read", n, r.end - pos)
    r.pos = end
    return bytes(r.buf[pos:end])


def read_uvarint(r: Reader, max_bytes: int = _UVARINT_MAX_BYTES) -> int:
    """Unsigned LEB128 varint of at most `max_bytes` bytes."""
    buf = r.buf
    pos = r.pos
    end = r.end
    if pos >= end:
        raise KafkaFormatError("varint truncated")
    byte = buf[pos]
    if byte < 0x80:  # the common case: one byte
        r.pos = pos + 1
        return byte
    result = byte & 0x7F
    shift = 7
    limit = min(end, pos + max_bytes)
    pos += 1
    while pos < limit:
        byte = buf[pos]
        pos += 1
        result |= (byte & 0x7F) << shift
        if byte < 0x80:
            r.pos = pos
            return result
        shift += 7
    if pos >= end and pos - r.pos < max_bytes:
        raise KafkaFormatError("varint truncated")
    raise KafkaFormatError(f"varint longer than {max_bytes} bytes")


def uvarint_bytes(value: int) -> bytes:
    if value < 0:
        raise KafkaFormatError(f"unsigned varint cannot hold {value}")
    if value < 0x80:
        return _SMALL_UVARINTS[value]
    out = bytearray()
    while value > 0x7F:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


_SMALL_UVARINTS = [bytes((i,)) for i in range(0x80)]
_MISSING = object()


def write_uvarint(stream, value: int) -> None:
    stream.write(uvarint_bytes(value))


class KafkaType(construct.Construct):
    """Base: a Kafka type knows its default value (what an absent field encodes as).

    `min_size` is the fewest bytes one value can take; arrays use it to reject counts the
    bytes left cannot hold before looping.
    """

    default: Any = None
    min_size: int = 1

    def _sizeof(self, context, path):  # pragma: no cover - sizes are dynamic
        raise construct.SizeofError("Kafka types have no static size", path=path)

    # construct's entry points hand us streams; our _parse takes a Reader.
    def parse(self, data, **contextkw):
        return self._parse(Reader(data), None, "(parsing)")

    def parse_stream(self, stream, **contextkw):
        return self._parsereport(stream, None, "(parsing)")

    def _parsereport(self, stream, context, path):
        if isinstance(stream, Reader):
            return self._parse(stream, context, path)
        start = stream.tell()
        r = Reader(stream.read())
        value = self._parse(r, context, path)
        stream.seek(start + r.pos)
        return value


_CODE_NAMES = {"b": "int8", "h": "int16", "i": "int32", "q": "int64", "H": "uint16", "I": "uint32", "d": "float64",
               "?": "bool"}


class Fixed(KafkaType):
    """Fixed-width numbers: int8/16/32/64, uint16/32, float64 (and bool, as `?`)."""

    def __init__(self, fmt: struct.Struct, default: Any = 0) -> None:
        super().__init__()
        self.fmt = fmt
        self.size = fmt.size
        self.min_size = fmt.size
        self.code = fmt.format[-1]
        self.default = default

    def _parse(self, r, context, path):
        pos = r.pos
        end = pos + self.size
        if end > r.end:
            raise _truncated(_CODE_NAMES[self.code], self.size, r.end - pos)
        r.pos = end
        return self.fmt.unpack_from(r.buf, pos)[0]

    def _build(self, obj, stream, context, path):
        try:
            stream.write(self.fmt.pack(obj))
        except struct.error as exc:
            raise KafkaFormatError(f"{obj!r} does not fit: {exc}") from None
        return obj


class Boolean(Fixed):
    """A byte: 0 is false, anything else true (Kafka readers accept any non-zero)."""

    def __init__(self) -> None:
        super().__init__(_BOOL, False)

    def _build(self, obj, stream, context, path):
        stream.write(b"\x01" if obj else b"\x00")
        return obj


class UVarInt(KafkaType):
    default = 0

    def _parse(self, r, context, path):
        return read_uvarint(r)

    def _build(self, obj, stream, context, path):
        write_uvarint(stream, obj)
        return obj


class VarInt(KafkaType):
    """Zigzag-encoded signed varint/varlong (record fields)."""

    default = 0

    def _parse(self, r, context, path):
        raw = read_uvarint(r, _VARLONG_MAX_BYTES)
        return (raw >> 1) ^ -(raw & 1)

    def _build(self, obj, stream, context, path):
        write_uvarint(stream, (obj << 1) ^ (obj >> 63))
        return obj


class Uuid(KafkaType):
    default = ZERO_UUID
    min_size = 16

    def _parse(self, r, context, path):
        pos = r.pos
        end = pos + 16
        if end > r.end:
            raise _truncated("uuid", 16, r.end - pos)
        r.pos = end
        return _uuid.UUID(bytes=bytes(r.buf[pos:end]))

    def _build(self, obj, stream, context, path):
        if obj is None:
            obj = ZERO_UUID
        try:
            stream.write(obj.bytes)
        except AttributeError:
            raise KafkaFormatError(f"{obj!r} is not a uuid.UUID") from None
        return obj


def _read_len(r: Reader, compact: bool, wide: bool) -> int:
    """Length prefix: -1 means null. Compact lengths are stored plus one."""
    if compact:
        return read_uvarint(r) - 1
    pos = r.pos
    if wide:
        if pos + 4 > r.end:
            raise _truncated("int32 length", 4, r.end - pos)
        r.pos = pos + 4
        return _I32.unpack_from(r.buf, pos)[0]
    if pos + 2 > r.end:
        raise _truncated("int16 length", 2, r.end - pos)
    r.pos = pos + 2
    return _I16.unpack_from(r.buf, pos)[0]


def _len_bytes(n: int, compact: bool, wide: bool) -> bytes:
    if compact:
        if n < 0x7F:
            return _SMALL_UVARINTS[n + 1]
        return uvarint_bytes(n + 1)
    return (_I32 if wide else _I16).pack(n)


class String(KafkaType):
    """string / nullable string / compact (nullable) string, UTF-8."""

    def __init__(self, compact: bool, nullable: bool, default: str | None = "") -> None:
        super().__init__()
        self.compact = compact
        self.nullable = nullable
        self.default = default
        self.min_size = 1 if compact else 2

    def _parse(self, r, context, path):
        buf = r.buf
        pos = r.pos
        # The length prefix, read inline: strings are the most common variable field.
        if self.compact:
            if pos < r.end and buf[pos] < 0x80:
                n = buf[pos] - 1
                pos += 1
            else:
                n = read_uvarint(r) - 1
                pos = r.pos
        else:
            if pos + 2 > r.end:
                raise _truncated("int16 length", 2, r.end - pos)
            n = _I16.unpack_from(buf, pos)[0]
            pos += 2
        if n < 0:
            if n == -1 and self.nullable:
                r.pos = pos
                return None
            raise KafkaFormatError(f"string length {n}" + ("" if self.nullable else " for a non-nullable string"))
        end = pos + n
        if end > r.end:
            raise KafkaFormatError(f"string of {n} bytes truncated at {r.end - pos}")
        r.pos = end
        try:
            return str(buf[pos:end], "utf-8")
        except UnicodeDecodeError as exc:
            raise KafkaFormatError(f"string is not UTF-8: {exc}") from None

    def _build(self, obj, stream, context, path):
        if obj is None:
            if not self.nullable:
                raise KafkaFormatError("null for a non-nullable string")
            stream.write(b"\x00" if self.compact else b"\xff\xff")
            return obj
        try:
            data = obj.encode("utf-8")
        except AttributeError:
            raise KafkaFormatError(f"{type(obj).__name__} value {obj!r} for a string") from None
        if not self.compact and len(data) > 0x7FFF:
            raise KafkaFormatError(f"string of {len(data)} bytes exceeds int16 length")
        stream.write(_len_bytes(len(data), self.compact, False))
        stream.write(data)
        return obj


def _byte_length(obj) -> int:
    if isinstance(obj, str):
        raise KafkaFormatError("str value for bytes (encode it first)")
    try:
        return obj.nbytes if type(obj) is memoryview else len(obj)
    except TypeError:
        raise KafkaFormatError(f"{type(obj).__name__} value for bytes") from None


class Bytes(KafkaType):
    """bytes / nullable bytes / compact (nullable) bytes.

    Parsed values are `bytes` (a copy: these fields are small, and a copy does not keep
    the whole receive buffer alive); building accepts anything with the buffer protocol.
    """

    def __init__(self, compact: bool, nullable: bool, default: bytes | None = b"") -> None:
        super().__init__()
        self.compact = compact
        self.nullable = nullable
        self.default = default
        self.min_size = 1 if compact else 4

    def _span(self, r):
        """(start, end) of the value, or None for null."""
        n = _read_len(r, self.compact, True)
        if n < 0:
            if n == -1 and self.nullable:
                return None
            raise KafkaFormatError(f"bytes length {n}" + ("" if self.nullable else " for non-nullable bytes"))
        pos = r.pos
        end = pos + n
        if end > r.end:
            raise KafkaFormatError(f"bytes of length {n} truncated at {r.end - pos}")
        r.pos = end
        return pos, end

    def _parse(self, r, context, path):
        span = self._span(r)
        if span is None:
            return None
        return bytes(r.buf[span[0]:span[1]])

    def _build(self, obj, stream, context, path):
        if obj is None:
            if not self.nullable:
                raise KafkaFormatError("null for non-nullable bytes")
            stream.write(b"\x00" if self.compact else b"\xff\xff\xff\xff")
            return obj
        stream.write(_len_bytes(_byte_length(obj), self.compact, True))
        stream.write(obj)
        return obj


class Region(Protocol):
    """Bytes that live elsewhere (a span of a segment file) and are sent by the caller.

    A `records` value that is not bytes-like but has a length is a region: the codec
    writes its length prefix and leaves the bytes to whoever sends the frame (see
    `wire.connection.encode_response_parts`). The codec needs nothing but the length;
    what a region is (a pinned segment, a file) is the server's business.
    """

    def __len__(self) -> int: ...


class Records(Bytes):
    """The `records` type: record batches, returned as a mutable buffer without a copy.

    The broker patches base offsets in place before writing, so the value is a writable
    memoryview of the frame when the frame is writable (the `Connection` hands out views
    of its receive buffer), and a bytearray copy otherwise (a frame given as `bytes`).

    Building takes bytes-like values, or a `Region`: its length prefix is written and
    (stream offset, region) appended to the build context, which the parts encoder makes
    a list (`wire.connection.encode_response_parts`). Any other encode passes None, and
    refuses a region as a value of the wrong type. (The context, not a stream subclass:
    an `io.BytesIO` subclass costs 2 us to make and more per write.)
    """

    def _parse(self, r, context, path):
        span = self._span(r)
        if span is None:
            return None
        view = r.buf[span[0]:span[1]]
        return bytearray(view) if view.readonly else view

    def _build(self, obj, stream, context, path):
        kind = type(obj)
        if kind is bytes or kind is bytearray or kind is memoryview or obj is None:
            return Bytes._build(self, obj, stream, context, path)
        try:
            memoryview(obj).release()
        except TypeError:
            pass  # not bytes-like: a region, or a wrong value
        else:
            return Bytes._build(self, obj, stream, context, path)
        if isinstance(obj, str):
            raise KafkaFormatError("str value for records")
        if type(context) is not list:
            raise KafkaFormatError(f"{kind.__name__} value for records (a region needs the parts encoder)")
        try:
            n = len(obj)
        except TypeError:
            raise KafkaFormatError(f"{kind.__name__} value for records") from None
        if not self.compact and n > 0x7FFFFFFF:
            raise KafkaFormatError(f"records region of {n} bytes exceeds int32 length")
        stream.write(_len_bytes(n, self.compact, True))
        context.append((stream.tell(), obj))
        return obj


class Array(KafkaType):
    """array / compact array of one element type, nullable per version."""

    def __init__(self, element: construct.Construct, compact: bool, nullable: bool, default: Any = ()) -> None:
        super().__init__()
        self.element = element
        self.compact = compact
        self.nullable = nullable
        self.default = None if default is None else []
        self.min_size = 1 if compact else 4
        # Arrays of numbers unpack and pack in one call: ">{n}i".
        self._code = element.code if type(element) is Fixed else None
        self._structs: dict[int, struct.Struct] = {}
        self._prefixed: dict[int, struct.Struct] = {}
        # Never below 1: an element type that can take zero bytes would let a lying
        # count loop for free (no served message has one; a test checks).
        self._item_size = max(1, getattr(element, "min_size", 1))

    def _parse(self, r, context, path):
        n = _read_len(r, self.compact, True)
        if n < 0:
            if n == -1 and self.nullable:
                return None
            if n == -1:
                # Kafka's own readers accept a null array where the schema forbids it
                # and treat it as empty; some clients send it (e.g. empty topic lists).
                return []
            raise KafkaFormatError(f"array count {n}")
        # Every element takes at least `_item_size` bytes: a count the bytes left cannot
        # hold is a lie, refused before anything is allocated.
        if n * self._item_size > r.end - r.pos:
            raise KafkaFormatError(f"array count {n} exceeds the {r.end - r.pos} bytes left")
        if self._code is not None:
            pos = r.pos
            r.pos = pos + n * self._item_size
            return list(self._struct_for(n).unpack_from(r.buf, pos))
        parse = self.element._parse
        return [parse(r, context, path) for _ in range(n)]

    def _struct_for(self, n: int) -> struct.Struct:
        fmt = self._structs.get(n)
        if fmt is None:
            fmt = struct.Struct(f">{n}{self._code}")
            if n <= 64:  # small counts recur (replica lists); large ones are not worth keeping
                self._structs[n] = fmt
        return fmt

    def _prefixed_struct_for(self, n: int) -> struct.Struct | None:
        """Count and elements in one struct: ">i{n}i", or ">B{n}i" for a compact count
        that fits one byte (None for bigger compact counts)."""
        fmt = self._prefixed.get(n)
        if fmt is None:
            if self.compact and n + 1 > 0x7F:
                return None
            fmt = struct.Struct(f">{'B' if self.compact else 'i'}{n}{self._code}")
            if n <= 64:
                self._prefixed[n] = fmt
        return fmt

    def _build(self, obj, stream, context, path):
        if obj is None:
            if not self.nullable:
                obj = []
            else:
                stream.write(b"\x00" if self.compact else b"\xff\xff\xff\xff")
                return obj
        try:
            n = len(obj)
        except TypeError:
            raise KafkaFormatError(f"{type(obj).__name__} value for an array") from None
        if self._code is not None:
            fmt = self._prefixed_struct_for(n)
            if fmt is not None:
                try:
                    stream.write(fmt.pack(n + 1 if self.compact else n, *obj))
                    return obj
                except struct.error:
                    pass  # fall through: the element builder names the bad value
        stream.write(_len_bytes(n, self.compact, True))
        build = self.element._build
        for item in obj:
            build(item, stream, context, path)
        return obj


class TaggedFields(KafkaType):
    """The trailing tagged-field section of a flexible struct (KIP-482).

    Known tags decode with their declared type; unknown tags are kept as raw bytes under
    `UNKNOWN_TAGS` so a re-encode reproduces them. Tags whose value equals the default are
    not written: librdkafka before 2.2 mis-skips any tag it receives
    (docs/design/clients.md#no-tagged-fields-at-their-default).
    A known tag that arrived explicitly at its default value (Tansu writes ApiVersions'
    feature tags and Fetch's node_endpoints that way) is also kept raw, under
    `DEFAULT_TAGS`, so a decoded frame re-encodes to the same bytes; bodies built by
    handlers never carry it, so the broker itself writes no default-valued tags.
    """

    UNKNOWN_TAGS = "_unknown_tags"
    DEFAULT_TAGS = "_default_tags"

    def __init__(self, fields: dict[int, tuple[str, construct.Construct, Any]]) -> None:
        super().__init__()
        self.fields = fields  # tag -> (name, type, default)

    def parse_into(self, r: Reader, out: dict) -> None:
        count = read_uvarint(r)
        if not count:
            return
        # Each tagged field takes at least two bytes (tag, size).
        if count * 2 > r.end - r.pos:
            raise KafkaFormatError(f"tagged field count {count} exceeds the {r.end - r.pos} bytes left")
        # Writers emit tags in ascending order; like Kafka's generated readers, we do not
        # insist on it (a repeated tag: the last one wins).
        for _ in range(count):
            tag = read_uvarint(r)
            size = read_uvarint(r)
            pos = r.pos
            end = pos + size
            if end > r.end:
                raise KafkaFormatError(f"tagged field {tag} of {size} bytes truncated at {r.end - pos}")
            known = self.fields.get(tag)
            if known is None:
                out.setdefault(self.UNKNOWN_TAGS, {})[tag] = bytes(r.buf[pos:end])
            else:
                name, typ, default = known
                sub = r.sub(end)
                try:
                    value = out[name] = typ._parse(sub, None, name)
                except KafkaFormatError as exc:
                    raise KafkaFormatError(f"{name} (tag {tag}): {exc}") from None
                if sub.pos != end:
                    raise KafkaFormatError(f"tagged field {name} declared {size} bytes, used {sub.pos - pos}")
                if value == default:
                    out.setdefault(self.DEFAULT_TAGS, {})[tag] = bytes(r.buf[pos:end])
            r.pos = end

    def build_from(self, stream, obj: dict) -> None:
        entries: list[tuple[int, bytes]] | None = None
        get = obj.get
        for tag, (name, typ, default) in self.fields.items():
            value = get(name, _MISSING)
            if value is _MISSING or value is default or value == default:
                continue
            if value is None and not getattr(typ, "nullable", False):
                continue  # None means "the default" for tags too (see KStruct)
            sub = io.BytesIO()
            try:
                typ._build(value, sub, None, name)
            except KafkaFormatError as exc:
                raise KafkaFormatError(f"{name} (tag {tag}): {exc}") from None
            if entries is None:
                entries = []
            entries.append((tag, sub.getvalue()))
        unknown = get(self.UNKNOWN_TAGS)
        kept_defaults = get(self.DEFAULT_TAGS)
        if unknown or kept_defaults:
            entries = entries or []
            if kept_defaults:
                written = {tag for tag, _data in entries}
                entries.extend(item for item in kept_defaults.items() if item[0] not in written)
            if unknown:
                entries.extend(unknown.items())
            entries.sort()
        if not entries:
            stream.write(b"\x00")
            return
        out = [uvarint_bytes(len(entries))]
        for tag, data in entries:
            out.append(uvarint_bytes(tag))
            out.append(uvarint_bytes(len(data)))
            out.append(data)
        stream.write(b"".join(out))

    def _parse(self, r, context, path):
        out: dict = {}
        self.parse_into(r, out)
        return out

    def _build(self, obj, stream, context, path):
        self.build_from(stream, obj or {})
        return obj


def _short(names: tuple[str, ...], size: int, left: int) -> KafkaFormatError:
    return KafkaFormatError(f"{', '.join(names)}: needs {size} bytes, {max(left, 0)} left")


def _prefixed(name: str, exc: Exception) -> KafkaFormatError:
    return KafkaFormatError(f"{name}: {exc}")


def _run_error(run: tuple, values: tuple) -> KafkaFormatError:
    """The error for a run of fixed-width values that did not pack: name the bad one."""
    for (name, typ, _default), value in zip(run, values):
        try:
            typ._build(value, io.BytesIO(), None, name)
        except KafkaFormatError as exc:
            return _prefixed(name, exc)
    return KafkaFormatError(f"{', '.join(n for n, _t, _d in run)}: {values!r} do not fit")


class KStruct(KafkaType):
    """An ordered set of named fields decoding to a dict, plus tagged fields when flexible.

    Building fills absent fields with their defaults, so one handler can answer every
    version of an API: it fills what it knows and each version writes what it has; None
    for a non-nullable field with a default means the default.

    `fields` is the declaration, a list of (name, type, default). From it each struct
    compiles, once, a parse and a build function specialised to its fields (as
    construct's own compiler and kafka-python's codec do): consecutive fixed-width fields
    become one `struct.Struct`, and there is no per-field loop or dispatch. The generated
    source is kept in `source` for reading.
    """

    def __init__(self, fields: list[tuple[str, construct.Construct, Any]], tagged: TaggedFields | None) -> None:
        super().__init__()
        self.fields = fields
        self.tagged = tagged
        self.default = None
        self.min_size = sum(getattr(t, "min_size", 1) for _n, t, _d in fields) + (1 if tagged is not None else 0)
        self.source = self._compile()

    @staticmethod
    def _runs(fields):
        """Group consecutive fixed-width fields: [("run", [(name, type, default), ...]) | ("one", field)]."""
        steps: list[tuple[str, Any]] = []
        for field in fields:
            if isinstance(field[1], Fixed):
                if steps and steps[-1][0] == "run":
                    steps[-1][1].append(field)
                else:
                    steps.append(("run", [field]))
            else:
                steps.append(("one", field))
        return steps

    def _compile(self) -> str:
        env: dict[str, Any] = {"KafkaFormatError": KafkaFormatError, "struct_error": struct.error,
                               "_short": _short, "_prefixed": _prefixed, "_run_error": _run_error,
                               "TAGS": self.tagged}
        parse = ["def _parse(r, context, path):", "    buf = r.buf", "    out = {}"]
        build = ["def _build(obj, stream, context, path):",
                 "    try:", "        get = obj.get", "    except AttributeError:",
                 "        raise KafkaFormatError(f\"{'null' if obj is None else type(obj).__name__}"
                 " value for a struct\") from None",
                 "    write = stream.write"]
        for i, (kind, what) in enumerate(self._runs(self.fields)):
            if kind == "run":
                fmt = struct.Struct(">" + "".join(t.code for _n, t, _d in what))
                env[f"S{i}"], env[f"N{i}"], env[f"R{i}"] = fmt, tuple(n for n, _t, _d in what), tuple(what)
                targets = ", ".join(f"out[{n!r}]" for n, _t, _d in what)
                parse += [
                    "    pos = r.pos",
                    f"    if pos + {fmt.size} > r.end:",
                    f"        raise _short(N{i}, {fmt.size}, r.end - pos)",
                    f"    {targets}{',' if len(what) == 1 else ''} = S{i}.unpack_from(buf, pos)",
                    f"    r.pos = pos + {fmt.size}",
                ]
                names = []
                for j, (name, _typ, default) in enumerate(what):
                    env[f"D{i}_{j}"] = default
                    names.append(f"v{i}_{j}")
                    build.append(f"    v{i}_{j} = get({name!r}, D{i}_{j})")
                    if default is not None:
                        build += [f"    if v{i}_{j} is None:", f"        v{i}_{j} = D{i}_{j}"]
                values = ", ".join(names)
                build += ["    try:", f"        write(S{i}.pack({values}))", "    except struct_error:",
                          f"        raise _run_error(R{i}, ({values},)) from None"]
            else:
                name, typ, default = what
                env[f"T{i}"], env[f"D{i}"] = typ, default
                parse += ["    try:", f"        out[{name!r}] = T{i}._parse(r, context, {name!r})",
                          "    except KafkaFormatError as exc:", f"        raise _prefixed({name!r}, exc) from None"]
                build.append(f"    v{i} = get({name!r}, D{i})")
                if default is not None and not getattr(typ, "nullable", False):
                    build += [f"    if v{i} is None:", f"        v{i} = D{i}"]
                build += ["    try:", f"        T{i}._build(v{i}, stream, context, {name!r})",
                          "    except KafkaFormatError as exc:", f"        raise _prefixed({name!r}, exc) from None"]
        if self.tagged is not None:
            parse.append("    TAGS.parse_into(r, out)")
            build.append("    TAGS.build_from(stream, obj)")
        parse.append("    return out")
        build.append("    return obj")
        source = "\n".join(parse) + "\n\n\n" + "\n".join(build) + "\n"
        exec(compile(source, f"<KStruct {', '.join(n for n, _t, _d in self.fields)[:60]}>", "exec"), env)
        # Instance attributes shadow the class's methods: callers (arrays, tags, schema)
        # reach the generated functions without an extra call layer.
        self._parse = env["_parse"]
        self._build = env["_build"]
        return source

    def _parse(self, r, context, path):  # replaced per instance by _compile
        raise NotImplementedError

    def _build(self, obj, stream, context, path):  # replaced per instance by _compile
        raise NotImplementedError

    def defaults(self) -> dict:
        """A dict of every field at its default (used to fill nested structs)."""
        out = {}
        for name, _typ, default in self.fields:
            out[name] = list(default) if isinstance(default, list) else default
        return out


INT8 = Fixed(_I8)
INT16 = Fixed(_I16)
INT32 = Fixed(_I32)
INT64 = Fixed(_I64)
UINT16 = Fixed(_U16)
UINT32 = Fixed(_U32)
FLOAT64 = Fixed(_F64, 0.0)
BOOLEAN = Boolean()
UUID = Uuid()
UVARINT = UVarInt()
VARINT = VarInt()

FIXED_TYPES = {
    "int8": INT8,
    "int16": INT16,
    "int32": INT32,
    "int64": INT64,
    "uint16": UINT16,
    "uint32": UINT32,
    "float64": FLOAT64,
    "bool": BOOLEAN,
    "uuid": UUID,
}
