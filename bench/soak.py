"""Bounded soak: producers, a verifying consumer and a churning consumer group, together.

For `--minutes` (default 2), against a fresh broker (or `--bootstrap`):
- `--producers` threads (confluent-kafka, acks=all, idempotence on) send keyed,
  sequence-numbered messages at `--rate` msg/s in total; every delivery report is kept.
- a verifier consumer (its own group, no churn) reads everything: each acknowledged
  message must arrive exactly once, in order per producer and key; e2e latency is taken
  from the send time in the payload.
- a consumer group of `--members` members commits offsets while one member is replaced
  every `--churn-s` seconds (close = LeaveGroup, then a new member joins); after the
  producers stop, the group must have seen every acknowledged message at least once
  (redelivery after a rebalance is allowed and counted, loss is not).
- the broker's RSS is sampled every second: the report gives first/last/max and the
  growth over the second half of the run (flat memory: growth close to 0).

Exit status 0 only with zero errors, zero lost and zero duplicated/reordered messages at
the verifier. Every loop is bounded in time.

    python bench/soak.py                     # 2 minutes, fresh Trafka
    python bench/soak.py --minutes 10 --rate 5000
    python bench/soak.py --target tansu      # the same against the peer
"""

from __future__ import annotations

import argparse
import json
import os
import struct
import sys
import threading
import time
import uuid
from collections import defaultdict

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from confluent_kafka import Consumer, KafkaError, Producer  # noqa: E402

from brokers import create_topic, host_cpu, proc_cpu_s, proc_rss_mb, start_broker  # noqa: E402
from produce_consume import percentiles  # noqa: E402

# payload: producer id (4), key number (4), per-(producer, key) sequence (8), send time ns (8), padding
_HEAD = struct.Struct(">IIQQ")


class Stats:
    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.errors: list[str] = []
        self.acked: set[tuple[int, int, int]] = set()
        self.sent = 0
        self.ack_ms: list[float] = []

    def error(self, what: str) -> None:
        with self.lock:
            self.errors.append(what)


def producer_loop(pid: int, args, topic: str, stats: Stats, stop: threading.Event) -> None:
    producer = Producer({
        "bootstrap.servers": args.bootstrap, "acks": "all", "enable.idempotence": True,
        "linger.ms": 5, "compression.type": args.compression,
        "error_cb": lambda err: stats.error(f"producer {pid}: {err}"),
    })
    rate = args.rate / args.producers
    interval = 1.0 / rate
    seqs = defaultdict(int)
    pad = b"s" * max(0, args.size - _HEAD.size)
    start = time.monotonic()
    i = 0
    while not stop.is_set():
        due = start + i * interval
        now = time.monotonic()
        if due > now:
            producer.poll(min(due - now, 0.05))
            continue
        key = i % args.keys
        seq = seqs[key]
        seqs[key] += 1
        t_send = time.monotonic_ns()

        def done(err, msg, ident=(pid, key, seq), t=t_send):
            if err is not None:
                stats.error(f"delivery {ident}: {err}")
            else:
                with stats.lock:
                    stats.acked.add(ident)
                    if t >= args.steady_after_ns:
                        stats.ack_ms.append((time.monotonic_ns() - t) / 1e6)

        while True:
            try:
                producer.produce(topic, _HEAD.pack(pid, key, seq, t_send) + pad, key=b"k%d" % key, on_delivery=done)
                break
            except BufferError:
                producer.poll(0.01)
        with stats.lock:
            stats.sent += 1
        i += 1
        if i % 100 == 0:
            producer.poll(0)
    left = producer.flush(30)
    if left:
        stats.error(f"producer {pid}: {left} messages undelivered after flush")


def consumer_config(args, group: str) -> dict:
    return {
        "bootstrap.servers": args.bootstrap, "group.id": group, "auto.offset.reset": "earliest",
        "session.timeout.ms": 6000, "heartbeat.interval.ms": 1000, "fetch.wait.max.ms": 100,
        "enable.auto.commit": True, "auto.commit.interval.ms": 1000,
    }


