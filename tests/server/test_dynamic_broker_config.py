"""Dynamic broker config rules without a cluster: precedence of the layers, what may
change at runtime, and the errors an update gets (server/config.py, server/dynamic_config.py)."""

from __future__ import annotations

import pytest

from server.broker import Broker
from server.config import DYNAMIC_BROKER, DYNAMIC_DEFAULT, load_config
from server.dynamic_config import RECONFIGURABLE, incremental, usable, validate_update
from server.errors import KafkaError
from wire.errors import ErrorCode


def config(**static: str):
    return load_config(environ={}, overrides={k.replace("_", "."): v for k, v in static.items()})


def test_precedence_per_broker_over_default_over_static_over_builtin():
    cfg = config(log_retention_ms="5000")
    assert (cfg.get("log.retention.ms"), cfg.source("log.retention.ms")) == (5000, "flag")
    assert cfg.source("log.segment.bytes") == "default"

    cfg.set_dynamic({"log.retention.ms": "4000", "log.segment.bytes": "2048"}, {})
    assert (cfg.get("log.retention.ms"), cfg.source("log.retention.ms")) == (4000, DYNAMIC_DEFAULT)
    assert (cfg.get("log.segment.bytes"), cfg.source("log.segment.bytes")) == (2048, DYNAMIC_DEFAULT)

    cfg.set_dynamic(cfg.dynamic_default, {"log.retention.ms": "3000"})
    assert (cfg.get("log.retention.ms"), cfg.source("log.retention.ms")) == (3000, DYNAMIC_BROKER)
    # log.retention.ms's default is Kafka's null: no layer (log.retention.hours stands in)
    assert cfg.layers("log.retention.ms") == [(DYNAMIC_BROKER, "3000"), (DYNAMIC_DEFAULT, "4000"), ("flag", "5000")]

    cfg.set_dynamic({}, {})  # everything deleted: back to the static value
    assert (cfg.get("log.retention.ms"), cfg.source("log.retention.ms")) == (5000, "flag")
    assert cfg.layers("log.segment.bytes") == [("default", "1073741824")]


def test_listeners_hear_only_effective_changes():
    cfg = config(log_retention_ms="5000")
    heard: list[set[str]] = []
    cfg.add_listener(heard.append)
    cfg.set_dynamic({"log.retention.ms": "5000"}, {})  # same value as the static one
    assert heard == []
    cfg.set_dynamic({"log.retention.ms": "4000"}, {"num.replica.fetchers": "2"})
    assert heard == [{"log.retention.ms", "num.replica.fetchers"}]
    # a layer more, same effective values
    cfg.set_dynamic({"log.retention.ms": "4000"}, {"log.retention.ms": "4000", "num.replica.fetchers": "2"})
    assert len(heard) == 1


def error_of(fn) -> tuple[ErrorCode, str]:
    with pytest.raises(KafkaError) as info:
        fn()
    return info.value.code, str(info.value)


def test_validation_errors_are_kafkas(tmp_path):
    cfg = config(log_dirs=str(tmp_path))
    broker = Broker(cfg)

    def check(props, per_broker=True):
        return validate_update(cfg, props, per_broker, broker.topic_defaults)

    check({"log.retention.ms": "1000", "message.max.bytes": "2000", "num.replica.fetchers": "2"})
    assert error_of(lambda: check({"broker.id": "7", "log.dirs": "/x"})) == (
        ErrorCode.INVALID_REQUEST, "Cannot update these configs dynamically: Set(broker.id, log.dirs)")
    # A single broker words it as Kafka 4.4 (KRaft, a Java set): kafka-configs prints it.
    assert error_of(lambda: validate_update(cfg, {"broker.id": "7"}, True, broker.topic_defaults, kraft=True)) == (
        ErrorCode.INVALID_REQUEST, "Cannot update these configs dynamically: [broker.id]")
    check({"no.such.setting": "1"})  # a custom config, kept as Kafka keeps one
    assert error_of(lambda: check({"message.max.bytes": "big"}))[0] == ErrorCode.INVALID_REQUEST
    assert error_of(lambda: check({"log.cleanup.policy": "sometimes"}))[1].startswith(
        "Invalid value sometimes for configuration log.cleanup.policy")
    assert "double the current value 1" in error_of(lambda: check({"num.replica.fetchers": "3"}))[1]
    assert "at least 1" in error_of(lambda: check({"num.replica.fetchers": "0"}, per_broker=False))[1]
    assert not {"broker.id", "log.dirs", "zookeeper.connect", "listeners"} & RECONFIGURABLE


def test_incremental_operations():
    assert incremental({"a": "1"}, [("log.retention.ms", 0, "5"), ("a", 1, None)]) == {"log.retention.ms": "5"}
    assert incremental({}, [("log.cleanup.policy", 2, "compact")]) == {"log.cleanup.policy": "delete,compact"}
    assert incremental({"log.cleanup.policy": "delete,compact"}, [("log.cleanup.policy", 3, "delete")]) == {
        "log.cleanup.policy": "compact"}
    assert error_of(lambda: incremental({}, [("log.retention.ms", 2, "1")])) == (
        ErrorCode.INVALID_CONFIG, "Config value append is not allowed for config key: log.retention.ms")
    assert error_of(lambda: incremental({}, [("log.retention.ms", 0, None)]))[0] == ErrorCode.INVALID_REQUEST


def test_what_a_store_holds_is_filtered():
    kept, dropped = usable({"log.retention.ms": "1", "broker.id": "3", "nope": "x", "message.max.bytes": "many"})
    assert kept == {"log.retention.ms": "1", "nope": "x"}  # custom configs stay, as Kafka's fromPersistentProps
    assert sorted(dropped) == ["broker.id", "message.max.bytes"]
