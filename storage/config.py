"""Per-topic log configuration under Kafka's topic config names.

`TOPIC_CONFIGS` is the table DescribeConfigs reads: every topic config Apache Kafka 4.4 knows
(message.format.version and message.timestamp.difference.max.ms, which Kafka 4.0 removed, are
unknown as they are to Kafka: INVALID_CONFIG), plus message.downconversion.enable, which Kafka
4.0 removed with the Fetch versions it governs: Trafka still serves Fetch v0-3 as Kafka 3.9
does (docs/protocol-versions.md), so it keeps 3.9's switch for them. Each entry has
its built-in default, its DescribeConfigs type, whether it is sensitive, and a
line of documentation. `LogConfig` is the typed, validated, effective configuration of one
topic: the broker defaults (`LogConfig.from_broker`) overlaid with the topic's explicit
settings (`LogConfig.from_kafka`). Names that storage does not act on (min.insync.replicas,
unclean.leader.election.enable, ...) are still validated and kept in `extras`, so a client
reads back what it set.

Two Trafka-specific names: `trafka.fsync.policy` = never | interval | always (Kafka's own
`flush.messages` / `flush.ms` select "interval" when set below Long.MAX_VALUE), and
`trafka.preallocate.bytes`, how far ahead of the active segment's end disk blocks are kept
reserved (Kafka's `preallocate=true` reserves whole segments).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any, Callable, Mapping, NamedTuple

from storage.errors import InvalidConfig

LONG_MAX = (1 << 63) - 1
INT_MAX = (1 << 31) - 1
LONG_MIN = -(1 << 63)
# Kafka's default max.decompressed.message.bytes: the largest array a JVM allocates, i.e. no cap.
MAX_DECOMPRESSED_DEFAULT = INT_MAX - 8

FSYNC_POLICY = "trafka.fsync.policy"
PREALLOCATE_BYTES = "trafka.preallocate.bytes"
FLUSH_POLICIES = ("never", "interval", "always")
TIMESTAMP_TYPES = ("CreateTime", "LogAppendTime")
CLEANUP_POLICIES = ("compact", "delete")
COMPRESSION_TYPES = ("uncompressed", "zstd", "lz4", "snappy", "gzip", "producer")


class ConfigDef(NamedTuple):
    """One row of the topic config table: what DescribeConfigs needs besides the value."""

    default: str | None
    type: str  # DescribeConfigs ConfigType name (see CONFIG_TYPE_IDS)
    is_sensitive: bool
    doc: str


# DescribeConfigsResponse v3+ config_type values (KIP-569).
CONFIG_TYPE_IDS: dict[str, int] = {
    "UNKNOWN": 0, "BOOLEAN": 1, "STRING": 2, "INT": 3, "SHORT": 4, "LONG": 5,
    "DOUBLE": 6, "LIST": 7, "CLASS": 8, "PASSWORD": 9,
}


def _d(default: str | None, kind: str, doc: str) -> ConfigDef:
    return ConfigDef(default, kind, False, doc)


_L = str(LONG_MAX)

TOPIC_CONFIGS: dict[str, ConfigDef] = {
    "cleanup.policy": _d("delete", "LIST", "delete: drop old segments by retention.ms/retention.bytes; compact: keep the latest record per key; both may be given."),
    "confluent.key.schema.validation": _d("false", "BOOLEAN", "Confluent Server: produced keys must carry a schema id registered under <topic>-key (magic byte 0 + id); others are refused with INVALID_RECORD."),
    "confluent.value.schema.validation": _d("false", "BOOLEAN", "Confluent Server: produced values must carry a schema id registered under <topic>-value (magic byte 0 + id); others are refused with INVALID_RECORD."),
    "compression.type": _d("producer", "STRING", "Codec of stored batches; Trafka stores what the producer sent (producer) and only records the other values."),
    "compression.gzip.level": _d("-1", "INT", "gzip level when the broker compresses (KIP-390); recorded only."),
    "compression.lz4.level": _d("9", "INT", "lz4 level when the broker compresses (KIP-390); recorded only."),
    "compression.zstd.level": _d("3", "INT", "zstd level when the broker compresses (KIP-390); recorded only."),
    "errors.deadletterqueue.group.enable": _d("false", "BOOLEAN", "Whether share groups may use this topic as a dead-letter queue (KIP-1191); recorded only: Trafka's share groups write no dead-letter records."),
    "delete.retention.ms": _d("86400000", "LONG", "How long a compacted topic keeps tombstones after the cleaner first sees them."),
    "file.delete.delay.ms": _d("60000", "LONG", "How long a deleted segment's file handle stays open for readers already using it."),
    "flush.messages": _d(_L, "LONG", "fsync after this many messages (selects trafka.fsync.policy=interval when set)."),
    "flush.ms": _d(_L, "LONG", "fsync at least this often in ms (selects trafka.fsync.policy=interval when set)."),
    "follower.replication.throttled.replicas": _d("", "LIST", "Replicas (partition:broker,... or *) whose fetches as followers are held to follower.replication.throttled.rate while out of sync (KIP-73; a cluster)."),
    "index.interval.bytes": _d("4096", "INT", "Bytes of log between two sparse offset index entries."),
    "leader.replication.throttled.replicas": _d("", "LIST", "Replicas (partition:broker,... or *) whose leaders serve out-of-sync followers at most leader.replication.throttled.rate (KIP-73; a cluster)."),
    "local.retention.bytes": _d("-2", "LONG", "Tiered storage local retention; recorded only."),
    "local.retention.ms": _d("-2", "LONG", "Tiered storage local retention; recorded only."),
    "max.compaction.lag.ms": _d(_L, "LONG", "A closed segment older than this is compacted whatever min.cleanable.dirty.ratio says."),
    "max.message.bytes": _d("1048588", "INT", "Largest record batch the log accepts."),
    "max.decompressed.message.bytes": _d(str(MAX_DECOMPRESSED_DEFAULT), "INT", "Largest decompressed record Kafka accepts where it decompresses; only the default (no cap) is accepted, as Trafka does not decompress records to measure them."),
    "message.downconversion.enable": _d("true", "BOOLEAN", "Kafka 3.9's switch for the Fetch v0-3 down-conversion Trafka still serves: false answers those versions UNSUPPORTED_VERSION."),
    "message.timestamp.after.max.ms": _d("3600000", "LONG", "Largest allowed gap of a record timestamp ahead of the broker clock (CreateTime); an hour by default since Kafka 4.0."),
    "message.timestamp.before.max.ms": _d(_L, "LONG", "Largest allowed gap of a record timestamp behind the broker clock (CreateTime)."),
    "message.timestamp.type": _d("CreateTime", "STRING", "CreateTime keeps the producer's timestamps; LogAppendTime stamps batches with the broker clock."),
    "min.cleanable.dirty.ratio": _d("0.5", "DOUBLE", "Share of uncleaned bytes in closed segments that triggers compaction."),
    "min.compaction.lag.ms": _d("0", "LONG", "A record stays uncompacted at least this long."),
    "min.insync.replicas": _d("1", "INT", "Replicas that must acknowledge acks=all; a single broker always has one."),
    "preallocate": _d("false", "BOOLEAN", "Reserve disk blocks for a whole segment when it starts taking appends (file size unchanged)."),
    "remote.copy.lag.bytes": _d("-1", "LONG", "Tiered storage upload eligibility by size; recorded only."),
    "remote.copy.lag.ms": _d("0", "LONG", "Tiered storage upload eligibility by time; recorded only."),
    "remote.log.copy.disable": _d("false", "BOOLEAN", "Tiered storage; recorded only."),
    "remote.log.delete.on.disable": _d("false", "BOOLEAN", "Tiered storage; recorded only."),
    "remote.storage.enable": _d("false", "BOOLEAN", "Tiered storage; recorded only (must stay false)."),
    "retention.bytes": _d("-1", "LONG", "Largest size of a partition before whole old segments are deleted (-1: no limit)."),
    "retention.ms": _d("604800000", "LONG", "Age after which whole old segments are deleted (-1: keep forever)."),
    "segment.bytes": _d("1073741824", "INT", "Size at which a new segment file is started."),
    "segment.index.bytes": _d("10485760", "INT", "Size limit of a segment's offset index; a full index rolls the segment."),
    "segment.jitter.ms": _d("0", "LONG", "Random jitter subtracted from segment.ms; recorded only."),
    "segment.ms": _d("604800000", "LONG", "Age at which a new segment file is started even if not full."),
    "unclean.leader.election.enable": _d("false", "BOOLEAN", "Cluster: elect a replica outside the ISR when no ISR member is alive (may lose data); this overrides the broker setting. A single broker records it only."),
    FSYNC_POLICY: _d("never", "STRING", "Trafka: never (page cache, Kafka's default), interval (flush.messages/flush.ms) or always (fsync before acknowledging)."),
    PREALLOCATE_BYTES: _d("33554432", "LONG", "Trafka: disk blocks kept reserved ahead of the active segment's end once it holds 1 MiB, up to as many as it holds (fallocate, file size unchanged; appends then skip per-page block reservation); 0: none. Not under trafka.fsync.policy=always."),
}

# Broker (server.properties) names whose value is a topic config's default, first match wins,
# with the factor that converts their unit to the topic config's (hours -> ms).
BROKER_SYNONYMS: dict[str, tuple[tuple[str, int], ...]] = {
    "cleanup.policy": (("log.cleanup.policy", 1),),
    "compression.type": (("compression.type", 1),),
    "delete.retention.ms": (("log.cleaner.delete.retention.ms", 1),),
    "file.delete.delay.ms": (("log.segment.delete.delay.ms", 1),),
    "flush.messages": (("log.flush.interval.messages", 1),),
    "flush.ms": (("log.flush.interval.ms", 1), ("log.flush.scheduler.interval.ms", 1)),
    "index.interval.bytes": (("log.index.interval.bytes", 1),),
    "max.compaction.lag.ms": (("log.cleaner.max.compaction.lag.ms", 1),),
    "max.message.bytes": (("message.max.bytes", 1),),
    "message.downconversion.enable": (("log.message.downconversion.enable", 1),),
    "message.timestamp.after.max.ms": (("log.message.timestamp.after.max.ms", 1),),
    "message.timestamp.before.max.ms": (("log.message.timestamp.before.max.ms", 1),),
    "message.timestamp.type": (("log.message.timestamp.type", 1),),
    "min.cleanable.dirty.ratio": (("log.cleaner.min.cleanable.ratio", 1),),
    "min.compaction.lag.ms": (("log.cleaner.min.compaction.lag.ms", 1),),
    "min.insync.replicas": (("min.insync.replicas", 1),),
    "preallocate": (("log.preallocate", 1),),
    "retention.bytes": (("log.retention.bytes", 1),),
    "retention.ms": (("log.retention.ms", 1), ("log.retention.minutes", 60_000), ("log.retention.hours", 3_600_000)),
    "segment.bytes": (("log.segment.bytes", 1),),
    "segment.index.bytes": (("log.index.size.max.bytes", 1),),
    "segment.jitter.ms": (("log.roll.jitter.ms", 1), ("log.roll.jitter.hours", 3_600_000)),
    "segment.ms": (("log.roll.ms", 1), ("log.roll.hours", 3_600_000)),
    "unclean.leader.election.enable": (("unclean.leader.election.enable", 1),),
    FSYNC_POLICY: ((FSYNC_POLICY, 1),),
    PREALLOCATE_BYTES: ((PREALLOCATE_BYTES, 1),),
}


# -- value parsers: raise ValueError(reason), reasons in Kafka's ConfigDef wording ----------


class _BadItem(ValueError):
    """A list item that is not allowed: Kafka names the item, not the whole list."""

    def __init__(self, reason: str, item: str) -> None:
        super().__init__(reason)
        self.item = item


def _integer(lo: int, hi: int, kind: str = "INT") -> Callable[[str], int]:
    def parse(text: str) -> int:
        try:
            value = int(text.strip())
        except ValueError:
            raise ValueError(f"Not a number of type {kind}") from None
        if value < lo:
            raise ValueError(f"Value must be at least {lo}")
        if value > hi:
            raise ValueError(f"Value must be no more than {hi}")
        return value

    return parse


def _double(lo: float, hi: float) -> Callable[[str], float]:
    def parse(text: str) -> float:
        try:
            value = float(text.strip())
        except ValueError:
            raise ValueError("Not a number of type DOUBLE") from None
        if value < lo:
            raise ValueError(f"Value must be at least {lo}")
        if value > hi:
            raise ValueError(f"Value must be no more than {hi}")
        return value

    return parse


def _boolean(text: str) -> bool:
    lowered = text.strip().lower()
    if lowered == "true":
        return True
    if lowered == "false":
        return False
    raise ValueError("Expected value to be either true or false")


def _choice(choices: tuple[str, ...], *, case_insensitive: bool = False) -> Callable[[str], str]:
    def parse(text: str) -> str:
        value = text.strip()
        for choice in choices:
            if value == choice or (case_insensitive and value.lower() == choice.lower()):
                return choice
        raise ValueError(f"String must be one of: {', '.join(choices)}")

    return parse


def _cleanup_policy(text: str) -> frozenset[str]:
    items = [item.strip() for item in text.split(",") if item.strip()]
    if not items:
        raise ValueError("empty list; use delete, compact or compact,delete")
    for item in items:
        if item not in CLEANUP_POLICIES:
            raise _BadItem(f"String must be one of: {', '.join(CLEANUP_POLICIES)}", item)
    return frozenset(items)


def _throttled_replicas(text: str) -> str:
    """Kafka's ThrottledReplicaListValidator: "*", or [partition]:[broker] pairs, comma separated."""
    items = [item.strip() for item in text.split(",") if item.strip()]
    if items == ["*"]:
        return text
    for item in items:
        partition, _, broker = item.partition(":")
        if not (partition.strip().isdigit() and broker.strip().isdigit()):
            raise ValueError("must be the literal '*' or a list of replicas in the following format: "
                             "[partitionId]:[brokerId],[partitionId]:[brokerId],...")
    return text


