"""Classic and consumer members in one group (KIP-848 online upgrade and downgrade,
server/groups/consumer/migration.py), through the coordinator and the handler layer on
trio's MockClock. The stock clients doing the same are in test_consumer_group_clients.py."""

from __future__ import annotations

import trio

from wire.errors import ErrorCode as E
from wire.registry import ApiKey

from server.groups.consumer import consumer_protocol as cp
from server.groups.consumer import records as crec
from server.groups.consumer.group import is_consumer_group
from tests.groups.conftest import consumer_assignment
from tests.groups.test_consumer_group_heartbeat import Member, settle, topic_id


def test_classic_member_metadata_round_trips() -> None:
    v = crec.MemberMetadataValue(None, None, "c", "/h", ["t"], None, 30000, None,
                                 crec.ClassicMemberMetadata(6000, (("range", b"\x00\x01"), ("roundrobin", b""))))
    assert crec.decode_member_metadata(crec.encode_member_metadata(v)) == v
    plain = crec.MemberMetadataValue("i", "r", "c", "/h", ["t", "u"], "x.*", -1, "uniform")
    assert crec.decode_member_metadata(crec.encode_member_metadata(plain)) == plain


async def _classic_pair(env):
    """Two classic members a, b sharing topic t (4 partitions), Stable."""
    first = await env.join_new("g", client_id="a")
    assert (await env.sync("g", first.member_id, first.generation_id, {
        first.member_id: consumer_assignment({"t": [0, 1, 2, 3]})})).error == E.NONE
    jb = env.join_new_bg("g", client_id="b")
    await trio.sleep(0.01)
    ja = env.join_bg("g", first.member_id, client_id="a")
    a, b = await ja.wait(), await jb.wait()
    assert a.error == b.error == E.NONE and a.generation_id == b.generation_id
    leader, follower = (a, b) if a.leader_id == a.member_id else (b, a)
    plan = {leader.member_id: consumer_assignment({"t": [0, 1]}),
            follower.member_id: consumer_assignment({"t": [2, 3]})}
    sf = env.sync_bg("g", follower.member_id, a.generation_id)
    sl = await env.sync("g", leader.member_id, a.generation_id, plan)
    assert sl.error == E.NONE and (await sf.wait()).error == E.NONE
    return leader, follower, a.generation_id


def test_upgrade_then_downgrade(group_env):
    env = group_env()
    env.create_topic("t", 4)

    async def main(env):
        leader, follower, generation = await _classic_pair(env)
        tid = topic_id(env, "t")
        c = Member(env, "g", "modern")
        resp = await c.heartbeat()
        assert resp["error_code"] == E.NONE, resp
        group = env.groups.groups["g"]
        assert is_consumer_group(group)
        assert group.members[leader.member_id].classic.session_timeout_ms == 6000
        assert group.members[leader.member_id].assignment.assigned == {tid: frozenset({0, 1})}
        # c gets nothing yet: every partition is still owned by a classic member
        assert c.owned_partitions(tid) == set()
        listed = await env.call_api(ApiKey.LIST_GROUPS, 5, {"states_filter": [], "types_filter": []})
        assert [(g["group_id"], g["group_type"]) for g in listed["groups"]] == [("g", "consumer")]
        # the classic members learn about the rebalance, rejoin (eager: owning nothing) and sync
        owned: dict[str, set[int]] = {}
        for m in (leader, follower):
            assert env.heartbeat("g", m.member_id, generation) == E.REBALANCE_IN_PROGRESS
            j = await env.join("g", m.member_id, client_id="x")
            assert j.error == E.NONE and j.protocol_type == "consumer" and j.leader_id == "" and not j.members
            s = await env.sync("g", m.member_id, j.generation_id, protocol_type="consumer", protocol_name="range")
            assert s.error == E.NONE
            owned[m.member_id] = set(cp.decode_assignment(s.assignment).get("t", ()))
            m.generation_id = j.generation_id
        await settle([c])
        owned["modern"] = c.owned_partitions(tid)
        all_parts = [p for ps in owned.values() for p in ps]
        assert sorted(all_parts) == [0, 1, 2, 3], owned  # each partition once
        assert all(owned.values()), owned
        for m in (leader, follower):
            assert env.heartbeat("g", m.member_id, m.generation_id) == E.NONE
        # offsets: a classic member commits with its generation
        commit = await env.call_api(ApiKey.OFFSET_COMMIT, 8, {
            "group_id": "g", "generation_id_or_member_epoch": leader.generation_id, "member_id": leader.member_id,
            "group_instance_id": None, "retention_time_ms": -1,
            "topics": [{"name": "t", "partitions": [{"partition_index": 0, "committed_offset": 5,
                                                      "committed_leader_epoch": -1, "committed_metadata": ""}]}]})
        assert commit["topics"][0]["partitions"][0]["error_code"] == E.NONE
        # the records survive a restart, classic metadata included
        env.restart()
        group = env.groups.groups["g"]
        assert group.members[leader.member_id].classic is not None and group.members["modern"].classic is None
        # the consumer member leaves: the group becomes classic and rebalances
        c.epoch = -1
        assert (await c.heartbeat())["error_code"] == E.NONE
        group = env.groups.groups["g"]
        assert not is_consumer_group(group) and group.state.value == "PreparingRebalance"
        assert env.heartbeat("g", leader.member_id, leader.generation_id) == E.REBALANCE_IN_PROGRESS
        ja = env.join_bg("g", leader.member_id)
        jb = env.join_bg("g", follower.member_id)
        a, b = await ja.wait(), await jb.wait()
        assert a.error == b.error == E.NONE and a.generation_id > leader.generation_id
        listed = await env.call_api(ApiKey.LIST_GROUPS, 5, {"states_filter": [], "types_filter": []})
        assert [(g["group_id"], g["group_type"]) for g in listed["groups"]] == [("g", "classic")]
        # the log says so too: after a restart the group is classic, its offsets kept
        env.restart()
        group = env.groups.groups["g"]
        assert not is_consumer_group(group) and set(group.members) == {leader.member_id, follower.member_id}
        fetched = await env.call_api(ApiKey.OFFSET_FETCH, 7, {"group_id": "g", "topics": None,
                                                              "require_stable": False})
        assert [(t["name"], p["partition_index"], p["committed_offset"]) for t in fetched["topics"]
                for p in t["partitions"]] == [("t", 0, 5)]

    env.run(main)


def test_upgrade_needs_the_consumer_protocol(group_env):
    env = group_env()
    env.create_topic("t", 1)

    async def main(env):
        j = env.join_new_bg("g", protocol_type="connect", protocols=[("default", b"x")])
        await trio.sleep(5)
        assert (await j.wait()).error == E.NONE
        resp = await Member(env, "g", "m").heartbeat()
        assert resp["error_code"] == E.GROUP_ID_NOT_FOUND

    env.run(main)


def test_upgrade_policy_downgrade_only_refuses_upgrades(group_env):
    env = group_env(group_consumer_migration_policy="downgrade")
    env.create_topic("t", 4)

    async def main(env):
        await _classic_pair(env)
        assert (await Member(env, "g", "m").heartbeat())["error_code"] == E.GROUP_ID_NOT_FOUND

    env.run(main)
