"""A broker alone: the one-broker implementation of the broker's mode (server/modes/).

Its topic registry and partitions are the whole cluster and it leads every partition it
has; ACLs, client quotas, topic configs and group offsets are kept in its data directory;
admin requests are answered as Kafka 4's KRaft controller answers them (no time left is
REQUEST_TIMED_OUT, at most REQUEST_PARTITION_LIMIT partitions per request), replicas
assigned to a broker other than this one are INVALID_REPLICA_ASSIGNMENT. Elections and
reassignments find nothing to do (every replica is the preferred one and stays). It has no
controller: requests only the active controller serves are NOT_CONTROLLER, and a
controller's requests to it (LeaderAndIsr, StopReplica, UpdateMetadata)
STALE_CONTROLLER_EPOCH.
"""

from __future__ import annotations

import logging
import uuid
from typing import TYPE_CHECKING, Any, Callable, Mapping

from storage import LogConfig
from wire.errors import ErrorCode
from wire.primitives import ZERO_UUID

from server.errors import (InvalidPartitions, InvalidRequest, KafkaError, NotController, PolicyViolation,
                           UnknownTopicOrPartition)
from server.modes import (OFFSETS_TOPIC, REQUEST_PARTITION_LIMIT, BrokerAddress, BrokerMode, check_new_topic,
                          local_partition_state, new_topic_configs)
from server.topic_configs import apply, explicit_configs
from server.topics import INTERNAL_TOPICS

if TYPE_CHECKING:
    from server.groups.share.partition import SharePartition
    from server.partition import Partition
    from server.security.acls import AclBinding, AclFilter


# Kafka 4's KRaft controller's messages for ElectLeaders
_ELECTION_NOT_NEEDED = "Leader election not needed for topic partition."
log = logging.getLogger("trafka.admin")


