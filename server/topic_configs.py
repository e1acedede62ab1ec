"""What a topic's configuration looks like from the outside: values, sources, synonyms.

DescribeConfigs (TOPIC resources) and CreateTopics v5+ both report every topic config
with its effective value and where that value comes from, and the two alter APIs turn a
request into the topic's new set of explicit settings. This module holds those rules so
the handlers agree with each other.

Sources follow Kafka's ConfigHelper: a name set on the topic is DYNAMIC_TOPIC_CONFIG; an
inherited value is DYNAMIC_BROKER_CONFIG / DYNAMIC_DEFAULT_BROKER_CONFIG when the broker
setting it derives from (`log.retention.ms` for `retention.ms`, ...) is a dynamic broker
config of this broker / of the cluster default (server/broker_configs.py),
STATIC_BROKER_CONFIG when it was given in the file, the environment or a flag,
DEFAULT_CONFIG otherwise. Synonyms list the same chain, most specific first.
Only broker names that Trafka's broker settings actually read count as synonyms, so a
`log.retention.hours` line that Trafka ignores is never shown as the source of a value.

The broker is reached through the `TopicConfigBroker` protocol, not by importing it: the
ZooKeeper-mode config manager (server/cluster/config_manager.py), which sits below the
broker, validates topic settings with these same rules.
"""

from __future__ import annotations

import enum
from typing import Mapping, Protocol

from storage import LogManager
from storage.config import BROKER_SYNONYMS, CONFIG_TYPE_IDS, TOPIC_CONFIGS, LogConfig
from storage.errors import InvalidConfig

from server.config import DYNAMIC_BROKER, DYNAMIC_DEFAULT, SETTINGS, BrokerConfig
from server.topics import TopicRegistry


class TopicConfigBroker(Protocol):
    """What these rules use of the broker (server.broker.Broker): its settings, its log
    manager's defaults, its topics, and how a topic's new settings are applied."""

    config: BrokerConfig
    logs: LogManager
    topics: TopicRegistry

    def alter_topic_configs(self, name: str, explicit: dict[str, str]) -> object: ...


class ResourceType(enum.IntEnum):
    """ConfigResource.Type ids on the wire (DescribeConfigs, AlterConfigs, ...)."""

    UNKNOWN = 0
    TOPIC = 2
    BROKER = 4
    BROKER_LOGGER = 8
    GROUP = 32  # group configs (server/groups/group_config.py)


class ConfigSource(enum.IntEnum):
    """DescribeConfigsResponse ConfigSource / synonym Source ids (KIP-226)."""

    UNKNOWN = 0
    DYNAMIC_TOPIC_CONFIG = 1
    DYNAMIC_BROKER_CONFIG = 2
    DYNAMIC_DEFAULT_BROKER_CONFIG = 3
    STATIC_BROKER_CONFIG = 4
    DEFAULT_CONFIG = 5
    DYNAMIC_BROKER_LOGGER_CONFIG = 6
    CLIENT_METRICS_CONFIG = 7
    GROUP_CONFIG = 8  # set on the group itself (GROUP resources)


class AlterOp(enum.IntEnum):
    """IncrementalAlterConfigs ConfigOperation ids (KIP-339)."""

    SET = 0
    DELETE = 1
    APPEND = 2
    SUBTRACT = 3


_LAYER_SOURCES = {DYNAMIC_BROKER: ConfigSource.DYNAMIC_BROKER_CONFIG,
                  DYNAMIC_DEFAULT: ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG,
                  "default": ConfigSource.DEFAULT_CONFIG}


def layer_source(layer: str) -> ConfigSource:
    """A BrokerConfig source ("file", "env", "flag" are all STATIC_BROKER_CONFIG) as a ConfigSource."""
    return _LAYER_SOURCES.get(layer, ConfigSource.STATIC_BROKER_CONFIG)


# Broker settings that stand for one another (Kafka's DynamicBrokerConfig.brokerConfigSynonyms):
# the most specific first.
_SYNONYM_GROUPS = (("log.retention.ms", "log.retention.minutes", "log.retention.hours"),
                   ("log.roll.ms", "log.roll.hours"),
                   ("log.roll.jitter.ms", "log.roll.jitter.hours"),
                   ("log.flush.interval.ms", "log.flush.scheduler.interval.ms"))


# Broker settings Kafka defines only as dynamic broker configs (DynamicConfig.Broker, the
# replication quotas), outside KafkaConfig: no built-in value of theirs is ever a synonym.
_DYNAMIC_ONLY = frozenset({"leader.replication.throttled.rate", "follower.replication.throttled.rate",
                           "replica.alter.log.dirs.io.max.bytes.per.second"})


def synonym_group(name: str) -> tuple[str, ...]:
    """`name` and the broker settings that stand in for it, those Trafka has, most specific first."""
    group = next((g for g in _SYNONYM_GROUPS if name in g), (name,))
    return tuple(n for n in group if n in SETTINGS or n == name)


