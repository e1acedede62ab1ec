"""Topic configs in a cluster: Kafka's ZkConfigManager and AdminZkClient.changeConfigs
(`/config/topics/<t>` and `/config/changes/config_change_<seq>`;
docs/design/replication.md#config-changes).

Why through ZooKeeper: any broker may receive AlterConfigs, but every replica of the topic
must run under the new settings (a retention change has to shorten the log on followers
too), and a broker that hosts no replica must still answer DescribeConfigs. So an alter
writes the topic's whole config to `/config/topics/<t>`, then a sequential change notice
`{"version":2,"entity_path":"topics/<t>"}`; every broker watches `/config/changes` and, for
each notice newer than the last it processed (in sequence order), re-reads the entity's
config and applies it to its local logs. Notices older than 15 minutes are deleted by
whichever broker sees them (Kafka's ZkNodeChangeNotificationListener.purgeObsoleteNotifications).

Broker entities (`brokers/<id>`, `brokers/<default>`) are handed to
server/cluster/broker_configs.py, which re-reads this broker's dynamic config layers;
group entities (`groups/<group>`) to `broker.group_configs`, which re-reads that group's
(server/cluster/group_configs.py).

The controller is told too: a notice whose topic config now enables
`unclean.leader.election.enable` makes the active controller re-run the elections of that
topic's offline partitions (Kafka's TopicConfigHandler → TopicUncleanLeaderElectionEnable),
whether or not this broker hosts the topic.

Re-reading rather than trusting the notice makes processing idempotent: the watch also
fires after every reconnection, and at start a broker processes every notice still there,
then brings each topic it hosts up to date with ZooKeeper (a change made while it was
down, whose notice was purged, is not missed).
"""

from __future__ import annotations

import logging
import time
from typing import Callable, Mapping

from server.zookeeper import znodes as zn
from server.cluster.group_configs import group_of
from server.errors import UnknownTopicOrPartition
from server.security.sasl.scram_store import store_of as scram_store_of
from server.topic_configs import validate

log = logging.getLogger("trafka.cluster.config")

# Kafka's ZkNodeChangeNotificationListener.DefaultChangeExpirationMs.
CHANGE_EXPIRATION_MS = 15 * 60 * 1000


def sequence_of(child: str) -> int:
    """`config_change_0000000042` → 42 (-1 for a name that is not a notice)."""
    if not child.startswith(zn.CONFIG_CHANGE_PREFIX):
        return -1
    try:
        return int(child[len(zn.CONFIG_CHANGE_PREFIX):])
    except ValueError:
        return -1


