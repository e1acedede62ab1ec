"""Transactional offset commits (TxnOffsetCommit): pending until the producer's marker,
Kafka's ordering against plain commits, require_stable, and replay after a restart.

The transaction side is played by the test: it appends COMMIT/ABORT markers to the
group's __consumer_offsets partition and calls `complete_txn`, as the transaction
coordinator does after writing them.
"""

from __future__ import annotations

import pytest

from tests.groups.conftest import consumer_assignment
from server.groups import CommittedOffset, GroupState
from server.groups.coordinator import OFFSETS_TOPIC
from wire.errors import ErrorCode as E
from wire.records import build_txn_marker
from wire.registry import ApiKey as K

S = GroupState
PID, EPOCH = 4000, 3


def offsets_of(values: dict) -> dict:
    return {tp: CommittedOffset(*v) if isinstance(v, tuple) else CommittedOffset(v) for tp, v in values.items()}


async def txn_commit(env, values: dict, *, group="g", pid=PID, epoch=EPOCH, generation=-1, member="", instance=None):
    return await env.groups.commit_txn_offsets(group_id=group, producer_id=pid, producer_epoch=epoch,
                                               generation_id=generation, member_id=member,
                                               group_instance_id=instance, offsets=offsets_of(values))


async def plain_commit(env, values: dict, *, group="g", generation=-1, member=""):
    return await env.groups.commit_offsets(group_id=group, generation_id=generation, member_id=member,
                                           group_instance_id=None, offsets=offsets_of(values))


async def end_txn(env, commit: bool, *, group="g", pid=PID, epoch=EPOCH, notify=True) -> int:
    """Write the marker to the group's offsets partition, then tell the coordinator."""
    partition = env.groups.partition_for(group)
    marker = build_txn_marker(commit, producer_id=pid, producer_epoch=epoch, timestamp=env.groups.now_ms())
    await env.broker.append((OFFSETS_TOPIC, partition), marker, 1)
    if notify:
        env.groups.complete_txn(partition, pid, commit)
    return partition


def visible(env, group="g") -> dict:
    _, offsets = env.groups.fetch_offsets(group, None)
    return {tp: o.offset for tp, o in offsets.items()}


def test_pending_offsets_are_written_as_one_transactional_batch_and_visible_only_after_commit(group_env):
    env = group_env()
    env.create_topic("t", 2)

    async def main(env):
        res = await txn_commit(env, {("t", 0): 5, ("t", 1): (6, 2, "md")})
        assert res == {("t", 0): E.NONE, ("t", 1): E.NONE}
        group = env.groups.groups["g"]
        assert group.state == S.EMPTY  # created for the commit, as Kafka does
        plog = env.broker.logs.log(OFFSETS_TOPIC, env.groups.partition_for("g"))
        [(header, _data)] = list(plog.iter_batches(plog.log_start_offset))
        assert header.is_transactional and not header.is_control
        assert (header.producer_id, header.producer_epoch, header.last_offset_delta) == (PID, EPOCH, 1)
        assert visible(env) == {}
        assert env.groups.fetch_offsets("g", [("t", 0)])[1] == {("t", 0): None}
        assert env.groups.pending_txn_partitions("g") == {("t", 0), ("t", 1)}
        await end_txn(env, True)
        assert visible(env) == {("t", 0): 5, ("t", 1): 6}
        got = env.groups.fetch_offsets("g", [("t", 1)])[1][("t", 1)]
        assert (got.leader_epoch, got.metadata) == (2, "md")
        assert env.groups.pending_txn_partitions("g") == set()

    env.run(main)


def test_abort_drops_pending_offsets_and_keeps_the_committed_ones(group_env):
    env = group_env()
    env.create_topic("t", 1)

    async def main(env):
        await plain_commit(env, {("t", 0): 3})
        await txn_commit(env, {("t", 0): 7})
        assert visible(env) == {("t", 0): 3}
        await end_txn(env, False)
        assert visible(env) == {("t", 0): 3}
        assert env.groups.pending_txn_partitions("g") == set()
        # The producer's next transaction starts afresh.
        await txn_commit(env, {("t", 0): 9})
        await end_txn(env, True)
        assert visible(env) == {("t", 0): 9}

    env.run(main)


def test_a_plain_commit_after_the_transactional_one_wins_and_before_it_loses(group_env):
    env = group_env()
    env.create_topic("t", 2)

    async def main(env):
        # t-0: transactional 7, then plain 9 -> the COMMIT marker must not go back to 7.
        # t-1: plain 9, then transactional 7 -> the COMMIT makes it 7.
        await txn_commit(env, {("t", 0): 7})
        await plain_commit(env, {("t", 0): 9, ("t", 1): 9})
        await txn_commit(env, {("t", 1): 7})
        assert visible(env) == {("t", 0): 9, ("t", 1): 9}
        await end_txn(env, True)
        assert visible(env) == {("t", 0): 9, ("t", 1): 7}

    env.run(main)
    env.restart()  # replay applies the same rule from the log positions
    assert visible(env) == {("t", 0): 9, ("t", 1): 7}


