"""A partition's log: an ordered list of segments, the newest taking appends.

How this works:

- Appends run one at a time under the partition lock. A produce buffer holds whole
  batches; the only work per batch is unpacking its 61-byte header, patching baseOffset and
  partitionLeaderEpoch in place (outside the CRC), optionally stamping LogAppendTime (which
  recomputes the CRC), and one index entry when index.interval.bytes were crossed. The
  buffer is then written with one pwrite at the segment's committed size; no record is
  decoded and the bytes are not copied. Only after the write completes do the segment size,
  the indexes and the log end offset move, so readers never see a partial batch, and a
  failed write (ENOSPC) is cut back with ftruncate.
- The one-batch case, nearly every produce request, has a path of its own (`append`) with
  the roll conditions and settings derived once per change of the active segment or the
  config (`_arm`) into a few comparisons; the rest goes through `_append_general`. The
  segment does the writing and indexing (`LogSegment.append`); the log decides offsets,
  epochs and rolls.
- Leader epochs: `append` stamps the caller's leader epoch; the first append of a new
  epoch goes the general way, which records the epoch's start offset in the
  leader-epoch-checkpoint (`leader_epoch_cache`) before writing. Truncation trims the
  cache from the end, a moving log start trims it from the front.
- Disk blocks are reserved ahead of the active segment's end (fallocate keeping the file
  size; `trafka.preallocate.bytes`, default 32 MiB like Redpanda's fallocation step, never
  more than the segment already holds, nothing below RESERVE_FROM): an append into
  reserved blocks skips the file system's per-page block reservation, about a tenth of a
  16 KiB write's kernel time on ext4. The blocks past the end are given back when the
  segment stops taking appends. The fast path sees the next reservation point as one more
  roll-like threshold; the general path reserves. Not under flush policy "always" (its
  fdatasyncs would convert reserved extents piece by piece, which costs more than it
  saves) unless Kafka's preallocate=true asks for whole segments.
- Reads take no lock: they snapshot the segment list (an immutable tuple replaced on every
  structural change) and the log end offset, bisect the segment base offsets, bisect the
  segment's sparse offset index, scan forward over a few headers, and pread the bytes.
  A read may be bounded by a max offset (the server's high watermark): batches starting at
  or past it are left out, whole.
- The segment list changes under the lock: roll (segment.bytes, segment.ms, full index),
  retention and DeleteRecords (whole segments from the front), truncation, compaction swaps.
  Segments leaving the list are retired to the `Graveyard`, not closed (see segment.py).
- Durability follows the flush policy: "always" fdatasyncs before append returns,
  "interval" after flush.messages messages or flush.ms, "never" leaves it to the page cache
  (and to flush()/close()). The log start offset and the cleaner's progress are small
  checkpoint files in the partition directory, replaced atomically.
"""

from __future__ import annotations

import errno
import logging
import os
import struct
import threading
import time
from bisect import bisect_left, bisect_right
from pathlib import Path
from typing import Callable, Iterator

from storage.config import LONG_MAX, LogConfig
from storage.errors import LogClosed, LogDirFull, OffsetOutOfRange, RecordTooLarge, StorageError
from storage.files import fsync_dir, read_checkpoint, reserve_blocks, write_checkpoint
from storage.index import FLUSH_PENDING_AT
from storage.leader_epoch import LEADER_EPOCH_CHECKPOINT, LeaderEpochFileCache
from storage.producer_snapshot import snapshot_offsets
from storage.recovery import RecoveryStats, load_segments, scan_segment
from storage.txn_index import AbortedTxn, collect_into
from storage.segment import (
    LOCATE_WINDOW,
    OFFSET_FIELDS,
    Graveyard,
    HeaderAt,
    IndexMismatch,
    LogSegment,
    iter_segment_batches,
    read_exact,
    walk_headers,
)
from wire.errors import CorruptRecords
from wire.records import (
    HEADER_SIZE,
    LOG_OVERHEAD,
    TIMESTAMP_TYPE_MASK,
    BatchHeader,
    header_fields,
    iter_records,
    parse_header,
    set_log_append_time,
)

log = logging.getLogger("storage")

LOG_START_OFFSET_CHECKPOINT = "log-start-offset-checkpoint"
CLEANER_OFFSET_CHECKPOINT = "cleaner-offset-checkpoint"

_DISK_FULL = (errno.ENOSPC, errno.EDQUOT, errno.EFBIG)
# baseOffset, batchLength (rewritten unchanged), partitionLeaderEpoch: one pack per batch.
_OFFSET_LENGTH_EPOCH = header_fields("base_offset", "length", "partition_leader_epoch", whole=False)
# The header fields an append looks at (the full HEADER unpack builds 13 objects; this one
# 5); spanning the whole header, so a buffer too short for one fails to unpack.
_APPEND_FIELDS = header_fields("length", "magic", "last_offset_delta", "max_timestamp", "records_count")
assert _APPEND_FIELDS.size == HEADER_SIZE
_LOCATE_WINDOW = LOCATE_WINDOW
# A segment reserves disk blocks ahead (trafka.preallocate.bytes) once it holds this much:
# a quiet partition reserves nothing.
RESERVE_FROM = 1 << 20
_unpack_append_fields = _APPEND_FIELDS.unpack_from
_patch_offset_length_epoch = _OFFSET_LENGTH_EPOCH.pack_into
_pwrite = os.pwrite
_time_ns = time.time_ns
# The append fast path's settings for a closed log: every batch is "too large", so it
# takes the general path, which raises LogClosed.
_NOT_HOT = (None, 0, 0, 0, -1, False, 0, 0, "never", -2)


def _now_ms() -> int:
    return int(time.time() * 1000)


AppendResult = tuple[int, int, int, int]
"""Where an append landed: (base offset, last offset, the LogAppendTime used or -1 for
CreateTime, the log start offset at that moment, which Produce responses carry). A plain
tuple: building a NamedTuple costs a tenth of a 16 KiB append's Python time."""


def _split_batches(batch: bytearray, max_size: int) -> tuple[list[tuple[int, int, int, int]], int, int]:
    """(position, size, lastOffsetDelta, maxTimestamp) of each batch of a multi-batch append,
    the offsets they take and their record count; CorruptRecords unless whole batches."""
    spans = []
    offsets = counted = 0
    pos = 0
    total = len(batch)
    while pos < total:
        if total - pos < HEADER_SIZE:
            raise CorruptRecords(f"{total - pos} trailing bytes after the last batch")
        length, magic, lod, max_ts, count = _APPEND_FIELDS.unpack_from(batch, pos)
        size = length + LOG_OVERHEAD
        if magic != 2 or size < HEADER_SIZE or pos + size > total or lod < 0:
            raise CorruptRecords(f"not a whole magic-2 batch at byte {pos} of the append")
        if size > max_size:
            raise RecordTooLarge(f"batch of {size} bytes exceeds max.message.bytes {max_size}")
        spans.append((pos, size, lod, max_ts))
        offsets += lod + 1
        counted += count
        pos += size
    return spans, offsets, counted


FLUSH_BUCKETS_MS = (0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 25.0, 50.0, 100.0, 250.0, 500.0, 1000.0, 2500.0)


