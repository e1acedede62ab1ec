"""Opening a partition directory: finish or undo interrupted work, validate, cut damage.

How this works, in order:

1. Leftovers of interrupted operations: a `{base}.swap` marker means a compaction swap was
   under way (see `storage.compaction`): if its `.log.cleaned` file still exists the swap had
   not started and is undone, otherwise it is finished. Other `*.cleaned`, `*.tmp` and
   `*.deleted` files, and index files without a .log, are removed.
2. Segments that may hold unflushed data are checked batch by batch: header sane (magic 2,
   length), whole batch present, CRC32C over attributes..end, a partitionLeaderEpoch the
   leader-epoch-checkpoint knows (see storage.leader_epoch), and offsets increasing
   (contiguous where the cleaner has not been, see `contiguous_from`). Which ones, as
   Kafka's LogLoader.recoverLog: after a clean shutdown none; after an unclean one those
   at or past the recovery point (the offset up to which the log was fsynced, from the
   data directory's recovery-point-offset-checkpoint, see storage.manager), i.e. the
   segment holding it and every later one. The others are trusted if their indexes are
   sane (monotonic, inside the file, last entry pointing at a batch with the indexed
   offset); the active segment also has its tail past the last index entry walked
   (headers only) to find its end, and is trusted if that end is at or below the recovery
   point (or the shutdown was clean). A trusted segment whose indexes fail that check is
   scanned after all.
3. At the first bad batch the segment is cut there and every later segment is deleted: a
   restart serves every batch before the damage and nothing after it. What was cut is
   logged on the "storage" logger.
4. Indexes are rebuilt from the scan wherever the files disagree with it. A scanned
   segment's transaction index loses the entries at or past its recovered end (their ABORT
   markers are not in the log); the server's start-up replay re-adds what it must.
"""

from __future__ import annotations

import json
import logging
import os
import re
from dataclasses import dataclass, field
from pathlib import Path

from storage.files import fsync_dir, unlink_quietly
from storage.index import OffsetIndex, TimeIndex
from storage.segment import (
    CLEANED_SUFFIX,
    INDEX_SUFFIX,
    INT32_MAX,
    LOG_SUFFIX,
    SWAP_SUFFIX,
    TIMEINDEX_SUFFIX,
    LogSegment,
    read_exact,
    segment_name,
    walk,
)
from storage.segment import OFFSET_FIELDS
from storage.txn_index import TXNINDEX_SUFFIX
from wire.records import CRC_START, HEADER_SIZE, LOG_OVERHEAD, crc32c, header_fields

log = logging.getLogger("storage")

# What recovery checks of each header, read from the one layout in wire.records.
_SCAN_FIELDS = header_fields("base_offset", "length", "partition_leader_epoch", "magic", "crc",
                             "last_offset_delta", "max_timestamp", "records_count")
_TAIL_FIELDS = header_fields("base_offset", "length", "last_offset_delta", "max_timestamp", whole=False)
_CHUNK = 8 * 1024 * 1024
_LEFTOVER_SUFFIXES = (SWAP_SUFFIX, CLEANED_SUFFIX, ".tmp", ".deleted")
_NAME = re.compile(r"^(\d{20})\.(log|index|timeindex|txnindex)$")


@dataclass
class ScanResult:
    """What one pass over a segment's batches found."""

    valid_size: int = 0
    next_offset: int = 0
    batches: int = 0
    max_timestamp: int = -1
    offset_of_max_timestamp: int = -1
    first_batch_max_timestamp: int = -1
    bytes_since_index: int = 0
    index_entries: list[tuple[int, int]] = field(default_factory=list)
    time_entries: list[tuple[int, int]] = field(default_factory=list)
    error: str | None = None  # why the scan stopped before the end of the file