def test_markers_complete_only_their_producer_on_their_partition(group_env):
    env = group_env(offsets_topic_num_partitions=4)
    env.create_topic("t", 1)
    groups = ["g0", "g1", "g2", "g3", "g4", "g5"]
    by_partition: dict[int, list[str]] = {}

    async def main(env):
        for name in groups:
            by_partition.setdefault(env.groups.partition_for(name), []).append(name)
        a, b = [names[0] for names in by_partition.values()][:2]
        await txn_commit(env, {("t", 0): 1}, group=a)
        await txn_commit(env, {("t", 0): 2}, group=b)
        await txn_commit(env, {("t", 0): 3}, group=a, pid=PID + 1)
        await end_txn(env, True, group=a)  # PID's marker on a's partition only
        assert visible(env, a) == {("t", 0): 1}
        assert visible(env, b) == {}
        assert env.groups.pending_txn_partitions(a) == {("t", 0)}  # PID + 1 is still open
        await end_txn(env, True, group=b)
        assert visible(env, b) == {("t", 0): 2}

    env.run(main)


def test_require_stable_answers_unstable_while_a_transaction_is_open(group_env):
    env = group_env()
    env.create_topic("t", 2)

    def fetch_body(version: int, require_stable: bool) -> dict:
        topics = [{"name": "t", "partition_indexes": [0, 1]}]
        if version >= 8:
            return {"groups": [{"group_id": "g", "topics": topics}], "require_stable": require_stable}
        return {"group_id": "g", "topics": topics, "require_stable": require_stable}

    async def fetch(env, version: int, require_stable: bool) -> dict:
        r = await env.call_api(K.OFFSET_FETCH, version, fetch_body(version, require_stable))
        topics = r["groups"][0]["topics"] if version >= 8 else r["topics"]
        return {(t["name"], p["partition_index"]): (p["committed_offset"], p["error_code"])
                for t in topics for p in t["partitions"]}

    async def main(env):
        await plain_commit(env, {("t", 0): 3, ("t", 1): 4})
        await txn_commit(env, {("t", 0): 7})
        for version in (7, 8, 9):
            assert await fetch(env, version, True) == {("t", 0): (-1, E.UNSTABLE_OFFSET_COMMIT), ("t", 1): (4, 0)}
            assert await fetch(env, version, False) == {("t", 0): (3, 0), ("t", 1): (4, 0)}
        assert await fetch(env, 6, False) == {("t", 0): (3, 0), ("t", 1): (4, 0)}
        await end_txn(env, True)
        assert await fetch(env, 7, True) == {("t", 0): (7, 0), ("t", 1): (4, 0)}

    env.run(main)


def test_replay_resolves_pending_offsets_by_the_markers_in_the_log(group_env):
    env = group_env()
    env.create_topic("t", 3)

    async def before(env):
        await plain_commit(env, {("t", 0): 1, ("t", 1): 1, ("t", 2): 1})
        await txn_commit(env, {("t", 0): 10}, pid=100)   # committed
        await txn_commit(env, {("t", 1): 20}, pid=200)   # aborted
        await txn_commit(env, {("t", 2): 30}, pid=300)   # no marker yet
        await txn_commit(env, {("t", 0): 40}, group="only-txn", pid=300)  # a group only a transaction knows
        await end_txn(env, True, pid=100, notify=False)
        await end_txn(env, False, pid=200, notify=False)

    env.run(before)
    env.restart()
    assert visible(env) == {("t", 0): 10, ("t", 1): 1, ("t", 2): 1}
    assert env.groups.pending_txn_partitions("g") == {("t", 2)}
    assert env.groups.groups["only-txn"].state == S.EMPTY
    assert env.groups.pending_txn_partitions("only-txn") == {("t", 0)}

    async def after(env):
        # The transaction coordinator completes the open one later.
        await end_txn(env, True, pid=300)
        await end_txn(env, True, group="only-txn", pid=300, notify=False)  # same partition or not
        env.groups.complete_txn(env.groups.partition_for("only-txn"), 300, True)
        assert visible(env) == {("t", 0): 10, ("t", 1): 1, ("t", 2): 30}
        assert visible(env, "only-txn") == {("t", 0): 40}

    env.run(after)
    env.restart()
    assert visible(env) == {("t", 0): 10, ("t", 1): 1, ("t", 2): 30}
    assert visible(env, "only-txn") == {("t", 0): 40}


