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
from wire.errors import CorruptRecords, ErrorCode
from wire.records import BatchHeader, check_records, iter_records

from server.errors import InvalidRecord

NO_TIMESTAMP = -1


def check_client_batches(records: bytes | bytearray | memoryview, headers: list[tuple[int, BatchHeader]],
                         partition_name: str, *, converted: bool = False) -> None:
    """Raise InvalidRecord (INVALID_RECORD, no record errors) unless `records` is what Kafka
    takes from a client (UnifiedLog.analyzeAndValidateRecords and LogValidator): one magic-2
    batch whose base offset is 0, whose record count is positive and agrees with its last
    offset delta, with a base sequence when it has a producer id, and whose records are
    well formed (check_records). `converted`: batches this broker made from a v0/v1 message
    set, which may be several (Kafka checks one batch and base offset 0 for magic 2 only).

    Why every record is walked although batches stay opaque: a batch with a valid CRC
    whose records do not parse would be stored and break every consumer that fetches it;
    Kafka refuses it, so Trafka must. The cost is measured in bench/produce_validation.py
    and discussed in docs/design/produce-validation.md.
    """
    if len(headers) > 1 and not converted:
        raise InvalidRecord(f"Compressed outer record has more than one batch: {len(headers)} batches "
                            f"in the append to {partition_name}", [])
    for pos, header in headers:
        if header.base_offset != 0 and not converted:
            raise InvalidRecord(f"The baseOffset of the record batch in the append to {partition_name} should "
                                f"be 0, but it is {header.base_offset}", [])
        if header.record_count <= 0:
            raise InvalidRecord(f"Invalid record count {header.record_count} in the append to {partition_name}", [])
        if header.last_offset_delta + 1 != header.record_count:
            raise InvalidRecord(f"Inconsistent batch offset range [0, {header.last_offset_delta}] and count of "
                                f"records {header.record_count} in the append to {partition_name}", [])
        if header.producer_id >= 0 and header.base_sequence < 0:
            raise InvalidRecord(f"Invalid sequence number {header.base_sequence} in record batch with producerId "
                                f"{header.producer_id} in the append to {partition_name}", [])
        try:
            check_records(records, header, pos)
        except CorruptRecords as exc:
            raise InvalidRecord(f"Found invalid record structure in the append to {partition_name}: {exc}",
                                []) from None


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
