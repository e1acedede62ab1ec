"""KIP-848 ConsumerGroupHeartbeat through the handler layer (requests encoded and decoded
by the wire codec), on trio's MockClock: join, epochs, revoke before assign, fencing,
leaving, static members, session and rebalance timeouts, regex subscriptions, topic growth,
type conflicts with classic groups, and persistence across a restart."""

from __future__ import annotations

import pytest
import trio

from wire.errors import ErrorCode as E
from wire.registry import ApiKey

HB = ApiKey.CONSUMER_GROUP_HEARTBEAT
DESCRIBE = ApiKey.CONSUMER_GROUP_DESCRIBE


def owned_of(resp) -> list[dict] | None:
    if resp["assignment"] is None:
        return None
    return [{"topic_id": t["topic_id"], "partitions": list(t["partitions"])}
            for t in resp["assignment"]["topic_partitions"]]


def parts(resp) -> dict:
    return {t["topic_id"]: sorted(t["partitions"]) for t in resp["assignment"]["topic_partitions"]}


class Member:
    """One KIP-848 member as a client runs it: remembers its epoch and what it owns."""

    def __init__(self, env, group: str, member_id: str, topics=("t",), *, regex: str | None = None,
                 instance: str | None = None, version: int = 1, rebalance_ms: int = 30000,
                 assignor: str | None = None) -> None:
        self.env, self.group, self.member_id = env, group, member_id
        self.topics, self.regex, self.instance, self.version = list(topics), regex, instance, version
        self.rebalance_ms, self.assignor = rebalance_ms, assignor
        self.epoch = 0
        self.owned: list[dict] = []

    async def heartbeat(self, *, full: bool = False, epoch: int | None = None) -> dict:
        joining = self.epoch == 0
        body = {"group_id": self.group, "member_id": self.member_id,
                "member_epoch": self.epoch if epoch is None else epoch, "instance_id": self.instance,
                "rack_id": None, "rebalance_timeout_ms": self.rebalance_ms if joining or full else -1,
                "subscribed_topic_names": self.topics if joining or full else None,
                "server_assignor": self.assignor if joining else None,
                "topic_partitions": self.owned}
        if self.version >= 1:
            body["subscribed_topic_regex"] = self.regex if joining else None
        resp = await self.env.call_api(HB, self.version, body)
        if resp["error_code"] == E.NONE:
            self.member_id = resp["member_id"]
            self.epoch = resp["member_epoch"]
            if resp["assignment"] is not None:
                self.owned = owned_of(resp)
        return resp

    def owned_partitions(self, topic_id) -> set[int]:
        return {p for t in self.owned for p in t["partitions"] if t["topic_id"] == topic_id}


def topic_id(env, name: str):
    return env.broker.topics.get(name).topic_id


async def settle(members, rounds: int = 8) -> None:
    for _ in range(rounds):
        for m in members:
            await m.heartbeat()


def test_join_assigns_every_partition_and_bumps_epochs(group_env):
    env = group_env()
    env.create_topic("t", 4)

    async def main(env):
        a = Member(env, "g", "member-a")
        resp = await a.heartbeat()
        assert resp["error_code"] == E.NONE, resp
        assert resp["member_id"] == "member-a"
        assert resp["member_epoch"] == 1
        assert resp["heartbeat_interval_ms"] == 5000
        assert parts(resp) == {topic_id(env, "t"): [0, 1, 2, 3]}
        again = await a.heartbeat()
        assert again["member_epoch"] == 1 and again["assignment"] is None  # nothing changed
        group = env.groups.groups["g"]
        assert (group.group_epoch, group.assignment_epoch) == (1, 1)
        assert str(group.consumer_state) == "Stable"

    env.run(main)


