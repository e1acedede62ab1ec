"""Confluent's REST Proxy (API v2 and v3), served by the broker process.

A room of its own, as the Schema Registry: the process wiring (cli/serve.py) creates a
`RestProxyServer` when `rest.proxy.listeners` is set and confluent-kafka is installed (the
`rest` extra), and nothing else imports this package. The proxy imports nothing of the
broker (import contracts in pyproject.toml): it is a Kafka client of its own broker
(kafka.py) and an HTTP client of the Schema Registry (formats.py). Routes in v2.py and
v3.py (one function each, in ROUTES tables), what they share in proxy.py, consumer
instances in consumers.py.
"""

from __future__ import annotations

from rest_proxy.server import RestProxyBindError, RestProxyServer

__all__ = ["RestProxyBindError", "RestProxyServer"]