def verifier_loop(args, topic: str, stats: Stats, stop: threading.Event, out: dict) -> None:
    """One member, own group: exactly once and in order per (producer, key)."""
    consumer = Consumer({**consumer_config(args, f"soak-verify-{uuid.uuid4().hex[:6]}"),
                         "error_cb": lambda err: stats.error(f"verifier: {err}")})
    consumer.subscribe([topic])
    last: dict[tuple[int, int], int] = {}
    seen: set[tuple[int, int, int]] = out["seen"]
    dups = reorders = 0
    e2e: list[float] = []
    while not stop.is_set():
        msg = consumer.poll(0.2)
        if msg is None:
            continue
        if msg.error() is not None:
            if msg.error().code() != KafkaError._PARTITION_EOF:
                stats.error(f"verifier: {msg.error()}")
            continue
        now = time.monotonic_ns()
        pid, key, seq, t_send = _HEAD.unpack_from(msg.value())
        ident = (pid, key, seq)
        if ident in seen:
            dups += 1
            continue
        with stats.lock:
            seen.add(ident)
        if t_send >= args.steady_after_ns:
            e2e.append((now - t_send) / 1e6)
        else:
            out["warmup_max_ms"] = max(out.get("warmup_max_ms", 0.0), (now - t_send) / 1e6)
        prev = last.get((pid, key), -1)
        if seq != prev + 1:
            reorders += 1
        last[(pid, key)] = seq
    consumer.close()
    out.update(dups=dups, reorders=reorders, e2e=e2e)


def member_loop(args, topic: str, group: str, stats: Stats, stop: threading.Event, consumed: set, counts: dict) -> None:
    consumer = Consumer({**consumer_config(args, group), "error_cb": lambda err: stats.error(f"member: {err}")})
    consumer.subscribe([topic])
    n = 0
    while not stop.is_set():
        msg = consumer.poll(0.2)
        if msg is None:
            continue
        if msg.error() is not None:
            if msg.error().code() != KafkaError._PARTITION_EOF:
                stats.error(f"member: {msg.error()}")
            continue
        pid, key, seq, _t = _HEAD.unpack_from(msg.value())
        with stats.lock:
            if (pid, key, seq) in consumed:
                counts["redelivered"] += 1
            consumed.add((pid, key, seq))
        n += 1
    consumer.close()  # commits (auto commit) and leaves the group
    with stats.lock:
        counts["members_closed"] += 1


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--target", default="trafka", help="broker to start (trafka or tansu)")
    ap.add_argument("--bootstrap", default=None, help="use a running broker instead")
    ap.add_argument("--broker-pid", type=int, default=0, help="its PID, for RSS and CPU (with --bootstrap)")
    ap.add_argument("--minutes", type=float, default=2.0)
    ap.add_argument("--rate", type=int, default=2000, help="messages per second, all producers together")
    ap.add_argument("--producers", type=int, default=2)
    ap.add_argument("--members", type=int, default=3, help="consumer group members")
    ap.add_argument("--churn-s", type=float, default=15.0, help="replace one member this often")
    ap.add_argument("--partitions", type=int, default=6)
    ap.add_argument("--keys", type=int, default=60)
    ap.add_argument("--size", type=int, default=200)
    ap.add_argument("--compression", default="lz4")
    ap.add_argument("--drain-s", type=float, default=60.0, help="bound on catching up after producers stop")
    ap.add_argument("--warmup-s", type=float, default=5.0,
                    help="latency percentiles leave out messages sent in the first seconds (connection set-up, "
                         "first metadata, group join); their worst e2e is reported apart")
    ap.add_argument("--json", default=None, help="append the result as JSON to this file")
    ap.add_argument("--trafka-set", action="append", default=[], metavar="KEY=VALUE")
    args = ap.parse_args(argv)

    broker = None
    if args.bootstrap is None:
        settings = dict(s.split("=", 1) for s in args.trafka_set) if args.target == "trafka" else None
        broker = start_broker(args.target, settings=settings)
        args.bootstrap = broker.bootstrap
        args.broker_pid = broker.pid
    try:
        return run(args, broker)
    finally:
        if broker is not None:
            broker.stop()


