"""`SharePartition`: one share group's view of one topic-partition (KIP-932).

Why a class of its own: a share group consumes a partition as a queue, so instead of one
committed offset it keeps the state of every record between the share-partition start
offset (SPSO: everything before it is settled) and end offset (SPEO: the next offset never
handed out yet). Each in-flight record is

- AVAILABLE: may be acquired by the next ShareFetch of any member;
- ACQUIRED: handed to one member, locked for `group.share.record.lock.duration.ms`; when the
  lock expires, or the member releases it or leaves, it is AVAILABLE again;
- ACKNOWLEDGED (ACCEPT) or ARCHIVED (REJECT, GAP, or its `group.share.delivery.count.limit`
  deliveries used up: a poison record): settled, never delivered again.

New records are acquired only while the in-flight window [start, end) is shorter than
`group.share.partition.max.record.locks` (Kafka's limit too), which bounds the memory a
share partition takes. Offsets in [start, end) with no entry are settled (control batches, compacted gaps,
settled records once the start moves past them), so only unsettled records take memory.
Records go out as the stored batches that hold them (no record is decoded): the batch
header's base and last offset say which offsets a batch holds, and the member is told the
acquired ranges (AcquiredRecords), dropping the batch's other records itself. Kafka's
SharePartition keeps the same states, per batch or per offset; here always per offset.

No trio here (the coordinator owns timers and persistence): times are passed in.
"""

from __future__ import annotations

import bisect
import enum
import math
import uuid
from collections.abc import Iterable
from dataclasses import dataclass

from wire.errors import CorruptRecords
from wire.records import iter_headers

from server.errors import InvalidRecordState, InvalidRequest


class RecordState(enum.IntEnum):
    """Kafka's RecordState ids (also what a persisted state batch says)."""

    AVAILABLE = 0
    ACQUIRED = 1
    ACKNOWLEDGED = 2
    ARCHIVED = 4


class AcknowledgeType(enum.IntEnum):
    """ShareFetch/ShareAcknowledge AcknowledgeTypes (v1; 4 = RENEW is v2)."""

    GAP = 0
    ACCEPT = 1
    RELEASE = 2
    REJECT = 3


@dataclass(slots=True)
class InFlight:
    state: RecordState
    delivery_count: int
    member_id: str | None = None
    deadline: float = math.inf  # lock expiry (trio clock) while ACQUIRED


@dataclass(slots=True)
class Acquired:
    """What one acquire pass hands a member: the stored batches and the ranges acquired."""

    records: list[bytes]
    ranges: list[dict]  # AcquiredRecords: first_offset, last_offset, delivery_count
    count: int
    size: int


