"""Committed offsets: commit checks, fetch, delete, retention, and the group admin calls."""

from __future__ import annotations

import trio

from tests.groups.conftest import consumer_assignment, consumer_subscription
from server.groups import CommittedOffset, GroupState
from wire.errors import ErrorCode as E

S = GroupState


async def commit(env, offsets: dict, group="g", generation=-1, member="", instance=None):
    return await env.groups.commit_offsets(
        group_id=group, generation_id=generation, member_id=member, group_instance_id=instance,
        offsets={tp: CommittedOffset(*v) if isinstance(v, tuple) else CommittedOffset(v) for tp, v in offsets.items()})


async def one_member(env, group="g", topics=("t",)):
    r = await env.join_new(group, topics=topics)
    await env.sync(group, r.member_id, r.generation_id, {r.member_id: consumer_assignment({topics[0]: [0]})})
    return r.member_id, r.generation_id


def test_simple_commit_creates_an_offsets_only_group(group_env):
    env = group_env()
    env.create_topic("t", 3)

    async def main(env):
        res = await commit(env, {("t", 0): (10, 0, "meta"), ("t", 2): 7})
        assert res == {("t", 0): E.NONE, ("t", 2): E.NONE}
        group = env.groups.groups["g"]
        assert group.state == S.EMPTY and group.protocol_type is None
        code, got = env.groups.fetch_offsets("g", [("t", 0), ("t", 1), ("t", 2)])
        assert code == E.NONE
        assert (got[("t", 0)].offset, got[("t", 0)].leader_epoch, got[("t", 0)].metadata) == (10, 0, "meta")
        assert got[("t", 1)] is None and got[("t", 2)].offset == 7
        _, everything = env.groups.fetch_offsets("g", None)
        assert sorted(everything) == [("t", 0), ("t", 2)]
        assert env.groups.fetch_offsets("unknown", [("t", 0)]) == (E.NONE, {("t", 0): None})

    env.run(main)


def test_commit_validation(group_env):
    env = group_env()
    env.create_topic("t", 1)

    async def main(env):
        res = await commit(env, {("t", 0): 3, ("t", 5): 1, ("nope", 0): 1})
        assert res == {("t", 0): E.NONE, ("t", 5): E.UNKNOWN_TOPIC_OR_PARTITION,
                       ("nope", 0): E.UNKNOWN_TOPIC_OR_PARTITION}
        res = await commit(env, {("t", 0): (1, -1, "x" * 4097)})
        assert res == {("t", 0): E.OFFSET_METADATA_TOO_LARGE}
        # A member generation for a group nobody knows comes from an older incarnation.
        assert await commit(env, {("t", 0): 1}, group="fresh", generation=3, member="m") == {
            ("t", 0): E.ILLEGAL_GENERATION}

    env.run(main)


def test_member_commits_are_checked_against_the_group(group_env):
    env = group_env()
    env.create_topic("t", 1)

    async def main(env):
        member, gen = await one_member(env)
        tp = ("t", 0)
        assert await commit(env, {tp: 5}, generation=gen, member=member) == {tp: E.NONE}
        assert await commit(env, {tp: 5}, generation=gen + 1, member=member) == {tp: E.ILLEGAL_GENERATION}
        assert await commit(env, {tp: 5}, generation=gen, member="ghost") == {tp: E.UNKNOWN_MEMBER_ID}
        # An active group refuses commits from outside it.
        assert await commit(env, {tp: 5}) == {tp: E.UNKNOWN_MEMBER_ID}
        # During PreparingRebalance the current generation may still commit (eager clients
        # commit before they rejoin); in CompletingRebalance it may not.
        other = env.join_new_bg("g", client_id="other")
        await trio.sleep(0.01)
        assert env.groups.groups["g"].state == S.PREPARING_REBALANCE
        assert await commit(env, {tp: 6}, generation=gen, member=member) == {tp: E.NONE}
        await env.join("g", member)
        await other.wait()
        assert env.groups.groups["g"].state == S.COMPLETING_REBALANCE
        assert await commit(env, {tp: 7}, generation=gen + 1, member=member) == {tp: E.REBALANCE_IN_PROGRESS}
        _, got = env.groups.fetch_offsets("g", [tp])
        assert got[tp].offset == 6

    env.run(main)


