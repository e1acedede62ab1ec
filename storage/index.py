"""Sparse indexes of one segment: offset -> file position, and timestamp -> offset.

How this works: the authoritative data is the .log; an index only saves a scan. Entries
are kept in memory in two parallel `array('q')` columns that `bisect` searches. New entries
go first to a tail of two lists (list.append costs a quarter of array.append, and an offset
index entry is added on nearly every append of a large batch); every FLUSH_PENDING_AT
entries, and on flush, roll, close or truncation, the tail is merged into the columns and
written to the index file in one block.
An index file that is missing, has a ragged size, is not monotonic or points past the end
of its log is rebuilt from the log (see `storage.recovery`). Readers on other threads may
search while the one writer appends: the writer appends the value before the key, extends
the columns with the tail before it replaces the tail with empty lists, and replaces (never
shrinks in place) the columns when it truncates, so a reader that takes the columns and
then the tail never misses an entry or sees a key without its value (it may see an entry
twice, which changes no answer).
"""

from __future__ import annotations

import os
import struct
from array import array
from bisect import bisect_left, bisect_right
from pathlib import Path

from storage.files import LazyPath, atomic_write, pwrite_all, unlink_quietly
from storage.open_files import OPEN_FILES, TooManyOpenFiles

FLUSH_PENDING_AT = 512  # entries


class _SparseIndex:
    """Common machinery: sorted keys, their values, a file of fixed-size big-endian entries."""

    ENTRY: struct.Struct
    path = LazyPath()

    def __init__(self, path: str | Path, base_offset: int) -> None:
        self.path = path
        self.base_offset = base_offset
        # (keys, values): appended in place (values first), replaced whole on truncation,
        # so a reader that takes the pair once sees a consistent prefix.
        self._cols: tuple[array, array] = (array("q"), array("q"))
        # (keys, values) appended since the last merge into _cols, at most FLUSH_PENDING_AT.
        self._tail: tuple[list[int], list[int]] = ([], [])
        self._written = 0  # entries of _cols present in the file

    def __len__(self) -> int:
        return len(self._cols[0]) + len(self._tail[0])

    @property
    def keys(self) -> array:
        """All keys (a copy while the tail holds entries)."""
        keys = self._cols[0]
        tail = self._tail[0]
        return keys + array("q", tail) if tail else keys

    @property
    def values(self) -> array:
        """All values, as many as there are keys (a copy while the tail holds entries)."""
        values = self._cols[1]
        tail_keys, tail_values = self._tail
        return values + array("q", tail_values[:len(tail_keys)]) if tail_keys else values

    # -- file I/O ------------------------------------------------------------------------

    def _encode(self, key: int, value: int) -> bytes:
        raise NotImplementedError

    def _encode_range(self, start: int, end: int) -> bytes:
        """Entries [start, end) as file bytes, with one struct.pack for the lot: flushes run
        every FLUSH_PENDING_AT appends, and a pack per entry was most of an append's cost."""
        raise NotImplementedError

    def _decode(self, raw: tuple[int, int]) -> tuple[int, int]:
        raise NotImplementedError

    def read_file(self) -> list[tuple[int, int]] | None:
        """Entries stored in the file, or None when it is missing or has a ragged size."""
        try:
            data = self.path.read_bytes()
        except FileNotFoundError:
            return None
        if len(data) % self.ENTRY.size:
            return None
        return [self._decode(raw) for raw in self.ENTRY.iter_unpack(data)]

    def set_entries(self, entries: list[tuple[int, int]], *, in_file: bool) -> None:
        """Replace the in-memory entries; ``in_file`` says whether the file already holds them."""
        self._cols = (array("q", [k for k, _ in entries]), array("q", [v for _, v in entries]))
        self._tail = ([], [])
        self._written = len(entries) if in_file else 0
        if not in_file:
            self.rewrite()

    def rewrite(self) -> None:
        """Write the whole index from memory, replacing the file atomically (not fsynced)."""
        self._merge()
        count = len(self._cols[0])
        atomic_write(self.path, self._encode_range(0, count), durable=False)
        self._written = count

    def _merge(self) -> None:
        """Move the tail into the columns (the writer only): extend first, then replace the
        tail, so a concurrent reader sees every entry at least once."""
        tail_keys, tail_values = self._tail
        if tail_keys:
            keys, values = self._cols
            values.extend(tail_values)
            keys.extend(tail_keys)
            self._tail = ([], [])

    def flush_pending(self) -> None:
        """Append entries not yet in the file."""
        self._merge()
        keys, values = self._cols
        written = self._written
        count = len(keys)
        if count <= written:
            return
        data = self._encode_range(written, count)
        # Opened per write, not held (storage.open_files): an out-of-descriptors open closes
        # idle segment files and retries. If even that fails the entries stay pending in
        # memory (the file only saves a scan): this runs in the middle of appends, after
        # the batch was written, where raising would leave the log half moved.
        try:
            fd = OPEN_FILES.open_path(self.path, os.O_WRONLY | os.O_CREAT, 0o644)
        except TooManyOpenFiles:
            return
        try:
            pwrite_all(fd, data, written * self.ENTRY.size)
        finally:
            os.close(fd)
        self._written = count

    def sync(self) -> None:
        self.flush_pending()
        try:
            fd = OPEN_FILES.open_path(self.path, os.O_RDONLY)
        except FileNotFoundError:
            return
        try:
            os.fsync(fd)
        finally:
            os.close(fd)

    def delete_file(self) -> None:
        unlink_quietly(self.path)

    @property
    def last_entry(self) -> tuple[int, int] | None:
        """The newest (key, value), or None when empty."""
        keys, values = self._cols
        tail_keys, tail_values = self._tail
        if tail_keys:
            i = len(tail_keys) - 1
            return tail_keys[i], tail_values[i]
        if not keys:
            return None
        return keys[-1], values[-1]

    # -- mutation ------------------------------------------------------------------------

    def _add(self, key: int, value: int) -> None:
        keys, values = self._tail
        values.append(value)
        keys.append(key)
        if len(keys) >= FLUSH_PENDING_AT:
            self.flush_pending()

    def _truncate_values_from(self, value: int) -> None:
        """Drop the entries whose value is >= ``value`` (values increase with the keys)."""
        self.flush_pending()
        keys, values = self._cols
        count = bisect_left(values, value)
        if count >= len(keys):
            return
        self._cols = (keys[:count], values[:count])
        if self._written > count:
            try:
                os.truncate(self.path, count * self.ENTRY.size)
            except FileNotFoundError:
                pass
            self._written = count


