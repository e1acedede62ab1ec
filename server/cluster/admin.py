"""Topic administration in a cluster: what Kafka's AdminZkClient does for CreateTopics,
CreatePartitions and DeleteTopics (docs/design/replication.md#topic-creation-and-deletion).

Any broker may receive the request; it writes ZooKeeper, and the controller, watching, does
the rest (states, leaders, LeaderAndIsr). CreateTopics writes `/config/topics/<t>` first,
then `/brokers/topics/<t>` (assignment and a fresh topic id), and waits until its own
metadata cache shows a leader for every partition; DeleteTopics creates
`/admin/delete_topics/<t>` and waits until the topic leaves the cache.
"""

from __future__ import annotations

import logging
import uuid

import trio

from wire.errors import ErrorCode

from server.zookeeper import znodes as zn
from server.cluster.controller import assign_replicas
from server.zookeeper.client import BadVersion, NodeExists, NoNode
from server.errors import KafkaError

log = logging.getLogger("trafka.cluster.admin")
E = ErrorCode


class ClusterAdmin:
    def __init__(self, node) -> None:
        self.node = node

    @property
    def zk(self):
        return self.node.zk

    def _live_brokers(self) -> list[tuple[int, str | None]]:
        return [(b.broker_id, b.rack) for b in self.node.cache.brokers.values()]

    def plan(self, partitions: int, replication_factor: int, start: int = 0) -> dict[int, list[int]]:
        brokers = self._live_brokers()
        if replication_factor <= 0 or replication_factor > max(len(brokers), 1) or not brokers:
            raise KafkaError(f"replication factor {replication_factor} larger than the {len(brokers)} live brokers",
                             E.INVALID_REPLICATION_FACTOR)
        return assign_replicas(brokers, partitions, replication_factor, start)

    def check_assignment(self, assignment: dict[int, list[int]]) -> None:
        live = {b for b, _r in self._live_brokers()}
        sizes = {len(r) for r in assignment.values()}
        if len(sizes) > 1:
            raise KafkaError("all partitions must have the same number of replicas", E.INVALID_REPLICA_ASSIGNMENT)
        for p, replicas in assignment.items():
            if not replicas or len(set(replicas)) != len(replicas):
                raise KafkaError(f"partition {p}: duplicate or empty replicas {replicas}", E.INVALID_REPLICA_ASSIGNMENT)
            unknown = [r for r in replicas if r not in live]
            if unknown:
                raise KafkaError(f"partition {p}: brokers {unknown} are not alive", E.INVALID_REPLICA_ASSIGNMENT)
        if sorted(assignment) != list(range(min(assignment, default=0), min(assignment, default=0) + len(assignment))):
            raise KafkaError("partitions of an assignment must be consecutive", E.INVALID_REPLICA_ASSIGNMENT)

    async def create_topic(self, name: str, assignment: dict[int, list[int]], configs: dict[str, str],
                           timeout_s: float) -> None:
        """Write the topic; raise KafkaError (TOPIC_ALREADY_EXISTS, REQUEST_TIMED_OUT, ...)."""
        if await self.zk.exists(zn.topic_path(name)):
            raise KafkaError(f"Topic '{name}' already exists.", E.TOPIC_ALREADY_EXISTS)
        if await self.zk.exists(zn.delete_topic_path(name)):
            raise KafkaError(f"Topic '{name}' is marked for deletion.", E.TOPIC_ALREADY_EXISTS)
        # Another broker may be creating the same topic right now (the internal topics and
        # `_schemas` are created by whichever broker needs them first): the config znode is
        # written whoever wins, and the assignment znode decides who created the topic.
        await self.set_topic_configs(name, configs)
        try:
            await self.zk.create(zn.topic_path(name), zn.TopicAssignment(assignment, uuid.uuid4()).encode())
        except NodeExists:
            raise KafkaError(f"Topic '{name}' already exists.", E.TOPIC_ALREADY_EXISTS) from None
        log.info("created topic %s in ZooKeeper with assignment %s", name, assignment)
        await self.wait_for(lambda: self._has_leaders(name, len(assignment)), timeout_s,
                            f"topic {name} has no leaders yet")

    def _has_leaders(self, name: str, count: int) -> bool:
        partitions = self.node.cache.topics.get(name, {})
        return len(partitions) >= count and all(p.leader >= 0 for p in partitions.values())

    async def create_partitions(self, name: str, total: int, assignment: dict[int, list[int]] | None,
                                timeout_s: float) -> None:
        found = await self.zk.get(zn.topic_path(name))
        if found is None:
            raise KafkaError(f"topic {name} does not exist", E.UNKNOWN_TOPIC_OR_PARTITION)
        data, stat = found
        current = zn.TopicAssignment.decode(data)
        if current.adding_replicas or current.removing_replicas:
            raise KafkaError(f"topic {name} has partitions being reassigned", E.REASSIGNMENT_IN_PROGRESS)
        existing = len(current.partitions)
        if total <= existing:
            raise KafkaError(f"topic {name} has {existing} partitions; {total} does not add any", E.INVALID_PARTITIONS)
        rf = len(next(iter(current.partitions.values())))
        if assignment is None:
            added = self.plan(total - existing, rf, start=existing)
        else:
            added = assignment
            if any(len(r) != rf for r in added.values()):
                raise KafkaError(f"new partitions must have {rf} replicas", E.INVALID_REPLICA_ASSIGNMENT)
            self.check_assignment(added)
        merged = {**current.partitions, **added}
        try:
            await self.zk.set(zn.topic_path(name), zn.TopicAssignment(merged, current.topic_id).encode(), stat.version)
        except BadVersion:
            raise KafkaError(f"topic {name} changed meanwhile; retry", E.REASSIGNMENT_IN_PROGRESS) from None
        await self.wait_for(lambda: self._has_leaders(name, total), timeout_s, f"new partitions of {name} have no leaders")

    async def delete_topic(self, name: str, timeout_s: float) -> None:
        if not await self.zk.exists(zn.topic_path(name)):
            raise KafkaError(f"topic {name} does not exist", E.UNKNOWN_TOPIC_OR_PARTITION)
        try:
            await self.zk.create(zn.delete_topic_path(name), b"")
        except NodeExists:
            pass
        await self.wait_for(lambda: name not in self.node.cache.topics, timeout_s, f"topic {name} is still being deleted")

    async def set_topic_configs(self, name: str, configs: dict[str, str]) -> None:
        """Kafka's setOrCreateEntityConfigs: set, else create, and if another broker created
        it in between, set after all (never an error for a znode that appeared meanwhile)."""
        path = zn.topic_config_path(name)
        data = zn.encode_entity_config(configs)
        try:
            await self.zk.set(path, data, -1)
            return
        except NoNode:
            pass
        try:
            await self.zk.create(path, data, make_parents=True)
        except NodeExists:
            await self.zk.set(path, data, -1)

    async def topic_configs(self, name: str) -> dict[str, str]:
        found = await self.zk.get(zn.topic_config_path(name))
        return zn.decode_entity_config(found[0] if found else None)

    async def wait_for(self, condition, timeout_s: float, what: str) -> None:
        with trio.move_on_after(max(timeout_s, 0.0)):
            while not condition():
                await trio.sleep(0.02)
            return
        raise KafkaError(what, E.REQUEST_TIMED_OUT)
