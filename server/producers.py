"""Idempotent producers: producer ids, epochs and per-partition sequence checks (KIP-98).

How this works: every batch from an idempotent producer carries (producerId, epoch,
baseSequence). Per (producer id, partition) we keep the epoch and the last five batches
appended — their first and last sequence and offsets — because a producer keeps at most
five batches in flight and retries only those. A batch whose sequences match a cached one
is a retry of something already written: it is answered with the original offsets and not
written again. A batch that continues the last sequence is appended; anything else is
OUT_OF_ORDER_SEQUENCE_NUMBER. A lower epoch than the one seen is INVALID_PRODUCER_EPOCH (a
zombie). The per-partition state (`PartitionProducers`) belongs to the partition and is checked and
updated inside its append, under its lock: a retry that arrives on another connection while
the first copy is still being written (fsynced) then finds the first copy recorded. At clean
shutdown it is saved as Kafka's `<offset>.snapshot` file; start-up loads the newest snapshot
and reads only the batch headers after it. Producer ids and their latest epochs are
broker-wide (`ProducerIdManager`); on a single broker ids come from a counter persisted in
the data dir in blocks, so no id is handed out twice across restarts; in a cluster they come
from blocks allocated cluster-wide in ZooKeeper (server/cluster/producer_ids.py), so no two
brokers hand out the same id.
"""

from __future__ import annotations

import collections
import json
import logging
import os
import pathlib
from dataclasses import dataclass, field

from storage.producer_snapshot import SnapshotEntry
from wire.errors import ErrorCode
from wire.records import BatchHeader

from server.errors import KafkaError

log = logging.getLogger("trafka.producers")

MAX_CACHED_BATCHES = 5
ID_BLOCK = 1000
SEQUENCE_WRAP = 0x80000000


@dataclass(slots=True)
class CachedBatch:
    first_sequence: int
    last_sequence: int
    base_offset: int
    last_offset: int
    # Kafka's BatchMetadata.timestamp: the batch's max timestamp (its append time on a
    # LogAppendTime topic). A retried batch is answered with it as log_append_time_ms.
    timestamp: int


@dataclass(slots=True)
class PartitionProducerState:
    epoch: int
    batches: collections.deque = field(default_factory=lambda: collections.deque(maxlen=MAX_CACHED_BATCHES))
    coordinator_epoch: int = -1  # of the last transaction marker seen for this producer here


class DuplicateBatch(Exception):
    """A retried batch already in the log; carries where it was written."""

    def __init__(self, cached: CachedBatch) -> None:
        super().__init__("duplicate batch")
        self.cached = cached


class ProducerIdManager:
    """Broker-wide: producer ids handed out (persisted in blocks) and each id's latest epoch."""

    def __init__(self, data_dir: pathlib.Path) -> None:
        self._id_file = data_dir / "producer_ids.json"
        self._next_id = 0
        self._id_limit = 0
        # producer id -> latest epoch handed out or seen
        self.epochs: dict[int, int] = {}
        # In a cluster: the ZooKeeper-allocated blocks ids come from (ProducerIdBlocks), set
        # by the cluster node; None on a single broker (the counter file).
        self.blocks = None

    def load(self) -> None:
        try:
            stored = json.loads(self._id_file.read_text())
            self._next_id = self._id_limit = int(stored["next_block"])
        except FileNotFoundError:
            self._next_id = self._id_limit = 0
        except (ValueError, KeyError) as exc:
            log.warning("producer id file %s unreadable (%s); starting a fresh block above seen ids", self._id_file, exc)
            self._next_id = self._id_limit = max(self.epochs, default=-1) + 1

    def _reserve_block(self) -> None:
        self._id_limit = self._next_id + ID_BLOCK
        tmp = self._id_file.with_suffix(".tmp")
        tmp.write_text(json.dumps({"next_block": self._id_limit}))
        fd = os.open(tmp, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)
        os.replace(tmp, self._id_file)

    def new_producer_id(self) -> int:
        # Ids seen in the log must never be reused, even if the id file was lost.
        seen = max(self.epochs, default=-1) + 1
        if self._next_id < seen:
            self._next_id = seen
        if self._next_id >= self._id_limit:
            self._reserve_block()
        pid = self._next_id
        self._next_id += 1
        self.epochs[pid] = 0
        return pid

    async def allocate_id(self) -> int:
        """A new producer id at epoch 0: from the counter on a single broker (no waiting), from
        a ZooKeeper block in a cluster (may wait for one; KafkaError
        COORDINATOR_LOAD_IN_PROGRESS when none comes)."""
        if self.blocks is None:
            return self.new_producer_id()
        pid = await self.blocks.next_id()
        self.epochs[pid] = 0
        return pid

    async def init_producer(self, producer_id: int, producer_epoch: int) -> tuple[int, int]:
        """InitProducerId without a transactional id: always a new id at epoch 0, whatever
        id and epoch the producer names (Kafka's TransactionCoordinator "blindly accepts"
        these). A producer recovering from an error (KIP-360) thereby starts over with a
        fresh id: no broker of a cluster has to know an epoch another one handed out."""
        pid = await self.allocate_id()
        return pid, 0

    def saw_epoch(self, producer_id: int, epoch: int) -> None:
        if self.epochs.get(producer_id, -1) < epoch:
            self.epochs[producer_id] = epoch