class OffsetIndex(_SparseIndex):
    """`{base:020d}.index`: where in the .log to start looking for an offset.

    File format (Kafka's): 8-byte entries, big-endian::

        int32 relative_offset   last offset of an indexed batch - segment base offset
        int32 position          byte position of that batch in the .log

    Both columns strictly increase. An entry is added when more than index.interval.bytes
    were appended since the previous one, so the first batch of a segment (position 0) is
    implied rather than stored. Lookup of offset O: the entry with the largest offset <= O
    gives a position at or before the batch holding O; the rest is a short forward scan.
    """

    ENTRY = struct.Struct(">ii")

    def _encode(self, key: int, value: int) -> bytes:
        return self.ENTRY.pack(key - self.base_offset, value)

    def _encode_range(self, start: int, end: int) -> bytes:
        keys, values = self._cols
        base = self.base_offset
        flat = [0] * (2 * (end - start))
        flat[0::2] = [k - base for k in keys[start:end]]
        flat[1::2] = values[start:end]
        return struct.pack(f">{len(flat)}i", *flat)

    def _decode(self, raw: tuple[int, int]) -> tuple[int, int]:
        return raw[0] + self.base_offset, raw[1]

    @staticmethod
    def valid(entries: list[tuple[int, int]], base_offset: int, log_size: int) -> bool:
        prev_offset, prev_pos = base_offset - 1, -1
        for offset, pos in entries:
            if offset <= prev_offset or pos <= prev_pos:
                return False
            prev_offset, prev_pos = offset, pos
        return prev_pos < log_size

    def append(self, last_offset: int, position: int) -> None:
        self._add(last_offset, position)

    def lookup(self, offset: int) -> tuple[int, int]:
        """(last offset, position) of the last indexed batch whose last offset is <= ``offset``;
        (-1, 0) if none: start at the beginning of the segment."""
        keys, values = self._cols
        tail_keys, tail_values = self._tail
        if tail_keys and tail_keys[0] <= offset:
            i = bisect_right(tail_keys, offset) - 1
            return tail_keys[i], tail_values[i]
        i = bisect_right(keys, offset) - 1
        if i < 0:
            return -1, 0
        return keys[i], values[i]

    def entry_at_or_before_position(self, position: int) -> tuple[int, int]:
        """(last offset, position) of the indexed batch starting last at or before
        ``position``; (-1, 0) if none. The position is a batch boundary."""
        keys, values = self._cols
        tail_keys, tail_values = self._tail
        count = len(tail_keys)
        if count and tail_values[0] <= position:
            i = bisect_right(tail_values, position, 0, count) - 1
            return tail_keys[i], tail_values[i]
        i = bisect_right(values, position, 0, len(keys)) - 1
        if i < 0:
            return -1, 0
        return keys[i], values[i]

    def truncate_to_position(self, position: int) -> None:
        """Drop entries for batches at or after ``position`` (the log is being cut there)."""
        self._truncate_values_from(position)


