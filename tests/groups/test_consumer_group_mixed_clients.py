"""Classic and consumer members in one group with stock clients over real sockets (KIP-848
online upgrade and downgrade, server/groups/consumer/migration.py): confluent-kafka 2.16
consumers with group.protocol=classic are joined by one with group.protocol=consumer (the
group becomes a consumer group, all three share the topic), then that one leaves (the
group is classic again, the classic members go on); the Java client (classic) with
confluent-kafka (consumer) the same way. No partition is ever owned by two members at
once (checked in the members' own assignment callbacks) and, as every member commits
synchronously when it loses a partition, every record is consumed exactly once.
"""

from __future__ import annotations

import threading
import time
from collections import Counter

import pytest

from tests.brokerproc import BrokerProcess, raw_request
from tests.groups.test_consumer_group_clients import (
    BROKER_ARGS,
    PARTITIONS,
    RECORDS,
    ConfluentMember,
    JavaMember,
    create_topic,
    produce,
    wait_until,
)

pytest.importorskip("confluent_kafka")


@pytest.fixture
def broker(tmp_path):
    proc = BrokerProcess(tmp_path / "data", *BROKER_ARGS).start()
    yield proc
    proc.stop()


@pytest.fixture
def disabled_broker(tmp_path):
    proc = BrokerProcess(tmp_path / "data", *BROKER_ARGS, "--set", "group.consumer.migration.policy=disabled").start()
    yield proc
    proc.stop()


class Ownership:
    """Who owns which partition, as the members' callbacks say; a partition assigned to a
    member while another still owns it is a violation."""

    def __init__(self) -> None:
        self.owner: dict[int, str] = {}
        self.violations: list[str] = []
        self.lock = threading.Lock()

    def __call__(self, member, gained: set[int], lost: set[int]) -> None:
        with self.lock:
            for p in lost:
                if self.owner.get(p) == member.name:
                    del self.owner[p]
            for p in gained:
                other = self.owner.get(p)
                if other is not None and other != member.name:
                    self.violations.append(f"partition {p} assigned to {member.name} while {other} owns it")
                self.owner[p] = member.name


def group_type(port: int, group: str) -> str | None:
    from wire.registry import ApiKey

    listed = raw_request("127.0.0.1", port, ApiKey.LIST_GROUPS, 5, {"states_filter": [], "types_filter": []})
    types = {g["group_id"]: g["group_type"] for g in listed["groups"]}
    return types.get(group)


def run_upgrade_and_downgrade(broker, classic_kind, classic_names: tuple[str, str], topic: str, group: str,
                              **classic_kw) -> None:
    create_topic(broker.bootstrap, topic)
    produce(broker.bootstrap, topic, 0, RECORDS)
    ownership = Ownership()
    classic = [classic_kind(broker.bootstrap, group, topic, name, "classic", ownership, **classic_kw)
               for name in classic_names]
    members = list(classic)

    def consumed() -> Counter:
        return Counter(r for m in members for r in m.records())

    def owned_by(ms) -> list[set[int]]:
        return [m.assignment() for m in ms]

    def covers(ms) -> bool:
        owned = owned_by(ms)
        return set().union(*owned) == set(range(PARTITIONS)) and sum(map(len, owned)) == PARTITIONS

    try:
        wait_until(lambda: covers(classic) and all(owned_by(classic)), "the classic members' assignment")
        assert group_type(broker.port, group) == "classic"
        # Upgrade: a consumer-protocol member joins the classic group.
        modern = ConfluentMember(broker.bootstrap, group, topic, "modern", "consumer", ownership)
        members.append(modern)
        wait_until(lambda: group_type(broker.port, group) == "consumer", "the group to become a consumer group")
        produce(broker.bootstrap, topic, RECORDS, RECORDS)
        wait_until(lambda: sum(consumed().values()) >= 2 * RECORDS and covers(members)
                   and all(owned_by(members)), "every record consumed and every member owning partitions")
        described = raw_request("127.0.0.1", broker.port, 69, 0, {"group_ids": [group],
                                                                  "include_authorized_operations": False})
        [g] = described["groups"]
        assert g["error_code"] == 0 and len(g["members"]) == 3, g
        # The classic members keep working in the consumer group.
        before = {m.name: len(m.records()) for m in classic}
        produce(broker.bootstrap, topic, 2 * RECORDS, RECORDS)
        wait_until(lambda: sum(consumed().values()) >= 3 * RECORDS, "the third batch consumed")
        assert all(len(m.records()) > before[m.name] for m in classic if m.assignment())
        # Downgrade: the consumer-protocol member leaves, the classic members go on.
        modern.leave()
        wait_until(lambda: group_type(broker.port, group) == "classic", "the group to become classic again")
        produce(broker.bootstrap, topic, 3 * RECORDS, RECORDS)
        wait_until(lambda: sum(consumed().values()) >= 4 * RECORDS and covers(classic),
                   "the classic members taking every partition and consuming the fourth batch")
        time.sleep(1)
        counts = consumed()
        assert len(counts) == 4 * RECORDS and max(counts.values()) == 1, (
            "a record was consumed twice", [c for c, n in counts.items() if n > 1][:10])
        assert not ownership.violations, ownership.violations
        assert not [e for m in members for e in m.errors if "Unsupported" in e or "not support" in e]
    finally:
        for m in members:
            m.kill()