class SharePartition:
    def __init__(self, group_id: str, topic: str, topic_id: uuid.UUID, index: int, start_offset: int, *,
                 delivery_limit: int, max_locks: int = 2000) -> None:
        self.group_id = group_id
        self.topic = topic
        self.topic_id = topic_id
        self.index = index
        self.start_offset = start_offset
        self.end_offset = start_offset
        self.delivery_limit = max(delivery_limit, 1)
        self.max_locks = max(max_locks, 1)
        self.records: dict[int, InFlight] = {}
        self.state_epoch = 0
        # The leader epoch of the data partition this state is served under (a cluster:
        # a share partition is re-read from the share coordinator when it changes).
        self.leader_epoch = 0
        self.retired = False  # its group was deleted: nothing more is written for it

    @property
    def key(self) -> tuple[str, uuid.UUID, int]:
        """(group id, topic id, partition): the share coordinator's key for it."""
        return (self.group_id, self.topic_id, self.index)

    def __repr__(self) -> str:
        return f"SharePartition({self.group_id} {self.topic}-{self.index} [{self.start_offset}, {self.end_offset}))"

    # ------------------------------------------------------------------ settling
    def _advance_start(self) -> None:
        """Move the start offset past settled records, forgetting them."""
        records = self.records
        start = self.start_offset
        while start < self.end_offset:
            entry = records.get(start)
            if entry is not None and entry.state in (RecordState.AVAILABLE, RecordState.ACQUIRED):
                break
            records.pop(start, None)
            start += 1
        self.start_offset = start

    def _give_back(self, entry: InFlight) -> None:
        """An acquired record comes back: AVAILABLE, or ARCHIVED once its deliveries are used up."""
        entry.state = RecordState.ARCHIVED if entry.delivery_count >= self.delivery_limit else RecordState.AVAILABLE
        entry.member_id = None
        entry.deadline = math.inf

    def clamp_to_log(self, log_start: int) -> None:
        """Records deleted from the log (retention, DeleteRecords) are settled."""
        if self.start_offset < log_start:
            for offset in [o for o in self.records if o < log_start]:
                del self.records[offset]
            self.start_offset = log_start
            self.end_offset = max(self.end_offset, log_start)
            self._advance_start()

    # ------------------------------------------------------------------ acquire
    def has_available(self) -> bool:
        return any(r.state == RecordState.AVAILABLE for r in self.records.values())

    def acquire(self, plog, upto: int, member_id: str, max_records: int, max_bytes: int,
                lock_deadline: float, *, read_committed: bool = False) -> Acquired:
        """Acquire for `member_id` up to `max_records` records (exceeded only to finish a
        batch) below `upto` (the high watermark, or with `read_committed` the last stable
        offset): AVAILABLE records first (redeliveries), then records never delivered.
        Returns the stored batches holding them. With `read_committed` the batches of
        aborted transactions are settled (archived) instead, never delivered: a share
        consumer gets no aborted-transaction list to filter with."""
        out = Acquired([], [], 0, 0)
        self.clamp_to_log(plog.log_start_offset)
        if max_records <= 0:
            return out
        available = sorted(o for o, r in self.records.items() if r.state == RecordState.AVAILABLE)
        pos = available[0] if available else self.end_offset
        budget = max_bytes
        while out.count < max_records and pos < upto and budget > 0:
            if pos >= self.end_offset and self.end_offset - self.start_offset >= self.max_locks:
                break  # the in-flight window is full (group.share.partition.max.record.locks)
            data = plog.read(pos, budget, max_offset=upto, min_one_batch=not out.records)
            if not data:
                break
            moved = False
            try:
                headers = list(iter_headers(data, check_crc=False))
            except CorruptRecords:
                break
            full = False
            for at, header in headers:
                if header.last_offset < pos:
                    continue
                if header.base_offset >= self.end_offset and self.end_offset - self.start_offset >= self.max_locks:
                    full = True
                    break
                moved = True
                if header.is_control or (read_committed and header.is_transactional
                                         and self._aborted(plog, header)):
                    # Transaction markers (and aborted records, read_committed) are never
                    # delivered: settled (no entry).
                    self.end_offset = max(self.end_offset, header.next_offset)
                    for offset in range(header.base_offset, header.next_offset):
                        self.records.pop(offset, None)
                    pos = header.next_offset
                    continue
                took = self._acquire_batch(max(header.base_offset, pos, self.start_offset), header.next_offset,
                                           member_id, lock_deadline, out)
                self.end_offset = max(self.end_offset, header.next_offset)
                if took:
                    chunk = bytes(data[at:at + header.size])
                    out.records.append(chunk)
                    out.size += len(chunk)
                    budget -= len(chunk)
                pos = header.next_offset
                if out.count >= max_records or budget <= 0:
                    break
                if pos < self.end_offset:
                    break  # redelivery: jump to the next AVAILABLE record below
            if not moved or full:
                break
            if pos < self.end_offset:
                i = bisect.bisect_left(available, pos)
                while i < len(available) and self.records.get(available[i]) is not None \
                        and self.records[available[i]].state != RecordState.AVAILABLE:
                    i += 1
                pos = available[i] if i < len(available) else self.end_offset
        self._advance_start()
        return out

    @staticmethod
    def _aborted(plog, header) -> bool:
        return any(t.producer_id == header.producer_id and t.first_offset <= header.base_offset <= t.last_offset
                   for t in plog.collect_aborted_txns(header.base_offset, header.next_offset))

    def _acquire_batch(self, first: int, stop: int, member_id: str, deadline: float, out: Acquired) -> bool:
        took = False
        ranges = out.ranges
        for offset in range(first, stop):
            if offset >= self.end_offset:
                entry = self.records[offset] = InFlight(RecordState.ACQUIRED, 1, member_id, deadline)
            else:
                entry = self.records.get(offset)
                if entry is None or entry.state != RecordState.AVAILABLE:
                    continue
                entry.state = RecordState.ACQUIRED
                entry.delivery_count += 1
                entry.member_id = member_id
                entry.deadline = deadline
            took = True
            out.count += 1
            last = ranges[-1] if ranges else None
            if last is not None and last["last_offset"] == offset - 1 \
                    and last["delivery_count"] == entry.delivery_count:
                last["last_offset"] = offset
            else:
                ranges.append({"first_offset": offset, "last_offset": offset, "delivery_count": entry.delivery_count})
        return took

    # ------------------------------------------------------------------ acknowledge
    def acknowledge(self, member_id: str, batches: Iterable[dict]) -> list[tuple[int, InFlight, InFlight]]:
        """Apply one partition's AcknowledgementBatches for `member_id`, all or nothing;
        returns what `rollback` needs to undo them (offset, the record, its state before).
        InvalidRequest for a malformed batch (empty, overlapping or out of order, the wrong
        number of acknowledge types, an unknown type); InvalidRecordState when a record is not
        acquired by this member (never acquired, settled, lock expired, another's)."""
        plan: list[tuple[int, int, list[int]]] = []
        previous_last = -1
        # The request's shape first, all batches (Kafka checks it before any record state).
        for batch in batches:
            first, last, types = batch["first_offset"], batch["last_offset"], batch["acknowledge_types"]
            if first > last or first < 0:
                raise InvalidRequest(f"acknowledgement batch [{first}, {last}] is empty")
            if first <= previous_last:
                # Kafka's validateAcknowledgementBatches: batches ascend and do not overlap,
                # so no offset is acknowledged twice in one request.
                raise InvalidRequest(f"acknowledgement batch [{first}, {last}] overlaps or precedes the one "
                                     f"ending at {previous_last}")
            previous_last = last
            if len(types) not in (1, last - first + 1):
                raise InvalidRequest(f"acknowledgement batch [{first}, {last}] has {len(types)} acknowledge types")
            if any(t not in (0, 1, 2, 3) for t in types):
                raise InvalidRequest(f"acknowledge types {sorted(set(types))}: only 0-3 exist at version 1")
            plan.append((first, last, types))
        # Then the records: every one must be acquired by this member.
        for first, last, _types in plan:
            if first < self.start_offset or last >= self.end_offset:
                raise InvalidRecordState(f"{self.topic}-{self.index}: offsets [{first}, {last}] are not in flight "
                                         f"(share partition [{self.start_offset}, {self.end_offset}))")
            for offset in range(first, last + 1):
                entry = self.records.get(offset)
                if entry is None or entry.state != RecordState.ACQUIRED or entry.member_id != member_id:
                    state = "settled" if entry is None else entry.state.name
                    raise InvalidRecordState(f"{self.topic}-{self.index} offset {offset} is {state}, not acquired "
                                             f"by {member_id}")
        undo = []
        for first, last, types in plan:
            for offset in range(first, last + 1):
                kind = types[0] if len(types) == 1 else types[offset - first]
                entry = self.records[offset]
                undo.append((offset, entry, InFlight(entry.state, entry.delivery_count, entry.member_id,
                                                     entry.deadline)))
                if kind == AcknowledgeType.ACCEPT:
                    entry.state = RecordState.ACKNOWLEDGED
                elif kind == AcknowledgeType.RELEASE:
                    self._give_back(entry)
                    continue
                else:  # REJECT, GAP
                    entry.state = RecordState.ARCHIVED
                entry.member_id = None
                entry.deadline = math.inf
        self._advance_start()
        return undo

    def rollback(self, undo: list[tuple[int, InFlight, InFlight]], applied: dict[int, RecordState]) -> int:
        """Undo acknowledgements whose state could not be written (Kafka's share partition
        rolls back the same way): each record goes back to ACQUIRED by its member (with its
        lock deadline; expired, it comes back AVAILABLE at the next sweep), unless something
        changed it since (a released record acquired again). `applied`: offset -> the state
        the acknowledgement gave it. Returns how many were rolled back."""
        count = 0
        for offset, entry, before in undo:
            current = self.records.get(offset)
            if current is not None and current is not entry:
                continue
            if entry.state != applied.get(offset) or (current is None and offset >= self.end_offset):
                continue
            entry.state, entry.member_id, entry.deadline = before.state, before.member_id, before.deadline
            self.records[offset] = entry
            self.start_offset = min(self.start_offset, offset)
            count += 1
        if count:
            self._advance_start()
        return count

    def release_member(self, member_id: str) -> int:
        """Everything `member_id` holds comes back (it left, or closed its share session)."""
        count = 0
        for entry in self.records.values():
            if entry.state == RecordState.ACQUIRED and entry.member_id == member_id:
                self._give_back(entry)
                count += 1
        if count:
            self._advance_start()
        return count

    def expire_locks(self, now: float) -> int:
        """Acquisition locks past their deadline: the records come back."""
        count = 0
        for entry in self.records.values():
            if entry.state == RecordState.ACQUIRED and entry.deadline <= now:
                self._give_back(entry)
                count += 1
        if count:
            self._advance_start()
        return count

    def next_lock_deadline(self) -> float:
        return min((r.deadline for r in self.records.values() if r.state == RecordState.ACQUIRED), default=math.inf)

    # ------------------------------------------------------------------ persisted state
    def state_map(self) -> dict[int, tuple[int, int]]:
        """Every offset of [start, end) as (delivery state, delivery count), what the
        ShareSnapshot / ShareUpdate StateBatches say: ACQUIRED is written as AVAILABLE (as
        Kafka's share coordinator does: a lock does not survive a restart, the delivery
        does), and an offset with no entry (a transaction marker, a compacted gap, aborted
        records under read_committed) as ARCHIVED with no delivery."""
        out = {}
        records = self.records
        for offset in range(self.start_offset, self.end_offset):
            entry = records.get(offset)
            if entry is None:
                out[offset] = (int(RecordState.ARCHIVED), 0)
            elif entry.state == RecordState.ACQUIRED:
                out[offset] = (int(RecordState.AVAILABLE), entry.delivery_count)
            else:
                out[offset] = (int(entry.state), entry.delivery_count)
        return out

    def restore(self, start_offset: int, batches: Iterable[tuple[int, int, int, int]]) -> None:
        """The state a replayed snapshot (with its update applied) describes: the end offset
        is past the last state batch; AVAILABLE records can be acquired again, settled ones
        keep their state until the start offset moves past them."""
        self.start_offset = start_offset
        self.records = {}
        end = start_offset
        for first, last, state, count in batches:
            end = max(end, last + 1)
            kind = RecordState(state) if state in (0, 2, 4) else RecordState.ARCHIVED
            if kind == RecordState.ACQUIRED:
                kind = RecordState.AVAILABLE
            for offset in range(max(first, start_offset), last + 1):
                self.records[offset] = InFlight(kind, count)
        self.end_offset = end
        self._advance_start()
