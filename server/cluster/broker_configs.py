"""Dynamic broker configs in a cluster: Kafka's DynamicBrokerConfig and
AdminZkClient.changeBrokerConfig (ZooKeeper mode, KIP-226).

The layers, their checks and what a single broker does on a change are
server/broker_configs.py's (one implementation; a single broker keeps the same layers in
its data directory). What is the cluster's:

- the store: `/config/brokers/<id>` holds one broker's overrides and
  `/config/brokers/<default>` the cluster-wide defaults, each `{"version":1,"config":{...}}`.
  An alter on any broker (the per-broker ones on the broker they name, as Kafka requires)
  writes the entity's whole config, then a change notice `{"version":2,"entity_path":
  "brokers/<id>"}` (or `brokers/<default>`) under `/config/changes`; every broker follows
  those notices (server/cluster/config_manager.py) and re-reads both of its layers;
- what a change means for the cluster's own parts: the number of replica fetchers, and the
  controller's default unclean election (an enable re-runs the elections of offline
  partitions, as Kafka's controller does).

At start a broker reads both znodes before it registers, so it never serves under
settings the cluster has already changed.
"""

from __future__ import annotations

import logging
from typing import Mapping

from server.broker_configs import DynamicBrokerConfigs
from server.zookeeper import znodes as zn

log = logging.getLogger("trafka.cluster.config")

UNCLEAN = "unclean.leader.election.enable"


class ZooKeeperConfigs:
    """The layers in ZooKeeper (server.broker_configs.ConfigStore)."""

    def __init__(self, node) -> None:
        self.node = node

    def where(self, entity: str) -> str:
        return zn.broker_config_path(entity)

    async def read(self, entity: str) -> dict[str, str]:
        found = await self.node.zk.get(zn.broker_config_path(entity))
        return zn.decode_entity_config(found[0] if found else None)

    async def write(self, entity: str, props: Mapping[str, str]) -> None:
        zk = self.node.zk
        path = zn.broker_config_path(entity)
        data = zn.encode_entity_config(props)
        if await zk.exists(path):
            await zk.set(path, data, -1)
        else:
            await zk.create(path, data, make_parents=True)
        await zk.create(zn.CONFIG_CHANGES_PATH + "/" + zn.CONFIG_CHANGE_PREFIX,
                        zn.encode_config_change_notification(f"brokers/{entity}"), sequential=True,
                        make_parents=True)


class ClusterBrokerConfigs(DynamicBrokerConfigs):
    def __init__(self, node) -> None:
        self.node = node
        super().__init__(node.broker, ZooKeeperConfigs(node))

    async def on_notice(self, entity: str) -> None:
        """A `brokers/<entity>` change notice: re-read if it concerns this broker."""
        if entity in (zn.DEFAULT_ENTITY, str(self.node_id)):
            await self.load()

    def reconfigure(self, changed: set[str]) -> None:
        super().reconfigure(changed)
        node, cfg = self.node, self.config
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
