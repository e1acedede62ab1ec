"""The console's routes: the page at `/`, its files under `/static/`, JSON under `/api/`.

Reads come from `views.py` (in-process state); actions go through the Kafka handlers
(`calls.py`), so a refused action carries the error a Kafka client would get. Every error
is JSON `{error_code, error, message}` with Kafka's error name, a 4xx status (404 for an
unknown topic or group, 409 for a conflict, 403 when not authorized, 421 when another
broker holds the partition or group, 400 otherwise) and a log line; an unexpected failure
is UNKNOWN_SERVER_ERROR, 500, with its traceback in the log.

    GET    /api/cluster                           brokers and the controller
    GET    /api/topics                            topics
    POST   /api/topics                            create {name, partitions, replication_factor, configs}
    GET    /api/topics/{topic}                    partitions: leader, replicas, ISR, offsets, size
    DELETE /api/topics/{topic}                    delete
    GET    /api/topics/{topic}/partitions/{p}/records?offset=N|timestamp=MS&limit=50
    GET    /api/groups                            groups this broker coordinates
    GET    /api/groups/{group}                    members, assignments, committed offsets, lag
    POST   /api/groups/{group}/reset-offsets      {to: earliest|latest|offset, offset?, topic?}
    GET    /api/rates                             message and byte counters, sampled by the page
"""

from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import Any

import trio
from starlette.requests import Request
from starlette.responses import FileResponse, JSONResponse, Response
from starlette.routing import Mount, Route
from starlette.staticfiles import StaticFiles

from wire.errors import ErrorCode
from wire.primitives import ZERO_UUID
from wire.registry import ApiKey

from server.errors import error_code_for
from server.http.console import browse, views
from server.http.console.calls import console_context, kafka_call
from server.security.acls import AclOperation, ResourceType

log = logging.getLogger("trafka.console")

STATIC = Path(__file__).parent / "static"
EARLIEST, LATEST = -2, -1
TIMEOUT_MS = 30000

_STATUS = {
    ErrorCode.UNKNOWN_TOPIC_OR_PARTITION: 404, ErrorCode.GROUP_ID_NOT_FOUND: 404,
    ErrorCode.TOPIC_ALREADY_EXISTS: 409, ErrorCode.NON_EMPTY_GROUP: 409, ErrorCode.TOPIC_DELETION_DISABLED: 409,
    ErrorCode.TOPIC_AUTHORIZATION_FAILED: 403, ErrorCode.GROUP_AUTHORIZATION_FAILED: 403,
    ErrorCode.CLUSTER_AUTHORIZATION_FAILED: 403,
    ErrorCode.NOT_LEADER_OR_FOLLOWER: 421, ErrorCode.NOT_COORDINATOR: 421,
    ErrorCode.COORDINATOR_LOAD_IN_PROGRESS: 503,  # the broker is still recovering its logs
    ErrorCode.UNKNOWN_SERVER_ERROR: 500,
}


class ConsoleError(Exception):
    """A refused console request: its Kafka error code and a message for the person."""

    def __init__(self, code: ErrorCode, message: str) -> None:
        super().__init__(message)
        self.code = code


def error_response(code: ErrorCode, message: str) -> JSONResponse:
    return JSONResponse({"error_code": int(code), "error": code.name, "message": message},
                        status_code=_STATUS.get(code, 400))


async def json_response(data: Any, status_code: int = 200) -> Response:
    """The state was read on the trio thread (one consistent view); turning it into JSON,
    which for thousands of partitions or 200 records takes a while, runs in a worker thread."""
    text = await trio.to_thread.run_sync(lambda: json.dumps(data, ensure_ascii=False, separators=(",", ":")))
    return Response(text, status_code=status_code, media_type="application/json")


def _code(value: int) -> ErrorCode:
    try:
        return ErrorCode(value)
    except ValueError:
        return ErrorCode.UNKNOWN_SERVER_ERROR


