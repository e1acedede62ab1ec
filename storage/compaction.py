"""The log cleaner: cleanup.policy=compact keeps the latest record per key.

How this works (one pass over one partition, Kafka's LogCleaner in miniature):

1. Cleanable range: the closed segments from the start of the log up to the first one
   younger than min.compaction.lag.ms or reaching the first unstable offset (the oldest
   ongoing transaction's first offset, `PartitionLog.first_unstable_offset`: Kafka's
   firstUncleanableOffset); the active segment is never touched. Its tail
   beyond `cleaned_offset` (the cleaner checkpoint) is the dirty section. A pass runs when
   dirty bytes / cleanable bytes >= min.cleanable.dirty.ratio, when a dirty segment is older
   than max.compaction.lag.ms, when a tombstone's delete horizon has come due, or when
   forced.
2. Offset map: key -> latest offset, over the records of the dirty section, leaving out
   the batches of aborted transactions (an aborted record must never shadow a committed
   one with the same key).
3. Every cleanable segment is rewritten, in groups of consecutive segments whose sizes add
   up to at most segment.bytes: a record survives unless the map holds a later offset for
   its key. Batches keep their baseOffset and lastOffsetDelta, so offsets are preserved
   and gaps are legal; a batch nothing was removed from is copied byte for byte, others
   are re-encoded with their codec (wire.records.build_batch). A batch left empty is
   dropped, except the last (data) batch of a producer id, kept empty so the producer's
   sequence and epoch survive (KIP-98).
4. Transactions, as Kafka's CleanedTransactionMetadata: the batches of aborted
   transactions (known from the transaction indexes, `PartitionLog.collect_aborted_txns`)
   are dropped whole. A transaction marker stays while the group still held data of its
   transaction; once it held none, the marker is treated as a tombstone (KIP-534): stamped
   with a delete horizon, dropped by a pass after it. An ABORT marker that stays keeps its
   entry in the cleaned segment's transaction index; the others' entries go with their
   data. Committed transactional data is compacted like any data.
5. Tombstones (null values) follow KIP-534: the first pass that keeps one stamps its batch
   with a delete horizon (now + delete.retention.ms, attributes bit 6, in baseTimestamp);
   a later pass after that horizon drops it.
6. Swap, crash-safe: the group is written to `{base}.log.cleaned` (+ indexes, and a
   `.txnindex.cleaned` when ABORT entries stay), fsynced; then a `{base}.swap` marker
   listing the replaced segments is written, the first segment's files are replaced by
   rename (the .txnindex before the .log, whose rename decides the swap) and the others
   deleted, and the marker removed. Recovery finishes or undoes a swap the marker shows
   was interrupted.
"""

from __future__ import annotations

import json
import logging
import os
from collections import deque
from dataclasses import dataclass

from storage.config import LogConfig
from storage.files import atomic_write, fsync_dir, unlink_quietly
from storage.index import OffsetIndex, TimeIndex
from storage.log import PartitionLog
from storage.recovery import INT32_MAX, scan_segment
from storage.segment import (
    CLEANED_SUFFIX,
    INDEX_SUFFIX,
    LOG_SUFFIX,
    SWAP_SUFFIX,
    TIMEINDEX_SUFFIX,
    LogSegment,
    iter_segment_batches,
    segment_name,
    walk_headers,
)
from storage.txn_index import TXNINDEX_SUFFIX, AbortedTxn, TransactionIndex
from wire.records import (
    COMPRESSION_MASK,
    CONTROL_MASK,
    DELETE_HORIZON_MASK,
    TIMESTAMP_TYPE_MASK,
    TRANSACTIONAL_MASK,
    BatchHeader,
    ControlType,
    build_batch,
    control_type,
    iter_records,
    parse_header,
)

log = logging.getLogger("storage")


@dataclass
class CleanerStats:
    """What one cleaning pass over a partition did."""

    segments_before: int = 0
    segments_after: int = 0
    bytes_before: int = 0
    bytes_after: int = 0
    records_removed: int = 0
    tombstones_removed: int = 0
    batches_rewritten: int = 0
    aborted_batches_removed: int = 0
    markers_removed: int = 0


