"""The classic group protocol, driven through every state and timeout on a fake clock.

Each test is a small story told with the coordinator's own calls (JoinGroup and SyncGroup
block, so they run as background calls), on a real broker whose timers run on trio's
MockClock: `await trio.sleep(5.9)` passes 5.9 s of group time instantly.
"""

from __future__ import annotations

import trio

from tests.groups.conftest import REBALANCE_MS, SESSION_MS, consumer_assignment, consumer_subscription
from server.groups import GroupState
from wire.errors import ErrorCode as E

S = GroupState
SESSION_S = SESSION_MS / 1000
REBALANCE_S = REBALANCE_MS / 1000


def state(env, group="g"):
    return env.groups.groups[group].state


async def stable_group(env, n: int, group: str = "g", **kw) -> tuple[int, list[str]]:
    """n members joined and synced, added one at a time the way clients do it (the new
    one joins, the others notice the rebalance and rejoin); returns (generation, member
    ids with the leader first)."""
    ids: list[str] = []
    for i in range(n):
        newcomer = env.join_new_bg(group, client_id=f"c{i}", **kw)
        await trio.sleep(0.01)
        rejoins = [env.join_bg(group, m, **kw) for m in ids]
        results = [await c.wait() for c in rejoins] + [await newcomer.wait()]
        gen = results[0].generation_id
        leader = next(r.leader_id for r in results)
        assert all(r.error == E.NONE and r.generation_id == gen for r in results), results
        assignments = {r.member_id: consumer_assignment({"t": [j]}) for j, r in enumerate(results)}
        syncs = [env.sync_bg(group, r.member_id, gen, assignments if r.member_id == leader else None, **{
            k: v for k, v in kw.items() if k == "instance"}) for r in results]
        for s in syncs:
            assert (await s.wait()).error == E.NONE
        ids = sorted((r.member_id for r in results), key=lambda m: m != leader)
    return gen, ids


async def rejoin(env, *member_ids, group="g"):
    """The members rejoin, the first (the leader) first: a follower that rejoins a Stable
    group with unchanged metadata is just told the current generation."""
    first = env.join_bg(group, member_ids[0])
    await trio.sleep(0.01)
    rest = [env.join_bg(group, m) for m in member_ids[1:]]
    return [await first.wait()] + [await c.wait() for c in rest]


def test_first_join_requires_a_member_id_then_forms_generation_one(group_env):
    env = group_env()

    async def main(env):
        first = await env.join("g")
        assert first.error == E.MEMBER_ID_REQUIRED
        assert first.member_id.startswith("c-")
        assert state(env) == S.EMPTY  # a pending id changes nothing yet
        joined = await env.join("g", first.member_id)
        assert joined.error == E.NONE
        assert joined.generation_id == 1
        assert joined.leader_id == joined.member_id
        assert joined.protocol_name == "range" and joined.protocol_type == "consumer"
        assert joined.members == [(joined.member_id, None, consumer_subscription("t"))]
        assert state(env) == S.COMPLETING_REBALANCE
        synced = await env.sync("g", joined.member_id, 1, {joined.member_id: b"A"})
        assert (synced.error, synced.assignment) == (E.NONE, b"A")
        assert state(env) == S.STABLE
        assert env.heartbeat("g", joined.member_id, 1) == E.NONE

    env.run(main)


def test_old_join_versions_get_an_id_at_once(group_env):
    env = group_env()

    async def main(env):
        joined = await env.join("g", require_known=False)
        assert joined.error == E.NONE and joined.generation_id == 1 and joined.member_id

    env.run(main)