def test_v0_join_gets_a_member_id_from_the_coordinator(group_env):
    env = group_env()
    env.create_topic("t", 1)

    async def main(env):
        a = Member(env, "g", "", version=0)
        resp = await a.heartbeat()
        assert resp["error_code"] == E.NONE and len(resp["member_id"]) > 10
        # v1 (KIP-1082): the client must generate it
        bad = await env.call_api(HB, 1, {"group_id": "g", "member_id": "", "member_epoch": 0,
                                         "rebalance_timeout_ms": 1000, "subscribed_topic_names": ["t"],
                                         "topic_partitions": []})
        assert bad["error_code"] == E.INVALID_REQUEST and "MemberId" in bad["error_message"]

    env.run(main)


def test_second_member_gets_partitions_only_after_first_revokes(group_env):
    env = group_env()
    env.create_topic("t", 4)

    async def main(env):
        tid = topic_id(env, "t")
        a, b = Member(env, "g", "a"), Member(env, "g", "b")
        await a.heartbeat()
        assert a.owned_partitions(tid) == {0, 1, 2, 3}
        rb = await b.heartbeat()
        # b joins at group epoch 2 but every partition is still a's: b gets nothing yet
        assert rb["member_epoch"] == 2 and parts(rb) == {}
        group = env.groups.groups["g"]
        target_b = group.target["b"][tid]
        assert len(target_b) == 2
        # a is asked to revoke b's partitions and keeps its epoch until it does
        ra = await env.call_api(HB, 1, {"group_id": "g", "member_id": "a", "member_epoch": 1,
                                        "topic_partitions": a.owned})
        assert ra["member_epoch"] == 1
        assert set(parts(ra)[tid]) == {0, 1, 2, 3} - target_b
        assert str(group.consumer_state) == "Reconciling"
        # b still gets nothing while a has not reported the revocation
        rb = await b.heartbeat()
        assert rb["assignment"] is None and b.owned_partitions(tid) == set()
        # a revokes (reports only what it keeps): it moves to epoch 2
        a.owned = owned_of(ra)
        ra = await a.heartbeat()
        assert ra["member_epoch"] == 2
        rb = await b.heartbeat()
        assert b.owned_partitions(tid) == target_b
        assert a.owned_partitions(tid) | b.owned_partitions(tid) == {0, 1, 2, 3}
        assert not a.owned_partitions(tid) & b.owned_partitions(tid)
        assert str(group.consumer_state) == "Stable"

    env.run(main)


def test_epoch_errors_and_leave(group_env):
    env = group_env()
    env.create_topic("t", 2)

    async def main(env):
        a = Member(env, "g", "a")
        await a.heartbeat()
        ahead = await a.heartbeat(epoch=5)
        assert ahead["error_code"] == E.FENCED_MEMBER_EPOCH
        unknown = await env.call_api(HB, 1, {"group_id": "g", "member_id": "zzz", "member_epoch": 1,
                                             "topic_partitions": []})
        assert unknown["error_code"] == E.UNKNOWN_MEMBER_ID
        bad_epoch = await env.call_api(HB, 1, {"group_id": "g", "member_id": "a", "member_epoch": -3})
        assert bad_epoch["error_code"] == E.INVALID_REQUEST
        bad_assignor = await env.call_api(HB, 1, {"group_id": "g", "member_id": "b", "member_epoch": 0,
                                                  "rebalance_timeout_ms": 1000, "subscribed_topic_names": ["t"],
                                                  "server_assignor": "sticky", "topic_partitions": []})
        assert bad_assignor["error_code"] == E.UNSUPPORTED_ASSIGNOR
        b = Member(env, "g", "b")
        await b.heartbeat()
        left = await env.call_api(HB, 1, {"group_id": "g", "member_id": "a", "member_epoch": -1})
        assert left["error_code"] == E.NONE and left["member_epoch"] == -1
        assert "a" not in env.groups.groups["g"].members
        await settle([b])
        assert b.owned_partitions(topic_id(env, "t")) == {0, 1}

    env.run(main)


