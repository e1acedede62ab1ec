"""Leader elections asked for, not forced by a failure: ElectLeaders (KIP-460), the older
`/admin/preferred_replica_election` znode, and the controller's own preferred-leader
balancing (`auto.leader.rebalance.enable`). Kafka's KafkaController.processReplicaLeaderElection,
onReplicaElection and checkAndTriggerAutoLeaderRebalance
(docs/design/replication.md#requested-elections).

How this works
--------------
The preferred replica of a partition is the first of its assignment. After a broker
restarts, the partitions it led are led elsewhere until something moves them back; that
is a *preferred election*: the preferred replica leads if it is live and in the ISR (the ISR
stays as it is, the leader epoch goes up), else PREFERRED_LEADER_NOT_AVAILABLE.

An *unclean* ElectLeaders is for partitions without a live leader: the first live ISR
member leads, and if there is none the first live replica outside the ISR does, with ISR =
[it] and the state RECOVERING (KIP-704). An admin asking for it is the permission:
Kafka's controller uses OfflinePartitionLeaderElectionStrategy(allowUnclean = true) for
an admin-triggered UNCLEAN election whatever the topic's unclean.leader.election.enable
says. A partition whose leader is live needs no election (ELECTION_NOT_NEEDED), for
either type.

Every election runs as a controller event (one at a time with the rest), writes the
partition's state znode with compare-and-set on its version like the other elections,
and sends LeaderAndIsr to the live replicas and UpdateMetadata to every live broker. The
ElectLeaders handler then waits, up to the request's timeout, for this broker's metadata
cache to show the new leaders (Kafka's DelayedElectLeader; REQUEST_TIMED_OUT otherwise).

Balancing: every `leader.imbalance.check.interval.seconds` (first 5 s after becoming
controller, as Kafka), for each broker, the share of the partitions it is preferred for
that another broker leads; above `leader.imbalance.per.broker.percentage` percent, those
whose preferred replica could lead get a preferred election.
"""

from __future__ import annotations

import logging

import trio

from wire.errors import ErrorCode

from server.zookeeper import znodes as zn
from server.zookeeper.client import BadVersion, DeleteOp, NodeExists, NoNode

log = logging.getLogger("trafka.controller")
E = ErrorCode

PREFERRED = 0  # Kafka's ElectionType.PREFERRED
UNCLEAN = 1  # ElectionType.UNCLEAN
ELECTION_TYPES = {PREFERRED: "PREFERRED", UNCLEAN: "UNCLEAN"}
FIRST_CHECK_DELAY_S = 5.0  # KafkaController.onControllerFailover: scheduleAutoLeaderRebalanceTask(delay = 5 s)
_ATTEMPTS = 3  # compare-and-set retries after the state znode moved under us

TopicPartition = tuple[str, int]
Result = tuple[ErrorCode, str | None]