def test_second_member_triggers_rebalance_and_both_get_the_next_generation(group_env):
    env = group_env()

    async def main(env):
        gen, (a,) = await stable_group(env, 1)
        b_id = (await env.join("g", client_id="b")).member_id
        b_join = env.join_bg("g", b_id, client_id="b")
        await trio.sleep(0.1)
        assert state(env) == S.PREPARING_REBALANCE
        assert not b_join.done.is_set()  # waits for a to rejoin
        assert env.heartbeat("g", a, gen) == E.REBALANCE_IN_PROGRESS
        a_join = env.join_bg("g", a)
        ra, rb = await a_join.wait(), await b_join.wait()
        assert ra.generation_id == rb.generation_id == gen + 1
        assert ra.leader_id == rb.leader_id == a  # the leader stays the leader
        assert sorted(m for m, _, _ in ra.members) == sorted([a, b_id])
        assert rb.members == []  # followers see no metadata
        # The follower waits in SyncGroup until the leader's assignment is stored.
        b_sync = env.sync_bg("g", b_id, gen + 1)
        await trio.sleep(1)
        assert not b_sync.done.is_set()
        a_sync = await env.sync("g", a, gen + 1, {a: b"to-a", b_id: b"to-b"})
        assert a_sync.assignment == b"to-a"
        assert (await b_sync.wait()).assignment == b"to-b"
        assert state(env) == S.STABLE
        # A member's sync in a Stable group answers at once.
        again = await env.sync("g", b_id, gen + 1)
        assert again.assignment == b"to-b"

    env.run(main)


def test_session_timeout_expires_a_silent_member_exactly_on_time(group_env):
    env = group_env()

    async def main(env):
        gen, (a, b) = await stable_group(env, 2)
        # a keeps heartbeating, b goes silent (its session started at its SyncGroup, just now).
        for _ in range(5):
            await trio.sleep(1)
            assert env.heartbeat("g", a, gen) == E.NONE
        await trio.sleep(SESSION_S - 5 - 0.1)
        assert b in env.groups.groups["g"].members
        await trio.sleep(0.2)
        assert b not in env.groups.groups["g"].members
        assert state(env) == S.PREPARING_REBALANCE
        assert env.heartbeat("g", a, gen) == E.REBALANCE_IN_PROGRESS
        assert env.heartbeat("g", b, gen) == E.UNKNOWN_MEMBER_ID
        r = await env.join("g", a)
        assert r.generation_id == gen + 1 and [m for m, _, _ in r.members] == [a]

    env.run(main)


def test_last_member_timing_out_leaves_the_group_empty(group_env):
    env = group_env()

    async def main(env):
        gen, (a,) = await stable_group(env, 1)
        await trio.sleep(SESSION_S + 0.1)
        group = env.groups.groups["g"]
        assert group.state == S.EMPTY and not group.members
        assert group.generation_id == gen + 1  # the empty generation counts, as in Kafka

    env.run(main)


def test_rebalance_timeout_removes_members_that_do_not_rejoin(group_env):
    env = group_env()

    async def main(env):
        gen, (a, b) = await stable_group(env, 2)
        # a rejoins (leader rejoining forces a rebalance); b keeps heartbeating but never rejoins.
        a_join = env.join_bg("g", a)
        await trio.sleep(0.01)
        start = trio.current_time()
        while not a_join.done.is_set():
            assert env.heartbeat("g", b, gen) == E.REBALANCE_IN_PROGRESS
            await trio.sleep(1)
        r = a_join.result
        assert trio.current_time() - start >= REBALANCE_S - 1
        assert r.generation_id == gen + 1 and [m for m, _, _ in r.members] == [a]
        assert env.heartbeat("g", b, gen) == E.UNKNOWN_MEMBER_ID

    env.run(main)


def test_member_blocked_in_join_is_not_expired_by_its_session(group_env):
    env = group_env()

    async def main(env):
        gen, (a, b) = await stable_group(env, 2, session_ms=6000, rebalance_ms=30000)
        # b changes its subscription: a rebalance that waits for a, which only heartbeats.
        b_join = env.join_bg("g", b, session_ms=6000, rebalance_ms=30000, topics=("t", "u"))
        for _ in range(20):  # b waits far beyond its session while a heartbeats
            await trio.sleep(1)
            assert env.heartbeat("g", a, gen) == E.REBALANCE_IN_PROGRESS
        assert b in env.groups.groups["g"].members
        r = await env.join("g", a, session_ms=6000, rebalance_ms=30000)
        assert r.generation_id == gen + 1 and (await b_join.wait()).generation_id == gen + 1

    env.run(main)


