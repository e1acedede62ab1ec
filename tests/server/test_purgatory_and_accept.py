"""The server's changes for many connections, on real sockets where there are any.

- `PurgatoryTimer`: the shared deadlines of parked long polls expire each at its own time,
  also when a later-added one is earlier than the one the timer sleeps to; a Fetch long
  poll through a running broker still ends at max_wait_ms, and at once when data comes.
- The accept loop drains its listener's queue: a burst of connections queued before it
  runs is served whole, and the duplicate of the listening socket it drains through is
  closed when it stops (the port is free again, no descriptor is left behind).
"""

from __future__ import annotations

import os
import socket
import struct

import trio
import trio.testing

from server.broker import Broker
from server.config import load_config
from server.network import Server
from server.purgatory_timer import PurgatoryTimer
from wire import decode_response, encode_request


def test_timer_expires_each_wait_at_its_deadline():
    """Added 5, 1, 3 s out: the later-added, earlier deadlines wake the sleeping timer."""

    async def main():
        timer = PurgatoryTimer()
        ended: dict[float, float] = {}
        async with trio.open_nursery() as nursery:
            await nursery.start(timer.run)
            start = trio.current_time()

            async def wait(after: float) -> None:
                event = trio.Event()
                timer.add(start + after, event)
                await event.wait()
                ended[after] = trio.current_time() - start

            for after in (5.0, 1.0, 3.0):
                nursery.start_soon(wait, after)
                await trio.sleep(0)
            await trio.sleep(6)
            assert timer.statistics() == {"deadlines": 0}
            nursery.cancel_scope.cancel()
        assert ended == {5.0: 5.0, 1.0: 1.0, 3.0: 3.0}

    trio.run(main, clock=trio.testing.MockClock(autojump_threshold=0))


def test_timer_stopping_releases_its_waits():
    async def main():
        timer = PurgatoryTimer()
        event = trio.Event()
        async with trio.open_nursery() as nursery:
            await nursery.start(timer.run)
            timer.add(trio.current_time() + 3600, event)
            nursery.cancel_scope.cancel()
        assert event.is_set() and not timer.running

    trio.run(main, clock=trio.testing.MockClock(autojump_threshold=0))


def _broker(tmp_path) -> Broker:
    broker = Broker(load_config(overrides={"log.dirs": str(tmp_path / "data"), "listeners": "127.0.0.1:0"},
                                environ={}))
    broker.open()
    return broker


def test_long_poll_with_the_timer_ends_at_max_wait_or_on_data(tmp_path):
    broker = _broker(tmp_path)
    broker.create_topic("polled", 1)
    partition = broker.partition("polled", 0)

    async def main():
        async with trio.open_nursery() as nursery:
            await nursery.start(broker.purgatory_timer.run)
            t0 = trio.current_time()
            await broker.wait_for_data([partition], 0.5)
            assert abs(trio.current_time() - t0 - 0.5) < 1e-9  # MockClock: exactly max_wait
            assert broker.purgatory["Fetch"] == 0 and not partition.waiters

            async def wake_later():
                await trio.sleep(0.1)
                partition.wake()

            nursery.start_soon(wake_later)
            t0 = trio.current_time()
            await broker.wait_for_data([partition], 30)
            assert abs(trio.current_time() - t0 - 0.1) < 1e-9
            nursery.cancel_scope.cancel()

    try:
        trio.run(main, clock=trio.testing.MockClock(autojump_threshold=0))
    finally:
        broker.close()


def _api_versions_answered(port: int, sockets: list[socket.socket]) -> int:
    frame = encode_request(18, 0, 7, {}, client_id="burst")
    for s in sockets:
        s.sendall(frame)
    answered = 0
    for s in sockets:
        s.settimeout(20)
        head = s.recv(4, socket.MSG_WAITALL)
        body = s.recv(struct.unpack(">i", head)[0], socket.MSG_WAITALL)
        corr, resp = decode_response(18, 0, body)
        answered += corr == 7 and resp["error_code"] == 0
    return answered


def test_a_queued_burst_is_served_and_the_duplicate_listener_closed(tmp_path):
    broker = _broker(tmp_path)
    server = Server(broker)
    fds_before = len(os.listdir("/proc/self/fd"))

    async def main():
        async with trio.open_nursery() as outer:
            connections = outer
            listeners = [await trio.open_tcp_listeners(0, host="127.0.0.1")][0]
            port = listeners[0].socket.getsockname()[1]
            # 300 connections complete their handshakes before the accept loop ever runs
            sockets = [socket.create_connection(("127.0.0.1", port)) for _ in range(300)]
            outer.start_soon(server._accept_loop, listeners[0], connections)
            answered = await trio.to_thread.run_sync(_api_versions_answered, port, sockets)
            assert answered == 300
            for s in sockets:
                s.close()
            await listeners[0].aclose()
            outer.cancel_scope.cancel()
        return port

    try:
        port = trio.run(main)
    finally:
        broker.close()
    assert server._raw_listeners and all(raw.fileno() == -1 for raw in server._raw_listeners)
    probe = socket.socket()
    probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    probe.bind(("127.0.0.1", port))  # nothing holds the port any more
    probe.close()
    assert len(os.listdir("/proc/self/fd")) <= fds_before


def test_a_wave_of_expiries_is_spread_over_scheduler_passes():
    """300 waits due at once are woken at most EXPIRE_PER_PASS a pass, so a task that
    runs every pass (a producer's connection) sees the wave in parts, not all at once."""
    from server.purgatory_timer import EXPIRE_PER_PASS

    async def main():
        timer = PurgatoryTimer()
        events = [trio.Event() for _ in range(300)]
        seen: list[int] = []
        async with trio.open_nursery() as nursery:
            await nursery.start(timer.run)
            due = trio.current_time() + 1
            for event in events:
                timer.add(due, event)
            await trio.sleep_until(due)
            while len(seen) < 10:
                seen.append(sum(e.is_set() for e in events))
                await trio.sleep(0)
            nursery.cancel_scope.cancel()
        # trio may run the timer before or after this task within a batch, so between two
        # looks here the timer may have had two passes: at most 2 x EXPIRE_PER_PASS (< 300)
        # new wake-ups per look, and the wave is seen half-done at least once.
        assert 2 * EXPIRE_PER_PASS < 300 and seen[-1] == 300
        assert all(b - a <= 2 * EXPIRE_PER_PASS for a, b in zip(seen, seen[1:])), seen
        assert any(0 < n < 300 for n in seen), seen

    trio.run(main, clock=trio.testing.MockClock(autojump_threshold=0))


def test_waits_ended_early_do_not_pile_up():
    """An acks=all Produce re-parks on every high-watermark move with a 30 s deadline; each
    wait ended by data must leave the heap, not stay until its deadline (5 000 early ends
    held 5 000 entries and their events)."""
    from server.purgatory_timer import COMPACT_AT

    async def main():
        timer = PurgatoryTimer()
        async with trio.open_nursery() as nursery:
            await nursery.start(timer.run)
            for _ in range(5000):
                event = trio.Event()
                entry = timer.add(trio.current_time() + 30, event)
                event.set()  # data came
                timer.discard(entry)
            assert timer.statistics() == {"deadlines": 0}
            assert len(timer._heap) <= COMPACT_AT + 1
            # a live wait among the dead ones still expires at its deadline
            event = trio.Event()
            timer.add(trio.current_time() + 1, event)
            with trio.fail_after(2):
                await event.wait()
            nursery.cancel_scope.cancel()

    trio.run(main, clock=trio.testing.MockClock(autojump_threshold=0))
