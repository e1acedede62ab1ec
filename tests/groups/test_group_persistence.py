"""__consumer_offsets: what is written, and that a restarted broker resumes exactly."""

from __future__ import annotations

import trio

from tests.groups.conftest import consumer_assignment
from server.groups import CommittedOffset, GroupState
from server.groups import records as rec
from server.coordinator_log import partition_for_key
from server.groups.coordinator import OFFSETS_TOPIC
from wire.errors import ErrorCode as E
from wire.records import Record, build_batch, iter_records

S = GroupState


def offsets_records(env) -> list[tuple[object, object]]:
    out = []
    plog = env.broker.logs.log(OFFSETS_TOPIC, 0)
    for _header, data in plog.iter_batches(plog.log_start_offset):
        for r in iter_records(data):
            key = rec.decode_key(r.key)
            if r.value is None:
                value = None
            elif isinstance(key, rec.OffsetKey):
                value = rec.decode_offset_value(r.value)
            else:
                value = rec.decode_group_value(r.value)
            out.append((key, value))
    return out


def test_offsets_topic_is_created_compacted(group_env):
    env = group_env(offsets_topic_num_partitions=3)
    meta = env.broker.topics[OFFSETS_TOPIC]
    assert meta.partitions == 3
    assert "compact" in env.broker.topic_config(OFFSETS_TOPIC).cleanup_policy
    # Restarting with another partition count keeps the existing topic.
    env.settings["offsets.topic.num.partitions"] = "5"
    env.restart()
    assert env.broker.topics[OFFSETS_TOPIC].partitions == 3 and env.groups.partitions == 3


def test_commit_is_written_before_it_is_acknowledged(group_env):
    env = group_env()
    env.create_topic("t", 1)

    async def main(env):
        res = await env.groups.commit_offsets(group_id="g", generation_id=-1, member_id="", group_instance_id=None,
                                              offsets={("t", 0): CommittedOffset(42, 3, "m")})
        assert res == {("t", 0): E.NONE}
        [(key, value)] = offsets_records(env)
        assert key == rec.OffsetKey("g", "t", 0)
        assert (value.offset, value.leader_epoch, value.metadata) == (42, 3, "m")
        assert value.commit_timestamp > 0

    env.run(main)


def test_restart_restores_offsets_and_a_stable_group_that_carries_on(group_env):
    env = group_env()
    env.create_topic("t", 2)
    state = {}

    async def before(env):
        a = await env.join_new("g", client_id="a")
        b_call = env.join_new_bg("g", client_id="b")
        await trio.sleep(0.01)
        a = await env.join("g", a.member_id)
        b = await b_call.wait()
        assignments = {a.member_id: consumer_assignment({"t": [0]}), b.member_id: consumer_assignment({"t": [1]})}
        sb = env.sync_bg("g", b.member_id, a.generation_id)
        await env.sync("g", a.member_id, a.generation_id, assignments)
        await sb.wait()
        await env.groups.commit_offsets(group_id="g", generation_id=a.generation_id, member_id=a.member_id,
                                        group_instance_id=None, offsets={("t", 0): CommittedOffset(11)})
        await env.groups.commit_offsets(group_id="g", generation_id=a.generation_id, member_id=b.member_id,
                                        group_instance_id=None, offsets={("t", 1): CommittedOffset(22)})
        state.update(a=a.member_id, b=b.member_id, gen=a.generation_id, assignments=assignments)

    env.run(before)
    env.restart()

    async def after(env):
        group = env.groups.groups["g"]
        assert group.state == S.STABLE and group.generation_id == state["gen"]
        assert group.leader_id == state["a"] and group.protocol_name == "range"
        assert {m: group.members[m].assignment for m in group.members} == state["assignments"]
        _, offsets = env.groups.fetch_offsets("g", None)
        assert {tp: o.offset for tp, o in offsets.items()} == {("t", 0): 11, ("t", 1): 22}
        # a keeps heartbeating through the restart and just carries on; b is gone.
        for _ in range(5):
            assert env.heartbeat("g", state["a"], state["gen"]) == E.NONE
            await trio.sleep(1)
        synced = await env.sync("g", state["a"], state["gen"])
        assert synced.assignment == state["assignments"][state["a"]]
        await trio.sleep(1.5)
        assert state["b"] not in group.members  # silent since the restart: its session ran out
        assert env.heartbeat("g", state["a"], state["gen"]) == E.REBALANCE_IN_PROGRESS

    env.run(after)


def test_deleted_group_and_offsets_stay_deleted_after_restart(group_env):
    env = group_env()
    env.create_topic("t", 1)

    async def before(env):
        r = await env.join_new("g")
        await env.sync("g", r.member_id, r.generation_id, {r.member_id: b""})
        await env.groups.commit_offsets(group_id="g", generation_id=r.generation_id, member_id=r.member_id,
                                        group_instance_id=None, offsets={("t", 0): CommittedOffset(5)})
        env.groups.leave_group("g", [(r.member_id, None)])  # Empty: writes the empty generation
        assert await env.groups.delete_groups(["g"]) == {"g": E.NONE}
        await trio.sleep(0.1)  # any background write lands before the broker stops
        assert offsets_records(env)[-1] == (rec.GroupKey("g"), None)

    env.run(before)
    env.restart()
    assert "g" not in env.groups.groups


def test_offset_delete_survives_restart(group_env):
    env = group_env()
    env.create_topic("t", 2)

    async def before(env):
        await env.groups.commit_offsets(group_id="g", generation_id=-1, member_id="", group_instance_id=None,
                                        offsets={("t", 0): CommittedOffset(1), ("t", 1): CommittedOffset(2)})
        await env.groups.delete_offsets("g", [("t", 0)])

    env.run(before)
    env.restart()
    _, offsets = env.groups.fetch_offsets("g", None)
    assert {tp: o.offset for tp, o in offsets.items()} == {("t", 1): 2}


def test_groups_spread_over_offsets_partitions_like_kafka(group_env):
    env = group_env(offsets_topic_num_partitions=4)
    env.create_topic("t", 1)
    names = [f"group-{i}" for i in range(12)]

    async def before(env):
        for i, name in enumerate(names):
            await env.groups.commit_offsets(group_id=name, generation_id=-1, member_id="", group_instance_id=None,
                                            offsets={("t", 0): CommittedOffset(i)})

    env.run(before)
    used = {p for p in range(4) if env.broker.logs.log(OFFSETS_TOPIC, p).log_end_offset > 0}
    assert used == {partition_for_key(n, 4) for n in names}
    env.restart()
    for i, name in enumerate(names):
        assert env.groups.fetch_offsets(name, [("t", 0)])[1][("t", 0)].offset == i


def test_unreadable_records_are_skipped_at_load(group_env):
    env = group_env()
    env.create_topic("t", 1)

    async def before(env):
        bad = build_batch([Record(0, 0, b"\x00\x09junk", b"x"), Record(1, 0, None, b"no key")])
        await env.broker.append((OFFSETS_TOPIC, 0), bad, 2)
        await env.groups.commit_offsets(group_id="g", generation_id=-1, member_id="", group_instance_id=None,
                                        offsets={("t", 0): CommittedOffset(3)})

    env.run(before)
    env.restart()
    assert env.groups.fetch_offsets("g", [("t", 0)])[1][("t", 0)].offset == 3
