"""One segment of a partition log: a `.log` file, its two sparse indexes and, when it holds
an ABORT marker, its transaction index.

How this works: a segment is appended to by one writer (the partition's append path, under
the partition lock) and read by any number of threads with `os.pread` on the shared file
descriptor, which has no file position to race on. `size` is the committed length: it grows
only after a write has completed, so a reader that snapshots it never sees a half-written
batch. When a segment leaves the log (retention, compaction, topic deletion) its descriptor
is not closed at once: readers pin a segment while they pread, and the `Graveyard` closes a
retired descriptor only when no reader holds it and `file.delete.delay.ms` has passed, which
also keeps descriptors handed out for `os.sendfile` (`PartitionLog.read_location`) valid.

The descriptor itself is opened lazily and may be closed while the segment is idle
(storage.open_files, bounded by log.open.files.max): `fd` reopens it for whoever holds the
partition lock (writers), `pin` opens it for readers and keeps it open until `unpin`.
"""

from __future__ import annotations

import errno
import logging
import os
import struct
import threading
import time
from dataclasses import dataclass
from pathlib import Path

from storage.files import LazyPath, blocks_past_end, unlink_quietly
from storage.index import OffsetIndex, TimeIndex
from storage.open_files import OPEN_FILES
from storage.txn_index import TXNINDEX_SUFFIX, TransactionIndex
from wire.records import HEADER_SIZE, LOG_OVERHEAD, header_fields

log = logging.getLogger("storage")

INT32_MAX = (1 << 31) - 1

LOG_SUFFIX = ".log"
INDEX_SUFFIX = ".index"
TIMEINDEX_SUFFIX = ".timeindex"
CLEANED_SUFFIX = ".cleaned"
SWAP_SUFFIX = ".swap"

_WINDOW = 64 * 1024
LOCATE_WINDOW = 8192  # a read locates its batches within a few headers of an index entry
BOUNDARY_HINTS = 64
_pwrite = os.pwrite


def segment_name(base_offset: int) -> str:
    return f"{base_offset:020d}"


@dataclass(slots=True)
class HeaderAt:
    """A batch header found while walking a segment (the fields storage looks at)."""

    position: int
    base_offset: int
    size: int
    attributes: int
    last_offset_delta: int
    max_timestamp: int
    producer_id: int
    record_count: int

    @property
    def last_offset(self) -> int:
        return self.base_offset + self.last_offset_delta

    @property
    def next_offset(self) -> int:
        return self.base_offset + self.last_offset_delta + 1


# The header fields each walk reads, derived from the one layout in wire.records. Every
# layout starts with baseOffset and batchLength, which `walk` relies on.
OFFSET_FIELDS = header_fields("base_offset", "length", "last_offset_delta", whole=False)
HEADER_AT_FIELDS = header_fields("base_offset", "length", "attributes", "last_offset_delta", "max_timestamp",
                                 "producer_id", "records_count")
_BASE_AND_LENGTH = header_fields("base_offset", "length", whole=False)


def walk(fd: int, position: int, end: int, layout: struct.Struct = OFFSET_FIELDS, window: int = _WINDOW):
    """Yield (position, size, fields) for each batch from ``position`` up to ``end``, trusting
    lengths; ``fields`` is ``layout`` (a `wire.records.header_fields` struct starting with
    base_offset, length) unpacked from the batch's header.

    The one header walk of the storage layer. Reads ``window`` bytes at a time and parses
    headers in memory, so walking many small batches costs one pread per window. Stops at
    the first header that does not fit before ``end`` (a torn tail) or declares a length
    below the header size. (Recovery validates as it goes, so it has a loop of its own.)
    """
    buf = b""
    buf_start = position
    unpack = layout.unpack_from
    while position + HEADER_SIZE <= end:
        offset = position - buf_start
        if offset + HEADER_SIZE > len(buf):
            buf_start = position
            buf = os.pread(fd, min(window, end - position), position)
            offset = 0
            if len(buf) < HEADER_SIZE:
                return
        fields = unpack(buf, offset)
        size = fields[1] + LOG_OVERHEAD
        if size < HEADER_SIZE or position + size > end:
            return
        yield position, size, fields
        position += size


