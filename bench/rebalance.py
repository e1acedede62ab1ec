"""Rebalance time: classic groups (eager and cooperative-sticky) vs KIP-848 consumer groups.

Why: KIP-848 moves assignment to the broker and hands partitions over incrementally, with no
group-wide JoinGroup/SyncGroup barrier; this measures what that means for a member joining
and a member leaving, on one broker, in one run, with confluent-kafka members of all three
kinds so that the client library is the same.

For each protocol and repeat: a fresh group of MEMBERS members on a PARTITIONS-partition
topic settles (every partition owned by one member, balanced); then
- join: one more member subscribes at t0;
- leave: that member closes (LeaveGroup / epoch -1) at t0;
and the figure is the time from t0 to the last assignment callback (on_assign / on_revoke /
on_lost, seen by the members themselves) after which every partition is owned by exactly
one member and the assignment is balanced (no member more than one partition ahead of
another), and the most partitions owned by no member at once on the way (an eager group
revokes everything). The protocols take turns within each repeat, so all see the same machine load.

Timing on both sides is alike: classic members heartbeat every 1 s (session 6 s); the
broker runs KIP-848 groups with group.consumer.heartbeat.interval.ms=1000 (session 10 s).
No records flow: this is the coordination alone.

    python bench/rebalance.py [--partitions 12] [--members 3] [--repeats 5]
"""

from __future__ import annotations

import argparse
import random
import statistics
import sys
import threading
import time
import uuid
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.brokers import create_topic, start_broker  # noqa: E402

PROTOCOLS = ("eager", "cooperative-sticky", "consumer")
BROKER_SETTINGS = {"group.consumer.min.heartbeat.interval.ms": "500", "group.consumer.heartbeat.interval.ms": "1000",
                   "group.consumer.min.session.timeout.ms": "6000", "group.consumer.session.timeout.ms": "10000"}
SETTLE_TIMEOUT_S = 60
STABLE_S = 2.0  # an assignment unchanged this long is the end of a rebalance
# A settled group is seen STABLE_S after its last change, which came with a heartbeat: a t0
# taken then is in phase with the 1 s heartbeats and every figure reads 1.00 s. A random
# wait first puts t0 anywhere in the heartbeat cycle, as a real join or leave is.
DEPHASE_S = 1.0


class Member(threading.Thread):
    """One confluent-kafka consumer polling on its own thread; its assignment as its own
    rebalance callbacks report it, with the time of the last change."""

    def __init__(self, bootstrap: str, group: str, topic: str, protocol: str, name: str) -> None:
        super().__init__(daemon=True, name=name)
        conf = {"bootstrap.servers": bootstrap, "group.id": group, "client.id": name,
                "enable.auto.commit": False, "auto.offset.reset": "earliest"}
        if protocol == "consumer":
            conf["group.protocol"] = "consumer"
        else:
            conf.update({"session.timeout.ms": 6000, "heartbeat.interval.ms": 1000,
                         "partition.assignment.strategy": "range" if protocol == "eager" else protocol})
        self.conf = conf
        self.topic = topic
        self.lock = threading.Lock()
        self.owned: set[int] = set()
        self.changed_at = 0.0
        self.history: list[tuple[float, frozenset[int]]] = []  # (when, owned after the change)
        self.stop_flag = threading.Event()
        self.error: str | None = None

    def _change(self, add: set[int], remove: set[int]) -> None:
        with self.lock:
            self.owned = (self.owned | add) - remove
            self.changed_at = time.monotonic()
            self.history.append((self.changed_at, frozenset(self.owned)))

    def run(self) -> None:
        import confluent_kafka as ck

        consumer = ck.Consumer(self.conf)
        try:
            consumer.subscribe([self.topic],
                               on_assign=lambda _c, ps: self._change({p.partition for p in ps}, set()),
                               on_revoke=lambda _c, ps: self._change(set(), {p.partition for p in ps}),
                               on_lost=lambda _c, ps: self._change(set(), {p.partition for p in ps}))
            while not self.stop_flag.is_set():
                msg = consumer.poll(0.05)
                if msg is not None and msg.error() is not None:
                    self.error = str(msg.error())
        finally:
            consumer.close()  # on_revoke, then LeaveGroup (classic) / epoch -1 (KIP-848)
            self._change(set(), set(self.owned))

    def snapshot(self) -> tuple[frozenset[int], float]:
        with self.lock:
            return frozenset(self.owned), self.changed_at