def test_session_timeout_fences_a_silent_member(group_env):
    env = group_env()
    env.create_topic("t", 2)

    async def main(env):
        a, b = Member(env, "g", "a"), Member(env, "g", "b")
        await a.heartbeat()
        await b.heartbeat()
        await settle([a, b])
        for _ in range(12):  # b keeps heartbeating, a goes silent
            await trio.sleep(5)
            await b.heartbeat()
        assert "a" not in env.groups.groups["g"].members
        assert b.owned_partitions(topic_id(env, "t")) == {0, 1}
        back = await a.heartbeat()
        assert back["error_code"] == E.UNKNOWN_MEMBER_ID

    env.run(main)


def test_member_that_does_not_revoke_is_fenced_after_its_rebalance_timeout(group_env):
    env = group_env()
    env.create_topic("t", 2)

    async def main(env):
        a = Member(env, "g", "a", rebalance_ms=8000)
        await a.heartbeat()
        b = Member(env, "g", "b")
        await b.heartbeat()
        # a heartbeats but keeps reporting everything it owned
        stuck = a.owned
        for _ in range(4):
            await env.call_api(HB, 1, {"group_id": "g", "member_id": "a", "member_epoch": 1,
                                       "topic_partitions": stuck})
            await trio.sleep(3)
        assert "a" not in env.groups.groups["g"].members
        await settle([b])
        assert b.owned_partitions(topic_id(env, "t")) == {0, 1}

    env.run(main)


def test_static_member_leaves_temporarily_and_rejoins_with_its_partitions(group_env):
    env = group_env()
    env.create_topic("t", 4)

    async def main(env):
        tid = topic_id(env, "t")
        a = Member(env, "g", "a1", instance="inst-a")
        b = Member(env, "g", "b", instance="inst-b")
        await a.heartbeat()
        await b.heartbeat()
        await settle([a, b])
        mine = a.owned_partitions(tid)
        assert len(mine) == 2
        out = await env.call_api(HB, 1, {"group_id": "g", "member_id": "a1", "member_epoch": -2,
                                         "instance_id": "inst-a"})
        assert out["member_epoch"] == -2
        # another process with the same instance id while a1 still holds it: refused
        early = Member(env, "g", "x", instance="inst-b")
        assert (await early.heartbeat())["error_code"] == E.UNRELEASED_INSTANCE_ID
        a2 = Member(env, "g", "a2", instance="inst-a")
        resp = await a2.heartbeat()
        assert resp["error_code"] == E.NONE
        assert a2.owned_partitions(tid) == mine
        assert "a1" not in env.groups.groups["g"].members
        zombie = await env.call_api(HB, 1, {"group_id": "g", "member_id": "a1", "member_epoch": a.epoch,
                                            "instance_id": "inst-a", "topic_partitions": []})
        assert zombie["error_code"] == E.FENCED_INSTANCE_ID

    env.run(main)


def test_a_static_member_leaving_temporarily_releases_what_it_was_revoking(group_env):
    """Kafka clears a static member's pending revocations when it leaves with epoch -2: the
    partitions it was giving up go to their new owner at once, not after its session."""
    env = group_env()
    env.create_topic("t", 4)

    async def main(env):
        tid = topic_id(env, "t")
        a = Member(env, "g", "a", instance="inst-a")
        await a.heartbeat()
        assert a.owned_partitions(tid) == {0, 1, 2, 3}
        b = Member(env, "g", "b")
        await b.heartbeat()
        target_b = env.groups.groups["g"].target["b"][tid]
        # a is told to revoke b's partitions, then leaves temporarily without revoking
        ra = await env.call_api(HB, 1, {"group_id": "g", "member_id": "a", "member_epoch": 1,
                                        "topic_partitions": a.owned})
        assert set(parts(ra)[tid]) == {0, 1, 2, 3} - target_b
        out = await env.call_api(HB, 1, {"group_id": "g", "member_id": "a", "member_epoch": -2,
                                         "instance_id": "inst-a"})
        assert out["member_epoch"] == -2
        await b.heartbeat()
        assert b.owned_partitions(tid) == target_b

    env.run(main)


