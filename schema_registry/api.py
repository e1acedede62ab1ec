"""Confluent's Schema Registry REST API as starlette routes over `SchemaRegistry`.

Why starlette: routing, query parsing and responses without writing an HTTP framework;
hypercorn serves it on the broker's own trio loop (server.py). Every refusal is Confluent's
`{"error_code", "message"}` body with its status, and is logged; an unexpected exception is
a 500 / 50001 with a traceback in the log, never a dead listener.

Every route is a function of its own, named for its method and path (GET
/subjects/{subject}/versions is `get_subjects_subject_versions`: the method, then the
path's segments with each parameter by its name), taking the registry and the request;
`ROUTES` is the one table of them, in matching order, and `build_app` serves it
(tests/schema_registry/test_registry_route_names.py holds the naming rule).
"""

from __future__ import annotations

import functools
import json
import logging
from collections.abc import Awaitable, Callable
from importlib.resources import files
from typing import Any

from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from schema_registry import errors
from schema_registry.cluster import FORWARDED_HEADER, OFFSET_HEADER
from schema_registry.registry import SchemaRegistry
from schema_registry.schemas import TYPES

log = logging.getLogger("trafka.schema_registry")

CONTENT_TYPE = "application/vnd.schemaregistry.v1+json"
MAX_BODY = 16 * 1024 * 1024
DRAIN_LIMIT = 8 * MAX_BODY


class RegistryJSON(JSONResponse):
    media_type = CONTENT_TYPE

    def render(self, content: Any) -> bytes:
        return json.dumps(content, separators=(",", ":"), ensure_ascii=False).encode()


def _flag(request: Request, name: str, default: bool = False) -> bool:
    value = request.query_params.get(name)
    return default if value is None else value.strip().lower() == "true"


async def _raw_body(request: Request) -> bytes:
    """The request's body, at most MAX_BODY bytes (413 beyond)."""
    data = bytearray()
    seen = 0
    async for chunk in request.stream():
        seen += len(chunk)
        if seen <= MAX_BODY:
            data += chunk
        elif seen > DRAIN_LIMIT:
            break  # answer now; the server closes the connection after it
    if seen > MAX_BODY:
        # Read (and dropped) to its end when not absurd, so the client reads the answer and
        # its keep-alive connection stays usable.
        raise errors.RegistryError(413, 413, f"request body larger than {MAX_BODY} bytes")
    return bytes(data)


async def _body(request: Request) -> Any:
    """The request's JSON body (413 when too large; 400 when not JSON)."""
    data = await _raw_body(request)
    if not data:
        return {}
    try:
        return json.loads(data)
    except (ValueError, RecursionError) as exc:  # RecursionError: nested deeper than the parser goes
        raise errors.bad_request(f"Unrecognized JSON in the request body: {exc}") from None


Endpoint = Callable[[SchemaRegistry, Request], Awaitable[Response]]


@functools.cache
def openapi_description() -> bytes:
    """This API's OpenAPI 3 description (package data, checked against ROUTES by
    tests/schema_registry/test_registry_openapi.py)."""
    return files("schema_registry").joinpath("openapi.json").read_bytes()


# ---- the routes, one function each -----------------------------------------------------
async def get_root(registry: SchemaRegistry, request: Request) -> Response:
    return RegistryJSON({})


async def get_openapi_json(registry: SchemaRegistry, request: Request) -> Response:
    """This API's OpenAPI 3 description, for clients and fuzzers."""
    return Response(openapi_description(), media_type="application/json")


async def get_subjects(registry: SchemaRegistry, request: Request) -> Response:
    names = registry.store.subject_names(deleted=_flag(request, "deleted"))
    prefix = request.query_params.get("subjectPrefix")
    if prefix:
        names = [n for n in names if n.startswith(prefix)]
    return RegistryJSON(names)


async def get_subjects_subject_versions(registry: SchemaRegistry, request: Request) -> Response:
    found = registry.subject_versions(request.path_params["subject"], deleted=_flag(request, "deleted"))
    return RegistryJSON([v.version for v in found])


async def post_subjects_subject_versions(registry: SchemaRegistry, request: Request) -> Response:
    body = await _body(request)
    schema_id = await registry.register(request.path_params["subject"], body, normalize=_flag(request, "normalize"))
    return RegistryJSON({"id": schema_id})


