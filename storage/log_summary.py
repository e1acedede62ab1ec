"""`log-summary-checkpoint`: what a clean shutdown knew of every log, so the next start
need not open them all before it serves (100 000 partitions;
docs/design/performance.md#start-up-without-opening-every-log).

Why: opening a log costs a directory listing, two or three small file reads and the
segment and index objects — ~50 µs of Python each, five seconds for 100 000 partitions,
most of which nobody touches in the first seconds. After a clean shutdown nothing in a
log needs checking, and what a broker must know of a partition before it is used
(Metadata: its leader epoch; ListOffsets and Fetch open it anyway) fits on one line. The
manager writes this file at close(), just before the `.clean_shutdown` marker, and reads
it at open() only when that marker is there; it is removed at open(), as the marker is,
so a crash later never trusts it. A log in it is opened at first use or by the server's
warm-up after it listens (storage.manager.LogManager.deferred).

Format: Kafka's OffsetCheckpointFile text layout (a version line, a count, one entry a
line) with four numbers per entry instead of one::

    0
    <count>
    <topic> <partition> <log start offset> <log end offset> <latest leader epoch or -1>
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from storage.files import read_checkpoint_entries, write_checkpoint_entries

LOG_SUMMARY_CHECKPOINT = "log-summary-checkpoint"


@dataclass(frozen=True, slots=True)
class LogSummary:
    """A closed log as the clean shutdown left it."""

    log_start_offset: int
    log_end_offset: int
    latest_epoch: int | None


def write_log_summary(path: str | Path, entries: dict[tuple[str, int], LogSummary]) -> None:
    """Replace the file atomically (tmp, fsync, rename, fsync dir)."""
    write_checkpoint_entries(path, [f"{topic} {partition} {s.log_start_offset} {s.log_end_offset} "
                                    f"{-1 if s.latest_epoch is None else s.latest_epoch}"
                                    for (topic, partition), s in entries.items()])


def _entry(parts: list[str]) -> LogSummary:
    start, end, epoch = int(parts[2]), int(parts[3]), int(parts[4])
    if not 0 <= start <= end or epoch < -1:
        raise ValueError("impossible offsets or epoch")
    return LogSummary(start, end, None if epoch < 0 else epoch)


def read_log_summary(path: str | Path) -> dict[tuple[str, int], LogSummary] | None:
    """The entries, or None when the file is absent or does not parse (logged: the logs are
    then opened at start-up, as without one)."""
    return read_checkpoint_entries(path, 5, _entry, what="topic partition start end epoch")
