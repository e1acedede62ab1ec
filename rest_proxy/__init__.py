"""Confluent's REST Proxy (API v2 and v3), served by the broker process.

A room of its own, as the Schema Registry: the broker's start-up (cli/main.py) creates a
`RestProxyServer` when `rest.proxy.listeners` is set and confluent-kafka is installed (the
`rest` extra); nothing else in the broker imports this package (an import-linter contract
says so). The proxy is a Kafka client of its own broker (kafka.py); routes in v2.py and
v3.py, consumer instances in consumers.py, embedded formats in formats.py.
"""

from __future__ import annotations

from rest_proxy.server import RestProxyBindError, RestProxyServer

__all__ = ["RestProxyBindError", "RestProxyServer"]
