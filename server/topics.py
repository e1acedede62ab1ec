"""The topic registry: which topics exist, their ids, partition counts, replica assignment
and explicit configs.

Why here and not in storage: storage keeps files; the server decides what exists. On one
broker the registry is persisted in the data directory; in a cluster it will come from
ZooKeeper (`/brokers/topics/T`, `/config/topics/T`) and the data directory only holds the
logs of the partitions this broker hosts.

File format: one JSON document per topic, `<data_dir>/__topics/<topic>.json`::

    {"version": 1, "name": "orders", "topic_id": "6f1c...-...", "partitions": 3,
     "configs": {"retention.ms": "3600000"}, "created_ms": 1763740000000,
     "assignment": {"0": [1], "1": [1], "2": [1]}}

`configs` holds only the settings given explicitly (CreateTopics, AlterConfigs), so a change
of broker defaults reaches every topic that did not override it. `assignment` (replica
broker ids per partition) is optional: files written before it existed mean "this broker".
Files are replaced atomically; the metadata file is the commit point of topic creation
(written after the partition directories) and of deletion (removed before them), so a
crash leaves no half-made topic, only stray directories that the log manager sets aside.
"""

from __future__ import annotations

import json
import logging
import re
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from types import MappingProxyType
from typing import Iterator, Mapping

from storage.files import atomic_write, fsync_dir, unlink_quietly

from server.errors import InvalidTopic

log = logging.getLogger("trafka.topics")

TOPICS_DIR = "__topics"
META_VERSION = 1
MAX_TOPIC_NAME = 249
_LEGAL = re.compile(r"^[a-zA-Z0-9._-]+$")
INTERNAL_TOPICS = frozenset({"__consumer_offsets", "__transaction_state", "__share_group_state"})


def validate_topic_name(name: str | None) -> None:
    """Kafka's rules (Topic.validate): 1-249 chars of [a-zA-Z0-9._-], not '.' or '..'."""
    if not name:
        raise InvalidTopic("topic name is empty")
    if name in (".", ".."):
        raise InvalidTopic(f"topic name cannot be {name!r}")
    if len(name) > MAX_TOPIC_NAME:
        raise InvalidTopic(f"topic name is {len(name)} characters, the limit is {MAX_TOPIC_NAME}")
    if not _LEGAL.match(name):
        raise InvalidTopic(f"topic name {name!r} has characters outside [a-zA-Z0-9._-]")


@dataclass(frozen=True)
class TopicMeta:
    """A topic as the registry knows it (immutable; replaced on every change)."""

    name: str
    topic_id: uuid.UUID
    partitions: int
    configs: Mapping[str, str] = field(default_factory=lambda: MappingProxyType({}))
    created_ms: int = 0
    # partition -> replica broker ids, preferred leader first; empty: this broker alone
    assignment: Mapping[int, tuple[int, ...]] = field(default_factory=lambda: MappingProxyType({}))

    def replicas(self, partition: int, default: int) -> list[int]:
        return list(self.assignment.get(partition) or (default,))

    def to_json(self) -> bytes:
        doc = {
            "version": META_VERSION,
            "name": self.name,
            "topic_id": str(self.topic_id),
            "partitions": self.partitions,
            "configs": dict(self.configs),
            "created_ms": self.created_ms,
        }
        if self.assignment:
            doc["assignment"] = {str(p): list(r) for p, r in sorted(self.assignment.items())}
        return json.dumps(doc, indent=1, sort_keys=True).encode()

    @classmethod
    def from_json(cls, data: bytes) -> "TopicMeta":
        doc = json.loads(data)
        if doc.get("version") != META_VERSION:
            raise ValueError(f"topic metadata version {doc.get('version')}")
        assignment = {int(p): tuple(int(b) for b in r) for p, r in (doc.get("assignment") or {}).items()}
        return cls(
            name=doc["name"],
            topic_id=uuid.UUID(doc["topic_id"]),
            partitions=int(doc["partitions"]),
            configs=MappingProxyType({str(k): str(v) for k, v in doc["configs"].items()}),
            created_ms=int(doc.get("created_ms", 0)),
            assignment=MappingProxyType(assignment),
        )


class TopicRegistry:
    """The topics of this broker, by name and by id, persisted under `__topics/`.

    Maps are replaced, never mutated, so readers on other threads need no lock."""

    def __init__(self, data_dir: Path) -> None:
        self.data_dir = Path(data_dir)
        self._by_name: dict[str, TopicMeta] = {}
        self._by_id: dict[uuid.UUID, str] = {}

    # ---- lookups ----------------------------------------------------------------------
    def get(self, name: str | None) -> TopicMeta | None:
        return self._by_name.get(name) if name is not None else None

    def __getitem__(self, name: str) -> TopicMeta:
        return self._by_name[name]

    def __contains__(self, name: object) -> bool:
        return name in self._by_name

    def __iter__(self) -> Iterator[str]:
        return iter(self._by_name)

    def __len__(self) -> int:
        return len(self._by_name)

    def items(self):
        return self._by_name.items()

    def values(self):
        return self._by_name.values()

    def name_for_id(self, topic_id: uuid.UUID) -> str | None:
        return self._by_id.get(topic_id)

    def total_partitions(self) -> int:
        return sum(meta.partitions for meta in self._by_name.values())

    # ---- persistence ------------------------------------------------------------------
    def _path(self, name: str) -> Path:
        return self.data_dir / TOPICS_DIR / f"{name}.json"

    def load(self) -> None:
        """Read every `__topics/*.json`; unreadable files are logged and skipped."""
        topics: dict[str, TopicMeta] = {}
        meta_dir = self.data_dir / TOPICS_DIR
        meta_dir.mkdir(parents=True, exist_ok=True)
        for path in sorted(meta_dir.iterdir()):
            if path.name.endswith(".tmp"):
                unlink_quietly(path)
                continue
            if not path.name.endswith(".json"):
                continue
            try:
                meta = TopicMeta.from_json(path.read_bytes())
                validate_topic_name(meta.name)
                if path.name != f"{meta.name}.json":
                    raise ValueError(f"names topic {meta.name!r}")
            except (OSError, ValueError, KeyError, TypeError, AttributeError, InvalidTopic) as exc:
                log.error("ignoring unreadable topic metadata %s: %s", path, exc)
                continue
            topics[meta.name] = meta
        self._by_name = topics
        self._by_id = {meta.topic_id: name for name, meta in topics.items()}

    def put(self, meta: TopicMeta) -> None:
        """Persist (atomically) and publish a new or changed topic."""
        (self.data_dir / TOPICS_DIR).mkdir(parents=True, exist_ok=True)
        atomic_write(self._path(meta.name), meta.to_json())
        self._by_name = {**self._by_name, meta.name: meta}
        self._by_id = {**self._by_id, meta.topic_id: meta.name}

    def remove(self, name: str) -> TopicMeta:
        """Delete the topic's metadata file (the commit point of a delete) and forget it."""
        meta = self._by_name[name]
        unlink_quietly(self._path(name))
        fsync_dir(self.data_dir / TOPICS_DIR)
        self._by_name = {k: v for k, v in self._by_name.items() if k != name}
        self._by_id = {k: v for k, v in self._by_id.items() if v != name}
        return meta