def test_kip447_member_checks(group_env):
    env = group_env()
    env.create_topic("t", 1)

    async def main(env):
        r = await env.join_new("g", instance="i-1")
        await env.sync("g", r.member_id, r.generation_id, {r.member_id: consumer_assignment({"t": [0]})},
                       instance="i-1")
        gen, member = r.generation_id, r.member_id
        assert await txn_commit(env, {("t", 0): 1}, generation=gen + 1, member=member) == {
            ("t", 0): E.ILLEGAL_GENERATION}
        assert await txn_commit(env, {("t", 0): 1}, generation=gen, member="ghost") == {
            ("t", 0): E.UNKNOWN_MEMBER_ID}
        assert await txn_commit(env, {("t", 0): 1}, generation=gen, member="ghost", instance="i-1") == {
            ("t", 0): E.FENCED_INSTANCE_ID}
        assert await txn_commit(env, {("t", 0): 1}, generation=gen, member=member, instance="i-2") == {
            ("t", 0): E.UNKNOWN_MEMBER_ID}
        assert env.groups.pending_txn_partitions("g") == set()
        assert await txn_commit(env, {("t", 0): 1}, generation=gen, member=member, instance="i-1") == {
            ("t", 0): E.NONE}
        # v0-2 producers send no group metadata: accepted for a group with members, as Kafka does.
        assert await txn_commit(env, {("t", 0): 2}, pid=PID + 1) == {("t", 0): E.NONE}
        # Naming a member of a group that does not exist is refused, and creates nothing.
        assert await txn_commit(env, {("t", 0): 1}, group="new", generation=1, member="m") == {
            ("t", 0): E.UNKNOWN_MEMBER_ID}
        assert "new" not in env.groups.groups

    env.run(main)


def test_partition_checks(group_env):
    env = group_env()
    env.create_topic("t", 1)

    async def main(env):
        res = await txn_commit(env, {("t", 0): 1, ("t", 5): 1, ("nope", 0): 1})
        assert res == {("t", 0): E.NONE, ("t", 5): E.UNKNOWN_TOPIC_OR_PARTITION,
                       ("nope", 0): E.UNKNOWN_TOPIC_OR_PARTITION}
        assert await txn_commit(env, {("t", 0): (1, -1, "x" * 5000)}, group="big") == {
            ("t", 0): E.OFFSET_METADATA_TOO_LARGE}
        assert "big" not in env.groups.groups

    env.run(main)


def test_retention_keeps_offsets_and_groups_with_an_open_transaction(group_env):
    env = group_env(offsets_retention_minutes=1)
    env.create_topic("t", 2)
    wall = [1_000_000_000_000]
    env.groups.now_ms = lambda: wall[0]

    async def main(env):
        await plain_commit(env, {("t", 0): 1, ("t", 1): 1}, group="simple")
        await txn_commit(env, {("t", 0): 5}, group="simple")
        await txn_commit(env, {("t", 0): 6}, group="txn-only", pid=PID + 1)
        wall[0] += 120_000
        assert await env.groups.expire_offsets() == 1  # simple's t-1; t-0 waits for the transaction
        assert visible(env, "simple") == {("t", 0): 1}
        assert "txn-only" in env.groups.groups and "simple" in env.groups.groups
        await end_txn(env, False, group="txn-only", pid=PID + 1)
        await end_txn(env, True, group="simple")
        assert visible(env, "simple") == {("t", 0): 5}
        await env.groups.expire_offsets()
        assert "txn-only" not in env.groups.groups  # nothing left to keep it
        wall[0] += 120_000
        await env.groups.expire_offsets()
        assert "simple" not in env.groups.groups

    env.run(main)


@pytest.mark.parametrize("how", ["delete_offsets", "delete_groups", "forget_topic"])
def test_deleted_offsets_do_not_come_back_at_the_commit_marker(group_env, how):
    env = group_env()
    env.create_topic("t", 2)

    async def before(env):
        await plain_commit(env, {("t", 1): 2})
        await txn_commit(env, {("t", 0): 5})
        if how == "delete_offsets":
            assert await env.groups.delete_offsets("g", [("t", 0)]) == (E.NONE, {("t", 0): E.NONE})
        elif how == "delete_groups":
            assert await env.groups.delete_groups(["g"]) == {"g": E.NONE}
        else:
            assert await env.groups.forget_topic("t") == 2  # t-1 committed, t-0 pending
        assert env.groups.pending_txn_partitions("g") == set()
        await end_txn(env, True)
        assert ("t", 0) not in visible(env)

    env.run(before)
    env.restart()
    assert ("t", 0) not in visible(env)
    assert env.groups.pending_txn_partitions("g") == set()
    if how == "delete_offsets":
        assert visible(env) == {("t", 1): 2}


def test_a_failed_write_leaves_nothing_pending(group_env):
    env = group_env(message_max_bytes=2000)  # the offsets topic takes it as max.message.bytes
    env.create_topic("t", 3)

    async def main(env):
        big = {("t", p): (p, -1, "m" * 1000) for p in range(3)}
        assert await txn_commit(env, big) == {tp: E.INVALID_COMMIT_OFFSET_SIZE for tp in big}
        assert env.groups.pending_txn_partitions("g") == set()
        assert env.groups.groups["g"].pending_txn_offsets == {}

    env.run(main)
