"""Leader epochs of a partition: which epoch started at which offset (KIP-101, KIP-279).

File format of `leader-epoch-checkpoint` in the partition directory, byte for byte as
Kafka's LeaderEpochCheckpointFile writes it::

    0                      version
    2                      number of entries
    0 0                    "<epoch> <startOffset>", one line per epoch, oldest first
    3 120

Replaced atomically (storage.files.atomic_write) whenever `assign` adds an entry, before
any batch carrying the new epoch is written, so after a crash the file knows every epoch
the log holds (it may know more: truncations are written too, but a crash between a
truncation of the log and of the file leaves entries past the log end, which opening
trims again with `truncate_from_end`).

How the cache is used: the leader stamps each appended batch's partitionLeaderEpoch and
calls `assign(epoch, base_offset)` when the epoch is new; OffsetForLeaderEpoch answers
with `end_offset_for`; truncation (a follower's, or the log's) and the log start offset
moving (retention, DeleteRecords) cut entries with `truncate_from_end` /
`truncate_from_start`. Recovery takes a batch whose epoch the file does not know for
damage.
"""

from __future__ import annotations

import logging
import threading
from bisect import bisect_left, bisect_right
from pathlib import Path
from typing import NamedTuple

from storage.files import LazyPath, atomic_write, read_small_file

log = logging.getLogger("storage")

LEADER_EPOCH_CHECKPOINT = "leader-epoch-checkpoint"
CHECKPOINT_VERSION = 0
UNDEFINED_EPOCH = -1
UNDEFINED_EPOCH_OFFSET = -1


class EpochEntry(NamedTuple):
    epoch: int
    start_offset: int


class LeaderEpochCheckpointFile:
    """Reads and atomically replaces one `leader-epoch-checkpoint` file."""

    path = LazyPath()  # a str until read (start-up opens 100 000 of these)

    def __init__(self, path: str | Path) -> None:
        self.path = path

    def write(self, entries: list[EpochEntry]) -> None:
        lines = [str(CHECKPOINT_VERSION), str(len(entries))]
        lines += [f"{e.epoch} {e.start_offset}" for e in entries]
        atomic_write(self.path, ("\n".join(lines) + "\n").encode())

    def read(self) -> list[EpochEntry] | None:
        """The entries, or None when the file does not exist. A malformed file raises
        ValueError (Kafka fails the log load too: silently dropping epochs would let
        recovery cut valid data)."""
        try:
            text = read_small_file(self.path)
        except FileNotFoundError:
            return None
        lines = text.split("\n")
        if lines and lines[-1] == "":
            lines.pop()
        if len(lines) < 2 or int(lines[0]) != CHECKPOINT_VERSION:
            raise ValueError(f"{self.path}: unrecognised leader epoch checkpoint header {lines[:2]}")
        count = int(lines[1])
        if len(lines) != count + 2:
            raise ValueError(f"{self.path}: {count} entries declared, {len(lines) - 2} present")
        entries = []
        for line in lines[2:]:
            epoch, start = line.split(" ")
            entries.append(EpochEntry(int(epoch), int(start)))
        return entries


