"""A segment's transaction index: the aborted transactions whose ABORT marker it holds.

File format (Kafka's `.txnindex`, `{base:020d}.txnindex` beside the segment's `.log`):
entries of 34 bytes back to back, big-endian, no header::

    version           int16   0
    producerId        int64
    firstOffset       int64   the transaction's first offset in this partition
    lastOffset        int64   the offset of its ABORT marker
    lastStableOffset  int64   the partition's last stable offset once it ended

Entries are in marker order, so lastOffset increases. A read_committed fetch asks which
aborted transactions overlap the range it returns (`collect`, Kafka's
collectAbortedTxns) and the consumer drops their records.

How this works: most segments never hold an ABORT marker, so the file is created on the
first `append` and a segment without one costs nothing. Entries are few (one per aborted
transaction): they are kept in memory, loaded from the file the first time they are asked
for. One writer (under the partition lock) appends and truncates; readers on other threads
take `entries` without a lock: appends extend the list in place (a reader sees a prefix)
and truncation replaces it. A file whose size is not a multiple of 34 bytes (a torn
append) is cut to its whole entries. A crash may also leave entries whose markers did not
reach the log; recovery cuts those (`truncate_to` the recovered end).
"""

from __future__ import annotations

import logging
import os
import struct
import threading
from dataclasses import dataclass
from pathlib import Path

from storage.files import LazyPath, fsync_dir, pwrite_all, unlink_quietly

log = logging.getLogger("storage")

TXNINDEX_SUFFIX = ".txnindex"
VERSION = 0
ENTRY = struct.Struct(">hqqqq")
ENTRY_SIZE = ENTRY.size  # 34
assert ENTRY_SIZE == 34


@dataclass(frozen=True, slots=True)
class AbortedTxn:
    """One aborted transaction (Kafka's AbortedTxn).

    ``last_offset`` is the offset of the ABORT marker. ``last_stable_offset`` is Kafka's:
    the first offset of the oldest transaction still ongoing once this one ended (the
    offset after the marker when none is). Lookups rely on it: an entry whose
    last_stable_offset reaches a fetch's upper bound ends the search, since every later
    transaction starts at or after it.
    """

    producer_id: int
    first_offset: int
    last_offset: int
    last_stable_offset: int

    def to_bytes(self) -> bytes:
        return ENTRY.pack(VERSION, self.producer_id, self.first_offset, self.last_offset, self.last_stable_offset)


def collect_into(entries, fetch_offset: int, upper_bound: int, out: list[AbortedTxn]) -> bool:
    """Append to ``out`` the entries overlapping [fetch_offset, upper_bound): lastOffset >=
    fetch_offset and firstOffset < upper_bound. True when the search is complete (an entry's
    lastStableOffset reached ``upper_bound``: no later entry can overlap), as Kafka's
    TxnIndexSearchResult.isComplete."""
    for txn in entries:
        if txn.last_offset >= fetch_offset and txn.first_offset < upper_bound:
            out.append(txn)
        if txn.last_stable_offset >= upper_bound:
            return True
    return False


