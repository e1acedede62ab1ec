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

The scale runs replace the sweeps when `--partitions` or `--connections` is one
number above the sweep's range: `--partitions 100000` (broker A with 100 000 partitions
vs broker B with 1 000, same run: creation time, RSS, Metadata, restarts after SIGTERM and
SIGKILL, throughput over 1 000 active partitions A/B, produce p99 with and without
retention sweeps) and `--connections 10000` (idle long-polling consumers beside one
producer; 1 000-connect storms). bench/README.md says what each figure is.

    python bench/scaling.py                       # all three, about 3-5 minutes
    python bench/scaling.py --partitions 100000   # A/B in one run
    python bench/scaling.py --connections 10000
    python bench/scaling.py --only partitions --partitions 1,10,100,1000
    python bench/scaling.py --only retained --retained-gb 4
"""

from __future__ import annotations

import argparse
import json
import os
import random
import resource
import selectors
import shutil
import socket
import struct
import statistics
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from brokers import REPO, free_port, proc_cpu_s, start_broker  # noqa: E402
from produce_consume import percentiles  # noqa: E402
from wire.connection import encode_request  # noqa: E402
from rawclient import CREATE_TOPICS_V, FETCH_V, METADATA_V, RawClient, make_batch, next_offsets  # noqa: E402

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

# ----------------------------------------------------------------------------- scale: N partitions

def raise_nofile() -> int:
    """Raise this process's RLIMIT_NOFILE soft limit to its hard limit. Brokers started from
    here inherit it, so broker and bench can both hold 10 000+ sockets and segment files."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if hard == resource.RLIM_INFINITY:
        hard = 1 << 20
    if soft < hard:
        resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    return resource.getrlimit(resource.RLIMIT_NOFILE)[0]


def _api_versions(bootstrap: str, timeout_s: float) -> None:
    """Until an ApiVersions request is answered (the broker serves, not just listens)."""
    deadline = time.monotonic() + timeout_s
    while True:
        try:
            c = RawClient(bootstrap, timeout_s=5)
            try:
                c.call(18, 0, {})
                return
            finally:
                c.close()
        except OSError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.02)


def _spawn(port: int, data_dir: str, settings: dict[str, str], timeout_s: float, log_level: str = "WARNING"):
    """(broker, seconds from spawn to the first ApiVersions answer)."""
    t0 = time.perf_counter()
    broker = start_broker("trafka", port=port, data_dir=data_dir, settings=settings, timeout_s=timeout_s,
                          log_level=log_level)
    _api_versions(broker.bootstrap, timeout_s)
    return broker, time.perf_counter() - t0


def _create_topics(client: RawClient, names: list[str], partitions: int, per_request: int) -> tuple[float, list, list]:
    """(seconds, topics created, errors). Stops at the first batch with an error (e.g.
    too many open files): the run goes on with what was created, and says so."""
    t0 = time.perf_counter()
    created, bad = [], []
    for i in range(0, len(names), per_request):
        body = {"topics": [{"name": n, "num_partitions": partitions, "replication_factor": 1, "assignments": [],
                            "configs": []} for n in names[i:i + per_request]],
                "timeout_ms": 600000, "validate_only": False}
        resp = client.call(19, CREATE_TOPICS_V, body)
        created += [t["name"] for t in resp["topics"] if not t["error_code"]]
        bad = [(t["name"], t["error_code"], t.get("error_message")) for t in resp["topics"] if t["error_code"]]
        if bad:
            break
    return time.perf_counter() - t0, created, bad


def _metadata_rtt_ms(client: RawClient, topics: list[str] | None) -> float:
    """Request sent -> whole response frame read; decoding (client work) is not timed."""
    body = {"topics": None if topics is None else [{"name": t, "topic_id": None} for t in topics],
            "allow_auto_topic_creation": False, "include_topic_authorized_operations": False}
    frame = encode_request(3, METADATA_V, 0, body, client_id="bench")
    t0 = time.perf_counter()
    client.send(3, METADATA_V, None, frame=frame)
    client._read_frame()
    ms = (time.perf_counter() - t0) * 1000
    client._pending.clear()
    return ms


