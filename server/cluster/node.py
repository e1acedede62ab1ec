"""`ClusterNode`: this broker as a member of a ZooKeeper-coordinated cluster.

Why a separate object: on a single broker (no `zookeeper.connect`) none of this exists and
`Broker` behaves exactly as before. In a cluster the node

- registers the broker in ZooKeeper (`/brokers/ids/<id>`, ephemeral; its czxid is the broker
  epoch) and takes part in the controller election (server/cluster/controller.py);
- applies what the controller decides, and nothing else: LeaderAndIsr makes local replicas
  leaders or followers, UpdateMetadata fills the metadata cache clients are answered from,
  StopReplica stops (and deletes) replicas — each checked against the broker epoch and the
  controller epoch (docs/design/replication.md#checks-a-broker-applies) under one state-change lock;
- runs the replica fetchers of the partitions it follows (server/cluster/fetcher.py), the
  ISR shrink check of the partitions it leads, and sends ISR changes to the controller
  (AlterPartition, server/cluster/alter_partition.py);
- tells the coordinators which `__consumer_offsets` / `__transaction_state` /
  `__share_group_state` partitions it now leads (they load them) or no longer leads (they
  unload them), and the share-group leader side which data partitions it stopped leading.
"""

from __future__ import annotations

import logging
import time
import uuid

import trio

from wire.errors import ErrorCode

from server.cluster.metadata_cache import MetadataCache
from server.security.tls import inter_broker_client_options
from server.security.sasl.scram_store import store_of as scram_store_of
from server.errors import KafkaError
from server.startup import StartupError

log = logging.getLogger("trafka.cluster")

E = ErrorCode
OFFSETS_TOPIC = "__consumer_offsets"
TXN_TOPIC = "__transaction_state"
SHARE_STATE_TOPIC = "__share_group_state"


def now_ms() -> int:
    return time.time_ns() // 1_000_000


