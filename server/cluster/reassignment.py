"""Partition reassignment: moving a partition's replicas to other brokers while it serves
(KIP-455; Kafka's ZooKeeper-mode KafkaController.onPartitionReassignment).

Why it is done in steps: a replica set cannot simply be swapped — the new replicas have
none of the data, and the old ones must keep it until the new ones have all of it. So, with
RS the assigned replicas, ORS the original ones, TRS the target, AR = TRS - ORS (adding) and
RR = ORS - TRS (removing):

- U: the topic znode gets RS = TRS + ORS with `adding_replicas`/`removing_replicas` (ZooKeeper
  first, then memory: a new controller reads them and resumes). A reassignment that replaces
  another (or a cancellation) stops the replicas the new RS no longer has.
- A (TRS not yet in the ISR): the leader epoch is bumped and LeaderAndIsr goes to RS, so the
  adding replicas start following and the leader counts them as followers. The leader takes
  each into the ISR once it caught up (AlterPartition), which comes back here.
- B (TRS all in the ISR): RS = TRS; a leader outside TRS hands over to the first live TRS
  member in the ISR; the ISR loses RR (one state write, epoch bumped); LeaderAndIsr to TRS;
  StopReplica(delete) to RR, which drop their logs; the topic znode gets RS = TRS last, since
  until then it is the only record of ORS; UpdateMetadata everywhere.

Cancellation (replicas = null) is a reassignment back to ORS. While a partition moves,
Metadata shows RS (ORS + TRS), as Kafka's does. Requests through the legacy
`/admin/reassign_partitions` znode (kafka-reassign-partitions.sh --zookeeper) are taken too:
they supplant API reassignments of the same partitions and leave the znode as they complete.

Everything here runs as controller events (one at a time, on the controller's queue).
"""

from __future__ import annotations

import json
import logging
from dataclasses import dataclass, field

import trio

from wire.errors import ErrorCode

from server.zookeeper import znodes as zn
from server.zookeeper.client import BadVersion, DeleteOp, NoNode, SetDataOp

log = logging.getLogger("trafka.controller")
E = ErrorCode


@dataclass(frozen=True)
class ReplicaAssignment:
    """Kafka's ReplicaAssignment: RS with the adding (AR) and removing (RR) replicas."""

    replicas: list[int]
    adding: list[int] = field(default_factory=list)
    removing: list[int] = field(default_factory=list)

    @property
    def origin(self) -> list[int]:
        return [r for r in self.replicas if r not in self.adding]

    @property
    def target(self) -> list[int]:
        return [r for r in self.replicas if r not in self.removing]

    @property
    def being_reassigned(self) -> bool:
        return bool(self.adding or self.removing)

    def reassign_to(self, target: list[int]) -> "ReplicaAssignment":
        """TRS first (its order is the new preference), then what remains of ORS."""
        full = list(dict.fromkeys([*target, *self.origin]))
        return ReplicaAssignment(full, [r for r in full if r not in self.origin], [r for r in full if r not in target])


