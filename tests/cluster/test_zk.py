"""ZooKeeperClient against a real ZooKeeper (cli/zookeeper_server.py): CAS, multi,
ephemerals and sessions, watches delivered into trio, Kafka's registration helpers."""

from __future__ import annotations

import threading
import time
from typing import Any, Awaitable, Callable

import pytest
import trio
from kazoo.client import KazooClient

from server.zookeeper import znodes
from server.zookeeper.client import (BadVersion, CheckOp, ConnectionLoss, CreateOp, DeleteOp, NodeExists, NoNode, NotEmpty,
                               SessionEvent, SessionState, SetDataOp, ZooKeeperClient, split_connect_string)
from server.zookeeper.znodes import BrokerRegistration, EndPoint

SESSION_MS = 6000


def run(main: Callable[[], Awaitable[Any]], timeout: float = 40) -> Any:
    async def bounded() -> Any:
        with trio.fail_after(timeout):
            return await main()

    return trio.run(bounded)


def registration(broker_id: int, port: int = 9092) -> BrokerRegistration:
    return BrokerRegistration(broker_id=broker_id, endpoints=[EndPoint("PLAINTEXT", "127.0.0.1", port, "PLAINTEXT")])


def expire_session(zk: ZooKeeperClient) -> None:
    """Close `zk`'s session from a second connection that resumes it with the session id and
    password (ZooKeeper's documented way to force an expiry); `zk` then finds it expired."""
    client_id = zk.client_id
    assert client_id is not None
    other = KazooClient(hosts=zk.hosts, client_id=client_id, timeout=SESSION_MS / 1000)
    other.start(10)
    other.stop()
    other.close()


async def next_event(events: trio.MemoryReceiveChannel[SessionEvent], *states: SessionState) -> SessionEvent:
    async for event in events:
        if event.state in states:
            return event
    raise AssertionError("session event stream ended")


async def wait_until(predicate: Callable[[], bool], timeout: float = 10) -> None:
    with trio.fail_after(timeout):
        while not predicate():
            await trio.sleep(0.02)


def test_split_connect_string():
    assert split_connect_string("h1:2181,h2:2181/kafka/x") == ("h1:2181,h2:2181", "/kafka/x")
    assert split_connect_string("h1:2181") == ("h1:2181", "")
    assert split_connect_string("h1:2181/") == ("h1:2181", "")


def test_create_get_set_delete_with_version_cas(zk_connect):
    async def main():
        async with ZooKeeperClient() as zk:
            await zk.start(zk_connect, SESSION_MS)
            assert await zk.get("/t") is None and await zk.exists("/t") is None
            assert await zk.create("/t", b"v0") == "/t"
            data, stat = await zk.get("/t")
            assert (data, stat.version) == (b"v0", 0)
            stat = await zk.set("/t", b"v1", expected_version=0)
            assert stat.version == 1
            with pytest.raises(BadVersion) as lost:
                await zk.set("/t", b"stale", expected_version=0)  # someone else's update won
            assert lost.value.path == "/t"
            assert (await zk.get("/t"))[0] == b"v1"
            assert (await zk.set("/t", b"v2", -1)).version == 2
            with pytest.raises(NodeExists):
                await zk.create("/t", b"again")
            with pytest.raises(NoNode):
                await zk.set("/missing", b"x", 0)
            with pytest.raises(NoNode):
                await zk.create("/a/b/c", b"x")
            await zk.create("/a/b/c", b"x", make_parents=True)
            await zk.create("/a/b/d")
            assert await zk.children("/a/b") == ["c", "d"]
            with pytest.raises(NotEmpty):
                await zk.delete("/a")
            with pytest.raises(BadVersion):
                await zk.delete("/t", expected_version=1)
            await zk.delete("/t", expected_version=2)
            await zk.delete("/a", recursive=True)
            assert await zk.exists("/a") is None
            with pytest.raises(NoNode):
                await zk.delete("/a")
            first = await zk.create("/seq/n_", sequential=True, make_parents=True)
            second = await zk.create("/seq/n_", sequential=True)
            assert (first, second) == ("/seq/n_0000000000", "/seq/n_0000000001")  # 10-digit suffix

    run(main)


