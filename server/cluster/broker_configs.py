"""Dynamic broker configs in a cluster: Kafka's DynamicBrokerConfig and
AdminZkClient.changeBrokerConfig (ZooKeeper mode, KIP-226).

Where they live: `/config/brokers/<id>` holds one broker's overrides and
`/config/brokers/<default>` the cluster-wide defaults, each `{"version":1,"config":{...}}`.
An alter on any broker (the per-broker ones on the broker they name, as Kafka requires)
writes the entity's whole config, then a change notice `{"version":2,"entity_path":
"brokers/<id>"}` (or `brokers/<default>`) under `/config/changes`; every broker follows
those notices (server/cluster/config_manager.py) and re-reads both of its layers.

Precedence is Kafka's: per-broker > cluster default > static (server.properties, env,
flags) > built-in default. The layers are kept in the broker's BrokerConfig
(server/config.py), whose `get`/`raw` answer the effective value; setting them tells
the config's listeners which names changed, and `_reconfigure` below is the listener that
makes the broker act on a change: new topic defaults for every topic without its own
override (retention, segment size, max.message.bytes, ...), the controller's default
unclean election (an enable re-runs the elections of offline partitions, as Kafka's
controller does), the number of replica fetchers, min.insync.replicas and KIP-890
verification of the hosted partitions.

At start a broker reads both znodes before it registers, so it never serves under
settings the cluster has already changed; what it reads is filtered as Kafka's
fromPersistentProps does (static, unknown or unparsable entries are dropped with an error
log, the rest applies).
"""

from __future__ import annotations

import logging
from typing import Callable, Mapping

from server.cluster import znodes as zn
from server.dynamic_config import LOG_DEFAULTS, usable, validate_update

log = logging.getLogger("trafka.cluster.config")

UNCLEAN = "unclean.leader.election.enable"


def entity_name(broker_id: int | None) -> str:
    """The znode name of a BROKER resource: its id, or `<default>` for the cluster default."""
    return zn.DEFAULT_ENTITY if broker_id is None else str(broker_id)


class DynamicBrokerConfigs:
    def __init__(self, node) -> None:
        self.node = node
        self.config = node.config
        self.config.add_listener(self._reconfigure)

    @property
    def zk(self):
        return self.node.zk

    # ------------------------------------------------------------------ reading
    async def stored(self, broker_id: int | None) -> dict[str, str]:
        """The usable overrides of one entity as ZooKeeper holds them."""
        entity = entity_name(broker_id)
        found = await self.zk.get(zn.broker_config_path(entity))
        kept, dropped = usable(zn.decode_entity_config(found[0] if found else None))
        if dropped:
            log.error("/config/brokers/%s: ignoring %s (not dynamic, unknown or not valid)", entity, sorted(dropped))
        return kept

    async def load(self) -> set[str]:
        """Read both layers from ZooKeeper and apply them; the names whose value changed."""
        default = await self.stored(None)
        mine = await self.stored(self.node.node_id)
        return self._apply(default, mine)

    async def on_notice(self, entity: str) -> None:
        """A `brokers/<entity>` change notice: re-read if it concerns this broker."""
        if entity in (zn.DEFAULT_ENTITY, str(self.node.node_id)):
            await self.load()

    # ------------------------------------------------------------------ writing
    async def alter(self, broker_id: int | None, change: Callable[[dict[str, str]], Mapping[str, str]],
                    validate_only: bool) -> dict[str, str]:
        """Compute an entity's new overrides from its current ones, validate them as a whole
        and (unless `validate_only`) write them and a change notice, then apply them here
        at once (the other brokers apply them when the notice reaches them)."""
        per_broker = broker_id is not None
        props = dict(change(await self.stored(broker_id)))
        validate_update(self.config, props, per_broker, self.node.broker.topic_defaults)
        if validate_only:
            return props
        entity = entity_name(broker_id)
        path = zn.broker_config_path(entity)
        data = zn.encode_entity_config(props)
        if await self.zk.exists(path):
            await self.zk.set(path, data, -1)
        else:
            await self.zk.create(path, data, make_parents=True)
        await self.zk.create(zn.CONFIG_CHANGES_PATH + "/" + zn.CONFIG_CHANGE_PREFIX,
                             zn.encode_config_change_notification(f"brokers/{entity}"), sequential=True,
                             make_parents=True)
        log.info("dynamic config of %s now %s", "broker " + entity if per_broker else "all brokers", props)
        if per_broker:
            self._apply(self.config.dynamic_default, props)
        else:
            self._apply(props, self.config.dynamic_broker)
        return props

    # ------------------------------------------------------------------ applying
    def _apply(self, default: Mapping[str, str], mine: Mapping[str, str]) -> set[str]:
        changed = self.config.set_dynamic(default, mine)
        if changed:
            log.info("broker %d: dynamic configs changed %s", self.node.node_id,
                     {name: self.config.raw(name) for name in sorted(changed)})
        return changed

    def _reconfigure(self, changed: set[str]) -> None:
        """Act on changed settings (a BrokerConfig listener; Kafka's BrokerReconfigurables).
        Settings read where they are used (the throttled rates, max.connections, ...) need
        nothing here."""
        node, broker, cfg = self.node, self.node.broker, self.config
        if changed & LOG_DEFAULTS:
            broker.apply_topic_defaults()
        if "min.insync.replicas" in changed:
            for partition in broker.partitions.values():
                partition.min_isr_default = cfg.get("min.insync.replicas")
        if "transaction.partition.verification.enable" in changed:
            for partition in broker.partitions.values():
                partition.verification = cfg.get("transaction.partition.verification.enable")
        if "num.replica.fetchers" in changed:
            node.fetchers.resize(cfg.get("num.replica.fetchers"))
        if UNCLEAN in changed:
            controller = node.controller
            controller.unclean = cfg.get(UNCLEAN)
            if controller.unclean and controller.active:
                # Kafka's controller: enabling the broker default re-runs the elections of
                # offline partitions (an UncleanLeaderElectionEnable event).
                for topic in list(controller.ctx.assignments):
                    controller.enable_topic_unclean_election(topic)
