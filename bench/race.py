"""The race against Apache Kafka: Trafka and Kafka on the same machine, in the same run, one command.

    python bench/race.py                 # the whole table, 3 repeats: ≈ 35-45 min on a 2-core machine
    python bench/race.py --quick         # same shape, small N, 2 repeats: a smoke run (≈ 12 min here)
    python bench/race.py --only capacity,latency --repeats 5
    python bench/race.py --summarize .cache/bench-results/race-<time>.jsonl    # re-print, re-write the table

Every section starts its brokers fresh (Trafka from this checkout, Apache Kafka 4.x from
`.cache/jvm/kafka` as bench/brokers.py describes: run as kafka-server-start.sh runs it, heap
-Xmx1G -Xms1G, G1 and kafka-run-class.sh's JVM options), runs the two targets interleaved
(A,B then B,A in the next repeat, so the machine's drift falls on both), verifies every
window, and appends one JSON line per window to `.cache/bench-results/race-<time>.jsonl`
(the first line the machine, versions and settings; the last the load average at the end).
The Markdown table is generated from those lines into `--md` (default docs/race.md, a page of the manual): medians
with min..max over the repeats, and ratios Trafka/Kafka.

Sections (`--only`):

- startup: spawn → first ApiVersions answered, and spawn → a topic created and led (Kafka: the
  node registered with its own quorum; Trafka: at once), RSS then, and the time a SIGTERM takes.
  Kafka's one-time `kafka-storage format` is timed apart (a data dir is formatted once).
- capacity: bench/capacity.py's prebuilt wire load (librdkafka's shape: ≈1 MB batches, one
  partition per Produce v9 request, 5 in flight; Fetch v12 with one outstanding), 100 B and
  1 KiB × 1 and 6 partitions, produce then consume; msg/s, MB/s, broker CPU µs/msg, RSS idle
  and after the load; every record checked (CRC32C of every batch, offsets contiguous, the
  multiset of batches fetched = produced). Each run first sends untimed rounds of
  `--warmup-requests` requests (read back, each round to a topic of its own) until JIT
  compilation took at most `--warmup-jit-share` of the broker's CPU in two rounds in a row
  (at most `--warmup-max-s`), so Kafka's JIT has compiled the produce and fetch paths before
  the clock starts, as in a broker that has been up a while; Trafka (CPython) gets the same
  warm-up. What the JIT and GC threads still took in the timed windows is a column.
- latency: bench/produce_consume.py's latency mode on a fresh single broker: a group consumer
  tails the topic while confluent-kafka sends `--latency-rate` msg/s (100 B, linger.ms=0,
  one message per request), acks=1 and acks=all; e2e p50/p99/max and ack times, broker CPU
  per message at that rate. The first `--latency-warmup-s` seconds are sent the same way but
  left out of the figures.
- cluster: a 3-broker Trafka cluster (ZooKeeper mode, a real ZooKeeper) and a 3-node Kafka
  cluster (KRaft combined nodes; cluster.KafkaCluster says why) up side by side; topics with
  replication.factor=3 and min.insync.replicas=2, produced with acks=all. (a) throughput:
  bench/cluster.py's producer (confluent-kafka, linger.ms=10, `--cluster-messages` × 1 KiB,
  verified by the high watermark), windows alternating between the clusters, the idle one's
  CPU recorded as background; (b) e2e latency at `--latency-rate` with the idempotent and the
  plain producer. Both clusters first get one untimed window each (JIT warm-up).

Noise: the machine is stated in the table (CPU, cores, memory, kernel, load average at start and
end, and the host's busy share in every window). On a machine shared with other work, treat a
gap under ~20 % as noise unless broker CPU µs/msg agrees; the lead's published table comes from
a quiet machine.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from types import SimpleNamespace

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(1, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from brokers import REPO, kafka_version, start_broker, wait_api_versions  # noqa: E402
from results import csv, load  # noqa: E402

TARGETS = ("trafka", "kafka")
SECTIONS = ("startup", "capacity", "latency", "cluster")
NAN = float("nan")

FULL = {"repeats": 3, "capacity_messages": {100: 20_000_000, 1024: 2_000_000}, "latency_messages": 10_000,
        "cluster_messages": 500_000, "cluster_latency_s": 10.0, "startup_repeats": 5, "latency_warmup_s": 20.0}
QUICK = {"repeats": 2, "capacity_messages": {100: 1_000_000, 1024: 100_000}, "latency_messages": 2_000,
         "cluster_messages": 50_000, "cluster_latency_s": 3.0, "startup_repeats": 2, "latency_warmup_s": 5.0}


# ---------------------------------------------------------------------------- the machine

def machine() -> dict:
    """What the numbers were measured on, and with which builds."""
    from transactions import machine as basic

    m = basic()
    try:
        with open("/proc/meminfo") as f:
            m["mem_gb"] = round(int(f.readline().split()[1]) / 1024 / 1024, 1)
    except OSError:
        pass
    m["kernel"] = platform.release()
    try:
        out = subprocess.run(["java", "-version"], capture_output=True, text=True, timeout=30)
        m["java"] = (out.stderr or out.stdout).splitlines()[0]
    except (OSError, subprocess.SubprocessError, IndexError):
        m["java"] = "?"
    try:
        m["kafka"] = kafka_version()
    except Exception as exc:  # reported, and the Kafka windows fail with the reason
        m["kafka"] = f"unavailable: {exc}"
    try:
        rev = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=REPO, capture_output=True, text=True)
        dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"], cwd=REPO,
                               capture_output=True, text=True)
        m["trafka_commit"] = rev.stdout.strip() + ("+changes" if dirty.stdout.strip() else "")
    except OSError:
        m["trafka_commit"] = "?"
    return m


def kafka_sets(args) -> dict[str, str]:
    return dict(s.split("=", 1) for s in args.kafka_set)


def trafka_sets(args) -> dict[str, str]:
    return dict(s.split("=", 1) for s in args.trafka_set)


def orders(repeats: int, targets=TARGETS):
    """(repeat, target) in A,B / B,A order."""
    for rep in range(repeats):
        for target in (targets if rep % 2 == 0 else tuple(reversed(targets))):
            yield rep, target


# ---------------------------------------------------------------------------- startup

def create_until_led(bootstrap: str, topic: str, deadline: float, popen) -> None:
    """CreateTopics until it succeeds (a KRaft node refuses while it is not registered),
    then Metadata until the partition has a leader."""
    from rawclient import RawClient

    created = False
    last = None
    while time.monotonic() < deadline:
        if popen.poll() is not None:
            raise RuntimeError(f"broker exited with {popen.returncode}")
        try:
            client = RawClient(bootstrap, timeout_s=10)
            try:
                if not created:
                    last = client.create_topic(topic, 1)
                    created = last in (0, 36)
                if created:
                    for t in client.metadata([topic])["topics"]:
                        if t["name"] == topic and t["error_code"] == 0 and t["partitions"] and all(
                                p["error_code"] == 0 and p["leader_id"] >= 0 for p in t["partitions"]):
                            return
            finally:
                client.close()
        except (OSError, ConnectionError, ValueError, KeyError) as exc:
            last = repr(exc)
        time.sleep(0.02)
    raise TimeoutError(f"topic {topic} not created and led (last: {last})")


def startup_once(target: str, args) -> dict:
    row = {"section": "startup", "target": target}
    settings = trafka_sets(args) if target == "trafka" else kafka_sets(args)
    try:
        broker = start_broker(target, settings=settings, log_dir=args.log_dir, wait=False)
    except Exception as exc:
        return {**row, "verified": False, "errors": [f"start failed: {exc}"]}
    try:
        deadline = broker.spawned_at + 180
        t_api = wait_api_versions(broker.bootstrap, deadline, broker.popen, interval_s=0.01)
        create_until_led(broker.bootstrap, "race-startup", deadline, broker.popen)
        t_topic = time.monotonic()
        row.update(api_versions_s=t_api - broker.spawned_at, topic_s=t_topic - broker.spawned_at,
                   rss_idle_mb=broker.rss_mb(), format_s=broker.extra.get("format_s"), verified=True, errors=[])
    except Exception as exc:
        row.update(verified=False, errors=[f"{type(exc).__name__}: {exc}"], log_tail=broker.log_tail(20))
    finally:
        t = time.monotonic()
        row["exit"] = broker.stop(grace_s=60)
        row["stop_s"] = time.monotonic() - t
    return row


def run_startup(args, out) -> None:
    for rep, target in orders(args.startup_repeats):
        r = out({**startup_once(target, args), "repeat": rep})
        say(f"startup {target} rep {rep + 1}: ApiVersions after {_fmt(r.get('api_versions_s'), 2)} s, topic after "
            f"{_fmt(r.get('topic_s'), 2)} s, RSS {_fmt(r.get('rss_idle_mb'))} MB, stop {_fmt(r.get('stop_s'), 2)} s"
            + ("" if r.get("verified") else f" FAILED {r.get('errors')}"))


# ---------------------------------------------------------------------------- capacity

def run_capacity(args, out) -> None:
    import capacity as cap

    cargs = SimpleNamespace(trafka_set=args.trafka_set, kafka_set=args.kafka_set, http=False, log_dir=args.log_dir,
                            run_timeout=args.run_timeout, inflight=5, max_wait_ms=500, fetch_max_bytes=52_428_800,
                            partition_max_bytes=1_048_576, warmup_jit_share=args.warmup_jit_share,
                            warmup_max_s=args.warmup_max_s)
    for size in [int(s) for s in csv(args.sizes)]:
        templates = cap.build_templates(size, 64, 10_000, 1_000_000)
        per_batch = templates[0].count
        for p in [int(x) for x in csv(args.partitions)]:
            requests = cap.build_requests(templates, p, "per-partition", 1)
            warmup = None
            if args.warmup_requests:
                warmup = cap.warmup_builder(templates, p, "per-partition", 1, args.warmup_requests)
            want = args.capacity_messages.get(size) or max(10_000, 1_000_000_000 // size)
            n_requests = -(-want // per_batch)  # whole batches, rounded up...
            n_requests = -(-n_requests // p) * p  # ...and the same number for every partition
            expected = n_requests * per_batch
            label = {"section": "capacity", "size": size, "partitions": p, "acks": 1, "messages": expected,
                     "records_per_batch": per_batch, "requests": n_requests, "inflight": 5,
                     "warmup_requests": args.warmup_requests if warmup else 0}
            for rep, target in orders(args.repeats):
                r = cap.run_one(target, {**label, "repeat": rep}, requests, n_requests, expected, cargs, warmup)
                out(r)
                say(f"capacity {target} {size} B P{p} rep {rep + 1}: produce {_fmt(r.get('produce_msgs'))} msg/s "
                    f"({_fmt(r.get('produce_broker_cpu_us_per_msg'), 3)} µs/msg), consume {_fmt(r.get('consume_msgs'))}"
                    f" msg/s ({_fmt(r.get('consume_broker_cpu_us_per_msg'), 3)} µs/msg), RSS after "
                    f"{_fmt(r.get('broker_rss_after_mb'))} MB; verified {r.get('verified')}"
                    + ("" if r.get("verified") else f" {r.get('errors')}"))


# ---------------------------------------------------------------------------- latency

def run_latency(args, out) -> None:
    import run_matrix

    ns = SimpleNamespace(trafka_set=args.trafka_set, kafka_set=args.kafka_set, log_dir=args.log_dir, pc_arg=[],
                         run_timeout=args.run_timeout + args.latency_warmup_s, quiet=True)
    for acks in csv(args.latency_acks):
        label = {"section": "latency", "mode": "latency", "size": 100, "partitions": 1, "acks": acks,
                 "compression": "none", "messages": args.latency_messages, "rate": args.latency_rate}
        pc_args = ["--latency", "--size", "100", "--messages", str(args.latency_messages), "--partitions", "1",
                   "--acks", acks, "--rate", str(args.latency_rate), "--warmup-s", str(args.latency_warmup_s)]
        for rep, target in orders(args.repeats):
            r = out(run_matrix.run_one(target, pc_args, ns, {**label, "repeat": rep}))
            say(f"latency acks={acks} {target} rep {rep + 1}: e2e p50 {_fmt(r.get('e2e_p50_ms'), 2)} p99 "
                f"{_fmt(r.get('e2e_p99_ms'), 2)} max {_fmt(r.get('e2e_max_ms'), 2)} ms, broker "
                f"{_fmt(r.get('broker_cpu_us_per_msg'), 1)} µs/msg; verified {r.get('verified')}"
                + ("" if r.get("verified") else f" {r.get('errors')}"))


# ---------------------------------------------------------------------------- cluster

def run_cluster(args, out) -> None:
    import cluster as cl
    from cli.zookeeper_server import ZooKeeperServer

    reason = ZooKeeperServer.unavailable_reason()
    if reason:
        out({"section": "cluster", "phase": "setup-failed", "verified": False,
             "errors": [f"no ZooKeeper for the Trafka cluster: {reason}"]})
        return
    root = tempfile.mkdtemp(prefix="race-cluster-")
    log_dir = args.log_dir or root
    cargs = SimpleNamespace(size=1024, partitions=1, messages=args.cluster_messages, linger_ms=10, compression="none",
                            min_isr=2, timeout=args.run_timeout, trafka_set=args.trafka_set,
                            kafka_set=args.kafka_set, log_dir=log_dir, rate=args.latency_rate,
                            latency_s=args.cluster_latency_s, latency_size=100,
                            latency_warmup_s=args.latency_warmup_s, broker="trafka")
    common = {"offsets.topic.num.partitions": "3"}  # as bench/cluster.py: the latency group's offsets topic
    zk = ZooKeeperServer(data_dir=os.path.join(root, "zookeeper"))
    os.makedirs(os.path.join(root, "zookeeper"))
    clusters: dict[str, cl.BenchCluster] = {}
    try:
        t = time.monotonic()
        zk.start()
        zk_s = time.monotonic() - t
        for name, kind in (("trafka-cluster", "trafka"), ("kafka-cluster", "kafka")):
            settings = {**common, **(trafka_sets(args) if kind == "trafka" else kafka_sets(args))}
            c = cl.make_cluster(kind, 3, settings, os.path.join(root, name), zk.chroot_connect_string("race"))
            os.makedirs(c.root, exist_ok=True)
            t = time.monotonic()
            try:
                c.start()
            except Exception as exc:
                out({"section": "cluster", "phase": "start", "target": name, "verified": False,
                     "errors": [f"{type(exc).__name__}: {exc}"[:4000]]})
                c.stop()
                continue
            clusters[name] = c
            out({"section": "cluster", "phase": "start", "target": name, "start_s": time.monotonic() - t,
                 "zookeeper_start_s": zk_s if kind == "trafka" else None, "verified": True,
                 "how": "nodes one after another" if kind == "trafka" else "nodes at once (a quorum needs a majority)"})
            say(f"cluster {name} up in {time.monotonic() - t:.1f} s on {c.bootstrap}")
        names = [n for n in ("trafka-cluster", "kafka-cluster") if n in clusters]

        def background(name: str) -> list[int]:
            """The other cluster, idle meanwhile (and the Trafka cluster's ZooKeeper with it)."""
            others = [p for n in names if n != name for p in clusters[n].pids()]
            return others + ([zk.proc.pid] if zk.proc is not None and name != "trafka-cluster" else [])

        for name in names:  # untimed: JIT warm-up, first-topic costs
            warm = SimpleNamespace(**{**vars(cargs), "messages": max(10_000, args.cluster_messages // 5)})
            r = cl.throughput_window(name, clusters[name], warm, -1, None, background(name))
            out({**r, "section": "cluster", "phase": "warmup"})
        for rep, name in orders(args.repeats, tuple(names)):
            r = out({**cl.throughput_window(name, clusters[name], cargs, rep, None, background(name)),
                     "section": "cluster"})
            say(f"cluster throughput {name} rep {rep + 1}: {_fmt(r.get('msgs'))} msg/s, broker "
                f"{_fmt(r.get('broker_us_per_msg'), 2)} µs/msg (leader {_fmt(r.get('leader_us_per_msg'), 2)}, follower "
                f"{_fmt(r.get('follower_us_per_msg'), 2)}); verified {r.get('verified')}"
                + ("" if r.get("verified") else f" {r.get('errors')}"))
        for producer in csv(args.cluster_latency_producers):
            for rep, name in orders(args.repeats, tuple(names)):
                r = out({**cl.latency_run(clusters[name], cargs, producer, target=name), "section": "cluster",
                         "repeat": rep})
                say(f"cluster latency {name} {producer} rep {rep + 1}: e2e p50 {_fmt(r.get('e2e_p50_ms'), 2)} p99 "
                    f"{_fmt(r.get('e2e_p99_ms'), 2)} max {_fmt(r.get('e2e_max_ms'), 2)} ms; verified {r.get('verified')}"
                    + ("" if r.get("verified") else f" {r.get('errors')}"))
    finally:
        for c in clusters.values():
            c.stop()
        zk.close()
        if args.log_dir is None:
            import shutil

            shutil.rmtree(root, ignore_errors=True)


# ---------------------------------------------------------------------------- the table

def _num(v) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool) and v == v


def _med(values) -> float:
    values = [v for v in values if _num(v)]
    return statistics.median(values) if values else NAN


def _rng(values) -> tuple[float, float]:
    values = [v for v in values if _num(v)]
    return (min(values), max(values)) if values else (NAN, NAN)


def _fmt(v, digits: int = 0) -> str:
    return f"{v:,.{digits}f}" if _num(v) else "-"


def _big(v) -> str:
    """msg/s compactly: 9.39 M, 976 k."""
    if not _num(v):
        return "-"
    if v >= 1e6:
        return f"{v / 1e6:.2f} M"
    if v >= 1e4:
        return f"{v / 1e3:.0f} k"
    return f"{v:,.0f}"


def _cell(values, fmt=_big) -> str:
    """median (min..max) over the repeats."""
    lo, hi = _rng(values)
    m = _med(values)
    if not _num(m):
        return "-"
    return fmt(m) if len([v for v in values if _num(v)]) < 2 else f"{fmt(m)} ({fmt(lo)}..{fmt(hi)})"


def _ratio(a, b, digits: int = 2) -> str:
    return f"{a / b:.{digits}f}×" if _num(a) and _num(b) and b else "-"


def _verified(rows) -> str:
    return f"{sum(bool(r.get('verified')) for r in rows)}/{len(rows)}"


def render(rows: list[dict]) -> str:
    """The Markdown table of a race from its JSONL rows."""
    setup = next((r for r in rows if r.get("section") == "setup"), {})
    end = next((r for r in rows if r.get("section") == "end"), {})
    m = setup.get("machine", {})
    a = setup.get("args", {})
    L: list[str] = []
    w = L.append
    w("<!-- generated by bench/race.py from its JSONL results; do not edit by hand -->")
    w("# The race: Trafka vs Apache Kafka\n")
    if a.get("quick"):
        w("**SMOKE RUN (`--quick`)**: small N, on a machine shared with other work. These numbers show that "
          "the harness runs and verifies; they are not a measurement of either broker.\n")
    w(f"Command: `{setup.get('command', 'python bench/race.py')}` — started {setup.get('started', '?')}, "
      f"{_fmt(end.get('wall_s'))} s. Results: `{setup.get('out', '?')}`.\n")
    w("| machine | |\n|---|---|")
    w(f"| CPU | {m.get('cpu', '?')} × {m.get('cores', '?')} cores, {m.get('mem_gb', '?')} GB RAM, "
      f"Linux {m.get('kernel', '?')} |")
    w(f"| load average (1/5/15 min) | at start {m.get('loadavg')}, at end {end.get('loadavg')} |")
    w(f"| Trafka | commit {m.get('trafka_commit', '?')}, Python {m.get('python', '?')}, one process, "
      f"trafka.fsync.policy=never (page cache) |")
    w(f"| Apache Kafka | {m.get('kafka', '?')} ({m.get('java', '?')}), KRaft combined node(s), "
      f"{setup.get('kafka_jvm', '?')}; log.flush.interval.* unset (page cache) |")
    w(f"| client | raw pipelined wire client (capacity); confluent-kafka / librdkafka {m.get('librdkafka', '?')} "
      f"(latency, cluster) |")
    w(f"| repeats | {a.get('repeats')} per cell, targets interleaved A,B / B,A; cells are median (min..max) |\n")

    def host_busy(rs, *fields) -> str:
        vals = [r.get(f) for r in rs for f in fields]
        return _cell(vals, lambda v: f"{v:.0f}")

    # ---- capacity
    cap = [r for r in rows if r.get("section") == "capacity"]
    if cap:
        w("## Broker capacity (bench/capacity.py's prebuilt librdkafka-shaped load, acks=1)\n")
        w("| message | partitions | phase | Trafka msg/s | Kafka msg/s | Trafka/Kafka | Trafka MB/s | Kafka MB/s | "
          "broker µs/msg Trafka | broker µs/msg Kafka | of which Kafka's JIT / GC | host busy % | verified T / K |")
        w("|" + "---|" * 13)
        keys = sorted({(r["size"], r["partitions"]) for r in cap})
        for size, p in keys:
            for phase in ("produce", "consume"):
                g = {t: [r for r in cap if r["size"] == size and r["partitions"] == p and r.get("target") == t]
                     for t in TARGETS}
                tm = _med([r.get(f"{phase}_msgs") for r in g["trafka"]])
                km = _med([r.get(f"{phase}_msgs") for r in g["kafka"]])
                w(f"| {'1 KiB' if size == 1024 else f'{size} B'} | {p} | {phase} | "
                  f"{_cell([r.get(f'{phase}_msgs') for r in g['trafka']])} | "
                  f"{_cell([r.get(f'{phase}_msgs') for r in g['kafka']])} | **{_ratio(tm, km)}** | "
                  f"{_cell([r.get(f'{phase}_mbps') for r in g['trafka']], lambda v: f'{v:,.0f}')} | "
                  f"{_cell([r.get(f'{phase}_mbps') for r in g['kafka']], lambda v: f'{v:,.0f}')} | "
                  f"{_cell([r.get(f'{phase}_broker_cpu_us_per_msg') for r in g['trafka']], lambda v: f'{v:.3f}')} | "
                  f"{_cell([r.get(f'{phase}_broker_cpu_us_per_msg') for r in g['kafka']], lambda v: f'{v:.3f}')} | "
                  f"{_fmt(_med([r.get(f'{phase}_broker_jit_us_per_msg') for r in g['kafka']]), 3)} / "
                  f"{_fmt(_med([r.get(f'{phase}_broker_gc_us_per_msg') for r in g['kafka']]), 3)} | "
                  f"{host_busy(g['trafka'] + g['kafka'], f'{phase}_host_busy_pct')} | "
                  f"{_verified(g['trafka'])} / {_verified(g['kafka'])} |")
        n = {(r["size"]): r.get("messages") for r in cap}
        w(f"\nMessages per run: {', '.join(f'{s} B: {v:,}' for s, v in sorted(n.items()))}; untimed warm-up "
          f"rounds of {cap[0].get('warmup_requests', 0)} requests per run until JIT compilation took at most "
          f"{a.get('warmup_jit_share', 0.1):.0%} of the broker's CPU in two rounds in a row or {a.get('warmup_max_s')} s "
          f"passed "
          f"(Kafka: {_fmt(_med([r.get('warmup_rounds') for r in cap if r.get('target') == 'kafka']))} rounds, "
          f"{_fmt(_med([r.get('warmup_s') for r in cap if r.get('target') == 'kafka']), 1)} s, median). Verified = every batch's CRC32C, offsets contiguous "
          f"from 0, batches fetched = batches produced, no error code.\n")

    # ---- latency
    lat = [r for r in rows if r.get("section") == "latency"]
    if lat:
        r0 = lat[0]
        w(f"## End-to-end latency, one broker ({r0.get('rate')} msg/s, {r0.get('size')} B, linger.ms=0, "
          f"{r0.get('messages'):,} measured messages per run after {_fmt(r0.get('warmup_messages'))} warm-up)\n")
        w("| acks | target | e2e p50 ms | e2e p99 ms | e2e max ms | ack p50 ms | ack p99 ms | broker µs/msg | "
          "broker CPU % | of which JIT % | host busy % | verified |")
        w("|" + "---|" * 12)
        for acks in sorted({str(r.get("acks")) for r in lat}):
            for t in TARGETS:
                g = [r for r in lat if str(r.get("acks")) == acks and r.get("target") == t]
                if not g:
                    continue
                f2 = lambda v: f"{v:.2f}"  # noqa: E731
                w(f"| {acks} | {t} | {_cell([r.get('e2e_p50_ms') for r in g], f2)} | "
                  f"{_cell([r.get('e2e_p99_ms') for r in g], f2)} | {_cell([r.get('e2e_max_ms') for r in g], f2)} | "
                  f"{_cell([r.get('ack_p50_ms') for r in g], f2)} | {_cell([r.get('ack_p99_ms') for r in g], f2)} | "
                  f"{_cell([r.get('broker_cpu_us_per_msg') for r in g], lambda v: f'{v:.1f}')} | "
                  f"{_cell([r.get('broker_cpu_pct') for r in g], lambda v: f'{v:.0f}')} | "
                  f"{_fmt(_med([r.get('broker_jit_cpu_pct') for r in g]))} | "
                  f"{host_busy(g, 'host_busy_pct')} | {_verified(g)} |")
        w("")

    # ---- resources and start-up
    st = [r for r in rows if r.get("section") == "startup"]
    if st or cap:
        w("## Memory and start-up\n")
        w("| target | spawn → ApiVersions s | spawn → topic created and led s | SIGTERM → exit s | "
          "RSS idle MB (after start) | RSS after capacity load MB | peak RSS MB (max) | verified |")
        w("|" + "---|" * 8)
        for t in TARGETS:
            g = [r for r in st if r.get("target") == t]
            c = [r for r in cap if r.get("target") == t]
            f2 = lambda v: f"{v:.2f}"  # noqa: E731
            peak = _rng([r.get("broker_rss_peak_mb") for r in c])[1]
            w(f"| {t} | {_cell([r.get('api_versions_s') for r in g], f2)} | {_cell([r.get('topic_s') for r in g], f2)} | "
              f"{_cell([r.get('stop_s') for r in g], f2)} | {_cell([r.get('rss_idle_mb') for r in g], lambda v: f'{v:.0f}')} | "
              f"{_cell([r.get('broker_rss_after_mb') for r in c], lambda v: f'{v:.0f}')} | {_fmt(peak)} | "
              f"{_verified(g)} |")
        fmt_s = [r.get("format_s") for r in st if r.get("target") == "kafka"]
        w(f"\nKafka's one-time `kafka-storage format` of a fresh data dir (not in the start-up figures): "
          f"{_cell(fmt_s, lambda v: f'{v:.2f}')} s. Kafka's RSS includes the JVM's committed heap it has touched "
          f"(-Xms1G -Xmx1G, as kafka-server-start.sh sets).\n")

    # ---- cluster
    cs = [r for r in rows if r.get("section") == "cluster"]
    thr = [r for r in cs if r.get("phase") == "throughput"]
    starts = [r for r in cs if r.get("phase") == "start"]
    clat = [r for r in cs if r.get("phase") == "latency"]
    names = ("trafka-cluster", "kafka-cluster")
    if cs:
        w("## 3-broker cluster: replication.factor=3, min.insync.replicas=2, acks=all\n")
        for r in starts:
            w(f"- {r.get('target')}: up in {_fmt(r.get('start_s'), 1)} s ({r.get('how', '')})"
              + (f", after its ZooKeeper ({_fmt(r.get('zookeeper_start_s'), 1)} s)" if r.get("zookeeper_start_s") else "")
              + ("" if r.get("verified") else f" — FAILED: {str(r.get('errors'))[:300]}"))
        if thr:
            r0 = thr[0]
            w(f"\n(a) throughput: confluent-kafka, {r0.get('messages'):,} × {r0.get('size')} B per window, "
              f"{r0.get('partitions')} partition, linger.ms={r0.get('linger_ms')}\n")
            w("| target | msg/s | MB/s | broker µs/msg (3 brokers) | of which JIT | leader / each follower µs/msg | "
              "client µs/msg | host busy % | idle other cluster CPU % | verified |")
            w("|" + "---|" * 10)
            med = {}
            for t in names:
                g = [r for r in thr if r.get("target") == t]
                if not g:
                    continue
                med[t] = _med([r.get("msgs") for r in g])
                bg = [r.get("background_cpu_s") / r["elapsed_s"] * 100 for r in g
                      if _num(r.get("background_cpu_s")) and r.get("elapsed_s")]
                w(f"| {t} | {_cell([r.get('msgs') for r in g])} | {_cell([r.get('mbps') for r in g], lambda v: f'{v:.1f}')} | "
                  f"{_cell([r.get('broker_us_per_msg') for r in g], lambda v: f'{v:.2f}')} | "
                  f"{_fmt(_med([r.get('broker_jit_us_per_msg') for r in g]), 2)} | "
                  f"{_fmt(_med([r.get('leader_us_per_msg') for r in g]), 2)} / "
                  f"{_fmt(_med([r.get('follower_us_per_msg') for r in g]), 2)} | "
                  f"{_cell([r.get('client_us_per_msg') for r in g], lambda v: f'{v:.2f}')} | {host_busy(g, 'host_busy_pct')} | "
                  f"{_cell(bg, lambda v: f'{v:.0f}')} | {_verified(g)} |")
            if len(med) == 2:
                w(f"\nTrafka cluster / Kafka cluster msg/s: **{_ratio(med['trafka-cluster'], med['kafka-cluster'])}**")
        if clat:
            r0 = clat[0]
            w(f"\n(b) end-to-end latency at {r0.get('rate')} msg/s, {r0.get('size')} B, linger.ms=0, "
              f"{r0.get('messages'):,} measured messages per run after {_fmt(r0.get('warmup_messages'))} warm-up; "
              f"idempotent: at most 5 requests in flight; plain: idempotence off, every message its own request\n")
            w("| producer | target | e2e p50 ms | e2e p99 ms | e2e max ms | ack p99 ms | broker CPU % (3) | "
              "host busy % | verified |")
            w("|" + "---|" * 9)
            for producer in sorted({r.get("producer") for r in clat}):
                for t in names:
                    g = [r for r in clat if r.get("producer") == producer and r.get("target") == t]
                    if not g:
                        continue
                    f2 = lambda v: f"{v:.2f}"  # noqa: E731
                    w(f"| {producer} | {t} | {_cell([r.get('e2e_p50_ms') for r in g], f2)} | "
                      f"{_cell([r.get('e2e_p99_ms') for r in g], f2)} | {_cell([r.get('e2e_max_ms') for r in g], f2)} | "
                      f"{_cell([r.get('ack_p99_ms') for r in g], f2)} | "
                      f"{_cell([r.get('broker_cpu_pct') for r in g], lambda v: f'{v:.0f}')} | "
                      f"{host_busy(g, 'host_busy_pct')} | {_verified(g)} |")
        w("")

    # ---- where Kafka is ahead
    ahead = kafka_ahead(rows)
    w("## Where Kafka is ahead in this run\n")
    if ahead:
        for line in ahead:
            w(f"- {line}")
    else:
        w("- nowhere: Trafka's median is at least Kafka's in every compared cell.")
    w("\nWhy, and what was profiled: bench/README.md, \"The race against Kafka\".")
    bad = [r for r in rows if r.get("section") not in ("setup", "end") and r.get("verified") is False]
    w(f"\n{len(bad)} unverified windows." + "".join(
        f"\n- {r.get('section')} {r.get('target')} {r.get('size', '')} {r.get('phase', '')}: {str(r.get('errors'))[:300]}"
        for r in bad[:10]))
    return "\n".join(L) + "\n"


def kafka_ahead(rows: list[dict]) -> list[str]:
    """Every compared median where Kafka does better than Trafka, with by how much."""
    out = []

    def cmp(what: str, t, k, higher_better: bool, unit: str = "") -> None:
        if not (_num(t) and _num(k)) or t == k:
            return
        if (k > t) if higher_better else (k < t):
            factor = (k / t) if higher_better else (t / k if k else NAN)
            out.append(f"{what}: Kafka {_fmt(k, 2)}{unit} vs Trafka {_fmt(t, 2)}{unit} ({_fmt(factor, 2)}× "
                       f"{'more' if higher_better else 'less' if unit in (' µs/msg', ' MB') else 'faster'})")

    def med(rs, t, f):
        return _med([r.get(f) for r in rs if r.get("target") == t])

    cap = [r for r in rows if r.get("section") == "capacity"]
    for size, p in sorted({(r["size"], r["partitions"]) for r in cap}):
        g = [r for r in cap if r["size"] == size and r["partitions"] == p]
        for phase in ("produce", "consume"):
            cmp(f"capacity {size} B P{p} {phase} msg/s", med(g, "trafka", f"{phase}_msgs"),
                med(g, "kafka", f"{phase}_msgs"), True, " msg/s")
            cmp(f"capacity {size} B P{p} {phase} broker CPU", med(g, "trafka", f"{phase}_broker_cpu_us_per_msg"),
                med(g, "kafka", f"{phase}_broker_cpu_us_per_msg"), False, " µs/msg")
    lat = [r for r in rows if r.get("section") == "latency"]
    for acks in sorted({str(r.get("acks")) for r in lat}):
        g = [r for r in lat if str(r.get("acks")) == acks]
        for f in ("e2e_p50_ms", "e2e_p99_ms", "e2e_max_ms"):
            cmp(f"latency acks={acks} {f[:-3].replace('_', ' ')}", med(g, "trafka", f), med(g, "kafka", f), False,
                " ms")
        cmp(f"latency acks={acks} broker CPU", med(g, "trafka", "broker_cpu_us_per_msg"),
            med(g, "kafka", "broker_cpu_us_per_msg"), False, " µs/msg")
    st = [r for r in rows if r.get("section") == "startup"]
    for f, what in (("api_versions_s", "start-up to ApiVersions"), ("topic_s", "start-up to a created topic")):
        cmp(what, med(st, "trafka", f), med(st, "kafka", f), False, " s")
    cmp("RSS after the capacity load", med(cap, "trafka", "broker_rss_after_mb"), med(cap, "kafka", "broker_rss_after_mb"),
        False, " MB")
    cs = [r for r in rows if r.get("section") == "cluster"]
    thr = [r for r in cs if r.get("phase") == "throughput"]
    cmp("cluster throughput msg/s", med(thr, "trafka-cluster", "msgs"), med(thr, "kafka-cluster", "msgs"), True,
        " msg/s")
    cmp("cluster broker CPU", med(thr, "trafka-cluster", "broker_us_per_msg"),
        med(thr, "kafka-cluster", "broker_us_per_msg"), False, " µs/msg")
    clat = [r for r in cs if r.get("phase") == "latency"]
    for producer in sorted({r.get("producer") for r in clat}):
        g = [r for r in clat if r.get("producer") == producer]
        for f in ("e2e_p50_ms", "e2e_p99_ms"):
            cmp(f"cluster latency ({producer}) {f[:-3].replace('_', ' ')}", med(g, "trafka-cluster", f),
                med(g, "kafka-cluster", f), False, " ms")
    return out


# ---------------------------------------------------------------------------- main

def say(text: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {text}", flush=True)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--quick", action="store_true", help="small N, 2 repeats: a smoke run")
    ap.add_argument("--only", default=",".join(SECTIONS), help=f"sections: {', '.join(SECTIONS)}")
    ap.add_argument("--repeats", type=int, default=None, help="per cell (default 3; --quick 2)")
    ap.add_argument("--startup-repeats", type=int, default=None, help="default 5 (--quick 2)")
    ap.add_argument("--sizes", default="100,1024", help="capacity: message sizes")
    ap.add_argument("--partitions", default="1,6", help="capacity: partition counts")
    ap.add_argument("--capacity-messages", default="", help="capacity: per-size N, e.g. 100=20000000,1024=2000000")
    ap.add_argument("--warmup-requests", type=int, default=100,
                    help="capacity: untimed ≈1 MB Produce requests per warm-up round (read back) before each run's "
                         "timed phases")
    ap.add_argument("--warmup-jit-share", type=float, default=0.10,
                    help="capacity: warm-up rounds go on while JIT compilation took more than this share of the "
                         "broker's CPU in the last round")
    ap.add_argument("--warmup-max-s", type=float, default=None,
                    help="capacity: bound on the warm-up, seconds (default 30, --quick 8)")
    ap.add_argument("--latency-rate", type=int, default=1000)
    ap.add_argument("--latency-messages", type=int, default=None, help="default 10000 (--quick 2000)")
    ap.add_argument("--latency-warmup-s", type=float, default=None,
                    help="seconds sent at the rate before the measured ones (default 20, --quick 5): Kafka's JIT "
                         "compilers settle in 20-30 s at 1000 msg/s on this 2-core machine")
    ap.add_argument("--latency-acks", default="1,all")
    ap.add_argument("--cluster-messages", type=int, default=None, help="default 500000 (--quick 50000) × 1 KiB")
    ap.add_argument("--cluster-latency-s", type=float, default=None, help="default 10 (--quick 3)")
    ap.add_argument("--cluster-latency-producers", default="idempotent,plain")
    ap.add_argument("--trafka-set", action="append", default=[], metavar="KEY=VALUE")
    ap.add_argument("--kafka-set", action="append", default=[], metavar="KEY=VALUE")
    ap.add_argument("--run-timeout", type=float, default=300.0)
    ap.add_argument("--out", default=None, help="JSONL (default .cache/bench-results/race-<time>.jsonl)")
    ap.add_argument("--md", default=os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "docs", "race.md"),
                    help="the generated Markdown table ('' for none)")
    ap.add_argument("--log-dir", default=None, help="keep broker logs here (default: temporary, removed)")
    ap.add_argument("--summarize", nargs="+", default=None, help="only render the table of JSONL files")
    args = ap.parse_args(argv)

    if args.summarize:
        text = render(load(args.summarize))
        print(text)
        if args.md:
            with open(args.md, "w") as f:
                f.write(text)
        return 0
    base = QUICK if args.quick else FULL
    args.repeats = args.repeats or base["repeats"]
    args.startup_repeats = args.startup_repeats or base["startup_repeats"]
    args.capacity_messages = {**base["capacity_messages"],
                              **{int(k): int(v) for k, v in (x.split("=") for x in csv(args.capacity_messages))}}
    args.latency_messages = args.latency_messages or base["latency_messages"]
    args.cluster_messages = args.cluster_messages or base["cluster_messages"]
    args.cluster_latency_s = args.cluster_latency_s or base["cluster_latency_s"]
    if args.warmup_max_s is None:
        args.warmup_max_s = 8.0 if args.quick else 30.0
    if args.latency_warmup_s is None:
        args.latency_warmup_s = base["latency_warmup_s"]
    only = csv(args.only)
    unknown = set(only) - set(SECTIONS)
    if unknown:
        ap.error(f"unknown sections {sorted(unknown)}")
    out_path = args.out or os.path.join(REPO, ".cache", "bench-results", time.strftime("race-%Y%m%d-%H%M%S.jsonl"))
    os.makedirs(os.path.dirname(os.path.abspath(out_path)), exist_ok=True)

    from brokers import KAFKA_HEAP_OPTS, KAFKA_JVM_PERFORMANCE_OPTS

    started = time.monotonic()
    rows: list[dict] = []
    with open(out_path, "a") as sink:
        def out(row: dict) -> dict:
            rows.append(row)
            sink.write(json.dumps(row) + "\n")
            sink.flush()
            return row

        m = machine()
        out({"section": "setup", "machine": m, "started": time.strftime("%Y-%m-%d %H:%M:%S %Z"),
             "command": "python bench/race.py " + " ".join(argv if argv is not None else sys.argv[1:]),
             "out": os.path.relpath(out_path, REPO),
             "kafka_jvm": f"{os.environ.get('KAFKA_HEAP_OPTS', KAFKA_HEAP_OPTS)} "
                          f"{os.environ.get('KAFKA_JVM_PERFORMANCE_OPTS', KAFKA_JVM_PERFORMANCE_OPTS)}",
             "args": {k: (v if not isinstance(v, dict) else {str(a): b for a, b in v.items()})
                      for k, v in vars(args).items()}})
        say(f"race ({', '.join(only)}) -> {out_path}\n  machine: {m.get('cpu')} x {m.get('cores')} cores, load "
            f"average {m.get('loadavg')}; Kafka {m.get('kafka')}; Trafka {m.get('trafka_commit')}")
        for section, fn in (("startup", run_startup), ("capacity", run_capacity), ("latency", run_latency),
                            ("cluster", run_cluster)):
            if section in only:
                say(f"--- {section}")
                try:
                    fn(args, out)
                except Exception as exc:  # a section that breaks is reported; the others still run
                    out({"section": section, "phase": "crashed", "verified": False,
                         "errors": [f"{type(exc).__name__}: {exc}"]})
                    say(f"{section} crashed: {type(exc).__name__}: {exc}")
        out({"section": "end", "loadavg": [round(x, 2) for x in os.getloadavg()], "wall_s": time.monotonic() - started})
    text = render(rows)
    print("\n" + text)
    if args.md:
        with open(args.md, "w") as f:
            f.write(text)
        print(f"table written to {args.md}")
    ok = all(r.get("verified", True) for r in rows)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
