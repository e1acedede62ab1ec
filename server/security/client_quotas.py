"""Client quota configuration (KIP-546): which entity has which quota, validated and stored.

How this works: an entity is a combination of entity types with names — `user`,
`client-id`, `user`+`client-id`, or `ip` alone — where a name of None is the type's
default entity (`<default>` in Kafka's tools and ZooKeeper paths). Each entity holds quota
keys with float values, as AlterClientQuotas carries them. `QuotaConfigs` is the table;
`validate_alteration` applies Kafka's rules (ClientQuotaControlManager / ZkAdminManager),
each failure an `InvalidRequest` naming what is wrong; `describe` is DescribeClientQuotas'
filter (exact, default and specified matches, `strict`).

Durable as `<data dir>/__security/client_quotas.json` (storage's atomic_write) —
{"version": 1, "entries": [{"entity": {"user": "alice", "client-id": null}, "config":
{"producer_byte_rate": 1024.0}}, ...]}, null naming the default entity — rewritten
whole on every change: a handful of entities, changed by an operator, never on a hot path.
Enforcement reads the table through server/security/quotas.py.
"""

from __future__ import annotations

import ipaddress
import json
import logging
from pathlib import Path

from storage.files import atomic_write

from server.errors import InvalidRequest, Unsupported

log = logging.getLogger("trafka.quotas")

USER, CLIENT_ID, IP = "user", "client-id", "ip"
PRODUCER_BYTE_RATE = "producer_byte_rate"
CONSUMER_BYTE_RATE = "consumer_byte_rate"
REQUEST_PERCENTAGE = "request_percentage"
CONTROLLER_MUTATION_RATE = "controller_mutation_rate"
CONNECTION_CREATION_RATE = "connection_creation_rate"

# Kafka's QuotaConfigs: the keys valid per entity kind, and whether they must be whole numbers
# (LONG/INT keys; request_percentage and controller_mutation_rate are DOUBLE).
USER_CLIENT_KEYS = {PRODUCER_BYTE_RATE: True, CONSUMER_BYTE_RATE: True, REQUEST_PERCENTAGE: False,
                    CONTROLLER_MUTATION_RATE: False}
IP_KEYS = {CONNECTION_CREATION_RATE: True}

MATCH_EXACT, MATCH_DEFAULT, MATCH_SPECIFIED = 0, 1, 2

# An entity: ((type, name or None), ...) sorted by type, so one entity has one key.
Entity = tuple[tuple[str, str | None], ...]

FILE = Path("__security") / "client_quotas.json"


def entity_of(items: list[dict]) -> Entity:
    """The entity named by a request's [{entity_type, entity_name}], checked as Kafka does."""
    if not items:
        raise InvalidRequest("Invalid empty client quota entity")
    seen: dict[str, str | None] = {}
    for item in items:
        kind, name = item["entity_type"], item["entity_name"]
        if kind not in (USER, CLIENT_ID, IP):
            raise InvalidRequest(f"Unhandled client quota entity type: {kind}")
        if kind in seen:
            raise InvalidRequest(f"Duplicate {kind} entity type in the client quota entity")
        if name is not None and name == "":
            raise InvalidRequest(f"Empty {kind} entity name: use null for the default entity")
        seen[kind] = name
    if IP in seen:
        if len(seen) > 1:
            raise InvalidRequest("Invalid quota entity combination, IP entity should not be combined with "
                                 "User or ClientId")
        if seen[IP] is not None:
            try:
                ipaddress.ip_address(seen[IP])
            except ValueError:
                raise InvalidRequest(f"{seen[IP]} is not a valid IP address") from None
    return tuple(sorted(seen.items()))


def entity_list(entity: Entity) -> list[dict]:
    return [{"entity_type": kind, "entity_name": name} for kind, name in entity]


def entity_text(entity: Entity) -> str:
    """Kafka's path-like spelling, for logs: users/alice/clients/<default>."""
    parts = []
    for kind, name in sorted(entity, key=lambda e: (e[0] != USER, e[0])):
        label = {USER: "users", CLIENT_ID: "clients", IP: "ips"}[kind]
        parts.append(f"{label}/{'<default>' if name is None else name}")
    return "/".join(parts)