class FlushStats:
    """fsync latency of one log (Kafka's LogFlushRateAndTimeMs) as histogram buckets in
    milliseconds: plain ints bumped once per flush (a flush costs far more than this), read
    by the broker's /metrics at scrape time, so storage needs no metrics library."""

    __slots__ = ("buckets", "count", "sum_ms")

    def __init__(self) -> None:
        self.buckets = [0] * (len(FLUSH_BUCKETS_MS) + 1)  # the last one: above every bound (+Inf)
        self.count = 0
        self.sum_ms = 0.0

    def record(self, seconds: float) -> None:
        ms = seconds * 1000.0
        self.buckets[bisect_left(FLUSH_BUCKETS_MS, ms)] += 1
        self.count += 1
        self.sum_ms += ms


class PartitionLog:
    """One topic-partition's directory of segments.

    Directory layout (`<data_dir>/<topic>-<partition>/`)::

        {base:020d}.log / .index / .timeindex   the segments (LogSegment, OffsetIndex, TimeIndex)
        {base:020d}.txnindex                    aborted transactions whose ABORT marker the
                                                segment holds (TransactionIndex; few segments)
        log-start-offset-checkpoint             "0\\n<offset>\\n": the log start offset set by
                                                DeleteRecords and retention
        cleaner-offset-checkpoint               "0\\n<offset>\\n": offsets below it have been
                                                compacted, so they may have gaps
        leader-epoch-checkpoint                 epoch -> start offset (storage.leader_epoch)

    Every batch's partitionLeaderEpoch is the leader epoch it was appended in (`append`'s
    ``leader_epoch``), and `leader_epoch_cache` knows where each epoch starts.

    Transactions: the server appends markers like any batch, then records each aborted
    transaction (`append_aborted_txn`) in the transaction index of the segment holding its
    ABORT marker; a read_committed fetch asks `collect_aborted_txns`. The server also sets
    `first_unstable_offset` (the oldest ongoing transaction's first offset), which the
    cleaner never cleans at or past.

    Use `PartitionLog.open`. Thread-safety: one appender at a time (appends serialize on an
    internal lock anyway), any number of concurrent readers.
    """

    def __init__(self, directory: Path, config: LogConfig, *, name: str, graveyard: Graveyard) -> None:
        self.directory = directory
        self.name = name
        self._hot = _NOT_HOT
        self._can_reserve = True  # False once the file system refused to reserve blocks
        self.config = config  # also derives the append path's settings (see the setter)
        self._graveyard = graveyard
        self._lock = threading.RLock()
        # Held by the cleaner while it rewrites segments, and by whatever must not
        # interleave with it (truncation, close).
        self.cleaner_lock = threading.Lock()
        self._segments: tuple[LogSegment, ...] = ()
        self._bases: list[int] = []
        self.log_start_offset = 0
        self.log_end_offset = 0
        self.cleaned_offset = 0
        self.leader_epoch_cache = LeaderEpochFileCache(None, name=name)
        self._dirty: list[LogSegment] = []
        # The manager's set of logs with unflushed segments (None: a log on its own). A
        # segment turning dirty adds its log (after joining `_dirty`); the manager's flush
        # timer visits only these and drops the clean ones, so its cost follows the
        # partitions written to, not the 100 000 that exist (the timer walking
        # every log twice a second was 15 % of a broker's CPU under produce load).
        self.dirty_logs: set[PartitionLog] | None = None
        # Kafka's recovery point: every offset below it is fsynced (with its segment's
        # indexes as far as they were written), so recovery after a crash need not scan
        # segments wholly below it. Moves on every flush; the manager checkpoints it.
        self.recovery_point = 0
        self._unflushed_messages = 0
        self._last_flush_ms = 0
        self.flush_stats = FlushStats()  # fsync latency, read by the broker's metrics at scrape time
        self._closed = False
        # Earliest KIP-534 delete horizon among batches the cleaner kept tombstones in.
        self.next_delete_horizon_ms: int | None = None
        # Set by the server: the first offset of the oldest ongoing transaction, None when
        # there is none. The cleaner stops below it (Kafka's firstUncleanableOffset).
        self.first_unstable_offset: int | None = None
        # Whether any segment has a .txnindex: without one, the read_committed lookup
        # returns at once. Recomputed whenever the segment list changes (not on a roll,
        # which adds a segment without one).
        self._has_aborted_txns = False
        # The producer snapshots' offsets the directory listing at open() found, for the
        # server's first producer-state load (one listing fewer per partition at start-up);
        # None once used: snapshots written since are looked for on disk.
        self.snapshot_offsets_at_open: tuple[int, ...] | None = None

    @property
    def config(self) -> LogConfig:
        return self._config

    @config.setter
    def config(self, config: LogConfig) -> None:
        # Derived once per config change rather than on every append (the hot path).
        self._config = config
        lock = getattr(self, "_lock", None)
        if lock is None:  # __init__
            self._arm()
        else:
            # Under the lock: an append rolling concurrently must not have its new active
            # segment replaced by one derived from the old.
            with lock:
                self._arm()

    def _arm(self) -> None:
        """Derive what the single-batch append path needs from the active segment and the
        config, folded into as few comparisons as possible. Called whenever any input
        changes: config, segment list (roll, truncation, retention), index_full, close."""
        segments = getattr(self, "_segments", ())
        if getattr(self, "_closed", False) or not segments:
            self._hot = _NOT_HOT
            return
        config = self._config
        segment = segments[-1]
        offset_index = segment.offset_index
        latest_epoch = self.leader_epoch_cache.latest_epoch
        self._hot = (
            segment,
            # take the general path when the next batch would end past this: to roll (size;
            # a full index rolls on any batch) or to reserve more disk blocks
            -1 if segment.index_full else min(config.segment_bytes, self._reserve_point(segment)),
            # roll when now_ms passes created_ms + segment.ms, i.e. when now in ns reaches this
            (segment.created_ms + config.segment_ms + 1) * 1_000_000,
            segment.last_offset_allowed,  # roll when the batch's last offset passes this
            config.max_message_bytes,
            config.log_append_time,
            config.index_interval_bytes,
            # tail length at which to look again: the tail is due to be merged and written
            # (FLUSH_PENDING_AT), or the index is full (segment.index.bytes / 12 entries)
            min(FLUSH_PENDING_AT, config.segment_index_bytes // 12 - len(offset_index._cols[0])),
            config.flush_policy,
            # the fast path appends in this epoch only; another one goes the general way
            -2 if latest_epoch is None else latest_epoch,
        )

    # ------------------------------------------------------------------ opening, closing

    @classmethod
    def open(
        cls,
        directory: str | Path,
        config: LogConfig,
        *,
        clean: bool = False,
        now_ms: int | None = None,
        graveyard: Graveyard | None = None,
        name: str | None = None,
        recovery_point: int = 0,
        stats: RecoveryStats | None = None,
        checkpoint_mtime_ns: int | None = None,
        dirty_logs: set[PartitionLog] | None = None,
    ) -> "PartitionLog":
        """Open (creating if needed) and recover a partition directory.

        ``clean``: the previous run shut down cleanly (its segments are trusted if their
        indexes are sane); otherwise the segments holding offsets at or past
        ``recovery_point`` (the log was fsynced below it) are validated batch by batch.
        ``stats`` counts what recovery did; ``checkpoint_mtime_ns``: when the recovery point
        was checkpointed (an active segment written since is scanned straight away).
        ``dirty_logs``: the manager's set of logs with unflushed segments (see __init__).
        """
        directory = directory if isinstance(directory, Path) else Path(directory)
        # One listing tells which files exist: opening 100 000 logs at start-up is mostly
        # this method, so no file is opened or stat()ed only to find it absent.
        try:
            names = os.listdir(directory)
        except FileNotFoundError:
            directory.mkdir(parents=True, exist_ok=True)
            names = []
        present = set(names)
        now_ms = _now_ms() if now_ms is None else now_ms
        self = cls(directory, config, name=name or directory.name, graveyard=graveyard or Graveyard())
        self.snapshot_offsets_at_open = tuple(snapshot_offsets(names))
        self.dirty_logs = dirty_logs
        start_checkpoint = (read_checkpoint(f"{directory}/{LOG_START_OFFSET_CHECKPOINT}")
                            if LOG_START_OFFSET_CHECKPOINT in present else None)
        self.cleaned_offset = ((read_checkpoint(f"{directory}/{CLEANER_OFFSET_CHECKPOINT}") or 0)
                               if CLEANER_OFFSET_CHECKPOINT in present else 0)
        # The epochs a batch may carry: those the checkpoint knows. A directory from before
        # leader epochs has no checkpoint and epoch-0 batches only.
        legacy = LEADER_EPOCH_CHECKPOINT not in present
        cache = LeaderEpochFileCache.load(directory, name=self.name, exists=not legacy)
        latest = 0 if legacy else cache.latest_epoch
        segments = load_segments(
            directory,
            clean=clean,
            contiguous_from=self.cleaned_offset,
            index_interval_bytes=config.index_interval_bytes,
            now_ms=now_ms,
            name=self.name,
            max_leader_epoch=-1 if latest is None else latest,
            epochs_from=start_checkpoint or 0,
            recovery_point=recovery_point,
            stats=stats,
            names=names,
            checkpoint_mtime_ns=checkpoint_mtime_ns,
        )
        if not segments:
            segments = [LogSegment.create(directory, start_checkpoint or 0, now_ms)]
        self._set_segments(segments)
        active = segments[-1]
        assert active.next_offset is not None
        active.index_full = active.index_entries >= config.segment_index_bytes // 12
        self.log_end_offset = active.next_offset
        start = max(start_checkpoint or 0, segments[0].base_offset)
        self.log_start_offset = min(start, self.log_end_offset)
        if start_checkpoint != self.log_start_offset:
            # Also makes sure the file exists, so a full disk can still overwrite it.
            self._write_log_start()
        if legacy and self.log_end_offset > self.log_start_offset:
            cache.assign(0, self.log_start_offset)  # what the previous version wrote
        # A crash between a log change and the checkpoint's leaves entries outside the log.
        cache.truncate_from_end(self.log_end_offset)
        cache.truncate_from_start(self.log_start_offset)
        self.leader_epoch_cache = cache
        if clean:
            self.recovery_point = self.log_end_offset
        else:
            # What recovery scanned was read from the page cache, maybe never written to
            # disk: it counts as flushed only after the next fsync (Kafka flushes a
            # recovered log the same way before moving its recovery point).
            self.recovery_point = min(recovery_point, self.log_end_offset)
            for n, segment in enumerate(segments):
                following = segments[n + 1].base_offset if n + 1 < len(segments) else self.log_end_offset
                if following > self.recovery_point:
                    self._mark_dirty(segment)
        self._arm()
        self._last_flush_ms = now_ms
        return self

    def close(self) -> None:
        """Flush everything and release the files (readers in flight finish first)."""
        with self.cleaner_lock, self._lock:
            if self._closed:
                return
            try:
                self.active.on_close_for_appends()
                self._sync_all()
            finally:
                self._closed = True
                self._hot = _NOT_HOT
                for segment in self._segments:
                    self._graveyard.add(segment, 0)

    def close_and_delete(self) -> None:
        """Close without flushing and remove the directory (topic deletion)."""
        with self.cleaner_lock, self._lock:
            self._closed = True
            self._hot = _NOT_HOT
            for segment in self._segments:
                segment.delete_files()
                self._graveyard.add(segment, self.config.file_delete_delay_ms)
            self._segments = ()
        for leftover in self.directory.iterdir():
            try:
                leftover.unlink()
            except OSError:
                pass
        try:
            self.directory.rmdir()
        except OSError as exc:
            log.warning("%s: could not remove %s: %s", self.name, self.directory, exc)

    @property
    def closed(self) -> bool:
        return self._closed

    @property
    def has_unflushed(self) -> bool:
        """Whether any segment holds writes not yet fsynced."""
        return bool(self._dirty)

    def _check_open(self) -> None:
        if self._closed:
            raise LogClosed(f"{self.name} is closed")

    # ------------------------------------------------------------------ segment list

    def _set_segments(self, segments) -> None:
        segments = tuple(segments)
        for segment in segments:
            segment.owner = self._lock  # writers hold it: no closing for idleness under them
        bases = [s.base_offset for s in segments]
        self._has_aborted_txns = any(s.txn_index.exists for s in segments)
        # Running maximum of the closed segments' largest timestamps: non-decreasing, so
        # bisecting it finds the first segment reaching a timestamp (ListOffsets).
        closed_max: list[int] = []
        top = -1
        for segment in segments[:-1]:
            top = max(top, segment.max_timestamp)
            closed_max.append(top)
        self._publish(segments, bases, closed_max)

    def _add_segment(self, new: LogSegment) -> None:
        """A roll: the same as _set_segments(segments + (new,)) without the O(segments) loop."""
        old_segments, old_bases = self._view
        new.owner = self._lock
        closed_max = list(self._closed_max[1])
        closed_max.append(max(closed_max[-1] if closed_max else -1, old_segments[-1].max_timestamp))
        self._publish(old_segments + (new,), old_bases + [new.base_offset], closed_max)

    def _publish(self, segments: tuple[LogSegment, ...], bases: list[int], closed_max: list[int]) -> None:
        # Readers take the tuple whole: publish everything in one assignment.
        self._view = (segments, bases)
        self._closed_max = (segments, closed_max)
        self._segments = segments
        self._bases = bases
        self._arm()

    def _recheck_aborted_txns(self) -> None:
        self._has_aborted_txns = any(s.txn_index.exists for s in self._segments)

    @property
    def segments(self) -> tuple[LogSegment, ...]:
        return self._segments

    @property
    def active(self) -> LogSegment:
        return self._segments[-1]

    @property
    def size_bytes(self) -> int:
        return sum(s.size for s in self._segments)

    def statistics(self) -> dict[str, int]:
        segments = self._segments
        return {
            "segments": len(segments),
            "size_bytes": sum(s.size for s in segments),
            "log_start_offset": self.log_start_offset,
            "log_end_offset": self.log_end_offset,
            "unflushed_messages": self._unflushed_messages,
            "cleaned_offset": self.cleaned_offset,
            "recovery_point": self.recovery_point,
        }

    # ------------------------------------------------------------------ append

    def append(self, batch: bytearray, record_count: int | None = None, *, leader_epoch: int = 0,
               now_ms: int | None = None) -> AppendResult:
        """Append one or more whole, validated magic-2 batches as the leader in
        ``leader_epoch``: patch their baseOffset and partitionLeaderEpoch in place.

        A leader epoch newer than the cache's latest is assigned its start offset (and the
        leader-epoch-checkpoint written) before any batch carrying it is; one older than
        the latest raises ValueError (the partition must fence such an append first).
        ``record_count`` (the sum of the batches' record counts, if the caller knows it)
        only feeds flush.messages accounting. Raises RecordTooLarge for a batch above
        max.message.bytes, LogDirFull when the disk is full (nothing is appended then).
        """
        # The common case, one batch in the buffer in the current epoch, on a path of its
        # own with the fewest calls and attribute loads and stores we can manage (each
        # costs a few per cent of a 16 KiB append). Anything unusual (several batches, a
        # batch too large or malformed, the first batch of a segment or of an epoch, a
        # roll, a closed log) takes _append_general. The roll deadline is compared in
        # nanoseconds; now_ms is derived only when needed.
        now_ns = _time_ns() if now_ms is None else now_ms * 1_000_000
        size_total = len(batch)
        try:
            length, magic, lod, max_ts, count = _unpack_append_fields(batch, 0)
        except struct.error:
            raise CorruptRecords(f"{size_total} bytes cannot hold a record batch") from None
        lock = self._lock
        lock.acquire()  # not `with`: its __exit__ call costs twice an acquire and a release
        try:
            (segment, roll_bytes, roll_ns, roll_offset, max_message_bytes, log_append_time, index_interval,
             index_event, policy, epoch) = self._hot
            if (length + LOG_OVERHEAD != size_total or magic != 2 or lod < 0 or size_total > max_message_bytes
                    or leader_epoch != epoch):
                return self._append_general(batch, record_count, now_ns // 1_000_000 if now_ms is None else now_ms,
                                            leader_epoch)
            base_offset = self.log_end_offset
            last = base_offset + lod
            position = segment.size
            if position + size_total > roll_bytes or now_ns >= roll_ns or last > roll_offset or not position:
                # Kafka's roll conditions (size, age, a full index, 32-bit relative
                # offsets), or an empty segment: the general path rolls and starts segments.
                return self._append_general(batch, record_count, now_ns // 1_000_000 if now_ms is None else now_ms,
                                            leader_epoch)
            _patch_offset_length_epoch(batch, 0, base_offset, length, epoch)
            if log_append_time:
                if now_ms is None:
                    now_ms = now_ns // 1_000_000
                set_log_append_time(batch, now_ms, 0)
                max_ts = now_ms
                result = (base_offset, last, now_ms, self.log_start_offset)
            else:
                result = (base_offset, last, -1, self.log_start_offset)
            try:
                if segment.append(batch, position, size_total, base_offset, last, max_ts, index_interval, index_event):
                    self._index_housekeeping(segment)
            except OSError as exc:
                self._write_failed(exc)
            if not segment.dirty:  # checked here: the body runs once a flush cycle
                self._mark_dirty(segment)
            self.log_end_offset = last + 1
            if policy != "never":
                self._after_append(policy, now_ns // 1_000_000 if now_ms is None else now_ms,
                                   count if record_count is None else record_count)
            return result
        finally:
            lock.release()

    def _index_housekeeping(self, segment: LogSegment) -> None:
        """The append path's index tail reached the length _arm told it to look again at:
        merge and write it, and mark the index full when it is."""
        segment.offset_index.flush_pending()
        if segment.index_entries >= self._config.segment_index_bytes // 12:
            segment.index_full = True
        self._arm()

    def _after_append(self, policy: str, now_ms: int, record_count: int) -> None:
        """The flush policy, after an append (not for "never")."""
        if policy == "always":
            self._sync_data()
            self._last_flush_ms = now_ms
        else:
            self._unflushed_messages += record_count
            config = self._config
            if (self._unflushed_messages >= config.flush_interval_messages
                    or now_ms - self._last_flush_ms >= config.flush_interval_ms):
                self._sync_data()
                self._last_flush_ms = now_ms

    def append_as_follower(self, batch: bytearray, record_count: int | None = None, *,
                           now_ms: int | None = None) -> AppendResult:
        """Append whole batches that already carry their offsets and leader epochs, as a
        follower copies the leader's log (Kafka's appendAsFollower): nothing is patched or
        stamped. The first batch must start at the log end offset and the batches follow on
        without gaps (a gap would read as damage to recovery); epochs may only grow, and a
        new one is assigned its start offset before it is written. ValueError otherwise."""
        return self._append_general(batch, record_count, _now_ms() if now_ms is None else now_ms, -1,
                                    follower=True)

    def _append_general(self, batch: bytearray, record_count: int | None, now_ms: int,
                        leader_epoch: int, *, follower: bool = False) -> AppendResult:
        """`append` for everything its single-batch path does not take: several batches in
        one buffer, a new leader epoch, a batch too large or malformed (which raise), a
        closed log; and `append_as_follower`. Patches each batch (not a follower's), writes
        them all with one pwrite, then indexes them."""
        config = self._config
        log_append_time = config.log_append_time and not follower
        with self._lock:
            if self._closed:
                raise LogClosed(f"{self.name} is closed")
            spans, offsets_used, counted = _split_batches(batch, config.max_message_bytes)
            if record_count is None:
                record_count = counted
            base_offset = self.log_end_offset
            latest = self.leader_epoch_cache.latest_epoch
            if follower:
                new_epochs = self._follower_epochs(batch, spans, base_offset, latest)
            elif leader_epoch < 0 or (latest is not None and leader_epoch < latest):
                raise ValueError(f"{self.name}: append in leader epoch {leader_epoch}, the log is at {latest}")
            else:
                new_epochs = [(leader_epoch, base_offset)] if latest is None or leader_epoch > latest else []
            segment = self._segments[-1]
            position = segment.size
            if position and (position + len(batch) > config.segment_bytes
                             or now_ms - segment.created_ms > config.segment_ms
                             or segment.index_full
                             or base_offset + offsets_used - 1 > segment.last_offset_allowed):
                # Kafka's roll conditions: size, age, a full index (the 12-byte time index
                # entries fill segment.index.bytes first), 32-bit relative offsets.
                segment = self._roll(now_ms)
                position = 0
            # Durable before any batch carries the epoch (Kafka assigns before the segment
            # append too), so recovery knows every epoch it finds.
            for epoch, start in new_epochs:
                try:
                    self.leader_epoch_cache.assign(epoch, start)
                except OSError as exc:
                    self._write_failed(exc)
            if position + len(batch) > self._reserve_point(segment):
                self._reserve(segment, position + len(batch))

            offset = base_offset
            for p, size, lod, _ts in spans if not follower else ():
                _OFFSET_LENGTH_EPOCH.pack_into(batch, p, offset, size - LOG_OVERHEAD, leader_epoch)
                if log_append_time:
                    set_log_append_time(batch, now_ms, p)
                offset += lod + 1
            try:
                offset = segment.append_batches(batch, spans, base_offset, config.index_interval_bytes,
                                                config.segment_index_bytes // 12, now_ms if log_append_time else -1)
            except OSError as exc:
                self._write_failed(exc)
            if not segment.dirty:  # checked here: the body runs once a flush cycle
                self._mark_dirty(segment)
            self.log_end_offset = offset
            if config.flush_policy != "never":
                self._after_append(config.flush_policy, now_ms, record_count)
            self._arm()  # index entries may have been merged (the fast path's index_event)
            return (base_offset, offset - 1, now_ms if log_append_time else -1, self.log_start_offset)

    def _follower_epochs(self, batch: bytearray, spans, expected: int, latest: int | None) -> list[tuple[int, int]]:
        """The (epoch, start offset) entries a follower's batches add; ValueError if their
        offsets do not follow on from ``expected`` or their epochs go back."""
        new: list[tuple[int, int]] = []
        for p, _size, lod, _ts in spans:
            base, _length, epoch = _OFFSET_LENGTH_EPOCH.unpack_from(batch, p)
            if base != expected:
                raise ValueError(f"{self.name}: follower batch at offset {base}, the log ends at {expected}")
            if epoch < 0 or (latest is not None and epoch < latest):
                raise ValueError(f"{self.name}: follower batch in leader epoch {epoch} after epoch {latest}")
            if latest is None or epoch > latest:
                new.append((epoch, base))
                latest = epoch
            expected = base + lod + 1
        return new

    def _roll(self, now_ms: int) -> LogSegment:
        old = self._segments[-1]
        try:
            old.on_close_for_appends()
            new = LogSegment.create(self.directory, self.log_end_offset, now_ms)
            if self.config.flush_policy != "never":
                fsync_dir(self.directory)
        except OSError as exc:
            if exc.errno in _DISK_FULL:
                raise LogDirFull(f"{self.name}: cannot create a segment: {exc}") from exc
            raise StorageError(f"{self.name}: cannot create a segment: {exc}") from exc
        self._add_segment(new)
        log.debug("%s: rolled to segment %d", self.name, new.base_offset)
        return new

    def _reserve_point(self, segment: LogSegment) -> int:
        """The position past which an append into ``segment`` reserves more disk blocks
        first (LONG_MAX: it never does)."""
        config = self._config
        if not self._can_reserve:
            return LONG_MAX
        if config.preallocate:  # Kafka's: the whole segment, from the first append
            return segment.reserved
        if config.preallocate_bytes <= 0 or config.flush_policy == "always":
            # Under "always" every fdatasync would also convert a piece of a reserved
            # (unwritten) extent: measured 15% slower per acknowledged 16 KiB append.
            return LONG_MAX
        return max(segment.reserved, RESERVE_FROM)

    def _reserve(self, segment: LogSegment, end: int) -> None:
        """Reserve disk blocks from the segment's end to past ``end``: as far ahead as the
        segment already holds, at most trafka.preallocate.bytes, never past segment.bytes
        (or everything up to segment.bytes under preallocate=true). A full disk stops the
        reservations of this segment; a file system without fallocate those of the log.
        Neither fails the append: its write is what reports a full disk."""
        config = self._config
        ahead = config.segment_bytes if config.preallocate else min(config.preallocate_bytes, end)
        target = min(end + ahead, max(end, config.segment_bytes))
        start = max(segment.reserved, segment.size)
        try:
            if target > start:
                reserve_blocks(segment.fd, start, target - start)
            segment.reserved = target
        except OSError as exc:
            if exc.errno in _DISK_FULL:
                segment.reserved = max(end, config.segment_bytes)  # past the roll: no retry here
                log.debug("%s: cannot reserve disk blocks: %s", self.name, exc)
            else:
                self._can_reserve = False
                log.info("%s: the file system cannot reserve blocks (%s); appending without", self.name, exc)
        self._arm()

    def roll(self, now_ms: int | None = None) -> None:
        """Start a new segment now (if the active one holds anything)."""
        with self._lock:
            self._check_open()
            if self.active.size:
                self._roll(_now_ms() if now_ms is None else now_ms)

    def _write_failed(self, exc: OSError):
        """A write (cut back by the segment) or a checkpoint failed: nothing was appended."""
        self._arm()  # the segment's reservation went with the cut
        if exc.errno in _DISK_FULL:
            raise LogDirFull(f"{self.name}: {os.strerror(exc.errno)}") from exc
        raise StorageError(f"{self.name}: write failed: {exc}") from exc

    # ------------------------------------------------------------------ flushing

    def _sync_data(self) -> None:
        dirty, self._dirty = self._dirty, []
        started = time.perf_counter()
        for segment in dirty:
            segment.dirty = False
            try:
                os.fdatasync(segment.fd)
            except OSError as exc:
                raise StorageError(f"{self.name}: fsync failed: {exc}") from exc
        self.flush_stats.record(time.perf_counter() - started)
        self._unflushed_messages = 0
        self.recovery_point = self.log_end_offset

    def _sync_all(self) -> None:
        dirty, self._dirty = self._dirty, []
        started = time.perf_counter()
        for segment in dirty:
            segment.sync()
        self.active.sync()
        self.flush_stats.record(time.perf_counter() - started)
        self._unflushed_messages = 0
        self.recovery_point = self.log_end_offset

    def flush(self, now_ms: int | None = None) -> None:
        """fsync every unflushed segment and its indexes."""
        with self._lock:
            if self._closed:
                return
            self._sync_all()
            self._arm()  # the index tail was merged
            self._last_flush_ms = _now_ms() if now_ms is None else now_ms

    def maybe_flush(self, now_ms: int | None = None) -> bool:
        """The timer half of the interval policy: flush if flush.ms has passed with data pending."""
        now_ms = _now_ms() if now_ms is None else now_ms
        config = self.config
        dirty = self._dirty
        if not dirty:
            return False
        if config.flush_policy == "never":
            # Kafka flushes a segment once it is rolled (whatever the flush settings), so the
            # recovery point follows the rolls and a restart after a crash scans only the
            # active segments.
            return self._flush_rolled() if dirty[0] is not self._segments[-1] else False
        if config.flush_policy != "interval":
            return False
        if now_ms - self._last_flush_ms < config.flush_interval_ms:
            return False
        with self._lock:
            if self._closed:
                return False
            self._sync_data()
            self._last_flush_ms = now_ms
        return True

    def _flush_rolled(self) -> bool:
        """fsync the dirty segments before the active one; the recovery point moves to the
        active segment's base offset (Kafka's flushUptoOffsetExclusive at roll). The fsync
        runs outside the partition lock (appends go on; the segments are pinned), and the
        point moves only if the segment list did not change meanwhile."""
        with self._lock:
            if self._closed:
                return False
            snapshot = self._segments
            active = snapshot[-1]
            rolled = []
            try:
                for segment in self._dirty:
                    if segment is not active and segment.pin():
                        rolled.append(segment)
            except StorageError:  # out of descriptors: the next round tries again
                for segment in rolled:
                    segment.unpin()
                raise
        if not rolled:
            return False
        started = time.perf_counter()
        try:
            for segment in rolled:
                os.fdatasync(segment.fd)
                segment.offset_index.sync()
                segment.time_index.sync()
        except OSError as exc:
            raise StorageError(f"{self.name}: fsync failed: {exc}") from exc
        finally:
            for segment in rolled:
                segment.unpin()
        self.flush_stats.record(time.perf_counter() - started)
        with self._lock:
            if self._segments is snapshot:
                for segment in rolled:
                    segment.dirty = False
                self._dirty = [segment for segment in self._dirty if segment not in rolled]
                if not any(segment is not active for segment in self._dirty):
                    self.recovery_point = max(self.recovery_point, active.base_offset)
        return True

    # ------------------------------------------------------------------ reads

    def _check_range(self, offset: int) -> int:
        end = self.log_end_offset
        if offset < self.log_start_offset or offset > end:
            raise OffsetOutOfRange(offset, self.log_start_offset, end)
        return end

    def _start_position(self, segment: LogSegment, offset: int) -> int:
        """Where to start scanning ``segment`` for ``offset``, with the index entry checked."""
        if offset <= segment.base_offset:
            return 0
        key, position = segment.offset_index.lookup(offset)
        if key < 0:
            return 0
        raw = os.pread(segment.fd, HEADER_SIZE, position)
        if len(raw) == HEADER_SIZE:
            base, _length, lod = OFFSET_FIELDS.unpack_from(raw)
            if base + lod == key:
                return position
        self._rebuild_index(segment)
        return segment.offset_index.lookup(offset)[1]

    def _rebuild_index(self, segment: LogSegment) -> None:
        """An index entry pointed at something other than its batch: rebuild from the log."""
        with self._lock:
            if segment.closed:
                return
            scan = scan_segment(segment.fd, segment.size, segment.base_offset,
                                index_interval_bytes=self.config.index_interval_bytes,
                                contiguous=segment.base_offset >= self.cleaned_offset,
                                max_leader_epoch=max(self.leader_epoch_cache.latest_epoch or 0, 0),
                                epochs_from=self.log_start_offset)
            log.error("%s: offset index of segment %d did not match its log; rebuilt%s", self.name,
                      segment.base_offset, f" (log damaged: {scan.error})" if scan.error else "")
            segment.offset_index.set_entries(scan.index_entries, in_file=False)
            self._arm()

    def _find(self, offset: int, max_offset: int | None, per_segment: Callable[[LogSegment, int], object]):
        """The read protocol: ``per_segment(segment, end)`` on the pinned segment holding
        ``offset``, ``end`` being where batches at or past ``max_offset`` start (the
        segment's size when unbounded). It returns what to answer, or None when the segment
        holds no batch at or after ``offset`` (compacted away), and the next segment is
        asked. None when there is nothing to read: at the log end, or at or past
        ``max_offset``."""
        for _attempt in range(8):
            self._check_open()
            end = self._check_range(offset)
            if offset == end or (max_offset is not None and offset >= max_offset):
                return None
            segments, bases = self._view
            i = max(bisect_right(bases, offset) - 1, 0)
            retry = False
            while i < len(segments):
                segment = segments[i]
                if not segment.pin():
                    retry = True  # retired under us: take a fresh view
                    break
                try:
                    try:
                        end = segment.read_end(max_offset)
                        result = per_segment(segment, end)
                    except IndexMismatch:
                        self._rebuild_index(segment)
                        end = segment.read_end(max_offset)
                        result = per_segment(segment, end)
                    if result is not None:
                        return result
                    if max_offset is not None and end < segment.size:
                        return None  # bounded here: the next batch starts at or past max_offset
                finally:
                    segment.unpin()
                i += 1
            if not retry:
                return None  # offsets up to the end were compacted away
        raise StorageError(f"{self.name}: segments kept changing during a read")

    def read(self, offset: int, max_bytes: int, *, max_offset: int | None = None,
             min_one_batch: bool = True) -> bytes | memoryview:
        """Stored batches from the one holding ``offset``: whole batches up to ``max_bytes``,
        but at least one whole batch if any exists at or after ``offset`` and
        ``min_one_batch`` (Kafka's minOneMessage; without it a first batch over
        ``max_bytes`` reads as empty, which is how a Fetch response honours its response
        wide max_bytes, KIP-74). ``max_offset`` (exclusive; the high watermark, say): only
        batches whose base offset is below it, never a batch split.

        Empty at the log end offset; OffsetOutOfRange below the log start offset or past the
        end. Like Kafka, a read stops at the end of a segment; the caller reads again.
        """
        result = self._find(offset, max_offset,
                            lambda segment, end: segment.read(offset, max_bytes, end, min_one_batch))
        return b"" if result is None else result

    def read_location(self, offset: int, max_bytes: int, *, max_offset: int | None = None,
                      min_one_batch: bool = True) -> list[tuple[int, int, int]]:
        """Where `read` would read from, as [(fd, position, length)] for os.sendfile.

        The descriptors belong to the log: do not close them. They stay valid for at least
        file.delete.delay.ms after their segment is deleted, so send promptly; but an idle
        segment's may be closed to stay under log.open.files.max, so a caller that may be
        slow (the server) uses `read_pinned` instead.
        """
        def locate(segment: LogSegment, end: int):
            found = segment.locate(offset, max_bytes, end, min_one_batch)
            return found if found is None else [(segment.fd, found[0], found[1])] if found[1] else []

        result = self._find(offset, max_offset, locate)
        return result or []

    def read_pinned(self, offset: int, max_bytes: int, *, max_offset: int | None = None,
                    min_one_batch: bool = True) -> tuple[LogSegment, int, int] | None:
        """Where `read` would read from, as (segment, position, length) with the segment
        pinned: its descriptor stays open, whatever retention or deletion does, until the
        caller calls ``segment.unpin()`` — which it must, once, after its pread or
        os.sendfile. None when there is nothing to read (nothing is pinned then)."""

        def pin(segment: LogSegment, end: int):
            found = segment.locate(offset, max_bytes, end, min_one_batch)
            if found is None:
                return None
            if not found[1]:
                return ()  # nothing fits: an answer, not a reason to look further
            segment.pin()  # cannot fail: _find holds a pin while this runs
            return segment, found[0], found[1]

        return self._find(offset, max_offset, pin) or None

    def iter_batches(self, from_offset: int = 0) -> Iterator[tuple[BatchHeader, bytes]]:
        """Every stored batch holding offsets >= ``from_offset``, oldest first, up to the log
        end offset at the time of the call. For rebuilding state at start-up."""
        end = self.log_end_offset
        from_offset = max(from_offset, self.log_start_offset)
        segments, bases = self._view
        i = max(bisect_right(bases, from_offset) - 1, 0)
        for segment in segments[i:]:
            if segment.base_offset >= end:
                break
            if not segment.pin():
                raise LogClosed(f"{self.name}: segment {segment.base_offset} went away during iteration")
            try:
                start = self._start_position(segment, from_offset)
                for _pos, data in iter_segment_batches(segment.fd, start, segment.size):
                    header = parse_header(data)
                    if header.base_offset >= end:
                        return
                    if header.last_offset >= from_offset:
                        yield header, data
            finally:
                segment.unpin()

    # ------------------------------------------------------------------ timestamps

    def offset_for_timestamp(self, timestamp: int) -> tuple[int, int] | None:
        """(offset, timestamp) of the first record with timestamp >= ``timestamp`` at or after
        the log start offset (ListOffsets), or None if there is none."""
        start = self.log_start_offset
        segments, closed_max = self._closed_max
        for i in range(bisect_left(closed_max, timestamp), len(segments)):
            segment = segments[i]
            if segment.max_timestamp < timestamp:
                continue
            if not segment.pin():
                continue
            try:
                from_offset = max(segment.time_index.lookup(timestamp), start)
                position = self._start_position(segment, from_offset)
                for header in walk_headers(segment.fd, position, segment.size, _LOCATE_WINDOW):
                    if header.last_offset < start or header.max_timestamp < timestamp:
                        continue
                    found = self._record_at_or_after(segment, header, timestamp, start)
                    if found is not None:
                        return found
            finally:
                segment.unpin()
        return None

    def _record_at_or_after(self, segment: LogSegment, header: HeaderAt, timestamp: int, start: int):
        if header.attributes & TIMESTAMP_TYPE_MASK:
            return max(header.base_offset, start), header.max_timestamp
        data = read_exact(segment.fd, header.size, header.position)
        for record in iter_records(data):
            if record.offset >= start and record.timestamp >= timestamp:
                return record.offset, record.timestamp
        return None

    def offsets_before(self, timestamp: int, max_count: int) -> list[int]:
        """ListOffsets v0's answer for this log (Kafka's UnifiedLog.legacyFetchOffsetsBefore):
        up to `max_count` segment boundaries, newest first.

        The candidates are each segment's base offset (the log start offset for the first)
        paired with its file's modification time, and the log end offset paired with now
        when the active segment holds anything. -1 (latest) starts from the newest
        candidate, -2 (earliest) from the oldest, any other timestamp from the newest one
        whose time is at or before it; the answer is that candidate and the older ones
        before it, in descending order. Times are file times, not record timestamps: old
        clients asked which segment files predate a time."""
        segments, _ = self._view
        start = self.log_start_offset
        candidates = [(max(segment.base_offset, start), segment.mtime_ms()) for segment in segments]
        if segments[-1].size > 0:
            candidates.append((self.log_end_offset, _now_ms()))
        if timestamp == -1:
            index = len(candidates) - 1
        elif timestamp == -2:
            index = 0
        else:
            index = len(candidates) - 1
            while index >= 0 and candidates[index][1] > timestamp:
                index -= 1
        found = [candidates[i][0] for i in range(index, max(index - max(max_count, 0), -1), -1)]
        return sorted(found, reverse=True)

    def max_timestamp(self) -> tuple[int, int]:
        """(offset, timestamp) of the first record holding the largest timestamp at or after
        the log start offset, for ListOffsets MAX_TIMESTAMP (KIP-734); (-1, -1) if none."""
        start = self.log_start_offset
        segments, _ = self._view
        best: LogSegment | None = None
        best_ts = -1
        for n, segment in enumerate(segments):
            ts = segment.max_timestamp
            if n == 0 and segment.base_offset < start and ts >= 0:
                # Only the first segment can hold offsets below the log start offset.
                ts = self._max_timestamp_from(segment, start)
            if ts > best_ts:
                best, best_ts = segment, ts
        if best is None or not best.pin():
            return -1, -1
        try:
            for header in walk_headers(best.fd, self._start_position(best, start), best.size, _LOCATE_WINDOW):
                if header.max_timestamp >= best_ts and header.last_offset >= start:
                    found = self._record_at_or_after(best, header, best_ts, start)
                    if found is not None and found[1] == best_ts:
                        return found
            return -1, -1
        finally:
            best.unpin()

    def _max_timestamp_from(self, segment: LogSegment, start: int) -> int:
        if not segment.pin():
            return -1
        try:
            top = -1
            for header in walk_headers(segment.fd, self._start_position(segment, start), segment.size, _LOCATE_WINDOW):
                if header.last_offset < start:
                    continue
                if header.base_offset >= start or header.attributes & TIMESTAMP_TYPE_MASK:
                    top = max(top, header.max_timestamp)
                else:
                    data = read_exact(segment.fd, header.size, header.position)
                    top = max([top] + [r.timestamp for r in iter_records(data) if r.offset >= start])
            return top
        finally:
            segment.unpin()

    # ------------------------------------------------------------------ log start, truncation

    def _write_log_start(self) -> None:
        write_checkpoint(self.directory / LOG_START_OFFSET_CHECKPOINT, self.log_start_offset)

    def delete_records_before(self, offset: int, *, max_offset: int | None = None) -> int:
        """DeleteRecords: move the log start offset to ``offset`` (-1: the log end offset; the
        partition passes its high watermark as the limit, ``max_offset``) and delete the
        segments wholly below it. Returns the new log start offset (low watermark)."""
        with self._lock:
            self._check_open()
            limit = self.log_end_offset if max_offset is None else min(max_offset, self.log_end_offset)
            if offset == -1:
                offset = limit
            if offset < 0 or offset > limit:
                raise OffsetOutOfRange(offset, self.log_start_offset, limit)
            if offset > self.log_start_offset:
                previous = self.log_start_offset
                self.log_start_offset = offset
                try:
                    self._write_log_start()
                except BaseException:
                    # Not durable, so not done: the caller reports a failure, and readers
                    # must keep seeing the records it did not delete (ENOSPC, for one).
                    self.log_start_offset = previous
                    raise
                self._truncate_epochs(self.leader_epoch_cache.truncate_from_start, self.log_start_offset)
                self._delete_below_start("DeleteRecords")
            return self.log_start_offset

    def _truncate_epochs(self, truncate: Callable[[int], None], offset: int) -> None:
        """Keep the leader epoch cache inside the log after its start or end moved. A
        failure to rewrite the checkpoint (a full disk, which retention must still relieve)
        is only logged: the cache in memory has changed, and opening the log trims the file
        the same way (Kafka flushes these two asynchronously for the same reason)."""
        try:
            truncate(offset)
        except OSError as exc:
            log.warning("%s: leader-epoch-checkpoint not rewritten: %s", self.name, exc)

    def _delete_below_start(self, reason: str) -> int:
        segments = self._segments
        count = 0
        while count + 1 < len(segments) and segments[count + 1].base_offset <= self.log_start_offset:
            count += 1
        return self._drop_oldest(count, reason)

    def delete_oldest_segments(self, predicate: Callable[[LogSegment, int], bool], reason: str,
                               high_watermark: int | None = None, now_ms: int | None = None) -> int:
        """Delete segments from the front while ``predicate(segment, index)`` holds; the log
        start offset moves to the first survivor. Returns how many went.

        Without ``high_watermark`` only closed segments go. With it, Kafka's rule
        (UnifiedLog.deletableSegments): a segment goes only once the high watermark has
        passed it (reached the next segment's base offset, or the log end offset for the
        active one), and the active segment goes too when it holds records, a new empty
        segment at the log end offset being rolled first (a log always has one). So a topic
        whose every record is past retention.ms is emptied, as Kafka empties it, instead of
        keeping its last segment forever."""
        with self._lock:
            self._check_open()
            segments = self._segments
            closed = len(segments) - 1
            count = 0
            while count < closed and predicate(segments[count], count):
                if high_watermark is not None and high_watermark < segments[count + 1].base_offset:
                    break
                count += 1
            if (count == closed and high_watermark is not None and segments[-1].size
                    and high_watermark >= self.log_end_offset and predicate(segments[-1], count)):
                self._roll(_now_ms() if now_ms is None else now_ms)
                count += 1
            return self._drop_oldest(count, reason)

    def _drop_oldest(self, count: int, reason: str) -> int:
        if count <= 0:
            return 0
        segments = self._segments
        doomed, kept = segments[:count], segments[count:]
        new_start = max(self.log_start_offset, kept[0].base_offset)
        if new_start != self.log_start_offset:
            previous = self.log_start_offset
            self.log_start_offset = new_start
            # Durable before the files go: a crash in between must not resurrect offsets.
            try:
                self._write_log_start()
            except BaseException:
                self.log_start_offset = previous  # nothing deleted, nothing moved
                raise
            self._truncate_epochs(self.leader_epoch_cache.truncate_from_start, self.log_start_offset)
        self._set_segments(kept)
        for segment in doomed:
            segment.delete_files()
            if segment.dirty:
                segment.dirty = False
                self._dirty = [s for s in self._dirty if s is not segment]
            self._graveyard.add(segment, self.config.file_delete_delay_ms)
        log.info("%s: deleted %d segment(s) below offset %d (%s)", self.name, count, kept[0].base_offset, reason)
        return count

    def truncate_to(self, offset: int) -> None:
        """Remove every batch holding an offset >= ``offset``.

        The log end offset becomes the base offset of the first removed batch (a batch is
        removed whole). At or below the log start offset the log restarts empty at
        ``offset``, as Kafka's truncateFullyAndStartAt.
        """
        with self.cleaner_lock, self._lock:
            self._check_open()
            if offset >= self.log_end_offset:
                return
            if offset <= self.log_start_offset:
                self._truncate_fully(offset)
                return
            segments = self._segments
            i = max(bisect_right(self._bases, offset) - 1, 0)
            segment = segments[i]
            start = self._start_position(segment, offset)
            _cut_pos, new_end = segment.cut_point(offset, start)
            if new_end < self.log_start_offset:
                # The batch holding `offset` also holds the log start offset: nothing
                # readable survives, so the log restarts empty at its start offset.
                self._truncate_fully(self.log_start_offset)
                return
            segment.truncate_to(offset, start)
            doomed, kept = segments[i + 1:], segments[:i + 1]
            for gone in doomed:
                gone.delete_files()
                self._graveyard.add(gone, self.config.file_delete_delay_ms)
            self._dirty = [s for s in self._dirty if s in kept]
            self.log_end_offset = new_end
            self.recovery_point = min(self.recovery_point, new_end)
            self._set_segments(kept)
            fsync_dir(self.directory)
            self._truncate_epochs(self.leader_epoch_cache.truncate_from_end, new_end)
            self._recheck_aborted_txns()  # the segment's txn index lost its entries past the cut
            self._arm()
            log.info("%s: truncated to offset %d (log end offset %d)", self.name, offset, new_end)

    def truncate_fully_and_start_at(self, offset: int) -> None:
        """Kafka's truncateFullyAndStartAt: drop every batch and restart empty at ``offset``.

        A follower whose log end fell below its leader's log start (retention or
        DeleteRecords ran at the leader while it was away) can copy nothing it lacks: it
        starts over at the leader's log start."""
        with self.cleaner_lock, self._lock:
            self._check_open()
            self._truncate_fully(offset)

    def _truncate_fully(self, offset: int) -> None:
        now_ms = _now_ms()
        for segment in self._segments:
            segment.delete_files()
            self._graveyard.add(segment, self.config.file_delete_delay_ms)
        self._dirty = []
        new = LogSegment.create(self.directory, offset, now_ms)
        self._set_segments([new])
        self.log_start_offset = offset
        self.log_end_offset = offset
        self.recovery_point = offset  # Kafka's truncateFullyAndStartAt too
        self._write_log_start()
        fsync_dir(self.directory)
        # Kafka's truncateFullyAndStartAt: no epoch holds data any more.
        self._truncate_epochs(lambda _offset: self.leader_epoch_cache.clear(), offset)
        self._arm()
        log.info("%s: truncated fully, restarting at offset %d", self.name, offset)

    # ------------------------------------------------------------------ aborted transactions

    def append_aborted_txn(self, txn: AbortedTxn) -> None:
        """Record an aborted transaction in the transaction index of the segment holding its
        ABORT marker (``txn.last_offset``; normally the active segment), right after the
        marker was appended (Kafka's LogSegment.updateTxnIndex). ValueError if the marker
        is not in the log, or ends before an entry already recorded there; LogDirFull or
        StorageError if the entry could not be written or fsynced."""
        with self._lock:
            self._check_open()
            if not self.log_start_offset <= txn.last_offset < self.log_end_offset:
                raise ValueError(f"{self.name}: ABORT marker at {txn.last_offset} outside the log "
                                 f"[{self.log_start_offset}, {self.log_end_offset})")
            if txn.first_offset > txn.last_offset:
                raise ValueError(f"{self.name}: aborted transaction {txn} ends before it starts")
            segment = self._segments[max(bisect_right(self._bases, txn.last_offset) - 1, 0)]
            index = segment.txn_index
            try:
                index.append(txn)
                self._has_aborted_txns = True
                if self._config.flush_policy != "never":
                    # Aborts are rare: fsync the entry now rather than add a check to
                    # every append's fdatasync.
                    index.flush()
            except OSError as exc:
                if exc.errno in _DISK_FULL:
                    raise LogDirFull(f"{self.name}: {index.path.name}: {os.strerror(exc.errno)}") from exc
                raise StorageError(f"{self.name}: {index.path.name}: {exc}") from exc
            if self._config.flush_policy == "never":
                self._mark_dirty(segment)  # flush() and close() fsync it with the segment

    def _mark_dirty(self, segment: LogSegment) -> None:
        if not segment.dirty:
            segment.dirty = True
            self._dirty.append(segment)
            if self.dirty_logs is not None:
                self.dirty_logs.add(self)

    def collect_aborted_txns(self, start_offset: int, upper_bound: int) -> list[AbortedTxn]:
        """The aborted transactions overlapping [start_offset, upper_bound): every entry with
        last_offset >= start_offset and first_offset < upper_bound, oldest first, from the
        segment holding ``start_offset`` onward (Kafka's LocalLog.collectAbortedTransactions,
        which a read_committed fetch answers with). No lock; no file I/O and no segment walk
        when the partition has no aborted transaction."""
        if not self._has_aborted_txns:
            return []
        segments, bases = self._view
        out: list[AbortedTxn] = []
        for segment in segments[max(bisect_right(bases, start_offset) - 1, 0):]:
            index = segment.txn_index
            if index.exists and collect_into(index.entries, start_offset, upper_bound, out):
                break
        return out

    def truncate_aborted_txns(self, from_offset: int) -> None:
        """Forget every aborted transaction whose marker is at or past ``from_offset`` (the
        server's start-up replay then records again those it finds from there on)."""
        with self._lock:
            self._check_open()
            if not self._has_aborted_txns:
                return
            segments = self._segments
            for segment in segments[max(bisect_right(self._bases, from_offset) - 1, 0):]:
                if segment.txn_index.truncate_to(from_offset):
                    self._mark_dirty(segment)
            self._recheck_aborted_txns()

    # ------------------------------------------------------------------ compaction support

    def replace_segments(self, old: list[LogSegment], new: LogSegment | None) -> bool:
        """Swap a run of consecutive closed segments for one (compaction). False if the run is
        no longer in the log (retention got there first); the caller then discards ``new``."""
        with self._lock:
            segments = list(self._segments)
            try:
                first = segments.index(old[0])
            except ValueError:
                return False
            if segments[first:first + len(old)] != old or first + len(old) >= len(segments):
                return False
            replacement = [new] if new is not None else []
            self._set_segments(segments[:first] + replacement + segments[first + len(old):])
            self._dirty = [s for s in self._dirty if s not in old]
            for segment in old:
                self._graveyard.add(segment, self.config.file_delete_delay_ms)
            return True

    def write_cleaned_offset(self, offset: int) -> None:
        self.cleaned_offset = offset
        write_checkpoint(self.directory / CLEANER_OFFSET_CHECKPOINT, offset)

    def sweep(self) -> int:
        """Close retired descriptors whose readers are gone and whose delay has passed."""
        return self._graveyard.sweep()
