"""Dynamic broker configs (KIP-226): this broker's own overrides and the cluster-wide
defaults, changed at runtime by AlterConfigs / IncrementalAlterConfigs on BROKER resources,
kept durably and applied without a restart.

One implementation, two stores. What an update may hold (server/dynamic_config.py), the
precedence (per-broker > cluster default > static > built-in, BrokerConfig in
server/config.py) and what the broker does when a setting changes (`reconfigure`) are the
same everywhere; only where the two layers are kept differs:

- a single broker keeps them in its data directory (`ConfigFiles` below), in the form and
  under the names Kafka's ZooKeeper mode gives them: `config/brokers/<id>` for this
  broker's overrides and `config/brokers/<default>` for the cluster-wide defaults, each
  `{"version":1,"config":{...}}`, rewritten whole and atomically (temporary file, fsync,
  rename, fsync of the directory) before the alter is answered;
- a cluster keeps them in ZooKeeper, `/config/brokers/<id>` and `/config/brokers/<default>`
  with a change notice for the other brokers (server/cluster/broker_configs.py).

Kafka has both layers on a single node too (a KRaft node keeps them in its metadata log):
the default entity (resource name "") is the layer every broker of the cluster inherits,
the node's own id its override. At start the stored layers are read before any log is
opened, so the broker never serves under settings that were already changed; what is read
is filtered as Kafka's fromPersistentProps does (a static setting or an unparsable value is
dropped with an error log, the rest applies).
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Callable, Mapping, Protocol

from storage.files import atomic_write

from server.zookeeper.znodes import DEFAULT_ENTITY, decode_entity_config, encode_entity_config
from server.config import SETTINGS
from server.dynamic_config import LOG_DEFAULTS, usable, validate_update
from server.startup import StartupError

log = logging.getLogger("trafka.config")


def entity_name(broker_id: int | None) -> str:
    """The stored name of a BROKER resource: its id, or `<default>` for the cluster default."""
    return DEFAULT_ENTITY if broker_id is None else str(broker_id)


class ConfigStore(Protocol):
    """Where the two layers are kept: `read` an entity's stored overrides (all of them, as
    stored), `write` its whole new set, `where` names it in log lines."""

    async def read(self, entity: str) -> dict[str, str]: ...

    async def write(self, entity: str, props: Mapping[str, str]) -> None: ...

    def where(self, entity: str) -> str: ...


class ConfigFiles:
    """A single broker's layers: `<data dir>/config/brokers/<entity>`, each holding the
    JSON ZooKeeper mode keeps in `/config/brokers/<entity>`."""

    def __init__(self, data_dir: Path) -> None:
        self.data_dir = Path(data_dir)
        self.directory = self.data_dir / "config" / "brokers"

    def where(self, entity: str) -> str:
        return str(self.directory / entity)

    def read_now(self, entity: str) -> dict[str, str]:
        """Blocking read; a file that is not the JSON this class writes stops the start
        (a one-line StartupError naming it): the settings it held were acknowledged, so
        the broker must not quietly serve without them."""
        path = self.directory / entity
        try:
            data = path.read_bytes()
        except FileNotFoundError:
            return {}
        except OSError as exc:
            raise StartupError("log.dirs", self.data_dir, f"its dynamic broker configs {path} cannot be read: "
                                                          f"{exc.strerror or exc}") from None
        try:
            return decode_entity_config(data)
        except (ValueError, AttributeError) as exc:
            raise StartupError("log.dirs", self.data_dir, f"its dynamic broker configs {path} are not "
                                                          f"{{\"version\":1,\"config\":{{...}}}} JSON ({exc}); "
                                                          "repair or remove the file") from None

    async def read(self, entity: str) -> dict[str, str]:
        return self.read_now(entity)

    async def write(self, entity: str, props: Mapping[str, str]) -> None:
        self.directory.mkdir(parents=True, exist_ok=True)
        atomic_write(self.directory / entity, encode_entity_config(props))


class DynamicBrokerConfigs:
    """The dynamic layers of one broker: read from `store` at start, changed by the alter
    handlers, applied to the broker's BrokerConfig (whose listeners hear which names
    changed; `reconfigure` is the one that makes the broker act on them)."""

    def __init__(self, broker, store: ConfigStore) -> None:
        self.broker = broker
        self.node_id = broker.node_id
        self.config = broker.config
        self.store = store
        self.config.add_listener(self.reconfigure)

    # ------------------------------------------------------------------ reading
    def _kept(self, entity: str, props: Mapping[str, str]) -> dict[str, str]:
        kept, dropped = usable(props)
        if dropped:
            log.error("%s: ignoring %s (not dynamic, or not a valid value)", self.store.where(entity), sorted(dropped))
        return kept

    async def stored(self, broker_id: int | None) -> dict[str, str]:
        """The usable overrides of one entity as the store holds them."""
        entity = entity_name(broker_id)
        return self._kept(entity, await self.store.read(entity))

    async def load(self) -> set[str]:
        """Read both layers and apply them; the names whose value changed."""
        default = await self.stored(None)
        mine = await self.stored(self.node_id)
        return self.apply(default, mine)

    def load_files(self) -> set[str]:
        """A single broker's start (blocking, before its logs open): both layers from its
        data directory."""
        files = self.store
        assert isinstance(files, ConfigFiles)
        default = self._kept(DEFAULT_ENTITY, files.read_now(DEFAULT_ENTITY))
        mine = self._kept(str(self.node_id), files.read_now(str(self.node_id)))
        if default or mine:
            log.info("dynamic broker configs from %s: cluster default %s, broker %d %s", files.directory,
                     sorted(default), self.node_id, sorted(mine))
        return self.apply(default, mine)

    # ------------------------------------------------------------------ writing
    async def alter(self, broker_id: int | None, change: Callable[[dict[str, str]], Mapping[str, str]],
                    validate_only: bool) -> dict[str, str]:
        """Compute an entity's new overrides from its current ones, validate them as a whole
        and (unless `validate_only`) store them, then apply them here at once (in a cluster
        the other brokers apply them when the store's change notice reaches them)."""
        per_broker = broker_id is not None
        props = dict(change(await self.stored(broker_id)))
        validate_update(self.config, props, per_broker, self.broker.topic_defaults,
                        kraft=self.broker.cluster is None)
        if validate_only:
            return props
        entity = entity_name(broker_id)
        await self.store.write(entity, props)
        log.info("dynamic config of %s now %s (%s)", "broker " + entity if per_broker else "all brokers",
                 sorted(props), self.store.where(entity))
        if per_broker:
            self.apply(self.config.dynamic_default, props)
        else:
            self.apply(props, self.config.dynamic_broker)
        return props

    # ------------------------------------------------------------------ applying
    def apply(self, default: Mapping[str, str], mine: Mapping[str, str]) -> set[str]:
        changed = self.config.set_dynamic(default, mine)
        if changed:
            layers = (self.config.dynamic_broker, self.config.dynamic_default)
            # a custom config's value stays out of the log, as DescribeConfigs hides it; a
            # deleted one has no value left
            log.info("broker %d: dynamic configs changed %s", self.node_id,
                     {name: self.config.raw(name) if name in SETTINGS else
                      ("(set)" if any(name in layer for layer in layers) else "(deleted)") for name in sorted(changed)})
        return changed

    def reconfigure(self, changed: set[str]) -> None:
        """Act on changed settings (a BrokerConfig listener; Kafka's BrokerReconfigurables).
        Settings read where they are used (the throttled rates, max.connections, ...) need
        nothing here; a cluster adds what concerns its fetchers and controller."""
        broker, cfg = self.broker, self.config
        if changed & LOG_DEFAULTS:
            broker.apply_topic_defaults()
        if "min.insync.replicas" in changed:
            for partition in broker.partitions.values():
                partition.min_isr_default = cfg.get("min.insync.replicas")
        if "max.connection.creation.rate" in changed:
            broker.quotas.changed()  # whether accepts are metered at all
        if "transaction.partition.verification.enable" in changed:
            for partition in broker.partitions.values():
                partition.verification = cfg.get("transaction.partition.verification.enable")
