"""Registry-encoded Avro for Spark jobs: Confluent's wire format, a registry client, pandas UDFs.

Spark's own ``from_avro``/``to_avro`` live in the ``spark-avro`` module, which is not in the
pyspark wheel, and neither knows the Schema Registry's framing. This module does it in Python:

* the wire format (what Confluent's ``KafkaAvroSerializer`` writes and every registry-aware
  client reads): byte 0 is the magic byte ``0``, bytes 1-4 the schema id (big-endian int32),
  the rest the Avro binary encoding of the value without any container header (fastavro's
  *schemaless* encoding);
* ``RegistryClient``: register a subject's schema (``POST /subjects/{subject}/versions`` → id)
  and look a schema up by id (``GET /schemas/ids/{id}``), both cached, since every record of a
  topic carries an id and the registry must not see one request per record;
* ``from_confluent_avro`` / ``to_confluent_avro``: pandas UDFs for DataFrames. Values cross
  the Python boundary as JSON strings, so Spark's own ``from_json``/``to_json`` do the typing:
  no Avro → Spark type mapping is guessed here, and a null int stays null (in a pandas frame
  it would become NaN).

The output schema is registered once, on the driver, when ``to_confluent_avro`` builds the
column: a schema the registry refuses (incompatible, malformed) stops the job before it reads
a record, with the registry's error code and message. Executors then only encode.
"""

from __future__ import annotations

import base64
import io
import json
import logging
import struct
import threading
from typing import Any
from urllib.parse import quote

import fastavro
import httpx

log = logging.getLogger(__name__)

MAGIC_BYTE = 0
_HEADER = struct.Struct(">bI")  # magic byte, schema id
CONTENT_TYPE = "application/vnd.schemaregistry.v1+json"


class AvroWireError(ValueError):
    """Bytes that are not a Confluent-framed Avro value (too short, wrong magic byte, bad body)."""


class AvroSchemaError(ValueError):
    """Text that is not an Avro schema (bad JSON, unknown type, ...), refused before any HTTP."""


class RegistryError(RuntimeError):
    """The Schema Registry refused a request; carries its ``error_code`` (e.g. 40403, 409)."""

    def __init__(self, status: int, error_code: int | None, message: str) -> None:
        super().__init__(f"Schema Registry answered {status} (error_code {error_code}): {message}")
        self.status = status
        self.error_code = error_code
        self.message = message


# --------------------------------------------------------------------------- wire format


def parse_schema(schema: str | dict | list) -> Any:
    """An Avro schema (JSON text or already-decoded JSON) in fastavro's parsed form."""
    try:
        if isinstance(schema, str):
            schema = json.loads(schema)
        return fastavro.parse_schema(schema)
    except Exception as exc:  # fastavro raises SchemaParseException, UnknownType, KeyError, ...
        raise AvroSchemaError(f"not an Avro schema: {exc!r}") from exc


def encode(schema_id: int, parsed_schema: Any, value: Any) -> bytes:
    """``value`` in Confluent's wire format: magic byte, schema id, schemaless Avro body."""
    out = io.BytesIO()
    out.write(_HEADER.pack(MAGIC_BYTE, schema_id))
    try:
        fastavro.schemaless_writer(out, parsed_schema, value)
    except (ValueError, TypeError, KeyError, AttributeError) as exc:
        raise AvroWireError(f"value does not match schema id {schema_id}: {exc}") from exc
    return out.getvalue()


def schema_id_of(data: bytes) -> int:
    """The schema id a framed value names; ``AvroWireError`` if the framing is wrong."""
    if len(data) < _HEADER.size:
        raise AvroWireError(f"{len(data)} bytes is shorter than the 5-byte Confluent header")
    magic, schema_id = _HEADER.unpack_from(data)
    if magic != MAGIC_BYTE:
        raise AvroWireError(f"unknown magic byte {magic & 0xFF:#04x} (Confluent framing starts with 0x00)")
    return schema_id


def decode(data: bytes, parsed_schema: Any, reader_schema: Any = None) -> Any:
    """The Avro value in framed ``data`` written with ``parsed_schema`` (optionally resolved
    to ``reader_schema``, Avro's schema resolution). The id is not checked here: see
    ``RegistryClient.decode`` for the lookup."""
    schema_id_of(data)
    body = io.BytesIO(memoryview(data)[_HEADER.size:])
    try:
        value = fastavro.schemaless_reader(body, parsed_schema, reader_schema)
    except (EOFError, ValueError, TypeError, IndexError, KeyError, UnicodeDecodeError) as exc:
        raise AvroWireError(f"Avro body does not decode with its schema: {exc!r}") from exc
    if body.tell() != len(data) - _HEADER.size:
        raise AvroWireError(f"{len(data) - _HEADER.size - body.tell()} bytes left after the Avro value")
    return value


def to_json_text(value: Any) -> str:
    """An Avro value as JSON text: bytes/fixed as base64 (Spark's ``from_json`` reads a
    base64 string into BinaryType), dates and times as ISO strings."""
    return json.dumps(value, default=_json_default, separators=(",", ":"), ensure_ascii=False)


