"""The group and offset handlers, bytes in and bytes out, at every version we advertise.

Each request is encoded as a client would send it, decoded by `wire`, handled, and the
response encoded and decoded again, so a field a version lacks, or a null where the
version forbids one, fails here rather than in a client.
"""

from __future__ import annotations

import pytest
import trio

from tests.groups.conftest import SESSION_MS, consumer_assignment, consumer_subscription
from wire.errors import ErrorCode as E
from wire.registry import API_VERSIONS, ApiKey

K = ApiKey


def versions(key):
    lo, hi = API_VERSIONS[key]
    return range(lo, hi + 1)


def join_body(version: int, group: str = "g", member_id: str = "", instance: str | None = None) -> dict:
    body = {"group_id": group, "session_timeout_ms": SESSION_MS, "rebalance_timeout_ms": 10000,
            "member_id": member_id, "protocol_type": "consumer",
            "protocols": [{"name": "range", "metadata": consumer_subscription("t")}]}
    if version >= 5:
        body["group_instance_id"] = instance
    if version >= 8:
        body["reason"] = "test"
    return body


@pytest.mark.parametrize("version", versions(K.FIND_COORDINATOR))
def test_find_coordinator(group_env, version):
    env = group_env()

    async def main(env):
        if version >= 4:
            r = await env.call_api(K.FIND_COORDINATOR, version, {"key_type": 0, "coordinator_keys": ["a", "b"]})
            assert [(c["key"], c["node_id"], c["host"], c["port"], c["error_code"]) for c in r["coordinators"]] == [
                ("a", 1, "127.0.0.1", 9092, 0), ("b", 1, "127.0.0.1", 9092, 0)]
            bad = await env.call_api(K.FIND_COORDINATOR, version, {"key_type": 7, "coordinator_keys": ["a"]})
            assert bad["coordinators"][0]["error_code"] == E.INVALID_REQUEST
        else:
            body = {"key": "g"}
            if version >= 1:
                body["key_type"] = 1  # transactions are coordinated here too
            r = await env.call_api(K.FIND_COORDINATOR, version, body)
            assert (r["error_code"], r["node_id"], r["host"], r["port"]) == (0, 1, "127.0.0.1", 9092)

    env.run(main)


@pytest.mark.parametrize("version", versions(K.JOIN_GROUP))
def test_join_sync_heartbeat_leave_at_every_join_version(group_env, version):
    env = group_env()

    async def main(env):
        r = await env.call_api(K.JOIN_GROUP, version, join_body(version), client_id="app")
        if version >= 4:
            assert r["error_code"] == E.MEMBER_ID_REQUIRED and r["member_id"].startswith("app-")
            assert r["protocol_name"] == ("" if version < 7 else None)
            r = await env.call_api(K.JOIN_GROUP, version, join_body(version, member_id=r["member_id"]))
        assert r["error_code"] == 0 and r["generation_id"] == 1
        member = r["member_id"]
        assert r["leader"] == member and r["protocol_name"] == "range"
        assert r["members"][0]["member_id"] == member
        if version >= 7:
            assert r["protocol_type"] == "consumer"
        assignment = consumer_assignment({"t": [0]})
        s = await env.call_api(K.SYNC_GROUP, min(version, 5), {
            "group_id": "g", "generation_id": 1, "member_id": member, "protocol_type": "consumer",
            "protocol_name": "range", "assignments": [{"member_id": member, "assignment": assignment}]})
        assert (s["error_code"], s["assignment"]) == (0, assignment)
        h = await env.call_api(K.HEARTBEAT, min(version, 4), {"group_id": "g", "generation_id": 1, "member_id": member})
        assert h["error_code"] == 0
        h = await env.call_api(K.HEARTBEAT, min(version, 4), {"group_id": "g", "generation_id": 9, "member_id": member})
        assert h["error_code"] == E.ILLEGAL_GENERATION

    env.run(main)