def scan_segment(
    fd: int,
    size: int,
    base_offset: int,
    *,
    index_interval_bytes: int,
    contiguous: bool,
    next_base: int | None = None,
    validate_crc: bool = True,
    max_leader_epoch: int = 0,
    epochs_from: int = 0,
) -> ScanResult:
    """Walk every batch of a .log, validating it, and build the indexes Kafka would have.

    ``contiguous``: offsets must follow on without gaps (true unless the cleaner has
    rewritten this segment). ``max_leader_epoch``: the latest epoch the
    leader-epoch-checkpoint knows; a batch with a partitionLeaderEpoch above it (or below
    0) was never assigned, so it is damage (the checkpoint is written before the batches).
    Only batches reaching ``epochs_from`` (the log start offset) are held to that: the
    cache forgets epochs wholly below the log start, whose batches nobody reads. ``next_base``: the next segment's base offset, which no batch
    may reach. The scan stops at the first batch that fails a check and reports why in
    ``error``; ``valid_size`` is where the damage starts.
    """
    result = ScanResult(next_offset=base_offset)
    expected = base_offset
    pos = 0
    buf = b""
    buf_start = 0
    max_ts = -1
    offset_of_max = -1
    since_index = 0
    while pos < size:
        if size - pos < HEADER_SIZE:
            result.error = f"torn batch header: {size - pos} bytes at the end"
            break
        rel = pos - buf_start
        if rel + HEADER_SIZE > len(buf):
            buf_start, rel = pos, 0
            buf = read_exact(fd, min(_CHUNK, size - pos), pos)
        base, length, epoch, magic, crc, lod, batch_max_ts, count = _SCAN_FIELDS.unpack_from(buf, rel)
        batch_size = length + LOG_OVERHEAD
        if magic != 2:
            result.error = f"magic {magic} at position {pos}"
            break
        if batch_size < HEADER_SIZE:
            result.error = f"batch length {length} below the header size at position {pos}"
            break
        if pos + batch_size > size:
            result.error = f"torn batch: {batch_size} bytes declared at position {pos}, {size - pos} present"
            break
        if not 0 <= epoch <= max_leader_epoch and base + lod >= epochs_from:
            result.error = f"partitionLeaderEpoch {epoch} at position {pos}, the checkpoint knows 0..{max_leader_epoch}"
            break
        if base < expected or (contiguous and base != expected):
            result.error = f"baseOffset {base} at position {pos}, expected {expected}"
            break
        if lod < 0 or count < 0 or base + lod - base_offset > INT32_MAX:
            result.error = f"lastOffsetDelta {lod} / recordCount {count} at position {pos}"
            break
        if next_base is not None and base + lod >= next_base:
            result.error = f"offsets run to {base + lod}, into the next segment at {next_base}"
            break
        if validate_crc:
            if rel + batch_size > len(buf):
                buf_start, rel = pos, 0
                buf = read_exact(fd, min(max(_CHUNK, batch_size), size - pos), pos)
            actual = crc32c(memoryview(buf)[rel + CRC_START:rel + batch_size])
            if actual != crc:
                result.error = f"CRC32C mismatch at position {pos} (offset {base})"
                break
        last = base + lod
        if result.batches == 0:
            result.first_batch_max_timestamp = batch_max_ts
        # Kafka's LogSegment.append rule, one batch at a time.
        if batch_max_ts > max_ts:
            max_ts, offset_of_max = batch_max_ts, last
        if since_index > index_interval_bytes:
            result.index_entries.append((last, pos))
            if not result.time_entries or max_ts > result.time_entries[-1][0]:
                result.time_entries.append((max_ts, offset_of_max))
            since_index = 0
        since_index += batch_size
        expected = last + 1
        pos += batch_size
        result.batches += 1
    result.valid_size = pos
    result.next_offset = expected
    result.max_timestamp = max_ts
    result.offset_of_max_timestamp = offset_of_max
    result.bytes_since_index = since_index
    return result


@dataclass
class RecoveryStats:
    """What opening logs did (summed over the logs of a data directory by LogManager):
    segments validated batch by batch, segments trusted from their indexes, bytes cut."""

    segments_scanned: int = 0
    segments_trusted: int = 0
    bytes_truncated: int = 0