def walk_headers(fd: int, position: int, end: int, window: int = _WINDOW):
    """`walk` yielding a `HeaderAt` per batch (the fields storage looks at)."""
    for at, size, (base, _length, attributes, lod, max_ts, pid, count) in walk(fd, position, end,
                                                                              HEADER_AT_FIELDS, window):
        yield HeaderAt(at, base, size, attributes, lod, max_ts, pid, count)


class IndexMismatch(Exception):
    """An offset index entry points at something other than the batch it names; the
    caller rebuilds the index from the log (under the partition lock) and retries."""

    def __init__(self, segment: "LogSegment") -> None:
        self.segment = segment


class LogSegment:
    """`{base:020d}.log` + `.index` + `.timeindex` (+ `.txnindex`, only once an aborted
    transaction ends here: storage.txn_index), named by the first offset they may hold.

    As Kafka's LogSegment, it appends (`append`, `append_batches`: write at its size, an
    index entry every index.interval.bytes), locates reads (`first_batch`, `locate`,
    `read_end`, `trim`) and truncates (`truncate_to`); the partition log keeps the segment
    list, rolls, the read snapshot and the lock.

    File format of the .log: record batches (magic 2) back to back, byte for byte as a
    producer sent them and a consumer receives them, except for the two fields outside the
    CRC that the broker writes: baseOffset (assigned) and partitionLeaderEpoch (the leader
    epoch of the append, see storage.leader_epoch). Offsets
    increase from batch to batch; they are contiguous except in segments the cleaner has
    compacted, where a batch keeps its baseOffset and lastOffsetDelta even when records
    (or whole batches) were removed. No other framing: the file size is the sum of batch
    sizes, and recovery finds batch boundaries from the batchLength fields.
    """

    log_path = LazyPath()

    def __init__(self, directory: Path, base_offset: int, fd: int, size: int, *, txn_index: bool = False) -> None:
        self.directory = directory
        self.base_offset = base_offset
        self._fd = fd  # -1 while closed for idleness (or not opened yet): see `fd`
        self._used = True  # touched since the open-files clock last passed (storage.open_files)
        # The partition's lock (set when the log takes the segment in): holding it keeps the
        # descriptor from being closed for idleness; None: never closed that way.
        self.owner: threading.RLock | None = None
        self.size = size  # committed bytes
        # Paths as strings, made Paths when first read (LazyPath): pathlib's joins were the
        # largest single cost of opening 100 000 logs at start-up.
        stem = f"{directory}/{segment_name(base_offset)}"
        self.log_path = stem + LOG_SUFFIX
        self.offset_index = OffsetIndex(stem + INDEX_SUFFIX, base_offset)
        self.time_index = TimeIndex(stem + TIMEINDEX_SUFFIX, base_offset)
        # ``txn_index``: a .txnindex file exists (loaded when first asked for).
        self.txn_index = TransactionIndex(stem + TXNINDEX_SUFFIX, base_offset, exists=txn_index)
        self.indexes_loaded = False
        # Known exactly for scanned/appended segments, None for segments opened from their
        # indexes after a clean shutdown until something needs it.
        self.next_offset: int | None = base_offset if size == 0 else None
        self.max_timestamp = -1
        self.offset_of_max_timestamp = -1
        self.first_batch_max_timestamp = -1
        self.created_ms = 0  # when it started taking appends (drives segment.ms)
        # Offsets are stored relative to base_offset in 32 bits: the last one allowed here.
        self.last_offset_allowed = base_offset + INT32_MAX
        # Set once the offset index reached segment.index.bytes: the next append rolls.
        self.index_full = False
        self.bytes_since_index = 0
        # The max timestamp may have grown since the last time index entry: the append path
        # checks the time index only then (True whenever unsure).
        self.time_index_behind = True
        # offset -> position of recent batch boundaries (appended batches, where reads
        # stopped): a consumer's next fetch offset is almost always one, so locating it
        # skips the index lookup and the header walk. Advisory: checked before use,
        # cleared on truncation, bounded by BOUNDARY_HINTS.
        self.boundaries: dict[int, int] = {}
        self.dirty = False  # holds writes not yet fsynced
        self.mtime_ns = 0  # the .log's mtime when opened from disk (recovery compares it)
        # The file has disk blocks reserved (storage.files.reserve_blocks) up to here, as
        # far as this process knows; given back when the segment stops taking appends.
        self.reserved = size
        self._lock = threading.Lock()
        self._pins = 0
        self._retired_at: float | None = None  # monotonic deadline once retired
        self._closed = False
        # (st_dev, st_ino) of this segment's .log: reopened by path after an idle close, the
        # path may by then hold another file (compaction swaps a cleaned .log onto it, a full
        # truncation recreates one at the same offset), which must not be read as this one.
        self._file_id: tuple[int, int] | None = None

    def __repr__(self) -> str:
        return f"<LogSegment {self.log_path} size={self.size}>"

    @property
    def fd(self) -> int:
        """The .log's descriptor, reopened if it was closed for idleness. Only for a caller
        holding the partition lock (`owner`) or a pin, which keep it from being closed
        again while in use; raises TooManyOpenFiles when no descriptor is to be had."""
        fd = self._fd
        if fd < 0:
            fd = self._reopen()
        self._used = True
        return fd

    def _reopen(self) -> int:
        with self._lock:
            if self._fd < 0:
                if self._closed:
                    raise OSError(errno.EBADF, f"{self.log_path} is closed")
                self._fd = self._open_own_file()
            return self._fd

    def _open_own_file(self) -> int:
        """Reopen the .log by path (under self._lock); FileNotFoundError when the path is
        gone or now holds another file than the one this segment was made from."""
        fd = OPEN_FILES.open(self, os.O_RDWR)
        st = os.fstat(fd)
        if self._file_id is not None and (st.st_dev, st.st_ino) != self._file_id:
            OPEN_FILES.forget(self)
            os.close(fd)
            raise FileNotFoundError(errno.ENOENT, f"{self.log_path} was replaced while closed for idleness")
        return fd

    @property
    def is_open(self) -> bool:
        """Whether the .log holds a descriptor now (False while closed for idleness)."""
        return self._fd >= 0

    def close_if_idle(self) -> bool:
        """Close the descriptor for idleness if nobody can be using it (see
        storage.open_files; called by it, never blocking). True when it is closed."""
        owner = self.owner
        if owner is None or owner._is_owned() or not owner.acquire(blocking=False):
            return False
        try:
            if not self._lock.acquire(blocking=False):
                return False
            try:
                if self._pins or self._closed:
                    return self._closed
                fd, self._fd = self._fd, -1
            finally:
                self._lock.release()
        finally:
            owner.release()
        if fd >= 0:
            try:
                os.close(fd)
            except OSError:
                pass
        return True

    # -- files ---------------------------------------------------------------------------

    @classmethod
    def create(cls, directory: Path, base_offset: int, now_ms: int) -> "LogSegment":
        segment = cls(directory, base_offset, -1, 0)
        segment._fd = OPEN_FILES.open(segment, os.O_RDWR | os.O_CREAT | os.O_TRUNC)
        st = os.fstat(segment._fd)
        segment._file_id = (st.st_dev, st.st_ino)
        for index in (segment.offset_index, segment.time_index):
            index.delete_file()
        unlink_quietly(segment.txn_index.path)  # a leftover of an older segment at this offset
        segment.indexes_loaded = True
        segment.next_offset = base_offset
        segment.created_ms = now_ms
        return segment

    @classmethod
    def open_existing(cls, directory: Path, base_offset: int, *, txn_index: bool | None = None) -> "LogSegment":
        """``txn_index``: whether a .txnindex file exists, if the caller knows (None: look)."""
        name = segment_name(base_offset)
        st = os.stat(f"{directory}/{name}{LOG_SUFFIX}")  # opened when first used
        if txn_index is None:
            txn_index = os.path.exists(directory / (name + TXNINDEX_SUFFIX))
        segment = cls(directory, base_offset, -1, st.st_size, txn_index=txn_index)
        segment.mtime_ns = st.st_mtime_ns
        segment._file_id = (st.st_dev, st.st_ino)
        return segment

    @property
    def index_entries(self) -> int:
        return len(self.offset_index)

    def add_index_entry(self, last_offset: int, position: int, max_timestamp: int) -> None:
        """One sparse entry in each index (Kafka's rule: every index.interval.bytes)."""
        self.offset_index.append(last_offset, position)
        self.time_index.maybe_append(max_timestamp, self.offset_of_max_timestamp)

    def time_index_entry(self) -> None:
        """TimeIndex.maybe_append of the segment's maximum (Kafka's maybeAppend takes the
        segment's, not the batch's), alongside an offset index entry."""
        self.time_index.maybe_append(self.max_timestamp, self.offset_of_max_timestamp)

    # -- appending (one writer, under the partition lock) ---------------------------------

    def append(self, batch: bytearray, position: int, size: int, base_offset: int, last_offset: int,
               max_timestamp: int, index_interval_bytes: int, index_event: int) -> bool:
        """Write one whole batch (offsets already patched) at the segment's end, then move
        its state: max timestamp, an index entry when more than index.interval.bytes were
        written since the last one, the committed size. Kafka's LogSegment.append.

        ``position`` is the segment's size and ``size`` the batch's, which the caller has
        at hand anyway. Returns True when the offset index's tail reached ``index_event``
        entries (the caller then merges and writes it, see `OffsetIndex`). A failed write is
        cut back and its OSError raised; nothing moved then.
        """
        boundaries = self.boundaries
        if len(boundaries) >= BOUNDARY_HINTS:
            boundaries.clear()
        fd = self._fd  # `fd` inlined (the hot path): reopened only if closed for idleness
        if fd < 0:
            fd = self._reopen()
        self._used = True
        try:
            written = _pwrite(fd, batch, position)
            if written != size:
                _pwrite_rest(fd, batch, position, written)
        except OSError:
            self.cut_back(position)
            raise
        # Written: now the indexes, the size and the next offset move.
        if max_timestamp > self.max_timestamp:
            self.max_timestamp = max_timestamp
            self.offset_of_max_timestamp = last_offset
            self.time_index_behind = True
        since = self.bytes_since_index
        due = False
        if since <= index_interval_bytes:
            self.bytes_since_index = since + size
        else:
            # OffsetIndex.append, inlined: values before keys, as readers on other threads
            # expect. (The tail lists are replaced on every merge.)
            tail_keys, tail_values = self.offset_index._tail
            tail_values.append(position)
            tail_keys.append(last_offset)
            due = len(tail_keys) >= index_event
            if self.time_index_behind:
                self.time_index_behind = False
                self.time_index_entry()
            self.bytes_since_index = size
        boundaries[base_offset] = position  # the batch starts here; a tailing read asks for it
        self.size = position + size
        self.next_offset = last_offset + 1
        return due

    def append_batches(self, data: bytearray, spans: list[tuple[int, int, int, int]], base_offset: int,
                       index_interval_bytes: int, max_index_entries: int, append_time_ms: int = -1) -> int:
        """`append` for a buffer of several batches (offsets patched): one pwrite, then the
        per-batch index rule. ``spans``: (position in ``data``, size, lastOffsetDelta,
        maxTimestamp) per batch; ``append_time_ms`` >= 0 replaces every max timestamp
        (LogAppendTime). Sets `index_full` when the index reached ``max_index_entries``.
        Returns the next offset."""
        position = self.size
        try:
            written = os.pwrite(self.fd, data, position)
            if written != len(data):
                _pwrite_rest(self.fd, data, position, written)
        except OSError:
            self.cut_back(position)
            raise
        since = self.bytes_since_index
        top = self.max_timestamp
        offset = base_offset
        if position == 0:
            self.first_batch_max_timestamp = append_time_ms if append_time_ms >= 0 else spans[0][3]
        for p, size, lod, max_ts in spans:
            last = offset + lod
            if append_time_ms >= 0:
                max_ts = append_time_ms
            if max_ts > top:
                top = max_ts
                self.offset_of_max_timestamp = last
            if since > index_interval_bytes:
                self.add_index_entry(last, position + p, top)
                if self.index_entries >= max_index_entries:
                    self.index_full = True
                since = 0
            since += size
            offset = last + 1
        self.bytes_since_index = since
        self.max_timestamp = top
        self.time_index_behind = True
        boundaries = self.boundaries
        if len(boundaries) >= BOUNDARY_HINTS:
            boundaries.clear()
        boundaries[base_offset] = position  # the batches start here; a tailing read asks for it
        self.size = position + len(data)
        self.next_offset = offset
        return offset

    def cut_back(self, position: int) -> None:
        """Undo a failed write: the file goes back to ``position`` (freeing reserved blocks)."""
        self.reserved = position
        try:
            os.ftruncate(self.fd, position)
        except OSError as exc:  # pragma: no cover - shrinking needs no space
            log.error("%s: could not cut back a failed write: %s", self.log_path, exc)

    # -- truncation -------------------------------------------------------------------------

    def cut_point(self, offset: int, start: int = 0) -> tuple[int, int]:
        """(position, base offset) of the first batch holding an offset >= ``offset``,
        walking from ``start`` (a batch boundary); (size, ``offset``) if there is none."""
        for at, _size, (base, _length, lod) in walk(self.fd, start, self.size):
            if base + lod >= offset:
                return at, base
        return self.size, offset

    def truncate_to(self, offset: int, start: int = 0) -> int:
        """Remove every batch holding an offset >= ``offset`` (whole batches), with the
        index entries past the cut, and recompute the append state. Kafka's
        LogSegment.truncateTo. ``start``: a batch boundary at or before the cut to walk
        from. Returns the segment's new next offset."""
        position, new_end = self.cut_point(offset, start)
        self.boundaries.clear()
        os.ftruncate(self.fd, position)
        os.fsync(self.fd)
        self.reserved = position  # the cut freed any reserved blocks
        self.size = position
        self.next_offset = new_end
        self.offset_index.truncate_to_position(position)
        self.time_index.truncate_to_offset(new_end)
        self.txn_index.truncate_to(new_end)  # the ABORT markers cut with the batches
        self.reset_append_state()
        return new_end

    def reset_append_state(self) -> None:
        """Recompute what appends track for a segment that becomes (or stays) active after a
        cut: max timestamp, bytes since the last index entry, and no final time entry."""
        max_ts, max_off, first_ts, since = -1, -1, -1, 0
        last_indexed = self.offset_index.last_entry
        for n, header in enumerate(walk_headers(self.fd, 0, self.size)):
            if n == 0:
                first_ts = header.max_timestamp
            if header.max_timestamp > max_ts:
                max_ts, max_off = header.max_timestamp, header.last_offset
            if last_indexed is not None and header.position == last_indexed[1]:
                since = 0
            since += header.size
        self.max_timestamp, self.offset_of_max_timestamp = max_ts, max_off
        self.first_batch_max_timestamp = first_ts
        self.bytes_since_index = since if last_indexed is not None else self.size
        entries = [e for e in zip(self.time_index.keys, self.time_index.values) if e[1] <= max_off and e[0] <= max_ts]
        self.time_index.set_entries(entries, in_file=False)
        self.time_index_behind = True

    # -- reading (any thread, no lock: pin first) ---------------------------------------------

    def first_batch(self, offset: int, end: int) -> tuple[int, int, int] | None:
        """(position, size, base offset) of the first batch before ``end`` holding offsets
        >= ``offset``; None if there is none. Raises IndexMismatch."""
        fd = self.fd
        hinted = self.boundaries.get(offset)
        if hinted is not None and hinted < end:
            for at, size, (base, _length, _lod) in walk(fd, hinted, end, OFFSET_FIELDS, LOCATE_WINDOW):
                if base == offset:
                    return at, size, base
                break
        key, position = self.offset_index.lookup(offset) if offset > self.base_offset else (-1, 0)
        for at, size, (base, _length, lod) in walk(fd, position, end, OFFSET_FIELDS, LOCATE_WINDOW):
            if key >= 0:
                if at != position or base + lod != key:
                    raise IndexMismatch(self)
                key = -1
            if base + lod >= offset:
                return at, size, base
        if key >= 0:
            raise IndexMismatch(self)  # the indexed position holds no batch
        return None

    def read_end(self, max_offset: int | None) -> int:
        """Where reads bounded by ``max_offset`` stop: the position of the first batch whose
        base offset is at or past it (Kafka's maxPosition; batches are never split), or the
        committed size when no batch of this segment reaches the bound. Raises
        IndexMismatch."""
        end = self.size
        if max_offset is None:
            return end
        next_offset = self.next_offset
        if next_offset is not None and max_offset >= next_offset:
            return end
        found = self.first_batch(max_offset, end)
        if found is None:
            return end
        position, size, base = found
        return position if base >= max_offset else position + size

    def locate(self, offset: int, max_bytes: int, end: int, min_one_batch: bool = True) -> tuple[int, int] | None:
        """(position, length) of whole batches before ``end`` from the one holding
        ``offset``, up to ``max_bytes`` but at least the first batch if ``min_one_batch``
        (else length 0 when it does not fit); None if no batch holds offsets >= ``offset``.
        Kafka's LogSegment.read, as a location. Raises IndexMismatch."""
        first = self.first_batch(offset, end)
        if first is None:
            return None
        start, first_size, _base = first
        if first_size > max_bytes and not min_one_batch:
            return start, 0
        limit = min(end, start + max(max_bytes, first_size))
        stop = start + first_size
        if stop < limit:
            # An indexed position is a batch boundary: everything before it is whole.
            key, indexed = self.offset_index.entry_at_or_before_position(limit)
            if stop < indexed < end:  # (a batch at `end` itself is past a max_offset bound)
                stop = indexed
            else:
                key = -1
            for at, size, (base, _length, lod) in walk(self.fd, stop, end, OFFSET_FIELDS, LOCATE_WINDOW):
                if key >= 0:
                    if base + lod != key:
                        raise IndexMismatch(self)
                    key = -1
                if at + size > limit:
                    self.hint(base, at)  # the next read of this consumer starts here
                    break
                stop = at + size
            if key >= 0:
                raise IndexMismatch(self)
        return start, stop - start

    def read(self, offset: int, max_bytes: int, end: int, min_one_batch: bool = True) -> bytes | memoryview | None:
        """Whole batches before ``end`` from the one holding ``offset``, as `locate` chooses
        them (b"" when the first does not fit without ``min_one_batch``); None if no batch
        holds offsets >= ``offset``. Kafka's LogSegment.read. One pread of everything that
        may fit, trimmed in memory to whole batches: sequential I/O the kernel reads ahead
        for, and no copy (a memoryview slice). Raises IndexMismatch."""
        first = self.first_batch(offset, end)
        if first is None:
            return None
        start, first_size, _base = first
        if first_size > max_bytes and not min_one_batch:
            return b""
        data = read_exact(self.fd, min(end, start + max(max_bytes, first_size)) - start, start)
        stop = self.trim(data, start, first_size)
        return data if stop == len(data) else memoryview(data)[:stop]

    def trim(self, data: bytes, start: int, first_size: int) -> int:
        """Length of the whole batches at the front of ``data`` (read from ``start``)."""
        n = len(data)
        stop = first_size
        if stop < n:
            key, indexed = self.offset_index.entry_at_or_before_position(start + n)
            rel = indexed - start
            if rel > stop and rel + HEADER_SIZE <= n:
                base, _length, lod = OFFSET_FIELDS.unpack_from(data, rel)
                if base + lod != key:
                    raise IndexMismatch(self)
                stop = rel
            unpack = _BASE_AND_LENGTH.unpack_from
            while stop + LOG_OVERHEAD <= n:
                base, length = unpack(data, stop)
                size = length + LOG_OVERHEAD
                if size < HEADER_SIZE or stop + size > n:
                    self.hint(base, start + stop)
                    break
                stop += size
        return stop

    def hint(self, base_offset: int, position: int) -> None:
        boundaries = self.boundaries
        if len(boundaries) >= BOUNDARY_HINTS:
            boundaries.clear()
        boundaries[base_offset] = position

    def mtime_ms(self) -> int:
        """The .log's mtime; a file closed for idleness is looked at by path, not reopened
        (retention asks this of every segment without timestamps on every pass)."""
        fd = self._fd
        try:
            return int((os.fstat(fd) if fd >= 0 else os.stat(self.log_path)).st_mtime * 1000)
        except OSError:
            return 0

    def largest_timestamp(self) -> int:
        """What retention.ms compares: the max record timestamp, or the file mtime if none."""
        return self.max_timestamp if self.max_timestamp >= 0 else self.mtime_ms()

    def sync(self) -> None:
        """fsync the log data and write out (and fsync) pending index entries."""
        if self.dirty:
            os.fdatasync(self.fd)
            self.dirty = False
        self.offset_index.sync()
        self.time_index.sync()
        self.txn_index.flush()

    def on_close_for_appends(self) -> None:
        """The segment stops being active: its time index gets the final maximum (Kafka does
        the same), and pending index entries reach the files."""
        if self.max_timestamp >= 0:
            self.time_index.maybe_append(self.max_timestamp, self.offset_of_max_timestamp)
        self.offset_index.flush_pending()
        self.time_index.flush_pending()
        self.release_reserved()

    def release_reserved(self) -> None:
        """Give back disk blocks reserved past the end (also ones a crash left behind: the
        file system, not `reserved`, is asked; a few blocks of extent metadata are not worth
        a truncate, which also moves the file's mtime)."""
        try:
            if blocks_past_end(self.fd) > 65536:
                os.ftruncate(self.fd, self.size)  # the size stays; blocks past it are freed
        except OSError as exc:
            log.warning("%s: could not release reserved blocks: %s", self.log_path, exc)
        self.reserved = self.size

    def delete_files(self) -> None:
        for path in (self.log_path, self.offset_index.path, self.time_index.path):
            try:
                os.unlink(path)
            except FileNotFoundError:
                pass
        self.txn_index.delete()

    # -- reader pinning and retirement ---------------------------------------------------

    def pin(self) -> bool:
        """Hold the descriptor open for a read (opening it if it was closed for idleness);
        False if the segment is already closed or its file gone. Raises TooManyOpenFiles."""
        with self._lock:
            if self._closed:
                return False
            if self._fd < 0:
                try:
                    self._fd = self._open_own_file()
                except FileNotFoundError:
                    return False  # deleted or replaced while closed for idleness: retired under us
            self._pins += 1
            self._used = True
            return True

    def unpin(self) -> None:
        with self._lock:
            self._pins -= 1
            close = self._pins == 0 and self._retired_at is not None and time.monotonic() >= self._retired_at
        if close:
            self.close_now_if_idle()
        elif OPEN_FILES.over_limit:
            OPEN_FILES.trim()  # readers kept files open past log.open.files.max: close idle ones

    def retire(self, delay_s: float) -> None:
        with self._lock:
            if self._retired_at is None:
                self._retired_at = time.monotonic() + delay_s

    def close_now_if_idle(self, now: float | None = None, *, force: bool = False) -> bool:
        """Close the descriptor if retired (or forced), past its deadline and unpinned."""
        with self._lock:
            if self._closed:
                return True
            if not force:
                if self._retired_at is None or self._pins:
                    return False
                if (now if now is not None else time.monotonic()) < self._retired_at:
                    return False
            self._closed = True
            fd, self._fd = self._fd, -1
        OPEN_FILES.forget(self)
        if fd >= 0:
            try:
                os.close(fd)
            except OSError:
                pass
        return True

    @property
    def closed(self) -> bool:
        return self._closed