@pytest.mark.timeout(400)
def test_confluent_classic_members_upgrade_and_downgrade(broker):
    run_upgrade_and_downgrade(broker, ConfluentMember, ("classic-0", "classic-1"), "mixed-cf", "mixed-cf-group")


@pytest.mark.timeout(400)
def test_confluent_cooperative_classic_members_upgrade_and_downgrade(broker):
    """cooperative-sticky classic members keep their partitions across a rejoin and report
    them in their subscription: the coordinator asks them to revoke only what moves."""
    run_upgrade_and_downgrade(broker, ConfluentMember, ("coop-0", "coop-1"), "mixed-coop", "mixed-coop-group",
                              config={"partition.assignment.strategy": "cooperative-sticky"})


@pytest.mark.timeout(400)
def test_java_classic_members_with_a_confluent_consumer_member(broker):
    run_upgrade_and_downgrade(broker, JavaMember, ("java-0", "java-1"), "mixed-java", "mixed-java-group")


@pytest.mark.timeout(120)
def test_policy_disabled_keeps_one_type_per_group(disabled_broker):
    """group.consumer.migration.policy=disabled: a consumer-protocol member cannot join a
    live classic group (GROUP_ID_NOT_FOUND), and the classic members are undisturbed."""
    from wire.registry import ApiKey

    broker = disabled_broker
    create_topic(broker.bootstrap, "nomix")
    classic = ConfluentMember(broker.bootstrap, "nomix-group", "nomix", "classic-0", "classic")
    try:
        wait_until(lambda: len(classic.assignment()) == PARTITIONS, "the classic member's assignment")
        resp = raw_request("127.0.0.1", broker.port, ApiKey.CONSUMER_GROUP_HEARTBEAT, 1, {
            "group_id": "nomix-group", "member_id": "m-1", "member_epoch": 0, "instance_id": None, "rack_id": None,
            "rebalance_timeout_ms": 30000, "subscribed_topic_names": ["nomix"], "subscribed_topic_regex": None,
            "server_assignor": None, "topic_partitions": []})
        assert resp["error_code"] == 69, resp  # GROUP_ID_NOT_FOUND
        assert group_type(broker.port, "nomix-group") == "classic"
        time.sleep(2)
        assert len(classic.assignment()) == PARTITIONS
    finally:
        classic.kill()


@pytest.mark.timeout(300)
def test_static_classic_member_replaced_inside_a_consumer_group(broker):
    """A static classic member (group.instance.id) that restarts inside a consumer group is
    replaced at once by its new incarnation, which inherits its partitions (Kafka's
    classicGroupJoinToConsumerGroup); the consumer-protocol member keeps its own. Before,
    the new incarnation was refused UNRELEASED_INSTANCE_ID until the old one's session
    timed out (30 s here)."""
    topic, group = "mixed-static", "mixed-static-group"
    create_topic(broker.bootstrap, topic)
    produce(broker.bootstrap, topic, 0, RECORDS)
    static = {"group.instance.id": "static-1", "session.timeout.ms": 30000}
    modern = ConfluentMember(broker.bootstrap, group, topic, "modern", "consumer")
    members = [modern]
    try:
        wait_until(lambda: len(modern.assignment()) == PARTITIONS, "the consumer member's assignment")
        first = ConfluentMember(broker.bootstrap, group, topic, "static-a", "classic", config=static)
        members.append(first)
        wait_until(lambda: len(first.assignment()) == PARTITIONS // 2 and len(modern.assignment()) == PARTITIONS // 2,
                   "the static classic member's share")
        held = first.assignment()
        # A static member does not leave on close: the group still holds its instance id.
        first.leave()
        again = ConfluentMember(broker.bootstrap, group, topic, "static-b", "classic", config=static)
        members.append(again)
        started = time.monotonic()
        wait_until(lambda: again.assignment() == held, "the new incarnation taking the old one's partitions")
        assert time.monotonic() - started < 20, "replaced only after the old session timed out"
        assert modern.assignment() == set(range(PARTITIONS)) - held
        assert not [e for e in again.errors if "UNRELEASED" in e.upper()], again.errors
        produce(broker.bootstrap, topic, RECORDS, RECORDS)
        wait_until(lambda: len({r for m in members for r in m.records()}) >= 2 * RECORDS, "every record consumed")
        time.sleep(1)
        counts = Counter(r for m in members for r in m.records())
        assert len(counts) == 2 * RECORDS and max(counts.values()) == 1
    finally:
        for m in members:
            m.kill()