def test_regex_subscription_follows_new_topics(group_env):
    env = group_env()
    env.create_topic("orders-1", 1)
    env.create_topic("other", 1)

    async def main(env):
        a = Member(env, "g", "a", topics=(), regex="orders-.*")
        resp = await a.heartbeat()
        assert resp["error_code"] == E.NONE, resp
        assert set(parts(resp)) == {topic_id(env, "orders-1")}
        env.create_topic("orders-2", 2)
        await settle([a], 2)
        assert a.owned_partitions(topic_id(env, "orders-2")) == {0, 1}
        bad = Member(env, "g", "b", topics=(), regex="orders-(")
        assert (await bad.heartbeat())["error_code"] == E.INVALID_REGULAR_EXPRESSION

    env.run(main)


def test_partition_growth_and_topic_deletion_change_the_target(group_env):
    env = group_env()
    env.create_topic("t", 2)
    env.create_topic("u", 1)

    async def main(env):
        a = Member(env, "g", "a", topics=("t", "u"))
        await a.heartbeat()
        epoch = env.groups.groups["g"].group_epoch
        env.broker.create_partitions("t", 3)
        await settle([a], 2)
        assert a.owned_partitions(topic_id(env, "t")) == {0, 1, 2}
        assert env.groups.groups["g"].group_epoch == epoch + 1
        uid = topic_id(env, "u")
        assert a.owned_partitions(uid) == {0}
        env.broker.delete_topic("u")
        await settle([a], 2)
        assert a.owned_partitions(uid) == set()
        assert env.groups.groups["g"].group_epoch == epoch + 2

    env.run(main)


def test_group_types_do_not_mix_when_migration_is_disabled(group_env):
    """group.consumer.migration.policy=disabled (Kafka 3.9's default): a non-empty group is
    one type (test_consumer_group_migration.py has the other policies)."""
    env = group_env(group_consumer_migration_policy="disabled")
    env.create_topic("t", 1)

    async def main(env):
        join = env.join_new_bg("classic")
        await trio.sleep(1)
        assert (await join.wait()).error == E.NONE
        resp = await Member(env, "classic", "m").heartbeat()
        assert resp["error_code"] == E.GROUP_ID_NOT_FOUND
        assert resp["error_message"] == "Group classic is not a consumer group."
        await Member(env, "modern", "m").heartbeat()
        refused = await env.join("modern")
        assert refused.error == E.INCONSISTENT_GROUP_PROTOCOL
        listed = await env.call_api(ApiKey.LIST_GROUPS, 5, {"states_filter": [], "types_filter": ["consumer"]})
        assert [(g["group_id"], g["group_type"], g["group_state"]) for g in listed["groups"]] == [
            ("modern", "consumer", "Stable")]
        described = await env.call_api(ApiKey.DESCRIBE_GROUPS, 5, {"groups": ["modern"],
                                                                   "include_authorized_operations": False})
        assert described["groups"][0]["group_state"] == "Dead"
        # v6 (KIP-1043): Kafka 4.x says why
        described = await env.call_api(ApiKey.DESCRIBE_GROUPS, 6, {"groups": ["modern"],
                                                                   "include_authorized_operations": False})
        assert (described["groups"][0]["error_code"], described["groups"][0]["error_message"]) == (
            69, "Group modern is not a classic group.")
        # an empty consumer group may become a classic one
        await env.call_api(HB, 1, {"group_id": "modern", "member_id": "m", "member_epoch": -1})
        assert (await env.join_new("modern")).error == E.NONE

    env.run(main)