def clean_log(plog: PartitionLog, now_ms: int, *, force: bool = False) -> CleanerStats | None:
    """Compact ``plog`` if its policy says compact and there is enough to do; None if not."""
    config = plog.config
    if not config.compact:
        return None
    with plog.cleaner_lock:
        if plog.closed:
            return None
        segments = plog.segments
        unstable = plog.first_unstable_offset
        cleanable: list[LogSegment] = []
        for i, segment in enumerate(segments[:-1]):
            if config.min_compaction_lag_ms > 0 and segment.largest_timestamp() > now_ms - config.min_compaction_lag_ms:
                break
            if unstable is not None and segments[i + 1].base_offset > unstable:
                break  # holds offsets at or past the oldest ongoing transaction's start
            cleanable.append(segment)
        if not cleanable:
            return None
        first_uncleanable = segments[len(cleanable)].base_offset
        dirty = [s for s in cleanable if s.base_offset >= plog.cleaned_offset]
        total = sum(s.size for s in cleanable)
        dirty_bytes = sum(s.size for s in dirty)
        horizon_due = plog.next_delete_horizon_ms is not None and now_ms >= plog.next_delete_horizon_ms
        # max.compaction.lag.ms: a dirty segment wholly older than the lag is cleaned
        # whatever the dirty ratio (Kafka looks at the earliest dirty record; a segment's
        # largest timestamp makes this fire somewhat later, never earlier).
        lag_due = bool(dirty) and now_ms - dirty[0].largest_timestamp() > config.max_compaction_lag_ms
        if not force and not horizon_due and not lag_due:
            if total == 0 or dirty_bytes / total < config.min_cleanable_dirty_ratio or not dirty:
                return None

        offset_map = _build_offset_map(plog, dirty, first_uncleanable)
        producer_last = _last_batches_per_producer(segments)
        # Offsets below first_uncleanable may have gaps from here on: say so before any
        # swap, or recovery would take a compacted segment for a damaged one.
        if plog.cleaned_offset < first_uncleanable:
            plog.write_cleaned_offset(first_uncleanable)

        stats = CleanerStats(segments_before=len(cleanable), bytes_before=total)
        plog.next_delete_horizon_ms = None
        cleaner = _GroupCleaner(plog, config, offset_map, producer_last, now_ms, stats)
        for group in _groups(cleanable, segments, config):
            end = segments[segments.index(group[-1]) + 1].base_offset
            cleaner.clean(group, end, keep_if_empty=group[0] is segments[0])
        after = plog.segments
        stats.segments_after = sum(1 for s in after if s.base_offset < first_uncleanable)
        stats.bytes_after = sum(s.size for s in after if s.base_offset < first_uncleanable)
        log.info(
            "%s: compacted %d segment(s) into %d, %d -> %d bytes, %d record(s) and %d tombstone(s) removed, "
            "%d aborted batch(es) and %d transaction marker(s) removed",
            plog.name, stats.segments_before, stats.segments_after, stats.bytes_before,
            stats.bytes_after, stats.records_removed, stats.tombstones_removed,
            stats.aborted_batches_removed, stats.markers_removed,
        )
        return stats


def _batches(segment: LogSegment):
    if not segment.pin():
        return
    try:
        for _pos, data in iter_segment_batches(segment.fd, 0, segment.size):
            yield parse_header(data), data
    finally:
        segment.unpin()


class _TxnMetadata:
    """What the cleaner knows of transactions while it walks a range of batches in order
    (Kafka's CleanedTransactionMetadata): which batches belong to aborted transactions,
    and whether a marker's transaction still had batches in the range.

    ``aborted``: the aborted transactions overlapping the range (from the transaction
    indexes). One is "ongoing" from the first batch reaching its first offset until its
    ABORT marker. A transactional batch of a producer with an ongoing aborted transaction
    is aborted data; any other is committed (or not yet decided, which cannot happen
    below the first unstable offset).
    """

    def __init__(self, aborted: list[AbortedTxn]) -> None:
        self._pending = deque(sorted(aborted, key=lambda txn: txn.first_offset))
        # producer id -> [the aborted transaction, whether a batch of it was seen]
        self._ongoing_aborted: dict[int, list] = {}
        self._ongoing_committed: set[int] = set()
        # ABORT entries whose marker stays (its data was seen): the cleaned txn index.
        self.kept_aborted: list[AbortedTxn] = []

    def _consume_up_to(self, offset: int) -> None:
        pending = self._pending
        while pending and pending[0].first_offset <= offset:
            txn = pending.popleft()
            # A producer has one transaction at a time: a later one replaces an earlier
            # whose marker this walk did not meet.
            self._ongoing_aborted[txn.producer_id] = [txn, False]

    def on_batch(self, header: BatchHeader) -> bool:
        """A data batch was read; True when it belongs to an aborted transaction."""
        self._consume_up_to(header.last_offset)
        if not header.attributes & TRANSACTIONAL_MASK:
            return False
        ongoing = self._ongoing_aborted.get(header.producer_id)
        if ongoing is not None:
            ongoing[1] = True
            return True
        self._ongoing_committed.add(header.producer_id)
        return False

    def on_marker(self, header: BatchHeader, data: bytes | bytearray) -> bool:
        """A control batch was read; True when it may be discarded: no batch of its
        transaction was seen (its data is gone), or it is already empty."""
        self._consume_up_to(header.last_offset)
        record = next(iter_records(data), None)
        if record is None:
            return True  # an empty control batch was cleaned before
        kind = control_type(record)
        pid = header.producer_id
        if kind == ControlType.ABORT:
            ongoing = self._ongoing_aborted.pop(pid, None)
            if ongoing is not None and ongoing[1]:
                self.kept_aborted.append(ongoing[0])
                return False
            return True
        if kind == ControlType.COMMIT:
            if pid in self._ongoing_committed:
                self._ongoing_committed.discard(pid)
                return False
            return True
        return False