def test_fenced_static_member_cannot_commit(group_env):
    env = group_env()
    env.create_topic("t", 1)

    async def main(env):
        r = await env.join("g", instance="i")
        await env.sync("g", r.member_id, r.generation_id, {r.member_id: b""}, instance="i")
        again = await env.join("g", instance="i")  # restart
        res = await commit(env, {("t", 0): 1}, generation=r.generation_id, member=r.member_id, instance="i")
        assert res == {("t", 0): E.FENCED_INSTANCE_ID}
        res = await commit(env, {("t", 0): 1}, generation=r.generation_id, member=again.member_id, instance="i")
        assert res == {("t", 0): E.NONE}

    env.run(main)


def test_offset_delete(group_env):
    env = group_env()
    env.create_topic("t", 2)
    env.create_topic("u", 1)

    async def main(env):
        assert await env.groups.delete_offsets("nope", [("t", 0)]) == (E.GROUP_ID_NOT_FOUND, {})
        await commit(env, {("t", 0): 1, ("t", 1): 2, ("u", 0): 3})
        # Empty group: anything goes.
        assert await env.groups.delete_offsets("g", [("t", 1)]) == (E.NONE, {("t", 1): E.NONE})
        _, left = env.groups.fetch_offsets("g", None)
        assert sorted(left) == [("t", 0), ("u", 0)]
        # Active consumer group subscribed to t: t's offsets stay, u's go.
        await one_member(env, topics=("t",))
        code, res = await env.groups.delete_offsets("g", [("t", 0), ("u", 0)])
        assert code == E.NONE and res == {("t", 0): E.GROUP_SUBSCRIBED_TO_TOPIC, ("u", 0): E.NONE}
        _, left = env.groups.fetch_offsets("g", None)
        assert sorted(left) == [("t", 0)]

    env.run(main)


def test_offset_delete_on_active_non_consumer_group(group_env):
    env = group_env()
    env.create_topic("t", 1)

    async def main(env):
        r = await env.join_new("g", protocol_type="connect", protocols=[("default", b"x")])
        await env.sync("g", r.member_id, r.generation_id, {r.member_id: b""})
        assert await env.groups.delete_offsets("g", [("t", 0)]) == (E.NON_EMPTY_GROUP, {})

    env.run(main)


def test_delete_groups(group_env):
    env = group_env()
    env.create_topic("t", 1)

    async def main(env):
        await commit(env, {("t", 0): 1}, group="empty")
        await one_member(env, group="busy")
        res = await env.groups.delete_groups(["empty", "busy", "missing"])
        assert res == {"empty": E.NONE, "busy": E.NON_EMPTY_GROUP, "missing": E.GROUP_ID_NOT_FOUND}
        assert "empty" not in env.groups.groups
        assert env.groups.fetch_offsets("empty", [("t", 0)])[1] == {("t", 0): None}
        # A deleted group can be used again from scratch.
        assert await commit(env, {("t", 0): 9}, group="empty") == {("t", 0): E.NONE}

    env.run(main)


def test_list_and_describe(group_env):
    env = group_env()
    env.create_topic("t", 1)

    async def main(env):
        await commit(env, {("t", 0): 1}, group="simple")
        member, gen = await one_member(env, group="busy")
        listed = {g.group_id: str(g.state) for g in env.groups.list_groups()[1]}
        assert listed == {"simple": "Empty", "busy": "Stable"}
        assert [g.group_id for g in env.groups.list_groups(states={"stable"})[1]] == ["busy"]
        assert [g.group_id for g in env.groups.list_groups(states={"empty"}, types={"classic"})[1]] == ["simple"]
        assert env.groups.list_groups(types={"consumer"}) == (E.NONE, [])
        busy = env.groups.describe_group("busy")[1]
        assert busy.state == S.STABLE and list(busy.members) == [member]
        assert busy.members[member].metadata_for(busy.protocol_name) == consumer_subscription("t")
        assert env.groups.describe_group("missing") == (E.NONE, None)

    env.run(main)