def run(args, broker) -> int:
    topic = f"soak-{uuid.uuid4().hex[:8]}"
    create_topic(args.bootstrap, topic, args.partitions)
    stats = Stats()
    stop_producers = threading.Event()
    stop_verifier = threading.Event()
    stop_group = threading.Event()
    verify_out: dict = {"seen": set()}
    group = f"soak-group-{uuid.uuid4().hex[:6]}"
    consumed: set = set()
    counts = {"redelivered": 0, "members_closed": 0, "churns": 0}
    pid = args.broker_pid
    args.steady_after_ns = time.monotonic_ns() + int(args.warmup_s * 1e9)
    rss: list[tuple[float, float]] = []
    cpu0 = proc_cpu_s(pid) if pid else float("nan")
    host0 = host_cpu()
    t0 = time.monotonic()

    verifier = threading.Thread(target=verifier_loop, args=(args, topic, stats, stop_verifier, verify_out))
    verifier.start()
    members: list[tuple[threading.Thread, threading.Event]] = []

    def add_member() -> None:
        ev = threading.Event()
        th = threading.Thread(target=member_loop, args=(args, topic, group, stats, ev, consumed, counts))
        th.start()
        members.append((th, ev))

    for _ in range(args.members):
        add_member()
    producers = [threading.Thread(target=producer_loop, args=(i, args, topic, stats, stop_producers))
                 for i in range(args.producers)]
    for th in producers:
        th.start()

    duration = args.minutes * 60
    next_churn = t0 + args.churn_s
    next_report = t0 + 10
    victim = 0
    while time.monotonic() - t0 < duration:
        time.sleep(1.0)
        now = time.monotonic()
        if pid:
            rss.append((now - t0, proc_rss_mb(pid)))
        if now >= next_churn and members:
            th, ev = members.pop(victim % len(members))
            ev.set()
            th.join(30)
            add_member()
            counts["churns"] += 1
            victim += 1
            next_churn = now + args.churn_s
        if now >= next_report:
            with stats.lock:
                print(f"[{now - t0:5.0f}s] sent {stats.sent:,} acked {len(stats.acked):,} "
                      f"group-consumed {len(consumed):,} errors {len(stats.errors)} "
                      f"rss {rss[-1][1] if rss else float('nan'):.1f} MB churns {counts['churns']}", flush=True)
            next_report = now + 10

    stop_producers.set()
    for th in producers:
        th.join(60)
    produce_end = time.monotonic()
    # Drain: the verifier and the group must catch up with everything acknowledged.
    deadline = time.monotonic() + args.drain_s
    while time.monotonic() < deadline:
        with stats.lock:
            done = stats.acked <= consumed and stats.acked <= verify_out["seen"]
        if done:
            break
        time.sleep(0.5)
    time.sleep(1.0)  # a late duplicate would show up now
    stop_verifier.set()
    verifier.join(30)
    stop_group.set()
    for th, ev in members:
        ev.set()
    for th, ev in members:
        th.join(30)
    elapsed = produce_end - t0
    cpu = (proc_cpu_s(pid) - cpu0) if pid else float("nan")
    host1 = host_cpu()
    if pid:
        rss.append((time.monotonic() - t0, proc_rss_mb(pid)))

    acked = stats.acked
    seen = verify_out.get("seen", set())
    lost_verifier = acked - seen
    lost_group = acked - consumed
    e2e = percentiles(verify_out.get("e2e", []))
    ack = percentiles(stats.ack_ms)
    half = [m for t, m in rss if t >= elapsed / 2]
    growth = (half[-1] - half[0]) if len(half) >= 2 else float("nan")
    result = {
        "target": broker.name if broker else "external", "minutes": args.minutes, "rate": args.rate,
        "sent": stats.sent, "acked": len(acked), "verifier_seen": len(seen),
        "lost_at_verifier": len(lost_verifier), "lost_in_group": len(lost_group),
        "verifier_duplicates": verify_out.get("dups", -1), "verifier_reorders": verify_out.get("reorders", -1),
        "group_redelivered": counts["redelivered"], "churns": counts["churns"],
        "errors": len(stats.errors), "error_samples": stats.errors[:10],
        "e2e_ms": e2e, "ack_ms": ack, "warmup_s": args.warmup_s, "warmup_e2e_max_ms": verify_out.get("warmup_max_ms"),
        "rss_first_mb": rss[0][1] if rss else None, "rss_last_mb": rss[-1][1] if rss else None,
        "rss_max_mb": max(m for _t, m in rss) if rss else None, "rss_growth_second_half_mb": growth,
        "broker_cpu_pct": 100 * cpu / elapsed if elapsed else float("nan"),
        "host_busy_pct": 100 * (host1[0] - host0[0]) / max(1, host1[1] - host0[1]),
        "achieved_rate": stats.sent / elapsed if elapsed else float("nan"),
    }
    ok = (result["errors"] == 0 and result["lost_at_verifier"] == 0 and result["lost_in_group"] == 0
          and result["verifier_duplicates"] == 0 and result["verifier_reorders"] == 0 and len(acked) == stats.sent)
    result["ok"] = ok
    print_report(result)
    if args.json:
        with open(args.json, "a") as f:
            f.write(json.dumps(result) + "\n")
    return 0 if ok else 1


