"""The HTTP routes: `/metrics` (Prometheus text format), `/healthz`, `/readyz`, and the web
console (`/`, `/static/...`, `/api/...`: server/http/console/).

Why these answers: `/healthz` is a liveness probe — 200 whenever the process answers at all,
so an orchestrator restarts only a hung broker, not one busy recovering its logs.
`/readyz` is a readiness probe — 200 only once the broker serves Kafka clients (logs
recovered, the Kafka listeners bound, and in a cluster registered in ZooKeeper), 503 with
the reason before that and once shutdown begins, so traffic is sent only to a broker that
can take it.

`/metrics` renders in a worker thread: with thousands of partitions the text takes
milliseconds, which must not hold up the event loop that serves Kafka requests.
"""

from __future__ import annotations

from typing import Any, Callable

import trio
from prometheus_client import CONTENT_TYPE_LATEST, generate_latest
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import PlainTextResponse, Response
from starlette.routing import Route


def build_app(registry: Any, not_ready: Callable[[], str | None], console: Any = None) -> Starlette:
    """The ASGI app of one broker: `registry` its CollectorRegistry, `not_ready()` None
    when it serves, else why not; `console` the HttpEndpoint the web console reads the
    broker from (None: no console)."""

    async def metrics(_request: Request) -> Response:
        text = await trio.to_thread.run_sync(generate_latest, registry)
        return Response(text, media_type=CONTENT_TYPE_LATEST)

    async def healthz(_request: Request) -> Response:
        return PlainTextResponse("ok\n")

    async def readyz(_request: Request) -> Response:
        reason = not_ready()
        if reason is None:
            return PlainTextResponse("ready\n")
        return PlainTextResponse(f"not ready: {reason}\n", status_code=503)

    routes = [
        Route("/metrics", metrics),
        Route("/healthz", healthz),
        Route("/readyz", readyz),
    ]
    if console is not None:
        from server.http.console.api import ConsoleApi

        routes += ConsoleApi(console).routes()
    return Starlette(routes=routes)
