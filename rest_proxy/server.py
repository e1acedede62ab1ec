"""The REST Proxy of one broker: bound at start-up, served on the broker's trio loop.

Why bind first, ourselves (as the Schema Registry does): a broker whose REST Proxy port is
taken must say so and not start; so the socket is opened at start-up (an OSError names
the address and `rest.proxy.listeners`) and hypercorn is handed the bound socket. The
proxy's Kafka clients connect to the broker's first listener once it listens
(`set_bootstrap`), and are closed, with every consumer instance, at shutdown.
"""

from __future__ import annotations

import functools
import logging
import socket
from collections.abc import Awaitable, Callable
from functools import partial
from importlib.resources import files

import trio
from hypercorn.trio import serve as hypercorn_serve
from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from http_common import listen
from rest_proxy import errors, v2, v3
from rest_proxy.http import JSONAnswer, drain, error_answer
from rest_proxy.proxy import RestProxy

log = logging.getLogger("trafka.rest_proxy")


class RestProxyBindError(listen.BindError):
    """The REST Proxy's listener address cannot be bound."""


def bind(listener: str) -> socket.socket:
    """A listening socket on `listener` (HOST:PORT); RestProxyBindError when it cannot be."""
    try:
        return listen.bind(listener)
    except OSError as exc:
        raise RestProxyBindError(f"rest proxy: cannot listen on {listener} "
                                 f"(rest.proxy.listeners): {exc.strerror or exc}") from None


Endpoint = Callable[[RestProxy, Request], Awaitable[Response]]


@functools.cache
def openapi_description() -> bytes:
    """This API's OpenAPI 3 description (package data, checked against ROUTES by
    tests/rest_proxy/test_rest_openapi.py)."""
    return files("rest_proxy").joinpath("openapi.json").read_bytes()


async def get_root(proxy: RestProxy, request: Request) -> Response:
    return JSONAnswer({})


async def get_openapi_json(proxy: RestProxy, request: Request) -> Response:
    """This API's OpenAPI 3 description, for clients and fuzzers."""
    return Response(openapi_description(), media_type="application/json")


# The one table of the proxy's routes, (method, path, function) in matching order: v2 at
# the root (v2.py), v3 under /v3 (v3.py); one starlette route each.
ROUTES: list[tuple[str, str, Endpoint]] = [
    ("GET", "/", get_root),
    ("GET", "/openapi.json", get_openapi_json),
    *v2.ROUTES,
    *v3.ROUTES,
]


async def on_rest_error(request: Request, exc: errors.RestError) -> Response:
    return error_answer(request, exc)


async def on_http_error(request: Request, exc: HTTPException) -> Response:
    return error_answer(request, errors.RestError(exc.status_code, exc.status_code, f"HTTP {exc.status_code} "
                                                  f"{exc.detail}"))


def _serve(proxy: RestProxy, endpoint: Endpoint):
    """A route's endpoint over `proxy`: a refusal answered with Confluent's error body (the
    rest of the request body read first), an unexpected exception a 500 / 50002 with its
    traceback in the log."""

    async def run(request: Request) -> Response:
        try:
            return await endpoint(proxy, request)
        except errors.RestError as exc:
            await drain(request)
            return error_answer(request, exc)
        except Exception:
            log.exception("rest proxy: %s %s failed", request.method, request.url.path)
            return error_answer(request, errors.RestError(500, 50002, "Internal server error"))
    return run


def build_app(proxy: RestProxy) -> Starlette:
    """The ASGI application serving ROUTES over `proxy`."""
    routes = [Route(path, _serve(proxy, endpoint), methods=[method]) for method, path, endpoint in ROUTES]
    return Starlette(routes=routes, exception_handlers={errors.RestError: on_rest_error,
                                                        HTTPException: on_http_error})


class RestProxyServer:
    """The REST Proxy of one broker (rest.proxy.listeners)."""

    def __init__(self, config, listener: str) -> None:
        self.listener = listener
        self.proxy = RestProxy(config)
        self.sock = bind(listener)
        self.address = self.sock.getsockname()[:2]
        self.closed = False

    def set_bootstrap(self, addresses: list) -> None:
        """The broker's listeners are bound: the proxy's listener's address (a port 0 is
        the first bound socket's, as tests start brokers with one listener)."""
        listener = self.proxy.listener
        if listener.port:
            self.proxy.clients.set_bootstrap(listener.host, listener.port)
        else:
            self.proxy.clients.set_bootstrap(*addresses[0][:2])

    async def serve(self, task_status=trio.TASK_STATUS_IGNORED) -> None:
        config = listen.hypercorn_config(self.sock, logging.getLogger("trafka.rest_proxy.http"),
                                         graceful_timeout=2.0)
        config.read_timeout = 120
        log.info("rest proxy: listening on http://%s:%d", *self.address)
        print(f"trafka: rest proxy on http://{self.address[0]}:{self.address[1]}", flush=True)
        try:
            async with trio.open_nursery() as nursery:
                await nursery.start(self.proxy.consumers.expire)
                await nursery.start(partial(hypercorn_serve, build_app(self.proxy), config))
                task_status.started()
        finally:
            with trio.CancelScope(shield=True):
                await self.close()

    async def close(self) -> None:
        """Close every consumer instance (they leave their groups), deliver what the
        producers hold and drop the clients; bounded, and idempotent."""
        if self.closed:
            return
        self.closed = True
        with trio.move_on_after(15):
            await self.proxy.consumers.close_all()
            await trio.to_thread.run_sync(self.proxy.clients.close)
            await self.proxy.schemas.close()
