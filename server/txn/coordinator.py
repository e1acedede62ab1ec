"""The transaction coordinator: transactional ids, their producer ids and epochs, and the
two-phase end of every transaction (KIP-98), decision for decision as Kafka 3.9's
TransactionCoordinator, because the clients are written against it.

How this works
--------------
Each transactional id has a `TransactionMetadata` (server/txn/metadata.py) kept in memory
and, before any answer a client relies on, written to `__transaction_state` (records in
Kafka's format, server/txn/records.py) through the shared `CoordinatorLog`; start-up replays
the topic. While a change is being written (or markers are being written) the id is
*pending*, and any other request for it gets CONCURRENT_TRANSACTIONS, which clients retry.

- InitProducerId: a new id gets a producer id at epoch 0; a known one gets its epoch bumped
  (a new producer id once the epoch is exhausted), which fences every older instance of the
  producer (zombie fencing: their writes get INVALID_PRODUCER_EPOCH, their coordinator
  requests PRODUCER_FENCED). With an ongoing transaction, the epoch is bumped first and the
  transaction aborted under it; the caller is told CONCURRENT_TRANSACTIONS and retries into
  a clean bump. A request naming a producer id and epoch (KIP-360) must name the current
  ones, or the previous ones for a retry whose answer was lost. transaction.timeout.ms must
  be within (0, transaction.max.timeout.ms] (INVALID_TRANSACTION_TIMEOUT).
- AddPartitionsToTxn / AddOffsetsToTxn add partitions (for offsets: the group's
  __consumer_offsets partition) and make the transaction Ongoing. Produce asks
  `verify_partition` before the first transactional batch of a producer on a partition
  (KIP-890 part 1): a partition not added is INVALID_TXN_STATE, so a late or hanging
  write cannot sneak into no transaction.
- EndTxn writes PrepareCommit/PrepareAbort and answers; the markers are then written to
  every partition of the transaction (server/txn/markers.py: here, or in a cluster by
  WriteTxnMarkers to each partition's leader), and CompleteCommit/
  CompleteAbort is written last. A crash in between is finished at start-up: ids loaded in
  a Prepare state get their markers again (a marker for a transaction a partition already
  closed is harmless).
- Transactions Ongoing for longer than their timeout are aborted by the coordinator, after
  an epoch bump that fences the producer (every
  transaction.abort.timed.out.transaction.cleanup.interval.ms). Ids idle in Empty or
  Complete* for transactional.id.expiration.ms are removed with a tombstone.

Placement (a cluster). A transactional id belongs to the __transaction_state partition it
hashes to, and this broker coordinates it only while it leads that partition, with the
partition's leader epoch as coordinator epoch (sent with every marker, so a deposed
coordinator's markers are refused). `load_partition` replays one partition (in a worker
thread) and then finishes its Prepare* transactions; `unload_partition` drops its ids,
and their marker tasks stop. Every request path asks `txn_status` first:
NOT_COORDINATOR for a partition led elsewhere, COORDINATOR_LOAD_IN_PROGRESS while it loads.
A single broker owns every partition from start-up.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

import trio

from wire.errors import ErrorCode
from wire.records import Record

from server.coordinator_log import BadRecord, CoordinatorLog, ReplayCounts, append_error, wall_ms
from server.errors import KafkaError, error_code_for
from server.txn import records as rec
from server.txn.markers import MarkerSender
from server.txn.metadata import IDLE, MAX_EPOCH, PREPARING, STATE_BY_NAME, TransactionMetadata, TxnState
from server.txn.verification import TxnVerifier

log = logging.getLogger("trafka.txn")

TXN_TOPIC = "__transaction_state"
E = ErrorCode
S = TxnState
_MARKER_RETRY_S = 0.1


def for_version(code: ErrorCode, version: int, fenced_since: int) -> ErrorCode:
    """KIP-588: request versions before `fenced_since` predate PRODUCER_FENCED; Kafka answers
    them INVALID_PRODUCER_EPOCH, which those clients handle the same way."""
    if code == E.PRODUCER_FENCED and version < fenced_since:
        return E.INVALID_PRODUCER_EPOCH
    return code


@dataclass(slots=True)
class InitResult:
    error: ErrorCode
    producer_id: int = -1
    producer_epoch: int = -1


class TransactionCoordinator:
    def __init__(self, broker) -> None:
        self.broker = broker
        cfg = broker.config
        self.max_timeout_ms = cfg.get("transaction.max.timeout.ms")
        self.expiration_ms = cfg.get("transactional.id.expiration.ms")
        self.abort_interval_s = max(cfg.get("transaction.abort.timed.out.transaction.cleanup.interval.ms"), 10) / 1000
        self.expire_interval_s = max(cfg.get("transaction.remove.expired.transaction.cleanup.interval.ms"), 10) / 1000
        self.verification = cfg.get("transaction.partition.verification.enable")
        self.log = CoordinatorLog(broker, TXN_TOPIC, cfg.get("transaction.state.log.num.partitions"),
                                  {"cleanup.policy": "compact",
                                   "segment.bytes": str(cfg.get("transaction.state.log.segment.bytes"))})
        self.log.now_ms = lambda: self.now_ms()
        self.now_ms = wall_ms
        self.txns: dict[str, TransactionMetadata] = {}
        self.loaded = False
        self._nursery: trio.Nursery | None = None
        self._to_resume: list[TransactionMetadata] = []
        self.markers = MarkerSender(broker)
        self.verifier = TxnVerifier(broker)  # a partition leader's KIP-890 questions (server/txn/verification.py)

    # ------------------------------------------------------------------ lifecycle
    def start_clustered(self) -> None:
        """In a cluster: nothing is loaded at start; `load_partition` runs for each partition
        of the internal topic this broker comes to lead (LeaderAndIsr)."""
        self.log.start_clustered()
        self.loaded = True

    def load(self) -> None:
        """Blocking, at start-up on a single broker: load every partition of
        __transaction_state; ids caught between Prepare and Complete are finished by `run`.
        Like Kafka, the topic is created with the first transactional id, not before: until
        then this broker owns the partitions the topic will have."""
        if self.broker.topics.get(TXN_TOPIC) is None:
            self.log.owned = {p: 0 for p in range(self.log.partitions)}
            self.loaded = True
            return
        self.log.ensure_topic()
        counts = ReplayCounts()
        for partition in range(self.log.partitions):
            load_id = self.log.begin_load(partition, self.log.leader_epoch(partition))
            if load_id is None:
                continue
            try:
                latest = self._replay_partition(partition, counts)
            except BaseException:
                self.log.abandon_load(partition, load_id)
                raise
            if self.log.finish_load(partition, load_id):
                self._install(latest)
        self.loaded = True
        log.info("loaded %d transactional ids (%d ongoing, %d to complete) from %d records of %s%s",
                 len(self.txns), sum(1 for m in self.txns.values() if m.state == S.ONGOING), len(self._to_resume),
                 counts.records, TXN_TOPIC, f" ({counts.skipped} unreadable records skipped)" if counts.skipped else "")

    async def load_partition(self, partition: int, epoch: int) -> None:
        """This broker now leads __transaction_state-`partition` at leader epoch `epoch`:
        replay it in a worker thread, coordinate its ids, and finish the transactions it
        left in a Prepare state. Meanwhile its ids get COORDINATOR_LOAD_IN_PROGRESS. A load
        at an epoch older than the newest seen, or of a partition owned or loading, is
        skipped."""
        load_id = self.log.begin_load(partition, epoch)
        if load_id is None:
            return
        try:
            async with self.log.lock(partition):
                if not self.log.load_current(partition, load_id):
                    return
                counts = ReplayCounts()
                latest = await trio.to_thread.run_sync(self._replay_partition, partition, counts)
                if not self.log.finish_load(partition, load_id):
                    log.info("%s-%d: unloaded while loading; replayed state dropped", TXN_TOPIC, partition)
                    return
                loaded = self._install(latest)
        except Exception:
            self.log.abandon_load(partition, load_id)
            log.exception("%s-%d: loading at epoch %d failed; not coordinating its ids", TXN_TOPIC, partition, epoch)
            return
        except BaseException:
            self.log.abandon_load(partition, load_id)
            raise
        log.info("%s-%d: loaded %d transactional ids from %d records at coordinator epoch %d", TXN_TOPIC, partition,
                 len(loaded), counts.records, epoch)
        if self._nursery is not None:
            self._resume_prepared()

    def unload_partition(self, partition: int, epoch: int | None) -> None:
        """__transaction_state-`partition` is led elsewhere now (or deleted: epoch None): its
        transactional ids leave memory and their marker tasks stop retrying (the new
        coordinator finishes those transactions). Skipped at an epoch older than the
        newest seen."""
        if not self.log.begin_unload(partition, epoch):
            return
        gone = [m for tid, m in self.txns.items() if self.log.partition_for(tid) == partition]
        for m in gone:
            del self.txns[m.transactional_id]
        if self._to_resume:
            self._to_resume = [m for m in self._to_resume if self.txns.get(m.transactional_id) is m]
        log.info("%s-%d: unloaded %d transactional ids (coordinator epoch %s)", TXN_TOPIC, partition, len(gone),
                 "-" if epoch is None else epoch)

    def owns(self, partition: int) -> bool:
        return self.log.owns(partition)

    def txn_status(self, transactional_id: str) -> ErrorCode:
        """NONE when this broker coordinates `transactional_id` and has loaded it,
        NOT_COORDINATOR when its partition is led elsewhere, COORDINATOR_LOAD_IN_PROGRESS
        while it loads."""
        return self.log.status(self.log.partition_for(transactional_id))

    def _mine(self, m: TransactionMetadata) -> bool:
        """`m` is still the coordinated state of its id (its partition was not unloaded)."""
        return self.txns.get(m.transactional_id) is m

    def _replay_partition(self, partition: int, counts: ReplayCounts) -> dict[str, rec.TxnLogValue | None]:
        """Blocking: the last record of every transactional id of one partition."""
        latest: dict[str, rec.TxnLogValue | None] = {}

        def on_record(_partition: int, _header, record: Record) -> None:
            if record.key is None:
                raise BadRecord("record without a key")
            tid = rec.decode_key(record.key)
            latest[tid] = None if record.value is None else rec.decode_value(record.value)

        self.log.replay_partition(partition, on_record, None, counts)
        return latest

    def _install(self, latest: dict[str, rec.TxnLogValue | None]) -> list[TransactionMetadata]:
        """Put replayed ids in memory; those in a Prepare state are queued for `run` to finish."""
        ids = self.broker.producers
        installed = []
        for tid, value in latest.items():
            if value is None:
                continue
            try:
                state = S(value.status)
            except ValueError:
                log.warning("transactional id %r: unknown state %d in %s; skipped", tid, value.status, TXN_TOPIC)
                continue
            m = TransactionMetadata(tid, value.producer_id, value.producer_epoch, value.timeout_ms, state,
                                    {(t, p) for t, ps in value.partitions.items() for p in ps},
                                    value.start_ms, value.last_update_ms)
            self.txns[tid] = m
            installed.append(m)
            ids.saw_epoch(m.producer_id, m.producer_epoch)
            if state in PREPARING:
                m.pending = True
                self._to_resume.append(m)
        return installed

    def _resume_prepared(self) -> None:
        """Finish the transactions loaded in a Prepare state (markers, then Complete*)."""
        for m in self._to_resume:
            if not self._mine(m):
                continue
            log.info("transactional id %r: completing %s left by the previous run", m.transactional_id,
                     m.state.kafka_name)
            self._spawn(self._complete, m, m.state == S.PREPARE_COMMIT)
        self._to_resume.clear()

    async def run(self, task_status=trio.TASK_STATUS_IGNORED) -> None:
        """Finish transactions left in a Prepare state, then abort timed-out transactions
        and remove expired ids on Kafka's intervals."""
        async with trio.open_nursery() as nursery:
            self._nursery = nursery
            self._resume_prepared()
            task_status.started()
            try:
                next_abort = trio.current_time() + self.abort_interval_s
                next_expire = trio.current_time() + self.expire_interval_s
                while True:
                    await trio.sleep_until(min(next_abort, next_expire))
                    now = trio.current_time()
                    if now >= next_abort:
                        next_abort = now + self.abort_interval_s
                        self.abort_timed_out()
                    if now >= next_expire:
                        next_expire = now + self.expire_interval_s
                        nursery.start_soon(self.remove_expired)
            finally:
                self._nursery = None
                self.markers.close()
                self.verifier.close()

    def statistics(self) -> dict[str, int]:
        out: dict[str, int] = {"transactional_ids": len(self.txns)}
        for m in self.txns.values():
            out[m.state.kafka_name] = out.get(m.state.kafka_name, 0) + 1
        return out

    # ------------------------------------------------------------------ writing state
    def _value(self, m: TransactionMetadata, **changes) -> rec.TxnLogValue:
        parts = changes.get("partitions", m.partitions)
        by_topic: dict[str, list[int]] = {}
        for topic, index in parts:
            by_topic.setdefault(topic, []).append(index)
        return rec.TxnLogValue(changes.get("producer_id", m.producer_id), changes.get("producer_epoch", m.producer_epoch),
                               changes.get("timeout_ms", m.timeout_ms), int(changes.get("state", m.state)), by_topic,
                               changes.get("last_update_ms", m.last_update_ms), changes.get("start_ms", m.start_ms))

    async def _write(self, m: TransactionMetadata, **changes) -> ErrorCode:
        """Write `m` with `changes` to __transaction_state, then apply them in memory. The
        caller has marked `m` pending; NONE, or the code the client gets when the write fails."""
        changes.setdefault("last_update_ms", self.now_ms())
        partition = self.log.partition_for(m.transactional_id)
        value = rec.encode_value(self._value(m, **changes))
        if self.broker.topics.get(TXN_TOPIC) is None:
            try:
                self.log.ensure_topic()
            except Exception as exc:
                log.error("creating %s failed: %r", TXN_TOPIC, exc)
                return E.COORDINATOR_NOT_AVAILABLE
            partition = self.log.partition_for(m.transactional_id)
        async with self.log.lock(partition):
            # Unloaded (or loaded anew) while this write waited: no longer ours to change.
            status = self.log.status(partition)
            if status != E.NONE or not self._mine(m):
                return status if status != E.NONE else E.NOT_COORDINATOR
            epoch = self.log.epoch(partition)
            try:
                await self.log.append(partition, [(rec.encode_key(m.transactional_id), value)])
            except Exception as exc:
                code = self._write_error(error_code_for(exc))
                log.error("transactional id %r: writing to %s failed: %r (answered %s)", m.transactional_id,
                          TXN_TOPIC, exc, code.name)
                return code
            if self.log.epoch(partition) != epoch or not self._mine(m):
                # Kafka's rule: the coordinator epoch moved during the append, so the new
                # coordinator owns the state (it reads this record back) — not memory here.
                return E.NOT_COORDINATOR
            for name, v in changes.items():
                setattr(m, name, v)
        if "producer_epoch" in changes or "producer_id" in changes:
            self.broker.producers.saw_epoch(m.producer_id, m.producer_epoch)
        return E.NONE

    @staticmethod
    def _write_error(code: ErrorCode) -> ErrorCode:
        """Kafka's TransactionStateManager mapping of a failed append: a lost leadership →
        NOT_COORDINATOR; a missing or under-replicated partition, or a timeout →
        COORDINATOR_NOT_AVAILABLE (the client retries); too large → UNKNOWN_SERVER_ERROR;
        anything else COORDINATOR_NOT_AVAILABLE, as before."""
        mapped = append_error(code)
        if mapped is not None:
            return mapped
        if code in (E.MESSAGE_TOO_LARGE, E.RECORD_LIST_TOO_LARGE):
            return E.UNKNOWN_SERVER_ERROR
        return E.COORDINATOR_NOT_AVAILABLE

    def _spawn(self, fn, *args) -> None:
        if self._nursery is None:
            log.warning("transaction coordinator not running; dropped background task %s", getattr(fn, "__name__", fn))
            return
        self._nursery.start_soon(fn, *args)

    # ------------------------------------------------------------------ InitProducerId
    async def init_producer_id(self, transactional_id: str, timeout_ms: int, producer_id: int = -1,
                               producer_epoch: int = -1) -> InitResult:
        if not self.loaded:
            return InitResult(E.COORDINATOR_LOAD_IN_PROGRESS)
        if not transactional_id:
            return InitResult(E.INVALID_REQUEST)
        status = self.txn_status(transactional_id)
        if status != E.NONE:
            return InitResult(status)
        if timeout_ms <= 0 or timeout_ms > self.max_timeout_ms:
            log.info("transactional id %r: transaction.timeout.ms %d outside (0, %d]", transactional_id, timeout_ms,
                     self.max_timeout_ms)
            return InitResult(E.INVALID_TRANSACTION_TIMEOUT)
        m = self.txns.get(transactional_id)
        if m is None:
            try:
                # In a cluster this may wait for a ZooKeeper block: check ownership again after.
                new_id = await self.broker.producers.allocate_id()
            except KafkaError as exc:
                log.info("transactional id %r: no producer id: %s", transactional_id, exc)
                return InitResult(exc.code)
            status = self.txn_status(transactional_id)
            if status != E.NONE:
                return InitResult(status)
            m = self.txns.get(transactional_id)
            if m is None:
                m = TransactionMetadata(transactional_id, new_id, -1, timeout_ms, S.EMPTY, set(), -1, self.now_ms())
                self.txns[transactional_id] = m
        if m.pending:
            return InitResult(E.CONCURRENT_TRANSACTIONS)
        if producer_id >= 0 and m.producer_epoch >= 0:
            current = producer_id == m.producer_id and producer_epoch == m.producer_epoch
            if not current and m.state in IDLE and (producer_id, producer_epoch) == (m.last_producer_id,
                                                                                     m.last_producer_epoch):
                # A retry of the bump that already happened (its answer was lost).
                return InitResult(E.NONE, m.producer_id, m.producer_epoch)
            if not current:
                log.info("transactional id %r: InitProducerId names producer %d epoch %d, current %d epoch %d: fenced",
                         transactional_id, producer_id, producer_epoch, m.producer_id, m.producer_epoch)
                return InitResult(E.PRODUCER_FENCED)
        if m.state in PREPARING or m.state in (S.PREPARE_EPOCH_FENCE, S.DEAD):
            return InitResult(E.CONCURRENT_TRANSACTIONS)
        if m.state == S.ONGOING:
            # Fence the running producer and abort its transaction; the caller retries.
            log.info("transactional id %r: new producer instance; aborting its ongoing transaction", transactional_id)
            self._fence_and_abort(m)
            return InitResult(E.CONCURRENT_TRANSACTIONS)
        m.pending = True
        try:
            if m.producer_epoch >= MAX_EPOCH:
                try:
                    new_id, new_epoch = await self.broker.producers.allocate_id(), 0
                except KafkaError as exc:
                    log.info("transactional id %r: no producer id: %s", transactional_id, exc)
                    return InitResult(exc.code)
            else:
                new_id, new_epoch = m.producer_id, m.producer_epoch + 1
            # Kafka's prepareIncrementProducerEpoch remembers the epoch it bumped from only for a
            # KIP-360 bump (the request named its producer id and epoch): only that bump's
            # lost answer may be asked for again. A plain InitProducerId leaves none (-1).
            code = await self._write(m, producer_id=new_id, producer_epoch=new_epoch, last_producer_id=m.producer_id,
                                     last_producer_epoch=m.producer_epoch if producer_id >= 0 else -1,
                                     timeout_ms=timeout_ms, state=S.EMPTY, partitions=set(), start_ms=-1)
        finally:
            m.pending = False
        if code != E.NONE:
            return InitResult(code)
        log.debug("transactional id %r: producer %d epoch %d", transactional_id, m.producer_id, m.producer_epoch)
        return InitResult(E.NONE, m.producer_id, m.producer_epoch)

    def _fence_and_abort(self, m: TransactionMetadata) -> None:
        """Bump the epoch in memory (fencing the producer at once: its coordinator requests get
        PRODUCER_FENCED, its batches INVALID_PRODUCER_EPOCH) and abort under it."""
        m.state = S.PREPARE_EPOCH_FENCE
        m.pending = True
        if m.producer_epoch < MAX_EPOCH:
            m.producer_epoch += 1
            self.broker.producers.saw_epoch(m.producer_id, m.producer_epoch)
        self._spawn(self._abort_fenced, m)

    async def _abort_fenced(self, m: TransactionMetadata) -> None:
        code = await self._write(m, state=S.PREPARE_ABORT)
        if code != E.NONE:
            m.state = S.ONGOING  # retried at the next timeout check or InitProducerId
            m.pending = False
            return
        await self._complete(m, False)

    # ------------------------------------------------------------------ checks
    def _check_producer(self, transactional_id: str, producer_id: int, producer_epoch: int
                        ) -> tuple[ErrorCode, TransactionMetadata | None]:
        if not transactional_id:
            return E.INVALID_REQUEST, None  # Kafka's TransactionCoordinator, before anything else
        if not self.loaded:
            return E.COORDINATOR_LOAD_IN_PROGRESS, None
        status = self.txn_status(transactional_id)
        if status != E.NONE:
            return status, None
        m = self.txns.get(transactional_id)
        if m is None or m.producer_id != producer_id:
            return E.INVALID_PRODUCER_ID_MAPPING, None
        if m.producer_epoch != producer_epoch:
            return E.PRODUCER_FENCED, None
        return E.NONE, m

    # ------------------------------------------------------------------ AddPartitionsToTxn
    async def add_partitions(self, transactional_id: str, producer_id: int, producer_epoch: int,
                             partitions: set[tuple[str, int]]) -> ErrorCode:
        code, m = self._check_producer(transactional_id, producer_id, producer_epoch)
        if code != E.NONE:
            return code
        if m.pending or m.state in PREPARING or m.state == S.PREPARE_EPOCH_FENCE:
            return E.CONCURRENT_TRANSACTIONS
        if m.state == S.DEAD:
            return E.INVALID_PRODUCER_ID_MAPPING
        if m.state == S.ONGOING and partitions <= m.partitions:
            return E.NONE
        changes = {"partitions": m.partitions | partitions, "state": S.ONGOING}
        if m.state in IDLE:
            changes["start_ms"] = self.now_ms()
        m.pending = True
        try:
            return await self._write(m, **changes)
        finally:
            m.pending = False

    def verify_partition(self, transactional_id: str | None, producer_id: int, producer_epoch: int,
                         tp: tuple[str, int]) -> ErrorCode:
        """KIP-890 part 1: is `tp` in the producer's ongoing transaction? (AddPartitionsToTxn
        v4+ verify_only, and Produce/TxnOffsetCommit before a producer's first write there.)"""
        if not self.verification:
            return E.NONE
        if transactional_id is None:
            return E.INVALID_TXN_STATE
        code, m = self._check_producer(transactional_id, producer_id, producer_epoch)
        if code != E.NONE:
            return code
        if m.state in PREPARING or m.state == S.PREPARE_EPOCH_FENCE:
            return E.CONCURRENT_TRANSACTIONS
        if m.state != S.ONGOING or tp not in m.partitions:
            return E.INVALID_TXN_STATE
        return E.NONE

    # ------------------------------------------------------------------ EndTxn
    async def end_txn(self, transactional_id: str, producer_id: int, producer_epoch: int, commit: bool) -> ErrorCode:
        code, m = self._check_producer(transactional_id, producer_id, producer_epoch)
        if code != E.NONE:
            return code
        if m.pending:
            return E.CONCURRENT_TRANSACTIONS
        state = m.state
        if state == S.ONGOING:
            m.pending = True
            code = await self._write(m, state=S.PREPARE_COMMIT if commit else S.PREPARE_ABORT)
            if code != E.NONE:
                m.pending = False
                return code
            self._spawn(self._complete, m, commit)
            return E.NONE
        if state == S.COMPLETE_COMMIT:
            return E.NONE if commit else E.INVALID_TXN_STATE
        if state == S.COMPLETE_ABORT:
            return E.NONE if not commit else E.INVALID_TXN_STATE
        if state == S.PREPARE_COMMIT:
            return E.CONCURRENT_TRANSACTIONS if commit else E.INVALID_TXN_STATE
        if state == S.PREPARE_ABORT:
            return E.CONCURRENT_TRANSACTIONS if not commit else E.INVALID_TXN_STATE
        return E.INVALID_TXN_STATE  # Empty: nothing to end; Dead/PrepareEpochFence: not this producer's

    async def _complete(self, m: TransactionMetadata, commit: bool) -> None:
        """Write the markers to every partition of the transaction, then Complete*. Runs
        with `m` pending; retries until each partition answers or is gone."""
        try:
            pending = sorted(m.partitions)
            while pending:
                retry = []
                coordinator_epoch = self.log.epoch(self.log.partition_for(m.transactional_id))
                if not self._mine(m) or coordinator_epoch < 0:
                    log.info("transactional id %r: no longer coordinated here; its markers are left to the new "
                             "coordinator", m.transactional_id)
                    return
                # Each partition's leader: here, or another broker of the cluster (WriteTxnMarkers).
                codes = await self.markers.write(pending, m.producer_id, m.producer_epoch, commit,
                                                 max(coordinator_epoch, 0))
                for (topic, index), code in codes.items():
                    if code in (E.NONE, E.UNKNOWN_TOPIC_OR_PARTITION):
                        continue  # written, or the partition is gone (deleted topic)
                    if code in (E.INVALID_PRODUCER_EPOCH, E.TRANSACTION_COORDINATOR_FENCED):
                        # A newer marker already closed this transaction there (Kafka drops it too).
                        log.warning("transactional id %r: marker on %s-%d refused (%s); not retried",
                                    m.transactional_id, topic, index, code.name)
                        continue
                    retry.append((topic, index))
                pending = retry
                if pending:
                    await trio.sleep(_MARKER_RETRY_S)
            while True:
                code = await self._write(m, state=S.COMPLETE_COMMIT if commit else S.COMPLETE_ABORT, partitions=set())
                if code == E.NONE:
                    break
                if not self._mine(m):
                    return
                await trio.sleep(_MARKER_RETRY_S)
            log.debug("transactional id %r: %s", m.transactional_id, m.state.kafka_name)
        finally:
            m.pending = False

    # ------------------------------------------------------------------ timers
    def abort_timed_out(self) -> int:
        """Abort transactions Ongoing for longer than their timeout, fencing their producer."""
        now = self.now_ms()
        aborted = 0
        for m in list(self.txns.values()):
            if m.state == S.ONGOING and not m.pending and m.start_ms >= 0 and m.start_ms + m.timeout_ms <= now:
                log.info("transactional id %r: transaction of producer %d open for %d ms (timeout %d ms): aborting",
                         m.transactional_id, m.producer_id, now - m.start_ms, m.timeout_ms)
                self._fence_and_abort(m)
                aborted += 1
        return aborted

    async def remove_expired(self) -> int:
        """Remove ids idle (Empty or Complete*) for transactional.id.expiration.ms."""
        now = self.now_ms()
        removed = 0
        for m in list(self.txns.values()):
            if m.pending or m.state not in IDLE or m.last_update_ms + self.expiration_ms > now:
                continue
            partition = self.log.partition_for(m.transactional_id)
            m.pending = True
            try:
                async with self.log.lock(partition):
                    if not self.log.owns(partition) or not self._mine(m):
                        continue
                    await self.log.append(partition, [(rec.encode_key(m.transactional_id), None)])
                m.state = S.DEAD
                if self.txns.get(m.transactional_id) is m:
                    del self.txns[m.transactional_id]
                removed += 1
                log.info("transactional id %r: expired (idle since %d)", m.transactional_id, m.last_update_ms)
            except Exception as exc:
                log.error("transactional id %r: writing its tombstone failed: %r", m.transactional_id, exc)
            finally:
                m.pending = False
        return removed

    # ------------------------------------------------------------------ admin
    def describe(self, transactional_id: str) -> tuple[ErrorCode, TransactionMetadata | None]:
        """(`txn_status`, the id's state or None when unknown)."""
        if not self.loaded:
            return E.COORDINATOR_LOAD_IN_PROGRESS, None
        status = self.txn_status(transactional_id)
        if status != E.NONE:
            return status, None
        m = self.txns.get(transactional_id)
        return E.NONE, None if m is None or m.state == S.DEAD else m

    def list(self, states: set[str] | None, producer_ids: set[int] | None, min_duration_ms: int = -1
             ) -> tuple[ErrorCode, list[TransactionMetadata], list[str]]:
        """(error, matching ids of the partitions this broker coordinates, state filters that
        are not a state) — ListTransactions; COORDINATOR_LOAD_IN_PROGRESS and nothing listed
        while a partition loads, as Kafka answers."""
        if not self.loaded or self.log.loading:
            return E.COORDINATOR_LOAD_IN_PROGRESS, [], []
        unknown = [s for s in states or () if s.lower() not in STATE_BY_NAME]
        wanted = None if not states else {STATE_BY_NAME[s.lower()] for s in states if s.lower() in STATE_BY_NAME}
        now = self.now_ms()
        out = []
        for m in self.txns.values():
            if m.state == S.DEAD:
                continue
            if wanted is not None and m.state not in wanted:
                continue
            if producer_ids and m.producer_id not in producer_ids:
                continue
            # Kafka's rule, now - start > filter: a transactional id with no transaction
            # running (start -1) counts as running longer than any filter (KIP-994 as built).
            if min_duration_ms >= 0 and now - m.start_ms <= min_duration_ms:
                continue
            out.append(m)
        return E.NONE, out, unknown
