"""Durable, segmented partition logs on local disk: no network, no trio, no server.

The server uses `LogManager` (topics, partitions, background duties) and `PartitionLog`
(append as leader or follower, read bounded by a max offset, offsets, truncation,
DeleteRecords) with its `LeaderEpochFileCache` (OffsetForLeaderEpoch). Storage knows the
log end offset only; the high watermark is the server's. Calls block on disk; the server runs
the long ones (fsync-heavy appends, retention, compaction, open/close) in worker threads.
File formats follow Apache Kafka's: `{base:020d}.log` segments holding record batches as
they travel on the wire, sparse `.index` and `.timeindex` files, checkpoint files.
Module map: config (LogConfig, the topic config table), log (PartitionLog), segment,
index, leader_epoch (leader-epoch-checkpoint), recovery, retention, compaction, topics
(TopicMeta), manager (LogManager), errors.
"""

from storage.compaction import CleanerStats
from storage.config import BROKER_SYNONYMS, CONFIG_TYPE_IDS, TOPIC_CONFIGS, ConfigDef, LogConfig
from storage.errors import (
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
from storage.manager import LogManager
from storage.topics import TopicMeta

__all__ = [
    "AppendResult",
    "BROKER_SYNONYMS",
    "CONFIG_TYPE_IDS",
    "CleanerStats",
    "ConfigDef",
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
    "TopicMeta",
    "UNDEFINED_EPOCH",
    "UNDEFINED_EPOCH_OFFSET",
    "UnknownTopicOrPartition",
]
