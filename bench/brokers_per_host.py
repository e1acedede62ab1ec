"""Brokers per host: the capacity of 2 Trafka brokers of one cluster vs 1, on one machine.

Why this exists: a Python process uses one core, so a Trafka broker cannot use a whole
machine; running several brokers of one cluster per host (TRAFKA_BROKERS_PER_HOST,
cli/launcher.py) is how it does. This script measures what that buys: the
produce capacity of a 2-broker cluster against a 1-broker cluster on the same host, in the
same run. Target on a 2-core machine: 2-brokers / 1-broker >= 1.7x.

The load is capacity.py's (read its docstring): K prebuilt uncompressed record batches of
`--size`-byte values (librdkafka's batch.num.messages / batch.size), Produce v9 requests of
ONE partition's batch each (librdkafka's shape), `--inflight` pipelined per connection,
built before the clock starts so the client's per-message cost is tiny and the brokers are
the bottleneck. What is new here is routing: the client asks Metadata for each
partition's leader and sends each partition's requests to it, one connection per broker,
all driven from one thread on non-blocking sockets (capacity.produce_phase with a route).

Targets (each window gets fresh brokers and data dirs, removed afterwards):

- `1-broker`:  a ZooKeeper-mode cluster of one broker;
- `2-brokers`: a ZooKeeper-mode cluster of two brokers;
- `embedded`:  (optional reference) one broker without ZooKeeper, as capacity.py runs it.

Both clusters use one real ZooKeeper (cli/zookeeper_server.py, started once per
run), each window its own chroot. The topic has `--partitions` (8) partitions,
replication.factor=1 and the default assignment, which is Kafka's: leaders round-robin over
the brokers from a random start, so 8 partitions are 4 + 4 on two brokers (checked every
window: a spread uneven by more than one partition fails it). Produced with acks=1 (or
`--acks -1`: the same thing at RF=1). The controller is one of the brokers, as in any
cluster, but it has nothing to do while the window runs.

Per window: produce msg/s and MB/s over the window (first send to last acknowledgement),
each broker's CPU seconds (/proc, bench/brokers.py proc_cpu_s) and its share of one core,
ZooKeeper's CPU seconds, the client's CPU per message and the host's busy %. Also
"msg / busiest broker CPU s": the records divided by the CPU seconds of the broker that
used the most, i.e. the msg/s the target would reach if each broker had a core of its own
and nothing else limited it. Its ratio (printed beside the msg/s ratio) is an estimate,
not the measurement: it leaves out the client's and the kernel's share of the cores, but
it moves far less with the neighbours' load than msg/s does. Verified only
if no response carried an error code, every partition's high watermark (ListOffsets to
its leader) equals the records produced to it, and their sum equals the records produced.
There is no consume phase: a Fetch from two brokers at once would need a second pipelined
client for a figure this issue does not ask for.

Targets alternate order between repeats (A,B then B,A); the table gives medians, spreads,
the ratio of medians 2-brokers / 1-broker, and the per-repeat ratios (each from two
adjacent windows, so they share the neighbours' load). Each window is appended as a JSON
line to `--out` (default .cache/bench-results/brokers-per-host-<time>.jsonl, first line the
setup); `--summarize FILE...` re-prints the table.

    python bench/brokers_per_host.py                                  # 2 targets x 3 repeats, 20M x 100 B: ~1 min
    python bench/brokers_per_host.py --targets 1-broker,2-brokers,embedded --repeats 5
    python bench/brokers_per_host.py --messages 2000000 --repeats 1   # functional check: ~15 s
    python bench/brokers_per_host.py --summarize .cache/bench-results/brokers-per-host-*.jsonl

Reading the numbers: the client and the brokers share the host. With two brokers on two
cores the client's own CPU (client µs/msg x msg/s, mostly the kernel's loopback copy) comes
out of the brokers' cores, so 2.0x is out of reach and "broker %" per broker says how
close each came to a core of its own. On a machine others are using, every figure follows
their load: compare only ratios from the same run, and look at the per-repeat ratios'
spread before believing the median.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import tempfile
import time
from collections import Counter, defaultdict

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(1, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from brokers import REPO, proc_cpu_s, start_broker  # noqa: E402
from capacity import TOPIC, _fmt, _med, _range, build_requests, build_templates, produce_phase  # noqa: E402
from cluster import BenchCluster  # noqa: E402
from rawclient import LIST_OFFSETS_V, RawClient  # noqa: E402
from results import csv, load  # noqa: E402
from transactions import machine  # noqa: E402

from cli.zookeeper_server import ZooKeeperServer  # noqa: E402

# target -> (brokers, ZooKeeper mode)
TARGETS = {"1-broker": (1, True), "2-brokers": (2, True), "embedded": (1, False)}
BASELINE, CANDIDATE = "1-broker", "2-brokers"
TARGET_RATIO = 1.7
NAN = float("nan")


# ---------------------------------------------------------------------------- the topic

def wait_for_leaders(bootstraps: list[str], partitions: int, timeout_s: float = 30.0) -> tuple[dict, dict]:
    """Wait until every broker's Metadata names a leader for every partition, the same one;
    return ({partition: leader node}, {node: "host:port"})."""
    deadline = time.monotonic() + timeout_s
    last = None
    while time.monotonic() < deadline:
        views = []
        for b in bootstraps:
            client = RawClient(b, timeout_s=5)
            try:
                md = client.metadata([TOPIC])
            finally:
                client.close()
            parts = [p for t in md["topics"] if t["name"] == TOPIC and t["error_code"] == 0 for p in t["partitions"]]
            leaders = {p["partition_index"]: p["leader_id"] for p in parts if p["error_code"] == 0}
            nodes = {br["node_id"]: f"{br['host']}:{br['port']}" for br in md["brokers"]}
            views.append((leaders, nodes))
        last = views
        leaders, nodes = views[0]
        if (len(leaders) == partitions and all(v >= 0 and v in nodes for v in leaders.values())
                and all(v[0] == leaders for v in views) and len(nodes) == len(bootstraps)):
            return leaders, nodes
        time.sleep(0.1)
    raise TimeoutError(f"partition leaders not agreed within {timeout_s} s (last: {last!r})")


def high_watermarks(nodes: dict[int, str], leaders: dict[int, int]) -> tuple[dict[int, int], list[str]]:
    """Each partition's high watermark, from ListOffsets (latest) to its leader."""
    out: dict[int, int] = {}
    errors: list[str] = []
    for node, bootstrap in nodes.items():
        mine = [p for p, leader in leaders.items() if leader == node]
        if not mine:
            continue
        client = RawClient(bootstrap)
        try:
            resp = client.call(2, LIST_OFFSETS_V, {"replica_id": -1, "isolation_level": 0, "topics": [
                {"name": TOPIC, "partitions": [{"partition_index": p, "current_leader_epoch": -1, "timestamp": -1}
                                               for p in mine]}]})
        finally:
            client.close()
        for t in resp["topics"]:
            for p in t["partitions"]:
                if p["error_code"]:
                    errors.append(f"ListOffsets partition {p['partition_index']}: error {p['error_code']}")
                else:
                    out[p["partition_index"]] = p["offset"]
    return out, errors


