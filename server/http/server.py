"""`HttpEndpoint`: the `http.listeners` socket, served by hypercorn's trio worker in the
broker's own process.

Why it binds first and serves later: a broker whose HTTP port is taken must fail at start,
loudly, as it does when a Kafka listener's port is taken — so `bind()` runs before the logs
are opened, and raises `HttpBindError` naming the setting. Serving starts right after, so
`/healthz` answers (and `/readyz` says "recovering logs") while a large data directory is
being recovered.

The socket is handed to hypercorn as an inherited descriptor (`fd://`), which keeps the
bind (and its error) ours and the serving hypercorn's public `serve` API.
"""

from __future__ import annotations

import logging
import socket
from typing import TYPE_CHECKING, Any, Iterator

import trio

from http_common import listen
from server.http.metrics import BrokerCollector, RequestMetrics, build_registry

if TYPE_CHECKING:  # pragma: no cover
    from server.broker import Broker
    from server.config import BrokerConfig

log = logging.getLogger("trafka.http")


class HttpBindError(listen.BindError):
    """The HTTP listener's address cannot be bound; the message names http.listeners."""


class _LateCollector:
    """Yields the broker's metrics once there is a broker (nothing while logs recover)."""

    def __init__(self) -> None:
        self.target: BrokerCollector | None = None

    def collect(self) -> Iterator[Any]:
        if self.target is not None:
            yield from self.target.collect()


class HttpEndpoint:
    """One broker's HTTP listener: bind, attach the broker as it comes up, serve."""

    def __init__(self, config: "BrokerConfig") -> None:
        self.address = config.get("http.listeners")
        self.console = config.get("trafka.console.enable")
        self.requests = RequestMetrics()
        self._collector = _LateCollector()
        self.registry = build_registry(self._collector)
        self.broker: Broker | None = None
        self.opened = False  # the logs are recovered (Broker.open returned)
        self.listening = False  # the Kafka listeners are bound
        self.sock: socket.socket | None = None
        self.bound: tuple[str, int] | None = None

    def bind(self) -> tuple[str, int]:
        """Bind and listen on http.listeners; HttpBindError if the address cannot be had."""
        try:
            sock = listen.bind(self.address)
        except OSError as exc:
            raise HttpBindError(f"cannot listen for HTTP on {self.address} (http.listeners): {exc}") from None
        self.sock = sock
        self.bound = sock.getsockname()[:2]
        return self.bound

    def attach(self, broker: "Broker") -> None:
        """The broker exists (its logs not yet open): count its requests from now on."""
        self.broker = broker
        broker.metrics = self.requests
        self._collector.target = BrokerCollector(broker, None, self.requests)

    def attach_server(self, server: Any) -> None:
        """The Kafka listeners are bound (server.network.Server): ready, and connections counted."""
        if self._collector.target is not None:
            self._collector.target.server = server
        self.listening = True

    def not_ready(self) -> str | None:
        """None once the broker serves; else why it does not (the body of a 503 /readyz)."""
        broker = self.broker
        if broker is None or not self.opened:
            return "recovering logs"
        if broker.shutting_down:
            return "shutting down"
        if broker.cluster is not None and not broker.cluster.started:
            return "not registered in ZooKeeper yet"
        if not self.listening:
            return "Kafka listeners not bound yet"
        return None

    async def serve(self, task_status=trio.TASK_STATUS_IGNORED) -> None:
        """Serve /metrics, /healthz, /readyz and the console on the bound socket until cancelled."""
        from hypercorn.trio import serve

        from server.http.app import build_app

        if self.sock is None:
            self.bind()
        config = listen.hypercorn_config(self.sock, log, graceful_timeout=1.0)
        app = build_app(self.registry, self.not_ready, self if self.console else None)
        host, port = self.bound
        log.info("HTTP listener (/metrics, /healthz, /readyz%s) on http://%s:%d/",
                 ", console at /" if self.console else "", host, port)
        print(f"trafka: {'console and ' if self.console else ''}/metrics on http://{host}:{port}/", flush=True)
        await serve(app, config, task_status=task_status)
