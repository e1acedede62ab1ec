"""Durable, segmented partition logs on local disk: no network, no trio, no server.

The server uses `LogManager` (the partition logs of a data directory, background duties)
and `PartitionLog` (append as leader or follower, read bounded by a max offset, offsets,
truncation, DeleteRecords) with its `LeaderEpochFileCache` (OffsetForLeaderEpoch). Storage
knows the log end offset only; the high watermark is the server's, and so is what topics
exist (server/topics.py). Calls block on disk; the server runs
the long ones (fsync-heavy appends, retention, compaction, open/close) in worker threads.
File formats follow Apache Kafka's: `{base:020d}.log` segments holding record batches as
they travel on the wire, sparse `.index` and `.timeindex` files, `.txnindex` files of
aborted transactions (`PartitionLog.append_aborted_txn` / `collect_aborted_txns`),
checkpoint files.
Module map: config (LogConfig, the topic config table), log (PartitionLog), segment,
index, txn_index (.txnindex: aborted transactions), leader_epoch (leader-epoch-checkpoint),
recovery, retention, compaction, topics (partition directory names), manager (LogManager), producer_snapshot (Kafka's .snapshot
files), open_files (the bounded LRU of open segment files, log.open.files.max), errors.
"""

from storage.compaction import CleanerStats
from storage.config import BROKER_SYNONYMS, CONFIG_TYPE_IDS, TOPIC_CONFIGS, ConfigDef, LogConfig
from storage.errors import (
    DirectoryInUse,
    InvalidConfig,
    InvalidPartitions,
    InvalidTopicName,
    LogClosed,
    LogDirFull,
    OffsetOutOfRange,
    RecordTooLarge,
    StorageError,
    TopicExists,
    UnknownTopicOrPartition,
)
from storage.leader_epoch import (
    UNDEFINED_EPOCH,
    UNDEFINED_EPOCH_OFFSET,
    EpochEntry,
    LeaderEpochFileCache,
)
from storage.log import AppendResult, PartitionLog
from storage.segment import read_exact
from storage.txn_index import AbortedTxn, TransactionIndex
from storage.manager import LogManager

__all__ = [
    "AbortedTxn",
    "AppendResult",
    "BROKER_SYNONYMS",
    "CONFIG_TYPE_IDS",
    "CleanerStats",
    "ConfigDef",
    "DirectoryInUse",
    "EpochEntry",
    "InvalidConfig",
    "InvalidPartitions",
    "InvalidTopicName",
    "LeaderEpochFileCache",
    "LogClosed",
    "LogConfig",
    "LogDirFull",
    "LogManager",
    "OffsetOutOfRange",
    "PartitionLog",
    "RecordTooLarge",
    "StorageError",
    "TOPIC_CONFIGS",
    "TopicExists",
    "TransactionIndex",
    "UNDEFINED_EPOCH",
    "UNDEFINED_EPOCH_OFFSET",
    "UnknownTopicOrPartition",
    "read_exact",
]
