"""Static membership (KIP-345): group.instance.id survives restarts without rebalances."""

from __future__ import annotations

import re

import trio

from tests.groups.conftest import SESSION_MS, consumer_subscription
from server.groups import GroupState
from wire.errors import ErrorCode as E

S = GroupState


async def static_group(env, instances: list[str], group: str = "g", **kw):
    """Static members join one at a time (no MEMBER_ID_REQUIRED for them) and sync.
    Returns (generation, {instance: member_id}, leader instance)."""
    ids: dict[str, str] = {}
    for inst in instances:
        newcomer = env.join_bg(group, instance=inst, client_id=inst, **kw)
        await trio.sleep(0.01)
        rejoins = {i: env.join_bg(group, m, instance=i, client_id=i, **kw) for i, m in ids.items()}
        results = {i: await c.wait() for i, c in rejoins.items()}
        results[inst] = await newcomer.wait()
        assert all(r.error == E.NONE for r in results.values()), results
        gen = results[inst].generation_id
        leader = results[inst].leader_id
        ids = {i: r.member_id for i, r in results.items()}
        assignments = {m: f"assignment-of-{i}".encode() for i, m in ids.items()}
        syncs = [env.sync_bg(group, m, gen, assignments if m == leader else None, instance=i) for i, m in ids.items()]
        for s in syncs:
            assert (await s.wait()).error == E.NONE
    leader_instance = next(i for i, m in ids.items() if m == leader)
    return gen, ids, leader_instance


def test_static_member_joins_without_member_id_required(group_env):
    env = group_env()

    async def main(env):
        r = await env.join("g", instance="i-1")
        assert r.error == E.NONE and r.generation_id == 1
        assert r.members == [(r.member_id, "i-1", consumer_subscription("t"))]

    env.run(main)


def test_static_member_id_is_built_from_its_instance_id(group_env):
    """Kafka (ClassicGroup.generateMemberId): a static member's id is its group.instance.id, a
    dash and a UUID, also when it replaces an earlier incarnation; a dynamic member's is its
    client id, a dash and a UUID."""
    env = group_env()
    uuid_text = r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}"

    async def main(env):
        first = await env.join("g", instance="i-1", client_id="the-client")
        assert re.fullmatch("i-1-" + uuid_text, first.member_id), first.member_id
        again = await env.join("g", instance="i-1", client_id="the-client")
        assert again.member_id != first.member_id
        assert re.fullmatch("i-1-" + uuid_text, again.member_id), again.member_id
        dynamic = await env.join("g2", client_id="the-client")
        assert re.fullmatch("the-client-" + uuid_text, dynamic.member_id), dynamic.member_id

    env.run(main)


def test_static_follower_restart_gets_its_assignment_back_without_a_rebalance(group_env):
    env = group_env()

    async def main(env):
        gen, ids, leader = await static_group(env, ["i-1", "i-2", "i-3"])
        follower = next(i for i in ids if i != leader)
        old_id = ids[follower]
        # The process restarts: it lost its member id and joins with its instance id.
        r = await env.join("g", instance=follower, client_id=follower)
        assert r.error == E.NONE
        assert r.member_id != old_id
        assert r.generation_id == gen  # no rebalance
        assert r.leader_id == ids[leader] and r.members == []
        assert env.groups.groups["g"].state == S.STABLE
        synced = await env.sync("g", r.member_id, gen, instance=follower)
        assert synced.assignment == f"assignment-of-{follower}".encode()
        # The old incarnation is a zombie now.
        assert env.heartbeat("g", old_id, gen, follower) == E.FENCED_INSTANCE_ID
        assert (await env.sync("g", old_id, gen, instance=follower)).error == E.FENCED_INSTANCE_ID
        assert (await env.join("g", old_id, instance=follower)).error == E.FENCED_INSTANCE_ID
        assert env.heartbeat("g", r.member_id, gen, follower) == E.NONE
        for other in ids:
            if other != follower:
                assert env.heartbeat("g", ids[other], gen, other) == E.NONE

    env.run(main)


