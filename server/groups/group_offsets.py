"""A group's committed offsets, as every group class holds them.

- `CommittedOffset`: one partition's committed offset and where in the log it was written.
- `GroupOffsets`: a group's committed offsets and its transactional offsets still pending
  their producer's COMMIT/ABORT marker (the base of every group class: classic, consumer
  and share groups).

Why a module of its own: the group classes (group.py, consumer/group.py) are built on
these, while the offset operations (offsets.py) work on the groups; this sits below both.
"""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(slots=True)
class CommittedOffset:
    offset: int
    leader_epoch: int = -1
    metadata: str = ""
    commit_timestamp: int = -1  # -1 in a commit: stamped with the time it is written
    # When it expires, if its commit said (OffsetCommit v2-4's retention_time_ms, written as
    # an offset value v1); -1: offsets.retention.minutes decides (Kafka's expireTimestamp).
    expire_timestamp: int = -1
    # Where in __consumer_offsets the batch that stored it starts (-1: not written yet).
    # A transactional commit becomes visible at its COMMIT marker, which may come after a
    # later plain commit of the same partition; the log position says which one is newer
    # (Kafka's CommitRecordMetadataAndOffset), in memory and when the log is replayed.
    log_offset: int = field(default=-1, compare=False)

    def older_than(self, other: "CommittedOffset") -> bool:
        return self.log_offset < other.log_offset


class GroupOffsets:
    """A group's offsets: committed ones, and transactional ones waiting for their
    producer's marker (Kafka's pendingTransactionalOffsetCommits)."""

    def __init__(self) -> None:
        self.offsets: dict[tuple[str, int], CommittedOffset] = {}
        # Transactional offset commits (TxnOffsetCommit) waiting for their producer's
        # COMMIT or ABORT marker: producer id -> partition -> offset. Not visible to
        # OffsetFetch until committed (Kafka's pendingTransactionalOffsetCommits).
        self.pending_txn_offsets: dict[int, dict[tuple[str, int], CommittedOffset]] = {}

    def has_pending_txn_offset(self, tp: tuple[str, int]) -> bool:
        """A transaction has an offset for `tp` that is not committed or aborted yet:
        OffsetFetch with require_stable answers UNSTABLE_OFFSET_COMMIT for it."""
        return any(tp in pending for pending in self.pending_txn_offsets.values())

    def pending_txn_partitions(self) -> set[tuple[str, int]]:
        return {tp for pending in self.pending_txn_offsets.values() for tp in pending}

    def complete_txn(self, producer_id: int, commit: bool) -> int:
        """The producer's transaction ended: on commit its offsets replace the committed
        ones they are newer than (a plain commit written after the transactional batch
        wins, as in Kafka's completePendingTxnOffsetCommit); on abort they are dropped.
        Returns how many offsets became committed."""
        pending = self.pending_txn_offsets.pop(producer_id, None)
        if not pending or not commit:
            return 0
        applied = 0
        for tp, committed in pending.items():
            if committed.log_offset < 0:
                # Its append had not returned, so the producer cannot have been told it
                # succeeded, and EndTxn comes after that answer (Kafka treats this as a bug).
                continue
            current = self.offsets.get(tp)
            if current is None or current.older_than(committed):
                self.offsets[tp] = committed
                applied += 1
        return applied

    def drop_pending_txn_offsets(self, tps) -> None:
        """Offsets deleted (OffsetDelete, a deleted topic, the group deleted): a pending
        transactional offset for them must not come back at its COMMIT marker."""
        for producer_id in list(self.pending_txn_offsets):
            pending = self.pending_txn_offsets[producer_id]
            for tp in tps:
                pending.pop(tp, None)
            if not pending:
                del self.pending_txn_offsets[producer_id]