def test_offsets_retention(group_env):
    env = group_env(offsets_retention_minutes=1, offsets_retention_check_interval_ms=1000)
    env.create_topic("t", 2)
    wall = [1_000_000_000_000]
    env.groups.now_ms = lambda: wall[0]

    async def main(env):
        await commit(env, {("t", 0): 1}, group="simple")       # per commit time
        wall[0] += 30_000
        await commit(env, {("t", 1): 1}, group="simple")
        member, gen = await one_member(env, group="consumer")  # Empty for 60 s: all at once
        await commit(env, {("t", 0): 5, ("t", 1): 5}, group="consumer", generation=gen, member=member)
        env.groups.leave_group("consumer", [(member, None)])
        assert env.groups.groups["consumer"].state == S.EMPTY
        wall[0] += 31_000  # simple t-0 is 61 s old, t-1 31 s; consumer has been Empty 31 s
        await trio.sleep(1.1)
        assert sorted(env.groups.fetch_offsets("simple", None)[1]) == [("t", 1)]
        assert len(env.groups.fetch_offsets("consumer", None)[1]) == 2
        wall[0] += 30_000
        await trio.sleep(1.1)
        assert env.groups.fetch_offsets("consumer", None)[1] == {}
        assert "consumer" not in env.groups.groups and "simple" not in env.groups.groups

    env.run(main)


def test_stable_group_keeps_offsets_of_subscribed_topics(group_env):
    env = group_env(offsets_retention_minutes=1)
    env.create_topic("t", 1)
    env.create_topic("old", 1)
    wall = [1_000_000_000_000]
    env.groups.now_ms = lambda: wall[0]

    async def main(env):
        member, gen = await one_member(env, topics=("t",))
        await commit(env, {("t", 0): 1, ("old", 0): 1}, generation=gen, member=member)
        wall[0] += 120_000
        env.heartbeat("g", member, gen)
        assert await env.groups.expire_offsets() == 1
        assert sorted(env.groups.fetch_offsets("g", None)[1]) == [("t", 0)]

    env.run(main)


def test_offset_commit_v2_retention_time_sets_an_expiry(group_env):
    """OffsetCommit v2-4's retention_time_ms gives the offsets an expire timestamp of now + it
    (Kafka's GroupCoordinatorAdapter), honoured by retention whatever offsets.retention.minutes
    says; -1 leaves the broker's retention; v1's commit_timestamp is kept as given."""
    from wire.registry import ApiKey as K

    env = group_env(offsets_retention_minutes=60)
    env.create_topic("t", 3)
    wall = [1_000_000_000_000]
    env.groups.now_ms = lambda: wall[0]

    def body(version, partition, retention=-1, commit_timestamp=-1):
        return {"group_id": "old", "generation_id_or_member_epoch": -1, "member_id": "", "retention_time_ms": retention,
                "topics": [{"name": "t", "partitions": [{"partition_index": partition, "committed_offset": 9,
                                                         "commit_timestamp": commit_timestamp,
                                                         "committed_metadata": ""}]}]}

    async def main(env):
        for version, partition, kwargs in [(2, 0, {"retention": 10_000}), (2, 1, {}),
                                           (1, 2, {"commit_timestamp": wall[0] - 5_000})]:
            r = await env.call_api(K.OFFSET_COMMIT, version, body(version, partition, **kwargs))
            assert r["topics"][0]["partitions"][0]["error_code"] == E.NONE
        offsets = env.groups.fetch_offsets("old", None)[1]
        assert (offsets[("t", 0)].expire_timestamp, offsets[("t", 1)].expire_timestamp) == (wall[0] + 10_000, -1)
        assert offsets[("t", 2)].commit_timestamp == wall[0] - 5_000
        wall[0] += 9_000
        assert await env.groups.expire_offsets() == 0
        wall[0] += 1_000
        assert await env.groups.expire_offsets() == 1  # its own expiry, long before 60 minutes
        assert sorted(env.groups.fetch_offsets("old", None)[1]) == [("t", 1), ("t", 2)]

    env.run(main)