def test_describe_and_offsets_check_the_member_epoch(group_env):
    env = group_env()
    env.create_topic("t", 2)

    async def main(env):
        a = Member(env, "g", "a")
        await a.heartbeat()
        d = await env.call_api(DESCRIBE, 0, {"group_ids": ["g", "nope"], "include_authorized_operations": False})
        g, nope = d["groups"]
        assert g["error_code"] == E.NONE and g["group_state"] == "Stable"
        assert (g["group_epoch"], g["assignment_epoch"], g["assignor_name"]) == (1, 1, "uniform")
        [m] = g["members"]
        assert m["member_id"] == "a" and m["member_epoch"] == 1
        assert m["assignment"]["topic_partitions"][0]["topic_name"] == "t"
        assert nope["error_code"] == E.GROUP_ID_NOT_FOUND

        def commit(epoch, member="a"):
            return env.call_api(ApiKey.OFFSET_COMMIT, 9, {
                "group_id": "g", "generation_id_or_member_epoch": epoch, "member_id": member,
                "group_instance_id": None,
                "topics": [{"name": "t", "partitions": [{"partition_index": 0, "committed_offset": 42,
                                                         "committed_leader_epoch": -1,
                                                         "committed_metadata": ""}]}]})

        def code(resp):
            return resp["topics"][0]["partitions"][0]["error_code"]

        assert code(await commit(7)) == E.STALE_MEMBER_EPOCH
        assert code(await commit(1, "who")) == E.UNKNOWN_MEMBER_ID
        assert code(await commit(1)) == E.NONE

        def fetch(epoch, member="a"):
            return env.call_api(ApiKey.OFFSET_FETCH, 9, {
                "groups": [{"group_id": "g", "member_id": member, "member_epoch": epoch,
                            "topics": [{"name": "t", "partition_indexes": [0]}]}], "require_stable": True})

        assert (await fetch(3))["groups"][0]["error_code"] == E.STALE_MEMBER_EPOCH
        ok = await fetch(1)
        assert ok["groups"][0]["topics"][0]["partitions"][0]["committed_offset"] == 42

    env.run(main)


def test_state_survives_a_restart(group_env):
    env = group_env()
    env.create_topic("t", 4)
    state = {}

    async def first(env):
        a, b = Member(env, "g", "a"), Member(env, "g", "b", instance="inst-b")
        await a.heartbeat()
        await b.heartbeat()
        await settle([a, b])
        state["members"] = (a, b)
        group = env.groups.groups["g"]
        state["epochs"] = (group.group_epoch, group.assignment_epoch, a.epoch, b.epoch)
        state["target"] = dict(group.target)

    env.run(first)
    env.restart()

    async def second(env):
        group = env.groups.groups["g"]
        a, b = state["members"]
        a.env = b.env = env
        assert (group.group_epoch, group.assignment_epoch, a.epoch, b.epoch) == state["epochs"]
        assert group.target == state["target"]
        assert group.static_members == {"inst-b": "b"}
        ra, rb = await a.heartbeat(), await b.heartbeat()
        assert ra["error_code"] == rb["error_code"] == E.NONE
        assert ra["member_epoch"] == state["epochs"][2]  # carries on, no rebalance

    env.run(second)


def test_group_max_size(group_env):
    env = group_env(group_consumer_max_size=1)
    env.create_topic("t", 1)

    async def main(env):
        assert (await Member(env, "g", "a").heartbeat())["error_code"] == E.NONE
        full = await Member(env, "g", "b").heartbeat()
        assert full["error_code"] == E.GROUP_MAX_SIZE_REACHED

    env.run(main)


def test_classic_requests_for_a_consumer_group(group_env):
    env = group_env()
    env.create_topic("t", 1)

    async def main(env):
        await Member(env, "g", "a").heartbeat()
        assert env.heartbeat("g", "a", 1) == E.UNKNOWN_MEMBER_ID
        assert (await env.sync("g", "a", 1)).error == E.UNKNOWN_MEMBER_ID

    env.run(main)


