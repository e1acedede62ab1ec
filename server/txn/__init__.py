"""Transactions (KIP-98): the transaction coordinator, its `__transaction_state` records and
the marker path to partitions."""

from server.txn.coordinator import TXN_TOPIC, TransactionCoordinator
from server.txn.metadata import TransactionMetadata, TxnState

__all__ = ["TXN_TOPIC", "TransactionCoordinator", "TransactionMetadata", "TxnState"]
