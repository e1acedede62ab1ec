"""`SchemaRegistry`: the operations of Confluent's Schema Registry over `Store`, persisted
in the `_schemas` topic through the broker's own append path.

Why through the broker's internal-topic interface (server/app_host.py, CoordinatorLog
underneath): it is how the broker's coordinators already write an internal compacted topic
and wait for the write, so the registry's records are ordinary Kafka records (readable by
any consumer, compacted by the broker's cleaner, recovered by the log's own recovery) with
no Kafka client inside the broker. Every
write holds one lock across check, append and apply, so two registrations cannot both take
the same id or version; memory changes only after the append succeeded.
"""

from __future__ import annotations

import contextlib
import logging
from typing import Any

import trio

from server.app_host import AppHost, BadRecord, KafkaError
from schema_registry import compatibility, errors, protobuf, records
from schema_registry.schemas import AVRO, PROTOBUF, TYPES, ParsedSchema, Reference, parse, parse_references
from schema_registry.store import Store, Version

log = logging.getLogger("trafka.schema_registry")

TOPIC = "_schemas"
MODES = ("READWRITE", "READONLY", "IMPORT")
MAX_VERSION = 2**31 - 1


PARSED_CACHE = 4096  # parsed stored versions kept (a schema parsed once per use otherwise)

