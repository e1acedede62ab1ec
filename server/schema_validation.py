"""Broker-side schema validation (Confluent Server's `confluent.key.schema.validation` /
`confluent.value.schema.validation` topic configs).

Why on the broker: a producer that skips the serializer (or a bug in one) would otherwise
write bytes no consumer's deserializer can read. With the config on, every record's value
(key) must start with Confluent's wire format — magic byte 0, then a 4-byte big-endian
schema id — and that id must be one the registry holds under the topic's subject
(TopicNameStrategy: `<topic>-value` / `<topic>-key`, live versions). Otherwise the whole
batch is refused with INVALID_RECORD and each offending record named (KIP-467
record_errors), as the other per-record rules do (server/validation.py).

A module outside schema_registry/ (which the data path must not import, an
import-linter contract): the registry reaches the produce path only as `broker.schema_registry`,
an object with `schema_ids(subject)`, set by the registry's start-up.

Records are decoded only for topics with a validation config on; a null value (a
tombstone) or null key carries no schema and passes. Without a registry in this broker
(`schema.registry.listeners=` empty) nothing can be checked, so every record with a
payload is refused rather than let through unchecked.
"""

from __future__ import annotations

from wire.records import BatchHeader, iter_records

from server.validation import rejected_records

KEY_VALIDATION = "confluent.key.schema.validation"
VALUE_VALIDATION = "confluent.value.schema.validation"
MAGIC = 0


def enabled(config) -> tuple[bool, bool]:
    """(key, value) validation flags of a topic's LogConfig: called for every partition of
    every Produce, so two lookups (extras hold validated values in their canonical text, and
    only those that differ from the default "false")."""
    extras = config.extras
    return extras.get(KEY_VALIDATION) == "true", extras.get(VALUE_VALIDATION) == "true"


def _problem(payload: bytes | None, ids: set[int] | None, subject: str) -> str | None:
    if payload is None:
        return None
    if ids is None:
        return f"no schema registry in this broker to validate against subject {subject}"
    if len(payload) < 5 or payload[0] != MAGIC:
        return f"not in the schema registry's wire format (magic byte 0 and a schema id) for subject {subject}"
    schema_id = int.from_bytes(payload[1:5], "big")
    if schema_id not in ids:
        return f"schema id {schema_id} is not registered under subject {subject}"
    return None


def validate_schema_ids(registry, topic: str, records, headers: list[tuple[int, BatchHeader]], config) -> None:
    """Raise InvalidRecord naming every record whose key/value does not carry a schema id
    of the topic's subject, when the topic asks for it; return at once when it does not."""
    check_key, check_value = enabled(config)
    if not (check_key or check_value):
        return
    subjects = {}
    for field, on in (("key", check_key), ("value", check_value)):
        if on:
            subject = f"{topic}-{field}"
            subjects[field] = (subject, None if registry is None else registry.schema_ids(subject))
    errors: list[tuple[int, str]] = []
    index = 0
    view = memoryview(records)
    for pos, header in headers:
        for record in iter_records(view[pos:pos + header.size]):
            for field, (subject, ids) in subjects.items():
                problem = _problem(record.key if field == "key" else record.value, ids, subject)
                if problem is not None:
                    errors.append((index, f"Record {field} {problem}"))
                    break
            index += 1
    if errors:
        raise rejected_records(errors)