class LeaderElections:
    """The controller's requested elections; `controller.elections`."""

    def __init__(self, controller) -> None:
        self.controller = controller
        config = controller.node.config
        self.rebalance_enabled = bool(config.get("auto.leader.rebalance.enable"))
        self.check_interval_s = float(config.get("leader.imbalance.check.interval.seconds"))
        self.imbalance_percentage = float(config.get("leader.imbalance.per.broker.percentage"))
        self._scope: trio.CancelScope | None = None
        self._watch = None

    # ------------------------------------------------------------------ controller lifecycle
    async def on_failover(self) -> None:
        """Called at the end of the controller's failover: pending znode-requested
        elections run (the watch fires at once when the znode exists) and balancing starts."""
        c = self.controller
        self._watch = await c.zk.watch_data(zn.PREFERRED_REPLICA_ELECTION_PATH, self._on_znode)
        if self.rebalance_enabled and c._nursery is not None:
            self._scope = trio.CancelScope()
            c._nursery.start_soon(self._rebalance_loop, self._scope)

    def on_resign(self) -> None:
        if self._scope is not None:
            self._scope.cancel()
            self._scope = None
        if self._watch is not None:
            self._watch.cancel()
            self._watch = None

    # ------------------------------------------------------------------ ElectLeaders
    async def elect_leaders(self, tps: list[TopicPartition] | None, election_type: int,
                            timeout_s: float) -> dict[TopicPartition, Result]:
        """ElectLeaders on the controller: every partition asked for (None: all of them)
        with its result. Partitions elected here are answered once this broker's metadata
        shows their new leader, or REQUEST_TIMED_OUT after `timeout_s`."""
        done = trio.Event()
        out: dict[TopicPartition, Result] = {}
        elected: dict[TopicPartition, int] = {}
        asked = None if tps is None else list(dict.fromkeys(tps))

        async def event() -> None:
            try:
                c = self.controller
                if not c.active:
                    return
                wanted = asked if asked is not None else list(c.ctx.partitions())
                out.update(await self._elect(wanted, election_type, "ElectLeaders", elected))
            finally:
                done.set()

        self.controller.enqueue(event)
        await done.wait()
        for tp in asked or ():  # not (or no longer) the controller when the event ran
            out.setdefault(tp, (E.NOT_CONTROLLER, None))
        cache = self.controller.node.cache
        with trio.move_on_after(max(0.0, timeout_s)):
            while any(_cached_leader(cache, tp) != leader for tp, leader in elected.items()):
                await trio.sleep(0.05)
        for tp, leader in elected.items():
            if _cached_leader(cache, tp) != leader:
                out[tp] = (E.REQUEST_TIMED_OUT, None)
        return out

    async def _elect(self, tps: list[TopicPartition], election_type: int, trigger: str,
                     elected: dict[TopicPartition, int] | None = None) -> dict[TopicPartition, Result]:
        """Kafka's processReplicaLeaderElection: unknown partitions, topics being deleted and
        partitions that already have the right leader are answered without an election; the
        rest are elected and the brokers told."""
        c = self.controller
        ctx = c.ctx
        results: dict[TopicPartition, Result] = {}
        electable = []
        for tp in tps:
            replicas = ctx.assignments.get(tp[0], {}).get(tp[1])
            state = ctx.states.get(tp)
            if replicas is None or state is None:
                log.info("controller: skipping %s election of %s-%d (%s): the partition does not exist",
                         ELECTION_TYPES[election_type], tp[0], tp[1], trigger)
                results[tp] = (E.UNKNOWN_TOPIC_OR_PARTITION, "The partition does not exist.")
            elif tp[0] in ctx.deleting:
                results[tp] = (E.INVALID_TOPIC_EXCEPTION, "The topic is being deleted")
            elif (state.leader == replicas[0] if election_type == PREFERRED
                  else state.leader >= 0 and ctx.live(state.leader)):
                results[tp] = (E.ELECTION_NOT_NEEDED, "Leader election not needed for topic partition.")
            else:
                electable.append(tp)
        if electable:
            log.info("controller: %s leader election for %s (%s)", ELECTION_TYPES[election_type],
                     ", ".join(f"{t}-{p}" for t, p in electable), trigger)
        changed = []
        for tp in electable:
            code, message = await self._elect_one(tp, election_type)
            results[tp] = (code, message)
            if code == E.NONE:
                changed.append(tp)
                if elected is not None:
                    elected[tp] = ctx.states[tp].leader
            else:
                log.warning("controller: %s election of %s-%d (%s): %s", ELECTION_TYPES[election_type], tp[0], tp[1],
                            trigger, message)
        if changed:
            c._send_update_metadata(list(ctx.brokers), changed)
        return results

    async def _elect_one(self, tp: TopicPartition, election_type: int) -> Result:
        c = self.controller
        ctx = c.ctx
        for _attempt in range(_ATTEMPTS):
            state = ctx.states[tp]
            replicas = ctx.assignments[tp[0]][tp[1]]
            live = [r for r in replicas if ctx.live(r)]
            recovery = state.leader_recovery_state
            isr = list(state.isr)
            if election_type == PREFERRED:
                leader = replicas[0] if replicas[0] in live and replicas[0] in state.isr else None
                strategy = "PreferredReplicaPartitionLeaderElectionStrategy"
                failed = E.PREFERRED_LEADER_NOT_AVAILABLE
            else:
                leader = next((r for r in live if r in state.isr), None)
                if leader is not None:
                    isr = [r for r in state.isr if ctx.live(r)]
                elif live:
                    leader, isr, recovery = live[0], [live[0]], zn.LEADER_RECOVERING
                    log.warning("%s-%d: unclean leader election of broker %d, outside the ISR %s, asked by "
                                "ElectLeaders: records the ISR had and it lacks are lost", tp[0], tp[1], leader,
                                state.isr)
                strategy = "OfflinePartitionLeaderElectionStrategy(true)"
                failed = E.ELIGIBLE_LEADERS_NOT_AVAILABLE
            if leader is None:
                return failed, f"Failed to elect leader for partition {tp[0]}-{tp[1]} under strategy {strategy}"
            try:
                await c._write_state(tp, zn.PartitionState(leader, state.leader_epoch + 1, isr, c.epoch, recovery))
            except (BadVersion, NoNode):
                await c._reload_state(tp)
                continue
            log.info("controller: %s-%d leader %d -> %d (%s election)", tp[0], tp[1], state.leader, leader,
                     ELECTION_TYPES[election_type])
            c._send_leader_and_isr(live, [tp])
            return E.NONE, None
        return E.NOT_CONTROLLER, f"the state of {tp[0]}-{tp[1]} kept changing during the election"

    # ------------------------------------------------------------------ /admin/preferred_replica_election
    async def _on_znode(self, value) -> None:
        if value is not None:
            self.controller.enqueue(self._znode_election)

    async def _znode_election(self) -> None:
        """The znode way (kafka-preferred-replica-election.sh before KIP-460): elect, then
        delete the znode so the next request can be written."""
        c = self.controller
        if not c.active:
            return
        found = await c.zk.get(zn.PREFERRED_REPLICA_ELECTION_PATH)
        if found is None:
            return
        try:
            tps = zn.decode_preferred_replica_election(found[0])
        except (ValueError, KeyError, TypeError):
            log.warning("controller: %s holds no valid partition list: %r", zn.PREFERRED_REPLICA_ELECTION_PATH,
                        found[0][:200])
            tps = []
        try:
            if tps:
                await self._elect(list(dict.fromkeys(tps)), PREFERRED, "ZooKeeper")
        finally:
            try:
                await c._write([DeleteOp(zn.PREFERRED_REPLICA_ELECTION_PATH)])
            except (NoNode, NodeExists, BadVersion):
                pass

    # ------------------------------------------------------------------ auto.leader.rebalance.enable
    async def _rebalance_loop(self, scope: trio.CancelScope) -> None:
        with scope:
            delay = FIRST_CHECK_DELAY_S
            while True:
                await trio.sleep(delay)
                done = trio.Event()

                async def event() -> None:
                    try:
                        await self.check_imbalance()
                    finally:
                        done.set()

                self.controller.enqueue(event)
                await done.wait()  # the next check is scheduled after this one ran, as Kafka does
                delay = self.check_interval_s

    async def check_imbalance(self) -> list[TopicPartition]:
        """Kafka's checkAndTriggerAutoLeaderRebalance; the partitions it elected."""
        c = self.controller
        if not c.active:
            return []
        ctx = c.ctx
        by_preferred: dict[int, list[TopicPartition]] = {}
        for tp in ctx.partitions():
            replicas = ctx.assignments[tp[0]][tp[1]]
            if tp[0] not in ctx.deleting and replicas:
                by_preferred.setdefault(replicas[0], []).append(tp)
        elected: list[TopicPartition] = []
        for broker_id, tps in sorted(by_preferred.items()):
            elsewhere = [tp for tp in tps if tp in ctx.states and ctx.states[tp].leader != broker_id]
            ratio = len(elsewhere) / len(tps)
            if ratio <= self.imbalance_percentage / 100:
                continue
            candidates = [tp for tp in elsewhere if ctx.live(broker_id) and broker_id in ctx.states[tp].isr]
            if not candidates:
                continue
            log.info("controller: leader imbalance of broker %d is %.0f%% (> %g%%): preferred election for %d "
                     "partitions", broker_id, ratio * 100, self.imbalance_percentage, len(candidates))
            results = await self._elect(candidates, PREFERRED, "auto.leader.rebalance.enable")
            elected.extend(tp for tp, (code, _m) in results.items() if code == E.NONE)
        return elected


def _cached_leader(cache, tp: TopicPartition) -> int | None:
    info = cache.partition(*tp)
    return None if info is None else info.leader