def test_leave_group_rebalances_at_once(group_env):
    env = group_env()

    async def main(env):
        gen, (a, b) = await stable_group(env, 2)
        top, errors = env.groups.leave_group("g", [(b, None)])
        assert (top, errors) == (E.NONE, [E.NONE])
        assert state(env) == S.PREPARING_REBALANCE
        r = await env.join("g", a)
        assert r.generation_id == gen + 1 and len(r.members) == 1
        _, errors = env.groups.leave_group("g", [(b, None), ("nobody", None)])
        assert errors == [E.UNKNOWN_MEMBER_ID, E.UNKNOWN_MEMBER_ID]
        await env.sync("g", a, gen + 1, {a: b""})
        env.groups.leave_group("g", [(a, None)])
        assert state(env) == S.EMPTY
        assert env.groups.leave_group("nope", [("x", None)]) == (E.NONE, [E.UNKNOWN_MEMBER_ID])

    env.run(main)


def test_leave_while_others_wait_completes_their_join(group_env):
    env = group_env()

    async def main(env):
        gen, (a, b) = await stable_group(env, 2)
        a_join = env.join_bg("g", a)
        await trio.sleep(1)
        assert not a_join.done.is_set()  # waiting for b
        env.groups.leave_group("g", [(b, None)])
        r = await a_join.wait()
        assert r.generation_id == gen + 1 and len(r.members) == 1

    env.run(main)


def test_heartbeat_errors(group_env):
    env = group_env()

    async def main(env):
        assert env.heartbeat("nope", "m", 1) == E.UNKNOWN_MEMBER_ID
        assert env.heartbeat("", "m", 1) == E.INVALID_GROUP_ID
        gen, (a, b) = await stable_group(env, 2)
        assert env.heartbeat("g", a, gen - 1) == E.ILLEGAL_GENERATION
        assert env.heartbeat("g", "ghost", gen) == E.UNKNOWN_MEMBER_ID
        # CompletingRebalance: heartbeats are fine while the leader computes.
        await rejoin(env, a, b)
        assert state(env) == S.COMPLETING_REBALANCE
        assert env.heartbeat("g", b, gen + 1) == E.NONE
        assert env.heartbeat("g", b, gen) == E.ILLEGAL_GENERATION

    env.run(main)


def test_sync_group_errors(group_env):
    env = group_env()

    async def main(env):
        assert (await env.sync("nope", "m", 1)).error == E.UNKNOWN_MEMBER_ID
        assert (await env.sync("", "m", 1)).error == E.INVALID_GROUP_ID
        gen, (a, b) = await stable_group(env, 2)
        assert (await env.sync("g", "ghost", gen)).error == E.UNKNOWN_MEMBER_ID
        assert (await env.sync("g", a, gen + 5)).error == E.ILLEGAL_GENERATION
        assert (await env.sync("g", a, gen, protocol_type="other")).error == E.INCONSISTENT_GROUP_PROTOCOL
        assert (await env.sync("g", a, gen, protocol_name="roundrobin")).error == E.INCONSISTENT_GROUP_PROTOCOL
        ok = await env.sync("g", a, gen, protocol_type="consumer", protocol_name="range")
        assert ok.error == E.NONE and (ok.protocol_type, ok.protocol_name) == ("consumer", "range")
        env.join_bg("g", a)
        await trio.sleep(0.1)
        assert (await env.sync("g", b, gen)).error == E.REBALANCE_IN_PROGRESS

    env.run(main)


def test_followers_waiting_in_sync_learn_about_a_new_rebalance(group_env):
    env = group_env()

    async def main(env):
        gen, (a, b) = await stable_group(env, 2)
        await rejoin(env, a, b)
        b_sync = env.sync_bg("g", b, gen + 1)
        await trio.sleep(0.5)
        # A third member arrives before the leader syncs: the waiting follower is told.
        env.join_new_bg("g", client_id="late")
        assert (await b_sync.wait()).error == E.REBALANCE_IN_PROGRESS
        assert state(env) == S.PREPARING_REBALANCE

    env.run(main)


def test_leader_that_never_syncs_is_removed_after_the_rebalance_timeout(group_env):
    env = group_env()

    async def main(env):
        gen, (a, b) = await stable_group(env, 2)
        await rejoin(env, a, b)
        b_sync = env.sync_bg("g", b, gen + 1)
        await trio.sleep(REBALANCE_S + 0.1)
        assert (await b_sync.wait()).error == E.REBALANCE_IN_PROGRESS
        assert a not in env.groups.groups["g"].members
        r = await env.join("g", b)
        assert r.generation_id == gen + 2 and r.leader_id == b

    env.run(main)