class Graveyard:
    """Retired segments waiting for their readers and file.delete.delay.ms before closing."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._segments: list[LogSegment] = []

    def add(self, segment: LogSegment, delay_ms: int) -> None:
        segment.retire(delay_ms / 1000.0)
        if segment.close_now_if_idle():
            return
        with self._lock:
            self._segments.append(segment)

    def sweep(self) -> int:
        now = time.monotonic()
        with self._lock:
            waiting = self._segments
            self._segments = []
        keep = [s for s in waiting if not s.close_now_if_idle(now)]
        with self._lock:
            self._segments.extend(keep)
        return len(waiting) - len(keep)

    def close_all(self) -> None:
        with self._lock:
            waiting, self._segments = self._segments, []
        for segment in waiting:
            segment.close_now_if_idle(force=True)

    def __len__(self) -> int:
        return len(self._segments)


def iter_segment_batches(fd: int, position: int, end: int, chunk_size: int = 1024 * 1024):
    """Yield (position, batch bytes) for each whole batch from ``position`` up to ``end``.

    Reads ``chunk_size`` bytes at a time (more for a bigger batch) and slices batches out
    of the chunk; stops at a torn tail.
    """
    while position + HEADER_SIZE <= end:
        chunk = read_exact(fd, min(chunk_size, end - position), position)
        at = 0
        while at + LOG_OVERHEAD <= len(chunk):
            size = _LENGTH.unpack_from(chunk, at)[0] + LOG_OVERHEAD
            if size < HEADER_SIZE:
                return
            if at + size > len(chunk):
                if at == 0:  # a batch bigger than the chunk: read it whole
                    if position + size > end:
                        return
                    chunk = read_exact(fd, size, position)
                    if len(chunk) < size:
                        return
                    continue
                break
            yield position + at, chunk[at:at + size]
            at += size
        if at == 0:
            return
        position += at


def read_exact(fd: int, length: int, position: int) -> bytes:
    data = os.pread(fd, length, position)
    if len(data) == length:
        return data
    parts = [data]
    got = len(data)
    while got < length:
        more = os.pread(fd, length - got, position + got)
        if not more:
            break
        parts.append(more)
        got += len(more)
    return b"".join(parts)


_LENGTH = header_fields("length", whole=False)


def _pwrite_rest(fd: int, data: bytearray, position: int, written: int) -> None:
    """Finish a short pwrite (rare: a signal, a nearly full disk)."""
    view = memoryview(data)
    while written < len(data):
        more = os.pwrite(fd, view[written:], position + written)
        if more <= 0:  # pragma: no cover
            raise OSError(errno.EIO, "short write")
        written += more
