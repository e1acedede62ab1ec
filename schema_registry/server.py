"""Serving the registry's HTTP API from the broker's own trio process (hypercorn's trio
worker).

Why bind first, ourselves: a broker whose registry port is taken must say so and not
start, before it serves Kafka clients; so `bind` opens the socket at start-up (an OSError
names the address) and hypercorn is handed the bound socket (`fd://`).
"""

from __future__ import annotations

import logging
import socket
from functools import partial

import trio
from hypercorn.trio import serve as hypercorn_serve

from http_common import listen
from schema_registry.api import build_app
from schema_registry.cluster import ClusterLink
from schema_registry.registry import SchemaRegistry
from server.app_host import AppHost

log = logging.getLogger("trafka.schema_registry")


class RegistryBindError(listen.BindError):
    """The registry's listener address cannot be bound."""


def bind(listener: str) -> socket.socket:
    """A listening socket on `listener` (HOST:PORT); RegistryBindError when it cannot be."""
    try:
        return listen.bind(listener)
    except OSError as exc:
        raise RegistryBindError(f"schema registry: cannot listen on {listener} "
                                f"(schema.registry.listeners): {exc.strerror or exc}") from None


class RegistryServer:
    """The registry of one broker: bound at start-up, loaded from `_schemas`, then served."""

    def __init__(self, host: AppHost, listener: str) -> None:
        self.listener = listener
        self.sock = bind(listener)  # first: a registry whose port cannot be had is no registry at all
        self.address = self.sock.getsockname()[:2]
        self.registry = SchemaRegistry(host)
        host.serve_schema_ids(self.registry)  # produce checks schema ids against it (schema_validation.py)

        self.link = None
        if host.clustered:
            address, port = self.address
            if address in ("0.0.0.0", "::", ""):
                address = host.advertised_host
            self.link = self.registry.link = ClusterLink(self.registry, f"http://{address}:{port}")

    def load(self) -> None:
        """Blocking: replay `_schemas` (after the broker opened its logs); a cluster member
        tails it instead (cluster.py)."""
        if self.link is None:
            self.registry.load()

    async def serve(self, task_status=trio.TASK_STATUS_IGNORED) -> None:
        config = listen.hypercorn_config(self.sock, logging.getLogger("trafka.schema_registry.http"),
                                         graceful_timeout=2.0)
        log.info("schema registry: listening on http://%s:%d", *self.address)
        print(f"trafka: schema registry on http://{self.address[0]}:{self.address[1]}", flush=True)
        async with trio.open_nursery() as nursery:
            if self.link is not None:
                await nursery.start(self.link.run)
            await nursery.start(partial(hypercorn_serve, build_app(self.registry, self.link), config))
            task_status.started()