def _build_offset_map(plog: PartitionLog, dirty: list[LogSegment], end: int) -> dict[bytes, int]:
    offset_map: dict[bytes, int] = {}
    if not dirty:
        return offset_map
    txns = _TxnMetadata(plog.collect_aborted_txns(dirty[0].base_offset, end))
    for segment in dirty:
        for header, data in _batches(segment):
            if header.attributes & CONTROL_MASK:
                txns.on_marker(header, data)
                continue
            if txns.on_batch(header):
                continue  # aborted: its records must not shadow committed ones
            for record in iter_records(data):
                if record.key is not None:
                    offset_map[record.key] = record.offset
    return offset_map


def _last_batches_per_producer(segments) -> dict[int, tuple[int, int]]:
    """producer id -> (base offset of its last batch, of its last data batch or -1): the
    batches kept even when cleaning empties them. The last data batch holds the producer's
    last sequence, a last marker its latest epoch (Kafka's lastRecordsOfActiveProducers)."""
    last: dict[int, tuple[int, int]] = {}
    for segment in segments:
        if not segment.pin():
            continue
        try:
            for header in walk_headers(segment.fd, 0, segment.size):
                pid = header.producer_id
                if pid >= 0:
                    if header.attributes & CONTROL_MASK:
                        last[pid] = (header.base_offset, last.get(pid, (-1, -1))[1])
                    else:
                        last[pid] = (header.base_offset, header.base_offset)
        finally:
            segment.unpin()
    return last


def _groups(cleanable: list[LogSegment], segments, config: LogConfig) -> list[list[LogSegment]]:
    """Consecutive segments whose sizes fit one segment and whose offsets fit 32-bit deltas."""
    groups: list[list[LogSegment]] = []
    bases = [s.base_offset for s in segments]
    for i, segment in enumerate(cleanable):
        end = bases[i + 1]  # exclusive upper bound of this segment's offsets
        if groups:
            group = groups[-1]
            size = sum(s.size for s in group) + segment.size
            if size <= config.segment_bytes and end - 1 - group[0].base_offset <= INT32_MAX:
                group.append(segment)
                continue
        groups.append([segment])
    return groups