def _metadata_timings(client: RawClient, one_topic: str, n_all: int, n_one: int) -> dict:
    """Metadata for all topics (median), for one 1 000-partition topic and for the
    1-partition `probe` topic (p50/p99): what the one-topic answers cost apart from the
    topic's own size is what the other topics add."""
    parts = sum(len(t["partitions"]) for t in client.metadata(None)["topics"])
    all_ms = [_metadata_rtt_ms(client, None) for _ in range(n_all)]
    one = percentiles([_metadata_rtt_ms(client, [one_topic]) for _ in range(n_one)])
    small = percentiles([_metadata_rtt_ms(client, ["probe"]) for _ in range(n_one)])
    return {"metadata_all_ms": statistics.median(all_ms), "metadata_all_partitions": parts,
            "metadata_one_p50_ms": one.get("p50"), "metadata_one_p99_ms": one.get("p99"),
            "metadata_small_p50_ms": small.get("p50"), "metadata_small_p99_ms": small.get("p99")}


def _throughput(bootstrap: str, topic: str, partitions: int, seconds: float, per_partition: int) -> dict:
    """Produce to every partition of `topic` for `seconds` (each request a batch of
    `per_partition` x 100 B records for each of 100 partitions, 4 in flight), then fetch
    it all back from offset 0. Counts are checked against the high watermarks."""
    c = RawClient(bootstrap, timeout_s=120)
    batch = make_batch(per_partition, 100)
    groups = [list(range(i, min(i + 100, partitions))) for i in range(0, partitions, 100)]
    frames = [c.produce_frame(topic, {p: batch for p in g}) for g in groups]
    # where this run's records start (an earlier round wrote to the same partitions)
    listed = c.call(2, 7, {"replica_id": -1, "isolation_level": 0, "topics": [{"name": topic, "partitions": [
        {"partition_index": p, "current_leader_epoch": -1, "timestamp": -1} for p in range(partitions)]}]})
    start = {p["partition_index"]: p["offset"] for t in listed["topics"] for p in t["partitions"]}
    sent = inflight = acked = 0
    errors = 0
    t0 = time.perf_counter()
    end = t0 + seconds
    while time.perf_counter() < end or inflight:
        if time.perf_counter() < end and inflight < 4:
            c.send(0, 9, None, frame=frames[sent % len(frames)])
            sent += 1
            inflight += 1
            continue
        _corr, resp = c.recv()
        inflight -= 1
        for t in resp["responses"]:
            for p in t["partition_responses"]:
                if p["error_code"]:
                    errors += 1
                else:
                    acked += per_partition
    produce_s = time.perf_counter() - t0
    offsets = dict(start)
    got = 0
    t0 = time.perf_counter()
    while got < acked and time.perf_counter() - t0 < 300:
        resp = c.fetch(topic, offsets, max_wait_ms=100, min_bytes=1, partition_max_bytes=1 << 20)
        got += next_offsets(resp, offsets)
    consume_s = time.perf_counter() - t0
    c.close()
    return {"produce_msgs": acked / produce_s, "consume_msgs": got / consume_s, "produced": acked,
            "consumed": got, "produce_errors": errors, "verified": got == acked and not errors}


def _produce_latency(bootstrap: str, topic: str, partitions: int, seconds: float, rate: float) -> dict:
    """One Produce (one partition, 10 x 100 B, acks=1) at a time, `rate` per second,
    partitions in turn: request round-trip percentiles."""
    c = RawClient(bootstrap, timeout_s=60)
    batch = make_batch(10, 100)
    frames = [c.produce_frame(topic, {p: batch}) for p in range(min(partitions, 50))]
    lat = []
    t0 = time.perf_counter()
    i = 0
    error = None
    while time.perf_counter() - t0 < seconds:
        due = t0 + i / rate
        now = time.perf_counter()
        if due > now:
            time.sleep(due - now)
        s = time.perf_counter()
        try:
            c.send(0, 9, None, frame=frames[i % len(frames)])
            c.recv()
        except OSError as exc:  # a timeout: the broker did not answer within 60 s
            error = f"{type(exc).__name__} after {time.perf_counter() - s:.1f} s"
            break
        lat.append((time.perf_counter() - s) * 1000)
        i += 1
    c.close()
    p = percentiles(lat)
    return {"p50_ms": p.get("p50", float("nan")), "p99_ms": p.get("p99", float("nan")),
            "max_ms": p.get("max", float("nan")), "requests": len(lat),
            "req_per_s": len(lat) / (time.perf_counter() - t0), "error": error}