@pytest.mark.parametrize("version", versions(K.SYNC_GROUP))
def test_sync_group_versions(group_env, version):
    env = group_env()

    async def main(env):
        r = await env.join_new("g")
        body = {"group_id": "g", "generation_id": r.generation_id, "member_id": r.member_id,
                "assignments": [{"member_id": r.member_id, "assignment": b"x"}]}
        if version >= 5:
            body.update(protocol_type="consumer", protocol_name="roundrobin")
            bad = await env.call_api(K.SYNC_GROUP, version, body)
            assert bad["error_code"] == E.INCONSISTENT_GROUP_PROTOCOL
            body["protocol_name"] = "range"
        s = await env.call_api(K.SYNC_GROUP, version, body)
        assert (s["error_code"], s["assignment"]) == (0, b"x")
        if version >= 5:
            assert (s["protocol_type"], s["protocol_name"]) == ("consumer", "range")

    env.run(main)


@pytest.mark.parametrize("version", versions(K.LEAVE_GROUP))
def test_leave_group_versions(group_env, version):
    env = group_env()

    async def main(env):
        r = await env.join_new("g")
        await env.sync("g", r.member_id, r.generation_id, {r.member_id: b""})
        if version < 3:
            out = await env.call_api(K.LEAVE_GROUP, version, {"group_id": "g", "member_id": r.member_id})
            assert out["error_code"] == 0
            out = await env.call_api(K.LEAVE_GROUP, version, {"group_id": "g", "member_id": r.member_id})
            assert out["error_code"] == E.UNKNOWN_MEMBER_ID
        else:
            out = await env.call_api(K.LEAVE_GROUP, version, {"group_id": "g", "members": [
                {"member_id": r.member_id, "group_instance_id": None, "reason": "bye"},
                {"member_id": "ghost", "group_instance_id": None}]})
            assert out["error_code"] == 0
            assert [(m["member_id"], m["error_code"]) for m in out["members"]] == [
                (r.member_id, 0), ("ghost", E.UNKNOWN_MEMBER_ID)]
        assert env.groups.groups["g"].members == {}

    env.run(main)


def commit_body(version: int, offsets: dict, group="g", generation=-1, member="") -> dict:
    topics: dict[str, list] = {}
    for (t, p), o in offsets.items():
        topics.setdefault(t, []).append({"partition_index": p, "committed_offset": o, "committed_leader_epoch": 0,
                                         "committed_metadata": "md", "commit_timestamp": -1})
    return {"group_id": group, "generation_id_or_member_epoch": generation, "member_id": member,
            "group_instance_id": None, "retention_time_ms": -1,
            "topics": [{"name": t, "partitions": ps} for t, ps in topics.items()]}


# v0 stores in ZooKeeper, not in the group (tests/old_clients/test_old_versions.py): a single
# broker answers it UNSUPPORTED_VERSION, as a KRaft Kafka 3.9 does.
@pytest.mark.parametrize("version", [v for v in versions(K.OFFSET_COMMIT) if v >= 1])
def test_offset_commit_and_fetch_versions(group_env, version):
    env = group_env()
    env.create_topic("t", 2)

    async def main(env):
        r = await env.call_api(K.OFFSET_COMMIT, version, commit_body(version, {("t", 0): 5, ("t", 1): 6, ("x", 0): 1}))
        errors = {(t["name"], p["partition_index"]): p["error_code"] for t in r["topics"] for p in t["partitions"]}
        assert errors == {("t", 0): 0, ("t", 1): 0, ("x", 0): E.UNKNOWN_TOPIC_OR_PARTITION}
        fetch_version = min(version, API_VERSIONS[K.OFFSET_FETCH][1])
        for fv in sorted({1, 2, 7, fetch_version}):
            if fv < 8:
                f = await env.call_api(K.OFFSET_FETCH, fv, {"group_id": "g", "topics": [
                    {"name": "t", "partition_indexes": [0, 1]}, {"name": "u", "partition_indexes": [3]}]})
                got = {(t["name"], p["partition_index"]): p["committed_offset"] for t in f["topics"]
                       for p in t["partitions"]}
                assert got == {("t", 0): 5, ("t", 1): 6, ("u", 3): -1}
                if fv >= 5:
                    assert f["topics"][0]["partitions"][0]["committed_leader_epoch"] == (0 if version >= 6 else -1)

    env.run(main)


