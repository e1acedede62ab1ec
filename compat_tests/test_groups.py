"""Consumer groups: assignment, rebalances, committed offsets, group admin.

Members run in the background like applications (see `GroupMember`); the scenarios wait
for the assignment they expect, bounded by a few session timeouts (6 s here, because Tansu
delays each JoinGroup by about half of it).
"""

from __future__ import annotations

import time

import pytest

from compat_tests.clients.base import ClientError, Message, NotSupportedByClient
from compat_tests.clients.process_member import spawn_member
from compat_tests.helpers import assert_exact, make_topic, wait_until

REBALANCE_TIMEOUT_S = 45


def _wait_assignment(members, expected_sizes, topic, partitions, what):
    """Wait until the members' assignments are disjoint, cover every partition and have the
    expected sizes (in member order), and stay so for a second."""
    everything = {(topic, p) for p in range(partitions)}

    def settled():
        sets = [m.assignment() for m in members]
        union = set().union(*sets)
        ok = (sum(len(s) for s in sets) == len(union) and union == everything
              and [len(s) for s in sets] == expected_sizes)
        return sets if ok else None

    try:
        wait_until(settled, REBALANCE_TIMEOUT_S, 0.2, what)
        time.sleep(1.0)
        sets = wait_until(settled, 5, 0.2, what + " (stable)")
    except TimeoutError as exc:
        state = [(sorted(m.assignment()), m.error()) for m in members]
        raise AssertionError(f"{what}: assignments/errors {state}") from exc
    return sets


def _leave_all(members):
    for m in members:
        try:
            m.leave()
        except Exception:  # noqa: BLE001 - best effort cleanup
            pass


def _received(member, values, timeout=30):
    wait_until(lambda: values <= {r.value for r in member.records()}, timeout, 0.2,
               f"{len(values)} records at a member")


def test_group_single_member(client, setup_client, topic_name, group_name):
    make_topic(client, setup_client, topic_name, 4)
    member = client.group_member([topic_name], group_name)
    try:
        _wait_assignment([member], [4], topic_name, 4, "one member owning all 4 partitions")
        messages = [Message(b"p%d" % p, partition=p) for p in range(4)]
        setup_client.produce(topic_name, messages)
        wait_until(lambda: len(member.records()) >= 4, 30, 0.2, "4 records")
        time.sleep(0.5)
        assert_exact(member.records(), {p: [messages[p]] for p in range(4)})
    finally:
        member.leave()


def test_group_three_members_six_partitions(client, setup_client, topic_name, group_name):
    make_topic(client, setup_client, topic_name, 6)
    members = [client.group_member([topic_name], group_name) for _ in range(3)]
    try:
        sets = _wait_assignment(members, [2, 2, 2], topic_name, 6,
                                "three members with two partitions each, none twice")
        messages = [Message(b"m%d-%d" % (p, i), partition=p) for p in range(6) for i in range(5)]
        setup_client.produce(topic_name, messages)
        for member, owned in zip(members, sets):
            parts = sorted(p for _t, p in owned)
            wait_until(lambda m=member: len(m.records()) >= 10, 30, 0.2, "10 records per member")
            time.sleep(0.3)
            assert_exact(member.records(), {p: messages[p * 5:(p + 1) * 5] for p in parts})
    finally:
        _leave_all(members)


def test_group_member_leaves(client, setup_client, topic_name, group_name):
    """A member that leaves (LeaveGroup) triggers a rebalance; its partitions move."""
    make_topic(client, setup_client, topic_name, 4)
    a = client.group_member([topic_name], group_name)
    b = client.group_member([topic_name], group_name)
    try:
        _wait_assignment([a, b], [2, 2], topic_name, 4, "two members with two partitions each")
        a.leave()
        _wait_assignment([b], [4], topic_name, 4, "the remaining member owning all 4")
        late = [Message(b"after-%d" % p, partition=p) for p in range(4)]
        setup_client.produce(topic_name, late)
        _received(b, {m.value for m in late})
    finally:
        _leave_all([a, b])