def test_pending_member_id_expires_and_unblocks_the_join(group_env):
    env = group_env()

    async def main(env):
        gen, (a,) = await stable_group(env, 1)
        pending = await env.join("g", client_id="p")
        assert pending.error == E.MEMBER_ID_REQUIRED
        a_join = env.join_bg("g", a)  # leader rejoins: the join phase waits for the pending id too
        await trio.sleep(SESSION_S - 1)
        assert not a_join.done.is_set()
        r = await a_join.wait()
        assert r.generation_id == gen + 1 and len(r.members) == 1
        assert trio.current_time() >= SESSION_S
        # The forgotten id is now unknown.
        assert (await env.join("g", pending.member_id)).error == E.UNKNOWN_MEMBER_ID

    env.run(main)


def test_pending_member_leaving_unblocks_the_join(group_env):
    env = group_env()

    async def main(env):
        gen, (a,) = await stable_group(env, 1)
        pending = await env.join("g", client_id="p")
        a_join = env.join_bg("g", a)
        await trio.sleep(0.5)
        assert env.groups.leave_group("g", [(pending.member_id, None)]) == (E.NONE, [E.NONE])
        assert (await a_join.wait()).generation_id == gen + 1

    env.run(main)


def test_initial_rebalance_delay_collects_members_into_one_generation(group_env):
    env = group_env(group_initial_rebalance_delay_ms=3000)

    async def main(env):
        t0 = trio.current_time()
        first = env.join_new_bg("g", client_id="a")
        await trio.sleep(2)
        second = env.join_new_bg("g", client_id="b")  # arrives inside the delay: extends it
        ra, rb = await first.wait(), await second.wait()
        assert ra.generation_id == rb.generation_id == 1
        assert len(ra.members if ra.leader_id == ra.member_id else rb.members) == 2
        elapsed = trio.current_time() - t0
        assert 5.9 <= elapsed <= 6.1, elapsed  # the delay was extended once (3 s + 3 s)

    env.run(main)


def test_initial_delay_is_bounded_by_the_rebalance_timeout(group_env):
    env = group_env(group_initial_rebalance_delay_ms=3000)

    async def main(env):
        t0 = trio.current_time()
        calls = []
        for i in range(6):  # a new member every 2 s for 12 s
            calls.append(env.join_new_bg("g", client_id=f"m{i}", rebalance_ms=7000))
            await trio.sleep(2)
        first = await calls[0].wait()
        assert first.generation_id == 1
        assert trio.current_time() - t0 <= 12.1

    env.run(main)


def test_initial_delay_is_waited_in_full_even_past_a_shorter_rebalance_timeout(group_env):
    env = group_env(group_initial_rebalance_delay_ms=3000)

    async def main(env):
        t0 = trio.current_time()
        answer = await env.join_new("g", rebalance_ms=1000)
        assert answer.generation_id == 1
        assert 2.9 <= trio.current_time() - t0 <= 3.1  # Kafka's delay, not min(delay, rebalance timeout)

    env.run(main)


def test_protocol_checks(group_env):
    env = group_env()

    async def main(env):
        assert (await env.join("", "")).error == E.INVALID_GROUP_ID
        assert (await env.join("g", session_ms=1000)).error == E.INVALID_SESSION_TIMEOUT
        assert (await env.join("g", session_ms=10_000_000)).error == E.INVALID_SESSION_TIMEOUT
        assert (await env.join("g", "made-up")).error == E.UNKNOWN_MEMBER_ID
        assert (await env.join("g", protocol_type="")).error == E.INCONSISTENT_GROUP_PROTOCOL
        assert (await env.join("g", protocols=[])).error == E.INCONSISTENT_GROUP_PROTOCOL
        # Kafka creates the group before judging a new member's join and keeps it, Empty.
        assert env.groups.groups["g"].is_(GroupState.EMPTY) and not env.groups.groups["g"].members
        await stable_group(env, 1)
        assert (await env.join("g", protocol_type="connect")).error == E.INCONSISTENT_GROUP_PROTOCOL
        assert (await env.join("g", protocols=[("sticky", b"")])).error == E.INCONSISTENT_GROUP_PROTOCOL

    env.run(main)