async def post_subjects_subject(registry: SchemaRegistry, request: Request) -> Response:
    body = await _body(request)
    found = registry.lookup(request.path_params["subject"], body, normalize=_flag(request, "normalize"),
                            deleted=_flag(request, "deleted"))
    return RegistryJSON(found.to_json())


async def delete_subjects_subject(registry: SchemaRegistry, request: Request) -> Response:
    return RegistryJSON(await registry.delete_subject(request.path_params["subject"],
                                                      permanent=_flag(request, "permanent")))


async def get_subjects_subject_versions_version(registry: SchemaRegistry, request: Request) -> Response:
    found = registry.version(request.path_params["subject"], request.path_params["version"],
                             deleted=_flag(request, "deleted"))
    schema = registry.schema_text(found, request.query_params.get("format"))
    return RegistryJSON({**found.to_json(), "schema": schema})


async def delete_subjects_subject_versions_version(registry: SchemaRegistry, request: Request) -> Response:
    return RegistryJSON(await registry.delete_version(request.path_params["subject"], request.path_params["version"],
                                                      permanent=_flag(request, "permanent")))


async def get_subjects_subject_versions_version_schema(registry: SchemaRegistry, request: Request) -> Response:
    found = registry.version(request.path_params["subject"], request.path_params["version"],
                             deleted=_flag(request, "deleted"))
    return Response(registry.schema_text(found, request.query_params.get("format")), media_type=CONTENT_TYPE)


async def get_subjects_subject_versions_version_referencedby(registry: SchemaRegistry,
                                                             request: Request) -> Response:
    found = registry.version(request.path_params["subject"], request.path_params["version"], deleted=True)
    return RegistryJSON(registry.store.referenced_by(found.subject, found.version))


def _schema_id(request: Request) -> int:
    try:
        return int(request.path_params["id"])
    except ValueError:
        raise errors.schema_not_found(f"Schema {request.path_params['id']} not found") from None


async def get_schemas_ids_id(registry: SchemaRegistry, request: Request) -> Response:
    found = registry.schema_by_id(_schema_id(request))
    body = {**found.to_json(), "schema": registry.schema_text(found, request.query_params.get("format"))}
    return RegistryJSON({k: body[k] for k in ("schemaType", "references", "schema") if k in body})


async def get_schemas_ids_id_schema(registry: SchemaRegistry, request: Request) -> Response:
    found = registry.schema_by_id(_schema_id(request))
    return Response(registry.schema_text(found, request.query_params.get("format")), media_type=CONTENT_TYPE)


async def get_schemas_ids_id_subjects(registry: SchemaRegistry, request: Request) -> Response:
    schema_id = _schema_id(request)
    registry.schema_by_id(schema_id)
    deleted = _flag(request, "deleted")
    return RegistryJSON(sorted({v.subject for v in registry.store.by_id(schema_id) if deleted or not v.deleted}))


async def get_schemas_ids_id_versions(registry: SchemaRegistry, request: Request) -> Response:
    schema_id = _schema_id(request)
    registry.schema_by_id(schema_id)
    deleted = _flag(request, "deleted")
    return RegistryJSON([{"subject": v.subject, "version": v.version} for v in registry.store.by_id(schema_id)
                         if deleted or not v.deleted])


async def get_schemas(registry: SchemaRegistry, request: Request) -> Response:
    deleted = _flag(request, "deleted")
    latest_only = _flag(request, "latestOnly")
    prefix = request.query_params.get("subjectPrefix", "")
    out = []
    for name in registry.store.subject_names(deleted=deleted):
        if name.startswith(prefix):
            versions = registry.store.versions(name, deleted=deleted)
            out += [v.to_json() for v in (versions[-1:] if latest_only else versions)]
    return RegistryJSON(out)


async def get_contexts(registry: SchemaRegistry, request: Request) -> Response:
    return RegistryJSON(["."])


async def get_schemas_types(registry: SchemaRegistry, request: Request) -> Response:
    return RegistryJSON(sorted(TYPES))


async def _compatibility(registry: SchemaRegistry, request: Request, version: str | None) -> Response:
    body = await _body(request)
    problems = registry.compatibility(request.path_params["subject"], body, version,
                                      normalize=_flag(request, "normalize"))
    answer: dict[str, Any] = {"is_compatible": not problems}
    if _flag(request, "verbose"):
        answer["messages"] = problems
    return RegistryJSON(answer)