def _only(value: str, why: str) -> Callable[[str], str]:
    """A setting Trafka accepts at its default only (a feature it does not have)."""
    def parse(text: str) -> str:
        if text.strip() != value:
            raise ValueError(f"{why}; only the default {value} is accepted")
        return value

    return parse


def _long(lo: int = LONG_MIN) -> Callable[[str], int]:
    return _integer(lo, LONG_MAX, "LONG")


def _int(lo: int = -(1 << 31)) -> Callable[[str], int]:
    return _integer(lo, INT_MAX, "INT")


_PARSERS: dict[str, Callable[[str], Any]] = {
    "cleanup.policy": _cleanup_policy,
    "compression.type": _choice(COMPRESSION_TYPES),
    "confluent.key.schema.validation": _boolean,
    "confluent.value.schema.validation": _boolean,
    "compression.gzip.level": _integer(-1, 9),
    "compression.lz4.level": _integer(1, 17),
    "compression.zstd.level": _integer(-131072, 22),
    "delete.retention.ms": _long(0),
    "file.delete.delay.ms": _long(0),
    "flush.messages": _long(1),
    "flush.ms": _long(0),
    "follower.replication.throttled.replicas": _throttled_replicas,
    "index.interval.bytes": _int(0),
    "leader.replication.throttled.replicas": _throttled_replicas,
    "local.retention.bytes": _long(-2),
    "local.retention.ms": _long(-2),
    "max.compaction.lag.ms": _long(1),
    "max.message.bytes": _int(0),
    "errors.deadletterqueue.group.enable": _boolean,
    "max.decompressed.message.bytes": _only(str(MAX_DECOMPRESSED_DEFAULT), "a per-record "
                                            "decompressed size cap is not supported"),
    "message.downconversion.enable": _boolean,
    "message.timestamp.after.max.ms": _long(0),
    "message.timestamp.before.max.ms": _long(0),
    "message.timestamp.type": _choice(TIMESTAMP_TYPES),
    "min.cleanable.dirty.ratio": _double(0.0, 1.0),
    "min.compaction.lag.ms": _long(0),
    "min.insync.replicas": _int(1),
    "preallocate": _boolean,
    "remote.copy.lag.bytes": _long(-1),
    "remote.copy.lag.ms": _long(-1),
    "remote.log.copy.disable": _boolean,
    "remote.log.delete.on.disable": _boolean,
    "remote.storage.enable": _boolean,
    "retention.bytes": _long(),
    "retention.ms": _long(-1),
    # Kafka 3.x: at least LegacyRecord.RECORD_OVERHEAD_V0 (14); tiny segments are handy in tests.
    "segment.bytes": _int(14),
    "segment.index.bytes": _int(4),
    "segment.jitter.ms": _long(0),
    "segment.ms": _long(1),
    "unclean.leader.election.enable": _boolean,
    FSYNC_POLICY: _choice(FLUSH_POLICIES),
    PREALLOCATE_BYTES: _long(0),
}
assert _PARSERS.keys() == TOPIC_CONFIGS.keys()