def broker_synonyms(broker: TopicConfigBroker, name: str) -> list[dict]:
    """The synonyms DescribeConfigs lists for the broker setting `name` (Kafka's
    ConfigHelper.configSynonyms): every value of it and its synonym group, per-broker
    ones first, then cluster defaults, static, built-in (a null default is no value);
    within a layer the group's order; and nothing before the first entry of `name` itself
    (log.retention.hours is no synonym of an unset log.retention.ms)."""
    chain = [{"name": b, "value": value, "source": layer_source(layer)}
             for b in synonym_group(name) for layer, value in broker.config.layers(b)
             if not (layer == "default" and b in _DYNAMIC_ONLY)]
    chain.sort(key=lambda entry: entry["source"])  # stable: ids ascend with generality
    first = next((i for i, entry in enumerate(chain) if entry["name"] == name), len(chain))
    return chain[first:]


# Topic configs storage does not act on, so the log defaults (Broker.topic_defaults) do not
# carry their broker-level value: a topic without its own takes the broker setting's (its
# static or dynamic min.insync.replicas=2 is what the topic has, not the built-in 1).
_BROKER_VALUED = frozenset({"min.insync.replicas", "unclean.leader.election.enable"})


def _broker_chain(broker: TopicConfigBroker, topic_name: str) -> list[dict]:
    """Broker-level synonyms of a topic config, most specific first: those of the broker
    setting it derives from (Kafka's TopicConfigSynonyms: log.retention.ms for retention.ms)."""
    primary = next((b for b, factor in BROKER_SYNONYMS.get(topic_name, ()) if b in SETTINGS and factor == 1), None)
    return broker_synonyms(broker, primary) if primary is not None else []


def describe_topic(
    broker: TopicConfigBroker,
    explicit: Mapping[str, str],
    keys: list[str] | None = None,
    *,
    synonyms: bool = False,
    documentation: bool = False,
    effective: LogConfig | None = None,
) -> list[dict]:
    """DescribeConfigsResourceResult entries for a topic whose explicit settings are `explicit`.

    `keys` None means every topic config; unknown keys are skipped, as Kafka does.
    `effective` is the topic's live config (storage's); without it (a topic still being
    validated) it is computed from `explicit`, which raises InvalidConfig if invalid.
    """
    if effective is None:
        effective = LogConfig.from_kafka(explicit, broker.logs.defaults)
    values = effective.to_kafka()
    wanted = values.keys() if keys is None else [k for k in dict.fromkeys(keys) if k in values]
    entries = []
    for name in wanted:
        definition = TOPIC_CONFIGS[name]
        chain = _broker_chain(broker, name)
        if name in explicit:
            chain.insert(0, {"name": name, "value": values[name], "source": ConfigSource.DYNAMIC_TOPIC_CONFIG})
        elif name in _BROKER_VALUED:
            values[name] = broker.config.raw(name)  # the broker setting of the same name
        source = chain[0]["source"] if chain else ConfigSource.DEFAULT_CONFIG
        entries.append({
            "name": name,
            "value": None if definition.is_sensitive else values[name],
            "read_only": False,
            "is_default": source == ConfigSource.DEFAULT_CONFIG,
            "config_source": source,
            "is_sensitive": definition.is_sensitive,
            "synonyms": chain if synonyms else [],
            "config_type": CONFIG_TYPE_IDS.get(definition.type, 0),
            "documentation": definition.doc if documentation else None,
        })
    return entries


def creatable_topic_configs(broker: TopicConfigBroker, explicit: Mapping[str, str]) -> list[dict]:
    """CreateTopics v5+ `configs` of a new topic: every config, value and source."""
    return [
        {key: entry[key] for key in ("name", "value", "read_only", "config_source", "is_sensitive")}
        for entry in describe_topic(broker, explicit)
    ]


def is_list_config(name: str) -> bool:
    """APPEND and SUBTRACT only apply to LIST configs (cleanup.policy, ...)."""
    definition = TOPIC_CONFIGS.get(name)
    return definition is not None and definition.type == "LIST"


def split_list(value: str | None) -> list[str]:
    return [item.strip() for item in (value or "").split(",") if item.strip()]


def validate(broker: TopicConfigBroker, explicit: Mapping[str, str]) -> None:
    """Raise InvalidConfig (name and reason) unless `explicit` is a valid set of topic settings."""
    for name, value in explicit.items():
        if value is None:
            raise InvalidConfig(name, "null values are not supported for topic configs")
        if name not in TOPIC_CONFIGS:
            raise InvalidConfig.unknown(name)
    LogConfig.from_kafka(explicit, broker.logs.defaults)


def explicit_configs(broker: TopicConfigBroker, topic: str) -> dict[str, str]:
    """The settings made on `topic` itself (CreateTopics configs, AlterConfigs)."""
    return dict(broker.topics[topic].configs)


def apply(broker: TopicConfigBroker, topic: str, explicit: Mapping[str, str], validate_only: bool) -> None:
    """Make `explicit` the topic's complete set of settings (after validating it).

    Both alter APIs end here: AlterConfigs sends the full set, IncrementalAlterConfigs
    computes it from the current one.
    """
    validate(broker, explicit)
    if not validate_only:
        broker.alter_topic_configs(topic, dict(explicit))
