"""The group coordinator per __consumer_offsets partition: what a broker answers for groups
whose partition it stops leading (`unload_partition`), while it loads one
(`load_partition`), and that a load brings the state back from the log.

In a cluster the lead's LeaderAndIsr handling drives these two calls; here the test calls
them on a real single broker, whose partitions are all loaded at start-up. A slow load is
made by holding the partition's write lock, which the load takes before replaying.
"""

from __future__ import annotations

import trio

from tests.groups.conftest import consumer_assignment
from server.coordinator_log import partition_for_key
from server.groups import CommittedOffset, GroupState
from wire.errors import ErrorCode as E
from wire.registry import ApiKey

S = GroupState
PARTITIONS = 4


def two_groups() -> tuple[str, str]:
    """Two group ids on different offsets partitions."""
    first = "group-a"
    other = next(f"group-{i}" for i in range(100)
                 if partition_for_key(f"group-{i}", PARTITIONS) != partition_for_key(first, PARTITIONS))
    return first, other


async def commit(env, group: str, offset: int, generation: int = -1, member: str = "") -> dict:
    return await env.groups.commit_offsets(group_id=group, generation_id=generation, member_id=member,
                                           group_instance_id=None, offsets={("t", 0): CommittedOffset(offset)})


async def stable_member(env, group: str) -> tuple[str, int]:
    r = await env.join_new(group)
    assert r.error == E.NONE
    s = await env.sync(group, r.member_id, r.generation_id, {r.member_id: consumer_assignment({"t": [0]})})
    assert s.error == E.NONE
    return r.member_id, r.generation_id


def test_unloaded_partition_answers_not_coordinator_and_wakes_waiting_joins(group_env):
    env = group_env(offsets_topic_num_partitions=PARTITIONS)
    env.create_topic("t", 1)
    moved, kept = two_groups()
    p = env.groups.partition_for(moved)

    async def main(env):
        member, gen = await stable_member(env, moved)
        assert (await commit(env, moved, 5, gen, member))[("t", 0)] == E.NONE
        assert (await commit(env, kept, 7))[("t", 0)] == E.NONE
        # A second member's join puts the group in PreparingRebalance; it waits for the first.
        waiting = env.join_new_bg(moved)
        await trio.sleep(0.1)
        assert env.groups.groups[moved].state == S.PREPARING_REBALANCE and not waiting.done.is_set()

        env.groups.unload_partition(p, 1)
        assert (await waiting.wait()).error == E.NOT_COORDINATOR
        assert moved not in env.groups.groups and not env.groups.owns(p)
        assert env.heartbeat(moved, member, gen) == E.NOT_COORDINATOR
        assert (await env.join(moved)).error == E.NOT_COORDINATOR
        assert (await env.sync(moved, member, gen)).error == E.NOT_COORDINATOR
        assert env.groups.leave_group(moved, [(member, None)]) == (E.NOT_COORDINATOR, [E.NOT_COORDINATOR])
        assert (await commit(env, moved, 6))[("t", 0)] == E.NOT_COORDINATOR
        assert env.groups.fetch_offsets(moved, None) == (E.NOT_COORDINATOR, {})
        assert env.groups.describe_group(moved) == (E.NOT_COORDINATOR, None)
        assert await env.groups.delete_groups([moved]) == {moved: E.NOT_COORDINATOR}
        assert await env.groups.delete_offsets(moved, [("t", 0)]) == (E.NOT_COORDINATOR, {})
        # The group on another partition carries on; ListGroups lists only owned partitions.
        assert env.groups.fetch_offsets(kept, [("t", 0)])[1][("t", 0)].offset == 7
        code, listed = env.groups.list_groups()
        assert code == E.NONE and [g.group_id for g in listed] == [kept]

        # The handlers pass the codes through.
        listed = await env.call_api(ApiKey.LIST_GROUPS, 4, {"states_filter": []})
        assert listed["error_code"] == E.NONE and [g["group_id"] for g in listed["groups"]] == [kept]
        fetched = await env.call_api(ApiKey.OFFSET_FETCH, 8, {"groups": [
            {"group_id": moved, "topics": None}, {"group_id": kept, "topics": None}], "require_stable": False})
        assert [g["error_code"] for g in fetched["groups"]] == [E.NOT_COORDINATOR, E.NONE]
        described = await env.call_api(ApiKey.DESCRIBE_GROUPS, 5, {"groups": [moved],
                                                                    "include_authorized_operations": False})
        assert described["groups"][0]["error_code"] == E.NOT_COORDINATOR
        beat = await env.call_api(ApiKey.HEARTBEAT, 4, {"group_id": moved, "generation_id": gen, "member_id": member,
                                                        "group_instance_id": None})
        assert beat["error_code"] == E.NOT_COORDINATOR
        txn_commit = await env.call_api(ApiKey.TXN_OFFSET_COMMIT, 3, {
            "transactional_id": "tx", "group_id": moved, "producer_id": 1, "producer_epoch": 0, "generation_id": -1,
            "member_id": "", "group_instance_id": None,
            "topics": [{"name": "t", "partitions": [{"partition_index": 0, "committed_offset": 1,
                                                     "committed_leader_epoch": -1, "committed_metadata": ""}]}]})
        assert txn_commit["topics"][0]["partitions"][0]["error_code"] == E.NOT_COORDINATOR

    env.run(main)


