"""Embedded formats: how a record's key/value travels inside the JSON of a request or answer.

binary: base64 text of the bytes; json: any JSON value, stored as its UTF-8 JSON text;
avro / jsonschema / protobuf: a JSON value checked against a schema of the broker's Schema
Registry and stored in Confluent's wire format (magic byte 0, the schema id as 4 big-endian
bytes, then the Avro binary encoding / the JSON text / the message-index array and the
protobuf message, `protobuf.py`). Avro values are taken and given in Avro's JSON encoding
(unions as {"type": value}), as Confluent's REST Proxy does.

Why the registry's HTTP API and not its object: the proxy then needs nothing of the
registry's internals, and in a cluster the registry forwards writes to the leader of
`_schemas` itself. Schemas by id are cached (ids are immutable).
"""

from __future__ import annotations

import base64
import binascii
import io
import json
import logging
import struct
from urllib.parse import quote
from typing import Any

import fastavro
import httpx
import jsonschema

from rest_proxy import errors, protobuf
from rest_proxy.protobuf import ProtobufSchema

log = logging.getLogger("trafka.rest_proxy")

BINARY, JSON, AVRO, JSONSCHEMA, PROTOBUF = "binary", "json", "avro", "jsonschema", "protobuf"
FORMATS = (BINARY, JSON, AVRO, JSONSCHEMA, PROTOBUF)
SCHEMA_FORMATS = (AVRO, JSONSCHEMA, PROTOBUF)
REGISTRY_TYPE = {AVRO: "AVRO", JSONSCHEMA: "JSON", PROTOBUF: "PROTOBUF"}
MAGIC = struct.Struct(">bI")


class Schema:
    """A registry schema ready to encode and decode with."""

    def __init__(self, schema_id: int, schema_type: str, text: str) -> None:
        self.id = schema_id
        self.type = schema_type
        self.text = text
        document = json.loads(text)
        if schema_type == "AVRO":
            self.parsed = fastavro.parse_schema(document)
        else:
            self.parsed = document
            self.validator = jsonschema.validators.validator_for(document)(document)

    def encode(self, value: Any) -> bytes:
        header = MAGIC.pack(0, self.id)
        if self.type == "AVRO":
            try:
                record = next(iter(fastavro.json_reader(io.StringIO(json.dumps(value)), self.parsed)))
                out = io.BytesIO()
                fastavro.schemaless_writer(out, self.parsed, record)
            except Exception as exc:  # fastavro raises several types for a value that does not fit
                raise errors.conversion(f"value does not match the Avro schema {self.id}: {exc}") from None
            return header + out.getvalue()
        error = jsonschema.exceptions.best_match(self.validator.iter_errors(value))
        if error is not None:
            raise errors.conversion(f"value does not match the JSON schema {self.id}: {error.message}")
        return header + json.dumps(value, separators=(",", ":")).encode()

    def decode(self, payload: bytes) -> Any:
        body = payload[MAGIC.size:]
        if self.type == "AVRO":
            record = fastavro.schemaless_reader(io.BytesIO(body), self.parsed)
            out = io.StringIO()
            fastavro.json_writer(out, self.parsed, [record])
            return json.loads(out.getvalue())
        return json.loads(body)