class _GroupCleaner:
    def __init__(self, plog: PartitionLog, config: LogConfig, offset_map: dict[bytes, int],
                 producer_last: dict[int, tuple[int, int]], now_ms: int, stats: CleanerStats) -> None:
        self.plog = plog
        self.config = config
        self.offset_map = offset_map
        self.producer_last = producer_last
        self.now_ms = now_ms
        self.stats = stats
        self.txns = _TxnMetadata([])

    def _retain_empty(self, header: BatchHeader) -> bool:
        """Kept even when emptied: the last batch, or last data batch, of its producer."""
        return header.producer_id >= 0 and header.base_offset in self.producer_last.get(header.producer_id, ())

    def _horizon_pending(self, horizon: int) -> None:
        due = self.plog.next_delete_horizon_ms
        self.plog.next_delete_horizon_ms = horizon if due is None else min(due, horizon)

    def filter_batch(self, header: BatchHeader, data: bytes) -> bytes | bytearray | None:
        """The batch as it should be after cleaning: ``data`` itself if unchanged, a rebuilt
        batch, or None to drop it. Called for every batch of the group, in order."""
        attributes = header.attributes
        if attributes & CONTROL_MASK:
            return self._filter_marker(header, data)
        if self.txns.on_batch(header):
            # Aborted: no record of it is ever read (Kafka's discardBatchRecords).
            if header.record_count == 0:
                return data if self._retain_empty(header) else None
            self.stats.aborted_batches_removed += 1
            return self._rebuild(header, []) if self._retain_empty(header) else None
        horizon = header.base_timestamp if attributes & DELETE_HORIZON_MASK else None
        offset_map = self.offset_map
        kept = []
        removed = tombstones_dropped = 0
        has_tombstone = False
        for record in iter_records(data):
            key = record.key
            if key is not None and offset_map.get(key, -1) > record.offset:
                removed += 1
                continue
            if record.value is None and key is not None:
                if horizon is not None and self.now_ms >= horizon:
                    tombstones_dropped += 1
                    continue
                has_tombstone = True
            kept.append(record)
        new_horizon = None
        if has_tombstone:
            new_horizon = horizon if horizon is not None else self.now_ms + self.config.delete_retention_ms
            self._horizon_pending(new_horizon)
        self.stats.records_removed += removed
        self.stats.tombstones_removed += tombstones_dropped
        if not removed and not tombstones_dropped and new_horizon == horizon:
            return data
        if not kept and not self._retain_empty(header):
            return None
        return self._rebuild(header, kept, new_horizon)

    def _filter_marker(self, header: BatchHeader, data: bytes) -> bytes | bytearray | None:
        """A transaction marker stays while its transaction had data in the group; then it
        is a tombstone (KIP-534, Kafka's containsMarkerForEmptyTxn): stamped with a delete
        horizon, removed by a pass after it (emptied instead when its producer needs it)."""
        if not self.txns.on_marker(header, data):
            return data
        horizon = header.base_timestamp if header.attributes & DELETE_HORIZON_MASK else None
        if horizon is None:
            horizon = self.now_ms + self.config.delete_retention_ms
            self._horizon_pending(horizon)
            return self._rebuild(header, list(iter_records(data)), horizon)
        if self.now_ms < horizon:
            self._horizon_pending(horizon)
            return data
        if header.record_count == 0:
            return data if self._retain_empty(header) else None
        self.stats.markers_removed += 1
        return self._rebuild(header, [], horizon) if self._retain_empty(header) else None

    def _rebuild(self, header: BatchHeader, kept: list, delete_horizon: int | None = None) -> bytearray:
        """``header``'s batch holding ``kept`` only, offsets and producer fields unchanged."""
        self.stats.batches_rewritten += 1
        attributes = header.attributes
        log_append_time = bool(attributes & TIMESTAMP_TYPE_MASK)
        return build_batch(
            kept,
            base_offset=header.base_offset,
            compression=attributes & COMPRESSION_MASK,
            producer_id=header.producer_id,
            producer_epoch=header.producer_epoch,
            base_sequence=header.base_sequence,
            timestamp_type=1 if log_append_time else 0,
            is_transactional=bool(attributes & TRANSACTIONAL_MASK),
            is_control=bool(attributes & CONTROL_MASK),
            partition_leader_epoch=header.partition_leader_epoch,  # the epoch it was written in
            max_timestamp=header.max_timestamp if (log_append_time or not kept) else None,
            last_offset_delta=header.last_offset_delta,
            delete_horizon=delete_horizon,
        )

    def clean(self, group: list[LogSegment], end: int, *, keep_if_empty: bool) -> None:
        """Rewrite ``group`` (whose offsets end before ``end``) as one segment, if that
        changes anything."""
        plog = self.plog
        directory = plog.directory
        base = group[0].base_offset
        name = segment_name(base)
        # Each group starts afresh, as Kafka's cleanSegments: a marker stays only for data
        # of its transaction in the same group (earlier groups were cleaned already).
        self.txns = _TxnMetadata(plog.collect_aborted_txns(base, end))
        cleaned_log = directory / (name + LOG_SUFFIX + CLEANED_SUFFIX)
        fd = os.open(cleaned_log, os.O_RDWR | os.O_CREAT | os.O_TRUNC, 0o644)
        changed = len(group) > 1
        size = 0
        try:
            pending: list[bytes | bytearray] = []
            pending_bytes = 0
            for segment in group:
                for header, data in _batches(segment):
                    out = self.filter_batch(header, data)
                    if out is not data:
                        changed = True
                    if out is None:
                        continue
                    pending.append(out)
                    pending_bytes += len(out)
                    if pending_bytes >= 1 << 20:
                        size = _write(fd, pending, size)
                        pending, pending_bytes = [], 0
            size = _write(fd, pending, size)
            aborted = self.txns.kept_aborted
            if aborted != [txn for segment in group for txn in segment.txn_index.entries]:
                changed = True
            if not changed:
                os.close(fd)
                fd = -1
                unlink_quietly(cleaned_log)
                return
            os.fsync(fd)
            scan = scan_segment(fd, size, base, index_interval_bytes=self.config.index_interval_bytes,
                                contiguous=False, validate_crc=False,
                                max_leader_epoch=INT32_MAX)  # kept as they were written
            if scan.error is not None:  # pragma: no cover - we just wrote these batches
                raise RuntimeError(f"cleaned segment {cleaned_log} does not scan: {scan.error}")
        except BaseException:
            if fd >= 0:
                os.close(fd)
            unlink_quietly(cleaned_log)
            raise
        os.close(fd)
        time_entries = list(scan.time_entries)
        if scan.max_timestamp >= 0 and (not time_entries or time_entries[-1][0] < scan.max_timestamp):
            time_entries.append((scan.max_timestamp, scan.offset_of_max_timestamp))
        for index_cls, suffix, entries in ((OffsetIndex, INDEX_SUFFIX, scan.index_entries),
                                           (TimeIndex, TIMEINDEX_SUFFIX, time_entries)):
            index = index_cls(directory / (name + suffix + CLEANED_SUFFIX), base)
            index.set_entries(entries, in_file=False)
            index.sync()
        txn_index = TransactionIndex(directory / (name + TXNINDEX_SUFFIX + CLEANED_SUFFIX), base)
        txn_index.set_entries(aborted)  # the ABORT entries whose markers stay
        txn_index.flush()
        self._swap(group, name, size == 0 and not keep_if_empty, scan, txn_index)

    def _swap(self, group: list[LogSegment], name: str, drop: bool, scan, txn_index: TransactionIndex) -> None:
        plog = self.plog
        directory = plog.directory
        base = group[0].base_offset
        cleaned = [directory / (name + suffix + CLEANED_SUFFIX) for suffix in (LOG_SUFFIX, INDEX_SUFFIX, TIMEINDEX_SUFFIX)]
        with plog._lock:
            current = plog.segments
            if not all(s in current for s in group) or current[-1] in group:
                for path in cleaned:
                    unlink_quietly(path)
                txn_index.delete()
                return
            marker = directory / (name + SWAP_SUFFIX)
            replaced = [s.base_offset for s in group]
            atomic_write(marker, json.dumps({"replaced": replaced}).encode())
            if drop:
                # Nothing survived: the swap deletes the whole group (the marker still
                # names it, so recovery finishes the job after a crash).
                for path in cleaned:
                    unlink_quietly(path)
                txn_index.delete()
                for segment in group:
                    segment.delete_files()
                new = None
            else:
                # The transaction index goes first: the .log rename is the point of no
                # return, and a .log without the entries of its aborted data would let
                # read_committed consumers see it. (Were the swap undone after this, the
                # old segment would have a subset of its entries, all of whose data it
                # still holds, plus entries past its end that recovery cuts.)
                has_txn_index = txn_index.exists
                txn_index.rename(directory / (name + TXNINDEX_SUFFIX))  # (no file: nothing to rename)
                unlink_quietly(directory / (name + INDEX_SUFFIX))
                unlink_quietly(directory / (name + TIMEINDEX_SUFFIX))
                os.replace(cleaned[0], directory / (name + LOG_SUFFIX))
                os.replace(cleaned[1], directory / (name + INDEX_SUFFIX))
                os.replace(cleaned[2], directory / (name + TIMEINDEX_SUFFIX))
                if not has_txn_index:
                    unlink_quietly(directory / (name + TXNINDEX_SUFFIX))
                fsync_dir(directory)
                for segment in group[1:]:
                    segment.delete_files()
                new = LogSegment.open_existing(directory, base, txn_index=has_txn_index)
                new.offset_index.set_entries(scan.index_entries, in_file=True)
                entries = new.time_index.read_file() or []
                new.time_index.set_entries(entries, in_file=True)
                new.indexes_loaded = True
                new.next_offset = scan.next_offset
                new.max_timestamp = scan.max_timestamp
                new.offset_of_max_timestamp = scan.offset_of_max_timestamp
                new.first_batch_max_timestamp = scan.first_batch_max_timestamp
                new.bytes_since_index = scan.bytes_since_index
                new.created_ms = group[0].created_ms
            fsync_dir(directory)
            unlink_quietly(marker)
            plog.replace_segments(group, new)


def _write(fd: int, parts: list[bytes | bytearray], position: int) -> int:
    if not parts:
        return position
    data = b"".join(parts)
    view = memoryview(data)
    while view:
        written = os.pwrite(fd, view, position)
        view = view[written:]
        position += written
    return position