def _warm_up_done(log_path: str, timeout_s: float) -> float:
    """perf_counter() when the broker's log (at INFO) says the warm-up after a clean restart
    opened every log (Broker.open_deferred_partitions). Read from the log, not /metrics: a
    scrape walks all 100 000 partitions and, polled, slowed the warm-up it watched."""
    deadline = time.monotonic() + timeout_s
    while True:
        with open(log_path, errors="replace") as f:
            if "warm-up: " in f.read():
                return time.perf_counter()
        if time.monotonic() > deadline:
            raise TimeoutError(f"no warm-up line in {log_path} after {timeout_s} s")
        time.sleep(0.1)


class _Scaled:
    """One broker of the partitions run, kept across phases so A and B alternate."""

    def __init__(self, label: str, n_topics: int, per_topic: int, args) -> None:
        self.label, self.per_topic, self.args = label, per_topic, args
        self.data_dir = tempfile.mkdtemp(prefix=f"trafka-scale-{label}-")
        self.port = free_port()
        self.base = {"trafka.max.partitions": str(n_topics * per_topic + 1000), "num.partitions": "1"}
        self.row: dict = {"broker": label, "partitions": n_topics * per_topic, "throughput_runs": []}
        self.broker, self.row["start_s"] = _spawn(self.port, self.data_dir, self.base, args.start_timeout)
        try:
            self._create(label, n_topics, per_topic, args)
        except BaseException:
            self.close()  # not yet in the caller's list: nobody else would stop it
            raise

    def _create(self, label: str, n_topics: int, per_topic: int, args) -> None:
        admin = RawClient(self.broker.bootstrap, timeout_s=900)
        if admin.create_topic("probe", 1) != 0:  # first: creation may stop at the file limit
            raise RuntimeError("could not create the probe topic")
        names = [f"scale-{i:04d}" for i in range(n_topics)]
        row = self.row
        row["create_s"], self.names, row["create_errors"] = _create_topics(admin, names, per_topic,
                                                                           args.topics_per_request)
        row["partitions"] = len(self.names) * per_topic
        if row["create_errors"]:
            print(f"  [{label}] CreateTopics failed after {row['partitions']:,} partitions: "
                  f"{row['create_errors'][:2]}; going on with those", flush=True)
        admin.close()
        row["rss_mb"] = self.broker.rss_mb()
        row["fds"] = len(os.listdir(f"/proc/{self.broker.pid}/fd"))
        print(f"  [{label}] created {row['partitions']:,} partitions in {row['create_s']:.1f} s; "
              f"RSS {row['rss_mb']:.0f} MB, {row['fds']:,} fds", flush=True)

    def metadata(self) -> None:
        admin = RawClient(self.broker.bootstrap, timeout_s=900)
        self.row.update(_metadata_timings(admin, self.names[-1], self.args.metadata_all_repeats,
                                          self.args.metadata_one_requests))
        admin.close()
        row = self.row
        print(f"  [{self.label}] Metadata all {row['metadata_all_ms']:.1f} ms ({row['metadata_all_partitions']:,} "
              f"partitions), one topic p50/p99 {row['metadata_one_p50_ms']:.2f}/{row['metadata_one_p99_ms']:.2f} ms "
              f"(1 000 partitions), {row['metadata_small_p50_ms']:.2f}/{row['metadata_small_p99_ms']:.2f} ms "
              f"(1 partition)", flush=True)

    def throughput(self) -> None:
        t = _throughput(self.broker.bootstrap, self.names[0], self.per_topic, self.args.scale_seconds, 10)
        self.row["throughput_runs"].append(t)
        print(f"  [{self.label}] 1 000 active partitions: produce {t['produce_msgs']:,.0f} msg/s, "
              f"consume {t['consume_msgs']:,.0f} msg/s, verified {t['verified']}", flush=True)

    def latency(self, key: str) -> None:
        self.row[key] = _produce_latency(self.broker.bootstrap, self.names[0], self.per_topic,
                                         self.args.scale_seconds, 200)

    def restarts(self) -> None:
        """SIGTERM and restart, then SIGKILL and restart with a retention sweep every
        --sweep-interval-ms; each timed from spawn to the first ApiVersions answer."""
        row, args = self.row, self.args
        row["rss_after_mb"] = self.broker.rss_mb()
        t0 = time.perf_counter()
        self.broker.stop(grace_s=args.start_timeout)
        row["shutdown_s"] = time.perf_counter() - t0
        spawned = time.perf_counter()
        self.broker, row["restart_clean_s"] = _spawn(self.port, self.data_dir, self.base, args.start_timeout,
                                                     log_level="INFO")
        # After a clean shutdown the broker listens first and opens its logs after (the
        # warm-up): until when every log is open.
        row["warm_up_s"] = _warm_up_done(self.broker.log_path, args.start_timeout) - spawned
        row["rss_warm_mb"] = self.broker.rss_mb()
        print(f"  [{self.label}] clean shutdown {row['shutdown_s']:.1f} s, restart to ApiVersions "
              f"{row['restart_clean_s']:.1f} s, every log open {row['warm_up_s']:.1f} s; "
              f"RSS {row['rss_warm_mb']:.0f} MB", flush=True)
        self.broker.popen.kill()
        self.broker.popen.wait()
        # The background duties at work: a retention sweep every --sweep-interval-ms and the
        # recovery-point checkpoint every 2 s (Kafka's default is 60 s: a phase would rarely
        # see one; at 100 000 partitions it once stalled produces for 0.2-0.5 s).
        sweep = {**self.base, "log.retention.check.interval.ms": str(args.sweep_interval_ms),
                 "log.flush.offset.checkpoint.interval.ms": "2000"}
        self.broker, row["restart_kill_s"] = _spawn(self.port, self.data_dir, sweep, args.start_timeout)
        row["rss_restarted_mb"] = self.broker.rss_mb()
        print(f"  [{self.label}] restart after SIGKILL to ApiVersions {row['restart_kill_s']:.1f} s; "
              f"RSS {row['rss_restarted_mb']:.0f} MB", flush=True)

    def finish(self) -> dict:
        row = self.row
        runs = row["throughput_runs"]
        row["throughput"] = {"produce_msgs": statistics.median(r["produce_msgs"] for r in runs),
                             "consume_msgs": statistics.median(r["consume_msgs"] for r in runs),
                             "verified": all(r["verified"] for r in runs)}
        row["alive"] = self.broker is not None and self.broker.alive()
        return row

    def close(self) -> None:
        if self.broker is not None:
            self.broker.stop(grace_s=self.args.start_timeout)
        shutil.rmtree(self.data_dir, ignore_errors=True)


