"""`PurgatoryTimer`: the deadlines of parked long polls, in one heap, expired by one task.

Why: a Fetch that finds no data parks on its partitions' waiter sets until data comes or
its max_wait_ms passes (Kafka's delayed-fetch purgatory). A `trio.move_on_after` per wait
made each park and expiry cost a cancel scope: entering it, registering its deadline, and
at expiry cancelling the task through trio's cancel-status machinery. With 10 000 idle
consumers long-polling (`bench/scaling.py --connections`) that was about half of the broker's
CPU. Kafka keeps
its purgatory's deadlines in a timing wheel served by one thread; this is the same idea
in trio's shape: a wait adds (deadline, event) to a heap, and the timer task sets the
events whose deadline has passed. Setting an `Event` only reschedules the waiting task.

How this works:
- `add(deadline, event)` pushes; if the new deadline is earlier than the one the timer
  task sleeps to, the task is woken to sleep less.
- A wait that ends early (data came) calls `discard(entry)`: its entry is marked dead, not
  searched for; dead entries are skipped when they come up and the heap is rebuilt without
  them once they outnumber the live ones (an acks=all Produce re-parks on every high
  watermark move with a 30 s deadline: without this the heap grew by one entry a move).
- At most EXPIRE_PER_PASS waits are woken per scheduler pass; the rest a pass later.
- `running` is False until `run` has started: callers fall back to a cancel scope of
  their own (a broker used without its background tasks, as some tests do).
"""

from __future__ import annotations

import heapq
import math

import trio

EXPIRE_PER_PASS = 128  # waits woken per scheduler pass when many expire together
# A long poll that nothing wakes (a Fetch or ShareFetch parked for want of data) is answered
# one millisecond tick after its max_wait_ms, never sooner. Kafka's purgatory is a timing
# wheel of 1 ms ticks on a millisecond clock, and its expired request then passes through a
# request-handler thread and the network thread's response queue: measured on this machine,
# Kafka 3.9 answers an empty Fetch with max_wait_ms 74 from 0.7 ms (median 2.2-2.5 ms) after
# max_wait, Trafka did from 0.4 ms (median 0.8-1.2 ms). Clients count on the answer coming
# after their own deadline: kafka-go's Conn.Read sends its remaining time truncated to whole
# milliseconds as max_wait_ms and takes an empty answer that arrives before that deadline for
# "nothing yet" rather than a timeout, so a Read with a deadline on an empty partition
# returned (0, nil) instead of its timeout error whenever the answer came within the
# truncated fraction.
EXPIRY_TICK_S = 0.001
COMPACT_AT = 1024  # dead entries tolerated before the heap is rebuilt (if they are the majority)


class PurgatoryTimer:
    def __init__(self) -> None:
        self._heap: list[list] = []  # [deadline, seq, event or None once discarded/expired]
        self._dead = 0
        self._seq = 0  # ties broken by arrival, never by comparing events
        self._sleeping_to = math.inf
        self._wakeup = trio.Event()
        self.running = False

    def add(self, deadline: float, event: trio.Event) -> list:
        """Set `event` at `deadline` (trio clock) unless something sets it earlier; the
        entry returned is for `discard`."""
        self._seq += 1
        entry = [deadline, self._seq, event]
        heapq.heappush(self._heap, entry)
        if deadline < self._sleeping_to:
            self._wakeup.set()
        return entry

    def discard(self, entry: list) -> None:
        """The wait of `entry` is over: its deadline no longer matters."""
        if entry[2] is None:  # expired already (popped)
            return
        entry[2] = None
        self._dead += 1
        heap = self._heap
        if self._dead > COMPACT_AT and self._dead * 2 > len(heap):
            heap[:] = [e for e in heap if e[2] is not None]
            heapq.heapify(heap)
            self._dead = 0

    def statistics(self) -> dict[str, int]:
        """Deadlines held of waits still parked."""
        return {"deadlines": len(self._heap) - self._dead}

    async def run(self, task_status=trio.TASK_STATUS_IGNORED) -> None:
        self.running = True
        task_status.started()
        heap = self._heap
        try:
            while True:
                now = trio.current_time()
                expired = 0
                while heap and heap[0][0] <= now and expired < EXPIRE_PER_PASS:
                    entry = heapq.heappop(heap)
                    event, entry[2] = entry[2], None
                    if event is None:
                        self._dead -= 1
                        continue
                    event.set()
                    expired += 1
                if expired == EXPIRE_PER_PASS:
                    # A wave of expiries (10 000 consumers whose polls began together) would
                    # make one scheduler pass of them all, and every other task — a
                    # producer's request — waits for the whole pass: let it in between.
                    await trio.sleep(0)
                    continue
                self._sleeping_to = heap[0][0] if heap else math.inf
                self._wakeup = trio.Event()
                with trio.move_on_at(self._sleeping_to):
                    await self._wakeup.wait()
        finally:
            self.running = False
            for _deadline, _seq, event in heap:  # nobody is left to expire them
                if event is not None:
                    event.set()
            heap.clear()
            self._dead = 0


def long_poll_deadline(max_wait_ms: int) -> float:
    """The trio-clock deadline of a request that may wait `max_wait_ms` for data (Fetch,
    ShareFetch): now for no wait, else one tick (EXPIRY_TICK_S) after max_wait_ms."""
    if max_wait_ms <= 0:
        return trio.current_time()
    return trio.current_time() + max_wait_ms / 1000 + EXPIRY_TICK_S
