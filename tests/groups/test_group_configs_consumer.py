"""KIP-848 consumer groups take their consumer.* group configs (Kafka 4.4's GroupConfig):
the group's consumer.heartbeat.interval.ms in every ConsumerGroupHeartbeat answer and its
consumer.session.timeout.ms for fencing a silent member, from the heartbeat after the
change on; a group without them keeps the broker's. Through the handler layer on trio's
MockClock (timeouts pass exactly), as test_consumer_group_heartbeat.py; the configs set with
IncrementalAlterConfigs through the same layer."""

from __future__ import annotations

import trio

from tests.groups.test_consumer_group_heartbeat import Member, settle
from wire.errors import ErrorCode as E
from wire.registry import ApiKey

BOUNDS = {"group_consumer_min_session_timeout_ms": 6000, "group_consumer_session_timeout_ms": 45000,
          "group_consumer_min_heartbeat_interval_ms": 500, "group_consumer_heartbeat_interval_ms": 5000}


async def set_configs(env, group: str, **configs: str) -> None:
    r = await env.call_api(ApiKey.INCREMENTAL_ALTER_CONFIGS, 1, {
        "resources": [{"resource_type": 32, "resource_name": group, "configs": [
            {"name": n.replace("_", "."), "config_operation": 0, "value": v} for n, v in configs.items()]}],
        "validate_only": False})
    assert r["responses"][0]["error_code"] == E.NONE, r


def test_heartbeat_interval_of_the_group_in_every_answer(group_env):
    env = group_env(**BOUNDS)
    env.create_topic("t", 2)

    async def main(env):
        a, other = Member(env, "g", "a"), Member(env, "h", "x")
        assert (await a.heartbeat())["heartbeat_interval_ms"] == 5000
        await set_configs(env, "g", consumer_heartbeat_interval_ms="1500")
        assert (await a.heartbeat())["heartbeat_interval_ms"] == 1500  # before: always the broker's 5000
        assert (await other.heartbeat())["heartbeat_interval_ms"] == 5000
        await env.call_api(ApiKey.INCREMENTAL_ALTER_CONFIGS, 1, {
            "resources": [{"resource_type": 32, "resource_name": "g", "configs": [
                {"name": "consumer.heartbeat.interval.ms", "config_operation": 1, "value": None}]}],
            "validate_only": False})
        assert (await a.heartbeat())["heartbeat_interval_ms"] == 5000

    env.run(main)


def test_session_timeout_of_the_group_fences_a_silent_member(group_env):
    env = group_env(**BOUNDS)
    env.create_topic("t", 2)

    async def main(env):
        await set_configs(env, "short", consumer_session_timeout_ms="8000")
        members = {g: (Member(env, g, f"{g}-a"), Member(env, g, f"{g}-b")) for g in ("short", "long")}
        for a, b in members.values():
            await a.heartbeat()
            await b.heartbeat()
            await settle([a, b])
        for _ in range(5):  # 15 s: the b members heartbeat, the a members are silent
            await trio.sleep(3)
            for _a, b in members.values():
                await b.heartbeat()
        # 8 s for the "short" group (before: the broker's 45 s for both)
        assert "short-a" not in env.groups.groups["short"].members
        assert (await members["short"][0].heartbeat())["error_code"] == E.UNKNOWN_MEMBER_ID
        assert "long-a" in env.groups.groups["long"].members
        await trio.sleep(35)
        assert "long-a" not in env.groups.groups["long"].members

    env.run(main)
