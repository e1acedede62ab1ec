"""`ShareStateStore`: the share coordinator proper (Kafka's ShareCoordinatorShard) — the
durable state of share partitions in `__share_group_state`.

Why apart from `ShareCoordinator`: in a cluster the share-partition leader (the leader of
the data partition, which acquires and acknowledges) and the share coordinator (the leader
of the `__share_group_state` partition of the share partition's key) are different
brokers, as in Kafka 4.x. The leader reads the state when it starts serving a share
partition (ReadShareGroupState) and writes it before answering an acknowledgement
(WriteShareGroupState); this store answers both, on whichever broker leads the key's
partition (a local call when that is the leader itself; on a single broker always).

How it works: each share partition's state is kept here as the newest ShareSnapshot
written (what ShareUpdates diff against) and the current state (snapshot + updates). A
write with fewer than `share.coordinator.snapshot.update.records.per.snapshot` updates
since the snapshot appends a ShareUpdate holding every change since the snapshot, else a
new ShareSnapshot (records.py says why). A write or read with a leader epoch older than the
newest seen for the share partition is FENCED_LEADER_EPOCH: a deposed leader that has not
noticed yet cannot overwrite what the new one wrote (Kafka's share coordinator fences the
same way). A write with a state epoch older than the stored one is FENCED_STATE_EPOCH.

State epochs and deletes: DeleteShareGroupState (a share group deleted) leaves the share
partition "deleted", not forgotten: after the tombstones of its ShareSnapshot and
ShareUpdate keys comes a ShareSnapshot with StartOffset -1 (Kafka's
UNINITIALIZED_START_OFFSET), no batches and the StateEpoch bumped. Why: the brokers
leading the group's data partitions may still hold the share partition in memory, and
their next write (a lock expiring, an acknowledgement of a session still open) carries the
old state epoch — it is FENCED_STATE_EPOCH instead of writing the deleted state back, and
the leader drops its copy (coordinator.py). The marker is a record, so it survives a
coordinator move or restart (replay sees it after the tombstones; compaction keeps it as
the snapshot key's newest value). A read of a deleted share partition answers StartOffset
-1 with the bumped epoch, and the leader initialising it afresh writes at that epoch.
In Kafka the state epoch a share partition is (re)initialised with comes from the group
coordinator through InitializeShareGroupState (its StateEpoch), and deletes are plain
tombstones; Trafka's group coordinator does not send InitializeShareGroupState (leaders
initialise at their first ShareFetch), so the share coordinator keeps the epoch across the
delete itself, as the marker record. The fence is Kafka's: a write whose StateEpoch is
older than the coordinator's is FENCED_STATE_EPOCH.

Where the key lands: in a cluster Kafka's ShareCoordinatorService partitioning,
`Utils.abs("group:topicId:partition".hashCode) % partitions`; on a single broker by group
id, the layout earlier Trafka versions wrote (a single broker replays every partition, so
only the order within one partition matters).

Ownership follows leadership as the group coordinator's does (server/coordinator_log.py):
`load_partition` replays a `__share_group_state` partition when this broker becomes its
leader; until then requests for its keys are COORDINATOR_LOAD_IN_PROGRESS, and
NOT_COORDINATOR once it is led elsewhere (`unload_partition`).
"""

from __future__ import annotations

import base64
import logging
import uuid
from collections.abc import Callable
from dataclasses import dataclass

import trio

from wire.errors import ErrorCode

from server.coordinator_log import CoordinatorLog, ReplayCounts, append_error, partition_for_key
from server.errors import KafkaError, error_code_for
from server.groups.share import records as rec

log = logging.getLogger("trafka.share")

ShareKey = tuple[str, uuid.UUID, int]  # (group id, topic id, partition)
States = dict[int, tuple[int, int]]  # offset -> (delivery state, delivery count)
UNINITIALIZED_START_OFFSET = -1  # Kafka's PartitionFactory.UNINITIALIZED_START_OFFSET


