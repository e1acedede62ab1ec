"""A Schema Registry with Confluent's REST API, served by the broker process.

A room of its own: the process wiring (cli/serve.py) creates a `RegistryServer` when
`schema.registry.listeners` is set, and nothing else imports this package; it reaches the
broker only through the broker's narrow interface for in-process applications,
server/app_host.py (import contracts in pyproject.toml say both). State lives in the
compacted `_schemas` topic in Confluent's record format (records.py), written through the
broker's append path (registry.py) and replayed at start-up (store.py); a cluster member
tails it instead and forwards writes to the leader (cluster.py); routes in api.py;
per-type parsing in schemas.py and compatibility rules in compatibility/.
"""

from __future__ import annotations

from schema_registry.server import RegistryBindError, RegistryServer

__all__ = ["RegistryBindError", "RegistryServer"]