def apply_scan(segment: LogSegment, scan: ScanResult, *, active: bool) -> None:
    """Give a segment the state a scan found and make its index files agree with it."""
    segment.next_offset = scan.next_offset
    segment.max_timestamp = scan.max_timestamp
    segment.offset_of_max_timestamp = scan.offset_of_max_timestamp
    segment.first_batch_max_timestamp = scan.first_batch_max_timestamp
    segment.bytes_since_index = scan.bytes_since_index
    time_entries = list(scan.time_entries)
    if not active and scan.max_timestamp >= 0 and (not time_entries or time_entries[-1][0] < scan.max_timestamp):
        time_entries.append((scan.max_timestamp, scan.offset_of_max_timestamp))
    offsets_in_file = segment.offset_index.read_file() or []  # absent: no entries, nothing to write
    segment.offset_index.set_entries(scan.index_entries, in_file=offsets_in_file == scan.index_entries)
    times_in_file = segment.time_index.read_file() or []
    if active and times_in_file == time_entries + [(scan.max_timestamp, scan.offset_of_max_timestamp)]:
        # The final entry a clean close (or the roll that never came) adds: still true, and
        # rewriting the file (a rename per partition) is most of a small log's recovery.
        time_entries = times_in_file
    segment.time_index.set_entries(time_entries, in_file=times_in_file == time_entries)
    segment.indexes_loaded = True


def load_trusted(segment: LogSegment, next_base: int, *, missing_ok: bool = False,
                 present: set[str] | None = None) -> bool:
    """Load a closed segment's indexes without scanning it; False if they look wrong.
    ``missing_ok``: an index file that does not exist counts as empty (an active segment
    that never reached index.interval.bytes has none). ``present``: the names in the
    directory, if known (a file not among them is not looked for)."""
    indexes = []
    stem = segment_name(segment.base_offset)  # not index.path.name: that would build a Path
    for index, suffix in ((segment.offset_index, INDEX_SUFFIX), (segment.time_index, TIMEINDEX_SUFFIX)):
        if present is not None and stem + suffix not in present:
            indexes.append([] if missing_ok else None)
        else:
            entries = index.read_file()
            if entries is None and missing_ok and not index.path.exists():
                entries = []
            indexes.append(entries)
    offsets, times = indexes
    if offsets is None or times is None:
        return False
    if not OffsetIndex.valid(offsets, segment.base_offset, segment.size):
        return False
    if not TimeIndex.valid(times, segment.base_offset, next_base):
        return False
    if offsets:
        last_offset, pos = offsets[-1]
        if last_offset >= next_base:
            return False
        raw = os.pread(segment.fd, HEADER_SIZE, pos)
        if len(raw) < HEADER_SIZE:
            return False
        base, length, lod = OFFSET_FIELDS.unpack_from(raw)
        if base + lod != last_offset or pos + length + LOG_OVERHEAD > segment.size:
            return False
    segment.offset_index.set_entries(offsets, in_file=True)
    segment.time_index.set_entries(times, in_file=True)
    if times:
        segment.max_timestamp, segment.offset_of_max_timestamp = times[-1]
    segment.indexes_loaded = True
    return True


def load_trusted_active(segment: LogSegment, present: set[str] | None = None) -> bool:
    """The active segment after a clean shutdown (or below the recovery point): load its indexes (checked as
    `load_trusted` does) and walk the batch headers past the last index entry (at most
    about index.interval.bytes) for what appends track: the next offset, the max
    timestamp, bytes since the last index entry. No CRC is read, as Kafka trusts a cleanly
    closed log. False when anything disagrees: the caller scans the segment then."""
    if not load_trusted(segment, segment.base_offset + INT32_MAX + 1, missing_ok=True, present=present):
        return False
    last = segment.offset_index.last_entry
    position = 0 if last is None else last[1]
    max_ts, max_off = segment.max_timestamp, segment.offset_of_max_timestamp
    next_offset = segment.base_offset
    end = position
    since = 0
    first_ts = None
    # Nothing past the last index entry (an empty active segment, the common case among
    # 100 000 quiet partitions): the .log is not even opened.
    tail = walk(segment.fd, position, segment.size, _TAIL_FIELDS) if position < segment.size else ()
    for at, size, (base, _length, lod, batch_max_ts) in tail:
        if base < next_offset:
            return False
        if at == 0:
            first_ts = batch_max_ts
        if batch_max_ts > max_ts:
            max_ts, max_off = batch_max_ts, base + lod
        next_offset = base + lod + 1
        since += size
        end = at + size
    if end != segment.size or (last is not None and next_offset <= last[0]):
        return False
    if segment.size and first_ts is None:
        first_ts = _TAIL_FIELDS.unpack_from(os.pread(segment.fd, HEADER_SIZE, 0))[3]
    if first_ts is not None:
        segment.first_batch_max_timestamp = first_ts
    segment.next_offset = next_offset
    segment.max_timestamp, segment.offset_of_max_timestamp = max_ts, max_off
    segment.bytes_since_index = since
    return True