def kafka_uuid_text(value: uuid.UUID) -> str:
    """Kafka's Uuid.toString: URL-safe base64 of the 16 bytes, unpadded."""
    return base64.urlsafe_b64encode(value.bytes).decode().rstrip("=")


def coordinator_key(key: ShareKey) -> str:
    """Kafka's SharePartitionKey.asCoordinatorKey: "group:topicId:partition"."""
    group_id, topic_id, index = key
    return f"{group_id}:{kafka_uuid_text(topic_id)}:{index}"


def expand(start_offset: int, batches) -> States:
    return {o: (state, count) for first, last, state, count in batches
            for o in range(max(first, start_offset), last + 1)}


@dataclass(slots=True)
class StoredState:
    """One share partition as `__share_group_state` holds it."""

    snapshot_epoch: int
    snapshot: States  # the newest ShareSnapshot's batches
    snapshot_start: int
    updates: int  # ShareUpdates written since that snapshot
    state_epoch: int
    leader_epoch: int
    start_offset: int  # current: the snapshot with its newest update applied
    states: States

    def batches(self) -> list[rec.StateBatch]:
        return rec.runs(self.states)

    @property
    def deleted(self) -> bool:
        """Deleted (DeleteShareGroupState): only the state epoch is kept, to fence writes."""
        return self.start_offset < 0


def deleted_state(state_epoch: int, leader_epoch: int, snapshot_epoch: int = 0) -> StoredState:
    """The marker of a deleted share partition (StartOffset -1, no batches)."""
    return StoredState(snapshot_epoch, {}, UNINITIALIZED_START_OFFSET, 0, state_epoch, leader_epoch,
                       UNINITIALIZED_START_OFFSET, {})