async def post_compatibility_subjects_subject_versions_version(registry: SchemaRegistry,
                                                               request: Request) -> Response:
    return await _compatibility(registry, request, request.path_params["version"])


async def post_compatibility_subjects_subject_versions(registry: SchemaRegistry, request: Request) -> Response:
    return await _compatibility(registry, request, None)


def _get_config(registry: SchemaRegistry, request: Request, subject: str | None) -> Response:
    if subject is not None and subject not in registry.store.configs and not _flag(request, "defaultToGlobal"):
        raise errors.subject_config_not_found(subject)
    return RegistryJSON({"compatibilityLevel": registry.store.level(subject)})


async def _put_config(registry: SchemaRegistry, request: Request, subject: str | None) -> Response:
    body = await _body(request)
    level = body.get("compatibility", body.get("compatibilityLevel")) if isinstance(body, dict) else None
    return RegistryJSON({"compatibility": await registry.set_config(subject, level)})


async def get_config(registry: SchemaRegistry, request: Request) -> Response:
    return _get_config(registry, request, None)


async def put_config(registry: SchemaRegistry, request: Request) -> Response:
    return await _put_config(registry, request, None)


async def delete_config(registry: SchemaRegistry, request: Request) -> Response:
    return RegistryJSON({"compatibilityLevel": await registry.delete_config(None)})


async def get_config_subject(registry: SchemaRegistry, request: Request) -> Response:
    return _get_config(registry, request, request.path_params["subject"])


async def put_config_subject(registry: SchemaRegistry, request: Request) -> Response:
    return await _put_config(registry, request, request.path_params["subject"])


async def delete_config_subject(registry: SchemaRegistry, request: Request) -> Response:
    return RegistryJSON({"compatibilityLevel": await registry.delete_config(request.path_params["subject"])})


def _get_mode(registry: SchemaRegistry, request: Request, subject: str | None) -> Response:
    if subject is not None and subject not in registry.store.modes and not _flag(request, "defaultToGlobal"):
        raise errors.subject_mode_not_found(subject)
    return RegistryJSON({"mode": registry.store.mode(subject)})


async def _put_mode(registry: SchemaRegistry, request: Request, subject: str | None) -> Response:
    body = await _body(request)
    value = body.get("mode") if isinstance(body, dict) else None
    return RegistryJSON({"mode": await registry.set_mode(subject, value, force=_flag(request, "force"))})


async def get_mode(registry: SchemaRegistry, request: Request) -> Response:
    return _get_mode(registry, request, None)


async def put_mode(registry: SchemaRegistry, request: Request) -> Response:
    return await _put_mode(registry, request, None)


async def get_mode_subject(registry: SchemaRegistry, request: Request) -> Response:
    return _get_mode(registry, request, request.path_params["subject"])


async def put_mode_subject(registry: SchemaRegistry, request: Request) -> Response:
    return await _put_mode(registry, request, request.path_params["subject"])


async def delete_mode_subject(registry: SchemaRegistry, request: Request) -> Response:
    return RegistryJSON({"mode": await registry.delete_mode(request.path_params["subject"])})


