"""DescribeConfigs (32): topic, broker and broker-logger configs with sources and defaults.

Implements v0-4 (v0 has neither synonyms nor config_source but an is_default flag, which
Kafka 3.9 never sets: it answers false, and so do we): configuration_keys (null = all; unknown names are skipped),
include_synonyms (v1+), include_documentation (v3+) and config_type (v3+).

- TOPIC: every topic config with its effective value; sources DYNAMIC_TOPIC_CONFIG (set
  on the topic), STATIC_BROKER_CONFIG (inherited from a broker setting given in the file,
  environment or flags) or DEFAULT_CONFIG (server/topic_configs.py). Invalid name →
  INVALID_TOPIC_EXCEPTION, unknown topic → UNKNOWN_TOPIC_OR_PARTITION.
  In a cluster a topic with no replica on this broker is described from its config in
  ZooKeeper (`/config/topics/<t>`); a hosted one from the config its logs run under, which
  follows ZooKeeper through the change notices (server/cluster/config_manager.py).
- BROKER: this broker's settings (server/config.py) plus unknown keys from its file with
  their effective values, and the custom configs of its dynamic layers; sources
  DYNAMIC_BROKER_CONFIG, DYNAMIC_DEFAULT_BROKER_CONFIG (dynamic broker configs,
  server/broker_configs.py), STATIC_BROKER_CONFIG or DEFAULT_CONFIG, synonyms the whole
  chain most specific first. read_only is false for the settings that may change at
  runtime (server/dynamic_config.py). A dynamic custom config (a name the broker has no
  setting for) is described as Kafka describes one: read-only, sensitive, value hidden.
  The name "" means the cluster-wide dynamic defaults: just those set, as in Kafka.
  Another broker id or a non-number → INVALID_REQUEST.
- BROKER_LOGGER: the process's loggers and their levels in log4j words (Kafka lists its
  log4j loggers); "" or another broker id → INVALID_REQUEST.
- GROUP (Kafka 4's group configs, server/groups/group_config.py): every group config but
  the internal ones, with source GROUP_CONFIG (8) for those the group set, else the source
  of the broker setting it falls back to (group.consumer.session.timeout.ms for
  consumer.session.timeout.ms, ...) or DEFAULT_CONFIG; synonyms the group's value then that
  broker setting's chain. Any group id, existing or not, of any type; "" →
  INVALID_REQUEST "Group name must not be empty".
- Any other resource type → INVALID_REQUEST.
"""

from __future__ import annotations

import logging

from storage import CONFIG_TYPE_IDS
from wire.errors import ErrorCode
from wire.registry import ApiKey

from server.topics import validate_topic_name
from server.config import SETTINGS
from server.config_resources import check_access
from server.context import RequestContext
from server.errors import InvalidRequest, logged_error_code
from server.config_resources import broker_id_of, log4j_level, loggers
from server.dynamic_config import is_dynamic
from server.groups import group_config
from server.topic_configs import ConfigSource, ResourceType, broker_source, broker_synonyms, describe_topic

API_KEY = ApiKey.DESCRIBE_CONFIGS
MAY_BLOCK = False

log = logging.getLogger("trafka.admin")

_SENSITIVE_MARKERS = ("password", "secret", "sasl.jaas.config", "ssl.keystore.key")

def _broker_entry(broker, name: str, value: str | None, source: ConfigSource, chain: list[dict],
                  synonyms: bool, documentation: bool) -> dict:
    setting = SETTINGS.get(name)
    # Kafka hides the value of a config whose type it does not know (KafkaConfig.maybeSensitive):
    # the dynamic custom configs
    sensitive = any(marker in name for marker in _SENSITIVE_MARKERS) or (
        setting is None and source in (ConfigSource.DYNAMIC_BROKER_CONFIG, ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG))
    if sensitive:
        chain = [{**entry, "value": None} for entry in chain]
    return {
        "name": name,
        "value": None if sensitive else value,
        "read_only": not is_dynamic(name),  # Kafka: read-only unless a dynamic broker config
        "config_source": source,
        "is_sensitive": sensitive,
        "synonyms": chain if synonyms else [],
        "config_type": CONFIG_TYPE_IDS["PASSWORD" if sensitive else setting.kafka_type if setting else "STRING"],
        "documentation": (setting.doc if setting else None) if documentation else None,
    }


