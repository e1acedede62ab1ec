"""IncrementalAlterConfigs (44): change some of a topic's settings, or the broker's log levels.

Implements v0-1 (KIP-339). Operations: SET, DELETE (back to the broker default), APPEND
and SUBTRACT (LIST configs such as cleanup.policy; APPEND to an unset config starts from
its current default, as Kafka does, so appending compact to a default "delete" gives
"delete,compact"). Each resource is applied whole or not at all; validate_only changes
nothing.

TOPIC errors: unknown config names for SET/APPEND/SUBTRACT (a DELETE of any name is
accepted, a no-op for a name the topic does not have, as in Kafka), null values for
SET/APPEND/SUBTRACT, bad values and APPEND/SUBTRACT on a non-list config → INVALID_CONFIG; invalid topic name →
INVALID_TOPIC_EXCEPTION; unknown topic → UNKNOWN_TOPIC_OR_PARTITION; a config named twice,
an unknown operation, or a resource named twice in one request → INVALID_REQUEST.

In a cluster a topic's settings are read from and written to ZooKeeper
(server/cluster/config_manager.py), so any broker may receive the request.

BROKER (KIP-226 dynamic broker configs, server/broker_configs.py): the resource name is
this broker's id (its own overrides, `config/brokers/<id>`) or "" (the cluster-wide
defaults, `config/brokers/<default>`), kept in ZooKeeper in a cluster and in the data
directory of a single broker; SET/DELETE/APPEND/SUBTRACT change the stored overrides,
which the broker (every broker) applies without a restart. A setting Kafka cannot change
at runtime → INVALID_REQUEST "Cannot update these configs dynamically: Set(...)", a bad
value → INVALID_REQUEST (Kafka's KAFKA-13609 choice); a name the broker does not know is
kept as a custom config, as Kafka keeps it (APPEND/SUBTRACT of one → INVALID_CONFIG)
(server/dynamic_config.py).
BROKER_LOGGER (Kafka's runtime log levels): SET a logger to OFF, FATAL, ERROR, WARN, INFO,
DEBUG, TRACE or ALL, DELETE to inherit from the parent again; the resource name must be
this broker's id (INVALID_REQUEST otherwise). Unknown logger or level → INVALID_CONFIG;
DELETE of the root logger, APPEND or SUBTRACT → INVALID_REQUEST.
GROUP (Kafka 4's group configs, server/groups/group_config.py): SET or DELETE a group's
own consumer.*, share.*, streams.* and errors.deadletterqueue.* settings, checked as a
whole against their definitions and the broker's bounds (INVALID_CONFIG with Kafka's
messages), kept durably (server/groups/group_configs.py) and applied by the group's
coordinator from its next heartbeat. Checks in Kafka's order: a value missing for
SET/APPEND/SUBTRACT → INVALID_REQUEST "Null value not supported for : <name>"; APPEND or
SUBTRACT → INVALID_CONFIG (Kafka treats no group config as a list); the empty group name →
INVALID_REQUEST "Default group resources are not allowed.". Neither the group's existence
nor its type is checked (Kafka sets configs of any group id).
"""

from __future__ import annotations

import logging

from storage import TOPIC_CONFIGS, InvalidConfig
from wire.errors import ErrorCode
from wire.registry import ApiKey

from server.topics import validate_topic_name
from server.context import RequestContext
from server.errors import InvalidConfiguration, InvalidRequest, KafkaError
from server.dynamic_config import incremental
from server.config_resources import LOG4J_LEVELS, ROOT_LOGGER, answer_resources, broker_id_of, check_topic_resource, loggers
from server.topic_configs import AlterOp, ResourceType, is_list_config, split_list

API_KEY = ApiKey.INCREMENTAL_ALTER_CONFIGS
MAY_BLOCK = False

log = logging.getLogger("trafka.admin")


def _operations(resource: dict) -> list[tuple[str, AlterOp, str | None]]:
    ops = []
    seen: set[str] = set()
    for entry in resource["configs"]:
        name = entry["name"]
        if name in seen:
            raise InvalidRequest("Error due to duplicate config keys")  # Kafka's ConfigAdminManager words
        seen.add(name)
        try:
            op = AlterOp(entry["config_operation"])
        except ValueError:
            raise InvalidRequest(f"unknown config operation {entry['config_operation']} for {name}") from None
        ops.append((name, op, entry["value"]))
    return ops


def new_topic_configs(current: dict[str, str], effective_defaults: dict[str, str],
                      ops: list[tuple[str, AlterOp, str | None]]) -> dict[str, str]:
    """The topic's explicit settings after `ops` (validated later, as a whole)."""
    configs = dict(current)
    for name, op, value in ops:
        if op == AlterOp.DELETE:
            # Any name may be deleted, known or not, as in Kafka (which validates the names
            # of what is left, not of what goes): MirrorMaker 2 resets every config the
            # source topic has at its default with a DELETE, including names of a newer
            # Kafka than this broker.
            configs.pop(name, None)
            continue
        if name not in TOPIC_CONFIGS:
            raise InvalidConfig.unknown(name)
        if value is None:
            raise InvalidConfig(name, f"{op.name} needs a value")
        if op == AlterOp.SET:
            configs[name] = value
            continue
        if not is_list_config(name):
            raise InvalidConfig(name, f"cannot {op.name} to {name}: its type is not LIST")
        items = split_list(configs.get(name, effective_defaults.get(name)))
        change = split_list(value)
        if op == AlterOp.APPEND:
            items += [item for item in dict.fromkeys(change) if item not in items]
        else:
            items = [item for item in items if item not in change]
        configs[name] = ",".join(items)
    return configs