class PartitionProducers:
    """One partition's idempotent-producer state: per producer id, its epoch and the last
    five batches appended (see the module docstring). Used under the partition's lock."""

    __slots__ = ("ids", "_states", "name", "ongoing", "verified", "first_unstable")

    def __init__(self, ids: ProducerIdManager, name: str = "") -> None:
        self.ids = ids
        self.name = name
        self._states: dict[int, PartitionProducerState] = {}
        # Transactions open on this partition: producer id -> offset of its first batch in
        # the transaction. The smallest is the first unstable offset, where read_committed
        # consumers stop (the last stable offset).
        self.ongoing: dict[int, int] = {}
        self.first_unstable: int | None = None
        # KIP-890: producer id -> epoch the transaction coordinator confirmed this partition
        # is in its transaction; consumed by the first transactional batch, cleared by a marker.
        self.verified: dict[int, int] = {}

    def __len__(self) -> int:
        return len(self._states)

    def in_transaction(self, pid: int, epoch: int) -> bool:
        """Whether `pid` at `epoch` has a transaction open here (Kafka's
        UnifiedLog.hasOngoingTransaction): a partition already in the transaction needs no
        verification by the transaction coordinator."""
        state = self._states.get(pid)
        return pid in self.ongoing and state is not None and state.epoch == epoch

    def check(self, header: BatchHeader) -> None:
        """Raise DuplicateBatch for a retry, KafkaError for a fenced or out-of-order batch."""
        pid = header.producer_id
        if pid < 0:
            return
        state = self._states.get(pid)
        known_epoch = self.ids.epochs.get(pid)
        if known_epoch is not None and header.producer_epoch < known_epoch:
            raise KafkaError(
                f"producer {pid} epoch {header.producer_epoch} is older than {known_epoch}",
                ErrorCode.INVALID_PRODUCER_EPOCH,
            )
        if state is None or header.producer_epoch > state.epoch:
            # First batch of this producer (or of its new epoch) here. Kafka accepts any
            # sequence when it has no state (the state may have been removed by
            # retention, KIP-360), and sequence 0 after an epoch bump.
            if state is not None and header.base_sequence != 0:
                raise KafkaError(
                    f"producer {pid} new epoch {header.producer_epoch} must start at sequence 0, "
                    f"got {header.base_sequence}",
                    ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER,
                )
            return
        for cached in state.batches:
            if cached.first_sequence == header.base_sequence and cached.last_sequence == header.last_sequence:
                raise DuplicateBatch(cached)
        if state.batches:
            expected = (state.batches[-1].last_sequence + 1) % SEQUENCE_WRAP
            if header.base_sequence != expected:
                raise KafkaError(
                    f"producer {pid} on {self.name}: sequence {header.base_sequence}, expected {expected}",
                    ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER,
                )

    def check_transactional(self, header: BatchHeader, verification: bool) -> None:
        """A transactional batch continues its producer's open transaction here, or starts one
        the coordinator confirmed (KIP-890); a plain batch from a producer with an open
        transaction is refused. INVALID_TXN_STATE otherwise, as in Kafka."""
        pid = header.producer_id
        if not header.is_transactional:
            if pid in self.ongoing:
                raise KafkaError(f"producer {pid} wrote a non-transactional batch to {self.name} inside its transaction",
                                 ErrorCode.INVALID_TXN_STATE)
            return
        if pid in self.ongoing or not verification:
            return
        if self.verified.get(pid) != header.producer_epoch:
            raise KafkaError(f"producer {pid} epoch {header.producer_epoch}: {self.name} is not in its transaction",
                             ErrorCode.INVALID_TXN_STATE)

    def record(self, header: BatchHeader, base_offset: int, log_append_time: int = -1) -> None:
        """Remember an appended batch (also used to rebuild state from the log)."""
        pid = header.producer_id
        if pid < 0:
            return
        if header.is_transactional and pid not in self.ongoing:
            self.ongoing[pid] = base_offset
            self.verified.pop(pid, None)
            if self.first_unstable is None or base_offset < self.first_unstable:
                self.first_unstable = base_offset
        self._remember(pid, header.producer_epoch, header.base_sequence, header.last_sequence, base_offset,
                       base_offset + header.last_offset_delta,
                       log_append_time if log_append_time >= 0 else header.max_timestamp)

    def _remember(self, pid: int, epoch: int, first_sequence: int, last_sequence: int, base_offset: int,
                  last_offset: int, timestamp: int) -> None:
        state = self._states.get(pid)
        if state is None or epoch > state.epoch:
            state = PartitionProducerState(epoch)
            self._states[pid] = state
        state.batches.append(CachedBatch(first_sequence, last_sequence, base_offset, last_offset, timestamp))
        self.ids.saw_epoch(pid, epoch)

    def check_marker(self, producer_id: int, epoch: int, coordinator_epoch: int) -> None:
        """A marker from an older producer epoch or an older coordinator is refused."""
        state = self._states.get(producer_id)
        known = state.epoch if state is not None else -1
        if epoch < known:
            raise KafkaError(f"marker for producer {producer_id} has epoch {epoch}, older than {known} on {self.name}",
                             ErrorCode.INVALID_PRODUCER_EPOCH)
        if state is not None and coordinator_epoch < state.coordinator_epoch:
            raise KafkaError(f"marker for producer {producer_id} from coordinator epoch {coordinator_epoch}, older "
                             f"than {state.coordinator_epoch} on {self.name}", ErrorCode.TRANSACTION_COORDINATOR_FENCED)

    def complete_txn(self, producer_id: int, epoch: int, coordinator_epoch: int) -> int | None:
        """A COMMIT/ABORT marker was appended: close the producer's transaction here. Returns
        the offset where it began (None: no transaction was open here)."""
        first = self.ongoing.pop(producer_id, None)
        self.verified.pop(producer_id, None)
        if first is not None and first == self.first_unstable:
            self.first_unstable = min(self.ongoing.values(), default=None)
        state = self._states.get(producer_id)
        if state is None or epoch > state.epoch:
            # A marker under a bumped epoch starts the producer over (sequence 0 next).
            state = self._states[producer_id] = PartitionProducerState(epoch)
        state.coordinator_epoch = coordinator_epoch
        self.ids.saw_epoch(producer_id, epoch)
        return first

    def clear(self) -> None:
        self._states.clear()
        self.ongoing.clear()
        self.verified.clear()
        self.first_unstable = None

    def describe(self) -> list[tuple[int, int, CachedBatch]]:
        """(producer id, epoch, last batch) of each producer with state here."""
        return [(pid, s.epoch, s.batches[-1]) for pid, s in self._states.items() if s.batches]

    def active_producers(self) -> list[dict]:
        """Every producer with state here, as DescribeProducers answers them (Kafka's
        ProducerStateManager.activeProducers): epoch, last sequence and timestamp (-1 when
        only a marker is known), the coordinator epoch of its last marker, and the offset
        where its open transaction began (-1: none)."""
        return [{"producer_id": pid, "producer_epoch": s.epoch,
                 "last_sequence": s.batches[-1].last_sequence if s.batches else -1,
                 "last_timestamp": s.batches[-1].timestamp if s.batches else -1,
                 "coordinator_epoch": s.coordinator_epoch,
                 "current_txn_start_offset": self.ongoing.get(pid, -1)}
                for pid, s in sorted(self._states.items())]

    # ---- snapshots (Kafka's .snapshot files) ------------------------------------------
    def snapshot_entries(self) -> list[SnapshotEntry]:
        entries = []
        for pid, state in self._states.items():
            txn_first = self.ongoing.get(pid, -1)
            if state.batches:
                last = state.batches[-1]
                entries.append(SnapshotEntry(pid, state.epoch, last.last_sequence, last.last_offset,
                                             last.last_offset - last.base_offset, last.timestamp,
                                             state.coordinator_epoch, txn_first))
            else:  # known only by a marker: its epoch and coordinator epoch still matter
                entries.append(SnapshotEntry(pid, state.epoch, -1, -1, 0, -1, state.coordinator_epoch, txn_first))
        return entries

    def load_snapshot(self, entries: list[SnapshotEntry]) -> None:
        """Kafka keeps each producer's last batch only; so does the state loaded from it."""
        for e in entries:
            if e.last_sequence >= 0 or e.last_offset >= 0:
                count = e.offset_delta + 1
                first = (e.last_sequence - e.offset_delta) % SEQUENCE_WRAP if e.last_sequence >= 0 else -1
                self._remember(e.producer_id, e.epoch, first, e.last_sequence, e.last_offset - count + 1,
                               e.last_offset, e.timestamp)
            else:
                self._states[e.producer_id] = PartitionProducerState(e.epoch)
                self.ids.saw_epoch(e.producer_id, e.epoch)
            self._states[e.producer_id].coordinator_epoch = e.coordinator_epoch
            if e.current_txn_first_offset >= 0:
                self.ongoing[e.producer_id] = e.current_txn_first_offset
        self.first_unstable = min(self.ongoing.values(), default=None)
