"""Topic metadata: what exists, with which id, how many partitions, which explicit configs.

File format: one JSON document per topic, `<data_dir>/__topics/<topic>.json`::

    {"version": 1, "name": "orders", "topic_id": "6f1c...-...", "partitions": 3,
     "configs": {"retention.ms": "3600000"}, "created_ms": 1763740000000}

`configs` holds only the settings given explicitly (CreateTopics, AlterConfigs), so a change
of broker defaults reaches every topic that did not override it. Files are replaced
atomically (tmp + fsync + rename + directory fsync); the metadata file is the commit point
of topic creation (written after the partition directories) and of deletion (removed
before them), so a crash leaves no half-made topic, only stray directories that
`LogManager.open` sets aside.
"""

from __future__ import annotations

import json
import re
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from types import MappingProxyType
from typing import Mapping

from storage.errors import InvalidTopicName
from storage.files import atomic_write

TOPICS_DIR = "__topics"
META_VERSION = 1
MAX_TOPIC_NAME = 249
_LEGAL = re.compile(r"^[a-zA-Z0-9._-]+$")


def validate_topic_name(name: str) -> None:
    """Kafka's rules (Topic.validate): 1-249 of [a-zA-Z0-9._-], not "." or ".."."""
    if not name:
        raise InvalidTopicName("topic name is empty")
    if name in (".", ".."):
        raise InvalidTopicName(f"topic name cannot be {name!r}")
    if len(name) > MAX_TOPIC_NAME:
        raise InvalidTopicName(f"topic name longer than {MAX_TOPIC_NAME} characters")
    if not _LEGAL.match(name):
        raise InvalidTopicName(f"topic name {name!r} has characters outside [a-zA-Z0-9._-]")


@dataclass(frozen=True)
class TopicMeta:
    """A topic as storage persists it (immutable; replaced on every change)."""

    name: str
    topic_id: uuid.UUID
    partitions: int
    configs: Mapping[str, str] = field(default_factory=lambda: MappingProxyType({}))
    created_ms: int = 0

    def to_json(self) -> bytes:
        return json.dumps(
            {
                "version": META_VERSION,
                "name": self.name,
                "topic_id": str(self.topic_id),
                "partitions": self.partitions,
                "configs": dict(self.configs),
                "created_ms": self.created_ms,
            },
            indent=1,
            sort_keys=True,
        ).encode()

    @classmethod
    def from_json(cls, data: bytes) -> "TopicMeta":
        doc = json.loads(data)
        if doc.get("version") != META_VERSION:
            raise ValueError(f"topic metadata version {doc.get('version')}")
        return cls(
            name=doc["name"],
            topic_id=uuid.UUID(doc["topic_id"]),
            partitions=int(doc["partitions"]),
            configs=MappingProxyType({str(k): str(v) for k, v in doc["configs"].items()}),
            created_ms=int(doc.get("created_ms", 0)),
        )


def meta_path(data_dir: Path, name: str) -> Path:
    return data_dir / TOPICS_DIR / f"{name}.json"


def save_meta(data_dir: Path, meta: TopicMeta) -> None:
    (data_dir / TOPICS_DIR).mkdir(exist_ok=True)
    atomic_write(meta_path(data_dir, meta.name), meta.to_json())


def partition_dir_name(topic: str, partition: int) -> str:
    return f"{topic}-{partition}"


_PARTITION_DIR = re.compile(r"^(?P<topic>.+)-(?P<partition>\d+)$")


def parse_partition_dir(name: str) -> tuple[str, int] | None:
    match = _PARTITION_DIR.match(name)
    if match is None:
        return None
    return match.group("topic"), int(match.group("partition"))
