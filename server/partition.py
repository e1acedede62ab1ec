"""`Partition`: one topic-partition as this broker serves it.

Why a class of its own: everything a request needs to know about a partition — whether it
exists here, whether this broker leads it and in which leader epoch, how far a consumer may
read (the high watermark) and how far the log goes (the log end offset), which producers
wrote to it — used to be spread over handlers, each hand-rolling "topic exists / partition
in range / epoch". Replication (followers, ISR, the high watermark as the minimum over the
ISR) and transactions (producer state, the last stable offset) build on this object.

How this works:
- `Broker.partition(topic, index, current_leader_epoch)` is the one lookup; it raises the
  typed errors (UNKNOWN_TOPIC_OR_PARTITION, FENCED_LEADER_EPOCH, UNKNOWN_LEADER_EPOCH,
  NOT_LEADER_OR_FOLLOWER) that handlers map to codes in one place (server/errors.py).
- The leader epoch is stamped into every batch appended and kept in the log's
  `leader-epoch-checkpoint` file, so it survives restarts.
- The high watermark and the log end offset are two values. With this broker the only
  replica (single node: replicas = ISR = [this broker]) the high watermark follows the log
  end offset after every append; reads for consumers stop at the high watermark.
- `append_records` checks and records idempotent-producer state *inside* the append, under
  the partition's lock: a retried batch arriving on another connection while the first
  copy is still being written (and fsynced) finds it recorded and gets its offsets back.
- Fetches wait on `waiters`: an append wakes them. A follower's fetch (on a leader) waits on
  `replica_waiters` instead, as it reads to the log end offset, not the high watermark: an
  append that does not move the high watermark (followers still to confirm it) wakes only
  those, and a high watermark moved by a follower's fetch wakes only `waiters` (consumers,
  acks=all produces) — Kafka's delayed fetch of a follower is not completed by the high
  watermark either. Anything else (leadership, deletion, shutdown) wakes both.
"""

from __future__ import annotations

import logging
import threading
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass

import trio

from storage import LogConfig, PartitionLog
from storage.log_summary import LogSummary
from storage.producer_snapshot import delete_snapshots, list_snapshots, load_latest, snapshot_path, write_snapshot
from storage.txn_index import AbortedTxn
from wire.errors import ErrorCode
from wire.records import BatchHeader, ControlType, build_txn_marker, iter_headers, parse_header, read_txn_marker

from server.cluster.followers import FollowerState

from server.errors import FencedLeaderEpoch, UnknownLeaderEpoch
from server.producers import DuplicateBatch, PartitionProducers, ProducerIdManager

log = logging.getLogger("trafka.partition")

# The slots a `Partition.deferred` leaves unset until its log is opened.
_DEFERRED_SLOTS = frozenset({"log", "producers"})
# Opening a deferred partition may happen on the event loop (first use) and in a worker
# thread (e.g. a coordinator's load) at once: one at a time, checked again under it. An
# open in a worker thread publishes the log a moment before the producer state is loaded;
# that is safe because no worker thread is the first user of a partition the event loop
# writes to (the coordinators load theirs at start-up, before the broker listens; the
# handlers and the console first touch theirs on the event loop).
_OPENING = threading.RLock()


@dataclass(slots=True)
class AppendOutcome:
    """Where an append landed, as a Produce response reports it."""

    base_offset: int
    log_append_time: int
    log_start_offset: int
    duplicate: bool = False


class _Unopened:
    """What a `Partition.deferred` needs until its log is opened: how to open it, and the
    config it will run under (asked for without opening it: /metrics' min ISR count)."""

    __slots__ = ("partition", "opener", "config", "producer_ids")

    def __init__(self, partition: "Partition", opener: Callable[[], PartitionLog], config: Callable[[], LogConfig],
                 producer_ids: ProducerIdManager) -> None:
        self.partition = partition
        self.opener = opener
        self.config = config
        self.producer_ids = producer_ids

    def __call__(self) -> None:
        partition = self.partition
        with _OPENING:
            if partition._deferred is not self:
                return  # another thread opened it meanwhile
            plog = self.opener()
            # What the summary said, unless the log says otherwise: damage done to a
            # segment while the broker was stopped shows (and is cut) only now.
            partition.high_watermark = partition.leader_epoch_start_offset = plog.log_end_offset
            latest = plog.leader_epoch_cache.latest_epoch
            partition.leader_epoch = latest if latest is not None else 0
            partition.log = plog
            partition.producers = PartitionProducers(self.producer_ids, partition.name)
            partition.load_producer_state()
            partition._deferred = None
            log.debug("%s opened at first use", partition.name)