class SchemaRegistry:
    def __init__(self, host: AppHost) -> None:
        self.host = host
        self.store = Store()
        self.topic = host.internal_topic(TOPIC, 1, {"cleanup.policy": "compact"})
        self._lock = trio.Lock()
        self.link = None  # cluster.ClusterLink in a ZooKeeper cluster
        self.last_write_end = -1  # the `_schemas` offset after the latest write
        # Stored versions parsed, by fingerprint: a registered schema never changes, and parsing
        # (a PROTOBUF text through an ANTLR grammar: ~0.4 s for 50 KB) runs on the event loop
        # for every `?format=serialized` read and every compatibility check against it.
        self._parsed: dict[tuple, ParsedSchema] = {}

    # ---- start-up ------------------------------------------------------------------
    def load(self) -> None:
        """Blocking, at start-up: create `_schemas` if missing and replay it."""
        self.topic.ensure()

        def on_record(_partition, _header, record) -> None:
            try:
                key, value = records.decode(record.key, record.value)
                self.store.apply(key, value)
            except (ValueError, KeyError, TypeError) as exc:
                raise BadRecord(str(exc)) from None

        counts = self.topic.replay(0, on_record)
        log.info("schema registry: %d records replayed from %s (%d skipped): %d subjects, largest id %d",
                 counts.records, TOPIC, counts.skipped, len(self.store.subjects), self.store.max_id)

    async def _write(self, entries: list[tuple[bytes, bytes | None]]) -> None:
        """Append records to `_schemas` and then apply them (caller holds the lock)."""
        try:
            first = await self.topic.append(0, entries)
        except KafkaError as exc:
            log.error("schema registry: writing %s failed: %s", TOPIC, exc)
            raise errors.store_error(str(exc)) from None
        self.last_write_end = first + len(entries)
        if self.link is not None:
            # a cluster: the tail applies committed records in log order, this one included
            await self.link.wait_applied(self.last_write_end)
            return
        for key, value in entries:
            self.store.apply(*records.decode(key, value))

    @contextlib.asynccontextmanager
    async def _writing(self):
        """The write lock; in a cluster also the leader's whole log applied first, so
        checks, ids and versions see every committed record."""
        async with self._lock:
            if self.link is not None:
                await self.link.wait_caught_up()
            yield

    # ---- lookups -------------------------------------------------------------------
    def subject_versions(self, subject: str, *, deleted: bool = False) -> list[Version]:
        found = self.store.versions(subject, deleted=deleted)
        if not found:
            raise errors.subject_not_found(subject)
        return found

    def version(self, subject: str, version: str | int, *, deleted: bool = False) -> Version:
        """A subject version by number, "latest" or -1 (40401, 40402, 42202)."""
        number = parse_version(version)
        found = self.store.versions(subject, deleted=True)
        if not found:
            raise errors.subject_not_found(subject)
        live = [v for v in found if deleted or not v.deleted]
        if number == -1:
            if not live:
                raise errors.subject_not_found(subject)
            return live[-1]
        for v in live:
            if v.version == number:
                return v
        raise errors.version_not_found(subject, number)

    def schema_ids(self, subject: str) -> set[int]:
        """The ids of a subject's live versions (broker-side validation, server/schema_validation.py)."""
        return {v.schema_id for v in self.store.versions(subject)}

    def schema_by_id(self, schema_id: int) -> Version:
        found = self.store.by_id(schema_id)
        if not found:
            raise errors.schema_not_found(f"Schema {schema_id} not found")
        return found[0]

    def parse(self, body: Any, *, normalize: bool = False) -> ParsedSchema:
        """The schema of a request body, references resolved (42201 when invalid)."""
        if not isinstance(body, dict):
            raise errors.invalid_schema("the request body must be a JSON object")
        schema_type = body.get("schemaType") or AVRO
        if schema_type not in TYPES:
            raise errors.invalid_schema(f"unsupported schema type {schema_type!r} (supported: {', '.join(TYPES)})")
        refs = parse_references(body.get("references"))
        return parse(schema_type, body.get("schema"), refs, self.resolve(refs, schema_type), normalize=normalize)

    def resolve(self, refs: tuple[Reference, ...], schema_type: str, depth: int = 0) -> list[ParsedSchema]:
        """The referenced schemas, parsed, dependencies first (42201 for a missing one)."""
        if depth > 32:
            raise errors.invalid_schema("references nest too deep (a cycle?)")
        resolved: list[ParsedSchema] = []
        for ref in refs:
            try:
                target = self.version(ref.subject, ref.version)
            except errors.RegistryError:
                raise errors.invalid_schema(f"reference {ref.name} to subject {ref.subject} version "
                                            f"{ref.version} not found") from None
            deps = self.resolve(target.references, target.schema_type, depth + 1)
            resolved += deps
            dep = parse(target.schema_type, target.schema, target.references, deps)
            dep.name = ref.name  # a PROTOBUF import is resolved by this file name
            resolved.append(dep)
        return resolved

    def parsed(self, version: Version) -> ParsedSchema:
        """A stored version parsed (read-only: shared between callers)."""
        key = version.fingerprint()
        cached = self._parsed.get(key)
        if cached is None:
            cached = parse(version.schema_type, version.schema, version.references,
                           self.resolve(version.references, version.schema_type))
            if len(self._parsed) >= PARSED_CACHE:
                del self._parsed[next(iter(self._parsed))]  # the oldest
            self._parsed[key] = cached
        return cached

    def schema_text(self, version: Version, fmt: str | None) -> str:
        """The schema as `?format=` asks: `serialized` gives a PROTOBUF schema as the base64
        FileDescriptorProto Confluent's Protobuf serializers and deserializers load; any
        other format (or type) the stored text."""
        if fmt == "serialized" and version.schema_type == PROTOBUF:
            return protobuf.to_serialized(self.parsed(version).parsed)
        return version.schema

    def lookup(self, subject: str, body: Any, *, normalize: bool = False, deleted: bool = False) -> Version:
        """POST /subjects/{subject}: the version holding this schema (40401, 40403)."""
        versions = self.store.versions(subject, deleted=True)
        if not versions:
            raise errors.subject_not_found(subject)
        schema = self.parse(body, normalize=normalize)
        for v in reversed(versions):
            if (deleted or not v.deleted) and v.fingerprint() == schema.fingerprint():
                return v
        if normalize:  # stored un-normalized: compare normalized forms
            for v in reversed(versions):
                if (deleted or not v.deleted) and self._normalized(v) == schema.fingerprint():
                    return v
        raise errors.schema_not_found()

    def _normalized(self, version: Version) -> tuple:
        return parse(version.schema_type, version.schema, version.references,
                     self.resolve(version.references, version.schema_type), normalize=True).fingerprint()

    def compatibility(self, subject: str, body: Any, version: str | int | None, *,
                      normalize: bool = False) -> list[str]:
        """POST /compatibility/...: why the schema breaks the subject's level against
        `version` (None: the versions the level names)."""
        schema = self.parse(body, normalize=normalize)
        level = self.store.level(subject)
        if version is None:
            live = self.store.versions(subject)
            return compatibility.check(level, schema, [self.parsed(v) for v in live])
        target = self.version(subject, version)
        single = level.removesuffix("_TRANSITIVE")
        return compatibility.check(single, schema, [self.parsed(target)])

    # ---- writes --------------------------------------------------------------------
    async def register(self, subject: str, body: Any, *, normalize: bool = False) -> int:
        """POST /subjects/{subject}/versions: the schema's id, registering a new version
        when the subject does not hold it yet (409, 42201, 42205)."""
        async with self._writing():
            mode = self.store.mode(subject)
            if mode == "READONLY":
                raise errors.not_permitted(f"Subject {subject} is in read-only mode")
            schema = self.parse(body, normalize=normalize)
            all_versions = self.store.versions(subject, deleted=True)
            wanted_id = body.get("id")
            wanted_version = body.get("version")
            if mode == "IMPORT":
                if not isinstance(wanted_id, int) or wanted_id < 1:
                    raise errors.not_permitted("IMPORT mode needs the schema's id in the request")
                for versions in self.store.subjects.values():
                    for v in versions.values():
                        if v.schema_id == wanted_id and v.fingerprint() != schema.fingerprint():
                            raise errors.not_permitted(f"Overwrite new schema with id {wanted_id} is not permitted.")
                version = wanted_version if isinstance(wanted_version, int) and wanted_version > 0 else \
                    (all_versions[-1].version + 1 if all_versions else 1)
                await self._write([(records.schema_key(subject, version),
                                    records.schema_value(subject, version, wanted_id, schema.schema_type, schema.text,
                                                         [r.to_json() for r in schema.references], False))])
                log.info("schema registry: imported %s version %d as id %d", subject, version, wanted_id)
                return wanted_id
            if wanted_id not in (None, -1, 0):
                raise errors.not_permitted(f"Subject {subject} is not in import mode: an id cannot be given")
            live = [v for v in all_versions if not v.deleted]
            for v in live:
                if v.fingerprint() == schema.fingerprint():
                    return v.schema_id
            problems = compatibility.check(self.store.level(subject), schema, [self.parsed(v) for v in live])
            if problems:
                log.info("schema registry: %s: incompatible schema refused (%s): %s", subject,
                         self.store.level(subject), problems[:3])
                raise errors.incompatible(subject, problems)
            schema_id = self.store.id_for(schema.fingerprint()) or self.store.max_id + 1
            version = all_versions[-1].version + 1 if all_versions else 1
            await self._write([(records.schema_key(subject, version),
                                records.schema_value(subject, version, schema_id, schema.schema_type, schema.text,
                                                     [r.to_json() for r in schema.references], False))])
            log.info("schema registry: registered %s version %d (id %d, %s)", subject, version, schema_id,
                     schema.schema_type)
            return schema_id

    def _check_writable(self, subject: str | None) -> None:
        if self.store.mode(subject) == "READONLY":
            raise errors.not_permitted(f"Subject {subject} is in read-only mode" if subject
                                       else "The registry is in read-only mode")

    async def delete_version(self, subject: str, version: str | int, *, permanent: bool = False) -> int:
        """DELETE /subjects/{subject}/versions/{version}: soft, or hard after soft."""
        async with self._writing():
            self._check_writable(subject)
            # "latest" is the latest live version for a soft delete, any version for a hard one
            target = self.version(subject, version, deleted=permanent or parse_version(version) != -1)
            if permanent and not target.deleted:
                raise errors.version_not_soft_deleted(subject, target.version)
            if not permanent and target.deleted:
                raise errors.version_soft_deleted(subject, target.version)
            if self.store.referenced_by(subject, target.version):
                raise errors.references_exist(subject, target.version)
            key = records.schema_key(subject, target.version)
            value = None if permanent else records.schema_value(
                subject, target.version, target.schema_id, target.schema_type, target.schema,
                [r.to_json() for r in target.references], True)
            await self._write([(key, value)])
            log.info("schema registry: %s deleted %s version %d", "hard" if permanent else "soft", subject,
                     target.version)
            return target.version

    async def delete_subject(self, subject: str, *, permanent: bool = False) -> list[int]:
        """DELETE /subjects/{subject}: soft (a DELETE_SUBJECT record), or hard after soft
        (tombstones for every version, the deletion marker, the subject's config and mode)."""
        async with self._writing():
            self._check_writable(subject)
            every = self.store.versions(subject, deleted=True)
            if not every:
                raise errors.subject_not_found(subject)
            live = [v for v in every if not v.deleted]
            if permanent and live:
                raise errors.subject_not_soft_deleted(subject)
            if not permanent and not live:
                raise errors.subject_soft_deleted(subject)
            for v in every:
                if self.store.referenced_by(subject, v.version):
                    raise errors.references_exist(subject, v.version)
            if permanent:
                entries: list[tuple[bytes, bytes | None]] = [(records.schema_key(subject, v.version), None)
                                                             for v in every]
                entries.append((records.delete_subject_key(subject), None))
                if subject in self.store.configs:
                    entries.append((records.config_key(subject), None))
                if subject in self.store.modes:
                    entries.append((records.mode_key(subject), None))
                await self._write(entries)
                done = [v.version for v in every]
            else:
                await self._write([(records.delete_subject_key(subject),
                                    records.delete_subject_value(subject, live[-1].version))])
                done = [v.version for v in live]
            log.info("schema registry: %s deleted subject %s versions %s", "hard" if permanent else "soft",
                     subject, done)
            return done

    async def set_config(self, subject: str | None, level: Any) -> str:
        if not isinstance(level, str) or level.upper() not in compatibility.LEVELS:
            raise errors.invalid_compatibility(level)
        async with self._writing():
            self._check_writable(subject)
            await self._write([(records.config_key(subject), records.config_value(level.upper()))])
        return level.upper()

    async def delete_config(self, subject: str | None) -> str:
        async with self._writing():
            previous = self.store.level(subject)
            if subject is not None and subject not in self.store.configs:
                if not self.store.versions(subject, deleted=True):
                    raise errors.subject_not_found(subject)
                raise errors.subject_config_not_found(subject)
            await self._write([(records.config_key(subject), None)])
            return previous

    async def set_mode(self, subject: str | None, mode: Any, *, force: bool = False) -> str:
        if not isinstance(mode, str) or mode.upper() not in MODES:
            raise errors.invalid_mode(mode)
        mode = mode.upper()
        async with self._writing():
            if mode == "IMPORT" and not force:
                holds = self.store.versions(subject) if subject is not None else self.store.subject_names()
                if holds:
                    raise errors.not_permitted("Cannot import since found existing subjects")
            await self._write([(records.mode_key(subject), records.mode_value(mode))])
        return mode

    async def delete_mode(self, subject: str) -> str:
        async with self._writing():
            if subject not in self.store.modes:
                raise errors.subject_mode_not_found(subject)
            previous = self.store.modes[subject]
            await self._write([(records.mode_key(subject), None)])
            return previous


def parse_version(version: str | int) -> int:
    """A version path segment: 1..2^31-1, "latest" or -1 (as -1); else 42202."""
    if isinstance(version, str):
        if version == "latest":
            return -1
        try:
            number = int(version)
        except ValueError:
            raise errors.invalid_version(version) from None
    else:
        number = version
    if number == -1 or 1 <= number <= MAX_VERSION:
        return number
    raise errors.invalid_version(version)
