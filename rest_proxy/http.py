"""What every route of the proxy shares: the JSON body and its limits, content-type checks,
Basic credentials, and the answers (Confluent's media types, error bodies, logging).

Why starlette (as the Schema Registry): routing, query parsing and responses without an
HTTP framework of our own; hypercorn serves it on the broker's trio loop (server.py).
"""

from __future__ import annotations

import base64
import binascii
import json
import logging
from typing import Any

from starlette.requests import ClientDisconnect, Request
from starlette.responses import Response

from rest_proxy import errors
from rest_proxy.kafka import Credentials

log = logging.getLogger("trafka.rest_proxy")

V2 = "application/vnd.kafka.v2+json"
V3 = "application/json"
MAX_BODY = 64 * 1024 * 1024
DRAIN_LIMIT = 4 * MAX_BODY


class JSONAnswer(Response):
    def __init__(self, content: Any, status_code: int = 200, media_type: str = V2) -> None:
        super().__init__(json.dumps(content, separators=(",", ":"), ensure_ascii=False).encode(),
                         status_code=status_code, media_type=media_type)


def no_content() -> Response:
    return Response(status_code=204)


async def raw_body(request: Request) -> bytes:
    """The request's body, at most MAX_BODY bytes (413 beyond). A larger one is read to its
    end and dropped when not absurd (DRAIN_LIMIT), so the client, still sending, reads
    the 413 instead of a reset connection."""
    data = bytearray()
    seen = 0
    async for chunk in request.stream():
        seen += len(chunk)
        if seen <= MAX_BODY:
            data += chunk
        elif seen > DRAIN_LIMIT:
            request.scope["trafka.abandoned"] = True  # absurd: answer now, the connection closes
            break
    if seen > MAX_BODY:
        raise errors.RestError(413, 413, f"request body larger than {MAX_BODY} bytes")
    return bytes(data)


async def json_body(request: Request, *, empty: Any = None) -> Any:
    """The request's JSON body (`empty` when there is none; 400 when it is not JSON)."""
    data = await raw_body(request)
    if not data.strip():
        return empty
    try:
        return json.loads(data)
    except (ValueError, RecursionError) as exc:  # RecursionError: nested deeper than the parser goes
        raise errors.bad_request(f"Unexpected character in the JSON request body: {exc}") from None


async def drain(request: Request) -> None:
    """Read what is left of a refused request's body (up to DRAIN_LIMIT), so the refusal is
    answered after the whole request and the client's keep-alive connection stays in step."""
    if getattr(request, "_stream_consumed", False) or request.scope.get("trafka.abandoned"):
        return
    seen = 0
    try:
        async for chunk in request.stream():
            seen += len(chunk)
            if seen > DRAIN_LIMIT:
                return
    except (RuntimeError, ClientDisconnect):
        return


def content_type(request: Request) -> str:
    return request.headers.get("content-type", "").split(";")[0].strip().lower()


def check_v2_content_type(request: Request, allowed: tuple[str, ...]) -> str:
    """The request's media type when one of `allowed` (415 otherwise). v2 endpoints take
    Confluent's vendor types; application/json and application/octet-stream are accepted
    where Confluent accepts them (generic bodies)."""
    ctype = content_type(request)
    if ctype not in allowed:
        raise errors.unsupported_media_type()
    return ctype


def check_accept(request: Request, offered: tuple[str, ...]) -> None:
    """406 unless the Accept header takes one of `offered` (none, */* or application/* do)."""
    accept = request.headers.get("accept", "")
    if not accept.strip():
        return
    for item in accept.split(","):
        media = item.split(";")[0].strip().lower()
        if media in ("*/*", "application/*") or media in offered:
            return
    raise errors.not_acceptable()


def basic_credentials(request: Request) -> Credentials | None:
    header = request.headers.get("authorization", "")
    scheme, _, encoded = header.partition(" ")
    if scheme.lower() != "basic" or not encoded:
        return None
    try:
        user, sep, password = base64.b64decode(encoded.strip(), validate=True).decode().partition(":")
    except (binascii.Error, UnicodeDecodeError, ValueError):
        raise errors.unauthorized("malformed Basic credentials") from None
    if not sep:
        raise errors.unauthorized("malformed Basic credentials")
    return Credentials(user, password)


def error_answer(request: Request, exc: errors.RestError) -> Response:
    level = logging.WARNING if exc.status >= 500 else logging.INFO
    log.log(level, "rest proxy: %s %s -> %d %d %s", request.method, request.url.path, exc.status, exc.code,
            exc.message)
    media = V3 if request.url.path.startswith("/v3") else V2
    response = JSONAnswer(exc.body(), exc.status, media)
    if exc.status == 401:
        response.headers["WWW-Authenticate"] = 'Basic realm="trafka-rest-proxy"'
    return response


def int_param(value: Any, name: str, default: int | None = None, *, minimum: int = 0) -> int:
    if value is None:
        if default is None:
            raise errors.unprocessable(f"{name} is required")
        return default
    try:
        number = int(value)
    except (TypeError, ValueError):
        raise errors.bad_request(f"{name} must be an integer, not {value!r}") from None
    if number < minimum:
        raise errors.bad_request(f"{name} must be at least {minimum}")
    return number
