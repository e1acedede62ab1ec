"""The open segment descriptors of the process, bounded: Kafka keeps a file open per segment,
which 100 000 partitions cannot afford under a default `ulimit -n`; Trafka opens a segment's
.log when something first reads or writes it and closes it again when it has been idle
while others were needed (log.open.files.max). Index files hold no descriptor: their
entries live in memory (storage.index) and are written with a short open/write/close.

How this works: every open segment descriptor is registered here, oldest first. Opening one
more when `limit` are open first closes idle ones, by the CLOCK rule (an approximation of
LRU that costs the hot path one attribute store): a segment used since the last pass
(`LogSegment._used`) gets a second chance and goes to the back; one not used is closed if
it is idle. Idle means, checked without ever blocking (so two threads evicting cannot
deadlock): no reader has it pinned (`LogSegment.pin`, taken around every pread and held
by a Fetch's sendfile region), its segment lock is free, and its partition's lock
(`LogSegment.owner`, held by every writer: appends, truncation, flushes, retention) is
free and not held by the evicting thread itself, which may be in the middle of using
another segment of its partition. A segment without an owner (still being recovered) is
never closed here.

The operating system's limit (EMFILE, or ENFILE for the whole system) gets the same
treatment once more: close idle descriptors and retry the open once; if that fails too
the open raises `TooManyOpenFiles` (a StorageError: KAFKA_STORAGE_ERROR for the client)
with a log line, and the broker carries on.
"""

from __future__ import annotations

import errno
import logging
import os
import resource
import threading
from collections import OrderedDict
from typing import Protocol

from storage.errors import StorageError

log = logging.getLogger("storage")

_EXHAUSTED = (errno.EMFILE, errno.ENFILE)


class TooManyOpenFiles(StorageError):
    """The process (EMFILE) or the system (ENFILE) cannot open another file even after
    idle segment files were closed (KAFKA_STORAGE_ERROR)."""


def default_limit() -> int:
    """Half the soft RLIMIT_NOFILE (at least 64): the other half is for sockets, index and
    checkpoint writes and the rest of the process."""
    soft, _hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft == resource.RLIM_INFINITY:
        soft = 1 << 20
    return max(64, soft // 2)


class SegmentFile(Protocol):
    """What the registry uses of a segment (storage.segment.LogSegment, which sits above
    this module and registers itself here): the path of its .log, its CLOCK bit, and a
    close that never blocks and says whether it happened."""

    _used: bool

    @property
    def log_path(self) -> os.PathLike: ...

    def close_if_idle(self) -> bool: ...


class OpenFiles:
    """Registry and bound of open segment descriptors (see the module docstring)."""

    def __init__(self, limit: int | None = None) -> None:
        self._lock = threading.Lock()
        self._open: OrderedDict[SegmentFile, None] = OrderedDict()
        self.limit = default_limit() if limit is None else limit
        self.opened = 0  # descriptors opened (first opens and reopens)
        self.evicted = 0  # closed for idleness
        self.exhausted = 0  # opens that failed with TooManyOpenFiles

    def set_limit(self, limit: int | None) -> None:
        """``limit`` open segment files at most (None: half the soft RLIMIT_NOFILE)."""
        self.limit = default_limit() if limit is None else max(1, limit)
        with self._lock:
            self._evict(len(self._open) - self.limit)

    def __len__(self) -> int:
        return len(self._open)

    def statistics(self) -> dict[str, int]:
        return {"open": len(self._open), "limit": self.limit, "opened": self.opened,
                "evicted": self.evicted, "exhausted": self.exhausted}

    def open(self, segment: SegmentFile, flags: int, mode: int = 0o644) -> int:
        """Open ``segment``'s .log with ``flags`` and register it; makes room first."""
        with self._lock:
            over = len(self._open) + 1 - self.limit
            if over > 0:
                self._evict(over)
        fd = self.open_path(segment.log_path, flags, mode)
        with self._lock:
            self._open[segment] = None
            self.opened += 1
        return fd

    def open_path(self, path: os.PathLike | str, flags: int, mode: int = 0o644) -> int:
        """os.open, closing idle segment files and retrying once when the process or the
        system is out of descriptors; TooManyOpenFiles if that is not enough. Other
        OSErrors (ENOENT, ENOSPC, ...) pass through."""
        try:
            return os.open(path, flags, mode)
        except OSError as exc:
            if exc.errno not in _EXHAUSTED:
                raise
            first = exc
        with self._lock:
            freed = self._evict(max(16, len(self._open) // 8))
        try:
            return os.open(path, flags, mode)
        except OSError as exc:
            if exc.errno not in _EXHAUSTED:
                raise
            self.exhausted += 1
            log.error("cannot open %s: %s (%d segment files open, %d idle ones closed to retry)",
                      path, os.strerror(first.errno), len(self._open), freed)
            raise TooManyOpenFiles(f"cannot open {os.fspath(path)}: {os.strerror(exc.errno)}") from exc

    @property
    def over_limit(self) -> bool:
        """More files are open than the limit (readers held them while others opened)."""
        return len(self._open) > self.limit

    def trim(self) -> int:
        """Close idle files until at most the limit are open (as far as they are idle)."""
        with self._lock:
            return self._evict(len(self._open) - self.limit)

    def forget(self, segment: SegmentFile) -> None:
        """``segment``'s descriptor was closed by its owner (retired, deleted)."""
        with self._lock:
            self._open.pop(segment, None)

    def evict_idle(self, count: int) -> int:
        """Close up to ``count`` idle segment files now; returns how many were closed."""
        with self._lock:
            return self._evict(count)

    def _evict(self, count: int) -> int:
        """Close up to ``count`` idle descriptors (under self._lock), CLOCK order."""
        closed = 0
        budget = 2 * len(self._open)
        entries = self._open
        while closed < count and budget > 0 and entries:
            budget -= 1
            segment, _ = entries.popitem(last=False)
            if segment._used:
                segment._used = False
                entries[segment] = None
                continue
            if segment.close_if_idle():
                closed += 1
                self.evicted += 1
            else:
                entries[segment] = None
        return closed


OPEN_FILES = OpenFiles()
"""The process's registry: descriptors are a process-wide resource, so one bound for every
LogManager of the process (LogManager sets its limit from log.open.files.max)."""