def _finish_swaps(directory: Path, names: list[str]) -> bool:
    """Complete or undo compaction swaps interrupted by a crash (see storage.compaction).
    ``names``: the directory's listing. True if anything was done (list it again)."""
    if not any(name.endswith(_LEFTOVER_SUFFIXES) for name in names):
        return False  # the usual case: no glob, no second listing
    for marker in sorted(directory.glob("*" + SWAP_SUFFIX)):
        base = int(marker.name[:20])
        try:
            replaced = json.loads(marker.read_text())["replaced"]
        except (ValueError, KeyError, OSError) as exc:
            log.error("%s: unreadable swap marker %s (%s); leaving segments as they are", directory, marker.name, exc)
            replaced = None
        cleaned = directory / (segment_name(base) + LOG_SUFFIX + CLEANED_SUFFIX)
        if replaced is not None and not cleaned.exists():
            # The new segment was renamed into place: finish deleting what it replaced.
            for other in replaced:
                if other == base:
                    continue
                for suffix in (LOG_SUFFIX, INDEX_SUFFIX, TIMEINDEX_SUFFIX, TXNINDEX_SUFFIX):
                    unlink_quietly(directory / (segment_name(other) + suffix))
            log.warning("%s: finished an interrupted compaction swap of segments %s", directory, replaced)
        else:
            log.warning("%s: undid an interrupted compaction swap at %d", directory, base)
        for suffix in (LOG_SUFFIX, INDEX_SUFFIX, TIMEINDEX_SUFFIX, TXNINDEX_SUFFIX):
            unlink_quietly(directory / (segment_name(base) + suffix + CLEANED_SUFFIX))
        unlink_quietly(marker)
    for leftover in list(directory.glob("*" + CLEANED_SUFFIX)) + list(directory.glob("*.tmp")) + list(directory.glob("*.deleted")):
        unlink_quietly(leftover)
    return True