def most_unowned(members: list[Member], partitions: int, t0: float) -> int:
    """The most partitions owned by no member at once since t0, replayed from the members'
    callback histories (the stop-the-world of an eager group; it can last a few ms)."""
    current: dict[int, frozenset[int]] = {}
    timeline = []
    for i, m in enumerate(members):
        with m.lock:
            history = list(m.history)
        before = [owned for t, owned in history if t < t0]
        current[i] = before[-1] if before else frozenset()
        timeline += [(t, i, owned) for t, owned in history if t >= t0]
    worst = partitions - len(frozenset().union(*current.values()))
    for _t, i, owned in sorted(timeline, key=lambda e: e[0]):
        current[i] = owned
        worst = max(worst, partitions - len(frozenset().union(*current.values())))
    return worst


def wait_settled(members: list[Member], partitions: int, t0: float) -> tuple[float, int]:
    """(seconds from t0 to the last assignment change once every partition is owned once and
    the assignment is balanced, and has stayed so for STABLE_S; the most partitions owned by
    no member at once meanwhile)."""
    deadline = t0 + SETTLE_TIMEOUT_S
    while time.monotonic() < deadline:
        snaps = [m.snapshot() for m in members]
        sets = [s for s, _ in snaps]
        sizes = [len(s) for s in sets]
        if (sum(sizes) == partitions and set().union(*sets) == set(range(partitions))
                and max(sizes) - min(sizes) <= 1):
            last = max(t for _, t in snaps)
            if time.monotonic() - last >= STABLE_S:
                return last - t0, most_unowned(members, partitions, t0)
        time.sleep(0.02)
    raise TimeoutError("no settled assignment: " + "; ".join(
        f"{m.name} {sorted(m.snapshot()[0])} {m.error}" for m in members))


def one_run(bootstrap: str, protocol: str, partitions: int, count: int) -> tuple[float, float, int, int]:
    """(join seconds, leave seconds, most partitions unowned at once on the join, on the
    leave) for one fresh group."""
    topic = f"rebalance-{protocol}-{uuid.uuid4().hex[:8]}"
    group = f"g-{topic}"
    create_topic(bootstrap, topic, partitions)
    members = [Member(bootstrap, group, topic, protocol, f"{protocol}-{i}") for i in range(count)]
    try:
        for m in members:
            m.start()
        wait_settled(members, partitions, time.monotonic())
        time.sleep(random.uniform(0, DEPHASE_S))
        t0 = time.monotonic()
        joiner = Member(bootstrap, group, topic, protocol, f"{protocol}-joiner")
        joiner.start()
        members.append(joiner)
        join_s, join_gap = wait_settled(members, partitions, t0)
        time.sleep(random.uniform(0, DEPHASE_S))
        t0 = time.monotonic()
        members.remove(joiner)
        joiner.stop_flag.set()
        joiner.join(30)
        leave_s, leave_gap = wait_settled(members, partitions, t0)
        return join_s, leave_s, join_gap, leave_gap
    finally:
        for m in members:
            m.stop_flag.set()
        for m in members:
            m.join(30)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--partitions", type=int, default=12)
    parser.add_argument("--members", type=int, default=3, help="members before the join")
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--protocols", default=",".join(PROTOCOLS))
    args = parser.parse_args()
    protocols = [p for p in args.protocols.split(",") if p]
    broker = start_broker("trafka", settings=BROKER_SETTINGS)
    results: dict[str, list[tuple[float, float, int, int]]] = {p: [] for p in protocols}
    try:
        for r in range(args.repeats):
            order = protocols if r % 2 == 0 else list(reversed(protocols))
            for protocol in order:
                run = one_run(broker.bootstrap, protocol, args.partitions, args.members)
                results[protocol].append(run)
                print(f"repeat {r + 1} {protocol:>18}: join {run[0]:5.2f} s  leave {run[1]:5.2f} s  "
                      f"unowned at once: {run[2]} / {run[3]}", flush=True)
    finally:
        broker.stop()
    print(f"\n{args.partitions} partitions, {args.members} members + 1 joining then leaving, "
          f"confluent-kafka, medians of {args.repeats}")
    print("| protocol | join → all owned (s) | leave → all owned (s) | most partitions unowned at once "
          "(join / leave) |\n|---|---|---|---|")
    for protocol in protocols:
        joins = [run[0] for run in results[protocol]]
        leaves = [run[1] for run in results[protocol]]
        gaps = f"{max(run[2] for run in results[protocol])} / {max(run[3] for run in results[protocol])}"
        label = {"eager": "classic, eager (range)", "cooperative-sticky": "classic, cooperative-sticky",
                 "consumer": "KIP-848 consumer (uniform)"}[protocol]
        print(f"| {label} | {statistics.median(joins):.2f} (min {min(joins):.2f}, max {max(joins):.2f}) "
              f"| {statistics.median(leaves):.2f} (min {min(leaves):.2f}, max {max(leaves):.2f}) | {gaps} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