class Reassignments:
    """The controller's reassignment work; `controller.ctx.reassigning` holds (AR, RR) of
    each partition being moved (reloaded from the topic znodes on failover)."""

    def __init__(self, controller) -> None:
        self.controller = controller
        self._legacy: set[tuple[str, int]] = set()  # partitions requested through the znode

    @property
    def ctx(self):
        return self.controller.ctx

    def assignment(self, tp: tuple[str, int]) -> ReplicaAssignment:
        adding, removing = self.ctx.reassigning.get(tp, ([], []))
        return ReplicaAssignment(list(self.ctx.assignments[tp[0]][tp[1]]), list(adding), list(removing))

    async def _on_queue(self, work):
        """Run `work` as a controller event; None when the controller moved meanwhile."""
        done = trio.Event()
        out: list = [None]

        async def event() -> None:
            try:
                out[0] = await work()
            finally:
                done.set()

        self.controller.enqueue(event)
        await done.wait()
        return out[0]

    # ------------------------------------------------------------------ AlterPartitionReassignments
    async def alter(self, request: dict) -> dict:
        answer = await self._on_queue(lambda: self._alter(request))
        if answer is None:
            return {"throttle_time_ms": 0, "error_code": E.NOT_CONTROLLER, "error_message": None, "responses": []}
        return answer

    async def _alter(self, request: dict) -> dict:
        c = self.controller
        if not c.active:
            return {"throttle_time_ms": 0, "error_code": E.NOT_CONTROLLER, "error_message": None, "responses": []}
        responses = []
        for topic in request["topics"]:
            name = topic["name"]
            results = []
            for p in topic["partitions"]:
                tp = (name, p["partition_index"])
                code, message = await self._alter_one(tp, p.get("replicas"))
                if code != E.NONE:
                    log.info("controller: reassignment of %s-%d to %s refused: %s (%s)", name, tp[1],
                             p.get("replicas"), code.name, message)
                results.append({"partition_index": tp[1], "error_code": code, "error_message": message})
            responses.append({"name": name, "partitions": results})
        return {"throttle_time_ms": 0, "error_code": E.NONE, "error_message": None, "responses": responses}

    async def _alter_one(self, tp: tuple[str, int], target: list[int] | None) -> tuple[ErrorCode, str | None]:
        """Kafka's validateReplicas + maybeBuildReassignment + maybeTriggerPartitionReassignment."""
        ctx = self.ctx
        if tp[0] in ctx.deleting or tp[1] not in ctx.assignments.get(tp[0], {}):
            return E.UNKNOWN_TOPIC_OR_PARTITION, "The partition does not exist."
        current = self.assignment(tp)
        if target is not None:
            if not target:
                return E.INVALID_REPLICA_ASSIGNMENT, "Empty replica list specified in partition reassignment."
            if len(set(target)) != len(target):
                return E.INVALID_REPLICA_ASSIGNMENT, f"Duplicate replica ids in partition reassignment replica list: {target}"
            if any(r < 0 for r in target):
                return E.INVALID_REPLICA_ASSIGNMENT, f"Invalid broker id in replica list: {target}"
            adding = current.reassign_to(target).adding
            if any(r not in ctx.brokers for r in adding):
                return E.INVALID_REPLICA_ASSIGNMENT, (f"Replica assignment has brokers that are not alive. Replica "
                                                      f"list: {adding}, live broker list: {sorted(ctx.brokers)}")
            new = current.reassign_to(target)
        elif current.being_reassigned:
            new = current.reassign_to(current.origin)  # cancel: back to ORS
        else:
            return E.NO_REASSIGNMENT_IN_PROGRESS, None
        self._legacy.discard(tp)  # the latest request wins over one through the znode
        await self.reassign(tp, new)
        return E.NONE, None

    # ------------------------------------------------------------------ ListPartitionReassignments
    async def list(self, request: dict) -> dict:
        answer = await self._on_queue(lambda: self._list(request))
        if answer is None:
            return {"throttle_time_ms": 0, "error_code": E.NOT_CONTROLLER, "error_message": None, "topics": []}
        return answer

    async def _list(self, request: dict) -> dict:
        if not self.controller.active:
            return {"throttle_time_ms": 0, "error_code": E.NOT_CONTROLLER, "error_message": None, "topics": []}
        ctx = self.ctx
        if request.get("topics") is None:
            wanted = sorted(ctx.reassigning)
        else:
            wanted = [(t["name"], i) for t in request["topics"] for i in t["partition_indexes"]]
        by_topic: dict[str, list[dict]] = {}
        for tp in wanted:
            if tp not in ctx.reassigning or tp[1] not in ctx.assignments.get(tp[0], {}):
                continue
            a = self.assignment(tp)
            by_topic.setdefault(tp[0], []).append({"partition_index": tp[1], "replicas": a.replicas,
                                                   "adding_replicas": a.adding, "removing_replicas": a.removing})
        return {"throttle_time_ms": 0, "error_code": E.NONE, "error_message": None,
                "topics": [{"name": t, "partitions": ps} for t, ps in by_topic.items()]}

    # ------------------------------------------------------------------ the steps
    async def reassign(self, tp: tuple[str, int], new: ReplicaAssignment) -> None:
        """Kafka's onPartitionReassignment (see the module docstring)."""
        c = self.controller
        current = self.assignment(tp)
        if current != new:
            # U1/U2: ZooKeeper first, then memory; U3: replicas the new RS drops stop now.
            self._set(tp, new)
            await self._write_topic(tp[0])
            log.info("controller: %s-%d reassigning: replicas %s, adding %s, removing %s", tp[0], tp[1],
                     new.replicas, new.adding, new.removing)
            unneeded = [r for r in current.replicas if r not in new.replicas]
            if unneeded:
                await self._remove_replicas(tp, unneeded)
        if new.being_reassigned and not self._complete(tp, new):
            # A1/A2: a new leader epoch with RS to every replica; the new ones start fetching.
            state = self.ctx.states.get(tp)
            if state is not None:
                await self._write_state(tp, zn.PartitionState(state.leader, state.leader_epoch + 1, list(state.isr),
                                                              c.epoch, state.leader_recovery_state))
                c._send_leader_and_isr([r for r in new.replicas if self.ctx.live(r)], [tp])
                c._send_update_metadata(list(self.ctx.brokers), [tp])
            return
        await self._finish(tp, new)

    def _complete(self, tp: tuple[str, int], a: ReplicaAssignment) -> bool:
        state = self.ctx.states.get(tp)
        return state is not None and all(r in state.isr for r in a.target)

    async def _finish(self, tp: tuple[str, int], a: ReplicaAssignment) -> None:
        """Phase B: RS = TRS, leader moved into TRS if needed, RR out of the ISR and deleted."""
        c = self.controller
        ctx = self.ctx
        target = a.target
        self._set(tp, ReplicaAssignment(target))
        state = ctx.states.get(tp)
        if state is not None:
            leader = state.leader
            if leader not in target or not ctx.live(leader):
                leader = next((r for r in target if ctx.live(r) and r in state.isr), -1)
            isr = [r for r in state.isr if r in target] or list(state.isr)
            if leader != state.leader:
                log.info("controller: %s-%d leader %d is not in the new replicas %s: broker %d leads", tp[0], tp[1],
                         state.leader, target, leader)
            await self._write_state(tp, zn.PartitionState(leader, state.leader_epoch + 1, isr, c.epoch,
                                                          state.leader_recovery_state))
            c._send_leader_and_isr([r for r in target if ctx.live(r)], [tp])
        for r in a.removing:
            if r in ctx.brokers:
                c._send_stop_replica(r, [tp], delete=True)
        await self._write_topic(tp[0])
        c._send_update_metadata(list(ctx.brokers), [tp])
        log.info("controller: %s-%d reassignment complete: replicas %s", tp[0], tp[1], target)
        if tp in self._legacy:
            self._legacy.discard(tp)
            await self._legacy_done(tp)

    async def _remove_replicas(self, tp: tuple[str, int], gone: list[int]) -> None:
        """Replicas a replacing reassignment or a cancellation drops (Kafka's
        stopRemovedReplicasOfReassignedPartition): out of the ISR, then deleted."""
        c = self.controller
        ctx = self.ctx
        replicas = ctx.assignments[tp[0]][tp[1]]
        state = ctx.states.get(tp)
        if state is not None and (state.leader in gone or any(r in gone for r in state.isr)):
            isr = [r for r in state.isr if r not in gone]
            leader = state.leader
            if leader in gone or not isr:
                leader = next((r for r in replicas if ctx.live(r) and r in isr), -1)
            if not isr:
                log.warning("controller: %s-%d: no ISR member left after removing %s; offline", tp[0], tp[1], gone)
                isr = list(state.isr)
            await self._write_state(tp, zn.PartitionState(leader, state.leader_epoch + 1, isr, c.epoch,
                                                          state.leader_recovery_state))
            c._send_leader_and_isr([r for r in replicas if ctx.live(r)], [tp])
        for r in gone:
            if r in ctx.brokers:
                c._send_stop_replica(r, [tp], delete=True)

    def _set(self, tp: tuple[str, int], a: ReplicaAssignment) -> None:
        self.ctx.assignments[tp[0]][tp[1]] = list(a.replicas)
        if a.being_reassigned:
            self.ctx.reassigning[tp] = (list(a.adding), list(a.removing))
        else:
            self.ctx.reassigning.pop(tp, None)

    async def _write_state(self, tp: tuple[str, int], state: zn.PartitionState) -> None:
        try:
            await self.controller._write_state(tp, state)
        except BadVersion:
            await self.controller._reload_state(tp)
            raise

    async def _write_topic(self, topic: str) -> None:
        """The whole topic znode: every partition's RS, its id, and AR/RR of those moving."""
        ctx = self.ctx
        parts = ctx.assignments[topic]
        adding = {p: ctx.reassigning[(topic, p)][0] for p in parts if (topic, p) in ctx.reassigning}
        removing = {p: ctx.reassigning[(topic, p)][1] for p in parts if (topic, p) in ctx.reassigning}
        for _attempt in range(5):
            # Partitions CreatePartitions just added (their event not handled yet) are kept.
            found = await self.controller.zk.get(zn.topic_path(topic))
            if found is None:
                raise NoNode(zn.topic_path(topic))
            merged = {**zn.TopicAssignment.decode(found[0]).partitions, **parts}
            data = zn.TopicAssignment(merged, ctx.topic_ids.get(topic), adding, removing).encode()
            try:
                await self.controller._write([SetDataOp(zn.topic_path(topic), data, found[1].version)])
                return
            except BadVersion:
                continue
        raise BadVersion(zn.topic_path(topic))

    # ------------------------------------------------------------------ events from the controller
    def isr_changed(self, tps: list[tuple[str, int]]) -> None:
        """An AlterPartition changed these ISRs: a moving partition whose TRS is now all in
        the ISR completes (queued after the AlterPartition answer)."""
        moving = [tp for tp in tps if tp in self.ctx.reassigning]
        if moving:
            self.controller.enqueue(lambda: self._maybe_complete(moving))

    async def _maybe_complete(self, tps: list[tuple[str, int]]) -> None:
        for tp in tps:
            if not self.controller.active or tp not in self.ctx.reassigning:
                continue
            a = self.assignment(tp)
            if self._complete(tp, a):
                log.info("controller: %s-%d target replicas %s caught up", tp[0], tp[1], a.target)
                await self.reassign(tp, a)

    async def on_failover(self) -> None:
        """Resume what the topic znodes say is moving, then take znode requests."""
        self._legacy.clear()
        for tp in sorted(self.ctx.reassigning):
            try:
                await self.reassign(tp, self.assignment(tp))
            except (BadVersion, NoNode):
                log.exception("controller: resuming the reassignment of %s-%d failed", *tp)
        c = self.controller
        # The watch queues a first look at once.
        c._watch(await c.zk.watch_data(zn.REASSIGN_PARTITIONS_PATH, c._event(self._on_legacy_znode)))

    # ------------------------------------------------------------------ /admin/reassign_partitions
    async def _on_legacy_znode(self) -> None:
        """kafka-reassign-partitions.sh --zookeeper: {"version":1,"partitions":[{"topic","partition",
        "replicas"}]}. Invalid entries are logged and dropped from the znode, as Kafka does."""
        c = self.controller
        if not c.active:
            return
        found = await c.zk.get(zn.REASSIGN_PARTITIONS_PATH)
        if found is None:
            return
        try:
            entries = json.loads(found[0] or b"{}").get("partitions") or []
            requested = {(e["topic"], int(e["partition"])): [int(r) for r in e["replicas"]] for e in entries}
        except (ValueError, KeyError, TypeError, AttributeError) as exc:
            log.warning("controller: %s is not valid JSON (%s); deleting it", zn.REASSIGN_PARTITIONS_PATH, exc)
            await self._write_legacy({})
            return
        pending = {}
        for tp, target in requested.items():
            if tp in self._legacy:
                pending[tp] = target
                continue
            if self.ctx.reassigning.get(tp) is None and tp[1] in self.ctx.assignments.get(tp[0], {}) \
                    and self.ctx.assignments[tp[0]][tp[1]] == target:
                continue  # already there
            code, message = await self._alter_one(tp, target)
            if code != E.NONE:
                log.warning("controller: %s reassignment of %s-%d to %s: %s (%s)", zn.REASSIGN_PARTITIONS_PATH, tp[0],
                            tp[1], target, code.name, message)
                continue
            if tp in self.ctx.reassigning:
                self._legacy.add(tp)
                pending[tp] = target
        if pending != requested:
            await self._write_legacy(pending)

    async def _legacy_done(self, tp: tuple[str, int]) -> None:
        found = await self.controller.zk.get(zn.REASSIGN_PARTITIONS_PATH)
        if found is None:
            return
        try:
            entries = json.loads(found[0] or b"{}").get("partitions") or []
            left = {(e["topic"], int(e["partition"])): e["replicas"] for e in entries}
        except (ValueError, KeyError, TypeError, AttributeError):
            left = {}
        left.pop(tp, None)
        await self._write_legacy(left)

    async def _write_legacy(self, partitions: dict) -> None:
        c = self.controller
        try:
            if partitions:
                doc = {"version": 1, "partitions": [{"topic": t, "partition": p, "replicas": list(r)}
                                                    for (t, p), r in sorted(partitions.items())]}
                await c._write([SetDataOp(zn.REASSIGN_PARTITIONS_PATH, json.dumps(doc).encode(), -1)])
            else:
                await c._write([DeleteOp(zn.REASSIGN_PARTITIONS_PATH)])
        except NoNode:
            pass
