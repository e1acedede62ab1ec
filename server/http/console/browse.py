"""The message browser: records of one partition from an offset, decoded for a person.

Why records are decoded here and only here: the broker keeps batches as bytes and never
decodes them on the data path; a person browsing wants keys, values and headers as text,
pretty JSON or hex, and Avro values (Confluent's framing: magic byte 0, a 4-byte schema id)
as JSON when this broker's Schema Registry knows the id. `read_records` reads through the
log's own read path (`PartitionLog.read`, as Fetch does) up to the high watermark — what a
consumer may see — and decodes with `wire.records`; it blocks (file reads, decompression,
Avro), so the route runs it in a worker thread.

Every field carries each rendering that applies (`text` when the bytes are UTF-8, `json`
when the text parses, `hex` always, `avro` when decoded), and the page picks one; a field
over FIELD_LIMIT bytes is cut there (`truncated`), so one huge record cannot make the
answer huge.
"""

from __future__ import annotations

import io
import json
import struct
from typing import Any, Callable

from wire.records import iter_records, parse_header, peek_batch_size

MAX_RECORDS = 200
FIELD_LIMIT = 16 * 1024
READ_BYTES = 1024 * 1024
_CONFLUENT_HEADER = struct.Struct(">bI")  # magic byte 0, schema id

AvroDecoder = Callable[[int, bytes], Any]


def render(data: bytes | None, avro: AvroDecoder | None = None) -> dict[str, Any] | None:
    """One key, value or header value in every rendering that applies (None stays None)."""
    if data is None:
        return None
    shown = bytes(data[:FIELD_LIMIT])
    out: dict[str, Any] = {"size": len(data), "truncated": len(data) > FIELD_LIMIT, "hex": shown.hex(),
                           "text": None, "json": None, "avro": None, "schema_id": None}
    try:
        out["text"] = shown.decode("utf-8")
    except UnicodeDecodeError:
        pass
    if out["text"] is not None and not out["truncated"]:
        try:
            out["json"] = json.loads(out["text"])
        except ValueError:
            pass
    if avro is not None and len(data) > _CONFLUENT_HEADER.size and data[0] == 0:
        schema_id = _CONFLUENT_HEADER.unpack_from(data)[1]
        try:
            out["avro"] = avro(schema_id, bytes(data[_CONFLUENT_HEADER.size:]))
            out["schema_id"] = schema_id
        except Exception:  # unknown id, or not Avro after all: hex stays the rendering
            pass
    return out


def read_records(partition: Any, offset: int, limit: int, avro: AvroDecoder | None = None) -> dict[str, Any]:
    """Up to `limit` records of `partition` (server.partition.Partition) from `offset`
    (clamped to the log start), below the high watermark, as a read_uncommitted consumer
    sees them; control records (transaction markers) are left out."""
    plog = partition.log
    start = max(offset, plog.log_start_offset)
    end = partition.high_watermark
    records: list[dict[str, Any]] = []
    position = start
    while len(records) < limit and position < end:
        data = bytes(plog.read(position, READ_BYTES, max_offset=end))
        if not data:
            break
        pos = 0
        while pos < len(data) and len(records) < limit:
            size = peek_batch_size(data, pos)
            if size is None or pos + size > len(data):
                break
            batch = memoryview(data)[pos:pos + size]
            pos += size
            header = parse_header(batch)  # always magic 2: legacy produce is up-converted (wire/legacy.py)
            position = max(position, header.next_offset)
            if header.is_control:
                continue
            for record in iter_records(batch):
                if record.offset < start or record.offset >= end:
                    continue
                records.append({
                    "offset": record.offset, "timestamp": record.timestamp,
                    "timestamp_type": "LogAppendTime" if header.is_log_append_time else "CreateTime",
                    "key": render(record.key, avro), "value": render(record.value, avro),
                    "headers": [{"key": k, "value": render(v)} for k, v in record.headers],
                })
                if len(records) >= limit:
                    break
        if pos == 0:
            break  # no whole batch in what was read: nothing more to show
    return {"topic": partition.topic, "partition": partition.index, "start_offset": start,
            "log_start_offset": plog.log_start_offset, "high_watermark": end, "records": records,
            "next_offset": records[-1]["offset"] + 1 if records else start}


def avro_decoder(registry: Any) -> AvroDecoder | None:
    """A decoder for values framed by Confluent's serializers, from the Schema Registry
    (schema_registry/registry.py) of this broker; None without one. Parsed schemas
    are cached for one answer."""
    if registry is None:
        return None
    import fastavro

    cache: dict[int, Any] = {}

    def decode(schema_id: int, payload: bytes) -> Any:
        schema = cache.get(schema_id)
        if schema is None:
            version = registry.schema_by_id(schema_id)
            if (version.schema_type or "AVRO") != "AVRO":
                raise ValueError(f"schema {schema_id} is {version.schema_type}, not AVRO")
            schema = cache[schema_id] = registry.parsed(version).parsed
        return _jsonable(fastavro.schemaless_reader(io.BytesIO(payload), schema, None))

    return decode


def _jsonable(value: Any) -> Any:
    """Avro's bytes, decimals, dates and UUIDs as JSON can show them."""
    if isinstance(value, dict):
        return {k: _jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_jsonable(v) for v in value]
    if isinstance(value, (bytes, bytearray)):
        return bytes(value).hex()
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    return str(value)
