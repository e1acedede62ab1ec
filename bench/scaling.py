"""Scaling curves: partitions (1 -> 1000), connections (1 -> 200), retained data (GBs).

Three sweeps, each on a fresh broker (Trafka by default, `--target tansu` for the peer),
printed as tables:

- partitions: for each P, a topic of P partitions; throughput with `produce_consume.py`
  (confluent-kafka, 100 B messages) and p99 end-to-end latency at `--latency-rate`
  msg/s spread over all P partitions (the consumer fetches all of them); broker RSS after
  the throughput run and at the end (the 1000-partition figure is the "RSS with 1 000
  partitions" target: < 200 MB).
- connections: C connections (a raw-protocol client, `rawclient.py`, one thread,
  non-blocking sockets), each with one Produce request in flight (10 records x 100 B);
  requests/s, msgs/s, request round-trip p50/p99 and broker CPU for each C.
- retained data: a single-partition log of `--retained-gb` GB (256 MiB segments) is
  filled, then `--read-mb` MB are fetched sequentially from the oldest offset and from
  near the newest, and `--random-reads` single-batch fetches hit random offsets of the
  older and the newer half. With an offset index, the oldest reads as fast as the newest.

    python bench/scaling.py                       # all three, about 3-5 minutes
    python bench/scaling.py --only partitions --partitions 1,10,100,1000
    python bench/scaling.py --only retained --retained-gb 4
"""

from __future__ import annotations

import argparse
import json
import os
import random
import selectors
import socket
import struct
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from brokers import REPO, proc_cpu_s, start_broker  # noqa: E402
from produce_consume import percentiles  # noqa: E402
from rawclient import RawClient, make_batch, next_offsets  # noqa: E402

PC = os.path.join(os.path.dirname(os.path.abspath(__file__)), "produce_consume.py")


def _csv_ints(text: str) -> list[int]:
    return [int(x) for x in text.split(",") if x.strip()]


def _pc(bootstrap: str, pid: int, extra: list[str], timeout: float) -> dict:
    cmd = [sys.executable, PC, "--bootstrap", bootstrap, "--broker-pid", str(pid), "--json", *extra]
    proc = subprocess.run(cmd, cwd=REPO, capture_output=True, text=True, timeout=timeout)
    lines = [l for l in proc.stdout.splitlines() if l.startswith("{")]
    if not lines:
        return {"verified": False, "errors": [proc.stderr[-1000:]]}
    return json.loads(lines[-1])


def _f(v, d=0) -> str:
    return "-" if not isinstance(v, (int, float)) or v != v else f"{v:,.{d}f}"


# ---------------------------------------------------------------------------- partitions