class ShareStateStore:
    def __init__(self, broker, state_log: CoordinatorLog, updates_per_snapshot: int,
                 on_config: Callable[[str, dict[str, str] | None], None] | None = None) -> None:
        self.broker = broker
        self.log = state_log
        self.updates_per_snapshot = max(updates_per_snapshot, 1)
        self.on_config = on_config
        self.states: dict[ShareKey, StoredState] = {}
        self._topic_ready = False

    # ------------------------------------------------------------------ placement
    def partition_for(self, key: ShareKey) -> int:
        """The `__share_group_state` partition of a share partition's state."""
        cluster = self.broker.cluster
        if cluster is not None:
            count = len(cluster.cache.topics.get(rec.STATE_TOPIC, ())) or self.log.partitions
            return partition_for_key(coordinator_key(key), count)
        return self.log.partition_for(key[0])

    def _check_owned(self, key: ShareKey) -> int:
        partition = self.partition_for(key)
        if self.broker.cluster is not None:
            code = self.log.status(partition)
            if code != ErrorCode.NONE:
                raise KafkaError(f"{rec.STATE_TOPIC}-{partition} is not coordinated here ({code.name})", code)
        elif not self._topic_ready:
            self.log.ensure_topic()  # the broker's own registry call, brief
            self._topic_ready = True
        return partition

    # ------------------------------------------------------------------ read / write
    def read(self, key: ShareKey, leader_epoch: int) -> StoredState | None:
        """ReadShareGroupState: the state, None when never initialised, a `deleted` one
        (StartOffset -1, its state epoch) after DeleteShareGroupState. A leader epoch
        newer than the stored one fences older leaders from now on (the reader writes a
        snapshot next, which makes it durable); an older one is FENCED_LEADER_EPOCH."""
        self._check_owned(key)
        stored = self.states.get(key)
        if stored is None:
            return None
        self._fence(key, stored, leader_epoch)
        return stored

    @staticmethod
    def _fence(key: ShareKey, stored: StoredState, leader_epoch: int) -> None:
        if leader_epoch < stored.leader_epoch:
            raise KafkaError(f"share partition {key[0]} {key[1]}-{key[2]}: leader epoch {leader_epoch} is older "
                             f"than {stored.leader_epoch}", ErrorCode.FENCED_LEADER_EPOCH)
        stored.leader_epoch = leader_epoch

    async def write(self, key: ShareKey, *, leader_epoch: int, state_epoch: int, start_offset: int,
                    states: States) -> None:
        """WriteShareGroupState: persist the share partition's whole in-flight state (a
        ShareUpdate with what differs from the snapshot, or a new ShareSnapshot), under the
        partition's write lock so memory and log agree on order. KafkaError on refusal:
        FENCED_LEADER_EPOCH from a deposed leader, FENCED_STATE_EPOCH from a leader whose
        share partition was deleted since (its state epoch is older than the stored one)."""
        partition = self._check_owned(key)
        async with self.log.lock(partition):
            partition = self._check_owned(key)
            stored = self.states.get(key)
            if stored is not None:
                if state_epoch < stored.state_epoch:
                    raise KafkaError(f"share partition {key[0]} {key[1]}-{key[2]}: state epoch {state_epoch} is "
                                     f"older than {stored.state_epoch} (its state was deleted since)",
                                     ErrorCode.FENCED_STATE_EPOCH)
                self._fence(key, stored, leader_epoch)
            if stored is None or stored.deleted or stored.updates >= self.updates_per_snapshot:
                epoch = 0 if stored is None else (stored.snapshot_epoch + 1) % rec.SNAPSHOT_EPOCH_MODULO
                record_key = rec.ShareStateKey(*key)
                value = rec.encode_snapshot(rec.ShareSnapshot(epoch, state_epoch, start_offset, rec.runs(states),
                                                              leader_epoch))
                after = StoredState(epoch, states, start_offset, 0, state_epoch, leader_epoch, start_offset, states)
            else:
                changed = {o: v for o, v in states.items() if stored.snapshot.get(o) != v}
                start = rec.NO_START_OFFSET if start_offset == stored.snapshot_start else start_offset
                record_key = rec.ShareStateKey(*key, update=True)
                value = rec.encode_update(rec.ShareUpdate(stored.snapshot_epoch, start, rec.runs(changed),
                                                          leader_epoch))
                after = StoredState(stored.snapshot_epoch, stored.snapshot, stored.snapshot_start, stored.updates + 1,
                                    state_epoch, leader_epoch, start_offset, states)
            try:
                await self.log.append(partition, [(rec.encode_key(record_key), value)])
            except Exception as exc:  # a storage failure too: answered with its code, never a crash
                code = error_code_for(exc)
                code = append_error(code) or code
                raise KafkaError(f"share partition {key[0]} {key[1]}-{key[2]}: state not written ({exc})",
                                 code) from exc
            self.states[key] = after

    async def delete(self, key: ShareKey) -> None:
        """DeleteShareGroupState: tombstones for the share partition's ShareSnapshot and
        ShareUpdate keys, then the deleted marker — a ShareSnapshot with StartOffset -1 and
        the state epoch bumped, which fences the writes of leaders still holding the old
        state (module docstring). A share partition never initialised, or deleted already,
        is nothing to delete (no error, as Kafka)."""
        partition = self._check_owned(key)
        async with self.log.lock(partition):
            partition = self._check_owned(key)
            stored = self.states.get(key)
            if stored is not None and stored.deleted:
                return
            records = [(rec.encode_key(rec.ShareStateKey(*key)), None),
                       (rec.encode_key(rec.ShareStateKey(*key, update=True)), None)]
            marker = None
            if stored is not None:
                snapshot_epoch = (stored.snapshot_epoch + 1) % rec.SNAPSHOT_EPOCH_MODULO
                marker = deleted_state(stored.state_epoch + 1, stored.leader_epoch, snapshot_epoch)
                records.append((rec.encode_key(rec.ShareStateKey(*key)), rec.encode_snapshot(rec.ShareSnapshot(
                    snapshot_epoch, marker.state_epoch, UNINITIALIZED_START_OFFSET, [], marker.leader_epoch))))
            try:
                await self.log.append(partition, records)
            except Exception as exc:
                code = error_code_for(exc)
                code = append_error(code) or code
                raise KafkaError(f"share partition {key[0]} {key[1]}-{key[2]}: state not deleted ({exc})",
                                 code) from exc
            if marker is None:
                self.states.pop(key, None)
            else:
                self.states[key] = marker
                log.info("share partition %s %s-%d: state deleted; writes below state epoch %d are fenced", *key,
                         marker.state_epoch)

    # ------------------------------------------------------------------ replay
    def _replay(self, partitions: list[int], counts: ReplayCounts) -> dict[ShareKey, StoredState]:
        """Blocking: the share partitions' states in `partitions` of `__share_group_state`
        (the newest snapshot of each with the newest update of its snapshot epoch)."""
        found: dict[ShareKey, list] = {}

        def on_record(_partition, _header, record) -> None:
            key = rec.decode_key(record.key)
            if isinstance(key, rec.GroupConfigKey):
                if self.on_config is not None:
                    self.on_config(key.group_id, None if record.value is None else rec.decode_configs(record.value))
                return
            if record.value is None:  # a tombstone: the share partition's state is gone
                found.pop(key.share_partition, None)
                return
            if not key.update:
                found[key.share_partition] = [rec.decode_snapshot(record.value), None, 0]
                return
            update = rec.decode_update(record.value)
            entry = found.get(key.share_partition)
            # An update applies to the snapshot of its SnapshotEpoch, written before it;
            # one of an older snapshot (compaction keeps it ahead of the newer snapshot) is stale.
            if entry is not None and update.snapshot_epoch == entry[0].snapshot_epoch % rec.SNAPSHOT_EPOCH_MODULO:
                entry[1] = update
                entry[2] += 1

        for partition in partitions:
            self.log.replay_partition(partition, on_record, counts=counts)
        out = {}
        for key, (snapshot, update, updates) in found.items():
            state = snapshot if update is None else rec.apply_update(snapshot, update)
            leader_epoch = snapshot.leader_epoch if update is None else max(snapshot.leader_epoch, update.leader_epoch)
            out[key] = StoredState(snapshot.snapshot_epoch, expand(snapshot.start_offset, snapshot.batches),
                                   snapshot.start_offset, updates, snapshot.state_epoch, leader_epoch,
                                   state.start_offset, expand(state.start_offset, state.batches))
        return out

    def load(self) -> ReplayCounts:
        """Blocking, single broker start-up: replay every partition (the topic exists)."""
        self.log.ensure_topic()
        self._topic_ready = True
        counts = ReplayCounts()
        self.states = self._replay(list(range(self.log.partitions)), counts)
        return counts

    async def load_partition(self, partition: int, epoch: int) -> None:
        """This broker now leads `__share_group_state`-`partition`: replay it (in a worker
        thread) and answer for its keys (Kafka's share coordinator loading a shard)."""
        load_id = self.log.begin_load(partition, epoch)
        if load_id is None:
            return
        try:
            async with self.log.lock(partition):
                if not self.log.load_current(partition, load_id):
                    return
                counts = ReplayCounts()
                loaded = await trio.to_thread.run_sync(self._replay, [partition], counts)
                if not self.log.finish_load(partition, load_id):
                    log.info("%s-%d: unloaded while loading; replayed state dropped", rec.STATE_TOPIC, partition)
                    return
                for key in [k for k in self.states if self.partition_for(k) == partition]:
                    del self.states[key]
                self.states.update(loaded)
        except Exception:
            self.log.abandon_load(partition, load_id)
            log.exception("%s-%d: loading at epoch %d failed; not coordinating its share partitions",
                          rec.STATE_TOPIC, partition, epoch)
            return
        except BaseException:
            self.log.abandon_load(partition, load_id)
            raise
        log.info("%s-%d: loaded %d share partitions from %d records at coordinator epoch %d", rec.STATE_TOPIC,
                 partition, len(loaded), counts.records, epoch)

    def unload_partition(self, partition: int, epoch: int | None) -> None:
        """`__share_group_state`-`partition` is led elsewhere now: forget its states."""
        if not self.log.begin_unload(partition, epoch):
            return
        gone = [k for k in self.states if self.partition_for(k) == partition]
        for key in gone:
            del self.states[key]
        log.info("%s-%d: unloaded %d share partitions", rec.STATE_TOPIC, partition, len(gone))