def test_records_are_kafkas_formats():
    import uuid

    from server.groups.consumer import records as crec

    key = crec.encode_key(crec.ConsumerKey(crec.MEMBER_METADATA, "g", "m"))
    assert key == b"\x00\x05\x00\x01g\x00\x01m"
    assert crec.encode_key(crec.ConsumerKey(crec.METADATA, "g")) == b"\x00\x03\x00\x01g"
    assert crec.encode_epoch(7) == b"\x00\x00\x00\x00\x00\x07\x00"  # version 0, Epoch, no tagged fields
    tid = uuid.uuid4()
    value = crec.CurrentAssignmentValue(3, 2, 1, {tid: frozenset({0, 2})}, {tid: frozenset({1})})
    assert crec.decode_current_assignment(crec.encode_current_assignment(value)) == value
    meta = crec.MemberMetadataValue("i", None, "c", "/h", ["t", "u"], "x.*", 5000, "range")
    assert crec.decode_member_metadata(crec.encode_member_metadata(meta)) == meta
    topics = [crec.TopicMetadata(tid, "t", 4)]
    assert crec.decode_partition_metadata(crec.encode_partition_metadata(topics)) == topics
    assert crec.decode_key(key) == crec.ConsumerKey(crec.MEMBER_METADATA, "g", "m")


def test_coordinator_partition_moves_away_and_comes_back(group_env):
    """A ZooKeeper cluster's leadership change of the group's __consumer_offsets partition:
    NOT_COORDINATOR while led elsewhere (and the session timers stop), the consumer group
    replayed when leadership comes back, its member carrying on at its epoch."""
    env = group_env(offsets_topic_num_partitions=4)
    env.create_topic("t", 2)

    async def main(env):
        a = Member(env, "g", "a")
        await a.heartbeat()
        p = env.groups.partition_for("g")
        env.groups.unload_partition(p, 1)
        assert "g" not in env.groups.groups
        assert (await a.heartbeat())["error_code"] == E.NOT_COORDINATOR
        d = await env.call_api(DESCRIBE, 0, {"group_ids": ["g"], "include_authorized_operations": False})
        assert d["groups"][0]["error_code"] == E.NOT_COORDINATOR
        await trio.sleep(120)  # no session timer fires for a group led elsewhere
        await env.groups.load_partition(p, 2)
        group = env.groups.groups["g"]
        assert list(group.members) == ["a"] and group.members["a"].member_epoch == 1
        resp = await a.heartbeat()
        assert resp["error_code"] == E.NONE and resp["member_epoch"] == 1

    env.run(main)


def test_static_member_that_does_not_come_back_is_removed_after_its_session(group_env):
    env = group_env()
    env.create_topic("t", 2)

    async def main(env):
        a = Member(env, "g", "a", instance="inst-a")
        b = Member(env, "g", "b")
        await a.heartbeat()
        await b.heartbeat()
        await settle([a, b])
        await env.call_api(HB, 1, {"group_id": "g", "member_id": "a", "member_epoch": -2, "instance_id": "inst-a"})
        for _ in range(6):  # its partitions stay reserved for it meanwhile
            await trio.sleep(5)
            await b.heartbeat()
        assert len(b.owned_partitions(topic_id(env, "t"))) == 1
        for _ in range(6):
            await trio.sleep(5)
            await b.heartbeat()
        assert "a" not in env.groups.groups["g"].members
        assert b.owned_partitions(topic_id(env, "t")) == {0, 1}

    env.run(main)


def test_deleted_consumer_group_stays_deleted_after_a_restart(group_env):
    env = group_env()
    env.create_topic("t", 1)

    async def main(env):
        a = Member(env, "g", "a")
        await a.heartbeat()
        deleted = await env.call_api(ApiKey.DELETE_GROUPS, 2, {"groups_names": ["g"]})
        assert deleted["results"][0]["error_code"] == E.NON_EMPTY_GROUP
        await env.call_api(HB, 1, {"group_id": "g", "member_id": "a", "member_epoch": -1})
        deleted = await env.call_api(ApiKey.DELETE_GROUPS, 2, {"groups_names": ["g"]})
        assert deleted["results"][0]["error_code"] == E.NONE
        assert "g" not in env.groups.groups

    env.run(main)
    env.restart()

    async def after(env):
        assert "g" not in env.groups.groups
        # a new group of the same id starts from epoch 1
        resp = await Member(env, "g", "b").heartbeat()
        assert resp["member_epoch"] == 1

    env.run(after)
