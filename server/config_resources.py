"""What the config APIs share: broker and logger resources, and the per-resource answer loop.

Why a module of its own: DescribeConfigs, AlterConfigs and IncrementalAlterConfigs all
name broker and logger resources the same way and answer resource by resource; handlers
never import each other (an import contract in pyproject.toml), so the shared parts live
here. Topic configs have their own module (server/topic_configs.py).
"""

from __future__ import annotations

import inspect
import logging
from typing import TYPE_CHECKING

from wire.errors import ErrorCode

from server.errors import InvalidRequest, logged_error_code

if TYPE_CHECKING:
    from server.context import RequestContext

log = logging.getLogger("trafka.admin")

# Python level <-> the log4j names Kafka's clients and tools use (ALL and TRACE are DEBUG here).
LOG4J_LEVELS = {"ALL": logging.DEBUG, "TRACE": logging.DEBUG, "DEBUG": logging.DEBUG, "INFO": logging.INFO,
                "WARN": logging.WARNING, "ERROR": logging.ERROR, "FATAL": logging.CRITICAL,
                "OFF": logging.CRITICAL + 10}
ROOT_LOGGER = "root"


def log4j_level(level: int) -> str:
    for name in ("DEBUG", "INFO", "WARN", "ERROR", "FATAL"):
        if level <= LOG4J_LEVELS[name]:
            return name
    return "OFF"


def broker_id_of(broker, resource_name: str | None, *, allow_empty: bool) -> int | None:
    """The broker id a BROKER/BROKER_LOGGER resource names: None for "" (cluster default);
    INVALID_REQUEST for anything that is not this broker (Kafka's ConfigHelper rule)."""
    if not resource_name:
        if allow_empty:
            return None
        raise InvalidRequest("broker id must not be empty")
    try:
        node = int(resource_name)
    except ValueError:
        raise InvalidRequest(f"broker id must be a number, got {resource_name!r}") from None
    if node != broker.node_id:
        raise InvalidRequest(f"unexpected broker id, expected {broker.node_id}, got {resource_name}")
    return node


def loggers() -> dict[str, logging.Logger]:
    """Every logger this process has created, plus the root one, by name."""
    found: dict[str, logging.Logger] = {ROOT_LOGGER: logging.getLogger()}
    for name, item in sorted(logging.Logger.manager.loggerDict.items()):
        if isinstance(item, logging.Logger):
            found[name] = item
    return found


def duplicated_resources(resources: list[dict]) -> set[tuple[int, str]]:
    keys = [(r["resource_type"], r["resource_name"]) for r in resources]
    return {k for k in keys if keys.count(k) > 1}


def check_access(ctx: RequestContext, resource_type: int, name: str, *, alter: bool) -> None:
    """Kafka: DESCRIBE_CONFIGS / ALTER_CONFIGS on the topic (TOPIC_AUTHORIZATION_FAILED), or
    on the cluster for a broker or broker logger (CLUSTER_AUTHORIZATION_FAILED)."""
    if ctx.broker.authorizer is None:
        return
    from server.errors import ClusterAuthorizationFailed, TopicAuthorizationFailed
    from server.security.acls import CLUSTER_NAME, AclOperation, ResourceType

    op = AclOperation.ALTER_CONFIGS if alter else AclOperation.DESCRIBE_CONFIGS
    if resource_type == 2:
        if not ctx.authorize(op, ResourceType.TOPIC, name):
            raise TopicAuthorizationFailed(f"not authorized to {op.name} of topic {name}")
    elif resource_type in (4, 8):
        if not ctx.authorize(op, ResourceType.CLUSTER, CLUSTER_NAME):
            raise ClusterAuthorizationFailed(f"not authorized to {op.name} of the cluster")
    elif resource_type == 32:  # GROUP: Kafka checks the group's ACLs
        from server.errors import GroupAuthorizationFailed

        if not ctx.authorize(op, ResourceType.GROUP, name):
            raise GroupAuthorizationFailed(f"not authorized to {op.name} of group {name}")


async def answer_resources(ctx: RequestContext, request: dict, alter, what: str) -> dict:
    """One response entry per resource, each applied on its own with `alter(ctx, resource,
    validate_only)`; shared by AlterConfigs and IncrementalAlterConfigs. `alter` may return
    an awaitable (a topic in a cluster is altered through ZooKeeper), which is awaited."""
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
            check_access(ctx, key[0], key[1], alter=True)
            pending = alter(ctx, resource, validate_only)
            if inspect.isawaitable(pending):
                await pending
        except Exception as exc:
            code = logged_error_code(exc, log, f"{what} {key}", ctx.client_id)
            response.update(error_code=code, error_message=str(exc))
        responses.append(response)
    return {"throttle_time_ms": 0, "responses": responses}
