"""Committed offsets: what OffsetCommit, TxnOffsetCommit, OffsetFetch, OffsetDelete,
offsets retention and topic deletion do, for every kind of group.

Why a module of its own: offsets are the same whichever protocol a group's members
speak — the classic one (JoinGroup/SyncGroup, server/groups/coordinator.py) or KIP-848's
(ConsumerGroupHeartbeat, server/groups/consumer/). Only *who may commit* differs (a
generation vs a member epoch), and that check is the coordinator's `_commit_check` /
`_txn_commit_check`.

- `CommittedOffset` and `GroupOffsets` (the base of every group class) are in
  group_offsets.py, below the group classes that this module's operations work on.
- `OffsetReplay`: the replay of offset records (and transaction markers) at load time.
- `OffsetStore`: the coordinator's offset operations, a mixin over the coordinator's
  `groups`, `log`, locks, `_commit_check`, `_txn_commit_check`, `_new_group`, `_append`
  and `_write_error`.

The rules (log order for transactional offsets, retention, tombstones) are documented in
server/groups/coordinator.py's module docstring.
"""

from __future__ import annotations

import logging

from wire.errors import ErrorCode
from wire.records import BatchHeader, ControlType, Record

from server.coordinator_log import BadRecord, CoordinatorLog
from server.groups.group import Group
from server.groups.group_offsets import CommittedOffset
from server.groups.group_state import GroupState
from server.groups import records as rec
from server.groups.consumer import records as crec

log = logging.getLogger("trafka.groups")

E = ErrorCode
S = GroupState

MAX_METADATA_BYTES = 4096  # offset.metadata.max.bytes


class OffsetReplay:
    """Replay of __consumer_offsets' offset records, in log order, into the offsets `load()`
    puts back in memory; records of other kinds go to `on_group_record` (the coordinator's
    subclass reads its group records there).

    Records of a transactional batch are pending under (offsets partition, producer id)
    until that producer's marker on the same partition: COMMIT makes them committed unless
    a plain commit later in the log already replaced them, ABORT drops them, and without a
    marker they stay pending (the transaction coordinator writes it later). A plain
    tombstone deletes the committed offset and any pending one for the partition, as the
    in-memory deletions do (Kafka's GroupMetadataManager.doLoadGroupsAndOffsets, with the
    KIP-848 coordinator's rule for tombstones)."""

    def __init__(self) -> None:
        self.offsets: dict[str, dict[tuple[str, int], CommittedOffset]] = {}
        self.pending: dict[tuple[int, int], dict[tuple[str, tuple[str, int]], CommittedOffset]] = {}

    def on_record(self, partition: int, header: BatchHeader, record: Record) -> None:
        if record.key is None:
            raise BadRecord("record without a key")
        if crec.key_version(record.key) in crec.KEY_VERSIONS:
            self.on_group_record(crec.decode_key(record.key), record)
            return
        key = rec.decode_key(record.key)
        if not isinstance(key, rec.OffsetKey):
            self.on_group_record(key, record)
            return
        tp = (key.topic, key.partition)
        committed = None
        if record.value is not None:
            v = rec.decode_offset_value(record.value)
            committed = CommittedOffset(v.offset, v.leader_epoch, v.metadata, v.commit_timestamp,
                                        v.expire_timestamp, header.base_offset)
        if header.is_transactional:
            pending = self.pending.setdefault((partition, header.producer_id), {})
            if committed is None:
                pending.pop((key.group, tp), None)
            else:
                pending[(key.group, tp)] = committed
            return
        per_group = self.offsets.setdefault(key.group, {})
        if committed is not None:
            per_group[tp] = committed
            return
        per_group.pop(tp, None)
        for (p, _producer_id), pending in self.pending.items():
            if p == partition:
                pending.pop((key.group, tp), None)

    def on_group_record(self, key, record: Record) -> None:
        """A record that is not an offset (a classic group's metadata, a KIP-848 consumer
        group's records): the subclass's business."""

    def on_marker(self, partition: int, header: BatchHeader, kind: ControlType) -> None:
        pending = self.pending.pop((partition, header.producer_id), None)
        if not pending or kind != ControlType.COMMIT:
            return
        for (group_id, tp), committed in pending.items():
            per_group = self.offsets.setdefault(group_id, {})
            current = per_group.get(tp)
            if current is None or current.older_than(committed):
                per_group[tp] = committed