class ClusterNode:
    def __init__(self, broker) -> None:
        from server.cluster.admin import ClusterAdmin
        from server.cluster.alter_partition import AlterPartitionManager
        from server.cluster.broker_configs import ClusterBrokerConfigs
        from server.cluster.client_quota_configs import ClusterClientQuotas
        from server.cluster.client import BrokerChannels
        from server.cluster.config_manager import TopicConfigManager
        from server.cluster.controller import Controller
        from server.cluster.fetcher import ReplicaFetcherManager
        from server.cluster.producer_ids import ProducerIdBlocks
        from server.cluster.replication_quota import ReplicationQuota
        from server.zookeeper.client import ZooKeeperClient
        from server.cluster.acls import ZkAcls

        self.broker = broker
        self.config = broker.config
        self.node_id = broker.node_id
        self.zk = ZooKeeperClient()
        self.cache = MetadataCache(self.config.inter_broker_listener)
        self.channels = BrokerChannels(**inter_broker_client_options(self.config))
        self.controller = Controller(self)
        # KIP-73 throttles, applied by the fetch handler (leader) and the fetchers (follower).
        self.leader_quota = ReplicationQuota(self.config, self.node_id, "leader.replication.throttled.rate",
                                             "leader.replication.throttled.replicas")
        self.follower_quota = ReplicationQuota(self.config, self.node_id, "follower.replication.throttled.rate",
                                               "follower.replication.throttled.replicas")
        self.fetchers = ReplicaFetcherManager(self)
        self.alter_partition = AlterPartitionManager(self)
        self.admin = ClusterAdmin(self)
        self.producer_ids = ProducerIdBlocks(self.zk, self.node_id)
        broker.producers.blocks = self.producer_ids  # producer ids from ZooKeeper blocks
        self.configs = TopicConfigManager(self)
        self.broker_configs = ClusterBrokerConfigs(self)  # /config/brokers (KIP-226)
        self.client_quotas = ClusterClientQuotas(self)  # /config/users, /config/clients, /config/ips
        self.acls = ZkAcls(self) if broker.authorizer is not None else None  # /kafka-acl
        self.broker_epoch = -1
        self.controller_epoch = 0  # the highest seen (STALE_CONTROLLER_EPOCH below it)
        self.state_lock = trio.Lock()
        self.lag_ms = self.config.get("replica.lag.time.max.ms")
        self.started = False

    # ------------------------------------------------------------------ lifecycle
    def registration(self):
        from server.zookeeper.znodes import BrokerRegistration, EndPoint

        rack = self.config.raw("broker.rack") or None
        listeners = self.config.listener_list
        if not listeners:  # a config made without load_config (tests)
            host, port = self.config.advertised
            return BrokerRegistration(broker_id=self.node_id,
                                      endpoints=(EndPoint("PLAINTEXT", host, port, "PLAINTEXT"),),
                                      rack=rack, host=host, port=port)
        # Every listener, as Kafka's /brokers/ids JSON; host/port mirror the PLAINTEXT one
        # (BrokerRegistration derives them) for clients older than 0.10.
        return BrokerRegistration(broker_id=self.node_id, rack=rack, endpoints=tuple(
            EndPoint(l.name, l.advertised_host, l.advertised_port, l.security_protocol) for l in listeners),
            listener_security_protocol_map={l.name: l.security_protocol for l in listeners})

    async def run(self, task_status=trio.TASK_STATUS_IGNORED) -> None:
        from server.zookeeper.client import ConnectionLoss

        cfg = self.config
        async with self.zk:
            try:
                await self.zk.start(cfg.raw("zookeeper.connect"), cfg.get("zookeeper.session.timeout.ms"))
            except ConnectionLoss as exc:  # Kafka: ZooKeeperClientTimeoutException, the broker exits
                raise StartupError("zookeeper.connect", cfg.raw("zookeeper.connect"), str(exc)) from None
            await self._run_registered(task_status)

    async def _run_registered(self, task_status) -> None:
        try:
            await self.zk.ensure_persistent_paths()
            stored = self.broker.stored_cluster_id()
            cluster_id = await self.zk.get_or_create_cluster_id(stored or _new_cluster_id())
            if stored and stored != cluster_id:
                # Kafka's InconsistentClusterIdException: this data belongs to another cluster.
                raise StartupError("zookeeper.connect", self.config.raw("zookeeper.connect"),
                                   f"ZooKeeper holds cluster {cluster_id}, but log.dirs={self.broker.data_dir} "
                                   f"belongs to cluster {stored} (meta.properties): the broker is trying to join "
                                   "the wrong cluster")
            self.broker.adopt_cluster_id(cluster_id)
            await self.broker_configs.load()  # dynamic broker configs before serving, as Kafka
            await self.client_quotas.load()  # client quotas too
            await self.broker.group_configs.load_cluster()  # and group configs (/config/groups)
            await scram_store_of(self.broker, self.zk).load_all()  # and SCRAM credentials: logins work at once
            if self.acls is not None:
                await self.acls.run()  # the cluster's ACLs before serving, then follow changes
            self.broker_epoch = await self._register()
            log.info("broker %d registered in ZooKeeper (broker epoch %d, cluster %s)", self.node_id,
                     self.broker_epoch, cluster_id)
            async with trio.open_nursery() as nursery:
                await nursery.start(self.controller.run)
                nursery.start_soon(self.fetchers.run)
                nursery.start_soon(self.alter_partition.run)
                nursery.start_soon(self._isr_shrink_loop)
                nursery.start_soon(self._session_loop)
                nursery.start_soon(self.producer_ids.run)
                nursery.start_soon(self.configs.run)  # follows /config/changes
                self.started = True
                task_status.started()
        finally:
            self.channels.close()

    async def _register(self) -> int:
        """Register /brokers/ids/<id>. After a crash the previous process's ephemeral znode
        lives until its session times out; wait for it (twice the session timeout), as a
        restarted Kafka broker would otherwise refuse to start."""
        from server.zookeeper.client import NodeExists

        deadline = trio.current_time() + 2 * self.config.get("zookeeper.session.timeout.ms") / 1000 + 5
        while True:
            try:
                return await self.zk.register_broker(self.registration())
            except NodeExists as exc:
                if trio.current_time() > deadline:
                    raise StartupError("node.id", self.node_id, "another live broker is registered with this id "
                                       f"at {exc.path or '/brokers/ids'} (each broker needs a node.id of its own)"
                                       ) from None
                log.info("%s; waiting for the previous session to expire", exc)
                await trio.sleep(0.5)

    async def _session_loop(self) -> None:
        """After a session expiry: register again (a new broker epoch) and re-elect."""
        from server.zookeeper.client import SessionState

        async for event in self.zk.session_events():
            if event.state == SessionState.NEW_SESSION:
                try:
                    self.broker_epoch = await self.zk.register_broker(self.registration())
                    log.info("broker %d registered again after a session expiry (broker epoch %d)", self.node_id,
                             self.broker_epoch)
                except Exception:
                    log.exception("re-registering broker %d failed", self.node_id)
                await self.controller.session_renewed()
            elif event.state == SessionState.EXPIRED:
                await self.controller.session_lost()

    async def _isr_shrink_loop(self) -> None:
        """Every replica.lag.time.max.ms / 2, each led partition drops followers that have
        not caught up for replica.lag.time.max.ms
        (docs/design/replication.md#isr-shrink-and-expand)."""
        while True:
            await trio.sleep(max(self.lag_ms / 2000, 0.05))
            now = now_ms()
            for partition in list(self.broker.partitions.values()):
                if not partition.is_leader or not partition.followers or partition.pending_isr is not None:
                    continue
                out = partition.out_of_sync_replicas(now, self.lag_ms)
                if out:
                    log.info("%s: followers %s fell behind for %d ms: shrinking the ISR %s", partition.name, out,
                             self.lag_ms, partition.isr)
                    partition.propose_isr([r for r in partition.isr if r not in out])

    async def controlled_shutdown(self, retries: int = 3) -> bool:
        """Ask the controller to move this broker's leaderships away (ControlledShutdown),
        retrying while some remain; True when none is left. The broker stops regardless."""
        from wire.registry import ApiKey

        for attempt in range(retries):
            controller = self.cache.controller_id
            try:
                answer = await self.channels.request(controller, ApiKey.CONTROLLED_SHUTDOWN, 3,
                                                     {"broker_id": self.node_id, "broker_epoch": self.broker_epoch}, 10.0)
            except Exception as exc:
                log.info("controlled shutdown: controller %d unreachable (%r)", controller, exc)
                await trio.sleep(0.5)
                continue
            remaining = answer.get("remaining_partitions") or []
            if answer["error_code"] == E.NONE and not remaining:
                # Wait (briefly) until no local partition still thinks it leads.
                with trio.move_on_after(5):
                    while any(p.is_leader and p.followers for p in self.broker.partitions.values()):
                        await trio.sleep(0.05)
                log.info("controlled shutdown of broker %d complete", self.node_id)
                return True
            log.info("controlled shutdown attempt %d: %s, %d partitions still led here", attempt + 1,
                     ErrorCode(answer["error_code"]).name, len(remaining))
            await trio.sleep(1)
        return False

    # ------------------------------------------------------------------ topics
    async def auto_create_topic(self, name: str) -> None:
        """Metadata/Produce/FindCoordinator for an unknown topic: write it to ZooKeeper and
        return at once (clients retry while it has no leader). A topic ZooKeeper already has
        (this broker's cache is behind, e.g. just after a restart) is left alone."""
        from server.zookeeper import znodes as zn

        if await self.zk.exists(zn.topic_path(name)):
            return
        cfg = self.config
        if name == OFFSETS_TOPIC:
            partitions, rf = self.internal_partitions("offsets.topic.num.partitions"), cfg.get("offsets.topic.replication.factor")
            configs = {"cleanup.policy": "compact", "segment.bytes": "104857600"}
        elif name == TXN_TOPIC:
            partitions, rf = self.internal_partitions("transaction.state.log.num.partitions"), \
                cfg.get("transaction.state.log.replication.factor")
            configs = {"cleanup.policy": "compact", "segment.bytes": str(cfg.get("transaction.state.log.segment.bytes")),
                       "min.insync.replicas": str(cfg.get("transaction.state.log.min.isr"))}
        elif name == SHARE_STATE_TOPIC:
            # Kafka's share coordinator topic: share.coordinator.state.topic.* settings.
            partitions = self.internal_partitions("share.coordinator.state.topic.num.partitions")
            rf = cfg.get("share.coordinator.state.topic.replication.factor")
            configs = {"cleanup.policy": "compact", "segment.bytes": "104857600",
                       "min.insync.replicas": str(cfg.get("share.coordinator.state.topic.min.isr"))}
        else:
            partitions, rf, configs = cfg.get("num.partitions"), cfg.get("default.replication.factor"), {}
        if name in (OFFSETS_TOPIC, TXN_TOPIC, SHARE_STATE_TOPIC):
            # Kafka's rule: an internal topic is not created on fewer live brokers than its
            # replication factor (its coordinators answer COORDINATOR_NOT_AVAILABLE, which
            # clients retry); created smaller, it would stay under-replicated for good.
            live = len(self.cache.brokers)
            if live < rf:
                setting = {OFFSETS_TOPIC: "offsets.topic.replication.factor",
                           TXN_TOPIC: "transaction.state.log.replication.factor"}.get(
                    name, "share.coordinator.state.topic.replication.factor")
                log.warning("not creating %s yet: %d live brokers do not meet %s=%d", name, live, setting, rf)
                return
            if "min.insync.replicas" in configs:
                configs["min.insync.replicas"] = str(min(int(configs["min.insync.replicas"]), rf))
        try:
            await self.admin.create_topic(name, self.admin.plan(partitions, rf), configs, 0)
        except KafkaError as exc:
            if exc.code not in (E.TOPIC_ALREADY_EXISTS, E.REQUEST_TIMED_OUT):
                raise

    def internal_partitions(self, setting: str) -> int:
        """Kafka's default of 50 partitions for the internal topics in a cluster, unless set."""
        if self.config.source(setting) == "default":
            return 50
        return self.config.get(setting)

    # ------------------------------------------------------------------ controller requests
    def _check_epochs(self, request: dict, version: int, min_broker_epoch_version: int) -> ErrorCode:
        broker_epoch = request.get("broker_epoch", -1) if version >= min_broker_epoch_version else -1
        if broker_epoch != -1 and broker_epoch < self.broker_epoch:
            return E.STALE_BROKER_EPOCH
        if request["controller_epoch"] < self.controller_epoch:
            return E.STALE_CONTROLLER_EPOCH
        self.controller_epoch = request["controller_epoch"]
        return E.NONE

    async def leader_and_isr(self, request: dict, version: int) -> tuple[ErrorCode, list[tuple[str, int, ErrorCode]]]:
        """Apply LeaderAndIsr: per partition leader or follower, fenced by epochs."""
        async with self.state_lock:
            code = self._check_epochs(request, version, 2)
            if code != E.NONE:
                log.warning("LeaderAndIsr from controller %d refused: %s", request["controller_id"], code.name)
                return code, []
            if version >= 2:
                states = [(t["topic_name"], t.get("topic_id"), p) for t in request["topic_states"]
                          for p in t["partition_states"]]
            else:
                states = [(p["topic_name"], None, p) for p in request["ungrouped_partition_states"]]
            results: list[tuple[str, int, ErrorCode]] = []
            became_leader: list = []
            became_follower: list = []
            for topic, topic_id, state in states:
                index = state["partition_index"]
                try:
                    code = await self._apply_partition_state(topic, topic_id, state, became_leader, became_follower)
                except Exception as exc:
                    log.exception("LeaderAndIsr for %s-%d failed", topic, index)
                    code = E.KAFKA_STORAGE_ERROR if isinstance(exc, OSError) else E.UNKNOWN_SERVER_ERROR
                results.append((topic, index, code))
            self.fetchers.remove([p for p in became_leader])
            self.fetchers.add(became_follower)
            self._coordinators_follow(became_leader, became_follower)
        return E.NONE, results

    async def _apply_partition_state(self, topic: str, topic_id, state: dict, became_leader: list,
                                     became_follower: list) -> ErrorCode:
        index = state["partition_index"]
        replicas = list(state["replicas"])
        if self.node_id not in replicas:
            return E.UNKNOWN_TOPIC_OR_PARTITION
        partition = self.broker.partitions.get((topic, index))
        epoch = state["leader_epoch"]
        if partition is not None and partition.leader_epoch >= 0 and epoch <= partition.leader_epoch:
            return E.STALE_CONTROLLER_EPOCH
        if partition is None:
            partition = await self.broker.host_partition(topic, topic_id, index, replicas)
        leader = state["leader"]
        if leader == self.node_id:
            partition.make_leader(epoch, list(state["isr"]), replicas, state["partition_epoch"], now_ms())
            partition.on_isr_change = self.alter_partition.submit
            partition.min_isr_default = self.config.get("min.insync.replicas")
            became_leader.append(partition)
            log.info("%s: leader in epoch %d, ISR %s", partition.name, epoch, state["isr"])
        else:
            partition.make_follower(leader, epoch, list(state["isr"]), replicas, state["partition_epoch"])
            partition.on_isr_change = None
            became_follower.append(partition)
            log.info("%s: follower of broker %d in epoch %d", partition.name, leader, epoch)
        return E.NONE

    def _coordinators_follow(self, became_leader: list, became_follower: list) -> None:
        broker = self.broker
        for partition in became_leader:
            if partition.topic == OFFSETS_TOPIC:
                self._spawn_load(broker.groups, partition.index, partition.leader_epoch)
            elif partition.topic == TXN_TOPIC:
                self._spawn_load(broker.txn, partition.index, partition.leader_epoch)
            elif partition.topic == SHARE_STATE_TOPIC:
                self._spawn_load(broker.share.store, partition.index, partition.leader_epoch)
        for partition in became_follower:
            if partition.topic == OFFSETS_TOPIC:
                broker.groups.unload_partition(partition.index, partition.leader_epoch)
                broker.share.groups_unloaded(partition.index)
            elif partition.topic == TXN_TOPIC:
                broker.txn.unload_partition(partition.index, partition.leader_epoch)
            elif partition.topic == SHARE_STATE_TOPIC:
                broker.share.store.unload_partition(partition.index, partition.leader_epoch)
            broker.share.leadership_lost(partition.topic, partition.index)

    def _spawn_load(self, coordinator, index: int, epoch: int) -> None:
        nursery = self.broker.nursery
        if nursery is None:
            log.warning("no nursery to load coordinator partition %d", index)
            return
        nursery.start_soon(coordinator.load_partition, index, epoch)

    async def update_metadata(self, request: dict, version: int) -> ErrorCode:
        async with self.state_lock:
            code = self._check_epochs(request, version, 5)
            if code != E.NONE:
                return code
            deleted = self.cache.update(request, version)
            self.channels.update_endpoints({b.broker_id: (b.host, b.port) for b in self.cache.brokers.values()})
            for topic, index in deleted:
                await self.broker.forget_partition_metadata(topic, index)
            self.fetchers.leaders_changed()
        return E.NONE

    async def stop_replica(self, request: dict, version: int) -> tuple[ErrorCode, list[tuple[str, int, ErrorCode]]]:
        async with self.state_lock:
            code = self._check_epochs(request, version, 1)
            if code != E.NONE:
                return code, []
            items: list[tuple[str, int, int, bool]] = []
            if version >= 3:
                for t in request["topic_states"]:
                    for p in t["partition_states"]:
                        items.append((t["topic_name"], p["partition_index"], p["leader_epoch"], p["delete_partition"]))
            elif version >= 1:
                for t in request["topics"]:
                    for i in t["partition_indexes"]:
                        items.append((t["name"], i, -1, request["delete_partitions"]))
            else:
                for p in request["ungrouped_partitions"]:
                    items.append((p["topic_name"], p["partition_index"], -1, request["delete_partitions"]))
            results = []
            for topic, index, epoch, delete in items:
                partition = self.broker.partitions.get((topic, index))
                if partition is not None and epoch not in (-1, -2) and epoch < partition.leader_epoch:
                    results.append((topic, index, E.FENCED_LEADER_EPOCH))
                    continue
                if partition is not None:
                    self.fetchers.remove([partition])
                    if topic == OFFSETS_TOPIC:
                        self.broker.groups.unload_partition(index, None)
                        self.broker.share.groups_unloaded(index)
                    elif topic == TXN_TOPIC:
                        self.broker.txn.unload_partition(index, None)
                    elif topic == SHARE_STATE_TOPIC:
                        self.broker.share.store.unload_partition(index, None)
                    self.broker.share.leadership_lost(topic, index)
                    if delete:
                        await self.broker.delete_partition(topic, index)
                    else:
                        partition.make_follower(-1, partition.leader_epoch, partition.isr, partition.replicas,
                                                partition.partition_epoch)
                results.append((topic, index, E.NONE))
        return E.NONE, results


def _new_cluster_id() -> str:
    import base64

    return base64.urlsafe_b64encode(uuid.uuid4().bytes).rstrip(b"=").decode()