class TimeIndex(_SparseIndex):
    """`{base:020d}.timeindex`: the first offset worth scanning for a timestamp.

    File format (Kafka's): 12-byte entries, big-endian::

        int64 timestamp         largest batch max timestamp seen so far in the segment
        int32 relative_offset   last offset of the batch where that maximum was first reached

    Entries are added alongside offset index entries when the maximum grew, and once more
    when the segment is closed, so the last entry is the segment's largest timestamp.
    Lookup of T: the entry with the largest timestamp <= T names an offset before which no
    batch has a timestamp >= T.
    """

    ENTRY = struct.Struct(">qi")

    def _encode(self, key: int, value: int) -> bytes:
        return self.ENTRY.pack(key, value - self.base_offset)

    def _encode_range(self, start: int, end: int) -> bytes:
        keys, values = self._cols
        base = self.base_offset
        flat = [0] * (2 * (end - start))
        flat[0::2] = keys[start:end]
        flat[1::2] = [v - base for v in values[start:end]]
        return struct.pack(">" + "qi" * (end - start), *flat)

    def _decode(self, raw: tuple[int, int]) -> tuple[int, int]:
        return raw[0], raw[1] + self.base_offset

    @staticmethod
    def valid(entries: list[tuple[int, int]], base_offset: int, next_offset: int | None = None) -> bool:
        prev_ts, prev_offset = -(1 << 63), base_offset
        for ts, offset in entries:
            if ts < prev_ts or offset < prev_offset:
                return False
            prev_ts, prev_offset = ts, offset
        return next_offset is None or prev_offset < max(next_offset, base_offset + 1)

    def maybe_append(self, timestamp: int, offset: int) -> None:
        """Add (timestamp, offset) if it raises the maximum (Kafka's maybeAppend)."""
        last = self.last_entry
        if last is not None and (timestamp <= last[0] or offset < last[1]):
            return
        self._add(timestamp, offset)

    def lookup(self, timestamp: int) -> int:
        """Offset to start scanning from for the first batch with max timestamp >= ``timestamp``."""
        keys, values = self._cols
        tail_keys, tail_values = self._tail
        if tail_keys and tail_keys[0] <= timestamp:
            return tail_values[bisect_right(tail_keys, timestamp) - 1]
        i = bisect_right(keys, timestamp) - 1
        if i < 0:
            return self.base_offset
        return values[i]

    def truncate_to_offset(self, offset: int) -> None:
        """Drop entries naming offsets >= ``offset``."""
        self._truncate_values_from(offset)