# ---------------------------------------------------------------------------- one window

def run_window(target: str, zk: ZooKeeperServer | None, label: dict, requests: list, n_requests: int,
               expected: int, args: argparse.Namespace) -> dict:
    """Fresh brokers, topic, produce, verify; the brokers are stopped and their data removed
    whatever happens."""
    n, zookeeper = TARGETS[target]
    settings = dict(s.split("=", 1) for s in args.trafka_set)
    partitions = label["partitions"]
    t0 = time.monotonic()
    result: dict = {**label, "target": target, "brokers": n, "zookeeper": zookeeper, "verified": False}
    root = tempfile.mkdtemp(prefix="trafka-bph-", dir=args.data_root)
    errors: list[str] = []
    cluster = single = None
    procs: dict[str, object] = {}  # bootstrap -> BrokerProcess
    try:
        if zookeeper:
            cluster = BenchCluster(zk.chroot_connect_string("bph"), n, settings, root)
            cluster.start()
            procs = {f"127.0.0.1:{port}": cluster.procs[node] for node, port in cluster.ports.items()}
        else:
            single = start_broker("trafka", settings=settings, data_dir=os.path.join(root, "data"), log_dir=root)
            procs = {single.bootstrap: single}
        bootstraps = list(procs)
        admin = RawClient(bootstraps[0])
        try:
            code = admin.create_topic(TOPIC, partitions)
        finally:
            admin.close()
        if code:
            raise RuntimeError(f"CreateTopics error {code}")
        leaders, nodes = wait_for_leaders(bootstraps, partitions)
        result["startup_s"] = time.monotonic() - t0
        order = sorted(nodes)
        spread = Counter(leaders.values())
        result["leaders_per_broker"] = {str(node): spread.get(node, 0) for node in order}
        if max(spread.get(node, 0) for node in order) - min(spread.get(node, 0) for node in order) > 1:
            raise RuntimeError(f"partition leaders not spread over the brokers: {dict(spread)}")
        route = [order.index(leaders[req.keys[0][0]]) for req in requests]
        pids = [procs[nodes[node]].pid for node in order]
        deadline = time.monotonic() + args.run_timeout
        zk0 = proc_cpu_s(zk.proc.pid) if zk is not None and zk.proc is not None else NAN
        prod, sent, perr = produce_phase([nodes[node] for node in order], pids, requests, n_requests, args.inflight,
                                         label["size"], deadline, route=route)
        result["zookeeper_cpu_s"] = (proc_cpu_s(zk.proc.pid) - zk0) if zookeeper else NAN
        result.update(prod)
        el = prod["produce_s"]
        result["broker_cpu_s_each"] = {str(node): c for node, c in zip(order, prod["produce_broker_cpu_s_each"])}
        result["broker_cpu_pct_each"] = {str(node): 100 * c / el if el > 0 else NAN
                                         for node, c in zip(order, prod["produce_broker_cpu_s_each"])}
        result["msgs_per_busiest_broker_cpu_s"] = per_busiest_cpu_s(result)
        errors += perr
        hws, herr = high_watermarks(nodes, leaders)
        errors += herr
        result["high_watermark"] = sum(hws.values())
        per_partition = Counter()
        for (p, _crc, count), times in sent.items():
            per_partition[p] += count * times
        for p in range(partitions):
            if hws.get(p) != per_partition.get(p, 0):
                errors.append(f"partition {p}: high watermark {hws.get(p)}, {per_partition.get(p, 0)} produced")
        if result["high_watermark"] != prod["produced"]:
            errors.append(f"high watermarks add up to {result['high_watermark']:,}, {prod['produced']:,} produced")
        if not perr and prod["produced"] != expected:
            errors.append(f"produced {prod['produced']:,} records, expected {expected:,}")
    except Exception as exc:
        errors.append(f"{type(exc).__name__}: {exc}")
    finally:
        if errors:
            result["broker_log_tails"] = {b: p.log_tail(10) for b, p in procs.items()}
        for p in procs.values():
            result.setdefault("broker_exit", []).append(p.stop())
        shutil.rmtree(root, ignore_errors=True)
    result["errors"] = errors[:10]
    result["error_count"] = len(errors)
    result["verified"] = not errors
    result["wall_s"] = time.monotonic() - t0
    return result