class SingleBroker(BrokerMode):
    """A broker alone: a cluster of one."""

    follower_fetch = False
    acks_all_waits_for_replicas = False
    zookeeper_offsets = False
    request_partition_limit = REQUEST_PARTITION_LIMIT

    def __init__(self, broker: Any) -> None:
        self.broker = broker

    # ---- metadata -------------------------------------------------------------------
    def topic_names(self) -> list[str]:
        return sorted(self.broker.topics)

    def topic_exists(self, name: str) -> bool:
        return name in self.broker.topics

    def topic_id(self, name: str) -> uuid.UUID:
        meta = self.broker.topics.get(name)
        return meta.topic_id if meta is not None else ZERO_UUID

    def topic_name_for_id(self, topic_id: uuid.UUID) -> str | None:
        return self.broker.topic_name_for_id(topic_id)

    def partition_count(self, name: str) -> int:
        meta = self.broker.topics.get(name)
        return meta.partitions if meta is not None else 0

    def partition_states(self, name: str, start: int = 0, stop: int | None = None) -> list[dict[str, Any]]:
        broker = self.broker
        meta = broker.topics[name]
        end = meta.partitions if stop is None else min(stop, meta.partitions)
        states = []
        for index in range(max(start, 0), end):
            partition = broker.partitions.get((name, index))
            if partition is not None:
                states.append(local_partition_state(partition))
        return states

    def partition_exists(self, topic: str, index: int) -> bool:
        meta = self.broker.topics.get(topic)
        return meta is not None and 0 <= index < meta.partitions

    def controller_id(self) -> int:
        return self.broker.node_id

    def brokers(self, listener: str | None) -> list[BrokerAddress]:
        host, port = self.broker.config.advertised_for(listener)
        return [(self.broker.node_id, host, port, None)]

    async def auto_create_topic(self, name: str) -> ErrorCode:
        self.broker.maybe_auto_create(name)
        # Created now or not at all, the topic is not there yet for this request: Kafka 4's
        # controller creates it asynchronously and answers UNKNOWN_TOPIC_OR_PARTITION with no
        # partitions, so clients ask again and find it.
        return ErrorCode.UNKNOWN_TOPIC_OR_PARTITION

    # ---- leadership and coordinators --------------------------------------------------
    def leader_hints(self, responses: list[dict], partitions_key: str, codes: frozenset,
                     topic_name: Callable[[dict], str | None]) -> list[dict]:
        return []  # it leads every partition it has: there is no other leader to name

    def leadership_moved(self, partition: "Partition", share_partition: "SharePartition") -> bool:
        return False

    def selects_replicas_by_rack(self) -> bool:
        return False  # no follower to send a consumer to

    def preferred_read_replica(self, partition: "Partition", rack_id: str, fetch_offset: int, now_ms: int) -> int:
        return -1

    def leader_quota(self, replica_id: int):
        return None

    async def find_coordinator(self, key: str, internal_topic: str, listener: str | None) -> dict:
        broker = self.broker
        if internal_topic == OFFSETS_TOPIC:
            loading = broker.groups is None or not broker.groups.loaded
            message = "the group coordinator is loading"
        else:
            loading = not broker.txn.loaded
            message = "the transaction coordinator is loading"
        if loading:
            return {"key": key, "node_id": -1, "host": "", "port": -1, "error_code": ErrorCode.COORDINATOR_NOT_AVAILABLE,
                    "error_message": message}
        host, port = self.broker.config.advertised_for(listener)  # the client's own listener
        return {"key": key, "node_id": self.broker.node_id, "host": host, "port": port,
                "error_code": ErrorCode.NONE, "error_message": None}

    # ---- stores ---------------------------------------------------------------------
    async def add_acls(self, bindings: list["AclBinding"]) -> None:
        self.broker.authorizer.add(bindings)  # <data dir>/__security/acls.json

    async def remove_acls(self, filters: list["AclFilter"]) -> list[list["AclBinding"]]:
        return self.broker.authorizer.remove(filters)

    async def alter_client_quotas(self, accepted: list[tuple[Any, dict[str, float | None]]]) -> None:
        quotas = self.broker.quotas
        for entity, changes in accepted:
            quotas.configs.apply(entity, changes)
        quotas.configs.save()
        quotas.changed()

    async def topic_configs(self, name: str) -> tuple[dict[str, str], LogConfig | None]:
        broker = self.broker
        if name not in broker.topics:
            raise UnknownTopicOrPartition(f"topic {name} does not exist")
        return explicit_configs(broker, name), broker.topic_config(name)

    def check_topic_for_config_change(self, name: str) -> None:
        if name not in self.broker.topics:
            raise UnknownTopicOrPartition(f"topic {name} does not exist")

    async def alter_topic_configs(self, name: str, change: Callable[[dict[str, str]], Mapping[str, str]],
                                  validate_only: bool) -> None:
        self.check_topic_for_config_change(name)
        apply(self.broker, name, change(explicit_configs(self.broker, name)), validate_only)

    async def commit_offset_v0(self, group_id: str, topic: str, index: int, offset: int) -> None:
        raise KafkaError("offsets in ZooKeeper need a cluster", ErrorCode.UNSUPPORTED_VERSION)

    async def fetch_offset_v0(self, group_id: str, topic: str, index: int) -> int | None:
        raise KafkaError("offsets in ZooKeeper need a cluster", ErrorCode.UNSUPPORTED_VERSION)

    # ---- topics (the controller's side) ------------------------------------------------
    def admin_time_left(self, timeout_ms: int) -> bool:
        return timeout_ms > 0  # Kafka 4's KRaft controller: no time left changes nothing

    async def create_topic(self, topic: dict, validate_only: bool,
                           timeout_ms: int) -> tuple[uuid.UUID | None, int, int, dict[str, str]]:
        broker = self.broker
        name = topic["name"]
        partitions, configs = self._plan(topic)
        if not validate_only:
            topic_id = broker.create_topic(name, partitions, configs).topic_id
        else:
            topic_id = uuid.uuid4()  # Kafka 4 answers a validated topic with a fresh id too
        return topic_id, partitions, 1, configs

    def _plan(self, topic: dict) -> tuple[int, dict[str, str]]:
        broker = self.broker
        name = topic["name"]
        check_new_topic(name, name in broker.topics)
        assignments = topic.get("assignments") or []
        partitions = topic["num_partitions"]
        replication = topic["replication_factor"]
        if assignments:
            if partitions != -1 or replication != -1:
                raise KafkaError("give either assignments or partitions and replication factor", ErrorCode.INVALID_REQUEST)
            indexes = sorted(a["partition_index"] for a in assignments)
            if indexes != list(range(len(indexes))):
                raise KafkaError("assignments must cover partitions 0..n-1", ErrorCode.INVALID_REPLICA_ASSIGNMENT)
            for a in assignments:
                if a["broker_ids"] != [broker.node_id]:
                    raise KafkaError(f"partition {a['partition_index']} assigned to brokers {a['broker_ids']}; "
                                     f"only broker {broker.node_id} exists", ErrorCode.INVALID_REPLICA_ASSIGNMENT)
            partitions = len(assignments)
        else:
            if partitions == -1:
                partitions = broker.config.get("num.partitions")
            if partitions <= 0:
                raise KafkaError(f"number of partitions must be positive, got {partitions}", ErrorCode.INVALID_PARTITIONS)
            if replication not in (-1, 1):
                raise KafkaError(f"replication factor {replication} is larger than the 1 available broker"
                                 if replication > 1 else f"replication factor must be positive, got {replication}",
                                 ErrorCode.INVALID_REPLICATION_FACTOR)
        configs = new_topic_configs(topic, broker.logs.defaults)
        limit = broker.config.get("trafka.max.partitions")
        if broker.total_partitions() + partitions > limit:
            raise KafkaError(f"{partitions} more partitions would exceed trafka.max.partitions={limit}",
                             ErrorCode.POLICY_VIOLATION)
        return partitions, configs



    async def create_partitions(self, topic: dict, validate_only: bool, timeout_ms: int) -> None:
        self._check_partitions(topic)
        if not validate_only:
            self.broker.create_partitions(topic["name"], topic["count"])

    def _check_partitions(self, topic: dict) -> int:
        """Validate one topic's request; the number of partitions it would add."""
        broker = self.broker
        name = topic["name"]
        meta = broker.topics.get(name)
        if meta is None:
            raise UnknownTopicOrPartition(f"topic {name} does not exist")
        if name in INTERNAL_TOPICS:
            raise InvalidRequest(f"{name} is an internal topic; its partition count cannot change")
        current, count = meta.partitions, topic["count"]
        # Kafka 4.x's (ReplicationControlManager) messages, which kafka-topics --alter prints.
        if count == current:
            raise InvalidPartitions(f"Topic already has {current} partition(s).")
        if count < current:
            raise InvalidPartitions(f"The topic {name} currently has {current} partition(s); {count} would not be an "
                                    f"increase.")
        added = count - current
        assignments = topic.get("assignments")
        if assignments is not None:
            if len(assignments) != added:
                raise KafkaError(f"Attempted to add {added} additional partition(s), but only {len(assignments)} "
                                 f"assignment(s) were specified.", ErrorCode.INVALID_REPLICA_ASSIGNMENT)
            for index, assignment in enumerate(assignments):
                replicas = assignment["broker_ids"]
                if replicas != [broker.node_id]:
                    raise KafkaError(f"assignment of new partition {current + index} is {replicas}; the only broker "
                                     f"is {broker.node_id} and the replication factor is 1",
                                     ErrorCode.INVALID_REPLICA_ASSIGNMENT)
        if added > REQUEST_PARTITION_LIMIT:
            raise PolicyViolation("Excessively large number of additional partitions per request.")
        limit = broker.config.get("trafka.max.partitions")
        if broker.total_partitions() + added > limit:
            raise PolicyViolation(f"{added} more partitions would exceed trafka.max.partitions={limit}")
        return added

    async def delete_topic(self, name: str, timeout_ms: int) -> None:
        self.broker.delete_topic(name)
        await self.broker.groups.forget_topic(name)

    # ---- the controller's requests to this broker -----------------------------------------
    # A single broker has no controller to obey: whatever controller epoch a request carries
    # is not that of this broker's controller, STALE_CONTROLLER_EPOCH, and nothing changes.
    async def leader_and_isr(self, request: dict, version: int) -> tuple[ErrorCode, list[tuple[str, int, ErrorCode]]]:
        return ErrorCode.STALE_CONTROLLER_EPOCH, []

    async def stop_replica(self, request: dict, version: int) -> tuple[ErrorCode, list[tuple[str, int, ErrorCode]]]:
        return ErrorCode.STALE_CONTROLLER_EPOCH, []

    async def update_metadata(self, request: dict, version: int) -> ErrorCode:
        return ErrorCode.STALE_CONTROLLER_EPOCH

    # ---- requests the active controller serves ----------------------------------------------
    # A single broker has no controller: NOT_CONTROLLER, as any Kafka broker but the
    # controller answers them.
    async def alter_partition(self, request: dict, version: int) -> dict:
        raise NotController("a single broker has no controller")

    async def controlled_shutdown(self, broker_id: int, broker_epoch: int) -> tuple[ErrorCode, list[tuple[str, int]]]:
        raise NotController("a single broker has no controller")

    async def list_reassignments(self, request: dict) -> dict:
        # like a one-node Kafka 4, it never moves a partition
        return {"throttle_time_ms": 0, "error_code": ErrorCode.NONE, "error_message": None, "topics": []}

    async def alter_reassignments(self, request: dict) -> dict:
        """As a one-node Kafka 4 (KRaft) controller answers: its partitions can only stay
        where they are, so reassigning one to this broker is done at once, any other
        replica list is INVALID_REPLICA_ASSIGNMENT, a cancel NO_REASSIGNMENT_IN_PROGRESS;
        topics are answered as asked; timeout_ms <= 0 is REQUEST_TIMED_OUT."""
        broker = self.broker
        if request.get("timeout_ms", 60000) <= 0:
            return {"throttle_time_ms": 0, "error_code": ErrorCode.REQUEST_TIMED_OUT, "error_message": None,
                    "responses": [{"name": t["name"], "partitions": [
                        {"partition_index": p["partition_index"], "error_code": ErrorCode.REQUEST_TIMED_OUT,
                         "error_message": None} for p in t["partitions"]]} for t in request["topics"]]}
        responses = []
        for topic in request["topics"]:
            name = topic["name"]
            meta = broker.topics.get(name)
            partitions = []
            for part in topic["partitions"]:
                index, replicas = part["partition_index"], part.get("replicas")
                code, message = ErrorCode.NONE, None
                if meta is None:
                    code, message = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"Unable to find a topic named {name}."
                elif not 0 <= index < meta.partitions:
                    code, message = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"Unable to find partition {name}:{index}."
                elif replicas is None:
                    code = ErrorCode.NO_REASSIGNMENT_IN_PROGRESS
                else:
                    code, message = _check_target(replicas, broker.node_id)
                if code != ErrorCode.NONE:
                    log.info("AlterPartitionReassignments %s-%d to %s: %s (%s)", name, index, replicas,
                             code.name, message)
                partitions.append({"partition_index": index, "error_code": code, "error_message": message})
            responses.append({"name": name, "partitions": partitions})
        # Kafka answers an empty request with error_message "".
        return {"throttle_time_ms": 0, "error_code": ErrorCode.NONE, "error_message": None if responses else "",
                "responses": responses}

    async def elect_leaders(self, asked: list[dict] | None, election_type: int, timeout_ms: int,
                            client_id: str | None) -> dict:
        """Every replica is the preferred one and leads: each existing partition is
        ELECTION_NOT_NEEDED, others UNKNOWN_TOPIC_OR_PARTITION, answered as Kafka 4's KRaft
        controller does: the topics as asked, entry by entry (a partition named twice is
        answered twice); for every partition (None), every topic, its partitions all
        needing no election left out; no time left (timeout_ms <= 0): REQUEST_TIMED_OUT
        for the request and each partition."""
        E = ErrorCode
        topics = self.broker.topics
        if asked is None:
            return {"throttle_time_ms": 0, "error_code": E.NONE,
                    "replica_election_results": [{"topic": name, "partition_result": []} for name in topics]}
        if timeout_ms <= 0:
            return {"throttle_time_ms": 0, "error_code": E.REQUEST_TIMED_OUT, "replica_election_results": [
                {"topic": t["topic"], "partition_result": [
                    {"partition_id": p, "error_code": E.REQUEST_TIMED_OUT, "error_message": None}
                    for p in t["partitions"]]}
                for t in asked]}
        results = []
        for entry in asked:
            meta = topics.get(entry["topic"])
            partitions = []
            for index in entry["partitions"]:
                # a one-node Kafka 4's messages (ReplicationControlManager), which
                # kafka-leader-election prints
                if meta is None:
                    code, message = E.UNKNOWN_TOPIC_OR_PARTITION, f"No such topic as {entry['topic']}"
                elif not 0 <= index < meta.partitions:
                    code, message = E.UNKNOWN_TOPIC_OR_PARTITION, f"No such partition as {entry['topic']}-{index}"
                else:
                    code, message = E.ELECTION_NOT_NEEDED, _ELECTION_NOT_NEEDED
                partitions.append({"partition_id": index, "error_code": code, "error_message": message})
            results.append({"topic": entry["topic"], "partition_result": partitions})
        return {"throttle_time_ms": 0, "error_code": E.NONE, "replica_election_results": results}


def _check_target(target: list[int], node_id: int) -> tuple[ErrorCode, str | None]:
    """Kafka's validateManualPartitionAssignment with this broker the only one registered:
    the broker ids are checked in sorted order, so the message names the lowest offender."""
    if not target:
        return ErrorCode.INVALID_REPLICA_ASSIGNMENT, "The manual partition assignment includes an empty replica list."
    previous = None
    for broker_id in sorted(target):
        if broker_id != node_id:
            return ErrorCode.INVALID_REPLICA_ASSIGNMENT, (f"The manual partition assignment includes broker "
                                                          f"{broker_id}, but no such broker is registered.")
        if broker_id == previous:
            return ErrorCode.INVALID_REPLICA_ASSIGNMENT, (f"The manual partition assignment includes the broker "
                                                          f"{previous} more than once.")
        previous = broker_id
    return ErrorCode.NONE, None