def _json_default(obj: Any) -> Any:
    if isinstance(obj, (bytes, bytearray, memoryview)):
        return base64.b64encode(bytes(obj)).decode("ascii")
    if hasattr(obj, "isoformat"):
        return obj.isoformat()
    return str(obj)  # Decimal, UUID


# --------------------------------------------------------------------------- registry client


class RegistryClient:
    """A cached client of Confluent's Schema Registry REST API (the subset Avro needs).

    Thread-safe: Spark's Python workers may call it from Arrow's batches in sequence, and the
    driver from several queries at once.
    """

    def __init__(self, url: str, timeout: float = 10.0) -> None:
        self.url = url.rstrip("/")
        self._http = httpx.Client(
            base_url=self.url, timeout=timeout, headers={"Content-Type": CONTENT_TYPE, "Accept": CONTENT_TYPE}
        )
        self._lock = threading.Lock()
        self._by_id: dict[int, Any] = {}  # id -> parsed schema
        self._ids: dict[tuple[str, str], int] = {}  # (subject, schema text) -> id

    def close(self) -> None:
        self._http.close()

    def __enter__(self) -> "RegistryClient":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _call(self, method: str, path: str, body: dict | None = None) -> Any:
        try:
            answer = self._http.request(method, path, json=body)
        except httpx.HTTPError as exc:
            raise RegistryError(0, None, f"{method} {self.url}{path}: {exc!r}") from exc
        if answer.status_code >= 400:
            try:
                doc = answer.json()
                code, message = doc.get("error_code"), doc.get("message", answer.text)
            except ValueError:
                code, message = None, answer.text
            log.warning("schema registry %s %s: %s %s %s", method, path, answer.status_code, code, message)
            raise RegistryError(answer.status_code, code, message)
        return answer.json()

    def register(self, subject: str, schema: str | dict) -> int:
        """Register ``schema`` under ``subject`` (a no-op if it is there) and return its id."""
        text = schema if isinstance(schema, str) else json.dumps(schema)
        with self._lock:
            cached = self._ids.get((subject, text))
        if cached is not None:
            return cached  # `encode` registers per record: the cache answers before any parse
        parsed = parse_schema(text)  # a malformed schema fails here, not as a registry 422
        schema_id = int(self._call("POST", f"/subjects/{quote(subject, safe='')}/versions", {"schema": text})["id"])
        with self._lock:
            self._ids[(subject, text)] = schema_id
            self._by_id.setdefault(schema_id, parsed)
        return schema_id

    def schema(self, schema_id: int) -> Any:
        """The parsed schema with id ``schema_id`` (``RegistryError`` 40403 when unknown)."""
        with self._lock:
            cached = self._by_id.get(schema_id)
        if cached is not None:
            return cached
        doc = self._call("GET", f"/schemas/ids/{schema_id}")
        if doc.get("schemaType", "AVRO") != "AVRO":
            raise AvroWireError(f"schema id {schema_id} is a {doc['schemaType']} schema, not AVRO")
        parsed = parse_schema(doc["schema"])
        with self._lock:
            self._by_id[schema_id] = parsed
        return parsed

    def latest(self, subject: str) -> dict:
        """The latest version of ``subject``: ``{"subject", "version", "id", "schema", ...}``."""
        return self._call("GET", f"/subjects/{quote(subject, safe='')}/versions/latest")

    def decode(self, data: bytes, reader_schema: Any = None) -> Any:
        """A framed value decoded with the schema its id names."""
        return decode(data, self.schema(schema_id_of(data)), reader_schema)

    def encode(self, subject: str, schema: str | dict, value: Any) -> bytes:
        """``value`` framed with the id of ``schema`` registered under ``subject``."""
        schema_id = self.register(subject, schema)
        return encode(schema_id, self.schema(schema_id), value)


_clients: dict[str, RegistryClient] = {}
_clients_lock = threading.Lock()


def registry_client(url: str) -> RegistryClient:
    """One cached client per registry URL per process (Python workers are reused across tasks,
    so the id → schema cache outlives a batch)."""
    with _clients_lock:
        client = _clients.get(url)
        if client is None:
            client = _clients[url] = RegistryClient(url)
        return client


# --------------------------------------------------------------------------- Spark columns


def from_confluent_avro(col: Any, registry_url: str, schema: Any = None, *, on_error: str = "fail") -> Any:
    """A column of framed Avro bytes → the values as JSON text, or typed when ``schema``
    (a Spark ``StructType`` or DDL string) is given (``from_json`` of the JSON text).

    ``on_error="null"`` turns a value that does not decode into null (and a log line on the
    executor) instead of failing the task: the choice between a dead-letter view and a stop.
    """
    import pandas as pd
    from pyspark.sql import functions as F
    if on_error not in ("fail", "null"):
        raise ValueError(f"on_error must be 'fail' or 'null', not {on_error!r}")

    def _decode(values):
        client = registry_client(registry_url)
        out = []
        for data in values:
            if data is None:
                out.append(None)  # a tombstone stays null
                continue
            try:
                out.append(to_json_text(client.decode(bytes(data))))
            except (AvroWireError, RegistryError) as exc:
                if on_error == "fail":
                    raise
                log.warning("undecodable Avro value set to null: %s", exc)
                out.append(None)
        return pd.Series(out, dtype=object)

    decoded = _udf(_decode, "string")(col)
    return decoded if schema is None else F.from_json(decoded, schema)


