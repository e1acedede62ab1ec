"""The controller: one broker, elected through ZooKeeper, decides leaders and ISRs for the
whole cluster (Kafka's ZooKeeper-mode KafkaController;
docs/design/replication.md#controller-election-and-fencing).

How this works
--------------
Every broker runs a `Controller`; the one whose id is in the ephemeral `/controller` znode
is active. Election: a multi-op that creates `/controller` and bumps `/controller_epoch`
expecting its version. The active controller guards every later ZooKeeper write with a check
of that version (KAFKA-6082: a zombie controller that lost its session cannot write), and
stamps its epoch on every request to brokers, which refuse older ones.

Everything the active controller does runs as events, one at a time, from one queue: broker
arrivals and departures (children of `/brokers/ids`), new topics and partitions (children
of `/brokers/topics` and each topic's data), topic deletions (`/admin/delete_topics`),
AlterPartition and ControlledShutdown requests. Each action writes ZooKeeper first (the
partition `state` znode, compare-and-set on its version — the partition epoch), then tells
the brokers: LeaderAndIsr to the replicas concerned, UpdateMetadata to every live broker,
StopReplica where replicas go away. Per broker, requests are sent in order by one task and
re-sent after a connection failure until they are answered or the broker is gone.

Leader election follows Kafka's strategies: for a new partition the first live replica
leads and every live replica is in the ISR; after a leader dies, the first replica in
assignment order that is live and in the ISR; a dead follower leaves the ISR (never emptying
it); every change of leader or ISR made here bumps the leader epoch.

Unclean leader election (docs/design/replication.md#unclean-leader-election): when no ISR
member is alive, the partition
stays offline (leader -1) until one comes back — unless the topic's
`unclean.leader.election.enable` (its /config/topics/<t> override, else the broker setting,
as Kafka's LogConfig resolves it) allows the first live replica outside the ISR to lead,
with ISR = [it]. Whatever that replica never copied is gone; the others truncate to it. The
state znode then says RECOVERING (KIP-704) until the leader's first ISR expansion comes as
RECOVERED. The topic setting is read from ZooKeeper only when such an election is possible,
and turning it on for a topic re-runs the elections of its offline partitions
(Kafka's TopicUncleanLeaderElectionEnable event, queued by the config change notices).
"""

from __future__ import annotations

import logging
import math
import random
from dataclasses import dataclass, field

import trio

from storage.config import parse_value
from storage.errors import InvalidConfig
from wire.errors import ErrorCode
from wire.registry import ApiKey

from server.zookeeper import znodes as zn
from server.cluster.elections import LeaderElections
from server.zookeeper.client import BadVersion, CheckOp, CreateOp, DeleteOp, NodeExists, NoNode, SetDataOp
from server.listeners import SECURITY_PROTOCOL_IDS

log = logging.getLogger("trafka.controller")
E = ErrorCode

LEADER_AND_ISR_VERSION = 4
UPDATE_METADATA_VERSION = 7
STOP_REPLICA_VERSION = 3
_RESEND_BACKOFF_S = 0.1
UNCLEAN = "unclean.leader.election.enable"


class ControllerMoved(Exception):
    """A guarded write found /controller_epoch changed: another controller was elected."""


@dataclass(slots=True)
class LiveBroker:
    broker_id: int
    epoch: int  # czxid of /brokers/ids/<id>
    registration: zn.BrokerRegistration


@dataclass(slots=True)
class ControllerContext:
    """What the active controller knows (reloaded on every failover)."""

    brokers: dict[int, LiveBroker] = field(default_factory=dict)
    shutting_down: set[int] = field(default_factory=set)
    assignments: dict[str, dict[int, list[int]]] = field(default_factory=dict)
    topic_ids: dict[str, object] = field(default_factory=dict)
    states: dict[tuple[str, int], zn.PartitionState] = field(default_factory=dict)
    deleting: set[str] = field(default_factory=set)
    # Partitions being reassigned: (adding, removing) replicas; their RS is in `assignments`.
    reassigning: dict[tuple[str, int], tuple[list[int], list[int]]] = field(default_factory=dict)

    def live(self, broker_id: int) -> bool:
        return broker_id in self.brokers and broker_id not in self.shutting_down

    def partitions(self, topic: str | None = None):
        for t, parts in self.assignments.items():
            if topic is None or t == topic:
                for p in parts:
                    yield t, p


def assign_replicas(brokers: list[tuple[int, str | None]], partitions: int, replication_factor: int,
                    start_partition: int = 0, rng: random.Random | None = None) -> dict[int, list[int]]:
    """Kafka's AdminUtils.assignReplicasToBrokers: leaders spread round-robin from a random
    start, followers shifted so partition replica sets differ. With racks (any broker has
    `broker.rack`; one without counts as rack ""), `_assign_rack_aware`."""
    rng = rng or random.Random()
    if replication_factor > len(brokers):
        raise ValueError(f"replication factor {replication_factor} larger than the {len(brokers)} available brokers")
    if any(rack for _b, rack in brokers):
        return _assign_rack_aware(brokers, partitions, replication_factor, start_partition, rng)
    ids = sorted(b for b, _r in brokers)
    n = len(ids)
    return {p: [ids[first]] + [ids[_replica_index(first, shift, j, n)] for j in range(replication_factor - 1)]
            for p, first, shift in _leader_positions(n, partitions, start_partition, rng)}