def test_load_brings_the_groups_back_and_a_stale_epoch_is_skipped(group_env):
    env = group_env(offsets_topic_num_partitions=PARTITIONS)
    env.create_topic("t", 1)
    moved, _kept = two_groups()
    p = env.groups.partition_for(moved)

    async def main(env):
        member, gen = await stable_member(env, moved)
        await commit(env, moved, 5, gen, member)
        env.groups.unload_partition(p, 3)
        # A load or unload older than the newest epoch seen changes nothing.
        await env.groups.load_partition(p, 2)
        assert not env.groups.owns(p) and env.groups.group_status(moved) == E.NOT_COORDINATOR

        await env.groups.load_partition(p, 4)
        assert env.groups.owns(p) and env.groups.log.epoch(p) == 4
        group = env.groups.groups[moved]
        assert group.state == S.STABLE and group.generation_id == gen and list(group.members) == [member]
        assert env.groups.fetch_offsets(moved, [("t", 0)])[1][("t", 0)].offset == 5
        # The member carries on in its generation, without a rebalance.
        assert env.heartbeat(moved, member, gen) == E.NONE
        assert (await env.sync(moved, member, gen)).error == E.NONE

        env.groups.unload_partition(p, 3)  # stale: still ours
        assert env.groups.owns(p) and moved in env.groups.groups
        # Loading an owned partition again only raises its epoch.
        await env.groups.load_partition(p, 6)
        assert env.groups.log.epoch(p) == 6 and env.groups.groups[moved] is group

    env.run(main)


def test_requests_during_a_load_get_load_in_progress(group_env):
    env = group_env(offsets_topic_num_partitions=PARTITIONS)
    env.create_topic("t", 1)
    moved, kept = two_groups()
    p = env.groups.partition_for(moved)

    async def main(env):
        member, gen = await stable_member(env, moved)
        await commit(env, moved, 5, gen, member)
        env.groups.unload_partition(p, 1)
        lock = env.groups.log.lock(p)
        await lock.acquire()  # the load waits for it: a load that takes as long as we like
        load = env.spawn(env.groups.load_partition, p, 2)
        await trio.sleep(0.1)
        assert p in env.groups.log.loading and not load.done.is_set()

        assert (await env.join(moved)).error == E.COORDINATOR_LOAD_IN_PROGRESS
        assert (await env.sync(moved, member, gen)).error == E.REBALANCE_IN_PROGRESS
        assert env.heartbeat(moved, member, gen) == E.NONE
        assert (await commit(env, moved, 6, gen, member))[("t", 0)] == E.COORDINATOR_LOAD_IN_PROGRESS
        assert env.groups.fetch_offsets(moved, None) == (E.COORDINATOR_LOAD_IN_PROGRESS, {})
        assert env.groups.describe_group(moved) == (E.COORDINATOR_LOAD_IN_PROGRESS, None)
        code, listed = env.groups.list_groups()
        assert code == E.COORDINATOR_LOAD_IN_PROGRESS and moved not in [g.group_id for g in listed]
        beat = await env.call_api(ApiKey.HEARTBEAT, 4, {"group_id": moved, "generation_id": gen, "member_id": member,
                                                        "group_instance_id": None})
        assert beat["error_code"] == E.NONE
        synced = await env.call_api(ApiKey.SYNC_GROUP, 5, {
            "group_id": moved, "generation_id": gen, "member_id": member, "group_instance_id": None,
            "protocol_type": "consumer", "protocol_name": "range", "assignments": []})
        assert synced["error_code"] == E.REBALANCE_IN_PROGRESS
        # Other partitions answer as usual.
        assert (await commit(env, kept, 1))[("t", 0)] == E.NONE

        lock.release()
        await load.wait()
        assert env.groups.owns(p) and p not in env.groups.log.loading
        assert env.groups.fetch_offsets(moved, [("t", 0)])[1][("t", 0)].offset == 5
        assert env.heartbeat(moved, member, gen) == E.NONE

    env.run(main)


def test_unload_during_a_load_drops_the_replayed_state(group_env):
    env = group_env(offsets_topic_num_partitions=PARTITIONS)
    env.create_topic("t", 1)
    moved, _kept = two_groups()
    p = env.groups.partition_for(moved)

    async def main(env):
        await commit(env, moved, 5)
        env.groups.unload_partition(p, 1)
        lock = env.groups.log.lock(p)
        await lock.acquire()
        load = env.spawn(env.groups.load_partition, p, 2)
        await trio.sleep(0.1)
        env.groups.unload_partition(p, 3)  # leadership moved on before the load ran
        lock.release()
        await load.wait()
        assert not env.groups.owns(p) and moved not in env.groups.groups
        assert env.groups.group_status(moved) == E.NOT_COORDINATOR

    env.run(main)


def test_a_slow_load_from_many_records_is_load_in_progress_until_done(group_env):
    """Without any lock held by the test: the replay of many records runs in a worker
    thread, and the event loop keeps answering (COORDINATOR_LOAD_IN_PROGRESS) meanwhile."""
    env = group_env(offsets_topic_num_partitions=1)
    env.create_topic("t", 1)

    async def main(env):
        for i in range(300):
            await env.groups.commit_offsets(group_id=f"g{i}", generation_id=-1, member_id="", group_instance_id=None,
                                            offsets={("t", 0): CommittedOffset(i)})
        env.groups.unload_partition(0, 1)
        load = env.spawn(env.groups.load_partition, 0, 2)
        seen = set()
        while not load.done.is_set():
            seen.add(env.groups.group_status("g1"))
            await trio.sleep(0)
        assert E.COORDINATOR_LOAD_IN_PROGRESS in seen
        assert env.groups.group_status("g1") == E.NONE
        assert env.groups.fetch_offsets("g299", [("t", 0)])[1][("t", 0)].offset == 299

    env.run(main)
