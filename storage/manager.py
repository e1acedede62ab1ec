"""The data directory: topics, their partition logs, and the background duties.

Layout of a data directory::

    .lock                                flock()ed while a broker owns the directory
    .clean_shutdown                      exists only between a clean close() and the next open()
    __topics/<topic>.json                TopicMeta of each topic (storage.topics)
    <topic>-<partition>/                 a PartitionLog (storage.log)
    <topic>-<partition>.<hex>-stray/     a partition directory found without metadata, set aside
    <topic>-<partition>.<hex>-delete/    a deleted topic's partition on its way out

How this works: the metadata file is the commit point of every topic change (create writes
partition directories first, then the metadata; delete removes the metadata first). At
open(), a missing `.clean_shutdown` marker means the last run crashed, and every segment of
every partition is validated batch by batch; after a clean shutdown only active segments
are. Topic and log maps are replaced, never mutated, so lookups from other threads need no
lock; changes serialize on one lock. Retention, compaction and interval flushing run when
the server calls run_retention / run_compaction / run_flush (from a worker thread: they
block on disk).
"""

from __future__ import annotations

import dataclasses
import fcntl
import logging
import os
import shutil
import threading
import time
import uuid
from pathlib import Path
from types import MappingProxyType
from typing import Mapping

from storage.compaction import CleanerStats, clean_log
from storage.config import TOPIC_CONFIGS, LogConfig
from storage.errors import (
    InvalidConfig,
    InvalidPartitions,
    LogClosed,
    StorageError,
    TopicExists,
    UnknownTopicOrPartition,
)
from storage.files import fsync_dir, unlink_quietly
from storage.log import PartitionLog
from storage.retention import apply_retention
from storage.segment import Graveyard
from storage.topics import (
    TOPICS_DIR,
    TopicMeta,
    meta_path,
    parse_partition_dir,
    partition_dir_name,
    save_meta,
    validate_topic_name,
)

log = logging.getLogger("storage")

CLEAN_SHUTDOWN = ".clean_shutdown"
LOCK_FILE = ".lock"


def _now_ms() -> int:
    return int(time.time() * 1000)


