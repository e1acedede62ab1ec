"""The PROTOBUF embedded format: JSON objects to protobuf messages in Confluent's wire format,
and back.

How this works: the registry hands a PROTOBUF schema out as a base64 FileDescriptorProto
(`?format=serialized`, what confluent-kafka's serializers load), with its references the
same way; they go into a fresh `DescriptorPool` per schema id (two schemas may reuse a file
name with other contents) and `message_factory` builds the message classes, cached per id
and message. Produced values are parsed with `json_format.ParseDict` into the schema's
first message, as Confluent's `ProtobufSchemaUtils.toObject` uses `newMessageBuilder()`
(the file's first message); unknown fields are refused as Java's `JsonFormat.parser()`
does. Records are answered with `json_format.MessageToDict` printing fields without
presence too and lowerCamelCase (json_name) field names: Confluent's `toJson` is
`JsonFormat.printer().includingDefaultValueFields()`.

Wire format (what ProtobufSerializer writes and ProtobufDeserializer reads): magic 0, the
schema id as 4 big-endian bytes, the message-index path (zigzag varints: the count then
each index, or a single 0 for [0], the first message of the file), the message bytes.

The proxy imports nothing of schema_registry (an import contract): files are loaded
by `http_common.protobuf_files`, which the registry uses too.
"""

from __future__ import annotations

import base64
import binascii
from typing import Any

from google.protobuf import descriptor_pb2, descriptor_pool, json_format, message_factory
from google.protobuf.message import DecodeError

from http_common.protobuf_files import add_imports
from rest_proxy import errors

FDP = descriptor_pb2.FileDescriptorProto




def read_file(serialized: str) -> FDP:
    """A registry's `?format=serialized` schema text as a FileDescriptorProto."""
    try:
        return FDP.FromString(base64.b64decode(serialized, validate=True))
    except (binascii.Error, ValueError, DecodeError) as exc:
        raise errors.schema_registry_unavailable(f"a PROTOBUF schema is not a serialized descriptor: {exc}") from None


def _zigzag(n: int) -> bytes:
    n = (n << 1) ^ (n >> 63)
    out = bytearray()
    while True:
        bits = n & 0x7F
        n >>= 7
        if n:
            out.append(bits | 0x80)
        else:
            out.append(bits)
            return bytes(out)


def _read_zigzag(data: bytes, pos: int) -> tuple[int, int]:
    shift = result = 0
    while True:
        if pos >= len(data) or shift > 63:
            raise ValueError("the message-index array is cut short")
        b = data[pos]
        pos += 1
        result |= (b & 0x7F) << shift
        if not b & 0x80:
            return (result >> 1) ^ -(result & 1), pos
        shift += 7


def message_indexes(path: list[int]) -> bytes:
    """Confluent's message-index array: a single 0 for [0] (the first message), else the
    count and each index."""
    if path == [0]:
        return b"\x00"
    return _zigzag(len(path)) + b"".join(_zigzag(i) for i in path)


def read_message_indexes(data: bytes, pos: int) -> tuple[list[int], int]:
    count, pos = _read_zigzag(data, pos)
    if count == 0:
        return [0], pos
    if count < 0 or count > 100:
        raise ValueError(f"a message-index array of {count} entries")
    path = []
    for _ in range(count):
        index, pos = _read_zigzag(data, pos)
        path.append(index)
    return path, pos


class ProtobufSchema:
    """A registry PROTOBUF schema (its file and the files it imports) ready to encode the
    first message from JSON and decode any message a record's index path names."""

    type = "PROTOBUF"

    def __init__(self, schema_id: int, main: FDP, imports: list[FDP]) -> None:
        self.id = schema_id
        self.main = main
        self.pool = descriptor_pool.DescriptorPool()
        try:
            # imports first, transitively (a well-known file may import others): as the
            # registry checked this schema, so what it accepted loads here
            add_imports(self.pool, main, {proto.name: proto for proto in imports})
            self.pool.Add(main)
        except Exception as exc:  # protobuf's pool raises TypeError/KeyError for a file it cannot link
            raise errors.invalid_schema(f"PROTOBUF schema {schema_id} cannot be loaded: {exc}") from None
        if not main.message_type:
            raise errors.invalid_schema(f"PROTOBUF schema {schema_id} declares no message")
        self._classes: dict[tuple[int, ...], Any] = {}

    def message_class(self, path: list[int]):
        """The class of the message at `path` (indexes into the file's messages, then
        nested messages), built once."""
        key = tuple(path)
        cls = self._classes.get(key)
        if cls is None:
            messages, name = self.main.message_type, self.main.package
            for index in path:
                if not 0 <= index < len(messages):
                    raise ValueError(f"message index path {path} is not in schema {self.id}")
                name = f"{name}.{messages[index].name}" if name else messages[index].name
                messages = messages[index].nested_type
            cls = self._classes[key] = message_factory.GetMessageClass(self.pool.FindMessageTypeByName(name))
        return cls

    def encode(self, value: Any) -> bytes:
        """`value` (a JSON object) as the file's first message, in Confluent's wire format."""
        if not isinstance(value, dict):
            raise errors.conversion(f"a PROTOBUF value must be a JSON object (schema {self.id}), "
                                    f"not {type(value).__name__}")
        message = self.message_class([0])()
        try:
            json_format.ParseDict(value, message)
        except (json_format.ParseError, TypeError, ValueError) as exc:
            raise errors.conversion(f"value does not match the PROTOBUF schema {self.id}: {exc}") from None
        return bytes([0]) + self.id.to_bytes(4, "big") + message_indexes([0]) + message.SerializeToString()

    def decode(self, payload: bytes) -> Any:
        """A record in Confluent's wire format as the JSON Confluent's REST Proxy answers."""
        path, pos = read_message_indexes(payload, 5)
        message = self.message_class(path).FromString(payload[pos:])
        return to_json(message)


def to_json(message) -> dict:
    """Java's JsonFormat.printer().includingDefaultValueFields(): protobuf 5.26 renamed the flag."""
    try:
        return json_format.MessageToDict(message, always_print_fields_with_no_presence=True)
    except TypeError:  # protobuf < 5.26
        return json_format.MessageToDict(message, including_default_value_fields=True)
