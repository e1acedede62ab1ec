"""Per-record checks of produced batches (Kafka's LogValidator), with KIP-467 record errors.

Why per record: a topic rule can reject some records of a batch and not others — a missing
key on a compacted topic, a CreateTime timestamp outside message.timestamp.before.max.ms /
after.max.ms (KIP-937; after.max.ms is an hour by default since Kafka 4.0). Kafka rejects the whole batch but names each offending record
(its index in the batch and why) so a client fails exactly those records and the others
with "a different record in the batch was invalid", instead of every message with the same
error.

Records stay opaque unless a rule that needs them is on: nothing is decoded for a
delete-policy topic with the default timestamp settings, and a topic with only an "after"
bound is checked from the batch's max timestamp unless that is out of bounds.
"""

from __future__ import annotations

import time

from storage import LogConfig
from storage.config import LONG_MAX
from wire.errors import ErrorCode
from wire.records import BatchHeader, iter_records

from server.errors import InvalidRecord

NO_TIMESTAMP = -1


def _timestamp_bounds(config: LogConfig) -> tuple[int, int]:
    return config.message_timestamp_before_max_ms, config.message_timestamp_after_max_ms


def validate_records(records: bytes | bytearray | memoryview, headers: list[tuple[int, BatchHeader]],
                     config: LogConfig, partition_name: str) -> None:
    """Raise InvalidRecord (code INVALID_RECORD, or INVALID_TIMESTAMP when a timestamp is
    among the reasons, as Kafka does) listing every offending record."""
    need_key = config.compact
    before, after = (LONG_MAX, LONG_MAX) if config.log_append_time else _timestamp_bounds(config)
    check_before = before != LONG_MAX
    check_after = after != LONG_MAX
    if not (need_key or check_before or check_after):
        return
    now_ms = time.time_ns() // 1_000_000
    low = now_ms - before if check_before else None
    high = now_ms + after if check_after else None
    errors: list[tuple[int, str]] = []
    bad_timestamp = False
    index = 0
    view = memoryview(records)
    for pos, header in headers:
        timestamps_ok = not check_before and (high is None or header.max_timestamp <= high)
        if not need_key and timestamps_ok:
            index += header.record_count
            continue
        for record in iter_records(view[pos:pos + header.size]):
            if need_key and record.key is None:
                errors.append((index, f"Compacted topic cannot accept message without key in topic partition "
                                      f"{partition_name}."))
            elif not timestamps_ok and record.timestamp != NO_TIMESTAMP and (
                    (low is not None and record.timestamp < low) or (high is not None and record.timestamp > high)):
                bad_timestamp = True
                errors.append((index, f"Timestamp {record.timestamp} of message with offset {record.offset} is out "
                                      f"of range. The timestamp should be within [{low if low is not None else '-inf'}, "
                                      f"{high if high is not None else 'inf'}]"))
            index += 1
    if not errors:
        return
    if bad_timestamp:
        raise InvalidRecord("One or more records have been rejected due to invalid timestamp", errors,
                            ErrorCode.INVALID_TIMESTAMP)
    raise rejected_records(errors)


def rejected_records(errors: list[tuple[int, str]]) -> InvalidRecord:
    """Kafka's INVALID_RECORD for a batch with per-record errors (KIP-467): the message
    names the first three, record_errors all of them."""
    shown = ", ".join(f"RecordError(batchIndex={i}, message='{m}')" for i, m in errors[:3])
    return InvalidRecord(f"One or more records have been rejected due to {len(errors)} record errors in total, "
                         f"and only showing the first three errors at most: [{shown}]", errors)
