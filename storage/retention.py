"""Retention: which whole segments of a partition may go.

Three rules, applied oldest segment first and stopping at the first segment a rule keeps
(Kafka's deleteOldSegments):

- below the log start offset: a segment whose successor starts at or below the log start
  offset (DeleteRecords moved it) holds nothing readable;
- retention.ms (cleanup.policy contains delete, value >= 0): the segment's largest record
  timestamp (its file mtime if it has none) is older than now - retention.ms;
- retention.bytes (delete policy, value >= 0): while the partition stays at or above
  retention.bytes without the segment, the segment goes.

The log start offset moves to the first surviving segment and is checkpointed before any
file is removed.

Given the partition's high watermark (the broker gives it), retention.ms and retention.bytes
work as Kafka's do: nothing past the high watermark goes, and the active segment goes too
once the high watermark reaches the log end (rolled first, so an empty segment stays at the
log end offset). Without it (storage on its own) the active segment is never touched. The
log-start rule never takes the active segment, in Kafka either: it needs a next segment.
"""

from __future__ import annotations

from storage.log import PartitionLog
from storage.segment import LogSegment


def apply_retention(plog: PartitionLog, now_ms: int, high_watermark: int | None = None) -> int:
    """Delete what the rules above allow; returns how many segments went."""
    config = plog.config
    deleted = plog.delete_oldest_segments(
        lambda segment, i: plog.segments[i + 1].base_offset <= plog.log_start_offset,
        "below the log start offset",
    )
    if config.delete and config.retention_ms >= 0:
        limit = config.retention_ms
        deleted += plog.delete_oldest_segments(
            lambda segment, i: now_ms - segment.largest_timestamp() > limit, "retention.ms",
            high_watermark, now_ms,
        )
    if config.delete and config.retention_bytes >= 0:
        deleted += plog.delete_oldest_segments(_over_size(plog, config.retention_bytes), "retention.bytes",
                                               high_watermark, now_ms)
    plog.sweep()
    return deleted


def _over_size(plog: PartitionLog, retention_bytes: int):
    excess: list[int] = []

    def predicate(segment: LogSegment, i: int) -> bool:
        if i == 0:
            excess[:] = [sum(s.size for s in plog.segments) - retention_bytes]
        if excess[0] - segment.size >= 0:
            excess[0] -= segment.size
            return True
        return False

    return predicate
