"""LogConfig: Kafka topic config names, validation, broker defaults, DescribeConfigs table."""

from __future__ import annotations

import pytest

from storage import BROKER_SYNONYMS, CONFIG_TYPE_IDS, TOPIC_CONFIGS, InvalidConfig, LogConfig
from storage.config import LONG_MAX, validate_topic_configs


def test_defaults_are_kafkas():
    config = LogConfig.from_kafka({})
    assert config == LogConfig()
    assert config.segment_bytes == 1 << 30 and config.retention_ms == 604_800_000
    assert config.cleanup_policy == frozenset({"delete"}) and config.flush_policy == "never"
    values = config.to_kafka()
    assert set(values) == set(TOPIC_CONFIGS)
    for name, definition in TOPIC_CONFIGS.items():
        assert values[name] == (definition.default or ""), name


def test_table_covers_kafka_topic_configs():
    for name in ("cleanup.policy", "compression.type", "delete.retention.ms", "file.delete.delay.ms",
                 "flush.messages", "flush.ms", "index.interval.bytes", "max.compaction.lag.ms",
                 "max.message.bytes", "message.timestamp.type", "message.timestamp.before.max.ms",
                 "message.timestamp.after.max.ms", "min.cleanable.dirty.ratio", "min.compaction.lag.ms",
                 "min.insync.replicas", "preallocate", "retention.bytes", "retention.ms", "segment.bytes",
                 "segment.index.bytes", "segment.jitter.ms", "segment.ms", "unclean.leader.election.enable",
                 "errors.deadletterqueue.group.enable", "max.decompressed.message.bytes",
                 "remote.copy.lag.bytes", "remote.copy.lag.ms"):
        default, kind, sensitive, doc = TOPIC_CONFIGS[name]
        assert kind in CONFIG_TYPE_IDS and sensitive is False and doc
    assert set(BROKER_SYNONYMS) <= set(TOPIC_CONFIGS)


def test_overrides_and_round_trip():
    config = LogConfig.from_kafka({
        "cleanup.policy": "compact,delete", "retention.ms": "-1", "segment.bytes": "1000",
        "message.timestamp.type": "LogAppendTime", "min.insync.replicas": "2",
        "unclean.leader.election.enable": "TRUE", "min.cleanable.dirty.ratio": "0.25",
    })
    assert config.compact and config.delete and config.retention_ms == -1
    assert config.log_append_time and config.min_cleanable_dirty_ratio == 0.25
    values = config.to_kafka()
    assert values["cleanup.policy"] == "compact,delete"
    assert values["min.insync.replicas"] == "2"
    assert LogConfig.from_kafka({k: v for k, v in values.items()}) == config


@pytest.mark.parametrize("name,value", [
    ("retention.ms", "abc"), ("retention.ms", "-2"), ("segment.bytes", "13"), ("segment.bytes", str(1 << 31)),
    ("cleanup.policy", "forever"), ("cleanup.policy", ""), ("message.timestamp.type", "Now"),
    ("min.cleanable.dirty.ratio", "1.5"), ("preallocate", "yes"), ("compression.type", "brotli"),
    ("flush.messages", "0"), ("trafka.fsync.policy", "sometimes"), ("no.such.thing", "1"),
    ("remote.storage.enable", "true"),
])
def test_invalid_values_name_the_key(name, value):
    with pytest.raises(InvalidConfig) as info:
        LogConfig.from_kafka({name: value})
    assert info.value.name == name
    if name in TOPIC_CONFIGS and name != "remote.storage.enable":
        with pytest.raises(InvalidConfig):
            validate_topic_configs({name: value})


def test_compaction_lag_bounds():
    with pytest.raises(InvalidConfig):
        LogConfig.from_kafka({"min.compaction.lag.ms": "100", "max.compaction.lag.ms": "10"})


def test_flush_policy_mapping():
    assert LogConfig.from_kafka({"flush.messages": "1"}).flush_policy == "interval"
    assert LogConfig.from_kafka({"flush.ms": "1000"}).flush_interval_ms == 1000
    assert LogConfig.from_kafka({"flush.ms": str(LONG_MAX)}).flush_policy == "never"
    assert LogConfig.from_kafka({"flush.ms": "5", "trafka.fsync.policy": "always"}).flush_policy == "always"
    interval = LogConfig.from_kafka({"trafka.fsync.policy": "interval", "flush.ms": "50"})
    # A topic inherits the broker's policy unless it names one.
    assert LogConfig.from_kafka({"retention.ms": "1"}, interval).flush_policy == "interval"


def test_from_broker_properties():
    config = LogConfig.from_broker({
        "log.retention.hours": "2", "log.segment.bytes": "5000", "log.cleanup.policy": "compact",
        "log.roll.ms": "10", "log.roll.hours": "99", "message.max.bytes": "100",
        "trafka.fsync.policy": "never", "log.flush.interval.ms": "1000", "num.partitions": "3",
    })
    assert config.retention_ms == 2 * 3600 * 1000
    assert config.segment_bytes == 5000 and config.compact and config.segment_ms == 10
    assert config.max_message_bytes == 100 and config.flush_policy == "never"
    assert LogConfig.from_broker({"log.retention.minutes": "1", "log.retention.ms": "7"}).retention_ms == 7
    with pytest.raises(InvalidConfig) as info:
        LogConfig.from_broker({"log.segment.bytes": "tiny"})
    assert info.value.name == "log.segment.bytes"


def test_kafka_4_topic_configs():
    """Kafka 4.4's table: the names Kafka 4.0 removed are unknown (CreateTopics with them gets
    INVALID_CONFIG from Kafka 4.4), message.timestamp.after.max.ms defaults to an hour, and
    max.decompressed.message.bytes is known (at its default: Trafka has no per-record cap)."""
    for removed in ("message.format.version", "message.timestamp.difference.max.ms"):
        assert removed not in TOPIC_CONFIGS
        with pytest.raises(InvalidConfig, match=removed.replace(".", r"\.")):
            LogConfig.from_kafka({removed: "1"})
    assert LogConfig().message_timestamp_after_max_ms == 3_600_000
    assert LogConfig().to_kafka()["message.timestamp.after.max.ms"] == "3600000"
    assert LogConfig.from_kafka({"max.decompressed.message.bytes": "2147483639"}).extras == {}
    with pytest.raises(InvalidConfig, match="max.decompressed.message.bytes"):
        LogConfig.from_kafka({"max.decompressed.message.bytes": "1000"})
    config = LogConfig.from_kafka({"errors.deadletterqueue.group.enable": "true",
                                   "remote.copy.lag.ms": "-1"})
    assert config.to_kafka()["errors.deadletterqueue.group.enable"] == "true"
