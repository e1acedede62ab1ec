"""The KIP-848 consumer group protocol: ConsumerGroupHeartbeat, fencing, describe.

This is Kafka's GroupMetadataManager.consumerGroupHeartbeat, step for step, because the
clients (Java 3.9 `group.protocol=consumer`, librdkafka 2.16) are written against it:

1. Validate the request (INVALID_REQUEST with Kafka's messages, UNSUPPORTED_ASSIGNOR,
   INVALID_REGULAR_EXPRESSION).
2. Find the group (created by a member epoch 0; an empty classic group changes type, a
   non-empty one is upgraded (migration.py) or, when the policy forbids it or its members
   do not use the consumer protocol, answers GROUP_ID_NOT_FOUND) and the member: epoch 0 joins (v0: the
   coordinator makes the member id; v1, KIP-1082: the client sends its own), a static
   member (instance id) may replace its previous incarnation only if that one left with
   epoch -2 (else UNRELEASED_INSTANCE_ID); an unknown member is UNKNOWN_MEMBER_ID, a wrong
   epoch FENCED_MEMBER_EPOCH (the previous epoch is accepted when the member owns a
   subset of its assignment: our answer was lost).
3. Update the member; when its subscription (topic names, or v1's RE2 regex) or the
   subscribed topics themselves (created, deleted, grown) changed, the group epoch is bumped.
4. Group epoch ahead of the assignment epoch: the server-side assignor (uniform or range,
   group.consumer.assignors; the members' ServerAssignor wins) computes a new target.
5. Reconcile the member towards its target (reconcile.py): revoke first, assign only
   partitions nobody owns any more.
6. Append the records of every change to __consumer_offsets (write before answering, as
   the classic coordinator), then apply them to memory — the same `ConsumerGroup.apply` the
   start-up replay uses — and answer with the member's epoch, the heartbeat interval and,
   on a full request or a change, its assignment.

Timers (in the classic coordinator's heap, keys ("cg-session"|"cg-rebalance", group,
member)): a member silent for group.consumer.session.timeout.ms is fenced, and so is one
that does not revoke within its rebalance timeout. Fencing removes the member's records
and bumps the group epoch, so the others get a new target at their next heartbeat.

Leaving: epoch -1 fences the member at once; a static member's -2 keeps its assignment
(epoch -2) for its session timeout, so it can come back under a new member id and carry on.

Mixed groups (classic members in a consumer group, Kafka 4.0's online upgrade and
downgrade) are migration.py's. Not implemented: rack-aware assignment
(the assignors ignore racks, see assignors.py); Kafka 4.0's asynchronous regex
resolution (ours is resolved on each heartbeat against the topics the broker knows).
"""

from __future__ import annotations

import collections
import logging
import uuid
from dataclasses import dataclass, replace

import re2
import trio

from wire.errors import ErrorCode

from server.coordinator_log import BadRecord
from server.groups.consumer import records as crec
from server.groups.consumer.assignors import ASSIGNORS, MemberSubscription, TopicInfo
from server.groups.consumer.coordinator_errors import Reject as _Reject
from server.groups.consumer.group import (
    LEAVE_EPOCH,
    STATIC_LEAVE_EPOCH,
    ConsumerGroup,
    ConsumerMember,
    classic_deletion_keys,
    is_consumer_group,
)
from server.groups.consumer.migration import Migration
from server.groups.consumer.reconcile import FencedMember, MemberAssignment, MemberState, Partitions, reconcile
from server.groups.group_state import GroupState
from server.topics import INTERNAL_TOPICS

log = logging.getLogger("trafka.groups.consumer")
E = ErrorCode
Record = tuple[crec.ConsumerKey, bytes | None]


@dataclass(slots=True)
class HeartbeatResult:
    error: ErrorCode
    message: str | None = None
    member_id: str | None = None
    member_epoch: int = 0
    heartbeat_interval_ms: int = 0
    assignment: Partitions | None = None


def _bounded(cfg, name: str) -> int:
    """A group.consumer.* setting within its min/max settings (Kafka refuses to start
    otherwise; we take the nearest bound and say so)."""
    value = cfg.get(f"group.consumer.{name}")
    low, high = cfg.get(f"group.consumer.min.{name}"), cfg.get(f"group.consumer.max.{name}")
    bounded = min(max(value, low), high)
    if bounded != value:
        log.warning("group.consumer.%s=%d is outside [%d, %d]; using %d", name, value, low, high, bounded)
    return bounded