def _leader_positions(n: int, partitions: int, start_partition: int, rng: random.Random):
    """(partition, index of its leader in the broker list, follower shift), as both of
    Kafka's assignments walk them: leaders round-robin from a random start, the shift
    (random too) growing by one each time the leaders wrap around the list."""
    start = rng.randrange(n)
    shift = rng.randrange(n)
    for i in range(partitions):
        p = start_partition + i
        if p > 0 and p % n == 0:
            shift += 1
        yield p, (p + start) % n, shift


def _replica_index(first: int, shift: int, j: int, n: int) -> int:
    return (first + 1 + (shift + j) % (n - 1)) % n


def _assign_rack_aware(brokers: list[tuple[int, str | None]], partitions: int, replication_factor: int,
                       start_partition: int, rng: random.Random) -> dict[int, list[int]]:
    """Kafka's assignReplicasToBrokersRackAware: the leader round-robin on the
    rack-alternated broker list, each further replica the next broker (shifted by
    shift × racks) whose rack has no replica yet, until every rack has one; so with
    replicas ≥ racks every rack gets one, otherwise no rack gets two."""
    rack_of = {b: rack or "" for b, rack in brokers}
    racks = len(set(rack_of.values()))
    ids = _rack_alternated(brokers)
    n = len(ids)
    out: dict[int, list[int]] = {}
    for p, first, shift in _leader_positions(n, partitions, start_partition, rng):
        replicas = [ids[first]]
        used_racks = {rack_of[ids[first]]}
        k = 0
        while len(replicas) < replication_factor:
            broker = ids[_replica_index(first, shift * racks, k, n)]
            rack = rack_of[broker]
            if ((rack not in used_racks or len(used_racks) == racks)
                    and (broker not in replicas or len(replicas) == n)):
                replicas.append(broker)
                used_racks.add(rack)
            k += 1
        out[p] = replicas
    return out


def _rack_alternated(brokers: list[tuple[int, str | None]]) -> list[int]:
    """Brokers taken one per rack in turn (racks sorted, brokers by id): rack1's first,
    rack2's first, ..., rack1's second, ... (Kafka's getRackAlternatedBrokerList)."""
    by_rack: dict[str, list[int]] = {}
    for b, rack in sorted(brokers):
        by_rack.setdefault(rack or "", []).append(b)
    racks = sorted(by_rack)
    out = []
    for i in range(max(len(v) for v in by_rack.values())):
        for rack in racks:
            if i < len(by_rack[rack]):
                out.append(by_rack[rack][i])
    return out


class BrokerQueue:
    """Requests to one broker, sent in order by one task; re-sent after a connection
    failure (100 ms apart) until answered or the broker leaves (ControllerChannelManager)."""

    def __init__(self, controller: "Controller", broker_id: int) -> None:
        self.controller = controller
        self.broker_id = broker_id
        self.send, self.receive = trio.open_memory_channel(math.inf)
        self.cancel = trio.CancelScope()

    async def run(self) -> None:
        with self.cancel:
            async for api_key, version, body, on_answer in self.receive:
                while True:
                    try:
                        client = self.controller.channels.client(self.broker_id)
                        answer = await client.request(api_key, version, body, 30.0)
                    except Exception as exc:
                        log.debug("controller → broker %d %s: %r; retrying", self.broker_id, ApiKey(api_key).name, exc)
                        await trio.sleep(_RESEND_BACKOFF_S)
                        continue
                    if on_answer is not None:
                        try:
                            on_answer(answer)
                        except Exception:
                            log.exception("handling the answer of broker %d", self.broker_id)
                    break


