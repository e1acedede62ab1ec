"""A Schema Registry with Confluent's REST API, served by the broker process.

A room of its own: the broker's start-up (cli/main.py) creates a `RegistryServer` when
`schema.registry.listeners` is set; nothing else in the broker imports this package
(an import-linter contract says so). State lives in the compacted `_schemas` topic in
Confluent's record format (records.py), written through the broker's append path
(registry.py) and replayed at start-up (store.py); routes in api.py; per-type parsing in
schemas.py and compatibility rules in compatibility/.
"""

from __future__ import annotations

from schema_registry.server import RegistryBindError, RegistryServer

__all__ = ["RegistryBindError", "RegistryServer"]