class LogManager:
    """All topics of one data directory (see the module docstring for the layout)."""

    def __init__(self, data_dir: str | Path, defaults: LogConfig | None = None) -> None:
        self.data_dir = Path(data_dir)
        self.defaults = defaults if defaults is not None else LogConfig()
        self._lock = threading.RLock()
        self._topics: dict[str, TopicMeta] = {}
        self._configs: dict[str, LogConfig] = {}
        self._logs: dict[tuple[str, int], PartitionLog] = {}
        self._graveyard = Graveyard()
        self._lock_fd: int | None = None
        self._opened = False
        self.recovered_cleanly: bool | None = None

    # ------------------------------------------------------------------ lifecycle

    def open(self, now_ms: int | None = None) -> None:
        """Take the directory, load topic metadata, open and recover every partition."""
        now_ms = _now_ms() if now_ms is None else now_ms
        with self._lock:
            if self._opened:
                return
            self.data_dir.mkdir(parents=True, exist_ok=True)
            self._take_lock()
            marker = self.data_dir / CLEAN_SHUTDOWN
            clean = marker.exists()
            if clean:
                marker.unlink()
                fsync_dir(self.data_dir)
            self.recovered_cleanly = clean
            log.info("opening %s (%s shutdown)", self.data_dir, "clean" if clean else "unclean: validating every segment")
            topics = self._load_metas()
            self._set_aside_strays(topics)
            logs: dict[tuple[str, int], PartitionLog] = {}
            configs: dict[str, LogConfig] = {}
            try:
                for name, meta in sorted(topics.items()):
                    config = self._config_for(meta)
                    configs[name] = config
                    for partition in range(meta.partitions):
                        logs[(name, partition)] = self._open_log(name, partition, config, clean=clean, now_ms=now_ms)
            except BaseException:
                for plog in logs.values():
                    plog.close()
                self._release_lock()
                raise
            self._topics, self._configs, self._logs = topics, configs, logs
            self._opened = True

    def close(self) -> None:
        """Flush and close every log, then mark the shutdown clean."""
        with self._lock:
            if not self._opened:
                return
            failures = 0
            for key, plog in self._logs.items():
                try:
                    plog.close()
                except Exception:
                    failures += 1
                    log.exception("closing %s-%d failed", *key)
            self._graveyard.close_all()
            if not failures:
                fd = os.open(self.data_dir / CLEAN_SHUTDOWN, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
                os.fsync(fd)
                os.close(fd)
                fsync_dir(self.data_dir)
            self._logs = {}
            self._topics = {}
            self._configs = {}
            self._opened = False
            self._release_lock()

    def _take_lock(self) -> None:
        fd = os.open(self.data_dir / LOCK_FILE, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            raise StorageError(f"{self.data_dir} is in use by another process") from None
        self._lock_fd = fd

    def _release_lock(self) -> None:
        if self._lock_fd is not None:
            os.close(self._lock_fd)  # closing drops the flock
            self._lock_fd = None

    def _load_metas(self) -> dict[str, TopicMeta]:
        topics: dict[str, TopicMeta] = {}
        meta_dir = self.data_dir / TOPICS_DIR
        meta_dir.mkdir(exist_ok=True)
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
            except (ValueError, KeyError, TypeError, StorageError) as exc:
                log.error("ignoring unreadable topic metadata %s: %s", path, exc)
                continue
            topics[meta.name] = meta
        return topics

    def _set_aside_strays(self, topics: Mapping[str, TopicMeta]) -> None:
        for entry in sorted(self.data_dir.iterdir()):
            if not entry.is_dir() or entry.name == TOPICS_DIR:
                continue
            if entry.name.endswith("-delete"):
                shutil.rmtree(entry, ignore_errors=True)
                continue
            if entry.name.endswith("-stray"):
                continue
            parsed = parse_partition_dir(entry.name)
            if parsed is None:
                continue
            topic, partition = parsed
            meta = topics.get(topic)
            if meta is not None and partition < meta.partitions:
                continue
            # Keep the name under the 255-byte limit for 249-character topic names.
            target = entry.with_name(f"{entry.name[:200]}.{uuid.uuid4().hex}-stray")
            log.warning("partition directory %s has no topic metadata; moved to %s", entry.name, target.name)
            entry.rename(target)

    def _config_for(self, meta: TopicMeta) -> LogConfig:
        try:
            return LogConfig.from_kafka(meta.configs, self.defaults)
        except InvalidConfig as exc:
            log.error("topic %s: stored config %s; using broker defaults for it", meta.name, exc)
            good = {}
            for name, value in meta.configs.items():
                try:
                    LogConfig.from_kafka({name: value}, self.defaults)
                    good[name] = value
                except InvalidConfig:
                    pass
            return LogConfig.from_kafka(good, self.defaults)

    def _open_log(self, topic: str, partition: int, config: LogConfig, *, clean: bool, now_ms: int) -> PartitionLog:
        name = partition_dir_name(topic, partition)
        return PartitionLog.open(self.data_dir / name, config, clean=clean, now_ms=now_ms,
                                 graveyard=self._graveyard, name=name)

    def _check_open(self) -> None:
        if not self._opened:
            raise StorageError("the log manager is not open")

    # ------------------------------------------------------------------ lookups

    @property
    def topics(self) -> Mapping[str, TopicMeta]:
        return MappingProxyType(self._topics)

    def log(self, topic: str, partition: int) -> PartitionLog:
        try:
            return self._logs[(topic, partition)]
        except KeyError:
            raise UnknownTopicOrPartition(f"{topic}-{partition}") from None

    def logs(self, topic: str | None = None) -> list[PartitionLog]:
        """Every partition log (of ``topic``), in partition order."""
        items = sorted(self._logs.items())
        return [plog for (name, _), plog in items if topic is None or name == topic]

    def config(self, topic: str) -> LogConfig:
        try:
            return self._configs[topic]
        except KeyError:
            raise UnknownTopicOrPartition(topic) from None

    def explicit_configs(self, topic: str) -> Mapping[str, str]:
        return self._meta(topic).configs

    def _meta(self, topic: str) -> TopicMeta:
        try:
            return self._topics[topic]
        except KeyError:
            raise UnknownTopicOrPartition(topic) from None

    # ------------------------------------------------------------------ topic changes

    def create_topic(
        self,
        name: str,
        partitions: int,
        configs: Mapping[str, str] | None = None,
        topic_id: uuid.UUID | None = None,
        *,
        now_ms: int | None = None,
    ) -> TopicMeta:
        validate_topic_name(name)
        if partitions < 1:
            raise InvalidPartitions(f"partition count must be at least 1, not {partitions}")
        configs = dict(configs or {})
        now_ms = _now_ms() if now_ms is None else now_ms
        with self._lock:
            self._check_open()
            if name in self._topics:
                raise TopicExists(name)
            config = LogConfig.from_kafka(configs, self.defaults)
            meta = TopicMeta(name, topic_id or uuid.uuid4(), partitions, MappingProxyType(configs), now_ms)
            opened: dict[tuple[str, int], PartitionLog] = {}
            try:
                for partition in range(partitions):
                    directory = self.data_dir / partition_dir_name(name, partition)
                    if directory.exists():  # leftovers of a crashed create
                        shutil.rmtree(directory)
                    opened[(name, partition)] = self._open_log(name, partition, config, clean=True, now_ms=now_ms)
                fsync_dir(self.data_dir)
                save_meta(self.data_dir, meta)
            except BaseException:
                for plog in opened.values():
                    plog.close_and_delete()
                raise
            self._publish(meta, config, add=opened)
            log.info("created topic %s (%s) with %d partition(s)", name, meta.topic_id, partitions)
            return meta

    def delete_topic(self, name: str) -> None:
        with self._lock:
            self._check_open()
            meta = self._meta(name)
            unlink_quietly(meta_path(self.data_dir, name))
            fsync_dir(self.data_dir / TOPICS_DIR)
            doomed = [plog for (topic, _), plog in self._logs.items() if topic == name]
            topics = dict(self._topics)
            del topics[name]
            configs = dict(self._configs)
            configs.pop(name, None)
            self._logs = {k: v for k, v in self._logs.items() if k[0] != name}
            self._topics, self._configs = topics, configs
        for plog in doomed:
            try:
                plog.close_and_delete()
            except OSError as exc:
                log.error("deleting %s: %s", plog.name, exc)
        log.info("deleted topic %s (%s)", name, meta.topic_id)

    def create_partitions(self, name: str, total: int, *, now_ms: int | None = None) -> TopicMeta:
        now_ms = _now_ms() if now_ms is None else now_ms
        with self._lock:
            self._check_open()
            meta = self._meta(name)
            if total <= meta.partitions:
                raise InvalidPartitions(f"topic {name} has {meta.partitions} partitions; {total} does not add any")
            config = self._configs[name]
            opened: dict[tuple[str, int], PartitionLog] = {}
            try:
                for partition in range(meta.partitions, total):
                    directory = self.data_dir / partition_dir_name(name, partition)
                    if directory.exists():
                        shutil.rmtree(directory)
                    opened[(name, partition)] = self._open_log(name, partition, config, clean=True, now_ms=now_ms)
                fsync_dir(self.data_dir)
                new_meta = dataclasses.replace(meta, partitions=total)
                save_meta(self.data_dir, new_meta)
            except BaseException:
                for plog in opened.values():
                    plog.close_and_delete()
                raise
            self._publish(new_meta, config, add=opened)
            return new_meta

    def alter_configs(self, name: str, configs: Mapping[str, str | None], *, incremental: bool) -> TopicMeta:
        """Change a topic's explicit configs. Incremental: None deletes a key, others set it;
        otherwise the given (non-None) entries replace all explicit configs."""
        with self._lock:
            self._check_open()
            meta = self._meta(name)
            if incremental:
                explicit = dict(meta.configs)
                for key, value in configs.items():
                    if key not in TOPIC_CONFIGS:
                        raise InvalidConfig(key, "unknown topic config")
                    if value is None:
                        explicit.pop(key, None)
                    else:
                        explicit[key] = value
            else:
                explicit = {k: v for k, v in configs.items() if v is not None}
            config = LogConfig.from_kafka(explicit, self.defaults)
            new_meta = dataclasses.replace(meta, configs=MappingProxyType(explicit))
            save_meta(self.data_dir, new_meta)
            self._publish(new_meta, config)
            for (topic, _), plog in self._logs.items():
                if topic == name:
                    plog.config = config
            return new_meta

    def _publish(self, meta: TopicMeta, config: LogConfig, *, add: Mapping[tuple[str, int], PartitionLog] | None = None) -> None:
        if add:
            logs = dict(self._logs)
            logs.update(add)
            self._logs = logs
        self._topics = {**self._topics, meta.name: meta}
        self._configs = {**self._configs, meta.name: config}

    # ------------------------------------------------------------------ duties

    def run_retention(self, now_ms: int | None = None) -> int:
        """Delete expired, oversized or DeleteRecords-ed whole segments; returns how many."""
        now_ms = _now_ms() if now_ms is None else now_ms
        deleted = 0
        for plog in list(self._logs.values()):
            try:
                deleted += apply_retention(plog, now_ms)
            except LogClosed:
                continue
            except (OSError, StorageError):
                log.exception("retention of %s failed", plog.name)
        self._graveyard.sweep()
        return deleted

    def run_compaction(self, now_ms: int | None = None, *, force: bool = False) -> dict[str, CleanerStats]:
        """Compact every partition whose cleanup.policy contains compact and that has enough
        dirty data; returns stats by partition name for those cleaned."""
        now_ms = _now_ms() if now_ms is None else now_ms
        done: dict[str, CleanerStats] = {}
        for plog in list(self._logs.values()):
            if not plog.config.compact:
                continue
            try:
                stats = clean_log(plog, now_ms, force=force)
            except LogClosed:
                continue
            except Exception:
                log.exception("compaction of %s failed", plog.name)
                continue
            if stats is not None:
                done[plog.name] = stats
        self._graveyard.sweep()
        return done

    def run_flush(self, now_ms: int | None = None) -> int:
        """The timer half of the interval fsync policy; returns how many logs were flushed."""
        now_ms = _now_ms() if now_ms is None else now_ms
        return sum(1 for plog in list(self._logs.values()) if plog.maybe_flush(now_ms))

    def sweep(self) -> None:
        """Close the files of deleted segments whose readers are gone (frees disk space)."""
        self._graveyard.sweep()

    def flush_all(self) -> None:
        for plog in list(self._logs.values()):
            plog.flush()