def test_multi_with_a_failing_version_check_changes_nothing(zk_connect):
    async def main():
        async with ZooKeeperClient() as zk:
            await zk.start(zk_connect, SESSION_MS)
            await zk.create(znodes.CONTROLLER_EPOCH_PATH, znodes.encode_controller_epoch(0))
            state = znodes.PartitionState(leader=1, leader_epoch=0, isr=[1, 2], controller_epoch=1)
            await zk.create(znodes.partition_state_path("t", 0), state.encode(), make_parents=True)
            # a controller write fenced by the controller epoch's zkVersion (KAFKA-6082)
            moved = state.__class__(leader=2, leader_epoch=1, isr=[2], controller_epoch=1)
            with pytest.raises(BadVersion) as fenced:
                await zk.multi([CheckOp(znodes.CONTROLLER_EPOCH_PATH, 5),
                                SetDataOp(znodes.partition_state_path("t", 0), moved.encode(), 0),
                                CreateOp("/brokers/topics/t/partitions/1")])
            assert fenced.value.op_index == 0 and len(fenced.value.results) == 3
            data, stat = await zk.get(znodes.partition_state_path("t", 0))
            assert znodes.PartitionState.decode(data, stat.version) == state.__class__(
                leader=1, leader_epoch=0, isr=[1, 2], controller_epoch=1, zk_version=0)
            assert await zk.exists("/brokers/topics/t/partitions/1") is None
            # the partition-state CAS fails on its own op
            with pytest.raises(BadVersion) as cas:
                await zk.multi([CheckOp(znodes.CONTROLLER_EPOCH_PATH, 0),
                                SetDataOp(znodes.partition_state_path("t", 0), moved.encode(), 7)])
            assert cas.value.op_index == 1
            results = await zk.multi([CheckOp(znodes.CONTROLLER_EPOCH_PATH, 0),
                                      SetDataOp(znodes.partition_state_path("t", 0), moved.encode(), 0),
                                      CreateOp("/brokers/topics/t/partitions/1", b""),
                                      DeleteOp("/brokers/topics/t/partitions/1")])
            assert results[0] is True and results[1].version == 1
            assert results[2] == "/brokers/topics/t/partitions/1" and results[3] is True

    run(main)


def test_ephemeral_registration_vanishes_when_the_client_closes(zk_connect):
    async def main():
        async with ZooKeeperClient() as observer:
            await observer.start(zk_connect, SESSION_MS)
            async with ZooKeeperClient() as zk:
                await zk.start(zk_connect, SESSION_MS)
                await zk.ensure_persistent_paths()
                epoch = await zk.register_broker(registration(1))
                data, stat = await observer.get("/brokers/ids/1")
                assert stat.czxid == epoch and stat.ephemeralOwner == zk.session_id
                assert BrokerRegistration.decode(1, data).endpoints == registration(1).endpoints
            # closing the client closes the session: the ephemeral is gone at once
            assert await observer.get("/brokers/ids/1") is None

    run(main)


def test_session_expiry_then_reregistration_gives_a_new_broker_epoch(zk_connect):
    async def main():
        async with ZooKeeperClient() as observer, ZooKeeperClient() as zk:
            await observer.start(zk_connect, SESSION_MS)
            await zk.start(zk_connect, SESSION_MS)
            await zk.ensure_persistent_paths()
            old_session = zk.session_id
            old_epoch = await zk.register_broker(registration(1))
            events = zk.session_events()
            await trio.to_thread.run_sync(expire_session, zk)
            expired = await next_event(events, SessionState.EXPIRED)
            assert expired.session_id == old_session
            fresh = await next_event(events, SessionState.NEW_SESSION)
            assert fresh.session_id == zk.session_id != old_session
            # ZooKeeper removed the old session's ephemeral; the broker registers again
            assert await observer.get("/brokers/ids/1") is None
            new_epoch = await zk.register_broker(registration(1))
            assert new_epoch > old_epoch
            _, stat = await observer.get("/brokers/ids/1")
            assert stat.ephemeralOwner == zk.session_id

    run(main)


