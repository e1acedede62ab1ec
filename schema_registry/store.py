"""The registry's state in memory, changed only by applying `_schemas` records.

Why only records: the same `apply` runs at start-up (replaying the topic) and after each
write, so what a restarted broker serves is exactly what it served before — ids, versions,
soft deletions, configs and modes — and a write that did not reach the log changed nothing.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field

from schema_registry.schemas import AVRO, Reference

log = logging.getLogger("trafka.schema_registry")


@dataclass
class Version:
    subject: str
    version: int
    schema_id: int
    schema_type: str
    schema: str
    references: tuple[Reference, ...]
    deleted: bool

    def fingerprint(self) -> tuple:
        return (self.schema_type, self.schema, tuple((r.name, r.subject, r.version) for r in self.references))

    def to_json(self) -> dict:
        """Confluent's answer for one subject version."""
        out: dict = {"subject": self.subject, "version": self.version, "id": self.schema_id}
        if self.schema_type != AVRO:
            out["schemaType"] = self.schema_type
        if self.references:
            out["references"] = [r.to_json() for r in self.references]
        out["schema"] = self.schema
        return out


@dataclass
class Store:
    subjects: dict[str, dict[int, Version]] = field(default_factory=dict)
    configs: dict[str | None, str] = field(default_factory=dict)  # None: the global level
    modes: dict[str | None, str] = field(default_factory=dict)
    max_id: int = 0
    # Indexes kept by apply(), so the lookups every client makes do not walk every version:
    # schema id -> its subject versions (in the order they came), fingerprint -> an id.
    ids: dict[int, dict[tuple[str, int], Version]] = field(default_factory=dict, repr=False)
    fingerprints: dict[tuple, int] = field(default_factory=dict, repr=False)

    # ---- applying records ----------------------------------------------------------
    def apply(self, key: dict, value: dict | None) -> None:
        """One `_schemas` record (value None: a tombstone). Unknown key types (Confluent's
        NOOP, CLEAR_SUBJECT) are ignored."""
        kind = key.get("keytype")
        subject = key.get("subject")
        if kind == "SCHEMA":
            version = int(key["version"])
            if value is None:
                versions = self.subjects.get(subject, {})
                self._unindex(versions.pop(version, None))
                if not versions:
                    self.subjects.pop(subject, None)
                return
            refs = tuple(Reference(r["name"], r["subject"], int(r["version"])) for r in value.get("references") or ())
            entry = Version(subject, version, int(value["id"]), value.get("schemaType") or AVRO, value["schema"], refs,
                            bool(value.get("deleted", False)))
            versions = self.subjects.setdefault(subject, {})
            self._unindex(versions.get(version))
            versions[version] = entry
            self.ids.setdefault(entry.schema_id, {})[(subject, version)] = entry
            if self.fingerprints.get(entry.fingerprint()) not in self.ids:  # new, or its holders all gone
                self.fingerprints[entry.fingerprint()] = entry.schema_id
            self.max_id = max(self.max_id, entry.schema_id)
        elif kind == "CONFIG":
            if value is None:
                self.configs.pop(subject, None)
            else:
                self.configs[subject] = value["compatibilityLevel"]
        elif kind == "MODE":
            if value is None:
                self.modes.pop(subject, None)
            else:
                self.modes[subject] = value["mode"]
        elif kind == "DELETE_SUBJECT":
            if value is not None:
                upto = int(value.get("version", 0))
                for entry in self.subjects.get(subject, {}).values():
                    if entry.version <= upto:
                        entry.deleted = True

    def _unindex(self, entry: Version | None) -> None:
        if entry is None:
            return
        holders = self.ids.get(entry.schema_id, {})
        holders.pop((entry.subject, entry.version), None)
        if not holders:
            self.ids.pop(entry.schema_id, None)
        # fingerprints is only a hint (id_for checks it), so a stale entry is harmless

    # ---- queries -------------------------------------------------------------------
    def versions(self, subject: str, *, deleted: bool = False) -> list[Version]:
        """The subject's versions, oldest first (soft-deleted ones only with `deleted`)."""
        found = self.subjects.get(subject, {})
        return [found[v] for v in sorted(found) if deleted or not found[v].deleted]

    def subject_names(self, *, deleted: bool = False) -> list[str]:
        return sorted(s for s in self.subjects if self.versions(s, deleted=deleted))

    def by_id(self, schema_id: int) -> list[Version]:
        """Every subject version holding schema `schema_id` (soft-deleted ones too)."""
        return list(self.ids.get(schema_id, {}).values())

    def id_for(self, fingerprint: tuple) -> int | None:
        """The id a schema already has under any subject (one schema, one id)."""
        hint = self.fingerprints.get(fingerprint)
        if hint is None:  # every fingerprint ever applied is in there: a schema never seen
            return None
        if any(v.fingerprint() == fingerprint for v in self.ids.get(hint, {}).values()):
            return hint
        for versions in self.subjects.values():  # a hint gone stale (versions deleted for good)
            for v in versions.values():
                if v.fingerprint() == fingerprint:
                    return v.schema_id
        return None

    def referenced_by(self, subject: str, version: int) -> list[int]:
        """Ids of live schemas that reference `subject` at `version`."""
        return sorted({v.schema_id for versions in self.subjects.values() for v in versions.values()
                       if not v.deleted and any(r.subject == subject and r.version == version for r in v.references)})

    def level(self, subject: str | None) -> str:
        from schema_registry.compatibility import DEFAULT_LEVEL

        if subject is not None and subject in self.configs:
            return self.configs[subject]
        return self.configs.get(None, DEFAULT_LEVEL)

    def mode(self, subject: str | None) -> str:
        if subject is not None and subject in self.modes:
            return self.modes[subject]
        return self.modes.get(None, "READWRITE")