# Topic config name -> LogConfig field, for the names storage acts on.
_FIELDS: dict[str, str] = {
    "cleanup.policy": "cleanup_policy",
    "compression.type": "compression_type",
    "delete.retention.ms": "delete_retention_ms",
    "file.delete.delay.ms": "file_delete_delay_ms",
    "flush.messages": "flush_interval_messages",
    "flush.ms": "flush_interval_ms",
    "index.interval.bytes": "index_interval_bytes",
    "max.compaction.lag.ms": "max_compaction_lag_ms",
    "max.message.bytes": "max_message_bytes",
    "message.timestamp.after.max.ms": "message_timestamp_after_max_ms",
    "message.timestamp.before.max.ms": "message_timestamp_before_max_ms",
    "message.timestamp.type": "message_timestamp_type",
    "min.cleanable.dirty.ratio": "min_cleanable_dirty_ratio",
    "min.compaction.lag.ms": "min_compaction_lag_ms",
    "preallocate": "preallocate",
    "retention.bytes": "retention_bytes",
    "retention.ms": "retention_ms",
    "segment.bytes": "segment_bytes",
    "segment.index.bytes": "segment_index_bytes",
    "segment.jitter.ms": "segment_jitter_ms",
    "segment.ms": "segment_ms",
    FSYNC_POLICY: "flush_policy",
    PREALLOCATE_BYTES: "preallocate_bytes",
}