def test_watches_fire_in_trio_and_rearm(zk_connect):
    async def main():
        seen_ids: list[list[str]] = []
        seen_controller: list[int | None] = []
        root = trio.lowlevel.current_root_task()

        async def on_brokers(children: list[str]) -> None:
            assert trio.lowlevel.current_root_task() is root  # a trio task, not a kazoo thread
            seen_ids.append(children)

        async def on_controller(node: tuple[bytes, Any] | None) -> None:
            await trio.sleep(0)  # an async callback may await
            seen_controller.append(None if node is None else znodes.ControllerRegistration.decode(node[0]).broker_id)

        async with ZooKeeperClient() as writer, ZooKeeperClient() as zk:
            await writer.start(zk_connect, SESSION_MS)
            await zk.start(zk_connect, SESSION_MS)
            await zk.ensure_persistent_paths()
            brokers = await zk.watch_children(znodes.BROKER_IDS_PATH, on_brokers)
            await zk.watch_data(znodes.CONTROLLER_PATH, on_controller)
            await wait_until(lambda: seen_ids == [[]] and seen_controller == [None])

            await writer.register_broker(registration(2))
            await wait_until(lambda: seen_ids[-1] == ["2"])
            await writer.register_broker(registration(1, 9093))
            await wait_until(lambda: seen_ids[-1] == ["1", "2"])  # re-armed after the first change
            await writer.create(znodes.CONTROLLER_PATH, znodes.ControllerRegistration(2).encode(), ephemeral=True)
            await wait_until(lambda: seen_controller[-1] == 2)
            await writer.set(znodes.CONTROLLER_PATH, znodes.ControllerRegistration(1).encode(), 0)
            await wait_until(lambda: seen_controller[-1] == 1)
            await writer.delete(znodes.CONTROLLER_PATH)
            await wait_until(lambda: seen_controller[-1] is None)
            assert seen_controller == [None, 2, 1, None]
            assert brokers.fired_count >= 2

            # a cancelled watch stays quiet
            brokers.cancel()
            count = len(seen_ids)
            await writer.delete("/brokers/ids/1")
            await writer.create(znodes.CONTROLLER_PATH, znodes.ControllerRegistration(3).encode(), ephemeral=True)
            await wait_until(lambda: seen_controller[-1] == 3)
            assert len(seen_ids) == count

            # watches come back after a session expiry (ZooKeeper dropped them with the session)
            events = zk.session_events()
            await trio.to_thread.run_sync(expire_session, zk)
            await next_event(events, SessionState.NEW_SESSION)
            await writer.set(znodes.CONTROLLER_PATH, znodes.ControllerRegistration(4).encode(), -1)
            await wait_until(lambda: seen_controller[-1] == 4)

    run(main)


def test_requests_and_watches_answer_while_every_worker_thread_is_busy(zk_connect):
    """ZooKeeper traffic holds no trio worker thread: with trio's default thread limiter
    full (a loaded broker's log appends and flushes use it), reads, writes, a multi and a
    watch still complete. Before, each request held a worker thread for its whole round
    trip and queued behind the busy ones, the broker's ZooKeeper calls all waiting."""
    async def main():
        release = threading.Event()
        limiter = trio.to_thread.current_default_thread_limiter()
        seen: list[list[str]] = []

        async def on_children(children: list[str]) -> None:
            seen.append(children)

        async with ZooKeeperClient() as zk, trio.open_nursery() as nursery:
            await zk.start(zk_connect, SESSION_MS)
            for _ in range(int(limiter.total_tokens)):
                nursery.start_soon(lambda: trio.to_thread.run_sync(release.wait, 30))
            await wait_until(lambda: limiter.available_tokens == 0)
            try:
                with trio.fail_after(5):
                    await zk.create("/busy", b"a")
                    assert (await zk.get("/busy"))[0] == b"a"
                    await zk.multi([CheckOp("/busy", 0), SetDataOp("/busy", b"b", 0), CreateOp("/busy/child", b"")])
                    assert await zk.children("/busy") == ["child"]
                    await zk.watch_children("/busy", on_children)
                    await zk.create("/busy/second", b"")
                    await wait_until(lambda: seen and seen[-1] == ["child", "second"])
                    await zk.delete("/busy/second")
            finally:
                release.set()

    run(main)


def test_chroot_is_created_if_missing(zookeeper, zk_connect):
    async def main():
        nested = zk_connect + "/kafka"
        async with ZooKeeperClient() as zk:
            await zk.start(nested, SESSION_MS)
            assert zk.chroot.endswith("/kafka")
            await zk.ensure_persistent_paths()
            await zk.create("/brokers/topics/t", b"{}")
        async with ZooKeeperClient() as root:
            await root.start(zookeeper.connect_string, SESSION_MS)
            chroot = split_connect_string(nested)[1]
            assert await root.exists(chroot) is not None
            assert (await root.get(chroot + "/brokers/topics/t"))[0] == b"{}"
            assert await root.exists("/brokers") is None  # nothing leaked outside the chroot

    run(main)


