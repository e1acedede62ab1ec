"""A member of a ZooKeeper-mode cluster: the ZooKeeper implementation of the broker's mode
(server/modes/).

The metadata cache the controller fills by UpdateMetadata (server/cluster/metadata_cache.py)
is the cluster; leadership moves between brokers, so answers carry KIP-951's leader hints;
ACLs, client quotas, topic configs and v0 offsets live in ZooKeeper, where every broker
follows them; topics are created and deleted by writing their znodes, as a ZooKeeper-mode
Kafka 3.9 broker does, and the controller (server/cluster/controller.py) does the rest.
Elections, reassignments, ISR changes and controlled shutdowns are served by the active
controller alone (NOT_CONTROLLER on any other broker, as Kafka's ZooKeeper-mode brokers
forward none of them); the controller's requests to this broker are fenced and applied by
the cluster node (server/cluster/node.py).
"""

from __future__ import annotations

import logging
import uuid
from typing import TYPE_CHECKING, Any, Callable, Mapping

from storage import LogConfig
from wire.errors import ErrorCode
from wire.primitives import ZERO_UUID

from server.cluster import leader_hints, replica_selector
from server.coordinator_log import partition_for_key
from server.errors import InvalidPartitions, InvalidRequest, KafkaError, NotController, UnknownTopicOrPartition
from server.groups import zookeeper_offsets
from server.modes import (BrokerAddress, BrokerMode, check_new_topic, cluster_partition_state, election_answer,
                          new_topic_configs)
from server.topic_configs import explicit_configs
from server.topics import INTERNAL_TOPICS

log = logging.getLogger("trafka.coordinator")  # FindCoordinator's
admin_log = logging.getLogger("trafka.admin")  # ElectLeaders'

if TYPE_CHECKING:
    from server.cluster.controller import Controller
    from server.cluster.node import ClusterNode
    from server.groups.share.partition import SharePartition
    from server.partition import Partition
    from server.security.acls import AclBinding, AclFilter


