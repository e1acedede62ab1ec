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

Ownership. In a cluster a coordinator answers only for the keys of the partitions of its
topic this broker leads (Kafka's placement: the coordinator of a group is the leader of its
`__consumer_offsets` partition). `owned` maps each such partition to its coordinator epoch
(the partition's leader epoch) once its state is in memory; `loading` holds those being
replayed. `status(partition)` is the one answer every request path gives for a key:
NONE, COORDINATOR_LOAD_IN_PROGRESS or NOT_COORDINATOR. Loads and unloads carry the
leader epoch that caused them, and one older than the newest seen for the partition is
skipped (Kafka's epochForPartitionId), so a late, stale LeaderAndIsr cannot undo a newer
one. A single broker owns every partition from start-up.
"""

from __future__ import annotations

import itertools
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass

import trio

from wire.errors import CorruptRecords, ErrorCode
from wire.records import BatchHeader, ControlType, Record, build_batch, control_type, iter_records

from server.errors import KafkaError, UnknownTopicOrPartition


log = logging.getLogger("trafka.coordinator")

# Records per batch when many go at once (retention, group deletion).
WRITE_CHUNK = 500


class BadRecord(ValueError):
    """A coordinator record that cannot be decoded; replay skips it with a log line."""


@dataclass(slots=True)
class ReplayCounts:
    records: int = 0
    skipped: int = 0


def append_error(code: ErrorCode) -> ErrorCode | None:
    """What a coordinator's client is told when appending to the coordinator topic failed
    with `code`, for the cases every Kafka coordinator maps alike (GroupMetadataManager,
    TransactionStateManager): this broker no longer leads the partition → NOT_COORDINATOR
    (the client looks the coordinator up again); the partition is missing or short of
    in-sync replicas → COORDINATOR_NOT_AVAILABLE (it retries). None for the other codes,
    which each coordinator maps its own way."""
    if code in (ErrorCode.NOT_LEADER_OR_FOLLOWER, ErrorCode.KAFKA_STORAGE_ERROR):
        return ErrorCode.NOT_COORDINATOR
    if code in (ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, ErrorCode.NOT_ENOUGH_REPLICAS,
                ErrorCode.NOT_ENOUGH_REPLICAS_AFTER_APPEND):
        return ErrorCode.COORDINATOR_NOT_AVAILABLE
    return None


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
    replayed partition by partition when this broker becomes its leader."""

    def __init__(self, broker, topic: str, partitions: int, configs: dict[str, str]) -> None:
        self.broker = broker
        self.topic = topic
        self.partitions = max(partitions, 1)
        self.configs = dict(configs)
        self.now_ms: Callable[[], int] = wall_ms
        self._locks: dict[int, trio.Lock] = {}
        self.commit_timeout_s = 5.0  # offsets.commit.timeout.ms
        self.owned: dict[int, int] = {}  # partition -> coordinator epoch, state in memory
        self.loading: set[int] = set()
        self._epochs: dict[int, int] = {}  # newest coordinator epoch seen per partition
        self._load_ids = itertools.count(1)
        self._load_id: dict[int, int] = {}  # the load under way per partition

    # ------------------------------------------------------------------ ownership
    def start_clustered(self) -> None:
        """A cluster member owns no partition until the controller makes it a leader."""
        self.owned = {}
        meta = self.broker.topics.get(self.topic)
        if meta is not None:
            self.partitions = meta.partitions

    def owns(self, partition: int) -> bool:
        return partition in self.owned

    def status(self, partition: int) -> ErrorCode:
        """Whether this coordinator answers for keys on `partition`: NONE,
        COORDINATOR_LOAD_IN_PROGRESS while it is replayed, else NOT_COORDINATOR."""
        if partition in self.owned:
            return ErrorCode.NONE
        if partition in self.loading:
            return ErrorCode.COORDINATOR_LOAD_IN_PROGRESS
        return ErrorCode.NOT_COORDINATOR

    def epoch(self, partition: int) -> int:
        """The coordinator epoch of an owned partition (-1 if not owned)."""
        return self.owned.get(partition, -1)

    def leader_epoch(self, partition: int) -> int:
        """The partition's current leader epoch here: the epoch a single broker loads it at."""
        found = self.broker.partitions.get((self.topic, partition))
        return found.leader_epoch if found is not None else 0

    def begin_load(self, partition: int, epoch: int) -> int | None:
        """Start loading `partition` at `epoch`: an id for `finish_load`, or None when there
        is nothing to load (the epoch is older than one seen already, the partition is
        owned — its epoch is raised — or a load of it is under way)."""
        meta = self.broker.topics.get(self.topic)
        if meta is not None:
            self.partitions = meta.partitions  # in a cluster, the count ZooKeeper has
        current = self._epochs.get(partition)
        if current is not None and epoch < current:
            log.info("%s-%d: not loading at coordinator epoch %d, epoch %d is newer", self.topic, partition,
                     epoch, current)
            return None
        self._epochs[partition] = epoch
        if partition in self.owned:
            self.owned[partition] = epoch
            return None
        if partition in self.loading:
            return None
        self.loading.add(partition)
        load_id = self._load_id[partition] = next(self._load_ids)
        return load_id

    def load_current(self, partition: int, load_id: int) -> bool:
        """Load `load_id` is still the one wanted (not unloaded or superseded since)."""
        return self._load_id.get(partition) == load_id

    def finish_load(self, partition: int, load_id: int) -> bool:
        """The replay of load `load_id` is done: True and the partition is owned, or False
        when it was unloaded (or loaded anew) meanwhile and the replayed state is stale."""
        if self._load_id.get(partition) != load_id:
            return False
        del self._load_id[partition]
        self.loading.discard(partition)
        self.owned[partition] = self._epochs[partition]
        return True

    def abandon_load(self, partition: int, load_id: int) -> None:
        """The replay of load `load_id` failed: the partition is neither loading nor owned."""
        if self._load_id.get(partition) == load_id:
            del self._load_id[partition]
            self.loading.discard(partition)

    def begin_unload(self, partition: int, epoch: int | None) -> bool:
        """Stop answering for `partition` (led elsewhere now). False, changing nothing, when
        `epoch` is older than the newest seen; None (a deletion) always unloads."""
        current = self._epochs.get(partition)
        if epoch is not None:
            if current is not None and epoch < current:
                log.info("%s-%d: not unloading at coordinator epoch %d, epoch %d is newer", self.topic, partition,
                         epoch, current)
                return False
            self._epochs[partition] = epoch
        self.owned.pop(partition, None)
        self.loading.discard(partition)
        self._load_id.pop(partition, None)
        return True

    def ensure_topic(self) -> int:
        """Blocking, at start-up: create the topic if missing; returns its partition count
        (an existing topic keeps the count it was created with)."""
        meta = self.broker.topics.get(self.topic)
        if meta is None:
            meta = self.broker.create_topic(self.topic, self.partitions, dict(self.configs))
        self.partitions = meta.partitions
        return self.partitions

    def partition_for(self, key: str) -> int:
        cluster = self.broker.cluster
        if cluster is not None:
            # The count the topic has in the cluster, whichever of its partitions lead here.
            count = len(cluster.cache.topics.get(self.topic, ()))
            if count:
                return partition_for_key(key, count)
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
            last = outcome.base_offset + len(chunk)
        local = self.broker.partitions.get((self.topic, partition))
        if local is not None and local.followers:
            # A cluster: answer only once the ISR has the records (Kafka's
            # offsets.commit.required.acks=-1), so a leader change cannot lose them.
            code = await local.await_replicated(last, self.commit_timeout_s)
            if code != ErrorCode.NONE:
                raise KafkaError(f"{self.topic}-{partition}: records not replicated ({code.name})", code)
        return first

    def replay(self, on_record: Callable[[int, BatchHeader, Record], None],
               on_marker: Callable[[int, BatchHeader, ControlType], None] | None = None) -> ReplayCounts:
        """Blocking: `replay_partition` over every partition, in partition order."""
        counts = ReplayCounts()
        for partition in range(self.partitions):
            self.replay_partition(partition, on_record, on_marker, counts)
        return counts

    def replay_partition(self, partition: int, on_record: Callable[[int, BatchHeader, Record], None],
                         on_marker: Callable[[int, BatchHeader, ControlType], None] | None = None,
                         counts: ReplayCounts | None = None) -> ReplayCounts:
        """Blocking (start-up, or a worker thread): hand every record of `partition` up to
        its log end offset now, in log order, to `on_record(partition, batch header,
        record)` and every transaction marker to `on_marker(partition, batch header,
        COMMIT|ABORT)`. Undecodable records and batches are skipped with a log line: losing
        one beats refusing to start."""
        counts = counts if counts is not None else ReplayCounts()
        found = self.broker.partitions.get((self.topic, partition))
        if found is None:
            raise UnknownTopicOrPartition(f"{self.topic}-{partition} does not exist here")
        plog = found.log
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