def test_register_broker_kafka_7165(zk_connect):
    """A registration owned by another live session is a duplicate broker id; one owned by
    this session is kept (a retried create); one owned by an earlier session of this client
    is replaced."""
    async def main():
        async with ZooKeeperClient() as first, ZooKeeperClient() as second:
            await first.start(zk_connect, SESSION_MS)
            await second.start(zk_connect, SESSION_MS)
            await first.ensure_persistent_paths()
            epoch = await first.register_broker(registration(1))
            with pytest.raises(NodeExists, match="already registered"):
                await second.register_broker(registration(1))
            # same session again: same znode (same epoch), data updated
            assert await first.register_broker(registration(1, 9999)) == epoch
            data, _ = await second.get("/brokers/ids/1")
            assert BrokerRegistration.decode(1, data).port == 9999

            # the KAFKA-7165 race, made deterministic: the znode is still owned by a session
            # this client held before (here: `second`'s, recorded as one of `first`'s)
            await first.delete("/brokers/ids/1")
            stale_epoch = await second.register_broker(registration(1))
            first._sessions.add(second.session_id)
            new_epoch = await first.register_broker(registration(1))
            assert new_epoch > stale_epoch
            _, stat = await second.get("/brokers/ids/1")
            assert stat.ephemeralOwner == first.session_id and stat.czxid == new_epoch

    run(main)


def test_cluster_id_created_once_by_racing_brokers(zk_connect):
    async def main():
        ids: dict[str, str] = {}
        async with ZooKeeperClient() as a, ZooKeeperClient() as b:
            await a.start(zk_connect, SESSION_MS)
            await b.start(zk_connect, SESSION_MS)
            proposals = {"a": znodes.new_cluster_id(), "b": znodes.new_cluster_id()}

            async def one(name: str, zk: ZooKeeperClient) -> None:
                ids[name] = await zk.get_or_create_cluster_id(proposals[name])

            async with trio.open_nursery() as nursery:
                nursery.start_soon(one, "a", a)
                nursery.start_soon(one, "b", b)
            assert ids["a"] == ids["b"] and ids["a"] in proposals.values()
            data, _ = await a.get(znodes.CLUSTER_ID_PATH)
            assert data == znodes.encode_cluster_id(ids["a"])
            assert await b.get_or_create_cluster_id("another") == ids["a"]

    run(main)


def test_session_survives_a_zookeeper_restart(zookeeper, zk_connect):
    """ZooKeeper down for less than the session timeout: SUSPENDED, then CONNECTED with the
    same session, ephemerals intact (ZooKeeper restores sessions from its log)."""
    async def main():
        async with ZooKeeperClient() as zk:
            await zk.start(zk_connect, 20000)
            await zk.ensure_persistent_paths()
            epoch = await zk.register_broker(registration(1))
            session = zk.session_id
            events = zk.session_events()
            await trio.to_thread.run_sync(zookeeper.kill)
            assert (await next_event(events, SessionState.SUSPENDED)).session_id == session
            await trio.to_thread.run_sync(zookeeper.start)
            resumed = await next_event(events, SessionState.CONNECTED, SessionState.EXPIRED, SessionState.NEW_SESSION)
            assert resumed == SessionEvent(SessionState.CONNECTED, session)
            _, stat = await zk.get("/brokers/ids/1")
            assert stat.czxid == epoch

    try:
        run(main, timeout=60)
    finally:
        if not zookeeper.running:
            zookeeper.start()


def test_harness_restart_keeps_znodes(zookeeper):
    client = KazooClient(hosts=zookeeper.connect_string)
    client.start(10)
    path = f"/harness-{time.monotonic_ns()}"
    client.create(path, b"kept")
    client.stop()
    client.close()
    zookeeper.restart()
    client = KazooClient(hosts=zookeeper.connect_string)
    client.start(10)
    try:
        assert client.get(path)[0] == b"kept"
    finally:
        client.delete(path)
        client.stop()
        client.close()


def test_start_without_a_server_is_a_connection_loss():
    from cli.zookeeper_server import free_port

    async def main():
        with pytest.raises(ConnectionLoss, match="no ZooKeeper answered"):
            async with ZooKeeperClient() as zk:  # the error is not wrapped in an ExceptionGroup
                await zk.start(f"127.0.0.1:{free_port()}", SESSION_MS, connection_timeout_ms=1000)

    run(main)


def test_a_failing_watch_callback_is_not_silent(zk_connect):
    async def main():
        async def broken(children: list[str]) -> None:
            if children:
                raise RuntimeError("controller bug")

        with pytest.raises(BaseExceptionGroup) as raised:
            async with ZooKeeperClient() as zk:
                await zk.start(zk_connect, SESSION_MS)
                await zk.create("/brokers/ids", make_parents=True)
                await zk.watch_children("/brokers/ids", broken)
                await zk.create("/brokers/ids/1", ephemeral=True)
                await trio.sleep_forever()  # cancelled when the callback fails
        assert raised.group_contains(RuntimeError, match="controller bug")

    run(main)
