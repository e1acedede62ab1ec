"""Answers that wait (Kafka's purgatory) without holding up the rest of their connection.

An acks=all produce in a cluster is answered only once the ISR has its batches. Kafka parks
such a request in its purgatory and keeps the channel muted until it is answered, so a
connection carries one of them per replication round trip, and every request a pipelining
producer has in flight (the idempotent producer: 5) queues behind the one before it: at
1 000 msg/s on this machine that queue, not the replication, was most of the latency.

Here a handler does the part that must follow request order — validation and the append
— and returns a `DelayedResponse`; its wait runs as a task of its own while the connection
reads and appends the next requests, and a `ResponseQueue` still writes the answers in
request order (Kafka's protocol guarantee). What each answer says does not change: the
appends happen in the order the requests came, exactly as when each waited in turn, and
each answer reports on its own batches (high watermark reached, timeout, leadership
moved). At most `MAX_DELAYED` answers of a connection wait at once; the next request is
read when one of them is done (the back-pressure Kafka gets from muting).
"""

from __future__ import annotations

from collections import deque
from typing import Awaitable, Callable

import trio

from server.regions import release_parts

# Answers of one connection that may wait at once before it stops reading requests.
# Kafka's producers keep at most 5 requests in flight (max.in.flight.requests.per.connection
# with idempotence); librdkafka without idempotence sends many more and is slowed here.
MAX_DELAYED = 32


class DelayedResponse:
    """What a handler returns instead of a body when its answer has to wait: `finish()` waits
    and returns the body (or None for no answer)."""

    __slots__ = ("finish",)

    def __init__(self, finish: Callable[[], Awaitable[dict | None]]) -> None:
        self.finish = finish


Send = Callable[[trio.abc.Stream, list], Awaitable[None]]


class ResponseQueue:
    """One connection's answers in request order while some of them still wait.

    Slots are filled in any order (by the connection's task for answers that are ready,
    by the waiting tasks for delayed ones) and written strictly from the head; whoever
    fills a slot writes what became writable, one writer at a time."""

    def __init__(self, stream: trio.abc.Stream, send: Send) -> None:
        self._stream = stream
        self._send = send
        self._slots: deque[list] = deque()  # each a one-item list: the parts, or None while waiting
        self._lock = trio.Lock()
        self._progress: trio.Event | None = None
        self.waiting = 0
        self.broken = False  # the peer went away: nothing more is written

    @property
    def idle(self) -> bool:
        """Nothing queued and nothing being written: the connection may write directly."""
        return not self._slots and not self._lock.locked()

    def push(self, parts: list) -> None:
        """Answers that are ready, behind everything queued before them."""
        if parts:
            self._slots.append([parts])

    def reserve(self) -> list:
        """A place for an answer that is not ready yet."""
        slot: list = [None]
        self._slots.append(slot)
        self.waiting += 1
        return slot

    def fill(self, slot: list, parts: list | None) -> None:
        slot[0] = parts if parts is not None else []
        self.waiting -= 1
        self._wake()

    def _wake(self) -> None:
        if self._progress is not None:
            self._progress.set()
            self._progress = None

    async def _wait_progress(self) -> None:
        if self._progress is None:
            self._progress = trio.Event()
        await self._progress.wait()

    async def flush(self) -> None:
        """Write the answers at the head that are ready."""
        async with self._lock:
            slots = self._slots
            while slots and slots[0][0] is not None:
                parts = slots.popleft()[0]
                if self.broken:
                    release_parts(parts)
                    continue
                try:
                    await self._send(self._stream, parts)  # releases the parts, sent or not
                except (trio.BrokenResourceError, trio.ClosedResourceError, OSError):
                    self.broken = True
        self._wake()

    async def wait_below(self, limit: int) -> None:
        """Back-pressure: return once fewer than `limit` answers wait."""
        while self.waiting >= limit and not self.broken:
            await self._wait_progress()

    async def drain(self) -> None:
        """Return once every queued answer is written (or the peer has gone)."""
        while True:
            await self.flush()
            if not self._slots or self.broken:
                return
            await self._wait_progress()

    def discard(self) -> None:
        """The connection is closing: release what will never be written."""
        self.broken = True
        while self._slots:
            parts = self._slots.popleft()[0]
            if parts:
                release_parts(parts)