def _int(value: Any, what: str, *, minimum: int | None = None, maximum: int | None = None) -> int:
    """An integer from a query string or JSON body, or INVALID_REQUEST naming `what`."""
    if isinstance(value, bool):
        raise ConsoleError(ErrorCode.INVALID_REQUEST, f"{what} must be an integer, got {value!r}")
    try:
        number = int(value)
    except (TypeError, ValueError):
        raise ConsoleError(ErrorCode.INVALID_REQUEST, f"{what} must be an integer, got {value!r}") from None
    if minimum is not None and number < minimum or maximum is not None and number > maximum:
        bounds = f"from {minimum}" + (f" to {maximum}" if maximum is not None else "")
        raise ConsoleError(ErrorCode.INVALID_REQUEST, f"{what} must be {bounds}, got {number}")
    return number


async def _json_body(request: Request) -> dict[str, Any]:
    """The action's JSON object. Only with Content-Type application/json: a page on another
    site can make a browser POST text/plain (or a form) here without asking first, but not
    application/json, which needs a CORS preflight this listener never grants; so no other
    site can create topics or reset offsets through a visitor's browser."""
    if request.headers.get("content-type", "").split(";")[0].strip().lower() != "application/json":
        raise ConsoleError(ErrorCode.INVALID_REQUEST, "the request body must be JSON sent as application/json")
    try:
        body = await request.json()
    except ValueError:
        raise ConsoleError(ErrorCode.INVALID_REQUEST, "the request body must be JSON") from None
    if not isinstance(body, dict):
        raise ConsoleError(ErrorCode.INVALID_REQUEST, "the request body must be a JSON object")
    return body