class LeaderEpochFileCache:
    """Epoch -> start offset, ordered by both, backed by a checkpoint file (or by nothing,
    for a throwaway copy when ``checkpoint`` is None).

    Thread-safety: mutations hold a lock; readers see an immutable snapshot (the two lists
    are replaced, never changed in place), like the log's segment view.
    """

    def __init__(self, checkpoint: LeaderEpochCheckpointFile | None, entries: list[EpochEntry] | None = None,
                 *, name: str = "") -> None:
        self.checkpoint = checkpoint
        self.name = name
        self._lock = threading.Lock()
        self._epochs: list[int] = []
        self._starts: list[int] = []
        for entry in entries or ():
            self._assign(EpochEntry(*entry))

    @classmethod
    def load(cls, directory: str | Path, *, name: str = "", exists: bool = True) -> "LeaderEpochFileCache":
        """``exists``: False when the caller's directory listing has no checkpoint file,
        so it is not looked for (one open() less per partition at start-up)."""
        directory = directory if isinstance(directory, Path) else Path(directory)
        checkpoint = LeaderEpochCheckpointFile(f"{directory}/{LEADER_EPOCH_CHECKPOINT}")
        return cls(checkpoint, checkpoint.read() if exists else None, name=name)

    @property
    def file_exists(self) -> bool:
        return self.checkpoint is not None and self.checkpoint.path.exists()

    # -- reading -----------------------------------------------------------------------

    def epoch_entries(self) -> list[EpochEntry]:
        epochs, starts = self._epochs, self._starts
        return [EpochEntry(e, s) for e, s in zip(epochs, starts)]

    def __len__(self) -> int:
        return len(self._epochs)

    @property
    def latest_epoch(self) -> int | None:
        epochs = self._epochs
        return epochs[-1] if epochs else None

    @property
    def earliest_entry(self) -> EpochEntry | None:
        epochs, starts = self._epochs, self._starts
        return EpochEntry(epochs[0], starts[0]) if epochs else None

    def epoch_for_offset(self, offset: int) -> int | None:
        """The epoch the batch at ``offset`` was written in, if the cache knows."""
        starts = self._starts
        i = bisect_right(starts, offset) - 1
        return self._epochs[i] if i >= 0 else None

    def end_offset_for(self, requested_epoch: int, log_end_offset: int) -> tuple[int, int]:
        """(epoch, end offset) for OffsetForLeaderEpoch, as Kafka's endOffsetFor.

        - UNDEFINED_EPOCH requested, or an epoch above every known one: (-1, -1);
        - the latest epoch: (it, log_end_offset), the leader still writes in it;
        - below the first known epoch: (requested_epoch, start of the first epoch) —
          the data of older epochs is gone, a follower truncates to the log start;
        - otherwise: (largest known epoch <= requested, start of the next higher epoch).
        """
        epochs, starts = self._epochs, self._starts
        if requested_epoch == UNDEFINED_EPOCH:
            return UNDEFINED_EPOCH, UNDEFINED_EPOCH_OFFSET
        if epochs and epochs[-1] == requested_epoch:
            return requested_epoch, log_end_offset
        higher = bisect_right(epochs, requested_epoch)
        if higher == len(epochs):
            return UNDEFINED_EPOCH, UNDEFINED_EPOCH_OFFSET
        if higher == 0:
            return requested_epoch, starts[0]
        return epochs[higher - 1], starts[higher]

    # -- changing ----------------------------------------------------------------------

    def assign(self, epoch: int, start_offset: int) -> bool:
        """Record that ``epoch`` starts at ``start_offset``; written to the file before this
        returns. As Kafka: the latest epoch again at the same or a later offset changes
        nothing; an entry that breaks monotonicity (an epoch or start offset at or above the
        new one) is removed first. True if the cache changed."""
        if epoch < 0 or start_offset < 0:
            raise ValueError(f"invalid leader epoch entry ({epoch}, {start_offset})")
        if not self._update_needed(epoch, start_offset):
            return False
        with self._lock:
            if not self._update_needed(epoch, start_offset):
                return False
            self._assign(EpochEntry(epoch, start_offset))
            self._write()
            return True

    def _update_needed(self, epoch: int, start_offset: int) -> bool:
        epochs = self._epochs
        return not epochs or epoch != epochs[-1] or start_offset < self._starts[-1]

    def _assign(self, entry: EpochEntry) -> None:
        epochs, starts = list(self._epochs), list(self._starts)
        removed = []
        while epochs and (epochs[-1] >= entry.epoch or starts[-1] >= entry.start_offset):
            removed.append(EpochEntry(epochs.pop(), starts.pop()))
        if len(removed) > 1 or (removed and removed[0].start_offset != entry.start_offset):
            log.warning("%s: new epoch entry %s truncated conflicting entries %s", self.name, entry, removed)
        epochs.append(entry.epoch)
        starts.append(entry.start_offset)
        self._epochs, self._starts = epochs, starts

    def truncate_from_end(self, end_offset: int) -> None:
        """Remove entries starting at or after ``end_offset`` (the log was truncated there)."""
        with self._lock:
            starts = self._starts
            if end_offset < 0 or not starts or starts[-1] < end_offset:
                return
            keep = bisect_left(starts, end_offset)
            self._epochs, self._starts = self._epochs[:keep], starts[:keep]
            self._write()

    def truncate_from_start(self, start_offset: int) -> None:
        """Drop entries wholly below ``start_offset`` (the log start moved there); the last
        one at or below it now starts at ``start_offset`` (Kafka's is exclusive the same way:
        truncate_from_start(6) keeps an entry starting at 6)."""
        with self._lock:
            starts = self._starts
            n = bisect_right(starts, start_offset)
            if n == 0:
                return
            if n == 1 and starts[0] == start_offset:
                return  # nothing would change
            epochs = self._epochs
            self._epochs = [epochs[n - 1]] + epochs[n:]
            self._starts = [start_offset] + starts[n:]
            self._write()

    def clear(self) -> None:
        with self._lock:
            self._epochs, self._starts = [], []
            self._write()

    def _write(self) -> None:
        if self.checkpoint is not None:
            self.checkpoint.write(self.epoch_entries())