def validate_ops(entity: Entity, ops: list[dict]) -> dict[str, float | None]:
    """key -> new value (None: remove) for one entry's ops; InvalidRequest on any bad op."""
    keys = IP_KEYS if entity[0][0] == IP else USER_CLIENT_KEYS
    changes: dict[str, float | None] = {}
    for op in ops:
        key, value = op["key"], op["value"]
        if key not in keys:
            raise InvalidRequest(f"Invalid configuration key {key}")
        if key in changes:
            raise InvalidRequest(f"Duplicate quota key {key} in one entity's alterations")
        if op["remove"]:
            changes[key] = None
            continue
        if value != value or value in (float("inf"), float("-inf")):
            raise InvalidRequest(f"Invalid value {value} for configuration key {key}")
        if keys[key] and value != int(value):
            raise InvalidRequest(f"Integer quota config {key} cannot have a fractional value {value}")
        if value <= 0:
            # A zero quota would never let a byte through (Kafka's throttle formula divides
            # by it); an operator blocks a client with ACLs instead.
            raise InvalidRequest(f"Quota {key} must be positive, got {value}")
        changes[key] = float(value)
    return changes


class QuotaConfigs:
    """entity -> {quota key: value}: the quotas an operator set, kept on disk."""

    def __init__(self, data_dir: Path | None) -> None:
        self.path = None if data_dir is None else Path(data_dir) / FILE
        self.entries: dict[Entity, dict[str, float]] = {}

    def load(self) -> None:
        if self.path is None or not self.path.exists():
            return
        try:
            stored = json.loads(self.path.read_text())
            for item in stored["entries"]:
                entity = tuple(sorted(item["entity"].items()))
                self.entries[entity] = {k: float(v) for k, v in item["config"].items()}
        except (OSError, ValueError, KeyError, TypeError) as exc:
            # Starting without the quotas would let every client run unthrottled: refuse.
            raise RuntimeError(f"{self.path} is unreadable ({exc}); fix or remove it") from exc
        log.info("client quotas loaded: %d entities", len(self.entries))

    def save(self) -> None:
        if self.path is None:
            return
        self.path.parent.mkdir(parents=True, exist_ok=True)
        data = {"version": 1, "entries": [{"entity": dict(entity), "config": config}
                                          for entity, config in sorted(self.entries.items(), key=_sort_key)]}
        atomic_write(self.path, json.dumps(data, indent=1).encode())

    def apply(self, entity: Entity, changes: dict[str, float | None]) -> None:
        config = dict(self.entries.get(entity, {}))
        for key, value in changes.items():
            if value is None:
                config.pop(key, None)
            else:
                config[key] = value
        if config:
            self.entries[entity] = config
        else:
            self.entries.pop(entity, None)

    def describe(self, components: list[dict], strict: bool) -> list[tuple[Entity, dict[str, float]]]:
        """DescribeClientQuotas' filter, as Kafka's ClientQuotasImage.describe applies it."""
        exact: dict[str, str | None] = {}
        specified: set[str] = set()
        for component in components:
            kind, match_type, match = component["entity_type"], component["match_type"], component["match"]
            if not kind:
                raise InvalidRequest("Invalid empty entity type.")
            if kind in exact or kind in specified:
                raise InvalidRequest(f"Entity type {kind} cannot appear more than once in the filter.")
            if kind not in (USER, CLIENT_ID, IP):
                raise Unsupported(f"Unsupported entity type {kind}")
            if match_type == MATCH_EXACT:
                if match is None:
                    raise InvalidRequest("Request specified MATCH_TYPE_EXACT, but set match string to null.")
                exact[kind] = match
            elif match_type == MATCH_DEFAULT:
                if match is not None:
                    raise InvalidRequest("Request specified MATCH_TYPE_DEFAULT, but also specified a match string.")
                exact[kind] = None
            elif match_type == MATCH_SPECIFIED:
                if match is not None:
                    raise InvalidRequest("Request specified MATCH_TYPE_SPECIFIED, but also specified a match string.")
                specified.add(kind)
            else:
                raise InvalidRequest(f"Unknown match type {match_type}")  # what Kafka 4 answers
        kinds = set(exact) | specified
        if IP in kinds and kinds & {USER, CLIENT_ID}:
            raise InvalidRequest("Invalid entity filter component combination. IP filter component should not be "
                                 "used with user or clientId filter component.")
        found = []
        for entity, config in sorted(self.entries.items(), key=_sort_key):
            names = dict(entity)
            if strict and len(names) != len(kinds):
                continue
            if any(kind not in names or names[kind] != name for kind, name in exact.items()):
                continue
            if any(kind not in names for kind in specified):
                continue
            found.append((entity, config))
        return found


def _sort_key(item) -> tuple:
    entity = item[0]
    return tuple((kind, name is not None, name or "") for kind, name in entity)