def _format(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, frozenset):
        return ",".join(sorted(value, key=CLEANUP_POLICIES.index))
    return str(value)


def parse_value(name: str, value: str) -> Any:
    """Validate one topic config value; raise InvalidConfig naming the key."""
    parser = _PARSERS.get(name)
    if parser is None:
        raise InvalidConfig.unknown(name)
    if value is None:
        raise InvalidConfig(name, "a value is required")
    try:
        return parser(value)
    except ValueError as exc:
        raise InvalidConfig(name, str(exc), getattr(exc, "item", value)) from None


@dataclass(frozen=True)
class LogConfig:
    """The effective configuration of one topic's partition logs (immutable; replaced on alter)."""

    segment_bytes: int = 1 << 30
    segment_ms: int = 7 * 24 * 3600 * 1000
    segment_jitter_ms: int = 0
    segment_index_bytes: int = 10 * 1024 * 1024
    index_interval_bytes: int = 4096
    retention_ms: int = 7 * 24 * 3600 * 1000  # -1: infinite
    retention_bytes: int = -1  # -1: no limit
    cleanup_policy: frozenset[str] = frozenset({"delete"})
    delete_retention_ms: int = 24 * 3600 * 1000
    min_compaction_lag_ms: int = 0
    max_compaction_lag_ms: int = LONG_MAX
    min_cleanable_dirty_ratio: float = 0.5
    message_timestamp_type: str = "CreateTime"
    message_timestamp_before_max_ms: int = LONG_MAX
    message_timestamp_after_max_ms: int = 3_600_000  # Kafka 4.0's default (was Long.MAX_VALUE)
    max_message_bytes: int = 1048588
    compression_type: str = "producer"
    file_delete_delay_ms: int = 60_000
    preallocate: bool = False
    preallocate_bytes: int = 32 * 1024 * 1024
    flush_policy: str = "never"  # never | interval | always
    flush_interval_ms: int = LONG_MAX
    flush_interval_messages: int = LONG_MAX
    # Validated values of the names storage does not act on, as strings.
    extras: Mapping[str, str] = field(default_factory=lambda: MappingProxyType({}))

    def __post_init__(self) -> None:
        if self.flush_policy not in FLUSH_POLICIES:
            raise InvalidConfig(FSYNC_POLICY, f"{self.flush_policy!r} is not one of {', '.join(FLUSH_POLICIES)}")
        if self.message_timestamp_type not in TIMESTAMP_TYPES:
            raise InvalidConfig("message.timestamp.type", f"{self.message_timestamp_type!r} is not one of {', '.join(TIMESTAMP_TYPES)}")
        if self.segment_bytes > INT_MAX:
            raise InvalidConfig("segment.bytes", "positions in the offset index are 32-bit")

    @property
    def compact(self) -> bool:
        return "compact" in self.cleanup_policy

    @property
    def delete(self) -> bool:
        return "delete" in self.cleanup_policy

    @property
    def log_append_time(self) -> bool:
        return self.message_timestamp_type == "LogAppendTime"

    @classmethod
    def from_kafka(cls, configs: Mapping[str, str], defaults: "LogConfig | None" = None) -> "LogConfig":
        """`defaults` (the broker-level config) overlaid with a topic's explicit settings.

        Every name must be a known topic config and every value valid for it; the first
        that is not raises InvalidConfig(name, reason).
        """
        base = defaults if defaults is not None else cls()
        changes: dict[str, Any] = {}
        extras = dict(base.extras)
        for name, raw in configs.items():
            value = parse_value(name, raw)
            attr = _FIELDS.get(name)
            if attr is None:
                text = _format(value)
                if text == TOPIC_CONFIGS[name].default:
                    extras.pop(name, None)
                else:
                    extras[name] = text
            else:
                changes[attr] = value
        if FSYNC_POLICY not in configs and ("flush.messages" in configs or "flush.ms" in configs):
            # Kafka's names: setting either below Long.MAX_VALUE asks for interval flushing.
            messages = changes.get("flush_interval_messages", base.flush_interval_messages)
            interval = changes.get("flush_interval_ms", base.flush_interval_ms)
            changes["flush_policy"] = "interval" if min(messages, interval) < LONG_MAX else "never"
        if extras.get("remote.storage.enable") == "true":
            raise InvalidConfig("remote.storage.enable", "tiered storage is not supported")
        min_lag = changes.get("min_compaction_lag_ms", base.min_compaction_lag_ms)
        max_lag = changes.get("max_compaction_lag_ms", base.max_compaction_lag_ms)
        if min_lag > max_lag:
            raise InvalidConfig("min.compaction.lag.ms", f"{min_lag} exceeds max.compaction.lag.ms {max_lag}")
        changes["extras"] = MappingProxyType(extras)
        return dataclasses.replace(base, **changes)

    @classmethod
    def from_broker(cls, props: Mapping[str, str]) -> "LogConfig":
        """Broker defaults from server.properties names (log.retention.hours, log.segment.bytes, ...).

        Names that are not log settings are ignored; a bad value of a log setting raises
        InvalidConfig naming the broker property.
        """
        topic_values: dict[str, str] = {}
        for topic_name, synonyms in BROKER_SYNONYMS.items():
            for broker_name, factor in synonyms:
                raw = props.get(broker_name)
                if raw is None:
                    continue
                if factor != 1:
                    try:
                        raw = str(int(raw.strip()) * factor)
                    except ValueError:
                        raise InvalidConfig(broker_name, "Not a number of type INT", raw) from None
                topic_values[topic_name] = raw
                break
        try:
            config = cls.from_kafka(topic_values)
        except InvalidConfig as exc:
            broker_name = next((b for b, _ in BROKER_SYNONYMS.get(exc.name, ())), exc.name)
            raise InvalidConfig(broker_name, exc.reason, exc.value) from None
        return config

    def to_kafka(self) -> dict[str, str]:
        """Every topic config name with its effective value, as DescribeConfigs shows it."""
        out: dict[str, str] = {}
        for name, definition in TOPIC_CONFIGS.items():
            attr = _FIELDS.get(name)
            if attr is not None:
                out[name] = _format(getattr(self, attr))
            else:
                out[name] = self.extras.get(name, definition.default or "")
        return out


def validate_topic_configs(configs: Mapping[str, str | None]) -> None:
    """Check names and values without building a config (for validate_only requests)."""
    for name, value in configs.items():
        if value is None:
            if name not in TOPIC_CONFIGS:
                raise InvalidConfig.unknown(name)
            continue
        parse_value(name, value)