def test_static_leader_restart_keeps_generation_and_is_told_to_skip_assignment_on_v9(group_env):
    env = group_env()

    async def main(env):
        gen, ids, leader = await static_group(env, ["i-1", "i-2"])
        old_leader = ids[leader]
        # Before v9 the answer names the old leader id, so the new member does not assign.
        r = await env.join("g", instance=leader, client_id=leader)
        assert (r.error, r.generation_id, r.leader_id, r.skip_assignment) == (E.NONE, gen, old_leader, False)
        assert env.groups.groups["g"].leader_id == r.member_id
        # v9 (KIP-814): told it leads, with every member's metadata, and to skip assigning.
        r2 = await env.join("g", instance=leader, client_id=leader, skip_ok=True)
        assert (r2.generation_id, r2.leader_id, r2.skip_assignment) == (gen, r2.member_id, True)
        assert len(r2.members) == 2
        synced = await env.sync("g", r2.member_id, gen, instance=leader)
        assert synced.assignment == f"assignment-of-{leader}".encode()
        assert env.groups.groups["g"].state == S.STABLE

    env.run(main)


def test_static_member_that_stays_away_expires_after_its_session(group_env):
    env = group_env()

    async def main(env):
        gen, ids, leader = await static_group(env, ["i-1", "i-2"])
        other = next(i for i in ids if i != leader)
        # The leader keeps heartbeating; the other instance is down for longer than its session.
        for _ in range(int(SESSION_MS / 1000) + 1):
            await trio.sleep(1)
            env.heartbeat("g", ids[leader], gen, leader)
        group = env.groups.groups["g"]
        assert other not in group.static_members
        assert group.state == S.PREPARING_REBALANCE

    env.run(main)


def test_static_member_rejoining_with_another_protocol_rebalances(group_env):
    env = group_env()

    async def main(env):
        gen, ids, leader = await static_group(env, ["i-1"])
        sub = consumer_subscription("t")
        call = env.join_bg("g", instance="i-1", protocols=[("roundrobin", sub)])
        r = await call.wait()
        assert r.error == E.NONE and r.generation_id == gen + 1 and r.protocol_name == "roundrobin"

    env.run(main)


def test_static_member_missing_a_rebalance_stays_in_the_group(group_env):
    env = group_env()

    async def main(env):
        gen, ids, leader = await static_group(env, ["i-1", "i-2"], session_ms=30000)
        absent = next(i for i in ids if i != leader)
        # The leader rejoins; the static member does not, but keeps its place until its
        # session (30 s, longer than the 10 s rebalance timeout) runs out.
        lead = env.join_bg("g", ids[leader], instance=leader, session_ms=30000)
        r = await lead.wait()  # after the rebalance timeout
        assert r.generation_id == gen + 1
        assert sorted(m for m, _, _ in r.members) == sorted(ids.values())
        back = await env.join("g", instance=absent, client_id=absent, session_ms=30000)
        assert back.error == E.NONE

    env.run(main)


def test_leave_group_by_instance_id(group_env):
    env = group_env()

    async def main(env):
        gen, ids, leader = await static_group(env, ["i-1", "i-2"])
        other = next(i for i in ids if i != leader)
        top, errors = env.groups.leave_group("g", [("", other), ("", "nobody"), ("wrong-id", leader)])
        assert top == E.NONE
        assert errors == [E.NONE, E.UNKNOWN_MEMBER_ID, E.FENCED_INSTANCE_ID]
        assert other not in env.groups.groups["g"].static_members
        assert env.groups.groups["g"].state == S.PREPARING_REBALANCE

    env.run(main)


def test_static_replacement_while_preparing_counts_as_joined(group_env):
    env = group_env()

    async def main(env):
        gen, ids, leader = await static_group(env, ["i-1", "i-2"])
        other = next(i for i in ids if i != leader)
        lead = env.join_bg("g", ids[leader], instance=leader)
        await trio.sleep(0.1)
        # The other instance restarts mid-rebalance.
        back = env.join_bg("g", instance=other, client_id=other)
        r_lead, r_back = await lead.wait(), await back.wait()
        assert r_lead.generation_id == r_back.generation_id == gen + 1
        assert trio.current_time() < 1  # nobody waited for a timeout

    env.run(main)


def test_zombie_waiting_in_join_is_fenced_when_replaced(group_env):
    env = group_env()

    async def main(env):
        gen, ids, leader = await static_group(env, ["i-1", "i-2"])
        other = next(i for i in ids if i != leader)
        zombie = env.join_bg("g", ids[other], instance=other, topics=("t", "u"))  # starts a rebalance
        await trio.sleep(0.1)
        fresh = env.join_bg("g", instance=other, client_id=other, topics=("t", "u"))
        assert (await zombie.wait()).error == E.FENCED_INSTANCE_ID
        env.join_bg("g", ids[leader], instance=leader)
        assert (await fresh.wait()).error == E.NONE

    env.run(main)
