"""The listening sockets of the broker's HTTP sides (http.listeners, schema.registry.listeners).

Bound at start-up, before the logs open, so a taken port stops the broker at once with the
setting's name, as a taken Kafka port does; hypercorn is then handed the bound socket.
"""

from __future__ import annotations

import logging
import socket


def split_address(address: str) -> tuple[str, int]:
    """HOST:PORT (an http:// prefix allowed, IPv6 hosts in brackets or not) as (host, port);
    an empty host listens everywhere."""
    host, _, port = address.strip().removeprefix("http://").rpartition(":")
    return host.strip("[]") or "0.0.0.0", int(port)


def bind(address: str) -> socket.socket:
    """A listening TCP socket on `address`; OSError when it cannot be had (the caller names
    the setting in its message)."""
    host, port = split_address(address)
    family, kind, proto, _name, sockaddr = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM,
                                                              flags=socket.AI_PASSIVE)[0]
    sock = socket.socket(family, kind, proto)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind(sockaddr)
        sock.listen(128)
    except BaseException:
        sock.close()
        raise
    return sock


class BindError(OSError):
    """An HTTP side's address cannot be bound; the message names its setting. `trafka serve`
    reports it in one line and exits 1, as for a taken Kafka port."""


def hypercorn_config(sock: socket.socket, errorlog: logging.Logger, graceful_timeout: float):
    """hypercorn's settings for serving on the bound `sock` (handed over: detached here).
    Bounded for hostile clients alike on every HTTP side: a client that stops sending
    mid-request is dropped after read_timeout, request heads are capped."""
    from hypercorn.config import Config

    config = Config()
    config.bind = [f"fd://{sock.detach()}"]
    config.accesslog = None
    config.errorlog = errorlog
    config.graceful_timeout = graceful_timeout
    config.keep_alive_timeout = 30
    config.read_timeout = 60
    config.h11_max_incomplete_size = 64 * 1024
    return config