def print_report(r: dict) -> None:
    def pct(d: dict) -> str:
        if not d:
            return "-"
        return (f"p50 {d['p50']:.2f} p90 {d['p90']:.2f} p99 {d['p99']:.2f} p99.9 {d['p99_9']:.2f} "
                f"max {d['max']:.2f} ms")

    print("\n## Soak result\n")
    print("| item | value |\n|---|---|")
    rows = [
        ("broker", r["target"]), ("duration", f"{r['minutes']} min"),
        ("rate asked / achieved", f"{r['rate']} / {r['achieved_rate']:.0f} msg/s"),
        ("sent / acknowledged", f"{r['sent']:,} / {r['acked']:,}"),
        ("verifier: seen, lost, duplicates, out of order",
         f"{r['verifier_seen']:,}, {r['lost_at_verifier']}, {r['verifier_duplicates']}, {r['verifier_reorders']}"),
        ("group: lost, redelivered after rebalance, member replacements",
         f"{r['lost_in_group']}, {r['group_redelivered']}, {r['churns']}"),
        ("errors", f"{r['errors']} {r['error_samples'][:3] if r['errors'] else ''}"),
        (f"e2e latency (verifier; after the first {r['warmup_s']:.0f} s)", pct(r["e2e_ms"])),
        ("ack latency (acks=all; same window)", pct(r["ack_ms"])),
        ("worst e2e in the first seconds", f"{r['warmup_e2e_max_ms']:.1f} ms" if r["warmup_e2e_max_ms"] else "-"),
        ("broker RSS first / last / max", f"{r['rss_first_mb']:.1f} / {r['rss_last_mb']:.1f} / {r['rss_max_mb']:.1f} MB"
         if r["rss_first_mb"] is not None else "-"),
        ("RSS growth over the second half", f"{r['rss_growth_second_half_mb']:+.1f} MB"),
        ("broker CPU / host busy", f"{r['broker_cpu_pct']:.0f} % / {r['host_busy_pct']:.0f} %"),
        ("verdict", "OK" if r["ok"] else "FAILED"),
    ]
    for k, v in rows:
        print(f"| {k} | {v} |")


if __name__ == "__main__":
    sys.exit(main())