@pytest.mark.parametrize("version", [2, 7, 8, 9])
def test_offset_fetch_all_partitions_and_batched_groups(group_env, version):
    env = group_env()
    env.create_topic("t", 2)

    async def main(env):
        await env.call_api(K.OFFSET_COMMIT, 3, commit_body(3, {("t", 0): 1}, group="a"))
        await env.call_api(K.OFFSET_COMMIT, 3, commit_body(3, {("t", 1): 2}, group="b"))
        if version < 8:
            f = await env.call_api(K.OFFSET_FETCH, version, {"group_id": "a", "topics": None, "require_stable": True})
            assert f["error_code"] == 0
            assert [(t["name"], p["partition_index"], p["committed_offset"], p["metadata"])
                    for t in f["topics"] for p in t["partitions"]] == [("t", 0, 1, "md")]
        else:
            f = await env.call_api(K.OFFSET_FETCH, version, {"groups": [
                {"group_id": "a", "topics": None, "member_id": None, "member_epoch": -1},
                {"group_id": "b", "topics": [{"name": "t", "partition_indexes": [0, 1]}]},
                {"group_id": "nobody", "topics": None}], "require_stable": True})
            got = {g["group_id"]: {(t["name"], p["partition_index"]): p["committed_offset"]
                                   for t in g["topics"] for p in t["partitions"]} for g in f["groups"]}
            assert got == {"a": {("t", 0): 1}, "b": {("t", 0): -1, ("t", 1): 2}, "nobody": {}}

    env.run(main)


def test_offset_commit_member_checks_over_the_wire(group_env):
    env = group_env()
    env.create_topic("t", 1)

    async def main(env):
        r = await env.join_new("g")
        await env.sync("g", r.member_id, r.generation_id, {r.member_id: b""})
        out = await env.call_api(K.OFFSET_COMMIT, 9, commit_body(9, {("t", 0): 1}, generation=r.generation_id + 1,
                                                                 member=r.member_id))
        assert out["topics"][0]["partitions"][0]["error_code"] == E.ILLEGAL_GENERATION
        out = await env.call_api(K.OFFSET_COMMIT, 9, commit_body(9, {("t", 0): 1}, generation=r.generation_id,
                                                                 member=r.member_id))
        assert out["topics"][0]["partitions"][0]["error_code"] == 0

    env.run(main)


def test_offset_delete_over_the_wire(group_env):
    env = group_env()
    env.create_topic("t", 1)

    async def main(env):
        await env.call_api(K.OFFSET_COMMIT, 3, commit_body(3, {("t", 0): 1}))
        out = await env.call_api(K.OFFSET_DELETE, 0, {"group_id": "g", "topics": [
            {"name": "t", "partitions": [{"partition_index": 0}]}, {"name": "zz", "partitions": [{"partition_index": 0}]}]})
        assert out["error_code"] == 0
        assert [(t["name"], t["partitions"][0]["error_code"]) for t in out["topics"]] == [
            ("t", 0), ("zz", E.UNKNOWN_TOPIC_OR_PARTITION)]
        out = await env.call_api(K.OFFSET_DELETE, 0, {"group_id": "nope", "topics": []})
        assert out["error_code"] == E.GROUP_ID_NOT_FOUND

    env.run(main)


