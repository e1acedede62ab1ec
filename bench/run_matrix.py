"""Side-by-side runner: Trafka and Tansu, a fresh broker per run, one interleaved run.

For every configuration (message size x partitions x acks x compression, then the
latency configurations) and every repeat, each target broker is started fresh on a free
loopback port, `produce_consume.py` runs against it in a subprocess (so client CPU and
librdkafka state do not carry over), the broker's peak RSS is read, and the broker is
stopped by PID. Targets alternate order between repeats (A,B then B,A) so slow drift of
the shared machine hits both alike. Results are appended to a JSONL file as they arrive
and summarized at the end: medians per target, min..max, and the ratio target/baseline.

    python bench/run_matrix.py              # default matrix, about 5-8 minutes
    python bench/run_matrix.py --quick      # same shape, small N, under 2 minutes
    python bench/run_matrix.py --summarize .cache/bench-results/matrix-*.jsonl

Trafka runs on disk in a temporary data dir (fsync policy "never", Kafka's default: the
page cache); Tansu with `memory://`, the only storage its binary has
(docs/design/performance.md#the-peer-broker).
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import statistics
import subprocess
import sys
import time
from collections import defaultdict

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from brokers import REPO, start_broker  # noqa: E402
from results import csv, load, parse_messages  # noqa: E402

PC = os.path.join(os.path.dirname(os.path.abspath(__file__)), "produce_consume.py")

DEFAULT_MESSAGES = {100: 3_000_000, 1024: 1_000_000}
QUICK_MESSAGES = {100: 300_000, 1024: 100_000}






def target_settings(target: str, args) -> dict[str, str] | None:
    """`--trafka-set` for Trafka targets, `--kafka-set` for Kafka, nothing for Tansu."""
    if target.startswith("trafka"):
        return dict(s.split("=", 1) for s in args.trafka_set)
    if target == "kafka":
        return dict(s.split("=", 1) for s in getattr(args, "kafka_set", []))
    return None


def run_one(target: str, pc_args: list[str], args, label: dict) -> dict:
    settings = target_settings(target, args)
    t0 = time.monotonic()
    try:
        broker = start_broker(target, settings=settings, data_dir=None, log_dir=args.log_dir)
    except Exception as exc:  # a broker that does not start is a result too
        return {**label, "target": target, "verified": False, "errors": [f"start failed: {exc}"], "error_count": 1}
    try:
        cmd = [sys.executable, PC, "--bootstrap", broker.bootstrap, "--broker-pid", str(broker.pid), "--json",
               *pc_args, *args.pc_arg]
        try:
            proc = subprocess.run(cmd, cwd=REPO, capture_output=True, text=True, timeout=args.run_timeout)
            lines = [l for l in proc.stdout.splitlines() if l.startswith("{")]
            result = json.loads(lines[-1]) if lines else {"verified": False, "errors": [proc.stderr[-2000:]],
                                                           "error_count": 1}
            if proc.stderr and not args.quiet:
                sys.stderr.write("  " + proc.stderr.strip().replace("\n", "\n  ") + "\n")
        except subprocess.TimeoutExpired:
            result = {"verified": False, "errors": [f"run exceeded {args.run_timeout} s"], "error_count": 1}
        result["broker_rss_peak_mb"] = broker.hwm_mb()
        result["broker_alive"] = broker.alive()
    finally:
        rc = broker.stop()
    result.update(label)
    result["target"] = target
    result["broker_exit"] = rc
    result["wall_s"] = time.monotonic() - t0
    if not result.get("verified"):
        result["broker_log_tail"] = broker.log_tail(15)
    return result


def plan(args) -> list[tuple[dict, list[str]]]:
    """(label, produce_consume args) for every configuration, in run order."""
    runs = []
    messages = {**(QUICK_MESSAGES if args.quick else DEFAULT_MESSAGES), **parse_messages(args.messages)} \
        if args.messages else dict(QUICK_MESSAGES if args.quick else DEFAULT_MESSAGES)
    if args.only in (None, "throughput"):
        for size, parts, acks, comp in itertools.product([int(s) for s in csv(args.sizes)],
                                                         [int(p) for p in csv(args.partitions)],
                                                         csv(args.acks), csv(args.compression)):
            # Sizes without a default: about 300 MB of values (30 MB quick).
            n = messages.get(size) or max(10_000, (30_000_000 if args.quick else 300_000_000) // size)
            label = {"mode": "throughput", "size": size, "partitions": parts, "acks": acks, "compression": comp,
                     "messages": n}
            runs.append((label, ["--size", str(size), "--messages", str(n), "--partitions", str(parts),
                                 "--acks", acks, "--compression", comp]))
    if args.only in (None, "latency"):
        m = args.latency_messages or (2000 if args.quick else 10_000)
        for acks in csv(args.latency_acks):
            label = {"mode": "latency", "size": 100, "partitions": 1, "acks": acks, "compression": "none",
                     "messages": m, "rate": args.latency_rate}
            runs.append((label, ["--latency", "--size", "100", "--messages", str(m), "--partitions", "1",
                                 "--acks", acks, "--rate", str(args.latency_rate),
                                 "--warmup-s", str(getattr(args, "latency_warmup_s", 0))]))
    return runs


# ---------------------------------------------------------------------------- summary

def _med(values):
    values = [v for v in values if isinstance(v, (int, float)) and v == v]
    return statistics.median(values) if values else float("nan")


def _range(values):
    values = [v for v in values if isinstance(v, (int, float)) and v == v]
    return (min(values), max(values)) if values else (float("nan"), float("nan"))


def _fmt(v, digits=0):
    if not isinstance(v, (int, float)) or v != v:
        return "-"
    return f"{v:,.{digits}f}"


def summarize(results: list[dict], baseline: str, out=sys.stdout) -> dict:
    """Print the tables; return {config: {target: medians}} for callers."""
    groups: dict[tuple, dict[str, list[dict]]] = defaultdict(lambda: defaultdict(list))
    for r in results:
        key = (r.get("mode"), r.get("size"), r.get("partitions"), str(r.get("acks")), r.get("compression"))
        groups[key][r.get("target")].append(r)
    targets = sorted({r.get("target") for r in results}, key=lambda t: (t == baseline, t))
    others = [t for t in targets if t != baseline]
    summary: dict = {}

    tp = [k for k in groups if k[0] == "throughput"]
    if tp:
        print("\n## Throughput (medians; MB/s = value bytes / 1e6)\n", file=out)
        head = ["size", "P", "acks", "comp"]
        for t in targets:
            head += [f"{t} prod msg/s", f"{t} cons msg/s"]
        for t in others:
            head += [f"{t}/{baseline} prod", f"{t}/{baseline} cons"]
        for t in targets:
            head += [f"{t} µs/msg p/c"]
        head += ["verified"]
        print("| " + " | ".join(head) + " |", file=out)
        print("|" + "---|" * len(head), file=out)
        for key in sorted(tp, key=lambda k: (k[1], k[2], k[3], k[4])):
            row = [f"{key[1]} B", str(key[2]), key[3], key[4]]
            med = {}
            for t in targets:
                rs = groups[key].get(t, [])
                med[t] = {f: _med([r.get(f) for r in rs]) for f in (
                    "produce_msgs", "consume_msgs", "produce_mbps", "consume_mbps",
                    "produce_broker_cpu_us_per_msg", "consume_broker_cpu_us_per_msg", "broker_rss_peak_mb")}
                med[t]["runs"] = len(rs)
                med[t]["verified"] = sum(1 for r in rs if r.get("verified"))
                pr, cr = _range([r.get("produce_msgs") for r in rs]), _range([r.get("consume_msgs") for r in rs])
                med[t]["produce_range"], med[t]["consume_range"] = pr, cr
                row += [_fmt(med[t]["produce_msgs"]), _fmt(med[t]["consume_msgs"])]
            for t in others:
                b = med.get(baseline, {})
                for f in ("produce_msgs", "consume_msgs"):
                    ratio = med[t][f] / b[f] if b.get(f) and b[f] == b[f] else float("nan")
                    med[t][f + "_ratio"] = ratio
                    row.append(_fmt(ratio, 2) + "×" if ratio == ratio else "-")
            for t in targets:
                row.append(f"{_fmt(med[t]['produce_broker_cpu_us_per_msg'], 2)} / "
                           f"{_fmt(med[t]['consume_broker_cpu_us_per_msg'], 2)}")
            row.append(" ".join(f"{t} {med[t]['verified']}/{med[t]['runs']}" for t in targets))
            print("| " + " | ".join(row) + " |", file=out)
            summary[key] = med
        if any(len(groups[k].get(t, [])) > 1 for k in tp for t in targets):
            print("\nSpread (min..max msg/s):", file=out)
            for key in sorted(tp, key=lambda k: (k[1], k[2], k[3], k[4])):
                parts = []
                for t in targets:
                    m = summary[key][t]
                    parts.append(f"{t} prod {_fmt(m['produce_range'][0])}..{_fmt(m['produce_range'][1])} "
                                 f"cons {_fmt(m['consume_range'][0])}..{_fmt(m['consume_range'][1])}")
                print(f"- {key[1]} B P{key[2]} acks={key[3]} {key[4]}: " + "; ".join(parts), file=out)

    lat = [k for k in groups if k[0] == "latency"]
    if lat:
        print("\n## Latency (1 msg per request, linger.ms=0; medians; ms)\n", file=out)
        head = ["acks", "target", "rate", "e2e p50", "p90", "p99", "p99.9", "max", "ack p50", "ack p99",
                "broker CPU %", "verified"]
        print("| " + " | ".join(head) + " |", file=out)
        print("|" + "---|" * len(head), file=out)
        for key in sorted(lat, key=lambda k: k[3]):
            for t in targets:
                rs = groups[key].get(t, [])
                if not rs:
                    continue
                m = {f: _med([r.get(f) for r in rs]) for f in (
                    "e2e_p50_ms", "e2e_p90_ms", "e2e_p99_ms", "e2e_p99_9_ms", "e2e_max_ms", "ack_p50_ms",
                    "ack_p99_ms", "broker_cpu_pct", "achieved_rate")}
                m["verified"] = sum(1 for r in rs if r.get("verified"))
                summary.setdefault(key, {})[t] = m
                print("| " + " | ".join([key[3], t, _fmt(m["achieved_rate"]), _fmt(m["e2e_p50_ms"], 2),
                                         _fmt(m["e2e_p90_ms"], 2), _fmt(m["e2e_p99_ms"], 2),
                                         _fmt(m["e2e_p99_9_ms"], 2), _fmt(m["e2e_max_ms"], 2),
                                         _fmt(m["ack_p50_ms"], 2), _fmt(m["ack_p99_ms"], 2),
                                         _fmt(m["broker_cpu_pct"], 0), f"{m['verified']}/{len(rs)}"]) + " |",
                      file=out)

    # One-line verdicts against the capacity targets (docs/design/performance.md#capacity-targets).
    if tp and others:
        print("\n## Ratios against the targets (stock client ≥ 1.0×, capacity ≥ 1.5×)\n", file=out)
        for t in others:
            ratios = [(k, summary[k][t].get(f + "_ratio"), f) for k in tp for f in ("produce_msgs", "consume_msgs")]
            ratios = [(k, r, f) for k, r, f in ratios if r == r and r is not None]
            if ratios:
                worst = min(ratios, key=lambda x: x[1])
                best = max(ratios, key=lambda x: x[1])
                geo = statistics.geometric_mean([r for _, r, _ in ratios])
                print(f"- {t}/{baseline}: geometric mean {geo:.2f}×, worst {worst[1]:.2f}× "
                      f"({worst[0][1]} B P{worst[0][2]} {worst[2].split('_')[0]}), best {best[1]:.2f}×; "
                      f"≥1.0× in {sum(r >= 1.0 for _, r, _ in ratios)}/{len(ratios)}, "
                      f"≥1.5× in {sum(r >= 1.5 for _, r, _ in ratios)}/{len(ratios)}", file=out)
    failed = [r for r in results if not r.get("verified")]
    print(f"\n{len(results) - len(failed)}/{len(results)} runs verified.", file=out)
    for r in failed[:10]:
        print(f"- FAILED {r.get('target')} {r.get('mode')} {r.get('size')} B P{r.get('partitions')}: "
              f"missing={r.get('missing')} dups={r.get('duplicates')} errors={r.get('errors')}", file=out)
    return summary




def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--targets", default="trafka,tansu",
                    help="brokers to run (trafka, trafka@DIR, kafka: Apache Kafka 4.x, tansu)")
    ap.add_argument("--baseline", default="tansu", help="the target ratios are computed against")
    ap.add_argument("--quick", action="store_true", help="small N (whole run under about 2 minutes)")
    ap.add_argument("--sizes", default="100,1024")
    ap.add_argument("--messages", default="", help="per-size N, e.g. 100=3000000,1024=1000000")
    ap.add_argument("--partitions", default="1,6")
    ap.add_argument("--acks", default="1", help="e.g. 1,all")
    ap.add_argument("--compression", default="none", help="e.g. none,lz4")
    ap.add_argument("--repeats", type=int, default=1)
    ap.add_argument("--only", choices=["throughput", "latency"], default=None)
    ap.add_argument("--latency-rate", type=int, default=1000)
    ap.add_argument("--latency-messages", type=int, default=0, help="default 10000 (quick: 2000)")
    ap.add_argument("--latency-acks", default="1")
    ap.add_argument("--latency-warmup-s", type=float, default=0.0,
                    help="seconds sent at the rate before the measured messages (for Kafka's JIT; bench/race.py: 3)")
    ap.add_argument("--kafka-set", action="append", default=[], metavar="KEY=VALUE",
                    help="server.properties line for Kafka runs (repeatable)")
    ap.add_argument("--trafka-set", action="append", default=[], metavar="KEY=VALUE",
                    help="broker setting for Trafka runs (repeatable)")
    ap.add_argument("--pc-arg", action="append", default=[], help="extra argument for produce_consume.py")
    ap.add_argument("--run-timeout", type=float, default=300.0)
    ap.add_argument("--out", default=None, help="JSONL file (default .cache/bench-results/matrix-<time>.jsonl)")
    ap.add_argument("--log-dir", default=None, help="where broker logs go (default: the temp dir)")
    ap.add_argument("--summarize", nargs="+", default=None, help="only print the summary of JSONL files")
    ap.add_argument("--quiet", action="store_true", help="do not echo each run's one-line summary")
    args = ap.parse_args(argv)

    if args.summarize:
        summarize(load(args.summarize), args.baseline)
        return 0

    out_path = args.out or os.path.join(REPO, ".cache", "bench-results",
                                        time.strftime("matrix-%Y%m%d-%H%M%S.jsonl"))
    os.makedirs(os.path.dirname(out_path), exist_ok=True)
    targets = csv(args.targets)
    runs = plan(args)
    total = len(runs) * len(targets) * args.repeats
    print(f"{total} runs ({len(runs)} configurations x {len(targets)} targets x {args.repeats} repeats) -> {out_path}",
          flush=True)
    results = []
    started = time.monotonic()
    k = 0
    with open(out_path, "a") as sink:
        for label, pc_args in runs:
            for rep in range(args.repeats):
                order = targets if rep % 2 == 0 else list(reversed(targets))
                for target in order:
                    k += 1
                    print(f"[{k}/{total} {time.monotonic() - started:5.0f}s] {target} {label['mode']} "
                          f"{label['size']} B P{label['partitions']} acks={label['acks']} {label['compression']} "
                          f"rep {rep + 1}", flush=True)
                    result = run_one(target, pc_args, args, {**label, "repeat": rep})
                    results.append(result)
                    sink.write(json.dumps(result) + "\n")
                    sink.flush()
    print(f"\nfinished in {time.monotonic() - started:.0f} s; results in {out_path}")
    summarize(results, args.baseline)
    return 0 if all(r.get("verified") for r in results) else 1


if __name__ == "__main__":
    sys.exit(main())
