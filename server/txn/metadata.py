"""One transactional id's state, as the transaction coordinator keeps it.

The states and their numbers are Kafka's (TransactionState.scala), because they are what
`__transaction_state` stores and what DescribeTransactions/ListTransactions report:

    Empty ──AddPartitions──▶ Ongoing ──EndTxn──▶ PrepareCommit ──markers──▶ CompleteCommit
                                │      └───────▶ PrepareAbort  ──markers──▶ CompleteAbort
                                └── InitProducerId / timeout: PrepareEpochFence → PrepareAbort

Complete* and Empty accept a new transaction (AddPartitionsToTxn) or a new epoch
(InitProducerId). PrepareEpochFence lives only in memory: the epoch is bumped to fence the
old producer and the ongoing transaction is then aborted under the new epoch.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, field

MAX_EPOCH = 32766  # Short.MaxValue - 1: the last epoch before a producer id must change


class TxnState(enum.IntEnum):
    EMPTY = 0
    ONGOING = 1
    PREPARE_COMMIT = 2
    PREPARE_ABORT = 3
    COMPLETE_COMMIT = 4
    COMPLETE_ABORT = 5
    DEAD = 6
    PREPARE_EPOCH_FENCE = 7

    @property
    def kafka_name(self) -> str:
        """The name Kafka's admin APIs use (DescribeTransactions, ListTransactions filters)."""
        return _NAMES[self]


_NAMES = {
    TxnState.EMPTY: "Empty", TxnState.ONGOING: "Ongoing", TxnState.PREPARE_COMMIT: "PrepareCommit",
    TxnState.PREPARE_ABORT: "PrepareAbort", TxnState.COMPLETE_COMMIT: "CompleteCommit",
    TxnState.COMPLETE_ABORT: "CompleteAbort", TxnState.DEAD: "Dead",
    TxnState.PREPARE_EPOCH_FENCE: "PrepareEpochFence",
}
STATE_BY_NAME = {name.lower(): state for state, name in _NAMES.items()}

# States in which a transaction may start (AddPartitionsToTxn) or the epoch be bumped.
IDLE = frozenset({TxnState.EMPTY, TxnState.COMPLETE_COMMIT, TxnState.COMPLETE_ABORT})
PREPARING = frozenset({TxnState.PREPARE_COMMIT, TxnState.PREPARE_ABORT})


@dataclass(slots=True)
class TransactionMetadata:
    transactional_id: str
    producer_id: int
    producer_epoch: int
    timeout_ms: int
    state: TxnState = TxnState.EMPTY
    partitions: set[tuple[str, int]] = field(default_factory=set)
    start_ms: int = -1
    last_update_ms: int = -1
    # The id and epoch before the last bump: a retried InitProducerId (KIP-360) whose answer
    # was lost names them and gets the current ones back instead of being fenced.
    last_producer_id: int = -1
    last_producer_epoch: int = -1
    # A state change being written to __transaction_state or markers being written: another
    # request for this id meanwhile gets CONCURRENT_TRANSACTIONS, as in Kafka.
    pending: bool = False

    def partitions_by_topic(self) -> dict[str, list[int]]:
        out: dict[str, list[int]] = {}
        for topic, index in sorted(self.partitions):
            out.setdefault(topic, []).append(index)
        return out