class ConsoleApi:
    """The routes of one broker's console; `endpoint` is the HttpEndpoint (its `broker`
    once the broker exists; the broker's `schema_registry` when one runs in this process)."""

    def __init__(self, endpoint: Any) -> None:
        self.endpoint = endpoint

    @property
    def broker(self) -> Any:
        broker = self.endpoint.broker
        if broker is None or not self.endpoint.opened:
            raise ConsoleError(ErrorCode.COORDINATOR_LOAD_IN_PROGRESS, "the broker is recovering its logs")
        return broker

    def routes(self) -> list:
        def route(path: str, handler, methods=("GET",)) -> Route:
            async def guarded(request: Request) -> Response:
                try:
                    return await handler(request)
                except ConsoleError as exc:
                    log.info("console %s %s: %s (%s)", request.method, request.url.path, exc.code.name, exc)
                    return error_response(exc.code, str(exc))
                except Exception as exc:  # storage's errors (a log deleted or truncated meanwhile) get their code
                    code = error_code_for(exc)
                    if code == ErrorCode.UNKNOWN_SERVER_ERROR:
                        log.exception("console %s %s failed", request.method, request.url.path)
                    else:
                        log.info("console %s %s: %s (%s)", request.method, request.url.path, code.name, exc)
                    return error_response(code, f"{type(exc).__name__}: {exc}")
            return Route(path, guarded, methods=list(methods))

        return [
            Route("/", self.index),
            route("/api/cluster", self.cluster),
            route("/api/topics", self.topics),
            route("/api/topics", self.create_topic, ("POST",)),
            route("/api/topics/{topic}", self.topic),
            route("/api/topics/{topic}", self.delete_topic, ("DELETE",)),
            route("/api/topics/{topic}/partitions/{partition}/records", self.records),
            route("/api/groups", self.groups),
            route("/api/groups/{group}", self.group),
            route("/api/groups/{group}/reset-offsets", self.reset_offsets, ("POST",)),
            route("/api/rates", self.rates),
            route("/api/{rest:path}", self.not_found, ("GET", "POST", "DELETE", "PUT")),
            Mount("/static", StaticFiles(directory=STATIC), name="static"),
        ]

    # ---- reads ----------------------------------------------------------------------
    # With an authorizer, reads are allowed as for an unauthenticated Kafka client
    # (calls.py): DESCRIBE to see a topic or group, READ to browse a topic's records.
    def _may(self, broker: Any, api_key: ApiKey, op: AclOperation, resource: ResourceType, name: str,
             log_denied: bool = True) -> bool:
        return console_context(broker, api_key).authorize(op, resource, name, log_denied=log_denied)

    def _check(self, broker: Any, api_key: ApiKey, op: AclOperation, resource: ResourceType, name: str) -> None:
        if not self._may(broker, api_key, op, resource, name):
            code = ErrorCode.TOPIC_AUTHORIZATION_FAILED if resource == ResourceType.TOPIC \
                else ErrorCode.GROUP_AUTHORIZATION_FAILED
            raise ConsoleError(code, f"not authorized to {op.name} {resource.name.lower()} {name} "
                                     "(the console is User:ANONYMOUS)")

    async def index(self, _request: Request) -> Response:
        return FileResponse(STATIC / "index.html")

    async def not_found(self, request: Request) -> Response:
        raise ConsoleError(ErrorCode.INVALID_REQUEST, f"no console API at {request.method} {request.url.path}")

    async def cluster(self, _request: Request) -> Response:
        return JSONResponse(views.brokers(self.broker))

    async def topics(self, _request: Request) -> Response:
        broker = self.broker
        return await json_response({"topics": [
            t for t in views.topics(broker)
            if self._may(broker, ApiKey.METADATA, AclOperation.DESCRIBE, ResourceType.TOPIC, t["name"], False)]})

    async def topic(self, request: Request) -> Response:
        name = request.path_params["topic"]
        self._check(self.broker, ApiKey.METADATA, AclOperation.DESCRIBE, ResourceType.TOPIC, name)
        found = views.topic(self.broker, name)
        if found is None:
            raise ConsoleError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"topic {name} does not exist")
        return await json_response(found)

    async def groups(self, _request: Request) -> Response:
        broker = self.broker
        return await json_response({"groups": [
            g for g in views.groups(broker)
            if self._may(broker, ApiKey.LIST_GROUPS, AclOperation.DESCRIBE, ResourceType.GROUP, g["group_id"], False)]})

    async def group(self, request: Request) -> Response:
        group_id = request.path_params["group"]
        broker = self.broker
        self._check(broker, ApiKey.DESCRIBE_GROUPS, AclOperation.DESCRIBE, ResourceType.GROUP, group_id)
        status = broker.groups.group_status(group_id) if broker.groups is not None else ErrorCode.NONE
        if status != ErrorCode.NONE:
            raise ConsoleError(status, f"group {group_id}: {status.name} on broker {broker.node_id}")
        found = views.group(broker, group_id)
        if found is None:
            raise ConsoleError(ErrorCode.GROUP_ID_NOT_FOUND, f"group {group_id} does not exist")
        return await json_response(found)

    async def rates(self, _request: Request) -> Response:
        return JSONResponse(views.rates(self.broker))

    async def records(self, request: Request) -> Response:
        """Records from `offset` (default: the log start) or from the first record at or
        after `timestamp` (ListOffsets' answer), at most `limit` (≤ 200)."""
        broker = self.broker
        name = request.path_params["topic"]
        index = _int(request.path_params["partition"], "partition", minimum=0)
        query = request.query_params
        limit = _int(query.get("limit", 50), "limit", minimum=1, maximum=browse.MAX_RECORDS)
        self._check(broker, ApiKey.FETCH, AclOperation.READ, ResourceType.TOPIC, name)
        if views.topic(broker, name) is None:
            raise ConsoleError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"topic {name} does not exist")
        partition = broker.partitions.get((name, index))
        if partition is None:
            states = {p["partition"]: p for p in views.partitions(broker, name)}
            if index not in states:
                raise ConsoleError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"{name} has no partition {index}")
            leader = states[index]["leader"]
            where = next((b for b in views.brokers(broker)["brokers"] if b["node_id"] == leader), None)
            at = f" ({where['host']}:{where['port']})" if where else ""
            raise ConsoleError(ErrorCode.NOT_LEADER_OR_FOLLOWER,
                               f"{name}-{index} has no replica on broker {broker.node_id}: broker {leader}{at} "
                               "leads it; browse it in that broker's console")
        if "timestamp" in query:
            timestamp = _int(query["timestamp"], "timestamp", minimum=0)
            offset = await self._offset_for(broker, name, index, timestamp)
        else:
            offset = _int(query.get("offset", partition.log.log_start_offset), "offset", minimum=0)
        decoder = browse.avro_decoder(broker.schema_registry)  # set by the registry's start-up
        answer = await trio.to_thread.run_sync(browse.read_records, partition, offset, limit, decoder)
        if "timestamp" in query:
            answer["timestamp"] = int(query["timestamp"])
        return await json_response(answer)

    async def _list_offset(self, broker: Any, name: str, index: int, timestamp: int) -> int:
        """ListOffsets' answer for one partition (-1: no record at or after `timestamp`)."""
        body = {"replica_id": -1, "isolation_level": 0, "topics": [
            {"name": name, "partitions": [{"partition_index": index, "current_leader_epoch": -1,
                                           "timestamp": timestamp}]}]}
        answer = (await kafka_call(broker, ApiKey.LIST_OFFSETS, 7, body))["topics"][0]["partitions"][0]
        code = _code(answer["error_code"])
        if code != ErrorCode.NONE:
            raise ConsoleError(code, f"ListOffsets {name}-{index} at {timestamp}: {code.name}")
        return answer["offset"]

    async def _offset_for(self, broker: Any, name: str, index: int, timestamp: int) -> int:
        offset = await self._list_offset(broker, name, index, timestamp)
        return offset if offset >= 0 else await self._list_offset(broker, name, index, LATEST)

    # ---- actions ----------------------------------------------------------------------
    async def create_topic(self, request: Request) -> Response:
        broker = self.broker
        body = await _json_body(request)
        name = body.get("name")
        if not isinstance(name, str) or not name:
            raise ConsoleError(ErrorCode.INVALID_TOPIC_EXCEPTION, "name must be a non-empty string")
        partitions = _int(body.get("partitions", -1), "partitions")
        replication = _int(body.get("replication_factor", -1), "replication_factor")
        configs = body.get("configs") or {}
        if not isinstance(configs, dict) or not all(isinstance(k, str) and isinstance(v, (str, int, float, bool))
                                                    for k, v in configs.items()):
            raise ConsoleError(ErrorCode.INVALID_CONFIG, "configs must be an object of name: value")
        topic = {"name": name, "num_partitions": partitions, "replication_factor": replication, "assignments": [],
                 "configs": [{"name": k, "value": str(v).lower() if isinstance(v, bool) else str(v)}
                             for k, v in configs.items()]}
        answer = await kafka_call(broker, ApiKey.CREATE_TOPICS, 7,
                                  {"topics": [topic], "timeout_ms": TIMEOUT_MS, "validate_only": False})
        result = answer["topics"][0]
        code = _code(result["error_code"])
        if code != ErrorCode.NONE:
            raise ConsoleError(code, result.get("error_message") or f"CreateTopics {name}: {code.name}")
        log.info("console: created topic %s (%d partitions, replication factor %d)", name,
                 result["num_partitions"], result["replication_factor"])
        return JSONResponse({"name": name, "partitions": result["num_partitions"],
                             "replication_factor": result["replication_factor"]}, status_code=201)

    async def delete_topic(self, request: Request) -> Response:
        name = request.path_params["topic"]
        answer = await kafka_call(self.broker, ApiKey.DELETE_TOPICS, 6,
                                  {"topics": [{"name": name, "topic_id": ZERO_UUID}], "timeout_ms": TIMEOUT_MS})
        result = answer["responses"][0]
        code = _code(result["error_code"])
        if code != ErrorCode.NONE:
            message = result.get("error_message") or (f"topic {name} does not exist"
                                                      if code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
                                                      else f"DeleteTopics {name}: {code.name}")
            raise ConsoleError(code, message)
        log.info("console: deleted topic %s", name)
        return JSONResponse({"name": name, "deleted": True})

    async def reset_offsets(self, request: Request) -> Response:
        """Kafka's `kafka-consumer-groups --reset-offsets`: only while the group has no
        active members (NON_EMPTY_GROUP otherwise, with the tool's message); the targets
        come from ListOffsets (an explicit offset is clamped to the log's range, as the
        tool does) and are committed with OffsetCommit as an admin (generation -1)."""
        broker = self.broker
        group_id = request.path_params["group"]
        body = await _json_body(request)
        to = body.get("to")
        if to not in ("earliest", "latest", "offset"):
            raise ConsoleError(ErrorCode.INVALID_REQUEST, f"to must be earliest, latest or offset, got {to!r}")
        wanted = _int(body.get("offset"), "offset", minimum=0) if to == "offset" else None
        only_topic = body.get("topic") or None
        coordinator = broker.groups
        status = coordinator.group_status(group_id)
        if status != ErrorCode.NONE:
            raise ConsoleError(status, f"group {group_id}: {status.name} on broker {broker.node_id}")
        found = views.group(broker, group_id)
        if found is not None and found["members"]:
            raise ConsoleError(ErrorCode.NON_EMPTY_GROUP,
                               f"Assignments can only be reset if the group '{group_id}' is inactive, but the "
                               f"current state is {found['state']} ({len(found['members'])} active members).")
        if only_topic is not None:
            if not isinstance(only_topic, str) or views.topic(broker, only_topic) is None:
                raise ConsoleError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"topic {only_topic} does not exist")
            targets = [(only_topic, p["partition"]) for p in views.partitions(broker, only_topic)]
        else:
            targets = [(o["topic"], o["partition"]) for o in (found or {}).get("offsets", [])]
        if not targets:
            raise ConsoleError(ErrorCode.INVALID_REQUEST,
                               f"group {group_id} has no committed offsets: name a topic to reset")
        chosen: dict[tuple[str, int], int] = {}
        for tp in targets:
            earliest = await self._list_offset(broker, tp[0], tp[1], EARLIEST)
            latest = await self._list_offset(broker, tp[0], tp[1], LATEST)
            chosen[tp] = earliest if to == "earliest" else latest if to == "latest" else \
                min(max(wanted, earliest), latest)
        topics: dict[str, list[dict]] = {}
        for (t, p), offset in sorted(chosen.items()):
            topics.setdefault(t, []).append({"partition_index": p, "committed_offset": offset,
                                             "committed_leader_epoch": -1, "committed_metadata": ""})
        answer = await kafka_call(broker, ApiKey.OFFSET_COMMIT, 8, {
            "group_id": group_id, "generation_id_or_member_epoch": -1, "member_id": "", "group_instance_id": None,
            "topics": [{"name": t, "partitions": ps} for t, ps in topics.items()]})
        for topic in answer["topics"]:
            for p in topic["partitions"]:
                code = _code(p["error_code"])
                if code != ErrorCode.NONE:
                    raise ConsoleError(code, f"OffsetCommit {group_id} {topic['name']}-{p['partition_index']}: "
                                             f"{code.name}")
        log.info("console: reset offsets of group %s to %s: %s", group_id, to,
                 ", ".join(f"{t}-{p}={o}" for (t, p), o in sorted(chosen.items())))
        return JSONResponse({"group_id": group_id, "offsets": [{"topic": t, "partition": p, "offset": o}
                                                                for (t, p), o in sorted(chosen.items())]})