class Controller:
    def __init__(self, node) -> None:
        self.node = node
        self.zk = node.zk
        self.broker_id = node.node_id
        self.active = False
        self.epoch = 0
        self.epoch_zk_version = -1
        self.ctx = ControllerContext()
        self.queues: dict[int, BrokerQueue] = {}
        self._events_send, self._events = trio.open_memory_channel(math.inf)
        self._nursery: trio.Nursery | None = None
        self._active_scope: trio.CancelScope | None = None
        self._watches: list = []
        self._topic_watches: dict[str, object] = {}
        self.unclean = node.config.get(UNCLEAN)  # the broker default; a topic's config overrides it
        # Its own connections (Kafka's ControllerChannelManager), apart from the fetchers'.
        from server.cluster.client import BrokerChannels

        from server.security.tls import inter_broker_client_options

        self.inter_broker_listener = node.config.inter_broker_listener
        self.channels = BrokerChannels(client_id=f"controller-{self.broker_id}",
                                       **inter_broker_client_options(node.config))
        self.elections = LeaderElections(self)  # ElectLeaders, preferred-leader balancing
        from server.cluster.reassignment import Reassignments

        self.reassignments = Reassignments(self)

    # ------------------------------------------------------------------ election
    async def run(self, task_status=trio.TASK_STATUS_IGNORED) -> None:
        async with trio.open_nursery() as nursery:
            self._nursery = nursery
            await self.zk.watch_data(zn.CONTROLLER_PATH, self._on_controller_change)
            task_status.started()
            self.enqueue(self._elect)
            async for event in self._events:
                try:
                    await event()
                except ControllerMoved:
                    log.info("controller %d: another controller was elected; resigning", self.broker_id)
                    await self._resign()
                except Exception:
                    log.exception("controller event failed")

    def enqueue(self, event) -> None:
        self._events_send.send_nowait(event)

    def _event(self, handler):
        """A ZooKeeper watch callback that queues `handler` as a controller event."""
        async def callback(_value) -> None:
            self.enqueue(handler)
        return callback

    def _watch(self, watch) -> None:
        self._watches.append(watch)

    async def _on_controller_change(self, _value) -> None:
        self.enqueue(self._elect)

    async def session_lost(self) -> None:
        self.enqueue(self._resign)

    async def session_renewed(self) -> None:
        self.enqueue(self._elect)

    async def _elect(self) -> None:
        found = await self.zk.get(zn.CONTROLLER_PATH)
        if found is not None:
            current = zn.ControllerRegistration.decode(found[0]).broker_id
            if current != self.broker_id and self.active:
                await self._resign()
            if current == self.broker_id and not self.active:
                # Our registration from before (a retried multi): take it as won only if the
                # epoch is ours; otherwise delete it and let the election run again.
                await self.zk.delete(zn.CONTROLLER_PATH)
            return
        epoch_node = await self.zk.get(zn.CONTROLLER_EPOCH_PATH)
        if epoch_node is None:
            try:
                await self.zk.create(zn.CONTROLLER_EPOCH_PATH, zn.encode_controller_epoch(0))
            except NodeExists:
                pass
            epoch_node = await self.zk.get(zn.CONTROLLER_EPOCH_PATH)
        epoch = zn.decode_controller_epoch(epoch_node[0])
        version = epoch_node[1].version
        try:
            results = await self.zk.multi([
                CreateOp(zn.CONTROLLER_PATH, zn.ControllerRegistration(self.broker_id).encode(), ephemeral=True),
                SetDataOp(zn.CONTROLLER_EPOCH_PATH, zn.encode_controller_epoch(epoch + 1), version),
            ])
        except (NodeExists, BadVersion):
            return  # someone else won
        self.epoch = epoch + 1
        self.epoch_zk_version = results[1].version
        self.active = True
        log.info("broker %d is the controller (controller epoch %d)", self.broker_id, self.epoch)
        await self._on_failover()

    async def _resign(self) -> None:
        if not self.active:
            return
        self.active = False
        self.elections.on_resign()
        if self._active_scope is not None:
            self._active_scope.cancel()
        for queue in self.queues.values():
            queue.cancel.cancel()
        self.queues.clear()
        self.channels.update_endpoints({})
        for watch in [*self._watches, *self._topic_watches.values()]:
            watch.cancel()
        self._watches.clear()
        self._topic_watches.clear()
        self.ctx = ControllerContext()
        log.info("broker %d resigned as controller", self.broker_id)

    # ------------------------------------------------------------------ guarded ZooKeeper writes
    async def _write(self, ops: list) -> list:
        """A multi-op guarded by /controller_epoch's version (KAFKA-6082)."""
        try:
            return (await self.zk.multi([CheckOp(zn.CONTROLLER_EPOCH_PATH, self.epoch_zk_version), *ops]))[1:]
        except BadVersion as exc:
            if await self._epoch_moved():
                raise ControllerMoved() from exc
            raise

    async def _epoch_moved(self) -> bool:
        found = await self.zk.get(zn.CONTROLLER_EPOCH_PATH)
        return found is None or found[1].version != self.epoch_zk_version

    # ------------------------------------------------------------------ failover
    async def _on_failover(self) -> None:
        zk = self.zk
        ctx = self.ctx = ControllerContext()
        self._watch(await zk.watch_children(zn.BROKER_IDS_PATH, self._event(self._on_brokers_change)))
        self._watch(await zk.watch_children(zn.TOPICS_PATH, self._event(self._on_topics_change)))
        self._watch(await zk.watch_children(zn.DELETE_TOPICS_PATH, self._event(self._on_delete_topics)))
        for broker_id, broker in (await self._read_brokers()).items():
            ctx.brokers[broker_id] = broker
            self._open_queue(broker_id)
        for topic in await zk.children(zn.TOPICS_PATH):
            await self._load_topic(topic)
        ctx.deleting = set(await zk.children(zn.DELETE_TOPICS_PATH))
        # Brokers learn the live brokers before any LeaderAndIsr (a follower looks its leader up there).
        self._send_update_metadata(list(ctx.brokers), [])
        for tp, state in list(ctx.states.items()):
            replicas = ctx.assignments[tp[0]][tp[1]]
            if state.leader >= 0 and ctx.live(state.leader):
                self._send_leader_and_isr([r for r in replicas if ctx.live(r)], [tp])
        await self._elect_offline(list(ctx.partitions()))
        # Replicas on brokers that are not registered (e.g. the previous controller, gone while
        # nobody was controller) go offline: out of the ISRs (Kafka's failover step 4).
        dead = sorted({r for tp in ctx.partitions() for r in ctx.assignments[tp[0]][tp[1]]} - set(ctx.brokers))
        if dead:
            await self._on_brokers_failure(dead)
        self._send_update_metadata(list(ctx.brokers), list(ctx.states))
        for topic in list(ctx.deleting):
            await self._delete_topic(topic)
        await self.elections.on_failover()
        await self.reassignments.on_failover()

    async def _read_brokers(self) -> dict[int, LiveBroker]:
        out = {}
        for child in await self.zk.children(zn.BROKER_IDS_PATH):
            try:
                broker_id = int(child)
            except ValueError:
                continue
            found = await self.zk.get(zn.broker_path(broker_id))
            if found is None:
                continue
            data, stat = found
            out[broker_id] = LiveBroker(broker_id, stat.czxid, zn.BrokerRegistration.decode(broker_id, data))
        return out

    async def _load_topic(self, topic: str) -> bool:
        found = await self.zk.get(zn.topic_path(topic))
        if found is None:
            return False
        assignment = zn.TopicAssignment.decode(found[0])
        self.ctx.assignments[topic] = {p: list(r) for p, r in assignment.partitions.items()}
        if assignment.topic_id is not None:
            self.ctx.topic_ids[topic] = assignment.topic_id
        for p in set(assignment.adding_replicas) | set(assignment.removing_replicas):
            self.ctx.reassigning[(topic, p)] = (list(assignment.adding_replicas.get(p, [])),
                                                list(assignment.removing_replicas.get(p, [])))
        for p in assignment.partitions:
            state = await self.zk.get(zn.partition_state_path(topic, p))
            if state is not None:
                self.ctx.states[(topic, p)] = zn.PartitionState.decode(state[0], state[1].version)
        if topic not in self._topic_watches:
            self._topic_watches[topic] = await self.zk.watch_data(
                zn.topic_path(topic), self._event(lambda: self._on_topic_data(topic)))
        return True

    def _open_queue(self, broker_id: int) -> None:
        if broker_id in self.queues or self._nursery is None:
            return
        queue = self.queues[broker_id] = BrokerQueue(self, broker_id)
        self._nursery.start_soon(queue.run)

    def _close_queue(self, broker_id: int) -> None:
        queue = self.queues.pop(broker_id, None)
        if queue is not None:
            queue.cancel.cancel()

    # ------------------------------------------------------------------ requests to brokers
    def _inter_broker_address(self, registration) -> tuple[str, int]:
        """Where a broker is reached by other brokers: its endpoint of the inter-broker
        listener (the same name on every broker, as Kafka requires), else host/port."""
        endpoint = registration.endpoint(self.inter_broker_listener)
        return (endpoint.host, endpoint.port) if endpoint is not None else (registration.host, registration.port)

    def _endpoints(self) -> None:
        self.channels.update_endpoints({b: self._inter_broker_address(lb.registration)
                                        for b, lb in self.ctx.brokers.items()})

    def _send(self, broker_id: int, api_key: int, version: int, body: dict, on_answer=None) -> None:
        queue = self.queues.get(broker_id)
        if queue is None:
            return
        self._endpoints()
        queue.send.send_nowait((api_key, version, body, on_answer))

    def _partition_state_body(self, tp: tuple[str, int], state: zn.PartitionState, is_new: bool = False) -> dict:
        return {"partition_index": tp[1], "controller_epoch": state.controller_epoch, "leader": state.leader,
                "leader_epoch": state.leader_epoch, "isr": list(state.isr), "partition_epoch": state.zk_version,
                "replicas": list(self.ctx.assignments[tp[0]][tp[1]]),
                "adding_replicas": list(self.ctx.reassigning.get(tp, ([], []))[0]),
                "removing_replicas": list(self.ctx.reassigning.get(tp, ([], []))[1]), "is_new": is_new, "leader_recovery_state": state.leader_recovery_state}

    def _send_leader_and_isr(self, brokers: list[int], tps: list[tuple[str, int]], is_new: bool = False) -> None:
        for broker_id in brokers:
            by_topic: dict[str, list[dict]] = {}
            for tp in tps:
                state = self.ctx.states.get(tp)
                if state is None or broker_id not in self.ctx.assignments.get(tp[0], {}).get(tp[1], []):
                    continue
                by_topic.setdefault(tp[0], []).append(self._partition_state_body(tp, state, is_new))
            if not by_topic:
                continue
            leaders = {self.ctx.states[tp].leader for tp in tps if tp in self.ctx.states}
            body = {"controller_id": self.broker_id, "controller_epoch": self.epoch,
                    "broker_epoch": self.ctx.brokers[broker_id].epoch if broker_id in self.ctx.brokers else -1,
                    "type": 0,
                    "topic_states": [{"topic_name": t, "topic_id": self.ctx.topic_ids.get(t), "partition_states": ps}
                                     for t, ps in by_topic.items()],
                    "live_leaders": [dict(zip(("broker_id", "host_name", "port"),
                                              (b, *self._inter_broker_address(self.ctx.brokers[b].registration))))
                                     for b in sorted(leaders) if b in self.ctx.brokers]}
            self._send(broker_id, ApiKey.LEADER_AND_ISR, LEADER_AND_ISR_VERSION, body,
                       lambda answer, b=broker_id: self._on_leader_and_isr_answer(b, answer))

    def _on_leader_and_isr_answer(self, broker_id: int, answer: dict) -> None:
        if answer["error_code"] != E.NONE:
            log.warning("LeaderAndIsr to broker %d: %s", broker_id, ErrorCode(answer["error_code"]).name)

    def _send_update_metadata(self, brokers: list[int], tps: list[tuple[str, int]],
                              deleting: list[tuple[str, int]] | None = None) -> None:
        ctx = self.ctx
        by_topic: dict[str, list[dict]] = {}
        for tp in tps:
            state = ctx.states.get(tp)
            replicas = ctx.assignments.get(tp[0], {}).get(tp[1])
            if state is None or replicas is None:
                continue
            leader = state.leader if ctx.live(state.leader) or state.leader < 0 else -1
            by_topic.setdefault(tp[0], []).append({
                "partition_index": tp[1], "controller_epoch": state.controller_epoch, "leader": leader,
                "leader_epoch": state.leader_epoch, "isr": list(state.isr), "zk_version": state.zk_version,
                "replicas": list(replicas), "offline_replicas": [r for r in replicas if not ctx.live(r)]})
        for topic, index in deleting or ():
            by_topic.setdefault(topic, []).append({
                "partition_index": index, "controller_epoch": self.epoch, "leader": -2, "leader_epoch": -2,
                "isr": [], "zk_version": 0, "replicas": [], "offline_replicas": []})
        # every listener of every broker: each broker answers Metadata with the addresses
        # of the listener its client came in on
        live = [{"id": b, "endpoints": [{"port": e.port, "host": e.host, "listener": e.listener_name,
                                         "security_protocol": SECURITY_PROTOCOL_IDS.get(e.security_protocol, 0)}
                                        for e in lb.registration.endpoints],
                 "rack": lb.registration.rack} for b, lb in sorted(ctx.brokers.items())]
        for broker_id in brokers:
            if broker_id not in ctx.brokers:
                continue
            body = {"controller_id": self.broker_id, "controller_epoch": self.epoch,
                    "broker_epoch": ctx.brokers[broker_id].epoch, "type": 0,
                    "topic_states": [{"topic_name": t, "topic_id": ctx.topic_ids.get(t), "partition_states": ps}
                                     for t, ps in by_topic.items()],
                    "live_brokers": live}
            self._send(broker_id, ApiKey.UPDATE_METADATA, UPDATE_METADATA_VERSION, body)

    def _send_stop_replica(self, broker_id: int, tps: list[tuple[str, int]], delete: bool) -> None:
        by_topic: dict[str, list[dict]] = {}
        for topic, index in tps:
            epoch = -2 if delete else self.ctx.states.get((topic, index), zn.PartitionState(-1, -1, [], 0)).leader_epoch
            by_topic.setdefault(topic, []).append({"partition_index": index, "leader_epoch": epoch,
                                                   "delete_partition": delete})
        body = {"controller_id": self.broker_id, "controller_epoch": self.epoch,
                "broker_epoch": self.ctx.brokers[broker_id].epoch if broker_id in self.ctx.brokers else -1,
                "topic_states": [{"topic_name": t, "partition_states": ps} for t, ps in by_topic.items()]}
        self._send(broker_id, ApiKey.STOP_REPLICA, STOP_REPLICA_VERSION, body)

    # ------------------------------------------------------------------ partition states
    async def _write_state(self, tp: tuple[str, int], state: zn.PartitionState, create: bool = False) -> zn.PartitionState:
        path = zn.partition_state_path(*tp)
        if create:
            parents = []
            if not await self.zk.exists(zn.topic_partitions_path(tp[0])):
                parents.append(CreateOp(zn.topic_partitions_path(tp[0])))
            if not await self.zk.exists(zn.partition_path(*tp)):
                parents.append(CreateOp(zn.partition_path(*tp)))
            await self._write([*parents, CreateOp(path, state.encode())])
            version = 0
        else:
            results = await self._write([SetDataOp(path, state.encode(), self.ctx.states[tp].zk_version)])
            version = results[0].version
        new = zn.PartitionState(state.leader, state.leader_epoch, list(state.isr), self.epoch,
                                state.leader_recovery_state, version)
        self.ctx.states[tp] = new
        return new

    async def _elect_offline(self, tps: list[tuple[str, int]]) -> list[tuple[str, int]]:
        """New partitions and partitions without a live leader get one (offline election).
        Returns those whose state changed; sends LeaderAndIsr for them."""
        ctx = self.ctx
        changed = []
        for tp in tps:
            if tp[0] in ctx.deleting:
                continue
            replicas = ctx.assignments[tp[0]][tp[1]]
            state = ctx.states.get(tp)
            live = [r for r in replicas if ctx.live(r)]
            try:
                if state is None:
                    if not live:
                        continue
                    new = zn.PartitionState(live[0], 0, live, self.epoch)
                    await self._write_state(tp, new, create=True)
                    self._send_leader_and_isr(live, [tp], is_new=True)
                    changed.append(tp)
                elif state.leader < 0 or not ctx.live(state.leader):
                    leader = next((r for r in replicas if ctx.live(r) and r in state.isr), None)
                    isr = [r for r in state.isr if ctx.live(r)]
                    # A clean election keeps the recovery state (a RECOVERING leader may die too).
                    recovery = state.leader_recovery_state
                    if leader is None and live and await self._unclean_allowed(tp[0]):
                        leader, isr, recovery = live[0], [live[0]], zn.LEADER_RECOVERING
                        log.warning("%s-%d: unclean leader election of broker %d, outside the ISR %s: records "
                                    "the ISR had and it lacks are lost (unclean.leader.election.enable)",
                                    tp[0], tp[1], leader, state.isr)
                    if leader is None:
                        if state.leader != -1:
                            # Nobody to lead: record it (the ISR keeps its last members).
                            await self._write_state(tp, zn.PartitionState(-1, state.leader_epoch + 1, state.isr,
                                                                          self.epoch, recovery))
                            changed.append(tp)
                        log.warning("%s-%d: no live replica in the ISR %s; offline", tp[0], tp[1], state.isr)
                        continue
                    await self._write_state(tp, zn.PartitionState(leader, state.leader_epoch + 1, isr, self.epoch,
                                                                  recovery))
                    self._send_leader_and_isr(live, [tp])
                    changed.append(tp)
            except (BadVersion, NoNode, NodeExists):
                await self._reload_state(tp)
        return changed

    async def _unclean_allowed(self, topic: str) -> bool:
        """The topic's `unclean.leader.election.enable`: its override in /config/topics/<t>
        if it has one, else the broker's setting (read at each election, like Kafka's
        controller, so a change needs no cache to follow)."""
        found = await self.zk.get(zn.topic_config_path(topic))
        value = zn.decode_entity_config(found[0] if found else None).get(UNCLEAN)
        if value is None:
            return bool(self.unclean)
        try:
            return bool(parse_value(UNCLEAN, value))
        except InvalidConfig:
            log.warning("topic %s: %s=%r is not a boolean; using the broker's %s", topic, UNCLEAN, value, self.unclean)
            return bool(self.unclean)

    def enable_topic_unclean_election(self, topic: str) -> None:
        """The topic's config now allows unclean elections (a config change notice said so):
        its offline partitions get a leader if any replica is alive (Kafka's
        TopicUncleanLeaderElectionEnable). Nothing happens on a broker that is not controller."""
        if self.active:
            self.enqueue(lambda: self._on_topic_unclean_enabled(topic))

    async def _on_topic_unclean_enabled(self, topic: str) -> None:
        if not self.active or topic not in self.ctx.assignments:
            return
        changed = await self._elect_offline(list(self.ctx.partitions(topic)))
        if changed:
            self._send_update_metadata(list(self.ctx.brokers), changed)

    async def _reload_state(self, tp: tuple[str, int]) -> None:
        found = await self.zk.get(zn.partition_state_path(*tp))
        if found is not None:
            self.ctx.states[tp] = zn.PartitionState.decode(found[0], found[1].version)

    # ------------------------------------------------------------------ events
    async def _on_brokers_change(self) -> None:
        if not self.active:
            return
        ctx = self.ctx
        current = await self._read_brokers()
        dead = [b for b in ctx.brokers if b not in current or current[b].epoch != ctx.brokers[b].epoch]
        new = [b for b in current if b not in ctx.brokers or current[b].epoch != ctx.brokers[b].epoch]
        if not dead and not new:
            return
        for b in dead:
            log.info("controller: broker %d left", b)
            del ctx.brokers[b]
            ctx.shutting_down.discard(b)
            self._close_queue(b)
        for b in new:
            log.info("controller: broker %d joined (epoch %d)", b, current[b].epoch)
            ctx.brokers[b] = current[b]
            self._open_queue(b)
        self._endpoints()
        if dead:
            await self._on_brokers_failure(dead)
        if new:
            others = [b for b in ctx.brokers if b not in new]
            self._send_update_metadata(others, [])
            self._send_update_metadata(new, list(ctx.states))
            for b in new:
                hosted = [tp for tp in ctx.partitions() if b in ctx.assignments[tp[0]][tp[1]] and tp in ctx.states]
                self._send_leader_and_isr([b], hosted)
            changed = await self._elect_offline(list(ctx.partitions()))
            if changed:
                self._send_update_metadata(list(ctx.brokers), changed)

    async def _on_brokers_failure(self, dead: list[int]) -> None:
        ctx = self.ctx
        led = [tp for tp, s in ctx.states.items() if s.leader in dead]
        changed = await self._elect_offline(led)
        # Followers on dead brokers leave the ISR (never emptying it), epoch bumped.
        for tp, state in list(ctx.states.items()):
            gone = [r for r in state.isr if r in dead]
            if not gone or state.leader in dead or state.leader < 0:
                continue
            isr = [r for r in state.isr if r not in dead] or state.isr
            if isr == state.isr:
                continue
            try:
                await self._write_state(tp, zn.PartitionState(state.leader, state.leader_epoch + 1, isr, self.epoch))
            except (BadVersion, NoNode):
                await self._reload_state(tp)
                continue
            replicas = ctx.assignments[tp[0]][tp[1]]
            self._send_leader_and_isr([r for r in replicas if ctx.live(r)], [tp])
            changed.append(tp)
        self._send_update_metadata(list(ctx.brokers), changed)

    async def _on_topics_change(self) -> None:
        if not self.active:
            return
        ctx = self.ctx
        topics = set(await self.zk.children(zn.TOPICS_PATH))
        for topic in sorted(topics - set(ctx.assignments)):
            if await self._load_topic(topic):
                log.info("controller: new topic %s", topic)
                await self._new_partitions([(topic, p) for p in ctx.assignments[topic]])
        for topic in set(ctx.assignments) - topics:
            self._forget_topic(topic)

    async def _on_topic_data(self, topic: str) -> None:
        """A topic's assignment changed: CreatePartitions added partitions."""
        if not self.active or topic not in self.ctx.assignments:
            return
        found = await self.zk.get(zn.topic_path(topic))
        if found is None:
            return
        assignment = zn.TopicAssignment.decode(found[0])
        known = self.ctx.assignments[topic]
        added = [p for p in assignment.partitions if p not in known]
        for p in added:
            known[p] = list(assignment.partitions[p])
        if added:
            log.info("controller: topic %s got partitions %s", topic, added)
            await self._new_partitions([(topic, p) for p in added])

    async def _new_partitions(self, tps: list[tuple[str, int]]) -> None:
        changed = await self._elect_offline(tps)
        self._send_update_metadata(list(self.ctx.brokers), changed)

    def _forget_topic(self, topic: str) -> None:
        ctx = self.ctx
        watch = self._topic_watches.pop(topic, None)
        if watch is not None:
            watch.cancel()
        for p in list(ctx.assignments.get(topic, {})):
            ctx.states.pop((topic, p), None)
            ctx.reassigning.pop((topic, p), None)
        ctx.assignments.pop(topic, None)
        ctx.topic_ids.pop(topic, None)
        ctx.deleting.discard(topic)

    async def _on_delete_topics(self) -> None:
        if not self.active:
            return
        for topic in await self.zk.children(zn.DELETE_TOPICS_PATH):
            await self._delete_topic(topic)

    async def _delete_topic(self, topic: str) -> None:
        """TopicDeletionManager, in one step: brokers drop the partitions from their caches
        (leader -2), replicas are stopped and deleted, then the znodes go."""
        ctx = self.ctx
        if topic not in ctx.assignments:
            try:
                await self._write([DeleteOp(zn.delete_topic_path(topic))])
            except NoNode:
                pass
            return
        ctx.deleting.add(topic)
        tps = list(ctx.partitions(topic))
        self._send_update_metadata(list(ctx.brokers), [], deleting=tps)
        for b in ctx.brokers:
            hosted = [tp for tp in tps if b in ctx.assignments[topic][tp[1]]]
            if hosted:
                self._send_stop_replica(b, hosted, delete=True)
        for path in ([zn.partition_state_path(topic, p) for _t, p in tps] + [zn.partition_path(topic, p) for _t, p in tps]
                     + [zn.topic_partitions_path(topic), zn.topic_path(topic), zn.topic_config_path(topic),
                        zn.delete_topic_path(topic)]):
            try:
                await self._write([DeleteOp(path)])
            except NoNode:
                pass
        self._forget_topic(topic)
        log.info("controller: topic %s deleted", topic)

    # ------------------------------------------------------------------ AlterPartition
    async def alter_partition(self, request: dict, version: int) -> dict:
        """Run on the controller's queue; the answer is what the handler returns."""
        done = trio.Event()
        out: dict = {}

        async def event() -> None:
            try:
                out.update(await self._alter_partition(request, version))
            finally:
                done.set()

        self.enqueue(event)
        await done.wait()
        return out

    async def _alter_partition(self, request: dict, version: int) -> dict:
        ctx = self.ctx
        if not self.active:
            return {"throttle_time_ms": 0, "error_code": E.NOT_CONTROLLER, "topics": []}
        broker = ctx.brokers.get(request["broker_id"])
        if broker is None or broker.epoch != request["broker_epoch"]:
            return {"throttle_time_ms": 0, "error_code": E.STALE_BROKER_EPOCH, "topics": []}
        topics = []
        changed = []
        for t in request["topics"]:
            name = t.get("topic_name")
            if version >= 2:
                name = next((n for n, i in ctx.topic_ids.items() if i == t.get("topic_id")), None)
            answers = []
            for p in t["partitions"]:
                index = p["partition_index"]
                new_isr = p["new_isr"] if version < 3 else [e["broker_id"] for e in p["new_isr_with_epochs"]]
                recovery = p.get("leader_recovery_state", zn.LEADER_RECOVERED) if version >= 1 else None
                code, state = await self._alter_one(name, index, request["broker_id"], p["leader_epoch"],
                                                    p["partition_epoch"], new_isr, version, recovery)
                if code == E.NONE and state is not None:
                    changed.append((name, index))
                answer = {"partition_index": index, "error_code": code, "leader_id": -1, "leader_epoch": -1,
                          "isr": [], "leader_recovery_state": 0, "partition_epoch": -1}
                if code == E.NONE and state is not None:
                    answer.update(leader_id=state.leader, leader_epoch=state.leader_epoch, isr=list(state.isr),
                                  partition_epoch=state.zk_version, leader_recovery_state=state.leader_recovery_state)
                answers.append(answer)
            topics.append({"topic_name": t.get("topic_name"), "topic_id": t.get("topic_id"), "partitions": answers})
        if changed:
            self._send_update_metadata(list(ctx.brokers), changed)
            self.reassignments.isr_changed(changed)
        return {"throttle_time_ms": 0, "error_code": E.NONE, "topics": topics}

    async def _alter_one(self, topic: str | None, index: int, leader: int, leader_epoch: int, partition_epoch: int,
                         new_isr: list[int], version: int, recovery: int | None = None):
        """One partition of an AlterPartition. `recovery` is the leader recovery state the
        leader asks for (v1+, KIP-704; None = keep): a leader elected uncleanly (RECOVERING)
        reports RECOVERED with its first ISR expansion; RECOVERING with more than one ISR
        member, or going back from RECOVERED to RECOVERING, is refused (Kafka's
        KafkaController.processAlterPartition)."""
        ctx = self.ctx
        if topic is None:
            return E.UNKNOWN_TOPIC_ID, None
        state = ctx.states.get((topic, index))
        if state is None:
            return E.UNKNOWN_TOPIC_OR_PARTITION, None
        if leader_epoch > state.leader_epoch or partition_epoch > state.zk_version:
            return E.NOT_CONTROLLER, None
        if leader_epoch < state.leader_epoch:
            return E.FENCED_LEADER_EPOCH, None
        if recovery is None:
            recovery = state.leader_recovery_state
        if recovery == zn.LEADER_RECOVERING and (len(new_isr) > 1 or state.leader_recovery_state
                                                 == zn.LEADER_RECOVERED):
            log.warning("controller: %s-%d: AlterPartition asks for RECOVERING with ISR %s (now %s); refused",
                        topic, index, new_isr, "RECOVERING" if state.leader_recovery_state else "RECOVERED")
            return E.INVALID_REQUEST, None
        if sorted(new_isr) == sorted(state.isr) and recovery == state.leader_recovery_state:
            return E.NONE, state  # already so (KAFKA-14144)
        if partition_epoch < state.zk_version:
            return E.INVALID_UPDATE_VERSION, None
        if any(not ctx.live(r) for r in new_isr) or leader not in new_isr:
            return (E.INELIGIBLE_REPLICA if version >= 2 else E.OPERATION_NOT_ATTEMPTED), None
        try:
            new = await self._write_state((topic, index), zn.PartitionState(state.leader, state.leader_epoch,
                                                                           list(new_isr), self.epoch, recovery))
        except BadVersion:
            await self._reload_state((topic, index))
            return E.INVALID_UPDATE_VERSION, None
        log.info("controller: %s-%d ISR %s -> %s", topic, index, state.isr, new.isr)
        if new.leader_recovery_state != state.leader_recovery_state:
            log.info("controller: %s-%d leader recovered (KIP-704)", topic, index)
        return E.NONE, new

    # ------------------------------------------------------------------ ControlledShutdown
    async def controlled_shutdown(self, broker_id: int, broker_epoch: int) -> tuple[ErrorCode, list[tuple[str, int]]]:
        done = trio.Event()
        out: list = [E.NOT_CONTROLLER, []]

        async def event() -> None:
            try:
                out[:] = await self._controlled_shutdown(broker_id, broker_epoch)
            finally:
                done.set()

        self.enqueue(event)
        await done.wait()
        return out[0], out[1]

    async def _controlled_shutdown(self, broker_id: int, broker_epoch: int):
        ctx = self.ctx
        if not self.active:
            return [E.NOT_CONTROLLER, []]
        broker = ctx.brokers.get(broker_id)
        if broker is None:
            return [E.BROKER_NOT_AVAILABLE, []]
        if broker_epoch != -1 and broker_epoch < broker.epoch:
            return [E.STALE_BROKER_EPOCH, []]
        ctx.shutting_down.add(broker_id)
        changed = []
        remaining = []
        for tp, state in list(ctx.states.items()):
            replicas = ctx.assignments[tp[0]][tp[1]]
            if broker_id not in replicas or len(replicas) <= 1:
                continue
            if state.leader == broker_id:
                leader = next((r for r in replicas if r in state.isr and ctx.live(r)), None)
                if leader is None:
                    remaining.append(tp)
                    continue
                isr = [r for r in state.isr if r != broker_id]
                try:
                    await self._write_state(tp, zn.PartitionState(leader, state.leader_epoch + 1, isr, self.epoch))
                except BadVersion:
                    await self._reload_state(tp)
                    remaining.append(tp)
                    continue
                self._send_leader_and_isr([r for r in replicas if r in ctx.brokers], [tp])
                changed.append(tp)
            elif broker_id in state.isr and len(state.isr) > 1:
                isr = [r for r in state.isr if r != broker_id]
                try:
                    await self._write_state(tp, zn.PartitionState(state.leader, state.leader_epoch + 1, isr,
                                                                  self.epoch))
                except BadVersion:
                    await self._reload_state(tp)
                    continue
                self._send_leader_and_isr([r for r in replicas if r in ctx.brokers and r != broker_id], [tp])
                changed.append(tp)
        if changed:
            self._send_update_metadata(list(ctx.brokers), changed)
        log.info("controller: controlled shutdown of broker %d moved %d partitions, %d remain", broker_id, len(changed),
                 len(remaining))
        return [E.NONE, remaining]