class ConsumerGroupCoordinator:
    """KIP-848 groups, kept in the classic coordinator's `groups` (one id, one type), its
    log, locks and timers."""

    Reject = _Reject

    def __init__(self, coordinator) -> None:
        self.c = coordinator
        cfg = coordinator.broker.config
        # The broker's; a group may have its own (consumer.session.timeout.ms and
        # consumer.heartbeat.interval.ms group configs, `session_timeout_ms(group)`).
        self.broker_session_timeout_ms = _bounded(cfg, "session.timeout.ms")
        self.broker_heartbeat_interval_ms = _bounded(cfg, "heartbeat.interval.ms")
        names = [n.strip() for n in str(cfg.get("group.consumer.assignors")).split(",") if n.strip()]
        unknown = [n for n in names if n not in ASSIGNORS]
        if unknown:
            log.warning("group.consumer.assignors: unknown assignors %s ignored (known: %s)", unknown,
                        ", ".join(sorted(ASSIGNORS)))
        self.assignors = [n for n in names if n in ASSIGNORS] or ["uniform", "range"]
        self.max_size = cfg.get("group.consumer.max.size")
        self._regex_cache: dict[str, object] = {}
        self._rebalance_epochs: dict[tuple[str, str], int] = {}
        self._to_arm: list[tuple[str, str]] = []
        self.migration = Migration(self)

    # ------------------------------------------------------------------ group configs
    def _group_config(self, group_id: str, name: str, broker_value: int) -> int:
        """A consumer.* group config of `group_id` (server/groups/group_configs.py), within
        the broker's bounds; the broker's value when the group has none."""
        configs = getattr(self.c.broker, "group_configs", None)
        if configs is None or name not in configs.configs.get(group_id, {}):
            return broker_value
        return configs.int_value(group_id, name)

    def session_timeout_ms(self, group_id: str) -> int:
        return self._group_config(group_id, "consumer.session.timeout.ms", self.broker_session_timeout_ms)

    def heartbeat_interval_ms(self, group_id: str) -> int:
        return self._group_config(group_id, "consumer.heartbeat.interval.ms", self.broker_heartbeat_interval_ms)

    # ------------------------------------------------------------------ topics
    def _topic_view(self) -> dict[str, tuple[uuid.UUID, int]]:
        """Every topic this broker knows: name -> (id, partition count)."""
        broker = self.c.broker
        cluster = getattr(broker, "cluster", None)
        if cluster is not None:
            cache = cluster.cache
            out = {}
            for name, parts in cache.topics.items():
                topic_id = cache.topic_ids.get(name)
                if topic_id is not None and parts:
                    out[name] = (topic_id, max(parts) + 1)
            return out
        return {name: (meta.topic_id, meta.partitions) for name, meta in broker.topics.items()}

    def _compile(self, regex: str):
        compiled = self._regex_cache.get(regex)
        if compiled is None:
            try:
                compiled = re2.compile(regex)
            except Exception as exc:  # re2.error and friends
                raise _Reject(E.INVALID_REGULAR_EXPRESSION, f"SubscribedTopicRegex `{regex}` is not a valid "
                              f"regular expression: {exc}.") from None
            if len(self._regex_cache) > 1000:
                self._regex_cache.clear()
            self._regex_cache[regex] = compiled
        return compiled

    def _member_topics(self, member: ConsumerMember, view: dict[str, tuple[uuid.UUID, int]]) -> set[str]:
        names = {n for n in member.subscribed_topic_names if n in view}
        if member.subscribed_topic_regex:
            pattern = self._compile(member.subscribed_topic_regex)
            names |= {n for n in view if n not in INTERNAL_TOPICS and pattern.fullmatch(n)}
        return names

    def _subscription_metadata(self, members: list[ConsumerMember], view) -> dict[str, crec.TopicMetadata]:
        names: set[str] = set()
        for m in members:
            names |= self._member_topics(m, view)
        return {n: crec.TopicMetadata(view[n][0], n, view[n][1]) for n in sorted(names)}

    # ------------------------------------------------------------------ validation
    def _validate(self, version: int, group_id: str, member_id: str, member_epoch: int, instance_id: str | None,
                  rack_id: str | None, rebalance_timeout_ms: int, names: list[str] | None, regex: str | None,
                  assignor: str | None, owned: dict | None) -> None:
        """Kafka's throwIfConsumerGroupHeartbeatRequestIsInvalid (with 4.0's v1 rules)."""
        def invalid(message: str) -> _Reject:
            return _Reject(E.INVALID_REQUEST, message)

        if not group_id:
            raise invalid("GroupId can't be empty.")
        if instance_id == "":
            raise invalid("InstanceId can't be empty.")
        if rack_id == "":
            raise invalid("RackId can't be empty.")
        if version >= 1 and not member_id:
            raise invalid("MemberId can't be empty.")
        if member_epoch > 0 or member_epoch == LEAVE_EPOCH:
            if not member_id:
                raise invalid("MemberId can't be empty.")
        elif member_epoch == 0:
            if rebalance_timeout_ms == -1:
                raise invalid("RebalanceTimeoutMs must be provided in first request.")
            if owned is None or any(owned.values()):
                raise invalid("TopicPartitions must be empty when (re-)joining.")
            # Kafka 4 accepts an empty list of names: a member subscribed to nothing yet.
            if names is None and regex is None:
                raise invalid("SubscribedTopicNames or SubscribedTopicRegex must be set in first request.")
        elif member_epoch == STATIC_LEAVE_EPOCH:
            if not member_id:
                raise invalid("MemberId can't be empty.")
            if instance_id is None:
                raise invalid("InstanceId can't be null.")
        else:
            raise invalid("MemberEpoch is invalid.")
        if assignor is not None and assignor not in self.assignors:
            raise _Reject(E.UNSUPPORTED_ASSIGNOR, f"ServerAssignor {assignor} is not supported. Supported "
                          f"assignors: {', '.join(self.assignors)}.")
        if regex is not None:
            self._compile(regex)

    @staticmethod
    def _check_epoch(member: ConsumerMember, epoch: int, owned: dict | None) -> None:
        """Kafka's throwIfConsumerGroupMemberEpochIsInvalid."""
        current = member.assignment
        if epoch > current.member_epoch:
            raise _Reject(E.FENCED_MEMBER_EPOCH, f"The consumer group member has a greater member epoch ({epoch}) "
                          f"than the one known by the group coordinator ({current.member_epoch}). The member must "
                          "abandon all its partitions and rejoin.")
        if epoch < current.member_epoch:
            subset = owned is not None and all(
                set(ps) <= set(current.assigned.get(t, ())) for t, ps in owned.items())
            if epoch != current.previous_member_epoch or not subset:
                raise _Reject(E.FENCED_MEMBER_EPOCH, f"The consumer group member has a smaller member epoch "
                              f"({epoch}) than the one known by the group coordinator ({current.member_epoch}). "
                              "The member must abandon all its partitions and rejoin.")

    # ------------------------------------------------------------------ heartbeat
    async def heartbeat(self, *, version: int, group_id: str, member_id: str, member_epoch: int,
                        instance_id: str | None, rack_id: str | None, rebalance_timeout_ms: int,
                        subscribed_topic_names: list[str] | None, subscribed_topic_regex: str | None,
                        server_assignor: str | None, owned: dict[uuid.UUID, frozenset[int]] | None,
                        client_id: str, client_host: str) -> HeartbeatResult:
        try:
            self._validate(version, group_id, member_id, member_epoch, instance_id, rack_id, rebalance_timeout_ms,
                           subscribed_topic_names, subscribed_topic_regex, server_assignor, owned)
        except _Reject as r:
            log.info("group %s: ConsumerGroupHeartbeat from %s refused: %s %s", group_id, member_id or client_id,
                     r.code.name, r.message)
            return HeartbeatResult(r.code, r.message, member_id or None, member_epoch)
        async with self.c._locked(group_id) as status:
            if status != E.NONE:
                return HeartbeatResult(status, None, member_id or None, member_epoch)
            try:
                if member_epoch in (LEAVE_EPOCH, STATIC_LEAVE_EPOCH):
                    return await self._leave(group_id, member_id, member_epoch, instance_id)
                return await self._heartbeat(
                    group_id, member_id or str(uuid.uuid4()), member_epoch, instance_id, rack_id,
                    rebalance_timeout_ms, subscribed_topic_names, subscribed_topic_regex, server_assignor, owned,
                    client_id, client_host)
            except _Reject as r:
                level = logging.DEBUG if r.code == E.FENCED_MEMBER_EPOCH else logging.INFO
                log.log(level, "group %s: ConsumerGroupHeartbeat from member %s (epoch %d): %s %s", group_id,
                        member_id or "-", member_epoch, r.code.name, r.message)
                return HeartbeatResult(r.code, r.message, member_id or None, member_epoch)

    def _group_for(self, group_id: str, create: bool) -> tuple[ConsumerGroup, list[tuple[bytes, bytes | None]]]:
        """The consumer group (a new one, not installed yet, when `create`), and the records
        that retire a classic group of the same id (an empty one, or a live one the online
        upgrade converts, migration.py)."""
        group = self.c.groups.get(group_id)
        share = getattr(self.c.broker, "share", None)
        if group is None and share is not None and group_id in share.groups:
            raise _Reject(E.GROUP_ID_NOT_FOUND, f"Group {group_id} is not a consumer group.")
        if group is not None and not is_consumer_group(group):
            if create and not group.is_empty and not group.is_(GroupState.DEAD) \
                    and self.migration.can_upgrade(group):
                try:
                    return self.migration.upgrade(group)
                except BadRecord as exc:
                    raise _Reject(E.GROUP_ID_NOT_FOUND, f"Cannot upgrade the classic group {group_id} to consumer "
                                  f"group because the embedded consumer protocol is malformed: {exc}.") from None
            if not group.is_empty or not group.is_(GroupState.EMPTY) or group.pending_members or not create:
                raise _Reject(E.GROUP_ID_NOT_FOUND, f"Group {group_id} is not a consumer group.")
            converted = ConsumerGroup(group_id, self.c.now_ms())
            converted.offsets = group.offsets
            converted.pending_txn_offsets = group.pending_txn_offsets
            return converted, [(k, None) for k in classic_deletion_keys(group_id)]
        if group is None or group.dead:
            if not create:
                raise _Reject(E.GROUP_ID_NOT_FOUND, f"Consumer group {group_id} not found.")
            return ConsumerGroup(group_id, self.c.now_ms()), []
        return group, []

    async def _heartbeat(self, group_id: str, member_id: str, member_epoch: int, instance_id: str | None,
                         rack_id: str | None, rebalance_timeout_ms: int, names: list[str] | None, regex: str | None,
                         assignor: str | None, owned: dict | None, client_id: str,
                         client_host: str, classic: crec.ClassicMemberMetadata | None = None,
                         replace_static: bool = False) -> HeartbeatResult:
        """One heartbeat (or, with `classic`, a classic member's JoinGroup, migration.py).
        `replace_static`: a joining static member replaces a live one of its instance id
        (a classic member's JoinGroup, as classic static membership does), where a consumer-
        protocol member must wait until the previous one left with epoch -2."""
        joining = member_epoch == 0
        group, extra = self._group_for(group_id, joining)
        records: list[Record] = []
        replaced: ConsumerMember | None = None
        member = group.members.get(member_id)
        if instance_id is None:
            if member is None and not joining:
                raise _Reject(E.UNKNOWN_MEMBER_ID, f"Member {member_id} is not a member of group {group_id}.")
        else:
            existing = group.static_member(instance_id)
            if joining:
                if existing is not None and existing.member_id != member_id:
                    if existing.member_epoch != STATIC_LEAVE_EPOCH and not replace_static:
                        raise _Reject(E.UNRELEASED_INSTANCE_ID, f"Static member {existing.member_id} with instance "
                                      f"id {instance_id} is not released yet; member {member_id} cannot join.")
                    replaced = existing
                    member = None
            else:
                if existing is None:
                    raise _Reject(E.UNKNOWN_MEMBER_ID, f"Instance id {instance_id} is unknown.")
                if existing.member_id != member_id:
                    raise _Reject(E.FENCED_INSTANCE_ID, f"Static member {member_id} with instance id {instance_id} "
                                  f"was fenced by member {existing.member_id}.")
                member = existing
        is_new = member is None
        if is_new and replaced is None and len(group.members) >= self.max_size:
            raise _Reject(E.GROUP_MAX_SIZE_REACHED, f"The consumer group has reached its maximum capacity of "
                          f"{self.max_size} members.")
        if is_new:
            base = ConsumerMember(member_id)
            if replaced is not None:
                # KIP-848 static membership: the new incarnation inherits the assignment.
                base = replace(replaced, member_id=member_id,
                               assignment=replace(replaced.assignment, member_epoch=0, previous_member_epoch=0,
                                                  state=MemberState.STABLE))
        elif joining:
            # A member rejoining with its own id (KIP-1082 clients keep it after being
            # fenced): it has let go of everything, so it starts from scratch.
            base = replace(member, assignment=MemberAssignment())
        else:
            self._check_epoch(member, member_epoch, owned)
            base = member
        updated = replace(base, client_id=client_id, client_host=client_host)
        if classic is not None:
            updated.classic = classic
        if instance_id is not None:
            updated.instance_id = instance_id
        if rack_id is not None:
            updated.rack_id = rack_id
        if rebalance_timeout_ms != -1:
            updated.rebalance_timeout_ms = rebalance_timeout_ms
        if assignor is not None:
            updated.server_assignor = assignor
        if names is not None:
            updated.subscribed_topic_names = list(names)
        if regex is not None:
            updated.subscribed_topic_regex = regex or None
        old = None if is_new else member
        if replaced is not None:
            records += self._removal_records(group_id, replaced.member_id)
            records.append((crec.ConsumerKey(crec.TARGET_MEMBER, group_id, member_id),
                            crec.encode_target_member(group.target.get(replaced.member_id, {}))))
        ref = old if old is not None else replaced
        bump = ref is None or (updated.subscribed_topic_names != ref.subscribed_topic_names
                               or updated.subscribed_topic_regex != ref.subscribed_topic_regex)
        if old is None or updated.metadata_value() != old.metadata_value():
            records.append((crec.ConsumerKey(crec.MEMBER_METADATA, group_id, member_id),
                            crec.encode_member_metadata(updated.metadata_value())))
        # Subscription metadata: recomputed on every heartbeat, so topic creation, deletion
        # and partition growth bump the epoch at the next heartbeat of any member.
        others = [m for mid, m in group.members.items()
                  if mid != member_id and (replaced is None or mid != replaced.member_id)]
        view = self._topic_view()
        metadata = self._subscription_metadata(others + [updated], view)
        if metadata != group.subscription_metadata:
            records.append((crec.ConsumerKey(crec.PARTITION_METADATA, group_id),
                            crec.encode_partition_metadata(list(metadata.values()))))
            bump = True
        group_epoch = group.group_epoch
        if bump:
            group_epoch += 1
            records.append((crec.ConsumerKey(crec.METADATA, group_id), crec.encode_epoch(group_epoch)))
            log.info("group %s: group epoch %d (member %s %s)", group_id, group_epoch, member_id,
                     "joined" if is_new else "changed its subscription or the subscribed topics changed")
        # Target assignment.
        target_epoch = group.assignment_epoch
        current_targets = dict(group.target)
        if replaced is not None:
            current_targets[member_id] = current_targets.pop(replaced.member_id, {})
        if group_epoch > group.assignment_epoch:
            members = {m.member_id: m for m in others}
            members[member_id] = updated
            new_targets = self._assign(group_id, members, metadata, current_targets, view)
            for mid, parts in new_targets.items():
                if parts != current_targets.get(mid, {}) or mid == member_id and replaced is not None:
                    records.append((crec.ConsumerKey(crec.TARGET_MEMBER, group_id, mid),
                                    crec.encode_target_member(parts)))
            records.append((crec.ConsumerKey(crec.TARGET_METADATA, group_id), crec.encode_epoch(group_epoch)))
            target_epoch = group_epoch
            current_targets.update(new_targets)
        target = current_targets.get(member_id, {})
        # Reconciliation.
        exclude = {member_id} | ({replaced.member_id} if replaced is not None else set())
        epochs = {}
        for mid, m in group.members.items():
            if mid in exclude:
                continue
            for parts in (m.assignment.assigned, m.assignment.pending_revocation):
                for t, ps in parts.items():
                    for p in ps:
                        epochs[(t, p)] = m.member_epoch
        try:
            new_assignment = reconcile(updated.assignment, target_epoch, target, owned,
                                       lambda t, p: epochs.get((t, p), -1))
        except FencedMember as exc:
            raise _Reject(E.FENCED_MEMBER_EPOCH, str(exc)) from None
        previous_assignment = None if old is None else old.assignment
        if new_assignment != previous_assignment or is_new:
            records.append((crec.ConsumerKey(crec.CURRENT_ASSIGNMENT, group_id, member_id),
                            self._assignment_value(new_assignment)))
        await self._write(group, records, extra)
        if log.isEnabledFor(logging.DEBUG):
            log.debug("group %s: member %s heartbeat at epoch %d owning %s -> epoch %d %s assigned %s revoking %s "
                      "(target epoch %d)", group_id, member_id, member_epoch,
                      None if owned is None else {str(t)[:8]: sorted(ps) for t, ps in owned.items()},
                      new_assignment.member_epoch, new_assignment.state.label,
                      {str(t)[:8]: sorted(ps) for t, ps in new_assignment.assigned.items()},
                      {str(t)[:8]: sorted(ps) for t, ps in new_assignment.pending_revocation.items()}, target_epoch)
        self._arm_session(group_id, member_id)
        if replaced is not None:
            self._cancel_member_timers(group_id, replaced.member_id)
            log.info("group %s: static member %s rejoined as %s (was %s)", group_id, instance_id, member_id,
                     replaced.member_id)
        self._maybe_arm_rebalance(group_id, updated, previous_assignment, new_assignment)
        full = joining or (rebalance_timeout_ms != -1 and names is not None and owned is not None)
        changed = previous_assignment is None or previous_assignment.assigned != new_assignment.assigned
        return HeartbeatResult(E.NONE, None, member_id, new_assignment.member_epoch, self.heartbeat_interval_ms(group_id),
                               dict(new_assignment.assigned) if full or changed else None)

    def _preferred_assignor(self, members) -> str:
        counts = collections.Counter(m.server_assignor for m in members.values() if m.server_assignor)
        if counts:
            return max(sorted(counts), key=lambda n: counts[n])
        return self.assignors[0]

    def _assign(self, group_id: str, members: dict[str, ConsumerMember], metadata: dict[str, crec.TopicMetadata],
                current: dict[str, Partitions], view) -> dict[str, Partitions]:
        topics = {t.topic_id: TopicInfo(t.name, t.partitions) for t in metadata.values()}
        subs = {}
        for mid, m in members.items():
            ids = frozenset(metadata[n].topic_id for n in self._member_topics(m, view) if n in metadata)
            subs[mid] = MemberSubscription(ids, m.rack_id, current.get(mid, {}), m.instance_id)
        name = self._preferred_assignor(members)
        result = ASSIGNORS[name].assign(subs, topics)
        return {mid: {t: frozenset(ps) for t, ps in result.get(mid, {}).items() if ps} for mid in members}

    @staticmethod
    def _assignment_value(a: MemberAssignment) -> bytes:
        return crec.encode_current_assignment(crec.CurrentAssignmentValue(
            a.member_epoch, a.previous_member_epoch, int(a.state), a.assigned, a.pending_revocation))

    @staticmethod
    def _removal_records(group_id: str, member_id: str) -> list[Record]:
        """Kafka's removeMember: current assignment, target assignment, then the member."""
        return [(crec.ConsumerKey(crec.CURRENT_ASSIGNMENT, group_id, member_id), None),
                (crec.ConsumerKey(crec.TARGET_MEMBER, group_id, member_id), None),
                (crec.ConsumerKey(crec.MEMBER_METADATA, group_id, member_id), None)]

    async def _write(self, group: ConsumerGroup, records: list[Record],
                     extra: list[tuple[bytes, bytes | None]]) -> None:
        """Append the records (the caller holds the partition's lock), then apply them and
        install the group if it is new. A failed write changes nothing in memory."""
        entries = list(extra) + [(crec.encode_key(k), v) for k, v in records]
        if entries:
            partition = self.c.partition_for(group.group_id)
            try:
                await self.c._append(partition, entries)
            except Exception as exc:
                raise _Reject(self.c._write_error(exc, f"consumer group {group.group_id}"),
                              "writing to __consumer_offsets failed") from None
        for key, value in records:
            group.apply(key, value)
        old = self.c.groups.get(group.group_id)
        if old is not group:
            self.c.groups[group.group_id] = group
            if old is not None and not is_consumer_group(old) and not old.is_empty:
                self.migration.upgraded(old, group)

    # ------------------------------------------------------------------ leaving, fencing
    async def _leave(self, group_id: str, member_id: str, epoch: int, instance_id: str | None) -> HeartbeatResult:
        group, _ = self._group_for(group_id, False)
        if instance_id is not None:
            member = group.static_member(instance_id)
            if member is None:
                raise _Reject(E.UNKNOWN_MEMBER_ID, f"Instance id {instance_id} is unknown.")
            if member.member_id != member_id:
                raise _Reject(E.FENCED_INSTANCE_ID, f"Static member {member_id} with instance id {instance_id} "
                              f"was fenced by member {member.member_id}.")
        else:
            member = group.members.get(member_id)
            if member is None:
                raise _Reject(E.UNKNOWN_MEMBER_ID, f"Member {member_id} is not a member of group {group_id}.")
        if epoch == STATIC_LEAVE_EPOCH:
            # The static member will be back: it keeps its assignment (and its partitions
            # stay unavailable to others) until its session times out.
            # Kafka clears what it was revoking: those partitions go to their new owners.
            assignment = replace(member.assignment, member_epoch=STATIC_LEAVE_EPOCH,
                                 previous_member_epoch=member.member_epoch, pending_revocation={})
            await self._write(group, [(crec.ConsumerKey(crec.CURRENT_ASSIGNMENT, group_id, member_id),
                                       self._assignment_value(assignment))], [])
            self._cancel_rebalance(group_id, member_id)
            log.info("group %s: static member %s (%s) left temporarily", group_id, member_id, instance_id)
            return HeartbeatResult(E.NONE, None, member_id, STATIC_LEAVE_EPOCH, 0)
        await self._fence(group, member, "left the group")
        return HeartbeatResult(E.NONE, None, member_id, LEAVE_EPOCH, 0)

    async def _fence(self, group: ConsumerGroup, member: ConsumerMember, reason: str) -> None:
        """Kafka's consumerGroupFenceMember: remove the member, bump the group epoch — or,
        when everyone left speaks the classic protocol, downgrade to a classic group."""
        group_id = group.group_id
        if self.migration.can_downgrade(group, member.member_id):
            await self.migration.downgrade(group, member.member_id)
            log.info("group %s: member %s %s", group_id, member.member_id, reason)
            return
        records = self._removal_records(group_id, member.member_id)
        others = [m for mid, m in group.members.items() if mid != member.member_id]
        metadata = self._subscription_metadata(others, self._topic_view())
        if metadata != group.subscription_metadata:
            records.append((crec.ConsumerKey(crec.PARTITION_METADATA, group_id),
                            crec.encode_partition_metadata(list(metadata.values()))))
        records.append((crec.ConsumerKey(crec.METADATA, group_id), crec.encode_epoch(group.group_epoch + 1)))
        await self._write(group, records, [])
        self._cancel_member_timers(group_id, member.member_id)
        if not group.members:
            group.state_timestamp = self.c.now_ms()  # offsets retention counts from Empty
        log.info("group %s: member %s %s; group epoch %d", group_id, member.member_id, reason, group.group_epoch)

    async def _fence_later(self, group_id: str, member_id: str, reason: str, epoch: int | None = None) -> None:
        async with self.c._locked(group_id) as status:
            if status != E.NONE:
                return
            group = self.c.groups.get(group_id)
            if not is_consumer_group(group):
                return
            member = group.members.get(member_id)
            if member is None:
                return
            if epoch is None and self.c._timers.due(("cg-session", group_id, member_id)) is not None:
                return  # it heartbeated while this task waited for the lock
            if epoch is not None and (member.member_epoch != epoch
                                      or member.assignment.state != MemberState.UNREVOKED_PARTITIONS):
                return
            try:
                await self._fence(group, member, reason)
            except _Reject as r:
                log.warning("group %s: fencing member %s failed: %s", group_id, member_id, r.code.name)

    # ------------------------------------------------------------------ timers
    def _arm_session(self, group_id: str, member_id: str) -> None:
        """A classic member (migration.py) keeps the session timeout of its JoinGroup."""
        timeout_ms = self.session_timeout_ms(group_id)
        group = self.c.groups.get(group_id)
        member = group.members.get(member_id) if is_consumer_group(group) else None
        if member is not None and member.classic is not None:
            timeout_ms = member.classic.session_timeout_ms
        self.c._timers.set(("cg-session", group_id, member_id), trio.current_time() + timeout_ms / 1000)

    def _cancel_rebalance(self, group_id: str, member_id: str) -> None:
        self.c._timers.cancel(("cg-rebalance", group_id, member_id))
        self._rebalance_epochs.pop((group_id, member_id), None)

    def _cancel_member_timers(self, group_id: str, member_id: str) -> None:
        self.c._timers.cancel(("cg-session", group_id, member_id))
        self._cancel_rebalance(group_id, member_id)

    def _maybe_arm_rebalance(self, group_id: str, member: ConsumerMember, before: MemberAssignment | None,
                             after: MemberAssignment) -> None:
        """A member asked to revoke has its rebalance timeout to do it, or it is fenced."""
        if after.state != MemberState.UNREVOKED_PARTITIONS:
            self._cancel_rebalance(group_id, member.member_id)
            return
        if before is not None and before.state == after.state and before.member_epoch == after.member_epoch:
            return
        timeout_ms = member.rebalance_timeout_ms if member.rebalance_timeout_ms > 0 else self.session_timeout_ms(group_id)
        self._rebalance_epochs[(group_id, member.member_id)] = after.member_epoch
        self.c._timers.set(("cg-rebalance", group_id, member.member_id), trio.current_time() + timeout_ms / 1000)

    def on_timer(self, key: tuple) -> None:
        kind, group_id, member_id = key
        if kind == "cg-session":
            self.c._spawn(self._fence_later, group_id, member_id,
                          f"timed out after {self.session_timeout_ms(group_id)} ms without a heartbeat")
        elif kind == "cg-rebalance":
            epoch = self._rebalance_epochs.pop((group_id, member_id), None)
            if epoch is not None:
                self.c._spawn(self._fence_later, group_id, member_id,
                              "did not revoke its partitions within its rebalance timeout", epoch)

    def arm_loaded(self, groups: list[ConsumerGroup]) -> None:
        """Loaded groups' members get a full session to heartbeat again (as Kafka does)."""
        if self.c._nursery is None:
            self._to_arm.extend((g.group_id, mid) for g in groups for mid in g.members)
            return
        for group in groups:
            for member_id in group.members:
                self._arm_session(group.group_id, member_id)

    def start(self) -> None:
        for group_id, member_id in self._to_arm:
            self._arm_session(group_id, member_id)
        self._to_arm.clear()

    # ------------------------------------------------------------------ offsets, admin
    @staticmethod
    def commit_check(group: ConsumerGroup, member_epoch: int, member_id: str, transactional: bool) -> ErrorCode:
        """Kafka's ConsumerGroup.validateOffsetCommit: a commit from outside the group
        (epoch < 0) only for an empty group; a member commits at its current epoch."""
        if group.dead:
            return E.COORDINATOR_NOT_AVAILABLE
        if member_epoch < 0 and not group.members:
            return E.NONE  # Kafka: the admin client or a consumer without group management
        member = group.members.get(member_id)
        if member is None:
            return E.UNKNOWN_MEMBER_ID if (member_id or group.members) else E.NONE
        if member_epoch != member.member_epoch:
            classic = member.classic is not None  # a classic client knows generations, not epochs
            return E.ILLEGAL_GENERATION if transactional or classic else E.STALE_MEMBER_EPOCH
        return E.NONE

    @staticmethod
    def fetch_check(group: ConsumerGroup, member_id: str | None, member_epoch: int) -> ErrorCode:
        """Kafka's ConsumerGroup.validateOffsetFetch (OffsetFetch v9 member id and epoch)."""
        if member_epoch < 0 and not member_id:
            return E.NONE
        member = group.members.get(member_id or "")
        if member is None:
            return E.UNKNOWN_MEMBER_ID
        if member_epoch != member.member_epoch:
            return E.STALE_MEMBER_EPOCH
        return E.NONE

    def assignor_name(self, group: ConsumerGroup) -> str:
        return self._preferred_assignor(group.members)
