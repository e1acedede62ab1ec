"""`CoordinatorLog`: the internal compacted topic a coordinator keeps its state in.

Why a module of its own: the group coordinator (`__consumer_offsets`) and the transaction
coordinator (`__transaction_state`) keep their state the same way Kafka does — every change
a client relies on is appended to an internal, compacted topic *before* it is acknowledged,
and the topic is read back at start-up to rebuild memory. What differs is only the record
formats and what a record means; the topic, the partition a key lands on, the write lock
per partition (held across the append and the in-memory update, so memory and log agree on
order) and the replay loop are here once.

Replay hands each data record to the coordinator, and each transaction marker (a control
batch) too: `__consumer_offsets` holds transactional offset commits that become visible
only when their marker says COMMIT.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import dataclass

import trio

from wire.errors import CorruptRecords
from wire.records import BatchHeader, ControlType, Record, build_batch, control_type, iter_records


log = logging.getLogger("trafka.coordinator")

# Records per batch when many go at once (retention, group deletion).
WRITE_CHUNK = 500


class BadRecord(ValueError):
    """A coordinator record that cannot be decoded; replay skips it with a log line."""


@dataclass(slots=True)
class ReplayCounts:
    records: int = 0
    skipped: int = 0


def wall_ms() -> int:
    return time.time_ns() // 1_000_000


def java_string_hash(text: str) -> int:
    """Java's String.hashCode (over UTF-16 code units), as a signed int32."""
    h = 0
    data = text.encode("utf-16-be")
    for i in range(0, len(data), 2):
        h = (31 * h + ((data[i] << 8) | data[i + 1])) & 0xFFFFFFFF
    return h - (1 << 32) if h & 0x80000000 else h


def partition_for_key(key: str, partitions: int) -> int:
    """Kafka's Utils.abs(key.hashCode) % partitions: a group or transactional id lands on
    the partition Kafka would put it on."""
    h = java_string_hash(key)
    return (0 if h == -(1 << 31) else abs(h)) % partitions


class CoordinatorLog:
    """One internal topic: created on first start, appended to under a per-partition lock,
    replayed at start-up."""

    def __init__(self, broker, topic: str, partitions: int, configs: dict[str, str]) -> None:
        self.broker = broker
        self.topic = topic
        self.partitions = max(partitions, 1)
        self.configs = dict(configs)
        self.now_ms: Callable[[], int] = wall_ms
        self._locks: dict[int, trio.Lock] = {}

    def ensure_topic(self) -> int:
        """Blocking, at start-up: create the topic if missing; returns its partition count
        (an existing topic keeps the count it was created with)."""
        meta = self.broker.topics.get(self.topic)
        if meta is None:
            meta = self.broker.create_topic(self.topic, self.partitions, dict(self.configs))
        self.partitions = meta.partitions
        return self.partitions

    def partition_for(self, key: str) -> int:
        return partition_for_key(key, self.partitions)

    def lock(self, partition: int) -> trio.Lock:
        lock = self._locks.get(partition)
        if lock is None:
            lock = self._locks[partition] = trio.Lock()
        return lock

    async def append(self, partition: int, entries: list[tuple[bytes, bytes | None]], *,
                     producer_id: int = -1, producer_epoch: int = -1) -> int:
        """Append key/value records (value None: a tombstone) to one partition; with a
        producer id they form a transactional batch (a transactional offset commit), which
        counts only once its COMMIT marker follows. Returns the first offset written."""
        now = self.now_ms()
        first = -1
        transactional = producer_id >= 0
        for start in range(0, len(entries), WRITE_CHUNK):
            chunk = entries[start:start + WRITE_CHUNK]
            batch = build_batch([Record(i, now, k, v) for i, (k, v) in enumerate(chunk)],
                                producer_id=producer_id, producer_epoch=producer_epoch,
                                base_sequence=-1, is_transactional=transactional)
            outcome = await self.broker.append((self.topic, partition), batch, len(chunk))
            if first < 0:
                first = outcome.base_offset
        return first

    def replay(self, on_record: Callable[[int, BatchHeader, Record], None],
               on_marker: Callable[[int, BatchHeader, ControlType], None] | None = None) -> ReplayCounts:
        """Blocking, at start-up: hand every record of every partition, in log order, to
        `on_record(partition, batch header, record)` and every transaction marker to
        `on_marker(partition, batch header, COMMIT|ABORT)`. Undecodable records and
        batches are skipped with a log line: losing one beats refusing to start."""
        counts = ReplayCounts()
        for partition in range(self.partitions):
            plog = self.broker.partition(self.topic, partition).log
            for header, data in plog.iter_batches(plog.log_start_offset):
                try:
                    if header.is_control:
                        if on_marker is not None:
                            for record in iter_records(data):
                                kind = control_type(record)
                                if kind in (ControlType.COMMIT, ControlType.ABORT):
                                    on_marker(partition, header, kind)
                        continue
                    for record in iter_records(data):
                        counts.records += 1
                        try:
                            on_record(partition, header, record)
                        except BadRecord as exc:
                            counts.skipped += 1
                            log.warning("%s-%d offset %d: skipping record: %s", self.topic, partition,
                                        record.offset, exc)
                except CorruptRecords as exc:
                    # Recovery checked the CRCs, so this is a batch we cannot decode.
                    counts.skipped += 1
                    log.error("%s-%d: skipping undecodable batch at offset %d: %s", self.topic, partition,
                              header.base_offset, exc)
        return counts