# ---------------------------------------------------------------------------- summary

def per_busiest_cpu_s(r: dict) -> float:
    """Records produced / CPU seconds of the broker that used the most in the window."""
    each = [c for c in r.get("produce_broker_cpu_s_each") or [] if c == c]
    busiest = max(each, default=0.0)
    return r.get("produced", 0) / busiest if busiest > 0 else NAN


def summarize(rows: list[dict], out=sys.stdout) -> dict:
    """Print medians, spreads, ratios and per-broker CPU per (size, P, acks); return the ratios."""
    setup = [r for r in rows if r.get("kind") == "setup"]
    windows = [r for r in rows if r.get("kind") != "setup"]
    for s in setup:
        m = s.get("machine", {})
        print(f"machine: {m.get('host')} {m.get('cpu')} x{m.get('cores')}, load {m.get('loadavg')}; "
              f"settings {s.get('settings')}", file=out)
    groups: dict[tuple, dict[str, list[dict]]] = defaultdict(lambda: defaultdict(list))
    for r in windows:
        groups[(r.get("size"), r.get("partitions"), str(r.get("acks")))][r.get("target")].append(r)
    targets = [t for t in TARGETS if any(r.get("target") == t for r in windows)]
    ratios: dict = {}

    print("\n## Brokers per host (raw pipelined produce, one connection per broker; medians)\n", file=out)
    head = ["size", "P", "acks", "target", "prod msg/s", "min..max", "MB/s", "broker CPU s / window",
            "broker % of a core (each)", "msg / busiest broker CPU s", "ZK CPU s", "client µs/msg", "host busy %",
            "verified"]
    print("| " + " | ".join(head) + " |", file=out)
    print("|" + "---|" * len(head), file=out)
    for key in sorted(groups, key=lambda k: (k[0] or 0, k[1] or 0, k[2])):
        for t in targets:
            rs = groups[key].get(t, [])
            if not rs:
                continue
            ok = [r for r in rs if r.get("verified")]
            lo, hi = _range([r.get("produce_msgs") for r in ok])
            nodes = sorted({n for r in ok for n in r.get("broker_cpu_pct_each", {})}, key=int)
            each = " / ".join(_fmt(_med([r.get("broker_cpu_pct_each", {}).get(n) for r in ok])) for n in nodes)
            row = [f"{key[0]} B", str(key[1]), key[2], t, _fmt(_med([r.get("produce_msgs") for r in ok])),
                   f"{_fmt(lo)}..{_fmt(hi)}", _fmt(_med([r.get("produce_mbps") for r in ok])),
                   _fmt(_med([r.get("produce_broker_cpu_s") for r in ok]), 2), each or "-",
                   _fmt(_med([per_busiest_cpu_s(r) for r in ok])),
                   _fmt(_med([r.get("zookeeper_cpu_s") for r in ok]), 2),
                   _fmt(_med([r.get("produce_client_cpu_us_per_msg") for r in ok]), 3),
                   _fmt(_med([r.get("produce_host_busy_pct") for r in ok])), f"{len(ok)}/{len(rs)}"]
            print("| " + " | ".join(row) + " |", file=out)

    for key in sorted(groups, key=lambda k: (k[0] or 0, k[1] or 0, k[2])):
        g = groups[key]
        base = [r for r in g.get(BASELINE, []) if r.get("verified")]
        by_rep = {(r.get("run"), r.get("repeat")): r["produce_msgs"] for r in base}
        for t in targets:
            if t == BASELINE:
                continue
            cand = [r for r in g.get(t, []) if r.get("verified")]
            if not base or not cand:
                continue
            ratio = _med([r["produce_msgs"] for r in cand]) / _med([r["produce_msgs"] for r in base])
            paired = [r["produce_msgs"] / by_rep[(r.get("run"), r.get("repeat"))] for r in cand
                      if (r.get("run"), r.get("repeat")) in by_rep]
            ratios[(key, t)] = ratio
            cpu_ratio = (_med([per_busiest_cpu_s(r) for r in cand])
                         / _med([per_busiest_cpu_s(r) for r in base]))
            verdict = ""
            if t == CANDIDATE:
                verdict = f" (target >= {TARGET_RATIO}x: {'met' if ratio >= TARGET_RATIO else 'NOT met'})"
            print(f"\n{key[0]} B P{key[1]} acks={key[2]}: {t} / {BASELINE} produce msg/s = {ratio:.2f}x{verdict}; "
                  f"per repeat: {', '.join(f'{x:.2f}x' for x in paired) or '-'}"
                  + (f" (spread {min(paired):.2f}..{max(paired):.2f})" if len(paired) > 1 else "")
                  + f"; CPU-normalised (msg / busiest broker CPU s): {cpu_ratio:.2f}x", file=out)
    failed = [r for r in windows if not r.get("verified")]
    print(f"\n{len(windows) - len(failed)}/{len(windows)} windows verified.", file=out)
    for r in failed[:10]:
        print(f"- FAILED {r.get('target')} {r.get('size')} B P{r.get('partitions')} rep {r.get('repeat')}: "
              f"{r.get('errors')}", file=out)
    return ratios