def to_confluent_avro(col: Any, subject: str, schema: str | dict, registry_url: str) -> Any:
    """A struct column → framed Avro bytes, with ``schema`` registered under ``subject`` now.

    Fields are matched by name (``to_json`` of the struct, nulls kept); timestamps should be
    turned into the long the schema's logical type expects before this column.
    """
    import pandas as pd
    from pyspark.sql import functions as F
    text = schema if isinstance(schema, str) else json.dumps(schema)
    with RegistryClient(registry_url) as client:
        schema_id = client.register(subject, text)
    log.info("output schema registered: subject %s id %d", subject, schema_id)

    def _encode(values):
        parsed = parse_schema(text)
        return pd.Series(
            [None if v is None else encode(schema_id, parsed, json.loads(v)) for v in values], dtype=object
        )

    return _udf(_encode, "binary")(F.to_json(col, {"ignoreNullFields": "false"}))


def _udf(fn: Any, return_type: str) -> Any:
    """A Series → Series pandas UDF. pyspark infers the UDF kind from the annotations, which
    this module's ``from __future__ import annotations`` would leave as unresolvable strings
    (pandas is imported lazily), so they are set as real types here."""
    import pandas as pd
    from pyspark.sql.functions import pandas_udf

    fn.__annotations__ = {"values": pd.Series, "return": pd.Series}
    return pandas_udf(fn, return_type)  # type: ignore[call-overload]


# --------------------------------------------------------------------------- schema mapping

_AVRO_TO_SPARK = {
    "null": "string", "boolean": "boolean", "int": "int", "long": "bigint", "float": "float",
    "double": "double", "bytes": "binary", "string": "string",
}


def avro_to_spark_ddl(schema: Any) -> str:
    """The Spark type (DDL text) that ``from_json`` needs to read an Avro value's JSON: records
    → struct, arrays, maps, ``["null", T]`` → T (nullable), enums → string, fixed → binary.
    Logical types keep their underlying type (timestamp-millis stays a long)."""
    if isinstance(schema, str) and schema.lstrip().startswith(("{", "[")):
        schema = json.loads(schema)
    if isinstance(schema, str):
        if schema not in _AVRO_TO_SPARK:
            raise AvroSchemaError(f"named type reference {schema!r} is not supported here: inline it")
        return _AVRO_TO_SPARK[schema]
    if isinstance(schema, list):
        branches = [b for b in schema if b != "null"]
        if len(branches) != 1:
            raise AvroSchemaError(f"union {schema} has no Spark type (only [\"null\", T] unions have)")
        return avro_to_spark_ddl(branches[0])
    kind = schema["type"]
    if kind == "record":
        return "struct<" + ",".join(f"`{f['name']}`:{avro_to_spark_ddl(f['type'])}" for f in schema["fields"]) + ">"
    if kind == "array":
        return f"array<{avro_to_spark_ddl(schema['items'])}>"
    if kind == "map":
        return f"map<string,{avro_to_spark_ddl(schema['values'])}>"
    if kind == "enum":
        return "string"
    if kind == "fixed":
        return "binary"
    return avro_to_spark_ddl(kind)


def spark_to_avro(data_type: Any, name: str = "Value", namespace: str = "trafka.spark") -> dict | str | list:
    """An Avro schema for a Spark type: structs → records (nullable fields as ``["null", T]``
    with default null), arrays, string-keyed maps, the primitive types. What
    ``to_confluent_avro`` registers when no schema is given."""
    from pyspark.sql import types as T

    primitives = {
        T.BooleanType: "boolean", T.IntegerType: "int", T.ShortType: "int", T.ByteType: "int",
        T.LongType: "long", T.FloatType: "float", T.DoubleType: "double", T.StringType: "string",
        T.BinaryType: "bytes",
    }
    for cls, avro in primitives.items():
        if isinstance(data_type, cls):
            return avro
    if isinstance(data_type, T.StructType):
        fields = []
        for f in data_type.fields:
            t = spark_to_avro(f.dataType, f"{name}_{f.name}", namespace)
            fields.append({"name": f.name, "type": ["null", t], "default": None} if f.nullable
                          else {"name": f.name, "type": t})
        return {"type": "record", "name": name, "namespace": namespace, "fields": fields}
    if isinstance(data_type, T.ArrayType):
        return {"type": "array", "items": spark_to_avro(data_type.elementType, name + "_item", namespace)}
    if isinstance(data_type, T.MapType) and isinstance(data_type.keyType, T.StringType):
        return {"type": "map", "values": spark_to_avro(data_type.valueType, name + "_value", namespace)}
    raise AvroSchemaError(f"no Avro type for Spark's {data_type.simpleString()} (cast it first: "
                          "timestamps to long milliseconds, decimals to string or double)")