class ZooKeeperCluster(BrokerMode):
    """A member of a ZooKeeper-mode cluster."""

    follower_fetch = True
    acks_all_waits_for_replicas = True
    zookeeper_offsets = True
    request_partition_limit = None

    def __init__(self, broker: Any, node: "ClusterNode") -> None:
        self.broker = broker
        self.node = node

    # ---- metadata -------------------------------------------------------------------
    def topic_names(self) -> list[str]:
        return sorted(self.node.cache.topics)

    def topic_exists(self, name: str) -> bool:
        return name in self.node.cache.topics

    def topic_id(self, name: str) -> uuid.UUID:
        return self.node.cache.topic_ids.get(name, ZERO_UUID)

    def topic_name_for_id(self, topic_id: uuid.UUID) -> str | None:
        return next((n for n, i in self.node.cache.topic_ids.items() if i == topic_id), None)

    def partition_count(self, name: str) -> int:
        """The highest partition index the cache knows + 1, so that a gap (a partition
        UpdateMetadata has not described yet) shows in `partition_states` as a missing
        entry, not a shorter topic."""
        known = self.node.cache.topics.get(name)
        return max(known) + 1 if known else 0

    def partition_states(self, name: str, start: int = 0, stop: int | None = None) -> list[dict[str, Any]]:
        cache = self.node.cache
        known = cache.topics.get(name, {})
        indexes = sorted(i for i in known if i >= start and (stop is None or i < stop))
        return [cluster_partition_state(cache, i, known[i]) for i in indexes]

    def partition_exists(self, topic: str, index: int) -> bool:
        return self.node.cache.partition(topic, index) is not None

    def controller_id(self) -> int:
        return self.node.cache.controller_id

    def brokers(self, listener: str | None) -> list[BrokerAddress]:
        return [(b.broker_id, a[0], a[1], b.rack)
                for b in sorted(self.node.cache.brokers.values(), key=lambda b: b.broker_id)
                if (a := b.address(listener)) is not None]

    async def auto_create_topic(self, name: str) -> ErrorCode:
        await self.node.auto_create_topic(name)
        return ErrorCode.LEADER_NOT_AVAILABLE  # until the controller has elected its leaders

    # ---- leadership and coordinators --------------------------------------------------
    def leader_hints(self, responses: list[dict], partitions_key: str, codes: frozenset,
                     topic_name: Callable[[dict], str | None]) -> list[dict]:
        return leader_hints.add_hints(self.broker, responses, partitions_key, codes, topic_name)

    def leadership_moved(self, partition: "Partition", share_partition: "SharePartition") -> bool:
        sp = share_partition
        return (not partition.is_leader or partition.leader_epoch != sp.leader_epoch
                or self.broker.partitions.get((sp.topic, sp.index)) is not partition)

    def selects_replicas_by_rack(self) -> bool:
        return replica_selector.is_rack_aware(self.broker.config)

    def preferred_read_replica(self, partition: "Partition", rack_id: str, fetch_offset: int, now_ms: int) -> int:
        return replica_selector.preferred_read_replica(partition, self.node.cache, rack_id, fetch_offset, now_ms)

    def leader_quota(self, replica_id: int):
        return self.node.leader_quota if replica_id >= 0 else None

    async def find_coordinator(self, key: str, internal_topic: str, listener: str | None) -> dict:
        """The leader of the key's partition of the internal topic, created on first use
        (COORDINATOR_NOT_AVAILABLE meanwhile, which clients retry)."""
        node = self.node
        topic = internal_topic
        partitions = node.cache.topics.get(topic)
        if not partitions:
            try:
                await node.auto_create_topic(topic)
            except Exception as exc:
                log.warning("creating %s failed: %r", topic, exc)
            return {"key": key, "node_id": -1, "host": "", "port": -1,
                    "error_code": ErrorCode.COORDINATOR_NOT_AVAILABLE, "error_message": f"{topic} is being created"}
        index = partition_for_key(key, len(partitions))
        leader = node.cache.leader_of(topic, index)
        if leader is None:
            return {"key": key, "node_id": -1, "host": "", "port": -1,
                    "error_code": ErrorCode.COORDINATOR_NOT_AVAILABLE, "error_message": f"{topic}-{index} has no leader"}
        address = leader.address(listener)  # on the client's own listener
        if address is None:
            return {"key": key, "node_id": -1, "host": "", "port": -1,
                    "error_code": ErrorCode.COORDINATOR_NOT_AVAILABLE,
                    "error_message": f"broker {leader.broker_id} has no listener {listener}"}
        return {"key": key, "node_id": leader.broker_id, "host": address[0], "port": address[1],
                "error_code": ErrorCode.NONE, "error_message": None}

    # ---- stores ---------------------------------------------------------------------
    async def add_acls(self, bindings: list["AclBinding"]) -> None:
        await self.node.acls.add(bindings)  # ZooKeeper's /kafka-acl: every broker follows

    async def remove_acls(self, filters: list["AclFilter"]) -> list[list["AclBinding"]]:
        return await self.node.acls.remove(filters)

    async def alter_client_quotas(self, accepted: list[tuple[Any, dict[str, float | None]]]) -> None:
        await self.node.client_quotas.alter(accepted)

    async def topic_configs(self, name: str) -> tuple[dict[str, str], LogConfig | None]:
        broker = self.broker
        if name in broker.topics:
            return explicit_configs(broker, name), broker.topic_config(name)
        # no local replica: the topic's settings as ZooKeeper holds them
        return await self.node.configs.topic_configs(name), None

    def check_topic_for_config_change(self, name: str) -> None:
        pass  # ZooKeeper's topic znode decides, when the change is written

    async def alter_topic_configs(self, name: str, change: Callable[[dict[str, str]], Mapping[str, str]],
                                  validate_only: bool) -> None:
        await self.node.configs.alter_topic(name, change, validate_only)

    async def commit_offset_v0(self, group_id: str, topic: str, index: int, offset: int) -> None:
        await zookeeper_offsets.commit(self.node.zk, group_id, topic, index, offset)

    async def fetch_offset_v0(self, group_id: str, topic: str, index: int) -> int | None:
        return await zookeeper_offsets.fetch(self.node.zk, group_id, topic, index)

    # ---- topics (the controller's side) ------------------------------------------------
    def admin_time_left(self, timeout_ms: int) -> bool:
        return True  # the znode is written whatever the timeout; it bounds the wait alone

    async def create_topic(self, topic: dict, validate_only: bool,
                           timeout_ms: int) -> tuple[uuid.UUID | None, int, int, dict[str, str]]:
        broker = self.broker
        node = self.node
        name = topic["name"]
        check_new_topic(name, name in node.cache.topics)
        assignments = topic.get("assignments") or []
        partitions = topic["num_partitions"]
        replication = topic["replication_factor"]
        if assignments:
            if partitions != -1 or replication != -1:
                raise KafkaError("give either assignments or partitions and replication factor", ErrorCode.INVALID_REQUEST)
            plan = {a["partition_index"]: list(a["broker_ids"]) for a in assignments}
            if sorted(plan) != list(range(len(plan))):
                raise KafkaError("assignments must cover partitions 0..n-1", ErrorCode.INVALID_REPLICA_ASSIGNMENT)
            node.admin.check_assignment(plan)
        else:
            if partitions == -1:
                partitions = broker.config.get("num.partitions")
            if partitions <= 0:
                raise KafkaError(f"number of partitions must be positive, got {partitions}", ErrorCode.INVALID_PARTITIONS)
            if replication == -1:
                replication = broker.config.get("default.replication.factor")
            if replication <= 0:
                raise KafkaError(f"replication factor must be positive, got {replication}",
                                 ErrorCode.INVALID_REPLICATION_FACTOR)
            plan = node.admin.plan(partitions, replication)
        configs = new_topic_configs(topic, broker.logs.defaults)
        if not validate_only:
            await node.admin.create_topic(name, plan, configs, timeout_ms / 1000)
        topic_id = node.cache.topic_ids.get(name) if not validate_only else None
        return topic_id, len(plan), len(next(iter(plan.values()))), configs

    async def create_partitions(self, topic: dict, validate_only: bool, timeout_ms: int) -> None:
        """New partitions placed by Kafka's algorithm (or the request's assignments, over
        live brokers) and written to ZooKeeper; the controller elects their leaders."""
        node = self.node
        name = topic["name"]
        if name in INTERNAL_TOPICS:
            raise InvalidRequest(f"{name} is an internal topic; its partition count cannot change")
        known = node.cache.topics.get(name)
        if known is None:
            raise UnknownTopicOrPartition(f"The topic '{name}' does not exist.")
        current, count = len(known), topic["count"]
        # Kafka's ZooKeeper-mode (ZkAdminManager) messages, which kafka-topics --alter prints.
        if count < current:
            raise InvalidPartitions(f"Topic currently has {current} partitions, which is higher than the requested "
                                    f"{count}.")
        if count == current:
            raise InvalidPartitions(f"Topic already has {current} partitions.")
        plan = None
        assignments = topic.get("assignments")
        if assignments is not None:
            if len(assignments) != count - current:
                raise KafkaError(f"adding {count - current} partitions needs as many assignments, got {len(assignments)}",
                                 ErrorCode.INVALID_REPLICA_ASSIGNMENT)
            plan = {current + i: list(a["broker_ids"]) for i, a in enumerate(assignments)}
        if validate_only:
            if plan is not None:
                node.admin.check_assignment(plan)
            return
        await node.admin.create_partitions(name, count, plan, timeout_ms / 1000)

    async def delete_topic(self, name: str, timeout_ms: int) -> None:
        # /admin/delete_topics/<t>; the controller deletes it everywhere
        await self.node.admin.delete_topic(name, timeout_ms / 1000)

    # ---- the controller's requests to this broker -----------------------------------------
    # Fenced by broker and controller epoch, then applied (server/cluster/node.py).
    async def leader_and_isr(self, request: dict, version: int) -> tuple[ErrorCode, list[tuple[str, int, ErrorCode]]]:
        return await self.node.leader_and_isr(request, version)

    async def stop_replica(self, request: dict, version: int) -> tuple[ErrorCode, list[tuple[str, int, ErrorCode]]]:
        return await self.node.stop_replica(request, version)

    async def update_metadata(self, request: dict, version: int) -> ErrorCode:
        return await self.node.update_metadata(request, version)

    # ---- requests the active controller serves ----------------------------------------------
    def _active_controller(self) -> "Controller":
        """The controller, when this broker is the active one (NotController otherwise:
        Kafka's ZooKeeper-mode brokers forward none of these, the client finds the
        controller through Metadata)."""
        controller = self.node.controller
        if not controller.active:
            raise NotController(f"broker {self.broker.node_id} is not the controller")
        return controller

    async def alter_partition(self, request: dict, version: int) -> dict:
        # checks and the compare-and-set write are the controller's
        return await self._active_controller().alter_partition(request, version)

    async def controlled_shutdown(self, broker_id: int, broker_epoch: int) -> tuple[ErrorCode, list[tuple[str, int]]]:
        return await self._active_controller().controlled_shutdown(broker_id, broker_epoch)

    async def list_reassignments(self, request: dict) -> dict:
        return await self._active_controller().reassignments.list(request)

    async def alter_reassignments(self, request: dict) -> dict:
        # the answer once each move has started; the copy goes on in the background
        # (server/cluster/reassignment.py)
        return await self._active_controller().reassignments.alter(request)

    async def elect_leaders(self, asked: list[dict] | None, election_type: int, timeout_ms: int,
                            client_id: str | None) -> dict:
        """The controller elects (server/cluster/elections.py) and answers once this broker's
        metadata shows the new leaders or `timeout_ms` passed (REQUEST_TIMED_OUT). Any other
        broker answers NOT_CONTROLLER for each partition asked for (for all it knows when
        `asked` is None) with no top-level error, as Kafka's KafkaApis.handleElectLeaders
        does, its controller answering through the callback per partition. For every
        partition (None), the partitions that needed no election are left out."""
        tps = None if asked is None else [(t["topic"], p) for t in asked for p in t["partitions"]]
        controller = self.node.controller
        if not controller.active:
            if tps is None:
                tps = [(t, p) for t, parts in self.node.cache.topics.items() for p in parts]
            admin_log.info("ElectLeaders from %s on broker %d, which is not the controller: NOT_CONTROLLER", client_id,
                           self.broker.node_id)
            results = {tp: (ErrorCode.NOT_CONTROLLER, None) for tp in tps}
        else:
            results = await controller.elections.elect_leaders(tps, election_type, timeout_ms / 1000)
        if asked is None:
            results = {tp: r for tp, r in results.items() if r[0] != ErrorCode.ELECTION_NOT_NEEDED}
        return election_answer(results, ErrorCode.NONE)