class SchemaSource:
    """The broker's Schema Registry over HTTP (schema.registry.listeners), ids cached."""

    def __init__(self, url: str | None) -> None:
        self.url = url
        self._by_id: dict[int, Schema] = {}
        self._client: httpx.AsyncClient | None = None

    def _http(self) -> httpx.AsyncClient:
        if self.url is None:
            raise errors.schema_registry_unavailable("the broker serves no Schema Registry "
                                                     "(schema.registry.listeners is empty)")
        if self._client is None:
            self._client = httpx.AsyncClient(base_url=self.url, timeout=30)
        return self._client

    async def _call(self, method: str, path: str, body: Any = None) -> Any:
        try:
            response = await self._http().request(method, path, json=body, headers={
                "Content-Type": "application/vnd.schemaregistry.v1+json"})
        except httpx.HTTPError as exc:
            raise errors.schema_registry_unavailable(f"{self.url} cannot be reached: {exc}") from None
        try:
            answer = response.json()
        except ValueError:
            answer = {}
        if response.status_code >= 400:
            code = answer.get("error_code") if isinstance(answer, dict) else None
            message = answer.get("message") if isinstance(answer, dict) else response.text
            if code in (42201, 409, 42202) or response.status_code in (409, 422):
                raise errors.invalid_schema(str(message))
            if response.status_code == 404:
                raise errors.RestError(404, 40403 if code == 40403 else 404, str(message))
            raise errors.schema_registry_unavailable(str(message))
        return answer

    async def by_id(self, schema_id: Any) -> Schema | ProtobufSchema:
        if not isinstance(schema_id, int) or isinstance(schema_id, bool):
            raise errors.unprocessable(f"a schema id must be an integer, not {schema_id!r}")
        schema = self._by_id.get(schema_id)
        if schema is None:
            # ?format=serialized: a PROTOBUF schema as the FileDescriptorProto the pool loads
            # (other types ignore it and come back as their text)
            answer = await self._call("GET", f"/schemas/ids/{schema_id}?format=serialized")
            kind = answer.get("schemaType", "AVRO")
            if kind == "PROTOBUF":
                imports = await self._protobuf_imports(answer.get("references") or [], set())
                schema = ProtobufSchema(schema_id, protobuf.read_file(answer["schema"]), imports)
            else:
                schema = Schema(schema_id, kind, answer["schema"])
            self._by_id[schema_id] = schema
        return schema

    async def _protobuf_imports(self, references: list, seen: set[str]) -> list:
        """The files a PROTOBUF schema's references name, each after its own imports."""
        files = []
        for ref in references:
            if not isinstance(ref, dict) or ref.get("name") in seen:
                continue
            seen.add(ref.get("name"))
            subject = quote(str(ref.get("subject")), safe="")
            found = await self._call("GET", f"/subjects/{subject}/versions/{ref.get('version')}?format=serialized")
            files += await self._protobuf_imports(found.get("references") or [], seen)
            proto = protobuf.read_file(found["schema"])
            proto.name = ref["name"]  # the importing file names it so
            files.append(proto)
        return files

    async def by_version(self, subject: str, version: Any) -> tuple[Schema | ProtobufSchema, int]:
        """A subject's version (a number or "latest") and its schema (v3 subject + schema_version)."""
        if not (version == "latest" or (isinstance(version, int) and not isinstance(version, bool)
                                        and version > 0)):
            raise errors.unprocessable(f"schema_version must be a positive integer or latest, not {version!r}")
        answer = await self._call("GET", f"/subjects/{quote(subject, safe='')}/versions/{version}")
        return await self.by_id(answer["id"]), answer["version"]

    async def register(self, subject: str, fmt: str, text: Any) -> Schema | ProtobufSchema:
        """The id of `text` under `subject` (registering it when new: TopicNameStrategy).
        PROTOBUF text is only parsed by the registry (its 42201 is our 42205)."""
        if not isinstance(text, str):
            raise errors.invalid_schema("the schema must be given as a string")
        try:
            if fmt != PROTOBUF:
                document = json.loads(text)
                if fmt == AVRO:
                    fastavro.parse_schema(document)
        except Exception as exc:
            raise errors.invalid_schema(str(exc)) from None
        answer = await self._call("POST", f"/subjects/{quote(subject, safe='')}/versions",
                                  {"schema": text, "schemaType": REGISTRY_TYPE[fmt]})
        return await self.by_id(answer["id"])

    async def close(self) -> None:
        if self._client is not None:
            await self._client.aclose()


def format_of_media_type(media_type: str) -> str | None:
    """The embedded format an `application/vnd.kafka.FORMAT.v2+json` names (None: a generic
    type that names none: application/vnd.kafka.v2+json, application/json)."""
    media_type = media_type.split(";")[0].strip().lower()
    if media_type.startswith("application/vnd.kafka.") and media_type.endswith(".v2+json"):
        middle = media_type[len("application/vnd.kafka."):-len(".v2+json")]
        if middle in FORMATS:
            return middle
        if middle == "":
            return None
    return None


def to_bytes(fmt: str, value: Any, *, what: str) -> bytes | None:
    """A binary/json key or value as the record's bytes (None stays a null)."""
    if value is None:
        return None
    if fmt == BINARY:
        if not isinstance(value, str):
            raise errors.unprocessable(f"a binary {what} must be base64 text")
        try:
            return base64.b64decode(value, validate=True)
        except (binascii.Error, ValueError):
            raise errors.unprocessable(f"the {what} is not valid base64") from None
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False).encode()


class UnreadableRecord(Exception):
    """A record's key or value that the consumer's embedded format cannot read (Kafka's
    RecordDeserializationException), and why; the records route answers it naming the
    record."""

    def __init__(self, cause: str, part: str = "value") -> None:
        super().__init__(cause)
        self.cause = cause
        self.part = part


def from_bytes(fmt: str, data: bytes | None) -> Any:
    if data is None:
        return None
    if fmt == BINARY:
        return base64.b64encode(data).decode()
    try:
        return json.loads(data)
    except (ValueError, RecursionError) as exc:  # RecursionError: nested deeper than the parser goes
        raise UnreadableRecord(f"not JSON (consumer format json): {exc}") from None


def schema_id_of(data: bytes | None) -> int | None:
    if data is None or len(data) < MAGIC.size or data[0] != 0:
        return None
    return MAGIC.unpack_from(data)[1]