class Partition:
    __slots__ = ("topic", "index", "topic_id", "log", "leader_epoch", "leader_id", "replicas", "isr",
                 "high_watermark", "producers", "waiters", "lock", "name", "verification", "node_id",
                 "partition_epoch", "followers", "pending_isr", "leader_epoch_start_offset", "on_isr_change",
                 "min_isr_default", "replica_waiters", "leader_term", "messages_in", "bytes_in", "bytes_out",
                 "isr_shrinks", "isr_expands", "_deferred")

    def __init__(self, topic: str, index: int, topic_id: uuid.UUID, plog: PartitionLog, *, node_id: int,
                 producer_ids: ProducerIdManager, replicas: list[int] | None = None, verification: bool = True) -> None:
        self._setup(topic, index, topic_id, node_id, replicas, verification, plog.leader_epoch_cache.latest_epoch,
                    plog.log_end_offset)
        self.log = plog
        self.producers = PartitionProducers(producer_ids, self.name)
        self._deferred: _Unopened | None = None

    def _setup(self, topic: str, index: int, topic_id: uuid.UUID, node_id: int, replicas: list[int] | None,
               verification: bool, latest_epoch: int | None, log_end_offset: int) -> None:
        """Everything but the log and the producer state (see `deferred`)."""
        self.topic = topic
        self.index = index
        self.topic_id = topic_id
        self.name = f"{topic}-{index}"
        self.leader_id = node_id
        # One node: this broker is every replica and the whole ISR. The cluster (ZooKeeper
        # mode) replaces these from the partition's state znode.
        self.replicas = list(replicas) if replicas else [node_id]
        self.isr = list(self.replicas)
        self.leader_epoch = latest_epoch if latest_epoch is not None else 0
        # transaction.partition.verification.enable (KIP-890 part 1)
        self.verification = verification
        self.waiters: set[trio.Event] = set()
        self.replica_waiters: set[trio.Event] = set()  # followers' fetches parked here (a leader)
        self.lock = trio.Lock()
        self.high_watermark = log_end_offset
        # Replication (a cluster): empty on a single broker, where HW = LEO after every append.
        self.node_id = node_id
        self.partition_epoch = 0  # the zkVersion of the partition's state znode
        self.followers: dict[int, FollowerState] = {}
        self.pending_isr: list[int] | None = None  # an AlterPartition in flight
        self.leader_epoch_start_offset = log_end_offset
        self.on_isr_change: Callable[[Partition, list[int]], None] | None = None
        self.min_isr_default = 1
        # Bumped whenever this broker stops or starts leading. An acks=all wait outlives a
        # leader-epoch bump that keeps the leader (the controller shrinking the ISR of a dead
        # broker bumps the epoch), as Kafka's DelayedProduce does, but not a lost leadership,
        # however short: the log may have been truncated under the batch meanwhile.
        self.leader_term = 0
        # Plain counters for /metrics (server/http/metrics.py sums them at scrape time):
        # bumped once per append or read, never per record.
        self.messages_in = self.bytes_in = self.bytes_out = 0
        self.isr_shrinks = self.isr_expands = 0

    @classmethod
    def deferred(cls, topic: str, index: int, topic_id: uuid.UUID, summary: LogSummary,
                 opener: Callable[[], PartitionLog], config: Callable[[], LogConfig], *, node_id: int,
                 producer_ids: ProducerIdManager, replicas: list[int] | None = None, verification: bool = True) -> "Partition":
        """A partition whose log is not open yet (a single broker after a clean shutdown;
        storage.log_summary): Metadata is served from what it is built with, `config`
        says what the log will run under, and the first use of its log or producer state
        opens the log through `opener` (see `__getattr__`). Built without `__init__` so
        that those two slots stay unset."""
        self = cls.__new__(cls)
        # One broker: the high watermark is the log end offset (see __init__).
        self._setup(topic, index, topic_id, node_id, replicas, verification, summary.latest_epoch,
                    summary.log_end_offset)
        self._deferred = _Unopened(self, opener, config, producer_ids)
        return self

    def __getattr__(self, name: str):
        """Reached only for an attribute not set: `log` and `producers` of a partition
        built by `deferred` and not used yet. Opening it here, at the first read of either,
        means no code path can see the partition without its log or producer state (a
        last stable offset from producers not loaded yet would be wrong), and costs the
        partitions that are open nothing: Python calls this only after a failed lookup."""
        if name in _DEFERRED_SLOTS:
            opener = object.__getattribute__(self, "_deferred")
            if opener is not None:
                opener()
                return object.__getattribute__(self, name)
        raise AttributeError(f"{type(self).__name__!r} object has no attribute {name!r}")

    @property
    def is_open(self) -> bool:
        """False while the log of a `deferred` partition waits for its first use."""
        return self._deferred is None

    def open_log(self) -> None:
        """Open a `deferred` partition's log now (the server's warm-up); no-op otherwise."""
        opener = self._deferred
        if opener is not None:
            opener()

    def __repr__(self) -> str:
        return f"<Partition {self.name} epoch {self.leader_epoch} hw {self.high_watermark}>"

    # ---- offsets ------------------------------------------------------------------
    @property
    def log_end_offset(self) -> int:
        return self.log.log_end_offset

    @property
    def log_start_offset(self) -> int:
        return self.log.log_start_offset

    @property
    def config(self):
        deferred = self._deferred
        if deferred is not None:
            return deferred.config()  # not worth opening the log for
        return self.log.config

    @property
    def last_stable_offset(self) -> int:
        """Where read_committed consumers stop: the first offset of the oldest open
        transaction, or the high watermark when none is open below it."""
        first = self.producers.first_unstable
        hw = self.high_watermark
        if first is None or first >= hw:
            return hw
        # Retention or DeleteRecords may have removed the start of an open transaction.
        return max(first, self.log.log_start_offset)

    @property
    def is_leader(self) -> bool:
        return self.leader_id == self.node_id

    @property
    def min_insync_replicas(self) -> int:
        value = self.config.extras.get("min.insync.replicas")
        return int(value) if value is not None else self.min_isr_default

    def maximal_isr(self) -> list[int]:
        """The ISR plus a member whose addition is in flight (HW and acks=all wait for it at
        once); during a shrink in flight the old ISR still counts
        (docs/design/replication.md#high-watermark)."""
        if self.pending_isr is None:
            return self.isr
        return self.isr + [r for r in self.pending_isr if r not in self.isr]

    def maybe_advance_high_watermark(self) -> bool:
        """The high watermark is the smallest log end offset in the ISR; with this broker
        the only member, its own. It never moves back on a leader, and not at all while the
        ISR is smaller than min.insync.replicas (KAFKA-15583). True when it moved."""
        end = self.log.log_end_offset
        if self.followers:
            if not self.is_leader:
                return False
            if len(self.isr) < min(self.min_insync_replicas, len(self.replicas)):
                return False
            for replica in self.maximal_isr():
                follower = self.followers.get(replica)
                if follower is not None and follower.log_end_offset < end:
                    end = follower.log_end_offset
        if end > self.high_watermark:
            self.high_watermark = end
            return True
        return False

    # ---- replication (cluster) ----------------------------------------------------------
    def make_leader(self, leader_epoch: int, isr: list[int], replicas: list[int], partition_epoch: int,
                    now_ms: int) -> bool:
        """LeaderAndIsr names this broker leader. A new epoch is written to the epoch cache at
        the log end even before any batch (KAFKA-7415), and what the old leader knew of the
        followers is forgotten: the HW waits until each ISR follower fetched in this epoch.
        Returns whether the epoch is new."""
        new_epoch = leader_epoch != self.leader_epoch or not self.is_leader
        if not self.is_leader:
            self.leader_term += 1
        self.leader_id = self.node_id
        self.replicas = list(replicas)
        self.isr = list(isr)
        self.partition_epoch = partition_epoch
        self.pending_isr = None
        if new_epoch:
            self.leader_epoch = leader_epoch
            end = self.log.log_end_offset
            self.log.leader_epoch_cache.assign(leader_epoch, end)
            self.leader_epoch_start_offset = end
            self.followers = {r: FollowerState(last_caught_up_ms=now_ms if r in isr else 0)
                              for r in replicas if r != self.node_id}
        else:
            for r in replicas:
                if r != self.node_id and r not in self.followers:
                    self.followers[r] = FollowerState()
            for r in list(self.followers):
                if r not in replicas:
                    del self.followers[r]
        if self.maybe_advance_high_watermark():
            pass
        self.wake()
        return new_epoch

    def make_follower(self, leader_id: int, leader_epoch: int, isr: list[int], replicas: list[int],
                      partition_epoch: int) -> bool:
        """LeaderAndIsr names another broker leader: this replica copies its log from there.
        Waiting acks=all produces and fetches are woken (they find they are no longer the
        leader's). Returns whether anything changed (a fetcher must (re)start)."""
        changed = leader_id != self.leader_id or leader_epoch != self.leader_epoch
        if self.is_leader:
            self.leader_term += 1
        self.leader_id = leader_id
        self.leader_epoch = leader_epoch
        self.replicas = list(replicas)
        self.isr = list(isr)
        self.partition_epoch = partition_epoch
        self.followers = {}
        self.pending_isr = None
        self.wake()
        return changed

    def update_follower(self, replica_id: int, fetch_offset: int, now_ms: int) -> None:
        """A follower fetched at `fetch_offset` (its log end offset): record it, maybe take it
        back into the ISR, maybe advance the high watermark (which completes acks=all waits)."""
        follower = self.followers.get(replica_id)
        if follower is None:
            return
        follower.on_fetch(fetch_offset, self.log.log_end_offset, now_ms)
        if (replica_id not in self.isr and self.pending_isr is None and fetch_offset >= self.high_watermark
                and fetch_offset >= self.leader_epoch_start_offset and self.on_isr_change is not None):
            self.propose_isr(self.isr + [replica_id])
        if self.maybe_advance_high_watermark():
            self.wake_high_watermark()

    async def await_replicated(self, required: int, timeout_s: float) -> ErrorCode:
        """Wait until the high watermark reaches `required` (acks=all for the broker's own
        writes): NONE, NOT_ENOUGH_REPLICAS_AFTER_APPEND if the ISR is below
        min.insync.replicas by then, NOT_LEADER_OR_FOLLOWER if leadership moved,
        REQUEST_TIMED_OUT after `timeout_s`."""
        term = self.leader_term
        deadline = trio.current_time() + timeout_s
        while True:
            if not self.is_leader or self.leader_term != term:
                return ErrorCode.NOT_LEADER_OR_FOLLOWER
            if self.high_watermark >= required:
                if len(self.maximal_isr()) < self.min_insync_replicas:
                    return ErrorCode.NOT_ENOUGH_REPLICAS_AFTER_APPEND
                return ErrorCode.NONE
            remaining = deadline - trio.current_time()
            if remaining <= 0:
                return ErrorCode.REQUEST_TIMED_OUT
            event = trio.Event()
            self.waiters.add(event)
            with trio.move_on_after(remaining):
                await event.wait()

    def out_of_sync_replicas(self, now_ms: int, lag_ms: int) -> list[int]:
        end = self.log.log_end_offset
        return [r for r in self.isr if r != self.node_id and
                (r not in self.followers or not self.followers[r].caught_up(end, now_ms, lag_ms))]

    def propose_isr(self, new_isr: list[int]) -> None:
        """Ask the controller (AlterPartition) to change the ISR; one change in flight."""
        if self.pending_isr is not None or self.on_isr_change is None or sorted(new_isr) == sorted(self.isr):
            return
        self.pending_isr = list(new_isr)
        self.on_isr_change(self, list(new_isr))

    def isr_changed(self, isr: list[int], partition_epoch: int) -> None:
        """The controller accepted an ISR change (AlterPartition answer)."""
        if len(isr) < len(self.isr):
            self.isr_shrinks += 1
        elif len(isr) > len(self.isr):
            self.isr_expands += 1
        self.isr = list(isr)
        self.partition_epoch = partition_epoch
        self.pending_isr = None
        if self.maybe_advance_high_watermark():
            pass
        self.wake()

    def set_follower_high_watermark(self, leader_high_watermark: int) -> None:
        """A follower's HW is the leader's, capped at what it has (it may move back)."""
        hw = min(leader_high_watermark, self.log.log_end_offset)
        if hw != self.high_watermark:
            self.high_watermark = hw
            self.wake()

    async def append_as_follower(self, records: bytearray, record_count: int | None = None) -> None:
        """Copy the leader's batches as they are (offsets, epochs); producer state follows.
        As in `append_records`, an uncontended append without fsync takes no lock: nothing
        awaits between the write and the producer state, and the lock's two scheduler
        passes would sit on every acks=all round trip (the leader waits for this append's
        confirmation, the follower's next fetch)."""
        headers = list(iter_headers(records, check_crc=False))
        always = self.log.config.flush_policy == "always"
        if not always and not self.lock.locked():
            self._append_as_follower_locked(records, headers, record_count, None)
        else:
            async with self.lock:
                start = self.log.log_end_offset
                if always:
                    await trio.to_thread.run_sync(self.log.append_as_follower, records, record_count)
                self._append_as_follower_locked(records, headers, record_count, start)
        self.wake()

    def _append_as_follower_locked(self, records: bytearray, headers: list, record_count: int | None,
                                   written_from: int | None) -> None:
        """The log write (unless done already: `written_from` is then where it began) and
        the producer state of its batches."""
        if written_from is None:
            written_from = self.log.log_end_offset
            self.log.append_as_follower(records, record_count)
        for _pos, header in headers:
            if header.producer_id < 0 or header.base_offset < written_from:
                continue
            if header.is_control:
                marker = read_txn_marker(bytes(records[_pos:_pos + header.size]))
                if marker is not None:
                    self._complete_txn(header.producer_id, header.producer_epoch,
                                       marker[0] == ControlType.COMMIT, marker[1], header.base_offset)
                continue
            self.producers.record(header, header.base_offset)
        if self.producers.ongoing:
            self.log.first_unstable_offset = self.producers.first_unstable

    async def truncate_to(self, offset: int) -> None:
        """A follower cuts a divergent tail (leader-epoch truncation). Producer state is
        rebuilt from the log, since the cut may remove batches it remembers."""
        async with self.lock:
            if offset >= self.log.log_end_offset:
                return
            await trio.to_thread.run_sync(self.log.truncate_to, offset)
            for stale in list_snapshots(self.log.directory):
                if stale > offset:
                    snapshot_path(self.log.directory, stale).unlink(missing_ok=True)
            self.producers.clear()
            self.load_producer_state()
            if self.high_watermark > self.log.log_end_offset:
                self.high_watermark = self.log.log_end_offset

    async def truncate_fully_and_start_at(self, offset: int) -> None:
        """A follower whose log end is below its leader's log start starts over there
        (Kafka's truncateFullyAndStartAt): every batch, snapshot and producer state goes."""
        async with self.lock:
            await trio.to_thread.run_sync(self.log.truncate_fully_and_start_at, offset)
            for stale in list_snapshots(self.log.directory):
                snapshot_path(self.log.directory, stale).unlink(missing_ok=True)
            self.producers.clear()
            self.load_producer_state()
            self.high_watermark = offset

    # ---- leadership -----------------------------------------------------------------
    def check_leader_epoch(self, current_leader_epoch: int) -> None:
        """KIP-320: a client names the epoch it believes current; -1 means "not checked"."""
        if current_leader_epoch < 0 or current_leader_epoch == self.leader_epoch:
            return
        if current_leader_epoch < self.leader_epoch:
            raise FencedLeaderEpoch(f"{self.name}: leader epoch {current_leader_epoch} is older than "
                                    f"{self.leader_epoch}")
        raise UnknownLeaderEpoch(f"{self.name}: leader epoch {current_leader_epoch} is newer than "
                                 f"{self.leader_epoch}")

    def end_offset_for_epoch(self, epoch: int) -> tuple[int, int]:
        """OffsetForLeaderEpoch: (largest epoch ≤ `epoch` we know, where it ends).

        The current epoch enters the checkpoint with its first batch (no file write per
        partition at creation); until then it is known here and ends at the log end."""
        cache = self.log.leader_epoch_cache
        if epoch == self.leader_epoch and (cache.latest_epoch is None or cache.latest_epoch < epoch):
            return epoch, self.log.log_end_offset
        return cache.end_offset_for(epoch, self.log.log_end_offset)

    # ---- writes -------------------------------------------------------------------
    async def append_records(self, records: bytearray, headers: list[tuple[int, BatchHeader]],
                             record_count: int, *, from_client: bool = True) -> AppendOutcome:
        """Append validated batches as the leader; idempotence checks inside, under the lock.
        Batches the broker wrote itself (`from_client=False`: a coordinator's transactional
        offset commit) skip the sequence checks, as Kafka's coordinator-origin appends do,
        but still open their producer's transaction."""
        plog = self.log
        always = plog.config.flush_policy == "always"
        lock = self.lock
        if not always and not lock.locked():
            # No await between the producer check, the write and the record: nothing can
            # interleave, and taking the lock would cost two scheduler passes (measured:
            # p99 halved at 1 000 partitions without it).
            outcome = self._append_locked(records, headers, record_count, from_client)
        else:
            async with lock:
                if always:
                    outcome = await self._append_locked_async(records, headers, record_count, from_client)
                else:
                    outcome = self._append_locked(records, headers, record_count, from_client)
        if not outcome.duplicate:
            if from_client:
                self.messages_in += record_count
                self.bytes_in += len(records)
            if self.maybe_advance_high_watermark():
                self.wake()
            else:  # followers still to confirm it: only their fetches have anything new
                self.wake_replicas()
        return outcome

    def _check_producers(self, headers: list[tuple[int, BatchHeader]]) -> AppendOutcome | None:
        """None to append, or the outcome of the copy already written (a retried batch)."""
        producers = self.producers
        if len(headers) == 1:
            header = headers[0][1]
            if header.producer_id < 0:
                return None
            if header.is_transactional or producers.ongoing:
                producers.check_transactional(header, self.verification)
            try:
                producers.check(header)
            except DuplicateBatch as dup:
                cached = dup.cached
                log.info("duplicate batch from producer %d seq %d on %s: answered with offset %d",
                         header.producer_id, header.base_sequence, self.name, cached.base_offset)
                return AppendOutcome(cached.base_offset, cached.timestamp, self.log.log_start_offset, True)
            return None
        for _pos, header in headers:
            if header.producer_id >= 0:
                producers.check_transactional(header, self.verification)
            producers.check(header)  # a duplicate among several batches is an error, not a retry
        return None

    def _record_producers(self, headers: list[tuple[int, BatchHeader]], base_offset: int,
                          log_append_time: int) -> None:
        if len(headers) == 1 and headers[0][1].producer_id < 0:
            return  # the common plain produce: nothing to remember
        offset = base_offset
        for _pos, header in headers:
            if header.producer_id >= 0:
                self.producers.record(header, offset, log_append_time)
            offset += header.last_offset_delta + 1
        if self.producers.ongoing:
            self.log.first_unstable_offset = self.producers.first_unstable

    def _append_locked(self, records, headers, record_count, from_client: bool = True) -> AppendOutcome:
        duplicate = self._check_producers(headers) if from_client else None
        if duplicate is not None:
            return duplicate
        base, _last, append_time, log_start = self.log.append(records, record_count, leader_epoch=self.leader_epoch)
        self._record_producers(headers, base, append_time)
        return AppendOutcome(base, append_time, log_start)

    async def _append_locked_async(self, records, headers, record_count, from_client: bool = True) -> AppendOutcome:
        duplicate = self._check_producers(headers) if from_client else None
        if duplicate is not None:
            return duplicate
        base, _last, append_time, log_start = await trio.to_thread.run_sync(
            lambda: self.log.append(records, record_count, leader_epoch=self.leader_epoch))
        self._record_producers(headers, base, append_time)
        return AppendOutcome(base, append_time, log_start)

    async def append_internal(self, batch: bytearray, record_count: int) -> AppendOutcome:
        """Append a batch the broker built itself (coordinator records). A transactional one
        (a transactional offset commit) opens its producer's transaction here like any."""
        header = parse_header(batch)
        return await self.append_records(batch, [(0, header)] if header.producer_id >= 0 else [], record_count,
                                         from_client=False)

    async def write_txn_marker(self, producer_id: int, producer_epoch: int, commit: bool,
                               coordinator_epoch: int) -> AppendOutcome:
        """Append a COMMIT or ABORT marker (WriteTxnMarkers) and close the producer's
        transaction here: the last stable offset moves on, and an aborted transaction goes
        into the aborted-transaction index that read_committed fetches consult."""
        async with self.lock:
            self.producers.check_marker(producer_id, producer_epoch, coordinator_epoch)
            batch = build_txn_marker(commit, producer_id=producer_id, producer_epoch=producer_epoch,
                                     timestamp=time.time_ns() // 1_000_000, coordinator_epoch=coordinator_epoch)
            plog = self.log
            if plog.config.flush_policy == "always":
                base, _last, append_time, log_start = await trio.to_thread.run_sync(
                    lambda: plog.append(batch, 1, leader_epoch=self.leader_epoch))
            else:
                base, _last, append_time, log_start = plog.append(batch, 1, leader_epoch=self.leader_epoch)
            self._complete_txn(producer_id, producer_epoch, commit, coordinator_epoch, base)
        self.maybe_advance_high_watermark()
        self.wake()
        return AppendOutcome(base, append_time, log_start)

    def _complete_txn(self, producer_id: int, epoch: int, commit: bool, coordinator_epoch: int,
                      marker_offset: int) -> None:
        first = self.producers.complete_txn(producer_id, epoch, coordinator_epoch)
        if first is not None and not commit:
            # Kafka's AbortedTxn: the LSO recorded is the one after this transaction closed.
            after = self.producers.first_unstable
            self.log.append_aborted_txn(AbortedTxn(producer_id, first, marker_offset,
                                                   marker_offset + 1 if after is None else after))
        self.log.first_unstable_offset = self.producers.first_unstable

    # ---- waiting readers ------------------------------------------------------------
    def wake(self) -> None:
        self.wake_high_watermark()
        self.wake_replicas()

    def wake_high_watermark(self) -> None:
        """The high watermark moved (nothing else): consumers and acks=all waits."""
        waiters = self.waiters
        if waiters:
            self.waiters = set()
            for event in waiters:
                event.set()

    def wake_replicas(self) -> None:
        """The log end offset moved: followers' fetches parked on this leader."""
        waiters = self.replica_waiters
        if waiters:
            self.replica_waiters = set()
            for event in waiters:
                event.set()

    # ---- producer state across restarts -----------------------------------------------
    def load_producer_state(self) -> int:
        """Rebuild producer state: the newest snapshot, then the batch headers after it.
        Returns how many batch headers were read."""
        plog = self.log
        start = plog.log_start_offset
        listed, plog.snapshot_offsets_at_open = plog.snapshot_offsets_at_open, None
        found = load_latest(plog.directory, plog.log_end_offset, offsets=listed)
        if found is not None and found[0] >= start:
            offset, entries = found
            self.producers.load_snapshot(entries)
            start = offset
        read = 0
        if start < plog.log_end_offset:
            # The aborted-transaction index past the snapshot is rebuilt from the markers
            # read here (an unclean stop may have lost its tail, or kept entries of a tail
            # that recovery cut off).
            plog.truncate_aborted_txns(start)
            for header, data in plog.iter_batches(start):
                read += 1
                if header.producer_id < 0:
                    continue
                if header.is_control:
                    marker = read_txn_marker(data)
                    if marker is not None:
                        self._complete_txn(header.producer_id, header.producer_epoch, marker[0] == ControlType.COMMIT,
                                           marker[1], header.base_offset)
                    continue
                self.producers.record(header, header.base_offset)
        plog.first_unstable_offset = self.producers.first_unstable
        return read

    def save_producer_state(self) -> None:
        """At clean shutdown: Kafka's `<log end offset>.snapshot`. Written for any log with
        data, an empty one when no producer is known (as Kafka's takeSnapshot): without it
        the next start-up read every batch header of the log looking for producers, 40 % of
        a 100 000-partition restart after a non-idempotent load
        (docs/design/performance.md#start-up-without-opening-every-log).
        Empty logs get
        none (nothing to read), nor do logs whose snapshot at the log end is already there."""
        end = self.log.log_end_offset
        directory = self.log.directory
        if len(self.producers):
            write_snapshot(directory, end, self.producers.snapshot_entries())
        elif end > self.log.log_start_offset and end not in list_snapshots(directory):
            write_snapshot(directory, end, [])
        delete_snapshots(directory, below=end)