@pytest.mark.parametrize("version", versions(K.DESCRIBE_GROUPS))
def test_describe_groups_versions(group_env, version):
    env = group_env()

    async def main(env):
        r = await env.join_new("g", instance=None)
        await env.sync("g", r.member_id, r.generation_id, {r.member_id: b"asg"})
        out = await env.call_api(K.DESCRIBE_GROUPS, version, {"groups": ["g", "missing"],
                                                              "include_authorized_operations": True}, client_id="cli")
        g, missing = out["groups"]
        assert (g["error_code"], g["group_state"], g["protocol_type"], g["protocol_data"]) == (
            0, "Stable", "consumer", "range")
        [m] = g["members"]
        assert (m["member_id"], m["client_id"], m["client_host"], m["member_assignment"]) == (
            r.member_id, "c", "/127.0.0.1", b"asg")
        assert m["member_metadata"] == consumer_subscription("t")
        # An unknown group: Dead with no error before v6; from v6 (KIP-1043) GROUP_ID_NOT_FOUND
        # with Kafka 4.x's message.
        if version >= 6:
            assert (missing["error_code"], missing["error_message"], missing["group_state"], missing["members"]) == (
                69, "Group missing not found.", "Dead", [])
        else:
            assert (missing["error_code"], missing["group_state"], missing["members"]) == (0, "Dead", [])
        if version >= 3:
            # READ, DELETE, DESCRIBE, DESCRIBE_CONFIGS, ALTER_CONFIGS: what Kafka 4.4 answers.
            assert g["authorized_operations"] == (1 << 3) | (1 << 6) | (1 << 8) | (1 << 10) | (1 << 11)
        # Outside Stable, metadata and assignment are not shown.
        env.join_new_bg("g", client_id="other")
        await trio.sleep(0.01)
        out = await env.call_api(K.DESCRIBE_GROUPS, version, {"groups": ["g"]})
        g = out["groups"][0]
        assert g["group_state"] == "PreparingRebalance" and g["protocol_data"] == ""
        assert all(m["member_assignment"] == b"" for m in g["members"])

    env.run(main)


@pytest.mark.parametrize("version", versions(K.LIST_GROUPS))
def test_list_groups_versions(group_env, version):
    env = group_env()
    env.create_topic("t", 1)

    async def main(env):
        await env.call_api(K.OFFSET_COMMIT, 3, commit_body(3, {("t", 0): 1}, group="simple"))
        r = await env.join_new("busy")
        await env.sync("busy", r.member_id, r.generation_id, {r.member_id: b""})
        out = await env.call_api(K.LIST_GROUPS, version, {})
        listed = sorted((g["group_id"], g["protocol_type"]) for g in out["groups"])
        assert listed == [("busy", "consumer"), ("simple", "")]
        if version >= 4:
            out = await env.call_api(K.LIST_GROUPS, version, {"states_filter": ["STABLE"]})
            assert [(g["group_id"], g["group_state"]) for g in out["groups"]] == [("busy", "Stable")]
        if version >= 5:
            out = await env.call_api(K.LIST_GROUPS, version, {"types_filter": ["Classic"]})
            assert {g["group_type"] for g in out["groups"]} == {"classic"} and len(out["groups"]) == 2
            out = await env.call_api(K.LIST_GROUPS, version, {"types_filter": ["consumer"]})
            assert out["groups"] == []

    env.run(main)


@pytest.mark.parametrize("version", versions(K.DELETE_GROUPS))
def test_delete_groups_versions(group_env, version):
    env = group_env()
    env.create_topic("t", 1)

    async def main(env):
        await env.call_api(K.OFFSET_COMMIT, 3, commit_body(3, {("t", 0): 1}, group="simple"))
        r = await env.join_new("busy")
        out = await env.call_api(K.DELETE_GROUPS, version, {"groups_names": ["simple", "busy", "nope", "simple"]})
        assert [(x["group_id"], x["error_code"]) for x in out["results"]] == [
            ("simple", 0), ("busy", E.NON_EMPTY_GROUP), ("nope", E.GROUP_ID_NOT_FOUND)]
        assert r.error == 0

    env.run(main)


def test_every_group_api_has_a_handler():
    from server.handlers import HANDLERS

    for key in (K.FIND_COORDINATOR, K.JOIN_GROUP, K.SYNC_GROUP, K.HEARTBEAT, K.LEAVE_GROUP, K.OFFSET_COMMIT,
                K.OFFSET_FETCH, K.OFFSET_DELETE, K.DESCRIBE_GROUPS, K.LIST_GROUPS, K.DELETE_GROUPS):
        assert key in HANDLERS
    assert HANDLERS[K.JOIN_GROUP].MAY_BLOCK and HANDLERS[K.SYNC_GROUP].MAY_BLOCK