def load_segments(
    directory: Path,
    *,
    clean: bool,
    contiguous_from: int,
    index_interval_bytes: int,
    now_ms: int,
    name: str,
    max_leader_epoch: int = 0,
    epochs_from: int = 0,
    recovery_point: int = 0,
    stats: RecoveryStats | None = None,
    names: list[str] | None = None,
    checkpoint_mtime_ns: int | None = None,
) -> list[LogSegment]:
    """Open, check and (where damaged) cut the segments of one partition directory.

    ``contiguous_from``: offsets below it may have gaps (compacted); from it on they must be
    contiguous. ``clean``: the last shutdown was clean, nothing is scanned (unless its
    indexes look wrong); otherwise segments wholly below ``recovery_point`` are trusted and
    the rest scanned. ``stats`` counts what was done. Returns the surviving segments,
    oldest first; may be empty. ``names``: the directory's listing, if the caller has it.
    ``checkpoint_mtime_ns``: when the recovery point was checkpointed; an active segment
    written after that is scanned without first trying to trust it.
    """
    if stats is None:
        stats = RecoveryStats()
    if names is None:
        names = os.listdir(directory)
    if _finish_swaps(directory, names):
        names = os.listdir(directory)
    bases: set[int] = set()
    txn_indexes: set[int] = set()
    orphans: list[Path] = []
    for entry in names:
        match = _NAME.match(entry)
        if match is None:
            continue
        if match.group(2) == "log":
            bases.add(int(match.group(1)))
        else:
            orphans.append(directory / entry)
            if match.group(2) == "txnindex":
                txn_indexes.add(int(match.group(1)))
    for path in orphans:
        if int(path.name[:20]) not in bases:
            unlink_quietly(path)
    present = set(names)
    ordered = sorted(bases)
    segments: list[LogSegment] = []
    for base in ordered:
        segments.append(LogSegment.open_existing(directory, base, txn_index=base in txn_indexes))

    cut_at: int | None = None  # index of the segment where damage was found
    prev_next: int | None = None  # next offset after the previous segment, when known
    for i, segment in enumerate(segments):
        last = i == len(segments) - 1
        next_base = segments[i + 1].base_offset if not last else None
        below = next_base is not None and next_base <= recovery_point  # flushed whole
        if (clean or below) and not last and load_trusted(segment, next_base, present=present):
            stats.segments_trusted += 1
            prev_next = None
            continue
        if (last and (clean or (recovery_point >= segment.base_offset
                                and not (checkpoint_mtime_ns is not None and segment.mtime_ns > checkpoint_mtime_ns)))
                and load_trusted_active(segment, present)):
            # After a crash the active segment is trusted too when it ends at or below the
            # recovery point (a quiet partition, flushed): its header walk says where.
            if clean or segment.next_offset <= recovery_point:
                stats.segments_trusted += 1
                continue
        stats.segments_scanned += 1
        contiguous = segment.base_offset >= contiguous_from
        prev_contiguous = i > 0 and segments[i - 1].base_offset >= contiguous_from
        if contiguous and prev_contiguous and prev_next is not None and prev_next != segment.base_offset:
            log.warning("%s: segment %s starts at offset %d but the previous one ends before %d",
                        name, segment.log_path.name, segment.base_offset, prev_next)
            cut_at = i - 1
            break
        scan = scan_segment(
            segment.fd, segment.size, segment.base_offset,
            index_interval_bytes=index_interval_bytes, contiguous=contiguous, next_base=next_base,
            max_leader_epoch=max_leader_epoch, epochs_from=epochs_from,
        )
        apply_scan(segment, scan, active=last or scan.error is not None)
        # Entries whose ABORT marker did not survive (a crash between the two writes, or
        # the cut below) go too (Kafka rebuilds the index while recovering a segment).
        dropped_txns = segment.txn_index.truncate_to(scan.next_offset)
        if dropped_txns:
            log.warning("%s: %d aborted transaction(s) at or past offset %d dropped from %s: their markers are "
                        "not in the log", name, dropped_txns, scan.next_offset, segment.txn_index.path.name)
        if scan.error is not None:
            log.warning(
                "%s: segment %s cut at position %d (offset %d), %d bytes dropped: %s",
                name, segment.log_path.name, scan.valid_size, scan.next_offset,
                segment.size - scan.valid_size, scan.error,
            )
            os.ftruncate(segment.fd, scan.valid_size)
            os.fsync(segment.fd)
            stats.bytes_truncated += segment.size - scan.valid_size
            segment.size = scan.valid_size
            cut_at = i
            break
        prev_next = scan.next_offset
    if cut_at is not None:
        dropped = segments[cut_at + 1:]
        segments = segments[:cut_at + 1]
        for segment in dropped:
            log.warning("%s: segment %s (%d bytes) deleted: it follows damaged data",
                        name, segment.log_path.name, segment.size)
            stats.bytes_truncated += segment.size
            segment.close_now_if_idle(force=True)
            segment.delete_files()
        fsync_dir(directory)


    if segments:
        active = segments[-1]
        if active.created_ms == 0:
            first_ts = active.first_batch_max_timestamp
            active.created_ms = first_ts if 0 <= first_ts <= now_ms else (active.mtime_ms() if active.size else now_ms)
    return segments