def _broker_entries(broker, keys: list[str] | None, synonyms: bool, documentation: bool) -> list[dict]:
    cfg = broker.config
    effective = {"node.id": str(broker.node_id), "broker.id": str(broker.node_id), "cluster.id": broker.cluster_id,
                 "log.dirs": str(broker.data_dir)}
    names = list(dict.fromkeys([*SETTINGS, *cfg.values, *cfg.dynamic_default, *cfg.dynamic_broker]))
    if keys is not None:
        wanted = set(keys)
        names = [n for n in names if n in wanted]
    return [_broker_entry(broker, name, effective.get(name, cfg.raw(name)), broker_source(broker, name),
                          broker_synonyms(broker, [name]), synonyms, documentation)
            for name in names]


def _default_entries(broker, keys: list[str] | None, synonyms: bool, documentation: bool) -> list[dict]:
    """The cluster-wide dynamic defaults (resource name ""): only those set, each with its
    DYNAMIC_DEFAULT_BROKER_CONFIG synonym alone (Kafka's perBrokerConfig=false)."""
    found = broker.config.dynamic_default
    names = list(found) if keys is None else [k for k in dict.fromkeys(keys) if k in found]
    source = ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG
    return [_broker_entry(broker, name, found[name], source, [{"name": name, "value": found[name], "source": source}],
                          synonyms, documentation)
            for name in names]


def _logger_entries(keys: list[str] | None) -> list[dict]:
    found = loggers()
    names = list(found) if keys is None else [k for k in dict.fromkeys(keys) if k in found]
    return [
        {
            "name": name,
            "value": log4j_level(found[name].getEffectiveLevel()),
            "read_only": False,
            "config_source": ConfigSource.DYNAMIC_BROKER_LOGGER_CONFIG,
            "is_sensitive": False,
            "synonyms": [],
            "config_type": CONFIG_TYPE_IDS["STRING"],
            "documentation": None,
        }
        for name in names
    ]


async def describe(ctx: RequestContext, resource: dict, synonyms: bool, documentation: bool) -> list[dict]:
    broker = ctx.broker
    kind = resource["resource_type"]
    name = resource["resource_name"]
    keys = resource.get("configuration_keys")
    if kind == ResourceType.TOPIC:
        validate_topic_name(name)
        # in a cluster, a topic with no replica here: its settings as ZooKeeper holds them
        explicit, effective = await broker.mode.topic_configs(name)
        return describe_topic(broker, explicit, keys, synonyms=synonyms, documentation=documentation,
                              effective=effective)
    if kind == ResourceType.BROKER:
        if broker_id_of(broker, name, allow_empty=True) is None:
            return _default_entries(broker, keys, synonyms, documentation)
        return _broker_entries(broker, keys, synonyms, documentation)
    if kind == ResourceType.BROKER_LOGGER:
        broker_id_of(broker, name, allow_empty=False)
        return _logger_entries(keys)
    if kind == ResourceType.GROUP:
        if not name:
            raise InvalidRequest("Group name must not be empty")
        await broker.group_configs.refresh(name)  # in a cluster: ZooKeeper's, re-read
        return group_config.describe(broker.config, broker.group_configs.own(name), keys, synonyms=synonyms,
                                     documentation=documentation,
                                     broker_chain=lambda setting: broker_synonyms(broker, [setting]))
    raise InvalidRequest(f"unsupported resource type {kind}")


async def handle(ctx: RequestContext, request: dict) -> dict:
    synonyms = bool(request.get("include_synonyms"))
    documentation = bool(request.get("include_documentation"))
    results = []
    for resource in request["resources"]:
        # Kafka answers a described resource with error_message "" (not null).
        result = {"error_code": ErrorCode.NONE, "error_message": "", "resource_type": resource["resource_type"],
                  "resource_name": resource["resource_name"], "configs": []}
        try:
            check_access(ctx, resource["resource_type"], resource["resource_name"], alter=False)
            result["configs"] = await describe(ctx, resource, synonyms, documentation)
            if ctx.api_version == 0:
                # v0's is_default: Kafka 3.9 never sets it (its answers carry config_source,
                # which v0 lacks), so every v0 entry says false.
                result["configs"] = [{**c, "is_default": False} for c in result["configs"]]
        except Exception as exc:
            code = logged_error_code(exc, log, f"DescribeConfigs {resource['resource_type']}/"
                                               f"{resource['resource_name']}", ctx.client_id)
            result.update(error_code=code, error_message=str(exc))
        results.append(result)
    return {"throttle_time_ms": 0, "results": results}