# ---------------------------------------------------------------------------- main

def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--targets", default="1-broker,2-brokers", help=f"any of {', '.join(TARGETS)}")
    ap.add_argument("--size", type=int, default=100, help="value size in bytes (at least 16)")
    ap.add_argument("--partitions", type=int, default=8)
    ap.add_argument("--messages", type=int, default=20_000_000, help="per window (rounded up to whole requests, "
                    "the same number per partition)")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--acks", type=int, default=1, choices=[-1, 1], help="1 or -1 (all; the same at RF=1)")
    ap.add_argument("--inflight", type=int, default=5, help="Produce requests in flight per connection")
    ap.add_argument("--batch-bytes", type=int, default=1_000_000, help="librdkafka batch.size")
    ap.add_argument("--batch-records", type=int, default=10_000, help="librdkafka batch.num.messages")
    ap.add_argument("--templates", type=int, default=64, help="distinct prebuilt batches")
    ap.add_argument("--trafka-set", action="append", default=[], metavar="KEY=VALUE",
                    help="broker setting for every broker (repeatable)")
    ap.add_argument("--run-timeout", type=float, default=120.0, help="seconds for one window's produce")
    ap.add_argument("--data-root", default=None, help="where the brokers' temporary data dirs go (default: $TMPDIR)")
    ap.add_argument("--out", default=None,
                    help="JSONL file (default .cache/bench-results/brokers-per-host-<time>.jsonl)")
    ap.add_argument("--summarize", nargs="+", default=None, help="only print the summary of JSONL files")
    args = ap.parse_args(argv)

    if args.summarize:
        summarize(load(args.summarize))
        return 0
    targets = csv(args.targets)
    unknown = [t for t in targets if t not in TARGETS]
    if unknown:
        ap.error(f"unknown target(s) {unknown}; choose from {', '.join(TARGETS)}")
    out_path = args.out or os.path.join(REPO, ".cache", "bench-results",
                                        time.strftime("brokers-per-host-%Y%m%d-%H%M%S.jsonl"))
    os.makedirs(os.path.dirname(os.path.abspath(out_path)), exist_ok=True)

    t = time.perf_counter()
    templates = build_templates(args.size, args.templates, args.batch_records, args.batch_bytes)
    requests = build_requests(templates, args.partitions, "per-partition", args.acks)
    per_req = requests[0].records
    n_requests = -(-args.messages // per_req)
    n_requests = -(-n_requests // args.partitions) * args.partitions  # the same number of batches per partition
    expected = n_requests * per_req
    print(f"prep: {len(templates)} templates x {per_req:,} records ({len(templates[0].batch):,} B per batch) "
          f"in {time.perf_counter() - t:.1f} s; {len(targets) * args.repeats} windows of {expected:,} records "
          f"-> {out_path}", flush=True)
    label = {"kind": "window", "run": time.strftime("%Y%m%d-%H%M%S"), "size": args.size,
             "partitions": args.partitions, "acks": args.acks,
             "messages": expected, "records_per_batch": per_req, "batch_bytes": len(templates[0].batch),
             "requests": n_requests, "inflight": args.inflight, "templates": len(templates)}

    zk = None
    if any(TARGETS[t][1] for t in targets):
        reason = ZooKeeperServer.unavailable_reason()
        if reason:
            print(f"ZooKeeper unavailable: {reason}", file=sys.stderr)
            return 2
        zk = ZooKeeperServer().start()
    results: list[dict] = []
    started = time.monotonic()
    try:
        with open(out_path, "a") as sink:
            setup = {"kind": "setup", "machine": machine(), "settings": args.trafka_set, "targets": targets,
                     "repeats": args.repeats, **{k: v for k, v in label.items() if k != "kind"}}
            sink.write(json.dumps(setup) + "\n")
            results.append(setup)
            k = 0
            for rep in range(args.repeats):
                for target in (targets if rep % 2 == 0 else list(reversed(targets))):
                    k += 1
                    print(f"[{k}/{len(targets) * args.repeats} {time.monotonic() - started:5.0f}s] {target} "
                          f"rep {rep + 1}", flush=True)
                    r = run_window(target, zk, {**label, "repeat": rep}, requests, n_requests, expected, args)
                    results.append(r)
                    sink.write(json.dumps(r) + "\n")
                    sink.flush()
                    print(f"    produce {_fmt(r.get('produce_msgs'))} msg/s ({_fmt(r.get('produce_mbps'))} MB/s) "
                          f"in {_fmt(r.get('produce_s'), 1)} s; broker CPU s {r.get('broker_cpu_s_each')}; "
                          f"leaders {r.get('leaders_per_broker')}; verified {r['verified']}"
                          + ("" if r["verified"] else f" {r['errors'][:3]}"), flush=True)
    finally:
        if zk is not None:
            zk.close()
    print(f"\nfinished in {time.monotonic() - started:.0f} s; results in {out_path}")
    summarize(results)
    return 0 if all(r.get("verified") for r in results if r.get("kind") != "setup") else 1


if __name__ == "__main__":
    sys.exit(main())