def scale_partitions(args, n: int) -> dict:
    """Broker A with n partitions and broker B with 1 000, both up at once; every phase
    runs on A then B (throughput A, B, A, B, medians), so a neighbour's load on this
    shared machine falls on both."""
    per_topic = 1000
    n_topics = max(1, n // per_topic)
    nofile = raise_nofile()
    print(f"scale: {n_topics} topics x {per_topic} partitions vs 1 topic x {per_topic} (RLIMIT_NOFILE {nofile})",
          flush=True)
    brokers: list[_Scaled] = []
    try:
        brokers.append(_Scaled("A", n_topics, per_topic, args))
        brokers.append(_Scaled("B", 1, per_topic, args))
        for s in brokers:
            s.metadata()
        for _ in range(args.throughput_rounds):
            for s in brokers:
                s.throughput()
        for s in brokers:
            s.latency("latency_quiet")
        for s in brokers:
            s.restarts()
        for s in brokers:
            s.latency("latency_sweeping")
            lq, ls = s.row["latency_quiet"], s.row["latency_sweeping"]
            print(f"  [{s.label}] produce p99 {lq['p99_ms']:.2f} ms without sweeps, {ls['p99_ms']:.2f} ms with a "
                  f"retention sweep every {args.sweep_interval_ms} ms and a checkpoint every 2 s (max {lq['max_ms']:.1f} / {ls['max_ms']:.1f})",
                  flush=True)
        a, b = (s.finish() for s in brokers)
    finally:
        for s in brokers:
            s.close()
    ratio_p = a["throughput"]["produce_msgs"] / b["throughput"]["produce_msgs"]
    ratio_c = a["throughput"]["consume_msgs"] / b["throughput"]["consume_msgs"]
    print(f"\n## Partitions: {a['partitions']:,} (A) vs {b['partitions']:,} (B) on one broker "
          f"(1 000 active partitions in both; 100 B records)\n")
    print("| | A | B | target (A) |")
    print("|---|---|---|---|")
    rows = [
        ("create (CreateTopics, s)", "create_s", 1, ""),
        ("RSS after create (MB)", "rss_mb", 0, "≤ 1 000"),
        ("RSS after the load (MB)", "rss_after_mb", 0, "≤ 1 000"),
        ("open files", "fds", 0, ""),
        ("Metadata, all topics (ms, median)", "metadata_all_ms", 1, "≤ 1 000"),
        ("Metadata, one topic of 1 000 partitions p50 (ms)", "metadata_one_p50_ms", 2, "≈ B"),
        ("Metadata, one topic of 1 000 partitions p99 (ms)", "metadata_one_p99_ms", 2, "≈ B"),
        ("Metadata, one topic of 1 partition p50 (ms)", "metadata_small_p50_ms", 2, "≤ 2"),
        ("Metadata, one topic of 1 partition p99 (ms)", "metadata_small_p99_ms", 2, "≤ 2"),
        ("clean shutdown (s)", "shutdown_s", 1, ""),
        ("restart after SIGTERM to ApiVersions (s)", "restart_clean_s", 1, "≤ 10"),
        ("restart after SIGTERM until every log is open (s)", "warm_up_s", 1, ""),
        ("restart after SIGKILL to ApiVersions (s)", "restart_kill_s", 1, "≤ 60"),
    ]
    for name, key, d, target in rows:
        print(f"| {name} | {_f(a.get(key), d)} | {_f(b.get(key), d)} | {target} |")
    for name, key in (("produce msg/s", "produce_msgs"), ("consume msg/s", "consume_msgs")):
        print(f"| {name} (1 000 active) | {_f(a['throughput'][key])} | {_f(b['throughput'][key])} | A/B ≥ 0.9 |")
    for name, key in (("produce p50/p99 ms, no sweep", "latency_quiet"),
                      ("produce p50/p99 ms, retention sweeps + checkpoints", "latency_sweeping")):
        print(f"| {name} (max) | {_f(a[key]['p50_ms'], 2)} / {_f(a[key]['p99_ms'], 2)} ({_f(a[key]['max_ms'], 1)}) | "
              f"{_f(b[key]['p50_ms'], 2)} / {_f(b[key]['p99_ms'], 2)} ({_f(b[key]['max_ms'], 1)}) | |")
    print(f"\nthroughput A/B: produce {ratio_p:.2f}, consume {ratio_c:.2f}; verified "
          f"{a['throughput']['verified'] and b['throughput']['verified']}; both alive {a['alive'] and b['alive']}")
    return {"A": a, "B": b, "produce_ratio": ratio_p, "consume_ratio": ratio_c}


# ----------------------------------------------------------------------------- scale: C connections

def _idle_pollers(bootstrap: str, n: int, frame: bytes, max_wait_ms: int, ready, stop, out) -> None:
    """In a child process: `n` connections, each with one Fetch long-polling an empty
    partition (re-sent as soon as it is answered), until `stop` is set."""
    raise_nofile()
    host, port = bootstrap.rsplit(":", 1)
    sel = selectors.DefaultSelector()
    conns = []
    errors = 0
    t0 = time.perf_counter()
    for i in range(n):
        try:
            s = socket.create_connection((host, int(port)), timeout=30)
        except OSError:
            errors += 1
            continue
        s.setblocking(False)
        c = _Conn(s)
        conns.append(c)
        sel.register(s, selectors.EVENT_READ, c)
        s.send(frame)
    connect_s = time.perf_counter() - t0
    answered = 0
    ready.set()
    while not stop.is_set():
        for key, _ev in sel.select(timeout=0.2):
            c = key.data
            try:
                chunk = c.sock.recv(65536)
            except (BlockingIOError, InterruptedError):
                continue
            except OSError:
                chunk = b""
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
                answered += 1
                c.sock.send(frame)
    for c in conns:
        c.sock.close()
    out.put({"connections": len(conns), "connect_s": connect_s, "fetches_answered": answered,
             "errors": errors, "seconds": time.perf_counter() - t0})


def _storm(bootstrap: str, n: int, timeout_s: float = 30.0) -> dict:
    """`n` connections opened at once (non-blocking connect), each sends ApiVersions v0 as
    soon as it is connected; time until every one is answered."""
    host, port = bootstrap.rsplit(":", 1)
    frame = encode_request(18, 0, 1, {}, client_id="storm")
    sel = selectors.DefaultSelector()
    t0 = time.perf_counter()
    pending = {}
    errors = 0
    for _ in range(n):
        s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        s.setblocking(False)
        s.connect_ex((host, int(port)))
        c = _Conn(s)
        c.expect = 0  # 0: connecting, 1: request sent
        pending[s] = c
        sel.register(s, selectors.EVENT_WRITE, c)
    answered = 0
    deadline = t0 + timeout_s
    while pending and time.perf_counter() < deadline:
        for key, ev in sel.select(timeout=0.2):
            c = key.data
            s = c.sock
            if c.expect == 0:
                err = s.getsockopt(socket.SOL_SOCKET, socket.SO_ERROR)
                if err:
                    errors += 1
                    sel.unregister(s)
                    s.close()
                    pending.pop(s)
                    continue
                s.send(frame)
                c.expect = 1
                sel.modify(s, selectors.EVENT_READ, c)
                continue
            try:
                chunk = s.recv(65536)
            except (BlockingIOError, InterruptedError):
                continue
            except OSError:
                chunk = b""
            if not chunk:
                errors += 1
            else:
                c.buf += chunk
                if len(c.buf) < 4 or len(c.buf) < 4 + struct.unpack_from(">i", c.buf, 0)[0]:
                    continue
                answered += 1
            sel.unregister(s)
            s.close()
            pending.pop(s)
    elapsed = time.perf_counter() - t0
    for s in pending:
        s.close()
    return {"connects": n, "answered": answered, "errors": errors + len(pending), "all_answered_s": elapsed}


def scale_connections(args, n: int) -> dict:
    import multiprocessing as mp

    nofile = raise_nofile()
    broker = start_broker("trafka", settings={"num.partitions": "1"})
    try:
        admin = RawClient(broker.bootstrap)
        for topic, parts in (("idle", 1), ("active", 6)):
            if admin.create_topic(topic, parts) not in (0, 36):
                raise RuntimeError("could not create topic")
            admin.wait_topic(topic, parts)
        fetch = encode_request(1, FETCH_V, 1, admin.fetch_body("idle", {0: 0}, max_wait_ms=args.idle_max_wait_ms),
                               client_id="idle")
        admin.close()
        print(f"scale: {n:,} idle long-polling connections (max_wait {args.idle_max_wait_ms} ms) beside one "
              f"producer (RLIMIT_NOFILE {nofile})", flush=True)
        rss0 = broker.rss_mb()
        alone = _produce_latency(broker.bootstrap, "active", 6, args.conn_seconds, args.producer_rate)
        print(f"  producer alone: p50/p99 {alone['p50_ms']:.2f}/{alone['p99_ms']:.2f} ms, "
              f"{alone['req_per_s']:,.0f} req/s; broker RSS {rss0:.0f} MB", flush=True)
        ctx = mp.get_context("fork")
        ready, stop, out = ctx.Event(), ctx.Event(), ctx.Queue()
        child = ctx.Process(target=_idle_pollers, args=(broker.bootstrap, n, fetch, args.idle_max_wait_ms,
                                                         ready, stop, out), daemon=True)
        t0 = time.perf_counter()
        child.start()
        ready.wait(600)
        hold_s = time.perf_counter() - t0
        time.sleep(2)  # every poll parked at least once
        print(f"  {n:,} connections held after {hold_s:.1f} s", flush=True)
        rss_idle = broker.rss_mb()
        cpu0, w0 = broker.cpu_s(), time.perf_counter()
        beside = _produce_latency(broker.bootstrap, "active", 6, args.conn_seconds, args.producer_rate)
        cpu_pct = 100 * (broker.cpu_s() - cpu0) / (time.perf_counter() - w0)
        rss_held = broker.rss_mb()
        print(f"  {n:,} connections opened in {hold_s:.1f} s; broker RSS {rss_idle:.0f} MB "
              f"({(rss_idle - rss0) * 1000 / n:.1f} kB/connection); producer beside them: p50/p99 "
              f"{beside['p50_ms']:.2f}/{beside['p99_ms']:.2f} ms, {beside['req_per_s']:,.0f} req/s; "
              f"broker CPU {cpu_pct:.0f} %", flush=True)
        storm_held = _storm(broker.bootstrap, args.storm)
        print(f"  storm of {args.storm} connects + ApiVersions beside them: all answered in "
              f"{storm_held['all_answered_s']:.2f} s, {storm_held['errors']} errors", flush=True)
        stop.set()
        idle = out.get(timeout=120)
        child.join(60)
        time.sleep(1)
        storm = _storm(broker.bootstrap, args.storm)
        print(f"  storm of {args.storm} connects + ApiVersions alone: all answered in "
              f"{storm['all_answered_s']:.2f} s, {storm['errors']} errors", flush=True)
        result = {"connections": n, "rss_before_mb": rss0, "rss_held_mb": rss_idle, "rss_after_producer_mb": rss_held,
                  "hold_s": hold_s, "idle": idle, "producer_alone": alone, "producer_beside": beside,
                  "broker_cpu_pct_beside": cpu_pct, "storm_beside": storm_held, "storm": storm,
                  "rss_peak_mb": broker.hwm_mb(), "alive": broker.alive()}
    finally:
        broker.stop()
    print(f"\n## Connections: {n:,} idle consumers long-polling (Fetch max_wait {args.idle_max_wait_ms} ms, empty "
          f"partition) beside one producer (10 x 100 B per request, {args.producer_rate}/s, one in flight)\n")
    print("| | producer alone | beside the idle connections |")
    print("|---|---|---|")
    print(f"| broker RSS MB | {_f(rss0)} | {_f(rss_idle)} (peak {_f(result['rss_peak_mb'])}) |")
    print(f"| produce p50 / p99 ms | {_f(alone['p50_ms'], 2)} / {_f(alone['p99_ms'], 2)} | "
          f"{_f(beside['p50_ms'], 2)} / {_f(beside['p99_ms'], 2)} |")
    print(f"| produce requests/s | {_f(alone['req_per_s'])} | {_f(beside['req_per_s'])} |")
    print(f"\nidle: {idle['connections']:,} held, {idle['fetches_answered']:,} long polls answered "
          f"({idle['fetches_answered'] / idle['seconds']:,.0f}/s), {idle['errors']} errors; "
          f"{(rss_idle - rss0) * 1000 / max(n, 1):.1f} kB RSS per connection")
    for name, s in (("beside the idle connections", storm_held), ("alone", storm)):
        print(f"storm ({name}): {s['connects']} connects + ApiVersions, {s['answered']} answered in "
              f"{s['all_answered_s']:.2f} s, {s['errors']} errors")
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
    ap.add_argument("--start-timeout", type=float, default=600.0, help="scale runs: spawn/restart limit, s")
    ap.add_argument("--topics-per-request", type=int, default=10, help="scale runs: topics per CreateTopics")
    ap.add_argument("--metadata-all-repeats", type=int, default=5)
    ap.add_argument("--metadata-one-requests", type=int, default=200)
    ap.add_argument("--scale-seconds", type=float, default=8.0, help="scale runs: per throughput/latency phase")
    ap.add_argument("--throughput-rounds", type=int, default=2, help="scale runs: A,B rounds (medians)")
    ap.add_argument("--sweep-interval-ms", type=int, default=1000,
                    help="scale runs: log.retention.check.interval.ms of the sweep phase")
    ap.add_argument("--idle-max-wait-ms", type=int, default=500)
    ap.add_argument("--producer-rate", type=int, default=200, help="scale runs: Produce requests/s beside idle ones")
    ap.add_argument("--storm", type=int, default=1000, help="scale runs: connects in one storm")
    ap.add_argument("--json", default=None, help="append all results to this JSONL file")
    args = ap.parse_args(argv)
    only = args.only or ["partitions", "connections", "retained"]
    out = {"target": args.target}
    # One number above the sweeps' range (e.g. --partitions 100000, --connections 10000):
    # the scale runs instead of the sweeps, each against a 1 000-partition /
    # no-idle-connection baseline in the same run.
    scale_p = args.partitions.isdigit() and int(args.partitions) > 1000
    scale_c = args.connections.isdigit() and int(args.connections) > 200
    if scale_p or scale_c:
        if scale_p:
            out["scale_partitions"] = scale_partitions(args, int(args.partitions))
        if scale_c:
            out["scale_connections"] = scale_connections(args, int(args.connections))
        if args.json:
            with open(args.json, "a") as f:
                f.write(json.dumps(out) + "\n")
        return 0
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