class TopicConfigManager:
    def __init__(self, node) -> None:
        self.node = node
        self.last_processed = -1  # the sequence number of the last notice applied
        self.expiration_ms = CHANGE_EXPIRATION_MS

    @property
    def zk(self):
        return self.node.zk

    @property
    def broker(self):
        return self.node.broker

    # ------------------------------------------------------------------ writing
    async def topic_configs(self, topic: str) -> dict[str, str]:
        """The topic's explicit settings as ZooKeeper holds them; UNKNOWN_TOPIC_OR_PARTITION
        if the topic does not exist in the cluster."""
        if await self.zk.exists(zn.topic_path(topic)) is None:
            raise UnknownTopicOrPartition(f"topic {topic} does not exist")
        return await self.node.admin.topic_configs(topic)

    async def alter_topic(self, topic: str, change: Callable[[dict[str, str]], Mapping[str, str]],
                          validate_only: bool) -> dict[str, str]:
        """Compute the topic's new explicit settings from its current ones, validate them and
        (unless `validate_only`) write them and a change notice. The receiving broker applies
        them at once if it hosts the topic; the others when the notice reaches them."""
        current = await self.topic_configs(topic)
        configs = dict(change(current))
        validate(self.broker, configs)
        if validate_only:
            return configs
        await self.node.admin.set_topic_configs(topic, configs)
        await self.zk.create(zn.CONFIG_CHANGES_PATH + "/" + zn.CONFIG_CHANGE_PREFIX,
                             zn.encode_config_change_notification(f"topics/{topic}"), sequential=True,
                             make_parents=True)
        self._apply_locally(topic, configs)
        return configs

    # ------------------------------------------------------------------ watching
    async def run(self) -> None:
        """Bring hosted topics up to date, then follow `/config/changes` (the watch lives in
        the ZooKeeper client's nursery; this returns once it is armed)."""
        for topic in list(self.broker.topics):
            await self._refresh(topic)
        await self.zk.watch_children(zn.CONFIG_CHANGES_PATH, self._on_changes)

    async def _on_changes(self, children: list[str]) -> None:
        from server.zookeeper.client import ZooKeeperError

        try:
            await self._process_notices(children)
        except ZooKeeperError as exc:  # the watch fires again once reconnected
            log.warning("processing config change notices: %s", exc)

    async def _process_notices(self, children: list[str]) -> None:
        notices = sorted((sequence_of(c), c) for c in children if sequence_of(c) >= 0)
        for seq, child in notices:
            if seq <= self.last_processed:
                continue
            found = await self.zk.get(f"{zn.CONFIG_CHANGES_PATH}/{child}")
            if found is not None:
                try:
                    entity = zn.decode_config_change_notification(found[0])
                except (ValueError, KeyError) as exc:
                    log.warning("config change notice %s is not readable: %s", child, exc)
                else:
                    await self._process(entity)
            self.last_processed = seq
        await self._purge(notices)

    async def _process(self, entity_path: str) -> None:
        entity_type, _, name = entity_path.partition("/")
        if entity_type == "topics" and name:
            await self._refresh(name)
            await self._tell_controller(name)
        elif entity_type == "brokers" and name:
            await self.node.broker_configs.on_notice(name)  # server/cluster/broker_configs.py
        elif entity_type == "groups" and name:
            # server/cluster/group_configs.py: the group's coordinator applies them from this copy
            await self.broker.group_configs.refresh(group_of(name))
        elif entity_type in ("users", "clients", "ips") and name:
            # Kafka's UserConfigHandler: a user's znode holds both its SCRAM credentials and its quotas.
            if entity_type == "users" and "/" not in name:
                await scram_store_of(self.broker, self.zk).refresh(name)  # server/security/sasl/scram_store.py
            await self.node.client_quotas.on_notice(entity_path)  # server/cluster/client_quota_configs.py
        else:
            log.debug("config change for %s: nothing to apply here", entity_path)

    async def _refresh(self, topic: str) -> None:
        if topic not in self.broker.topics:
            return
        found = await self.zk.get(zn.topic_config_path(topic))
        if found is not None:  # no znode: the topic is gone or not written yet, keep what we have
            self._apply_locally(topic, zn.decode_entity_config(found[0]))

    async def _tell_controller(self, topic: str) -> None:
        controller = self.node.controller
        if not controller.active:
            return
        found = await self.zk.get(zn.topic_config_path(topic))
        value = zn.decode_entity_config(found[0] if found else None).get("unclean.leader.election.enable", "")
        if value.strip().lower() == "true":
            controller.enable_topic_unclean_election(topic)

    def _apply_locally(self, topic: str, configs: dict[str, str]) -> None:
        meta = self.broker.topics.get(topic)
        if meta is None or dict(meta.configs) == configs:
            return
        try:
            validate(self.broker, configs)
        except Exception as exc:
            log.error("topic %s: config from ZooKeeper %s is not valid here: %s", topic, configs, exc)
            return
        self.broker.alter_topic_configs(topic, configs)
        log.info("topic %s: config now %s", topic, configs)

    async def _purge(self, notices: list[tuple[int, str]]) -> None:
        """Delete processed notices older than the expiration (any broker may: a NoNode means
        another one was quicker)."""
        from server.zookeeper.client import NoNode

        cutoff = time.time_ns() // 1_000_000 - self.expiration_ms
        for seq, child in notices:
            if seq > self.last_processed:
                break
            path = f"{zn.CONFIG_CHANGES_PATH}/{child}"
            stat = await self.zk.exists(path)
            if stat is None or stat.ctime >= cutoff:
                continue
            try:
                await self.zk.delete(path)
                log.info("deleted the expired config change notice %s", child)
            except NoNode:
                pass
