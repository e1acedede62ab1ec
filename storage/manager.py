"""The data directory: partition logs, the directory lock, and the background duties.

Layout of a data directory::

    .lock                                flock()ed while a broker owns the directory
    .clean_shutdown                      exists only between a clean close() and the next open()
    recovery-point-offset-checkpoint     Kafka's: per partition, the offset below which its log
                                         is fsynced (LogManager._write_recovery_points)
    log-summary-checkpoint               Trafka's: each log's offsets and leader epoch at a clean
                                         close, so the next start opens logs at first use
                                         (storage.log_summary)
    <topic>-<partition>/                 a PartitionLog (storage.log)
    <topic>-<partition>.<hex>-stray/     a partition directory no topic claims, set aside
    <topic>-<partition>.<hex>-delete/    a deleted partition on its way out

What topics exist is not storage's business: the server's topic registry (server/topics.py)
decides, and tells the manager which logs to open, create and delete, with the LogConfig
each runs under. At open(), a missing `.clean_shutdown` marker means the last run crashed:
a log opened afterwards validates, batch by batch, the segments at or past its recovery
point from the recovery-point-offset-checkpoint (all of them when the checkpoint is missing
or unreadable), as Kafka's LogLoader; after a clean shutdown nothing is scanned. The
checkpoint is rewritten by `checkpoint_recovery_points` (the server calls it every
log.flush.offset.checkpoint.interval.ms) and at close(). After a clean shutdown no log is
opened at open(): `deferred` tells the server what the summary knows of one, and it opens
them (`open_log`) at first use or in its warm-up; until then a log keeps its place in both
checkpoints with the values it was closed with, and `delete_logs` removes its directory.
The log map changes only under one lock and only by whole-key assignment or deletion (each
atomic under the GIL), so lookups from other threads need no lock and iterations outside
the lock take a copy first (`list(...)`, one C call);
it is not copied on every change, which made opening 100 000 logs quadratic. Retention, compaction and
interval flushing run when the server calls run_retention / run_compaction / run_flush
(from a worker thread: they block on disk).
"""

from __future__ import annotations

import fcntl
import logging
import os
import shutil
import threading
import time
import uuid
from pathlib import Path
from typing import Callable, Iterable

from storage.compaction import CleanerStats, clean_log
from storage.config import LogConfig
from storage.errors import DirectoryInUse, LogClosed, StorageError, UnknownTopicOrPartition
from storage.files import fsync_dir, read_offset_checkpoint, write_checkpoint_entries
from storage.log import PartitionLog
from storage.log_summary import LOG_SUMMARY_CHECKPOINT, LogSummary, read_log_summary, write_log_summary
from storage.open_files import OPEN_FILES
from storage.recovery import RecoveryStats
from storage.retention import apply_retention
from storage.segment import Graveyard
from storage.topics import parse_partition_dir, partition_dir_name

log = logging.getLogger("storage")

CLEAN_SHUTDOWN = ".clean_shutdown"
RECOVERY_POINT_CHECKPOINT = "recovery-point-offset-checkpoint"
LOCK_FILE = ".lock"
RESERVED_DIRS = frozenset({"__topics"})


def _now_ms() -> int:
    return int(time.time() * 1000)