def _alter_topic(ctx: RequestContext, name: str, ops, validate_only: bool):
    broker = ctx.broker
    check_topic_resource(name, {n: v for n, op, v in ops if op != AlterOp.DELETE})
    validate_topic_name(name)
    broker.mode.check_topic_for_config_change(name)
    return _alter_topic_configs(ctx, name, ops, validate_only)


async def _alter_topic_configs(ctx: RequestContext, name: str, ops, validate_only: bool) -> None:
    defaults = ctx.broker.logs.defaults.to_kafka()
    await ctx.broker.mode.alter_topic_configs(name, lambda current: new_topic_configs(current, defaults, ops),
                                              validate_only)
    if not validate_only:
        log.info("IncrementalAlterConfigs %s from %s: %s", name, ctx.client_id,
                 [(n, op.name, v) for n, op, v in ops])


async def _alter_broker(ctx: RequestContext, broker_id: int | None, ops, validate_only: bool) -> None:
    await ctx.broker.dynamic_configs.alter(broker_id, lambda current: incremental(current, ops), validate_only)
    if not validate_only:
        log.info("IncrementalAlterConfigs broker %s from %s: %s", "<default>" if broker_id is None else broker_id,
                 ctx.client_id, [(n, op.name, v) for n, op, v in ops])


def _alter_loggers(ctx: RequestContext, ops, validate_only: bool) -> None:
    found = loggers()
    changes: list[tuple[logging.Logger, int]] = []
    for name, op, value in ops:
        if op in (AlterOp.APPEND, AlterOp.SUBTRACT):
            raise InvalidRequest(f"{op.name} is not allowed for BROKER_LOGGER resources")
        if name not in found:
            raise KafkaError(f"logger {name} does not exist", ErrorCode.INVALID_CONFIG)
        if op == AlterOp.DELETE:
            if name == ROOT_LOGGER:
                raise InvalidRequest("removing the level of the root logger is not allowed")
            changes.append((found[name], logging.NOTSET))
            continue
        level = LOG4J_LEVELS.get((value or "").upper())
        if level is None:
            raise KafkaError(f"cannot set logger {name} to {value!r}: levels are {', '.join(LOG4J_LEVELS)}",
                             ErrorCode.INVALID_CONFIG)
        changes.append((found[name], level))
    if not validate_only:
        for logger, level in changes:
            logger.setLevel(level)
            log.info("logger %s set to %s by %s", logger.name, logging.getLevelName(level), ctx.client_id)


async def _alter_group(ctx: RequestContext, group_id: str, ops, validate_only: bool) -> None:
    for name, op, value in ops:
        if value is None and op != AlterOp.DELETE:
            raise InvalidRequest(f"Null value not supported for : {name}")
    for name, op, _value in ops:
        if op in (AlterOp.APPEND, AlterOp.SUBTRACT):
            raise InvalidConfiguration(f"Can't {op.name} to key {name} because its type is not LIST.")

    def change(current: dict[str, str]) -> dict[str, str]:
        for name, op, value in ops:
            if op == AlterOp.DELETE:
                current.pop(name, None)
            else:
                current[name] = value
        return current

    await ctx.broker.group_configs.alter(group_id, change, validate_only)
    if not validate_only:
        log.info("IncrementalAlterConfigs group %s from %s: %s", group_id, ctx.client_id,
                 [(n, op.name, v) for n, op, v in ops])


def _alter(ctx: RequestContext, resource: dict, validate_only: bool):
    kind = resource["resource_type"]
    name = resource["resource_name"]
    ops = _operations(resource)
    if kind == ResourceType.TOPIC:
        return _alter_topic(ctx, name, ops, validate_only)
    elif kind == ResourceType.BROKER:
        broker_id = broker_id_of(ctx.broker, name, allow_empty=True)
        return _alter_broker(ctx, broker_id, ops, validate_only)
    elif kind == ResourceType.BROKER_LOGGER:
        broker_id_of(ctx.broker, name, allow_empty=False)
        _alter_loggers(ctx, ops, validate_only)
    elif kind == ResourceType.GROUP:
        return _alter_group(ctx, name, ops, validate_only)
    else:
        raise InvalidRequest(f"IncrementalAlterConfigs supports topics, brokers, broker loggers and groups, "
                             f"not resource type {kind}")


async def handle(ctx: RequestContext, request: dict) -> dict:
    return await answer_resources(ctx, request, _alter, "IncrementalAlterConfigs")