class TransactionIndex:
    """`{base:020d}.txnindex`: see the module docstring for the format.

    ``exists``: whether the file is known to be on disk (False for a new segment: nothing
    to load). The segment owns its index: deleted, renamed and fsynced with it.
    """

    path = LazyPath()

    def __init__(self, path: str | Path, base_offset: int, *, exists: bool = False) -> None:
        self.path = path
        self.base_offset = base_offset
        self.exists = exists
        # None until loaded; replaced (never shrunk in place) by truncation.
        self._entries: list[AbortedTxn] | None = None if exists else []
        self._lock = threading.Lock()
        self._dirty = False  # appended since the last fsync
        self._created = False  # the file was created since the last fsync (its directory entry too)

    def __repr__(self) -> str:
        return f"<TransactionIndex {self.path} entries={'?' if self._entries is None else len(self._entries)}>"

    def __len__(self) -> int:
        return len(self.entries)

    @property
    def entries(self) -> list[AbortedTxn]:
        """The entries, oldest first (the index's own list: do not modify)."""
        entries = self._entries
        if entries is None:
            with self._lock:
                entries = self._load()
        return entries

    def _load(self) -> list[AbortedTxn]:
        """Read the file (under the lock); the entries, cached."""
        if self._entries is not None:
            return self._entries
        try:
            data = self.path.read_bytes()
        except FileNotFoundError:
            self.exists = False
            self._entries = []
            return self._entries
        whole = len(data) - len(data) % ENTRY_SIZE
        entries = []
        for pos in range(0, whole, ENTRY_SIZE):
            version, producer_id, first, last, lso = ENTRY.unpack_from(data, pos)
            if version != VERSION or (entries and last <= entries[-1].last_offset):
                log.warning("%s: entry %d has version %d / lastOffset %d; the index is cut there",
                            self.path, pos // ENTRY_SIZE, version, last)
                whole = pos
                break
            entries.append(AbortedTxn(producer_id, first, last, lso))
        if whole != len(data):
            if whole == len(data) - len(data) % ENTRY_SIZE:
                log.warning("%s: %d bytes is not a whole number of %d-byte entries; cut to %d entries",
                            self.path, len(data), ENTRY_SIZE, len(entries))
            os.truncate(self.path, whole)
        self._entries = entries
        return entries

    # -- changes (one writer, under the partition lock) -------------------------------------

    def append(self, txn: AbortedTxn) -> None:
        """Add an entry at the end (creating the file); ValueError unless its lastOffset is
        above the last entry's (Kafka's rule: markers are appended in offset order)."""
        with self._lock:
            entries = self._load()
            if entries and txn.last_offset <= entries[-1].last_offset:
                raise ValueError(f"{self.path}: aborted transaction ending at {txn.last_offset} appended after "
                                 f"one ending at {entries[-1].last_offset}")
            fd = os.open(self.path, os.O_WRONLY | os.O_CREAT, 0o644)
            try:
                pwrite_all(fd, txn.to_bytes(), len(entries) * ENTRY_SIZE)
            finally:
                os.close(fd)
            if not self.exists:
                self.exists = True
                self._created = True
            self._dirty = True
            entries.append(txn)

    def set_entries(self, entries: list[AbortedTxn]) -> None:
        """Replace the file's content with ``entries`` (a cleaned segment's index); no file
        when there are none. Not fsynced: call `flush`."""
        with self._lock:
            if not entries:
                self._delete()
                return
            data = b"".join(txn.to_bytes() for txn in entries)
            fd = os.open(self.path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
            try:
                pwrite_all(fd, data, 0)
            finally:
                os.close(fd)
            self._created = self._created or not self.exists
            self.exists = True
            self._dirty = True
            self._entries = list(entries)

    def truncate_to(self, offset: int) -> int:
        """Drop the entries with lastOffset >= ``offset`` (Kafka's truncateTo); the file goes
        when none is left. Returns how many were dropped."""
        if not self.exists:
            return 0
        with self._lock:
            entries = self._load()
            keep = len(entries)
            while keep and entries[keep - 1].last_offset >= offset:
                keep -= 1
            dropped = len(entries) - keep
            if not keep:
                self._delete()
            elif dropped:
                os.truncate(self.path, keep * ENTRY_SIZE)
                self._entries = entries[:keep]
                self._dirty = True
            return dropped

    def delete(self) -> None:
        """Remove the file; the index is empty from now on."""
        with self._lock:
            self._delete()

    def _delete(self) -> None:
        if self.exists:
            unlink_quietly(self.path)
        self.exists = False
        self._entries = []
        self._dirty = self._created = False

    def rename(self, path: Path) -> None:
        """The file takes a new name (a swap's `.cleaned` -> its final name)."""
        with self._lock:
            if self.exists:
                os.replace(self.path, path)
            self.path = path

    def flush(self) -> None:
        """fsync the file (and, if it was just created, its directory entry)."""
        if not self._dirty:
            return
        with self._lock:
            if not self.exists:
                return
            fd = os.open(self.path, os.O_RDONLY)
            try:
                os.fsync(fd)
            finally:
                os.close(fd)
            if self._created:
                fsync_dir(self.path.parent)
                self._created = False
            self._dirty = False

    def collect(self, fetch_offset: int, upper_bound: int) -> list[AbortedTxn]:
        """The entries overlapping [fetch_offset, upper_bound) (see `collect_into`)."""
        out: list[AbortedTxn] = []
        if self.exists:
            collect_into(self.entries, fetch_offset, upper_bound, out)
        return out
