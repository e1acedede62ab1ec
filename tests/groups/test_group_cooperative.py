"""Cooperative rebalancing (KIP-429) as the coordinator sees it: a member leaves, and the
member that stays goes through exactly one generation.

The cooperative protocol needs a second round only when an assignment took partitions
away from a member; a member that leaves with LeaveGroup has revoked its partitions
already, so the stayer's next JoinGroup must give its leader a member list with no trace
of the leaver, and nothing may start another rebalance afterwards (Kafka's
GroupCoordinator: removeMemberAndUpdateGroup, then one DelayedJoin that completes when the
stayer rejoins). Subscriptions here are ConsumerProtocolSubscription v2 (owned
partitions and the generation they were assigned in), what cooperative clients send.
"""

from __future__ import annotations

import struct

import trio

from tests.groups.conftest import SESSION_MS, consumer_assignment
from server.groups import GroupState
from wire.errors import ErrorCode as E

S = GroupState
COOP = "cooperative-sticky"
HEARTBEAT_S = 1.0


def subscription(owned: list[int], generation: int, topic: str = "t") -> bytes:
    """ConsumerProtocolSubscription v2: topics, null user data, owned partitions, generation."""
    raw = topic.encode()
    out = bytearray(struct.pack(">hi", 2, 1))
    out += struct.pack(">h", len(raw)) + raw
    out += struct.pack(">i", -1)
    out += struct.pack(">i", 1) + struct.pack(">h", len(raw)) + raw + struct.pack(">i", len(owned))
    for p in owned:
        out += struct.pack(">i", p)
    out += struct.pack(">i", generation)
    return bytes(out)


def coop(owned: list[int], generation: int) -> list[tuple[str, bytes]]:
    return [(COOP, subscription(owned, generation))]


async def two_members(env) -> tuple[int, str, str]:
    """a owns partitions 0-1, b owns 2-3, group Stable; returns (generation, a, b)."""
    env.create_topic("t", 4)
    a = (await env.join("g", protocols=coop([], -1), client_id="a")).member_id
    ra = await env.join("g", a, protocols=coop([], -1), client_id="a")
    await env.sync("g", a, ra.generation_id, {a: consumer_assignment({"t": [0, 1, 2, 3]})})
    b = (await env.join("g", protocols=coop([], -1), client_id="b")).member_id
    b_join = env.join_bg("g", b, protocols=coop([], -1), client_id="b")
    await trio.sleep(0.1)
    assert env.heartbeat("g", a, ra.generation_id) == E.REBALANCE_IN_PROGRESS
    # First round: a keeps 0-1 and gives up 2-3 (the cooperative revoke round).
    r1 = await env.join("g", a, protocols=coop([0, 1, 2, 3], ra.generation_id))
    gen = r1.generation_id
    assert (await b_join.wait()).generation_id == gen
    b_sync = env.sync_bg("g", b, gen)
    await env.sync("g", a, gen, {a: consumer_assignment({"t": [0, 1]}), b: consumer_assignment({"t": []})})
    await b_sync.wait()
    # Second round, started by a (it revoked something): b gets 2-3.
    a_join = env.join_bg("g", a, protocols=coop([0, 1], gen))
    await trio.sleep(0.1)
    assert env.heartbeat("g", b, gen) == E.REBALANCE_IN_PROGRESS
    b_join = env.join_bg("g", b, protocols=coop([], gen))
    gen = (await a_join.wait()).generation_id
    await b_join.wait()
    b_sync = env.sync_bg("g", b, gen)
    await env.sync("g", a, gen, {a: consumer_assignment({"t": [0, 1]}), b: consumer_assignment({"t": [2, 3]})})
    assert (await b_sync.wait()).assignment == consumer_assignment({"t": [2, 3]})
    assert env.groups.groups["g"].state == S.STABLE
    return gen, a, b


async def stays_stable(env, a: str, gen: int, seconds: float) -> None:
    """a heartbeats every second for `seconds`: every answer NONE, the generation stays."""
    for _ in range(int(seconds / HEARTBEAT_S)):
        await trio.sleep(HEARTBEAT_S)
        assert env.heartbeat("g", a, gen) == E.NONE
    group = env.groups.groups["g"]
    assert (group.state, group.generation_id, list(group.members)) == (S.STABLE, gen, [a])


def test_leaver_is_gone_from_the_stayers_one_round(group_env):
    """b leaves (LeaveGroup); a learns of the rebalance from its heartbeat, rejoins owning
    0-1, and as the leader sees only itself, with the metadata it just sent: the
    assignor can hand it 2-3 at once. One generation; nothing rebalances afterwards."""
    env = group_env()

    async def main(env):
        gen, a, b = await two_members(env)
        assert env.groups.leave_group("g", [(b, None)]) == (E.NONE, [E.NONE])
        assert env.heartbeat("g", a, gen) == E.REBALANCE_IN_PROGRESS
        joined = await env.join("g", a, protocols=coop([0, 1], gen))
        assert (joined.error, joined.generation_id, joined.leader_id) == (E.NONE, gen + 1, a)
        assert joined.members == [(a, None, subscription([0, 1], gen))]
        synced = await env.sync("g", a, gen + 1, {a: consumer_assignment({"t": [0, 1, 2, 3]})})
        assert synced.error == E.NONE
        # What the leaver's process may still send changes nothing for the group.
        assert env.heartbeat("g", b, gen) == E.UNKNOWN_MEMBER_ID
        assert env.groups.leave_group("g", [(b, None)]) == (E.NONE, [E.UNKNOWN_MEMBER_ID])
        assert (await env.sync("g", b, gen)).error == E.UNKNOWN_MEMBER_ID
        await stays_stable(env, a, gen + 1, 3 * SESSION_MS / 1000)

    env.run(main)


def test_leave_while_the_stayer_rejoins_is_still_one_round(group_env):
    """a rejoins first (as the leader it may, e.g. after a metadata change) and b's
    LeaveGroup arrives while a's JoinGroup waits: the join completes with a alone, in
    the next generation, not one later."""
    env = group_env()

    async def main(env):
        gen, a, b = await two_members(env)
        a_join = env.join_bg("g", a, protocols=coop([0, 1], gen))
        await trio.sleep(0.1)
        assert not a_join.done.is_set()  # waits for b
        env.groups.leave_group("g", [(b, None)])
        joined = await a_join.wait()
        assert (joined.generation_id, joined.members) == (gen + 1, [(a, None, subscription([0, 1], gen))])
        assert (await env.sync("g", a, gen + 1, {a: consumer_assignment({"t": [0, 1, 2, 3]})})).error == E.NONE
        await stays_stable(env, a, gen + 1, 3 * SESSION_MS / 1000)

    env.run(main)


def test_follower_stays_and_the_leader_leaves(group_env):
    """The leader (a) leaves: b, the follower, rejoins, leads the next generation, sees
    only itself, and the group stays put."""
    env = group_env()

    async def main(env):
        gen, a, b = await two_members(env)
        env.groups.leave_group("g", [(a, None)])
        assert env.heartbeat("g", b, gen) == E.REBALANCE_IN_PROGRESS
        joined = await env.join("g", b, protocols=coop([2, 3], gen))
        assert (joined.generation_id, joined.leader_id) == (gen + 1, b)
        assert joined.members == [(b, None, subscription([2, 3], gen))]
        assert (await env.sync("g", b, gen + 1, {b: consumer_assignment({"t": [0, 1, 2, 3]})})).error == E.NONE
        await stays_stable(env, b, gen + 1, 3 * SESSION_MS / 1000)

    env.run(main)
