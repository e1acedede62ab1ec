"""Fixtures for the group coordinator tests: a real broker on a temporary data dir, run
under trio's MockClock so session and rebalance timeouts pass instantly and exactly.

`group_env` gives a factory: `env = group_env(**broker_settings)`; `env.run(main)` runs
`main(env)` inside trio with the coordinator's timers started; `env.restart()` closes
the broker and opens a new one on the same data dir (what a broker restart does).
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass, field

import pytest
import trio
import trio.testing

from server.broker import Broker
from server.config import load_config
from server.context import RequestContext
from server.handlers import HANDLERS
from server.session import Session
from wire.connection import decode_request, decode_response, encode_request, encode_response

SESSION_MS = 6000
REBALANCE_MS = 10000


def consumer_subscription(*topics: str, version: int = 0) -> bytes:
    """A ConsumerProtocolSubscription v0: the metadata a consumer joins with."""
    import struct

    out = bytearray(struct.pack(">hi", version, len(topics)))
    for t in topics:
        raw = t.encode()
        out += struct.pack(">h", len(raw)) + raw
    out += struct.pack(">i", -1)  # user data: null
    return bytes(out)


def consumer_assignment(parts: dict[str, list[int]]) -> bytes:
    import struct

    out = bytearray(struct.pack(">hi", 0, len(parts)))
    for t, ps in parts.items():
        raw = t.encode()
        out += struct.pack(">h", len(raw)) + raw + struct.pack(">i", len(ps))
        for p in ps:
            out += struct.pack(">i", p)
    out += struct.pack(">i", -1)
    return bytes(out)


@dataclass
class Call:
    """A coordinator call running in the background (JoinGroup/SyncGroup block)."""

    result: object = None
    done: trio.Event = field(default_factory=trio.Event)

    async def wait(self):
        await self.done.wait()
        return self.result


class GroupEnv:
    def __init__(self, data_dir, settings: dict[str, str]) -> None:
        self.data_dir = data_dir
        self.settings = settings
        self.broker = self._open()
        self.nursery: trio.Nursery | None = None
        self._correlation = itertools.count(1)
        self.session = Session("127.0.0.1", 50000)

    def _open(self) -> Broker:
        overrides = {"log.dirs": str(self.data_dir), "listeners": "127.0.0.1:9092", **self.settings}
        broker = Broker(load_config(overrides=overrides, environ={}))
        broker.open()
        return broker

    @property
    def groups(self):
        return self.broker.groups

    def close(self) -> None:
        if self.broker is not None:
            self.broker.close()
            self.broker = None

    def restart(self) -> None:
        self.close()
        self.broker = self._open()

    def create_topic(self, name: str, partitions: int = 1) -> None:
        self.broker.create_topic(name, partitions)

    def run(self, main, *, start_timers: bool = True) -> None:
        async def runner():
            async with trio.open_nursery() as nursery:
                self.nursery = nursery
                if start_timers:
                    await nursery.start(self.broker.groups.run)
                await main(self)
                nursery.cancel_scope.cancel()
            self.nursery = None

        trio.run(runner, clock=trio.testing.MockClock(autojump_threshold=0))

    def spawn(self, fn, *args, **kwargs) -> Call:
        call = Call()

        async def go():
            call.result = await fn(*args, **kwargs)
            call.done.set()

        self.nursery.start_soon(go)
        return call

    # -- coordinator calls with test defaults
    async def join(self, group: str, member_id: str = "", *, instance: str | None = None,
                   protocols=None, topics=("t",), session_ms: int = SESSION_MS, rebalance_ms: int = REBALANCE_MS,
                   client_id: str = "c", protocol_type: str = "consumer", require_known: bool = True,
                   skip_ok: bool = False):
        if protocols is None:
            protocols = [("range", consumer_subscription(*topics))]
        return await self.groups.join_group(
            group_id=group, member_id=member_id, group_instance_id=instance, client_id=client_id,
            client_host="/127.0.0.1", session_timeout_ms=session_ms, rebalance_timeout_ms=rebalance_ms,
            protocol_type=protocol_type, protocols=protocols, require_known_member_id=require_known,
            skip_assignment_ok=skip_ok)

    async def join_new(self, group: str, **kw):
        """First join the KIP-394 way: MEMBER_ID_REQUIRED, then join with the id."""
        from wire.errors import ErrorCode

        first = await self.join(group, instance=kw.get("instance"),
                                **{k: v for k, v in kw.items() if k != "instance"})
        if first.error != ErrorCode.MEMBER_ID_REQUIRED:
            return first
        return await self.join(group, first.member_id, **kw)

    def join_bg(self, group: str, member_id: str = "", **kw) -> Call:
        return self.spawn(self.join, group, member_id, **kw)

    def join_new_bg(self, group: str, **kw) -> Call:
        return self.spawn(self.join_new, group, **kw)

    async def sync(self, group: str, member_id: str, generation: int, assignments=None, *,
                   instance: str | None = None, protocol_type=None, protocol_name=None):
        return await self.groups.sync_group(
            group_id=group, generation_id=generation, member_id=member_id, group_instance_id=instance,
            protocol_type=protocol_type, protocol_name=protocol_name, assignments=assignments or {})

    def sync_bg(self, group: str, member_id: str, generation: int, assignments=None, **kw) -> Call:
        return self.spawn(self.sync, group, member_id, generation, assignments, **kw)

    def heartbeat(self, group: str, member_id: str, generation: int, instance: str | None = None):
        return self.groups.heartbeat(group_id=group, generation_id=generation, member_id=member_id,
                                     group_instance_id=instance)

    # -- the handler layer, bytes in and bytes out
    async def call_api(self, api_key: int, version: int, body: dict, client_id: str = "test-client") -> dict:
        correlation = next(self._correlation)
        frame = encode_request(api_key, version, correlation, body, client_id=client_id)
        request = decode_request(frame[4:])
        ctx = RequestContext(self.broker, self.session, api_key, version, correlation, client_id)
        response = await HANDLERS[api_key].handle(ctx, request.body)
        raw = encode_response(api_key, version, correlation, response)
        got_correlation, decoded = decode_response(api_key, version, raw[4:])
        assert got_correlation == correlation
        return decoded


@pytest.fixture
def group_env(tmp_path):
    envs: list[GroupEnv] = []

    def make(**settings) -> GroupEnv:
        # no initial rebalance delay unless a test asks for one (the root conftest.py says why)
        settings = {"group_initial_rebalance_delay_ms": 0, **settings}
        env = GroupEnv(tmp_path / f"data{len(envs)}", {k.replace("_", "."): str(v) for k, v in settings.items()})
        envs.append(env)
        return env

    yield make
    for env in envs:
        env.close()
