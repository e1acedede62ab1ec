"""AlterConfigs (33): replace a topic's whole set of settings (the pre-KIP-339 API).

Implements v0-2. The configs given become the topic's only explicit settings: a name left
out goes back to its broker default. validate_only checks everything and changes nothing.

In a cluster the topic's config lives in ZooKeeper: it is written to `/config/topics/<t>`
with a change notice, and every broker hosting the topic applies it
(server/cluster/config_manager.py); any broker may receive the request.

Errors per resource: unknown config names, null values and bad values → INVALID_CONFIG
(the message names the config); invalid topic name → INVALID_TOPIC_EXCEPTION; unknown
topic → UNKNOWN_TOPIC_OR_PARTITION; a config named twice, or a resource named twice in
one request → INVALID_REQUEST. BROKER resources: the configs given become the broker's
(name "<id>") or the cluster default's (name "") whole set of dynamic overrides (KIP-226,
server/broker_configs.py: in ZooKeeper in a cluster, in the data directory of a single
broker; errors as in incremental_alter_configs.py). A broker id other than this one is
INVALID_REQUEST. GROUP resources: the configs given become the group's whole set of group
configs (server/groups/group_config.py; checks and messages as in
incremental_alter_configs.py). Other resource types (BROKER_LOGGER included, as in Kafka) →
INVALID_REQUEST.
"""

from __future__ import annotations

import logging

from wire.registry import ApiKey

from server.topics import validate_topic_name
from server.context import RequestContext
from server.errors import InvalidRequest
from server.config_resources import answer_resources, broker_id_of
from server.topic_configs import ResourceType

API_KEY = ApiKey.ALTER_CONFIGS
MAY_BLOCK = False

log = logging.getLogger("trafka.admin")

def _alter(ctx: RequestContext, resource: dict, validate_only: bool):
    broker = ctx.broker
    kind = resource["resource_type"]
    name = resource["resource_name"]
    if kind == ResourceType.BROKER:
        broker_id = broker_id_of(broker, name, allow_empty=True)
        return _alter_broker(ctx, broker_id, resource["configs"], validate_only)
    if kind == ResourceType.GROUP:
        return _alter_group(ctx, name, resource["configs"], validate_only)
    if kind != ResourceType.TOPIC:
        raise InvalidRequest(f"AlterConfigs supports topics, brokers and groups, not resource type {kind}")
    validate_topic_name(name)
    broker.mode.check_topic_for_config_change(name)
    configs: dict[str, str] = {}
    for entry in resource["configs"]:
        if entry["name"] in configs:
            raise InvalidRequest(f"config {entry['name']} appears more than once")
        configs[entry["name"]] = entry["value"]
    return _alter_topic(ctx, name, configs, validate_only)


async def _alter_broker(ctx: RequestContext, broker_id: int | None, entries: list[dict], validate_only: bool) -> None:
    configs: dict[str, str] = {}
    for entry in entries:
        if entry["name"] in configs:
            raise InvalidRequest(f"config {entry['name']} appears more than once")
        if entry["value"] is None:
            raise InvalidRequest(f"Null value not supported for : {entry['name']}")
        configs[entry["name"]] = entry["value"]
    await ctx.broker.dynamic_configs.alter(broker_id, lambda _current: configs, validate_only)
    if not validate_only:
        log.info("AlterConfigs broker %s from %s: %s", "<default>" if broker_id is None else broker_id,
                 ctx.client_id, configs)


async def _alter_group(ctx: RequestContext, group_id: str, entries: list[dict], validate_only: bool) -> None:
    """Kafka's checks in its order: duplicate names, values missing, the empty group name
    (server/groups/group_configs.py), then the whole new set."""
    configs: dict[str, str] = {}
    for entry in entries:
        if entry["name"] in configs:
            raise InvalidRequest("Error due to duplicate config keys")
        configs[entry["name"]] = entry["value"]
    for name, value in configs.items():
        if value is None:
            raise InvalidRequest(f"Null value not supported for : {name}")
    await ctx.broker.group_configs.alter(group_id, lambda _current: configs, validate_only)
    if not validate_only:
        log.info("AlterConfigs group %s from %s: %s", group_id, ctx.client_id, configs)


async def _alter_topic(ctx: RequestContext, name: str, configs: dict[str, str], validate_only: bool) -> None:
    await ctx.broker.mode.alter_topic_configs(name, lambda _current: configs, validate_only)
    if not validate_only:
        log.info("AlterConfigs %s from %s: %s", name, ctx.client_id, configs)


async def handle(ctx: RequestContext, request: dict) -> dict:
    return await answer_resources(ctx, request, _alter, "AlterConfigs")