def test_group_member_dies(client_name, client, broker, setup_client, topic_name, group_name):
    """A member killed with SIGKILL (no LeaveGroup) is dropped after the session timeout."""
    make_topic(client, setup_client, topic_name, 4)
    doomed = spawn_member(client_name, broker.bootstrap, [topic_name], group_name)
    survivor = client.group_member([topic_name], group_name)
    try:
        _wait_assignment([doomed, survivor], [2, 2], topic_name, 4,
                         "two members with two partitions each")
        doomed.kill()
        _wait_assignment([survivor], [4], topic_name, 4, "the survivor owning all 4")
        late = [Message(b"after-%d" % p, partition=p) for p in range(4)]
        setup_client.produce(topic_name, late)
        _received(survivor, {m.value for m in late})
    finally:
        _leave_all([survivor, doomed])


def test_committed_offsets_survive_consumer_restart(client, setup_client, topic_name,
                                                     group_name):
    make_topic(client, setup_client, topic_name, 1)
    messages = [Message(b"c%d" % i, partition=0) for i in range(10)]
    setup_client.produce(topic_name, messages)
    first = client.consume(topic_name, 4, group=group_name)
    assert_exact(first, {0: messages[:4]})
    try:
        assert client.committed(group_name, topic_name, [0]) == {0: 4}
    except NotSupportedByClient:
        assert setup_client.committed(group_name, topic_name, [0]) == {0: 4}
    second = client.consume(topic_name, 6, group=group_name)
    assert_exact(second, {0: messages[4:]}, {0: 4})
    assert client.consume(topic_name, 1, group=group_name, timeout=4) == []


def test_explicit_commit_and_committed(client, setup_client, topic_name, group_name):
    """Commit chosen offsets without consuming (what Spark-like apps and tools do), read them
    back, and a group consumer starts there."""
    make_topic(client, setup_client, topic_name, 2)
    messages = [Message(b"e%d-%d" % (p, i), partition=p) for p in range(2) for i in range(5)]
    setup_client.produce(topic_name, messages)
    client.commit(group_name, topic_name, {0: 3, 1: 1})
    assert client.committed(group_name, topic_name, [0, 1]) == {0: 3, 1: 1}
    records = client.consume(topic_name, 6, group=group_name)
    assert_exact(records, {0: messages[3:5], 1: messages[6:10]}, {0: 3, 1: 1})


def test_two_groups_each_see_all(client, setup_client, topic_name):
    make_topic(client, setup_client, topic_name, 2)
    messages = [Message(b"two-%d-%d" % (p, i), partition=p) for p in range(2) for i in range(10)]
    setup_client.produce(topic_name, messages)
    expected = {p: messages[p * 10:(p + 1) * 10] for p in range(2)}
    for group in (f"{topic_name}-g1", f"{topic_name}-g2"):
        assert_exact(client.consume(topic_name, 20, group=group), expected)


def test_list_and_describe_groups(client, setup_client, topic_name, group_name):
    make_topic(client, setup_client, topic_name, 3)
    member = client.group_member([topic_name], group_name)
    try:
        _wait_assignment([member], [3], topic_name, 3, "one member owning all 3 partitions")
        assert group_name in client.list_groups()
        info = client.describe_group(group_name)
        assert info.state == "Stable", info
        assert info.protocol_type == "consumer", info
        assert len(info.members) == 1, info
        assert info.members[0].assignment == {(topic_name, p) for p in range(3)}, info
    finally:
        member.leave()
    info = wait_until(lambda: (lambda i: i if i.state == "Empty" else None)(
        client.describe_group(group_name)), 20, 0.5, "group Empty after the member left")
    assert info.members == []


def test_delete_group(client, setup_client, topic_name, group_name):
    make_topic(client, setup_client, topic_name, 1)
    setup_client.produce(topic_name, [Message(b"d%d" % i, partition=0) for i in range(3)])
    assert len(setup_client.consume(topic_name, 3, group=group_name)) == 3
    assert setup_client.committed(group_name, topic_name, [0]) == {0: 3}
    client.delete_group(group_name)
    assert group_name not in setup_client.list_groups()
    assert setup_client.committed(group_name, topic_name, [0]) == {0: None}
    with pytest.raises(ClientError) as gone:
        client.delete_group(group_name)
    assert gone.value.code == 69, f"{gone.value} (expected GROUP_ID_NOT_FOUND)"