def test_protocol_selection_votes_for_the_most_preferred_common_protocol(group_env):
    env = group_env(group_initial_rebalance_delay_ms=3000)  # the delay gathers all three in one generation

    async def main(env):
        sub = consumer_subscription("t")
        both = [("roundrobin", sub), ("range", sub)]
        calls = [env.join_new_bg("g", client_id="a", protocols=[("range", sub), ("roundrobin", sub)]),
                 env.join_new_bg("g", client_id="b", protocols=both),
                 env.join_new_bg("g", client_id="c", protocols=both + [("sticky", sub)])]
        results = [await c.wait() for c in calls]
        assert {r.generation_id for r in results} == {1}
        # "sticky" is not common; roundrobin has two first-choice votes against one.
        assert {r.protocol_name for r in results} == {"roundrobin"}

    env.run(main)


def test_group_max_size(group_env):
    env = group_env(group_max_size=2)

    async def main(env):
        await stable_group(env, 2)
        assert (await env.join("g", client_id="third")).error == E.GROUP_MAX_SIZE_REACHED

    env.run(main)


def test_member_rejoining_with_same_metadata_in_stable_gets_the_current_generation(group_env):
    env = group_env()

    async def main(env):
        gen, (a, b) = await stable_group(env, 2)
        r = await env.join("g", b)  # follower, unchanged metadata: no rebalance
        assert (r.error, r.generation_id, r.leader_id, r.members) == (E.NONE, gen, a, [])
        assert state(env) == S.STABLE
        # changed metadata from a follower rebalances
        jb = env.join_bg("g", b, topics=("t", "u"))
        await trio.sleep(0.1)
        assert state(env) == S.PREPARING_REBALANCE
        ja = env.join_bg("g", a)
        assert (await ja.wait()).generation_id == (await jb.wait()).generation_id == gen + 1

    env.run(main)


def test_join_answer_lost_in_completing_rebalance_is_repeated(group_env):
    env = group_env()

    async def main(env):
        gen, (a, b) = await stable_group(env, 2)
        ra, rb = await rejoin(env, a, b)
        assert state(env) == S.COMPLETING_REBALANCE
        again = await env.join("g", a)  # the leader asks again: same answer, members included
        assert (again.generation_id, again.leader_id) == (ra.generation_id, a)
        assert sorted(m for m, _, _ in again.members) == sorted([a, b])
        assert state(env) == S.COMPLETING_REBALANCE

    env.run(main)


def test_generations_stay_consistent_through_cooperative_style_double_rebalance(group_env):
    """Cooperative-sticky rebalances twice: members keep working (and committing with the
    old generation) while the group prepares, then rejoin for the second round."""
    env = group_env()

    async def main(env):
        env.create_topic("t", 2)
        gen, (a,) = await stable_group(env, 1)
        from server.groups import CommittedOffset

        b_call = env.join_new_bg("g", client_id="b")
        await trio.sleep(0.1)
        # a still owns its partitions and commits with its generation during the prepare phase.
        res = await env.groups.commit_offsets(group_id="g", generation_id=gen, member_id=a, group_instance_id=None,
                                              offsets={("t", 0): CommittedOffset(5)})
        assert res == {("t", 0): E.NONE}
        ra = await env.join("g", a)
        rb = await b_call.wait()
        assert ra.generation_id == rb.generation_id == gen + 1
        # Between JoinGroup and SyncGroup commits are refused with REBALANCE_IN_PROGRESS.
        res = await env.groups.commit_offsets(group_id="g", generation_id=gen + 1, member_id=a,
                                              group_instance_id=None, offsets={("t", 0): CommittedOffset(6)})
        assert res == {("t", 0): E.REBALANCE_IN_PROGRESS}
        sa = env.sync_bg("g", a, gen + 1, {a: b"a1", rb.member_id: b""})
        sb = env.sync_bg("g", rb.member_id, gen + 1)
        await sa.wait(), await sb.wait()
        # Second round: both rejoin, generation +1 again, old generation refused.
        ra2, rb2 = await rejoin(env, a, rb.member_id)
        assert ra2.generation_id == rb2.generation_id == gen + 2
        res = await env.groups.commit_offsets(group_id="g", generation_id=gen + 1, member_id=a,
                                              group_instance_id=None, offsets={("t", 0): CommittedOffset(7)})
        assert res == {("t", 0): E.ILLEGAL_GENERATION}

    env.run(main)