class LogManager:
    """All partition logs of one data directory (see the module docstring for the layout)."""

    def __init__(self, data_dir: str | Path, defaults: LogConfig | None = None, *,
                 max_open_files: int | None = None) -> None:
        """``max_open_files``: log.open.files.max, segment files open at once in the
        process (None: half the soft RLIMIT_NOFILE at open(); see storage.open_files)."""
        self.data_dir = Path(data_dir)
        self.max_open_files = max_open_files
        self.defaults = defaults if defaults is not None else LogConfig()
        self._lock = threading.RLock()
        self._logs: dict[tuple[str, int], PartitionLog] = {}
        # Logs with unflushed segments: what run_flush visits (see PartitionLog.dirty_logs).
        self._dirty_logs: set[PartitionLog] = set()
        self._graveyard = Graveyard()
        self._lock_fd: int | None = None
        self._opened = False
        self.recovered_cleanly: bool | None = None
        # From the recovery-point-offset-checkpoint at open() after an unclean shutdown;
        # None: no usable checkpoint, every segment of every log is scanned.
        self._recovery_points: dict[tuple[str, int], int] | None = None
        self._recovery_points_mtime_ns: int | None = None
        self._recovery = RecoveryStats()
        # Logs known from the log-summary-checkpoint of a clean shutdown and not opened yet
        # (storage.log_summary): opened at first use (`open_log`) or by the server's warm-up
        # (`deferred_keys`). Keys leave only under the lock, after their log is in `_logs`.
        self._deferred: dict[tuple[str, int], LogSummary] = {}

    # ------------------------------------------------------------------ lifecycle

    def open(self) -> None:
        """Take the directory and note whether the last run shut down cleanly."""
        with self._lock:
            if self._opened:
                return
            self.data_dir.mkdir(parents=True, exist_ok=True)
            OPEN_FILES.set_limit(self.max_open_files)
            self._take_lock()
            marker = self.data_dir / CLEAN_SHUTDOWN
            # A directory with nothing in it yet (a first start) has nothing to validate.
            fresh = not any(e.is_dir() and parse_partition_dir(e.name) for e in self.data_dir.iterdir())
            clean = marker.exists() or fresh
            self._deferred = {}
            summary_path = self.data_dir / LOG_SUMMARY_CHECKPOINT
            if marker.exists():
                self._deferred = read_log_summary(summary_path) or {}
                marker.unlink()
                fsync_dir(self.data_dir)
            if summary_path.exists():  # trusted only with the marker of the same shutdown
                summary_path.unlink()
            self.recovered_cleanly = clean
            self._recovery = RecoveryStats()
            self._recovery_points = None
            self._recovery_points_mtime_ns = None
            if not clean:
                path = self.data_dir / RECOVERY_POINT_CHECKPOINT
                self._recovery_points = read_offset_checkpoint(path)
                if self._recovery_points is not None:
                    self._recovery_points_mtime_ns = os.stat(path).st_mtime_ns
                if self._recovery_points is None:
                    log.warning("%s: no usable %s: recovering every segment of every log", self.data_dir,
                                RECOVERY_POINT_CHECKPOINT)
            if fresh:
                log.info("opening %s (new data directory)", self.data_dir)
            else:
                log.info("opening %s (%s shutdown)", self.data_dir,
                         "clean" if clean else "unclean: validating segments past the recovery points")
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
                try:
                    self._write_recovery_points()
                    summary = dict(self._deferred)
                    for key, plog in self._logs.items():
                        summary[key] = LogSummary(plog.log_start_offset, plog.log_end_offset,
                                                  plog.leader_epoch_cache.latest_epoch)
                    write_log_summary(self.data_dir / LOG_SUMMARY_CHECKPOINT, summary)
                except OSError as exc:
                    failures += 1
                    log.error("writing %s / %s failed: %s", RECOVERY_POINT_CHECKPOINT, LOG_SUMMARY_CHECKPOINT, exc)
            if not failures:
                fd = os.open(self.data_dir / CLEAN_SHUTDOWN, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
                os.fsync(fd)
                os.close(fd)
                fsync_dir(self.data_dir)
            self._logs = {}
            self._deferred = {}
            self._dirty_logs.clear()
            self._opened = False
            self._release_lock()

    def _take_lock(self) -> None:
        fd = os.open(self.data_dir / LOCK_FILE, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            raise DirectoryInUse(f"{self.data_dir} is in use by another process (the lock on its {LOCK_FILE} "
                                 "is held)") from None
        self._lock_fd = fd

    def _release_lock(self) -> None:
        if self._lock_fd is not None:
            os.close(self._lock_fd)  # closing drops the flock
            self._lock_fd = None

    def set_aside_strays(self, keep: Iterable[tuple[str, int]]) -> list[str]:
        """Move partition directories that no topic claims out of the way (renamed
        `...-stray`, never deleted: they may hold data someone wants), and finish removing
        `...-delete` ones. Returns the names set aside."""
        keep = set(keep)
        with self._lock:
            self._deferred = {key: s for key, s in self._deferred.items() if key in keep}
        moved = []
        # One scandir of plain names (a DirEntry knows whether it is a directory without a
        # stat): with 100 000 partitions, Path objects, sorting and is_dir() per entry were a
        # second of the start-up.
        with os.scandir(self.data_dir) as listing:
            entries = sorted((entry.name, entry.path) for entry in listing if entry.is_dir())
        for name, path in entries:
            if name in RESERVED_DIRS:
                continue
            if name.endswith("-delete"):
                shutil.rmtree(path, ignore_errors=True)
                continue
            if name.endswith("-stray"):
                continue
            parsed = parse_partition_dir(name)
            if parsed is None or parsed in keep:
                continue
            # Keep the name under the 255-byte limit for 249-character topic names.
            target = f"{name[:200]}.{uuid.uuid4().hex}-stray"
            log.warning("partition directory %s belongs to no topic; moved to %s", name, target)
            os.rename(path, os.path.join(self.data_dir, target))
            moved.append(name)
        return moved

    def _check_open(self) -> None:
        if not self._opened:
            raise StorageError("the log manager is not open")

    # ------------------------------------------------------------------ logs

    def log(self, topic: str, partition: int) -> PartitionLog:
        try:
            return self._logs[(topic, partition)]
        except KeyError:
            raise UnknownTopicOrPartition(f"{topic}-{partition}") from None

    def logs(self, topic: str | None = None) -> list[PartitionLog]:
        """Every partition log (of ``topic``), in partition order."""
        items = sorted(list(self._logs.items()), key=lambda item: item[0])
        return [plog for (name, _), plog in items if topic is None or name == topic]

    def all_logs(self) -> list[PartitionLog]:
        """Every open log, in no particular order: one copy, no sort (a sweep takes this on
        the server's event loop; sorting 100 000 logs there was a 30 ms stall a sweep)."""
        return list(self._logs.values())

    def deferred(self, topic: str, partition: int) -> LogSummary | None:
        """What the last clean shutdown left of a log not opened yet, or None (not known
        from the log-summary-checkpoint, or open already). The server may serve the
        partition's metadata from it and open the log at first use (`open_log`)."""
        return self._deferred.get((topic, partition))

    def deferred_keys(self) -> list[tuple[str, int]]:
        """The logs still waiting to be opened (for the server's warm-up)."""
        return list(self._deferred)

    def open_log(self, topic: str, partition: int, config: LogConfig, *, now_ms: int | None = None) -> PartitionLog:
        """Open (recovering as the last shutdown requires) or create the log of a partition."""
        existing = self._logs.get((topic, partition))
        if existing is not None:
            # Without the lock (see the module docstring): a partition's first use on the
            # event loop after the warm-up opened its log must not wait for a checkpoint.
            return existing
        now_ms = _now_ms() if now_ms is None else now_ms
        with self._lock:
            self._check_open()
            existing = self._logs.get((topic, partition))
            if existing is not None:
                return existing
            plog = self._open(topic, partition, config, clean=bool(self.recovered_cleanly), now_ms=now_ms)
            self._logs[(topic, partition)] = plog
            self._deferred.pop((topic, partition), None)
            return plog

    def create_logs(self, topic: str, partitions: Iterable[int], config: LogConfig, *,
                    now_ms: int | None = None) -> list[PartitionLog]:
        """Fresh, empty logs for new partitions (leftovers of a crashed create are removed).
        All or nothing: on failure the ones made are deleted again."""
        now_ms = _now_ms() if now_ms is None else now_ms
        with self._lock:
            self._check_open()
            opened: dict[tuple[str, int], PartitionLog] = {}
            try:
                for partition in partitions:
                    directory = self.data_dir / partition_dir_name(topic, partition)
                    if directory.exists():
                        shutil.rmtree(directory)
                    opened[(topic, partition)] = self._open(topic, partition, config, clean=True, now_ms=now_ms)
                fsync_dir(self.data_dir)
            except BaseException:
                for plog in opened.values():
                    plog.close_and_delete()
                raise
            self._logs.update(opened)
            return list(opened.values())

    def delete_logs(self, topic: str, partitions: Iterable[int] | None = None) -> None:
        """Close and delete the logs of `topic` (those of `partitions`, or all); readers
        holding pinned segments finish first."""
        wanted = None if partitions is None else set(partitions)

        def doomed_key(key: tuple[str, int]) -> bool:
            return key[0] == topic and (wanted is None or key[1] in wanted)

        with self._lock:
            doomed_keys = [key for key in list(self._logs) if doomed_key(key)]
            doomed = [self._logs.pop(key) for key in doomed_keys]
            for plog in doomed:
                self._dirty_logs.discard(plog)
            # Never opened since the clean shutdown: nothing holds their files.
            unopened = [key for key in list(self._deferred) if doomed_key(key)]
            for key in unopened:
                del self._deferred[key]
        for key in unopened:
            shutil.rmtree(self.data_dir / partition_dir_name(*key), ignore_errors=True)
        for plog in doomed:
            try:
                plog.close_and_delete()
            except OSError as exc:
                log.error("deleting %s: %s", plog.name, exc)

    def set_config(self, topic: str, config: LogConfig) -> None:
        """A topic's configs changed: its logs run under `config` from now on."""
        for (name, _), plog in list(self._logs.items()):
            if name == topic:
                plog.config = config

    def _open(self, topic: str, partition: int, config: LogConfig, *, clean: bool, now_ms: int) -> PartitionLog:
        name = partition_dir_name(topic, partition)
        points = self._recovery_points
        recovery_point = 0 if clean or points is None else points.get((topic, partition), 0)
        return PartitionLog.open(self.data_dir / name, config, clean=clean, now_ms=now_ms,
                                 graveyard=self._graveyard, name=name, recovery_point=recovery_point,
                                 stats=self._recovery, dirty_logs=self._dirty_logs,
                                 checkpoint_mtime_ns=None if clean else self._recovery_points_mtime_ns)

    # ------------------------------------------------------------------ recovery points

    def checkpoint_recovery_points(self) -> int:
        """Rewrite the recovery-point-offset-checkpoint from every open log (Kafka's
        checkpointLogRecoveryOffsets, every log.flush.offset.checkpoint.interval.ms);
        returns how many entries it holds. Raises OSError when it cannot be written (the
        previous file stays: recovery then scans a little more, never less)."""
        with self._lock:
            self._check_open()
            return self._write_recovery_points()

    def _write_recovery_points(self) -> int:
        """Under the lock, so the maps cannot change while they are walked. Straight to
        the file's lines (strings, which the cyclic GC does not track), unsorted as Kafka
        writes them: a copy of 100 000 (key, log) pairs made the collector run a few hundred
        times over a growing list, and sorting them was one C call, both with the GIL held:
        0.1-0.3 s without the event loop."""
        # A log not opened since the clean shutdown is fsynced to its end; a key is in one
        # map or the other, never both (open_log moves it under the lock).
        lines = [f"{topic} {partition} {summary.log_end_offset}"
                 for (topic, partition), summary in self._deferred.items()]
        lines.extend([f"{topic} {partition} {plog.recovery_point}" for (topic, partition), plog in self._logs.items()])
        write_checkpoint_entries(self.data_dir / RECOVERY_POINT_CHECKPOINT, lines)
        return len(lines)

    def statistics(self) -> dict[str, int]:
        """What the data directory holds and what opening it cost: logs open (and with
        unflushed writes: what the flush timer visits), segments
        validated batch by batch (scanned) and trusted from their indexes since open(),
        bytes recovery cut."""
        recovery = self._recovery
        files = OPEN_FILES.statistics()
        return {
            "logs": len(self._logs),
            "logs_deferred": len(self._deferred),
            "logs_dirty": len(self._dirty_logs),
            "open_segment_files": files["open"],
            "open_segment_files_max": files["limit"],
            "segment_files_closed_idle": files["evicted"],
            "segment_files_exhausted": files["exhausted"],
            "recovery_segments_scanned": recovery.segments_scanned,
            "recovery_segments_trusted": recovery.segments_trusted,
            "recovery_bytes_truncated": recovery.bytes_truncated,
        }

    # ------------------------------------------------------------------ duties

    def run_retention(self, now_ms: int | None = None, logs: Iterable[PartitionLog] | None = None,
                      high_watermark: Callable[[PartitionLog], int | None] | None = None) -> int:
        """Delete expired, oversized or DeleteRecords-ed whole segments of every log (or of
        `logs`, a chunk of a sweep); returns how many. `high_watermark(plog)`, from the
        broker, bounds what may go and lets the active segment go (storage/retention.py)."""
        now_ms = _now_ms() if now_ms is None else now_ms
        deleted = 0
        for plog in list(self._logs.values()) if logs is None else logs:
            try:
                deleted += apply_retention(plog, now_ms, None if high_watermark is None else high_watermark(plog))
            except LogClosed:
                continue
            except (OSError, StorageError):
                log.exception("retention of %s failed", plog.name)
        self._graveyard.sweep()
        return deleted

    def run_compaction(self, now_ms: int | None = None, *, force: bool = False,
                       logs: Iterable[PartitionLog] | None = None) -> dict[str, CleanerStats]:
        """Compact every partition (or those of `logs`) whose cleanup.policy contains compact
        and that has enough dirty data; returns stats by partition name for those cleaned."""
        now_ms = _now_ms() if now_ms is None else now_ms
        done: dict[str, CleanerStats] = {}
        for plog in list(self._logs.values()) if logs is None else logs:
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
        flushed = 0
        dirty_logs = self._dirty_logs
        for plog in list(dirty_logs):
            if plog.maybe_flush(now_ms):
                flushed += 1
            # Dropped, then added back if still dirty: an append marking a segment dirty
            # in between adds the log again itself (it joins `_dirty` before the set).
            dirty_logs.discard(plog)
            if plog.has_unflushed and not plog.closed:
                dirty_logs.add(plog)
        return flushed

    def sweep(self) -> None:
        """Close the files of deleted segments whose readers are gone (frees disk space)."""
        self._graveyard.sweep()

    def flush_all(self) -> None:
        for plog in list(self._logs.values()):
            plog.flush()