def sweep_partitions(args) -> list[dict]:
    rows = []
    for p in _csv_ints(args.partitions):
        broker = start_broker(args.target)
        try:
            rss_idle = broker.rss_mb()
            t = _pc(broker.bootstrap, broker.pid, ["--size", "100", "--messages", str(args.messages),
                                                   "--partitions", str(p)], args.run_timeout)
            rss_after_tp = broker.rss_mb()
            lat = _pc(broker.bootstrap, broker.pid, ["--latency", "--size", "100", "--messages",
                                                     str(args.latency_messages), "--rate", str(args.latency_rate),
                                                     "--partitions", str(p)], args.run_timeout)
            row = {"partitions": p, "produce_msgs": t.get("produce_msgs"), "consume_msgs": t.get("consume_msgs"),
                   "produce_us": t.get("produce_broker_cpu_us_per_msg"),
                   "consume_us": t.get("consume_broker_cpu_us_per_msg"),
                   "e2e_p50": lat.get("e2e_p50_ms"), "e2e_p99": lat.get("e2e_p99_ms"),
                   "e2e_max": lat.get("e2e_max_ms"), "lat_broker_cpu_pct": lat.get("broker_cpu_pct"),
                   "rss_idle_mb": rss_idle, "rss_after_throughput_mb": rss_after_tp,
                   "rss_end_mb": broker.rss_mb(), "rss_peak_mb": broker.hwm_mb(),
                   "verified": bool(t.get("verified")) and bool(lat.get("verified"))}
        finally:
            broker.stop()
        rows.append(row)
        print(f"  P={p}: produce {_f(row['produce_msgs'])} msg/s, consume {_f(row['consume_msgs'])} msg/s, "
              f"e2e p99 {_f(row['e2e_p99'], 2)} ms, RSS {_f(row['rss_after_throughput_mb'], 1)} MB "
              f"(peak {_f(row['rss_peak_mb'], 1)})", flush=True)
    print(f"\n## Partitions ({args.target}; 100 B; throughput N={args.messages:,}; latency "
          f"{args.latency_rate} msg/s over all partitions)\n")
    print("| partitions | produce msg/s | consume msg/s | broker µs/msg p/c | e2e p50 ms | e2e p99 ms | e2e max ms "
          "| broker CPU % (latency run) | RSS idle / after throughput / end / peak MB | verified |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    for r in rows:
        print(f"| {r['partitions']} | {_f(r['produce_msgs'])} | {_f(r['consume_msgs'])} | {_f(r['produce_us'], 2)} / "
              f"{_f(r['consume_us'], 2)} | {_f(r['e2e_p50'], 2)} | {_f(r['e2e_p99'], 2)} | {_f(r['e2e_max'], 2)} | "
              f"{_f(r['lat_broker_cpu_pct'])} | {_f(r['rss_idle_mb'], 1)} / {_f(r['rss_after_throughput_mb'], 1)} / "
              f"{_f(r['rss_end_mb'], 1)} / {_f(r['rss_peak_mb'], 1)} | {r['verified']} |")
    return rows


# ---------------------------------------------------------------------------- connections

class _Conn:
    __slots__ = ("sock", "buf", "sent_at", "expect")

    def __init__(self, sock: socket.socket) -> None:
        self.sock = sock
        self.buf = bytearray()
        self.sent_at = 0.0
        self.expect = -1


def _connection_level(bootstrap: str, pid: int, frames: list[bytes], n_conns: int, seconds: float) -> dict:
    host, port = bootstrap.rsplit(":", 1)
    sel = selectors.DefaultSelector()
    conns = []
    for i in range(n_conns):
        s = socket.create_connection((host, int(port)), timeout=10)
        s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        s.setblocking(False)
        c = _Conn(s)
        conns.append(c)
        sel.register(s, selectors.EVENT_READ, c)
    rtts: list[float] = []
    done = 0
    errors = 0
    cpu0 = proc_cpu_s(pid)
    t0 = time.perf_counter()

    def fire(c: _Conn, i: int) -> None:
        c.sent_at = time.perf_counter()
        c.sock.sendall(frames[i % len(frames)])  # small frames: fit the socket buffer

    for i, c in enumerate(conns):
        fire(c, i)
    end = t0 + seconds
    k = 0
    while True:
        now = time.perf_counter()
        if now >= end:
            break
        for key, _ev in sel.select(timeout=min(0.1, end - now)):
            c = key.data
            try:
                chunk = c.sock.recv(65536)
            except BlockingIOError:
                continue
            if not chunk:
                errors += 1
                sel.unregister(c.sock)
                continue
            c.buf += chunk
            while len(c.buf) >= 4:
                size = struct.unpack_from(">i", c.buf, 0)[0]
                if len(c.buf) < 4 + size:
                    break
                del c.buf[:4 + size]
                rtts.append((time.perf_counter() - c.sent_at) * 1000)
                done += 1
                k += 1
                if time.perf_counter() < end:
                    fire(c, k)
    elapsed = time.perf_counter() - t0
    cpu = proc_cpu_s(pid) - cpu0
    for c in conns:
        c.sock.close()
    sel.close()
    p = percentiles(rtts)
    return {"connections": n_conns, "requests": done, "req_per_s": done / elapsed, "rtt_p50_ms": p.get("p50"),
            "rtt_p99_ms": p.get("p99"), "rtt_max_ms": p.get("max"), "broker_cpu_pct": 100 * cpu / elapsed,
            "errors": errors, "broker_us_per_req": cpu / max(done, 1) * 1e6}


def sweep_connections(args) -> list[dict]:
    broker = start_broker(args.target)
    rows = []
    try:
        admin = RawClient(broker.bootstrap)
        parts = 6
        if admin.create_topic("conns", parts) not in (0, 36):
            raise RuntimeError("could not create topic")
        admin.wait_topic("conns", parts)
        per_req = args.conn_batch
        frames = [admin.produce_frame("conns", {p: make_batch(per_req, 100)}) for p in range(parts)]
        admin.close()
        for n in _csv_ints(args.connections):
            row = _connection_level(broker.bootstrap, broker.pid, frames, n, args.conn_seconds)
            row["msgs_per_s"] = row["req_per_s"] * per_req
            row["rss_mb"] = broker.rss_mb()
            rows.append(row)
            print(f"  C={n}: {_f(row['req_per_s'])} req/s, rtt p99 {_f(row['rtt_p99_ms'], 2)} ms, "
                  f"broker {_f(row['broker_cpu_pct'])} % CPU", flush=True)
        alive = broker.alive()
    finally:
        broker.stop()
    print(f"\n## Connections ({args.target}; each connection: one Produce of {args.conn_batch} x 100 B in flight, "
          f"{args.conn_seconds:.0f} s per level)\n")
    print("| connections | requests/s | msgs/s | RTT p50 ms | RTT p99 ms | RTT max ms | broker CPU % | broker µs/req "
          "| RSS MB | errors |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    for r in rows:
        print(f"| {r['connections']} | {_f(r['req_per_s'])} | {_f(r['msgs_per_s'])} | {_f(r['rtt_p50_ms'], 2)} | "
              f"{_f(r['rtt_p99_ms'], 2)} | {_f(r['rtt_max_ms'], 2)} | {_f(r['broker_cpu_pct'])} | "
              f"{_f(r['broker_us_per_req'], 1)} | {_f(r['rss_mb'], 1)} | {r['errors']} |")
    print(f"\nbroker alive after the sweep: {alive}")
    return rows


# ---------------------------------------------------------------------------- retained data

def _sequential_read(client: RawClient, topic: str, start: int, mb: float) -> dict:
    offsets = {0: start}
    got = 0
    records = 0
    fetches = 0
    t0 = time.perf_counter()
    while got < mb * 1e6:
        resp = client.fetch(topic, offsets, max_wait_ms=0, min_bytes=1)
        size = sum(len(p["records"] or b"") for t in resp["responses"] for p in t["partitions"])
        n = next_offsets(resp, offsets)
        fetches += 1
        if not n:
            break
        got += size
        records += n
    el = time.perf_counter() - t0
    return {"mb_per_s": got / 1e6 / el, "records": records, "fetches": fetches, "ms_per_fetch": el / fetches * 1000}


def _random_reads(client: RawClient, topic: str, lo: int, hi: int, n: int, rng: random.Random) -> dict:
    lat = []
    for _ in range(n):
        off = rng.randrange(lo, hi)
        t0 = time.perf_counter()
        resp = client.fetch(topic, {0: off}, max_wait_ms=0, min_bytes=1, partition_max_bytes=1)
        lat.append((time.perf_counter() - t0) * 1000)
        if not any(p["records"] for t in resp["responses"] for p in t["partitions"]):
            raise RuntimeError(f"no data at offset {off}")
    return percentiles(lat)


def sweep_retained(args) -> dict:
    settings = {"log.segment.bytes": str(args.segment_mb * 1024 * 1024)} if args.target == "trafka" else None
    broker = start_broker(args.target, settings=settings)
    try:
        c = RawClient(broker.bootstrap, timeout_s=120)
        topic = "retained"
        c.create_topic(topic, 1, {"segment.bytes": str(args.segment_mb * 1024 * 1024)})
        c.wait_topic(topic, 1)
        batch = make_batch(1000, 1000)  # ~1 MB per request
        frame = c.produce_frame(topic, {0: batch})
        n_req = int(args.retained_gb * 1e9 / len(batch))
        t0 = time.perf_counter()
        inflight = 0
        for i in range(n_req):
            c.send(0, 9, None, frame=frame)
            inflight += 1
            if inflight >= 4:
                c.recv()
                inflight -= 1
        while inflight:
            c.recv()
            inflight -= 1
        fill_s = time.perf_counter() - t0
        end = n_req * 1000
        print(f"  filled {n_req * len(batch) / 1e9:.2f} GB ({end:,} records) in {fill_s:.1f} s "
              f"({n_req * len(batch) / 1e6 / fill_s:.0f} MB/s); RSS {broker.rss_mb():.1f} MB", flush=True)
        read_records = int(args.read_mb * 1e6 / 1000)
        oldest = _sequential_read(c, topic, 0, args.read_mb)
        newest = _sequential_read(c, topic, max(0, end - read_records), args.read_mb)
        oldest2 = _sequential_read(c, topic, 0, args.read_mb)  # again: first-pass effects
        rng = random.Random(7)
        half = end // 2
        rand_old = _random_reads(c, topic, 0, half, args.random_reads, rng)
        rand_new = _random_reads(c, topic, half, end, args.random_reads, rng)
        result = {"retained_gb": n_req * len(batch) / 1e9, "fill_mb_per_s": n_req * len(batch) / 1e6 / fill_s,
                  "oldest": oldest, "newest": newest, "oldest_again": oldest2, "random_old": rand_old,
                  "random_new": rand_new, "rss_mb": broker.rss_mb(), "rss_peak_mb": broker.hwm_mb()}
        c.close()
    finally:
        broker.stop()
    print(f"\n## Retained data ({args.target}; {result['retained_gb']:.2f} GB in one partition, "
          f"{args.segment_mb} MiB segments; fetch partition_max_bytes 1 MiB)\n")
    print("| read | MB/s | ms per fetch | fetches |")
    print("|---|---|---|---|")
    for name, key in (("sequential from the oldest offset", "oldest"), ("sequential near the newest offset", "newest"),
                      ("sequential from the oldest, again", "oldest_again")):
        r = result[key]
        print(f"| {name} ({args.read_mb} MB) | {_f(r['mb_per_s'])} | {_f(r['ms_per_fetch'], 2)} | {r['fetches']} |")
    print("\n| random single-batch fetch | p50 ms | p99 ms | max ms |")
    print("|---|---|---|---|")
    for name, key in (("older half of the log", "random_old"), ("newer half of the log", "random_new")):
        r = result[key]
        print(f"| {name} ({args.random_reads} reads) | {_f(r['p50'], 2)} | {_f(r['p99'], 2)} | {_f(r['max'], 2)} |")
    print(f"\nbroker RSS after: {result['rss_mb']:.1f} MB (peak {result['rss_peak_mb']:.1f} MB)")
    return result


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--target", default="trafka", help="trafka or tansu")
    ap.add_argument("--only", choices=["partitions", "connections", "retained"], action="append", default=None)
    ap.add_argument("--partitions", default="1,10,100,1000")
    ap.add_argument("--messages", type=int, default=300_000, help="throughput messages per partition count")
    ap.add_argument("--latency-rate", type=int, default=1000)
    ap.add_argument("--latency-messages", type=int, default=3000)
    ap.add_argument("--connections", default="1,10,50,100,200")
    ap.add_argument("--conn-seconds", type=float, default=5.0)
    ap.add_argument("--conn-batch", type=int, default=10, help="records per Produce request")
    ap.add_argument("--retained-gb", type=float, default=1.0)
    ap.add_argument("--segment-mb", type=int, default=256)
    ap.add_argument("--read-mb", type=int, default=200)
    ap.add_argument("--random-reads", type=int, default=200)
    ap.add_argument("--run-timeout", type=float, default=300.0)
    ap.add_argument("--json", default=None, help="append all results to this JSONL file")
    args = ap.parse_args(argv)
    only = args.only or ["partitions", "connections", "retained"]
    out = {"target": args.target}
    if "partitions" in only:
        print("partitions sweep", flush=True)
        out["partitions"] = sweep_partitions(args)
    if "connections" in only:
        print("\nconnections sweep", flush=True)
        out["connections"] = sweep_connections(args)
    if "retained" in only:
        print("\nretained-data sweep", flush=True)
        out["retained"] = sweep_retained(args)
    if args.json:
        with open(args.json, "a") as f:
            f.write(json.dumps(out) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
