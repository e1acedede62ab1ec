"""One segment of a partition log: a `.log` file and its two sparse indexes.

How this works: a segment is appended to by one writer (the partition's append path, under
the partition lock) and read by any number of threads with `os.pread` on the shared file
descriptor, which has no file position to race on. `size` is the committed length: it grows
only after a write has completed, so a reader that snapshots it never sees a half-written
batch. When a segment leaves the log (retention, compaction, topic deletion) its descriptor
is not closed at once: readers pin a segment while they pread, and the `Graveyard` closes a
retired descriptor only when no reader holds it and `file.delete.delay.ms` has passed, which
also keeps descriptors handed out for `os.sendfile` (`PartitionLog.read_location`) valid.
"""

from __future__ import annotations

import logging
import os
import struct
import threading
import time
from dataclasses import dataclass
from pathlib import Path

from storage.files import blocks_past_end
from storage.index import OffsetIndex, TimeIndex
from wire.records import HEADER, HEADER_SIZE, LOG_OVERHEAD

log = logging.getLogger("storage")

INT32_MAX = (1 << 31) - 1

LOG_SUFFIX = ".log"
INDEX_SUFFIX = ".index"
TIMEINDEX_SUFFIX = ".timeindex"
CLEANED_SUFFIX = ".cleaned"
SWAP_SUFFIX = ".swap"

_WINDOW = 64 * 1024
BOUNDARY_HINTS = 64


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


def walk_headers(fd: int, position: int, end: int, window: int = _WINDOW):
    """Yield a `HeaderAt` for each batch from ``position`` up to ``end``, trusting lengths.

    Reads ``window`` bytes at a time and parses headers in memory, so walking many small
    batches costs one pread per window. Stops at the first header that does not fit before
    ``end`` (a torn tail) or declares a length below the header size.
    """
    buf = b""
    buf_start = position
    while position + HEADER_SIZE <= end:
        offset = position - buf_start
        if offset + HEADER_SIZE > len(buf):
            buf_start = position
            buf = os.pread(fd, min(window, end - position), position)
            offset = 0
            if len(buf) < HEADER_SIZE:
                return
        (base, length, _epoch, _magic, _crc, attributes, lod, _base_ts, max_ts, pid, _pe, _bs,
         count) = HEADER.unpack_from(buf, offset)
        size = length + LOG_OVERHEAD
        if size < HEADER_SIZE or position + size > end:
            return
        yield HeaderAt(position, base, size, attributes, lod, max_ts, pid, count)
        position += size


BATCH_PREFIX = struct.Struct(">qiibIhi")  # baseOffset .. lastOffsetDelta: the first 27 bytes
BATCH_PREFIX_SIZE = BATCH_PREFIX.size


def walk_offsets(fd: int, position: int, end: int, window: int = _WINDOW):
    """Like `walk_headers`, lighter: yield (position, base offset, size, last offset) tuples.

    For the read path, which only needs where batches are and which offsets they hold.
    """
    buf = b""
    buf_start = position
    unpack = BATCH_PREFIX.unpack_from
    while position + HEADER_SIZE <= end:
        offset = position - buf_start
        if offset + HEADER_SIZE > len(buf):
            buf_start = position
            buf = os.pread(fd, min(window, end - position), position)
            offset = 0
            if len(buf) < HEADER_SIZE:
                return
        base, length, _epoch, _magic, _crc, _attributes, lod = unpack(buf, offset)
        size = length + LOG_OVERHEAD
        if size < HEADER_SIZE or position + size > end:
            return
        yield position, base, size, base + lod
        position += size


class LogSegment:
    """`{base:020d}.log` + `.index` + `.timeindex`, named by the first offset they may hold.

    File format of the .log: record batches (magic 2) back to back, byte for byte as a
    producer sent them and a consumer receives them, except for the two fields outside the
    CRC that the broker writes: baseOffset (assigned) and partitionLeaderEpoch (0). Offsets
    increase from batch to batch; they are contiguous except in segments the cleaner has
    compacted, where a batch keeps its baseOffset and lastOffsetDelta even when records
    (or whole batches) were removed. No other framing: the file size is the sum of batch
    sizes, and recovery finds batch boundaries from the batchLength fields.
    """

    def __init__(self, directory: Path, base_offset: int, fd: int, size: int) -> None:
        self.directory = directory
        self.base_offset = base_offset
        self.fd = fd
        self.size = size  # committed bytes
        name = segment_name(base_offset)
        self.log_path = directory / (name + LOG_SUFFIX)
        self.offset_index = OffsetIndex(directory / (name + INDEX_SUFFIX), base_offset)
        self.time_index = TimeIndex(directory / (name + TIMEINDEX_SUFFIX), base_offset)
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
        # The file has disk blocks reserved (storage.files.reserve_blocks) up to here, as
        # far as this process knows; given back when the segment stops taking appends.
        self.reserved = size
        self._lock = threading.Lock()
        self._pins = 0
        self._retired_at: float | None = None  # monotonic deadline once retired
        self._closed = False

    def __repr__(self) -> str:
        return f"<LogSegment {self.log_path} size={self.size}>"

    # -- files ---------------------------------------------------------------------------

    @classmethod
    def create(cls, directory: Path, base_offset: int, now_ms: int) -> "LogSegment":
        path = directory / (segment_name(base_offset) + LOG_SUFFIX)
        fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_TRUNC, 0o644)
        segment = cls(directory, base_offset, fd, 0)
        for index in (segment.offset_index, segment.time_index):
            index.delete_file()
        segment.indexes_loaded = True
        segment.next_offset = base_offset
        segment.created_ms = now_ms
        return segment

    @classmethod
    def open_existing(cls, directory: Path, base_offset: int) -> "LogSegment":
        path = directory / (segment_name(base_offset) + LOG_SUFFIX)
        fd = os.open(path, os.O_RDWR)
        size = os.fstat(fd).st_size
        return cls(directory, base_offset, fd, size)

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

    def mtime_ms(self) -> int:
        try:
            return int(os.fstat(self.fd).st_mtime * 1000)
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

    # -- reader pinning and retirement ---------------------------------------------------

    def pin(self) -> bool:
        """Hold the descriptor open for a read; False if it is already closed."""
        with self._lock:
            if self._closed:
                return False
            self._pins += 1
            return True

    def unpin(self) -> None:
        with self._lock:
            self._pins -= 1
            close = self._pins == 0 and self._retired_at is not None and time.monotonic() >= self._retired_at
        if close:
            self.close_now_if_idle()

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
            fd, self.fd = self.fd, -1
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
            size = _I32.unpack_from(chunk, at + 8)[0] + LOG_OVERHEAD
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


_I32 = struct.Struct(">i")
