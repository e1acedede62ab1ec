"""Confluent's Schema Registry REST API as starlette routes over `SchemaRegistry`.

Why starlette: routing, query parsing and responses without writing an HTTP framework;
hypercorn serves it on the broker's own trio loop (server.py). Every refusal is Confluent's
`{"error_code", "message"}` body with its status, and is logged; an unexpected exception is
a 500 / 50001 with a traceback in the log, never a dead listener.
"""

from __future__ import annotations

import json
import logging
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


def build_app(registry: SchemaRegistry, link=None) -> Starlette:
    """The ASGI application serving `registry`; in a cluster `link` (cluster.ClusterLink)
    says which requests go to the leader of `_schemas`."""

    async def root(request: Request) -> Response:
        return RegistryJSON({})

    description = files("schema_registry").joinpath("openapi.json").read_bytes()

    async def openapi(request: Request) -> Response:
        """This API's OpenAPI 3 description (package data, checked against these routes by
        tests/schema_registry/test_registry_openapi.py), for clients and fuzzers."""
        return Response(description, media_type="application/json")

    async def list_subjects(request: Request) -> Response:
        names = registry.store.subject_names(deleted=_flag(request, "deleted"))
        prefix = request.query_params.get("subjectPrefix")
        if prefix:
            names = [n for n in names if n.startswith(prefix)]
        return RegistryJSON(names)

    async def subject_versions(request: Request) -> Response:
        subject = request.path_params["subject"]
        if request.method == "POST":
            body = await _body(request)
            schema_id = await registry.register(subject, body, normalize=_flag(request, "normalize"))
            return RegistryJSON({"id": schema_id})
        found = registry.subject_versions(subject, deleted=_flag(request, "deleted"))
        return RegistryJSON([v.version for v in found])

    async def subject(request: Request) -> Response:
        name = request.path_params["subject"]
        if request.method == "POST":
            body = await _body(request)
            found = registry.lookup(name, body, normalize=_flag(request, "normalize"),
                                    deleted=_flag(request, "deleted"))
            return RegistryJSON(found.to_json())
        return RegistryJSON(await registry.delete_subject(name, permanent=_flag(request, "permanent")))

    async def subject_version(request: Request) -> Response:
        name, version = request.path_params["subject"], request.path_params["version"]
        if request.method == "DELETE":
            return RegistryJSON(await registry.delete_version(name, version, permanent=_flag(request, "permanent")))
        found = registry.version(name, version, deleted=_flag(request, "deleted"))
        schema = registry.schema_text(found, request.query_params.get("format"))
        return RegistryJSON({**found.to_json(), "schema": schema})

    async def subject_version_schema(request: Request) -> Response:
        found = registry.version(request.path_params["subject"], request.path_params["version"],
                                 deleted=_flag(request, "deleted"))
        return Response(registry.schema_text(found, request.query_params.get("format")), media_type=CONTENT_TYPE)

    async def referenced_by(request: Request) -> Response:
        found = registry.version(request.path_params["subject"], request.path_params["version"], deleted=True)
        return RegistryJSON(registry.store.referenced_by(found.subject, found.version))

    def _schema_id(request: Request) -> int:
        try:
            return int(request.path_params["id"])
        except ValueError:
            raise errors.schema_not_found(f"Schema {request.path_params['id']} not found") from None

    async def schema_by_id(request: Request) -> Response:
        found = registry.schema_by_id(_schema_id(request))
        body = {**found.to_json(), "schema": registry.schema_text(found, request.query_params.get("format"))}
        return RegistryJSON({k: body[k] for k in ("schemaType", "references", "schema") if k in body})

    async def schema_text_by_id(request: Request) -> Response:
        found = registry.schema_by_id(_schema_id(request))
        return Response(registry.schema_text(found, request.query_params.get("format")), media_type=CONTENT_TYPE)

    async def schema_subjects(request: Request) -> Response:
        schema_id = _schema_id(request)
        registry.schema_by_id(schema_id)
        deleted = _flag(request, "deleted")
        return RegistryJSON(sorted({v.subject for v in registry.store.by_id(schema_id) if deleted or not v.deleted}))

    async def schema_versions(request: Request) -> Response:
        schema_id = _schema_id(request)
        registry.schema_by_id(schema_id)
        deleted = _flag(request, "deleted")
        return RegistryJSON([{"subject": v.subject, "version": v.version} for v in registry.store.by_id(schema_id)
                             if deleted or not v.deleted])

    async def list_schemas(request: Request) -> Response:
        deleted = _flag(request, "deleted")
        latest_only = _flag(request, "latestOnly")
        prefix = request.query_params.get("subjectPrefix", "")
        out = []
        for name in registry.store.subject_names(deleted=deleted):
            if name.startswith(prefix):
                versions = registry.store.versions(name, deleted=deleted)
                out += [v.to_json() for v in (versions[-1:] if latest_only else versions)]
        return RegistryJSON(out)

    async def contexts(request: Request) -> Response:
        return RegistryJSON(["."])

    async def schema_types(request: Request) -> Response:
        return RegistryJSON(sorted(TYPES))

    async def compatibility(request: Request) -> Response:
        body = await _body(request)
        version = request.path_params.get("version")
        problems = registry.compatibility(request.path_params["subject"], body, version,
                                          normalize=_flag(request, "normalize"))
        answer: dict[str, Any] = {"is_compatible": not problems}
        if _flag(request, "verbose"):
            answer["messages"] = problems
        return RegistryJSON(answer)

    async def config(request: Request) -> Response:
        name = request.path_params.get("subject")
        if request.method == "PUT":
            body = await _body(request)
            level = body.get("compatibility", body.get("compatibilityLevel")) if isinstance(body, dict) else None
            return RegistryJSON({"compatibility": await registry.set_config(name, level)})
        if request.method == "DELETE":
            return RegistryJSON({"compatibilityLevel": await registry.delete_config(name)})
        if name is not None and name not in registry.store.configs and not _flag(request, "defaultToGlobal"):
            raise errors.subject_config_not_found(name)
        return RegistryJSON({"compatibilityLevel": registry.store.level(name)})

    async def mode(request: Request) -> Response:
        name = request.path_params.get("subject")
        if request.method == "PUT":
            body = await _body(request)
            value = body.get("mode") if isinstance(body, dict) else None
            return RegistryJSON({"mode": await registry.set_mode(name, value, force=_flag(request, "force"))})
        if request.method == "DELETE":
            return RegistryJSON({"mode": await registry.delete_mode(name)})
        if name is not None and name not in registry.store.modes and not _flag(request, "defaultToGlobal"):
            raise errors.subject_mode_not_found(name)
        return RegistryJSON({"mode": registry.store.mode(name)})

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

    def guarded(endpoint):
        """An unexpected exception becomes 500 / 50001 with its traceback logged (starlette
        would re-raise it to the server after answering)."""
        async def run(request: Request) -> Response:
            try:
                if link is not None:
                    if link.must_forward(request.method, request.url.path):
                        path_qs = request.url.path + (f"?{request.url.query}" if request.url.query else "")
                        status, content, headers = await link.forward(
                            request.method, path_qs, await _raw_body(request), request.headers.get("content-type"),
                            FORWARDED_HEADER in request.headers)
                        return Response(content, status_code=status, headers=headers)
                    before = registry.last_write_end
                    answer = await endpoint(request)
                    if registry.last_write_end != before:
                        answer.headers[OFFSET_HEADER] = str(registry.last_write_end)
                    return answer
                return await endpoint(request)
            except (errors.RegistryError, HTTPException):
                raise
            except Exception as exc:
                return await on_error(request, exc)
        return run

    # A subject may hold a '/' (a Protobuf reference's subject is its file name, e.g.
    # "shop/money.proto", sent as %2F and decoded before routing): `{subject:path}`, with
    # the longer subject routes first so the plain one does not swallow them.
    routes = [
        Route("/", root, methods=["GET"]),
        Route("/openapi.json", openapi, methods=["GET"]),
        Route("/subjects", list_subjects, methods=["GET"]),
        Route("/subjects/{subject:path}/versions/{version}/referencedby", referenced_by, methods=["GET"]),
        Route("/subjects/{subject:path}/versions/{version}/schema", subject_version_schema, methods=["GET"]),
        Route("/subjects/{subject:path}/versions/{version}", subject_version, methods=["GET", "DELETE"]),
        Route("/subjects/{subject:path}/versions", subject_versions, methods=["GET", "POST"]),
        Route("/subjects/{subject:path}", subject, methods=["POST", "DELETE"]),
        Route("/schemas", list_schemas, methods=["GET"]),
        Route("/contexts", contexts, methods=["GET"]),
        Route("/schemas/types", schema_types, methods=["GET"]),
        Route("/schemas/ids/{id}", schema_by_id, methods=["GET"]),
        Route("/schemas/ids/{id}/schema", schema_text_by_id, methods=["GET"]),
        Route("/schemas/ids/{id}/subjects", schema_subjects, methods=["GET"]),
        Route("/schemas/ids/{id}/versions", schema_versions, methods=["GET"]),
        Route("/compatibility/subjects/{subject:path}/versions/{version}", compatibility, methods=["POST"]),
        Route("/compatibility/subjects/{subject:path}/versions", compatibility, methods=["POST"]),
        Route("/config", config, methods=["GET", "PUT", "DELETE"]),
        Route("/config/{subject:path}", config, methods=["GET", "PUT", "DELETE"]),
        Route("/mode", mode, methods=["GET", "PUT"]),
        Route("/mode/{subject:path}", mode, methods=["GET", "PUT", "DELETE"]),
    ]
    routes = [Route(r.path, guarded(r.endpoint), methods=r.methods) for r in routes]
    return Starlette(routes=routes, exception_handlers={errors.RegistryError: on_registry_error,
                                                        HTTPException: on_http_error})