def _expired(committed: CommittedOffset, due: int, now: int) -> bool:
    """Kafka's GroupMetadata.getExpiredOffsets: an offset whose commit gave it an expire
    timestamp (OffsetCommit v2-4's retention_time_ms) goes then; any other when its group's
    retention, counted from `due`'s base, has passed."""
    if committed.expire_timestamp >= 0:
        return now >= committed.expire_timestamp
    return due <= now


class OffsetStore:
    """The coordinator's offset operations (a mixin of `GroupCoordinator`)."""

    # Provided by the coordinator.
    groups: dict
    log: CoordinatorLog
    broker: object
    retention_ms: int
    _txn_groups: dict[int, set[str]]

    def _valid_offsets(self, offsets: dict[tuple[str, int], CommittedOffset]
                       ) -> tuple[dict[tuple[str, int], ErrorCode], dict[tuple[str, int], CommittedOffset]]:
        """Per-partition checks of a commit: the errors, and the offsets that passed."""
        results: dict[tuple[str, int], ErrorCode] = {}
        valid: dict[tuple[str, int], CommittedOffset] = {}
        exists = self.broker.partition_exists
        for tp, committed in offsets.items():
            if not exists(*tp):
                results[tp] = E.UNKNOWN_TOPIC_OR_PARTITION
            elif committed.metadata and len(committed.metadata.encode("utf-8")) > MAX_METADATA_BYTES:
                results[tp] = E.OFFSET_METADATA_TOO_LARGE
            else:
                valid[tp] = committed
        return results, valid

    def _offset_entries(self, group_id: str, valid: dict[tuple[str, int], CommittedOffset]
                        ) -> list[tuple[bytes, bytes]]:
        """The records of a commit, stamped with the commit time unless the commit gave one
        (OffsetCommit v1's commit_timestamp, which Kafka keeps as given)."""
        now = self.now_ms()
        entries = []
        for (topic, p), committed in valid.items():
            if committed.commit_timestamp == -1:
                committed.commit_timestamp = now
            entries.append((rec.encode_offset_key(rec.OffsetKey(group_id, topic, p)),
                            rec.encode_offset_value(rec.OffsetValue(
                                committed.offset, committed.leader_epoch, committed.metadata or "",
                                committed.commit_timestamp, committed.expire_timestamp))))
        return entries

    def _is_share_group(self, group_id: str) -> bool:
        """A share group's id (KIP-932, server/groups/share/): its offsets are the share
        coordinator's, so OffsetCommit/OffsetFetch answer GROUP_ID_NOT_FOUND, as Kafka's
        ShareGroup does, rather than create a classic group that would take the id."""
        share = getattr(self.broker, "share", None)
        return share is not None and group_id in share.groups

    async def commit_offsets(self, *, group_id: str, generation_id: int, member_id: str,
                             group_instance_id: str | None,
                             offsets: dict[tuple[str, int], CommittedOffset],
                             api_version: int = 0) -> dict[tuple[str, int], ErrorCode]:
        """Validate and durably store committed offsets; one error code per partition.
        `api_version`: OffsetCommit v9+ answers a member's commit to a group that does not
        exist GROUP_ID_NOT_FOUND, older versions ILLEGAL_GENERATION (Kafka's
        validateOffsetCommit)."""
        results, valid = self._valid_offsets(offsets)
        if not valid:
            return results
        partition = self.partition_for(group_id)
        async with self._locked(group_id) as status:
            if status != E.NONE:
                results.update({tp: status for tp in valid})
                return results
            group = self.groups.get(group_id)
            error = self._commit_check(group, generation_id, member_id, group_instance_id)
            if group is None and error == E.ILLEGAL_GENERATION and api_version >= 9:
                error = E.GROUP_ID_NOT_FOUND
            if group is None and self._is_share_group(group_id):
                error = E.GROUP_ID_NOT_FOUND
            if error == E.NONE and group is None:
                group = self._new_group(group_id)
            if error != E.NONE:
                log.debug("group %s: commit from %s (generation %d) refused: %s", group_id, member_id or "-",
                          generation_id, error.name)
                for tp in valid:
                    results[tp] = error
                return results
            entries = self._offset_entries(group_id, valid)
            try:
                base_offset = await self._append(partition, entries)
            except Exception as exc:
                code = self._write_error(exc, f"commit of group {group_id}")
                for tp in valid:
                    results[tp] = code
                return results
            for committed in valid.values():
                committed.log_offset = base_offset
            group.offsets.update(valid)
            for tp in valid:
                results[tp] = E.NONE
        return results

    async def commit_txn_offsets(self, *, group_id: str, producer_id: int, producer_epoch: int, generation_id: int,
                                 member_id: str, group_instance_id: str | None,
                                 offsets: dict[tuple[str, int], CommittedOffset]) -> dict[tuple[str, int], ErrorCode]:
        """TxnOffsetCommit: store offsets as part of the producer's transaction, in one
        transactional batch; they stay pending (invisible to OffsetFetch) until
        `complete_txn` is told the transaction's marker was written. One error code per
        partition. The caller has checked that the offsets partition is in the
        producer's transaction."""
        results, valid = self._valid_offsets(offsets)
        if not valid:
            return results
        partition = self.partition_for(group_id)
        async with self._locked(group_id) as status:
            if status != E.NONE:
                results.update({tp: status for tp in valid})
                return results
            group = self.groups.get(group_id)
            # Kafka creates the group for a transactional commit: a producer may commit
            # for a group no consumer has joined yet.
            error = self._txn_commit_check(group, group_id, generation_id, member_id,
                                           group_instance_id)
            if group is None and self._is_share_group(group_id):
                error = E.GROUP_ID_NOT_FOUND
            if error != E.NONE:
                log.debug("group %s: transactional commit from producer %d (member %s, generation %d) refused: %s",
                          group_id, producer_id, member_id or "-", generation_id, error.name)
                for tp in valid:
                    results[tp] = error
                return results
            if group is None:
                group = self._new_group(group_id)
            entries = self._offset_entries(group_id, valid)
            # Pending before the append, as Kafka's prepareTxnOffsetCommit: require_stable
            # fetches see the partition as unstable while the write is in flight.
            pending = group.pending_txn_offsets.setdefault(producer_id, {})
            pending.update(valid)
            self._txn_groups.setdefault(producer_id, set()).add(group_id)
            try:
                base_offset = await self.log.append(partition, entries, producer_id=producer_id,
                                                    producer_epoch=producer_epoch)
            except Exception as exc:
                code = self._write_error(exc, f"transactional commit of group {group_id}")
                mine = group.pending_txn_offsets.get(producer_id)
                if mine is not None:
                    for tp, committed in valid.items():
                        if mine.get(tp) is committed:
                            del mine[tp]
                    if not mine:
                        del group.pending_txn_offsets[producer_id]
                for tp in valid:
                    results[tp] = code
                return results
            for committed in valid.values():
                committed.log_offset = base_offset
            for tp in valid:
                results[tp] = E.NONE
        return results

    def complete_txn(self, offsets_partition: int, producer_id: int, commit: bool) -> None:
        """A COMMIT or ABORT marker of `producer_id` was written to
        __consumer_offsets-`offsets_partition`: the producer's pending offsets of the
        groups on that partition become committed (unless a later plain commit replaced
        them) or are dropped (Kafka's handleTxnCompletion)."""
        if offsets_partition in self.log.loading:
            # The replay may already have passed the marker's offset: apply it once loaded.
            self._deferred_txn.setdefault(offsets_partition, []).append((producer_id, commit))
        group_ids = self._txn_groups.pop(producer_id, None)
        if not group_ids:
            return
        elsewhere = set()
        for group_id in group_ids:
            if self.partition_for(group_id) != offsets_partition:
                elsewhere.add(group_id)
                continue
            group = self.groups.get(group_id)
            if group is None or group.is_(S.DEAD):
                continue
            applied = group.complete_txn(producer_id, commit)
            log.debug("group %s: transaction of producer %d %s (%d offsets committed)", group_id, producer_id,
                      "committed" if commit else "aborted", applied)
        if elsewhere:
            self._txn_groups[producer_id] = elsewhere

    def pending_txn_partitions(self, group_id: str) -> set[tuple[str, int]]:
        """Partitions of the group with a transactional offset not committed or aborted
        yet: OffsetFetch with require_stable answers UNSTABLE_OFFSET_COMMIT for them."""
        if self.group_status(group_id) != E.NONE:
            return set()
        group = self.groups.get(group_id)
        if group is None or group.is_(S.DEAD):
            return set()
        return group.pending_txn_partitions()

    def fetch_offsets(self, group_id: str, partitions: list[tuple[str, int]] | None,
                      member_id: str | None = None, member_epoch: int = -1
                      ) -> tuple[ErrorCode, dict[tuple[str, int], CommittedOffset | None]]:
        """Committed offsets of `partitions` (None: every partition with one). A group
        nobody knows has no offsets, which is not an error; a group coordinated elsewhere or
        still loading is (`group_status`). OffsetFetch v9 names the member and its epoch,
        checked by `_fetch_check` (a KIP-848 member: UNKNOWN_MEMBER_ID, STALE_MEMBER_EPOCH)."""
        status = self.group_status(group_id)
        if status != E.NONE:
            return status, {}
        group = self.groups.get(group_id)
        if group is None and self._is_share_group(group_id):
            return E.GROUP_ID_NOT_FOUND, {}
        if group is not None and (member_id or member_epoch >= 0):
            error = self._fetch_check(group, member_id, member_epoch)
            if error != E.NONE:
                return error, {}
        offsets = {} if group is None or group.is_(S.DEAD) else group.offsets
        if partitions is None:
            return E.NONE, dict(offsets)
        return E.NONE, {tp: offsets.get(tp) for tp in partitions}

    async def _drop_offsets(self, group: Group, partition: int, tps: list[tuple[str, int]], what: str,
                            also: list[tuple[bytes, None]] | None = None) -> ErrorCode:
        """Tombstone ``tps`` of ``group`` (and the records in ``also``) in __consumer_offsets,
        then forget them; the caller holds the offsets partition's lock. NONE, or the write's
        error code, in which case nothing was forgotten."""
        entries = [(rec.encode_offset_key(rec.OffsetKey(group.group_id, t, p)), None) for t, p in tps]
        entries.extend(also or ())
        try:
            await self._append(partition, entries)
        except Exception as exc:
            return self._write_error(exc, what)
        for tp in tps:
            group.offsets.pop(tp, None)
        group.drop_pending_txn_offsets(tps)
        return E.NONE

    async def delete_offsets(self, group_id: str, partitions: list[tuple[str, int]]
                             ) -> tuple[ErrorCode, dict[tuple[str, int], ErrorCode]]:
        """OffsetDelete: only for partitions the group does not consume right now."""
        partition = self.partition_for(group_id)
        async with self._locked(group_id) as status:
            if status != E.NONE:
                return status, {}
            group = self.groups.get(group_id)
            if group is None or group.is_(S.DEAD):
                return E.GROUP_ID_NOT_FOUND, {}
            results: dict[tuple[str, int], ErrorCode] = {}
            deletable = []
            if group.is_(S.EMPTY):
                deletable = list(partitions)
            elif group.protocol_type == "consumer":
                for tp in partitions:
                    if group.is_subscribed_to(tp[0]):
                        results[tp] = E.GROUP_SUBSCRIBED_TO_TOPIC
                    else:
                        deletable.append(tp)
            else:
                return E.NON_EMPTY_GROUP, {}
            present = [tp for tp in deletable if tp in group.offsets or group.has_pending_txn_offset(tp)]
            if present:
                code = await self._drop_offsets(group, partition, present, f"offset delete of group {group_id}")
                if code != E.NONE:
                    return code, {}
            for tp in deletable:
                results[tp] = E.NONE
            return E.NONE, results

    async def forget_topic(self, topic: str) -> int:
        """A topic was deleted: drop every group's committed offsets for it, with tombstones
        (Kafka's cleanupGroupMetadata on deleted partitions), so a topic created again under
        the same name does not hand its consumers the old positions. Returns how many went."""
        removed = 0
        def offsets_of_topic(group: Group) -> list[tuple[str, int]]:
            return [tp for tp in group.offsets.keys() | group.pending_txn_partitions() if tp[0] == topic]

        for group in list(self.groups.values()):
            if not offsets_of_topic(group):
                continue
            partition = self.partition_for(group.group_id)
            async with self._lock(partition):
                if self.groups.get(group.group_id) is not group:
                    continue  # unloaded or deleted meanwhile
                gone = offsets_of_topic(group)
                if not gone:
                    continue
                what = f"dropping offsets of deleted topic {topic} in group {group.group_id}"
                if await self._drop_offsets(group, partition, gone, what) == E.NONE:
                    removed += len(gone)
        if removed:
            log.info("deleted topic %s: removed %d committed offsets", topic, removed)
        return removed

    async def expire_offsets(self) -> int:
        """Offsets retention (offsets.retention.minutes); returns how many offsets went."""
        now = self.now_ms()
        retention = self.retention_ms
        removed = 0
        for group in list(self.groups.values()):
            if group.is_(S.DEAD):
                continue
            partition = self.partition_for(group.group_id)
            async with self._lock(partition):
                if group.is_(S.DEAD) or self.groups.get(group.group_id) is not group:
                    continue
                if group.is_(S.EMPTY):
                    if group.protocol_type:
                        # Kafka 2.1+ (KIP-211): retention counts from when the group became Empty.
                        expired = [tp for tp, o in group.offsets.items()
                                   if _expired(o, group.state_timestamp + retention, now)]
                    else:
                        expired = [tp for tp, o in group.offsets.items()
                                   if _expired(o, o.commit_timestamp + retention, now)]
                elif group.is_(S.STABLE) and group.protocol_type == "consumer":
                    topics = group.subscribed_topics()
                    expired = [] if topics is None else [
                        tp for tp, o in group.offsets.items()
                        if tp[0] not in topics and _expired(o, o.commit_timestamp + retention, now)]
                else:
                    expired = []
                # An offset a transaction is about to replace is kept, and so is a group
                # with an open transaction (the KIP-848 coordinator's rule; Kafka's
                # classic one keeps the group via hasOffsets).
                if group.pending_txn_offsets:
                    expired = [tp for tp in expired if not group.has_pending_txn_offset(tp)]
                drop_group = (group.is_(S.EMPTY) and len(expired) == len(group.offsets)
                              and not group.pending_members and not group.pending_txn_offsets)
                also = [(k, None) for k in group.deletion_keys()] if drop_group else []
                if not expired and not also:
                    continue
                if await self._drop_offsets(group, partition, expired, f"offsets retention of group {group.group_id}",
                                            also) != E.NONE:
                    continue
                removed += len(expired)
                if expired:
                    log.info("group %s: %d committed offsets expired", group.group_id, len(expired))
                if drop_group and group.is_(S.EMPTY) and not group.offsets:
                    group.transition(S.DEAD, now)
                    del self.groups[group.group_id]
                    log.info("group %s: removed (empty, no offsets)", group.group_id)
        return removed
