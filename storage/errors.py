"""Storage's own exceptions.

Storage knows nothing of the Kafka protocol, so it raises these and the server maps them to
error codes in one place (server/errors.py). Each class names the Kafka error it usually
becomes, as a hint for that table.
"""

from __future__ import annotations


class StorageError(Exception):
    """Anything storage refuses or fails at (KAFKA_STORAGE_ERROR unless a subclass says otherwise)."""


class DirectoryInUse(StorageError):
    """Another process holds the data directory's lock (Kafka: "Failed to acquire lock on
    file .lock ... A Kafka instance in another process or thread is using this directory")."""


class TopicExists(StorageError):
    """create_topic for a name that already exists (TOPIC_ALREADY_EXISTS)."""


class UnknownTopicOrPartition(StorageError):
    """No such topic, or no such partition of it (UNKNOWN_TOPIC_OR_PARTITION)."""


class InvalidTopicName(StorageError):
    """A name that cannot be a Kafka topic or a directory name (INVALID_TOPIC_EXCEPTION)."""


class InvalidConfig(StorageError):
    """An unknown topic config name or a value it cannot take (INVALID_CONFIG).

    With the offending `value`, the message is Kafka's ConfigException wording
    ("Invalid value abc for configuration retention.ms: Not a number of type LONG"), which
    Kafka's tools print as the broker's answer; `unknown()` is Kafka's wording for a name
    that is not a topic config."""

    def __init__(self, name: str, reason: str, value: object = None, *, message: str | None = None) -> None:
        if message is None:
            message = (f"Invalid value {value} for configuration {name}: {reason}" if value is not None
                       else f"{name}: {reason}")
        super().__init__(message)
        self.name = name
        self.reason = reason
        self.value = value

    @classmethod
    def unknown(cls, name: str) -> "InvalidConfig":
        return cls(name, "unknown topic config", message=f"Unknown topic config name: {name}")


class InvalidPartitions(StorageError):
    """A partition count that is not positive, or does not grow (INVALID_PARTITIONS)."""


class OffsetOutOfRange(StorageError):
    """An offset below the log start offset or above the log end offset (OFFSET_OUT_OF_RANGE)."""

    def __init__(self, offset: int, log_start_offset: int, log_end_offset: int) -> None:
        super().__init__(
            f"offset {offset} outside [{log_start_offset}, {log_end_offset}]"
        )
        self.offset = offset
        self.log_start_offset = log_start_offset
        self.log_end_offset = log_end_offset


class RecordTooLarge(StorageError):
    """A batch bigger than max.message.bytes (MESSAGE_TOO_LARGE)."""


class LogDirFull(StorageError):
    """The disk (or the file size limit) refused a write; the log was cut back to its last
    whole batch, so it stays consistent (KAFKA_STORAGE_ERROR)."""


class LogClosed(StorageError):
    """The partition log was closed (its topic deleted, or the broker shutting down)."""
