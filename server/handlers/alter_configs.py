"""AlterConfigs (33): replace a topic's whole set of settings (the pre-KIP-339 API).

Implements v0-2. The configs given become the topic's only explicit settings: a name left
out goes back to its broker default. validate_only checks everything and changes nothing.

Errors per resource: unknown config names, null values and bad values → INVALID_CONFIG
(the message names the config); invalid topic name → INVALID_TOPIC_EXCEPTION; unknown
topic → UNKNOWN_TOPIC_OR_PARTITION; a config named twice, or a resource named twice in
one request → INVALID_REQUEST. BROKER resources → INVALID_REQUEST: every broker setting
is static here (Kafka answers the same for configs that are not dynamic), and a broker
id other than this one is INVALID_REQUEST too. Other resource types (BROKER_LOGGER
included, as in Kafka) → INVALID_REQUEST.
"""

from __future__ import annotations

import logging

from wire.errors import ErrorCode
from wire.registry import ApiKey

from server.broker import validate_topic_name
from server.context import RequestContext
from server.errors import InvalidRequest, UnknownTopicOrPartition, error_code_for
from server.handlers.describe_configs import broker_id_of
from server.topic_configs import ResourceType, apply

API_KEY = ApiKey.ALTER_CONFIGS
MAY_BLOCK = False

log = logging.getLogger("trafka.admin")

BROKER_CONFIGS_STATIC = "dynamic broker configs are not supported: broker settings are read at start-up"


def duplicated_resources(resources: list[dict]) -> set[tuple[int, str]]:
    keys = [(r["resource_type"], r["resource_name"]) for r in resources]
    return {k for k in keys if keys.count(k) > 1}


def _alter(ctx: RequestContext, resource: dict, validate_only: bool) -> None:
    broker = ctx.broker
    kind = resource["resource_type"]
    name = resource["resource_name"]
    if kind == ResourceType.BROKER:
        broker_id_of(broker, name, allow_empty=True)
        raise InvalidRequest(BROKER_CONFIGS_STATIC)
    if kind != ResourceType.TOPIC:
        raise InvalidRequest(f"AlterConfigs supports topics and brokers, not resource type {kind}")
    validate_topic_name(name)
    if name not in broker.topics:
        raise UnknownTopicOrPartition(f"topic {name} does not exist")
    configs: dict[str, str] = {}
    for entry in resource["configs"]:
        if entry["name"] in configs:
            raise InvalidRequest(f"config {entry['name']} appears more than once")
        configs[entry["name"]] = entry["value"]
    apply(broker, name, configs, validate_only)
    if not validate_only:
        log.info("AlterConfigs %s from %s: %s", name, ctx.client_id, configs)


def answer_resources(ctx: RequestContext, request: dict, alter, what: str) -> dict:
    """One response entry per resource, each applied on its own with `alter(ctx, resource,
    validate_only)`; shared by AlterConfigs and IncrementalAlterConfigs."""
    validate_only = bool(request.get("validate_only"))
    duplicated = duplicated_resources(request["resources"])
    responses = []
    for resource in request["resources"]:
        key = (resource["resource_type"], resource["resource_name"])
        response = {"error_code": ErrorCode.NONE, "error_message": None, "resource_type": key[0],
                    "resource_name": key[1]}
        try:
            if key in duplicated:
                raise InvalidRequest("resource appears more than once in the request")
            alter(ctx, resource, validate_only)
        except Exception as exc:
            code = error_code_for(exc)
            if code == ErrorCode.UNKNOWN_SERVER_ERROR:
                log.exception("%s %s failed", what, key)
            else:
                log.info("%s %s from %s: %s (%s)", what, key, ctx.client_id, code.name, exc)
            response.update(error_code=code, error_message=str(exc))
        responses.append(response)
    return {"throttle_time_ms": 0, "responses": responses}


async def handle(ctx: RequestContext, request: dict) -> dict:
    return answer_resources(ctx, request, _alter, "AlterConfigs")
