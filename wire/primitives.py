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
- A struct's consecutive fixed-width fields are packed and unpacked with one precompiled
  `struct.Struct` (`KStruct` plans them once per message version).
- Encoding writes to any object with `write` (an `io.BytesIO`), as construct does.

Naming follows the protocol guide: "compact" types carry unsigned-varint lengths plus one
(flexible versions, KIP-482), the others int16/int32 lengths; -1 (or 0 when compact)
means null.
"""

from __future__ import annotations

import io
import struct
import uuid as _uuid
from typing import Any

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
        n = _read_len(r, self.compact, False)
        if n < 0:
            if n == -1 and self.nullable:
                return None
            raise KafkaFormatError(f"string length {n}" + ("" if self.nullable else " for a non-nullable string"))
        pos = r.pos
        end = pos + n
        if end > r.end:
            raise KafkaFormatError(f"string of {n} bytes truncated at {r.end - pos}")
        r.pos = end
        try:
            return str(r.buf[pos:end], "utf-8")
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


class Records(Bytes):
    """The `records` type: record batches, returned as a mutable buffer without a copy.

    The broker patches base offsets in place before writing, so the value is a writable
    memoryview of the frame when the frame is writable (the `Connection` hands out views
    of its receive buffer), and a bytearray copy otherwise (a frame given as `bytes`).
    """

    def _parse(self, r, context, path):
        span = self._span(r)
        if span is None:
            return None
        view = r.buf[span[0]:span[1]]
        return bytearray(view) if view.readonly else view


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
            return list(struct.unpack_from(f">{n}{self._code}", r.buf, pos))
        parse = self.element._parse
        return [parse(r, context, path) for _ in range(n)]

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
        stream.write(_len_bytes(n, self.compact, True))
        if self._code is not None:
            try:
                stream.write(struct.pack(f">{n}{self._code}", *obj))
                return obj
            except struct.error:
                pass  # fall through: the element builder names the bad value
        build = self.element._build
        for item in obj:
            build(item, stream, context, path)
        return obj


class TaggedFields(KafkaType):
    """The trailing tagged-field section of a flexible struct (KIP-482).

    Known tags decode with their declared type; unknown tags are kept as raw bytes under
    `UNKNOWN_TAGS` so a re-encode reproduces them. Tags whose value equals the default are
    not written: librdkafka before 2.2 mis-skips any tag it receives (CLIENTS.md §9.1).
    """

    UNKNOWN_TAGS = "_unknown_tags"

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
        last = -1
        for _ in range(count):
            tag = read_uvarint(r)
            size = read_uvarint(r)
            if tag <= last:
                raise KafkaFormatError(f"tagged field {tag} out of order after {last}")
            last = tag
            pos = r.pos
            end = pos + size
            if end > r.end:
                raise KafkaFormatError(f"tagged field {tag} of {size} bytes truncated at {r.end - pos}")
            known = self.fields.get(tag)
            if known is None:
                out.setdefault(self.UNKNOWN_TAGS, {})[tag] = bytes(r.buf[pos:end])
            else:
                name, typ, _default = known
                sub = r.sub(end)
                out[name] = typ._parse(sub, None, name)
                if sub.pos != end:
                    raise KafkaFormatError(f"tagged field {name} declared {size} bytes, used {sub.pos - pos}")
            r.pos = end

    def build_from(self, stream, obj: dict) -> None:
        entries: list[tuple[int, bytes]] = []
        for tag, (name, typ, default) in self.fields.items():
            value = obj.get(name, default)
            if value == default:
                continue
            sub = io.BytesIO()
            typ._build(value, sub, None, name)
            entries.append((tag, sub.getvalue()))
        unknown = obj.get(self.UNKNOWN_TAGS)
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


# Plan steps of a KStruct (see KStruct._plan).
_RUN = 0  # consecutive fixed-width fields: one struct.Struct
_ONE = 1  # any other field


class KStruct(KafkaType):
    """An ordered set of named fields decoding to a dict, plus tagged fields when flexible.

    Building fills absent fields with their defaults, so one handler can answer every
    version of an API: it fills what it knows and each version writes what it has.

    `fields` is the declaration, a list of (name, type, default); the struct runs a plan
    compiled from it in which consecutive fixed-width fields are one `struct.Struct`.
    """

    def __init__(self, fields: list[tuple[str, construct.Construct, Any]], tagged: TaggedFields | None) -> None:
        super().__init__()
        self.fields = fields
        self.tagged = tagged
        self.default = None
        self.min_size = sum(getattr(t, "min_size", 1) for _n, t, _d in fields) + (1 if tagged is not None else 0)
        self._plan = self._compile(fields)

    @staticmethod
    def _compile(fields):
        plan: list[tuple] = []
        run: list[tuple[str, Fixed, Any]] = []

        def flush():
            if not run:
                return
            if len(run) == 1:
                name, typ, default = run[0]
                plan.append((_ONE, name, typ, default, default is not None))
            else:
                fmt = struct.Struct(">" + "".join(t.code for _n, t, _d in run))
                names = tuple(n for n, _t, _d in run)
                defaults = tuple(d for _n, _t, d in run)
                plan.append((_RUN, fmt, names, defaults, tuple(run)))
            run.clear()

        for name, typ, default in fields:
            if isinstance(typ, Fixed):
                run.append((name, typ, default))
                continue
            flush()
            # None for a non-nullable field with a default means "the default".
            replace_none = default is not None and not getattr(typ, "nullable", False)
            plan.append((_ONE, name, typ, default, replace_none))
        flush()
        return plan

    def _parse(self, r, context, path):
        out = {}
        for step in self._plan:
            if step[0] == _RUN:
                fmt = step[1]
                pos = r.pos
                end = pos + fmt.size
                if end > r.end:
                    raise KafkaFormatError(f"{', '.join(step[2])}: needs {fmt.size} bytes, {r.end - pos} left")
                r.pos = end
                for name, value in zip(step[2], fmt.unpack_from(r.buf, pos)):
                    out[name] = value
            else:
                name = step[1]
                try:
                    out[name] = step[2]._parse(r, context, name)
                except KafkaFormatError as exc:
                    raise KafkaFormatError(f"{name}: {exc}") from None
        if self.tagged is not None:
            self.tagged.parse_into(r, out)
        return out

    def _build(self, obj, stream, context, path):
        try:
            get = obj.get
        except AttributeError:
            raise KafkaFormatError(f"{'null' if obj is None else type(obj).__name__} value for a struct") from None
        write = stream.write
        for step in self._plan:
            if step[0] == _RUN:
                values = [get(n, d) for n, d in zip(step[2], step[3])]
                if None in values:
                    values = [d if v is None else v for v, d in zip(values, step[3])]
                try:
                    write(step[1].pack(*values))
                except struct.error:
                    # Name the field at fault: rebuild one by one (raises on the bad one).
                    for (name, typ, _d), value in zip(step[4], values):
                        try:
                            typ._build(value, io.BytesIO(), context, name)
                        except KafkaFormatError as exc:
                            raise KafkaFormatError(f"{name}: {exc}") from None
                    raise KafkaFormatError(f"{', '.join(step[2])}: values {values!r} do not fit") from None
            else:
                _k, name, typ, default, replace_none = step
                value = get(name, default)
                if value is None and replace_none:
                    value = default
                try:
                    typ._build(value, stream, context, name)
                except KafkaFormatError as exc:
                    raise KafkaFormatError(f"{name}: {exc}") from None
        if self.tagged is not None:
            self.tagged.build_from(stream, obj)
        return obj

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