# ---- the table -------------------------------------------------------------------------
# (method, path, function), in matching order. A subject may hold a '/' (a Protobuf
# reference's subject is its file name, e.g. "shop/money.proto", sent as %2F and decoded
# before routing): `{subject:path}`, with the longer subject routes first so the plain one
# does not swallow them. The rows of one path become one starlette route (build_app).
SUBJECT = "/subjects/{subject:path}"
ROUTES: list[tuple[str, str, Endpoint]] = [
    ("GET", "/", get_root),
    ("GET", "/openapi.json", get_openapi_json),
    ("GET", "/subjects", get_subjects),
    ("GET", SUBJECT + "/versions/{version}/referencedby", get_subjects_subject_versions_version_referencedby),
    ("GET", SUBJECT + "/versions/{version}/schema", get_subjects_subject_versions_version_schema),
    ("GET", SUBJECT + "/versions/{version}", get_subjects_subject_versions_version),
    ("DELETE", SUBJECT + "/versions/{version}", delete_subjects_subject_versions_version),
    ("GET", SUBJECT + "/versions", get_subjects_subject_versions),
    ("POST", SUBJECT + "/versions", post_subjects_subject_versions),
    ("POST", SUBJECT, post_subjects_subject),
    ("DELETE", SUBJECT, delete_subjects_subject),
    ("GET", "/schemas", get_schemas),
    ("GET", "/contexts", get_contexts),
    ("GET", "/schemas/types", get_schemas_types),
    ("GET", "/schemas/ids/{id}", get_schemas_ids_id),
    ("GET", "/schemas/ids/{id}/schema", get_schemas_ids_id_schema),
    ("GET", "/schemas/ids/{id}/subjects", get_schemas_ids_id_subjects),
    ("GET", "/schemas/ids/{id}/versions", get_schemas_ids_id_versions),
    ("POST", "/compatibility" + SUBJECT + "/versions/{version}", post_compatibility_subjects_subject_versions_version),
    ("POST", "/compatibility" + SUBJECT + "/versions", post_compatibility_subjects_subject_versions),
    ("GET", "/config", get_config),
    ("PUT", "/config", put_config),
    ("DELETE", "/config", delete_config),
    ("GET", "/config/{subject:path}", get_config_subject),
    ("PUT", "/config/{subject:path}", put_config_subject),
    ("DELETE", "/config/{subject:path}", delete_config_subject),
    ("GET", "/mode", get_mode),
    ("PUT", "/mode", put_mode),
    ("GET", "/mode/{subject:path}", get_mode_subject),
    ("PUT", "/mode/{subject:path}", put_mode_subject),
    ("DELETE", "/mode/{subject:path}", delete_mode_subject),
]


# ---- serving the table -----------------------------------------------------------------
async def on_registry_error(request: Request, exc: errors.RegistryError) -> Response:
    log.info("schema registry: %s %s -> %d %d %s", request.method, request.url.path, exc.status, exc.code,
             exc.message[:300])
    return RegistryJSON(exc.body(), status_code=exc.status)


async def on_http_error(request: Request, exc: HTTPException) -> Response:
    log.info("schema registry: %s %s -> %d", request.method, request.url.path, exc.status_code)
    return RegistryJSON({"error_code": exc.status_code, "message": f"HTTP {exc.status_code} {exc.detail}"},
                        status_code=exc.status_code)


async def on_error(request: Request, exc: Exception) -> Response:
    log.exception("schema registry: %s %s failed", request.method, request.url.path)
    return RegistryJSON({"error_code": 50001, "message": f"Error in the backend data store - {exc}"},
                        status_code=500)


def _serve(registry: SchemaRegistry, link, by_method: dict[str, Endpoint]):
    """One path's endpoint: the method's function (HEAD is GET's, as starlette adds it),
    forwarded to the leader of `_schemas` when `link` says so; an unexpected exception
    becomes 500 / 50001 with its traceback logged (starlette would re-raise it to the
    server after answering)."""

    async def run(request: Request) -> Response:
        endpoint = by_method.get(request.method) or by_method["GET"]
        try:
            if link is not None:
                if link.must_forward(request.method, request.url.path):
                    path_qs = request.url.path + (f"?{request.url.query}" if request.url.query else "")
                    status, content, headers = await link.forward(
                        request.method, path_qs, await _raw_body(request), request.headers.get("content-type"),
                        FORWARDED_HEADER in request.headers)
                    return Response(content, status_code=status, headers=headers)
                before = registry.last_write_end
                answer = await endpoint(registry, request)
                if registry.last_write_end != before:
                    answer.headers[OFFSET_HEADER] = str(registry.last_write_end)
                return answer
            return await endpoint(registry, request)
        except (errors.RegistryError, HTTPException):
            raise
        except Exception as exc:
            return await on_error(request, exc)
    return run


def build_app(registry: SchemaRegistry, link=None) -> Starlette:
    """The ASGI application serving `registry` by ROUTES; in a cluster `link`
    (cluster.ClusterLink) says which requests go to the leader of `_schemas`."""
    paths: dict[str, dict[str, Endpoint]] = {}
    for method, path, endpoint in ROUTES:
        paths.setdefault(path, {})[method] = endpoint
    routes = [Route(path, _serve(registry, link, by_method), methods=list(by_method))
              for path, by_method in paths.items()]
    return Starlette(routes=routes, exception_handlers={errors.RegistryError: on_registry_error,
                                                        HTTPException: on_http_error})
