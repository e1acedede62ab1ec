"""What /metrics costs the data path: bench/capacity.py with the HTTP listener off against
on and scraped every second, same session, runs interleaved.

Why: the metrics are counted on the hot path (once per request and per batch, never per
record: server/http/metrics.py), and the issue asks that this cost at most 3 % of the
broker's capacity. "off" is `http.listeners=` (the network layer counts nothing then; the
per-batch partition counters are always on); "on" serves /metrics on a free port and a
thread of this process GETs it every second for the whole run, as a Prometheus server
would (`capacity.py --http`).

Each configuration runs `--repeats` times in ABBA order (off,on then on,off) on a fresh
broker each, so drift of the machine (page-cache writeback, other load) falls on both.
Reported per configuration: median produce and consume msg/s and broker CPU µs/msg of
each, and the cost as the median of the per-pair ratios (on / off - 1; positive = slower
or more CPU with metrics on), and the best run of each side (on a shared machine other
load only ever makes a run worse, so the best runs are the least disturbed comparison).

    python bench/metrics_cost.py                          # 100 B and 1 KiB x 1 and 6 partitions, 3 repeats
    python bench/metrics_cost.py --sizes 100 --partitions 1 --repeats 5
    python bench/metrics_cost.py --scrape-cost 10,1000    # broker CPU per scrape, by partition count
    python bench/metrics_cost.py --request-path 1,10,1000  # CPU per Produce request in-process, off vs on
    python bench/metrics_cost.py --summarize .cache/bench-results/metrics-cost-*.jsonl
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import capacity  # noqa: E402

METRICS = ("produce_msgs", "consume_msgs", "produce_broker_cpu_us_per_msg", "consume_broker_cpu_us_per_msg")


def _median(values: list[float]) -> float | None:
    values = [v for v in values if v is not None]
    return statistics.median(values) if values else None


def summarize(results: list[dict]) -> list[dict]:
    rows = []
    keys = sorted({(r["size"], r["partitions"]) for r in results})
    for size, partitions in keys:
        runs = [r for r in results if (r["size"], r["partitions"]) == (size, partitions)]
        row: dict = {"size": size, "partitions": partitions,
                     "verified": all(r.get("verified") for r in runs), "runs": len(runs)}
        for metric in METRICS:
            off = {r["repeat"]: r.get(metric) for r in runs if not r.get("http")}
            on = {r["repeat"]: r.get(metric) for r in runs if r.get("http")}
            row[f"{metric}_off"] = _median(list(off.values()))
            row[f"{metric}_on"] = _median(list(on.values()))
            ratios = [on[k] / off[k] - 1 for k in off if k in on and on[k] and off[k]]
            row[f"{metric}_cost"] = _median(ratios)
            row[f"{metric}_cost_range"] = (min(ratios), max(ratios)) if ratios else None
            # The least disturbed run of each (most msg/s, least CPU): on a shared machine
            # other load only ever makes a run worse.
            pick = max if metric.endswith("_msgs") else min
            best_off = pick([v for v in off.values() if v], default=None)
            best_on = pick([v for v in on.values() if v], default=None)
            row[f"{metric}_best_off"], row[f"{metric}_best_on"] = best_off, best_on
            row[f"{metric}_best_cost"] = best_on / best_off - 1 if best_off and best_on else None
        row["scrapes"] = sum(r.get("scrapes") or 0 for r in runs if r.get("http"))
        row["scrape_failures"] = sum(r.get("scrape_failures") or 0 for r in runs if r.get("http"))
        row["scrape_ms_median"] = _median([r.get("scrape_ms_median") for r in runs if r.get("http")])
        rows.append(row)
    return rows


def _pct(value: float | None) -> str:
    return "-" if value is None else f"{value * 100:+.1f} %"


def print_table(rows: list[dict]) -> None:
    print("\n| message | partitions | produce msg/s off → on (cost) | consume msg/s off → on (cost) "
          "| broker µs/msg produce off → on (cost) | consume off → on (cost) | scrapes (median ms) | verified |")
    print("|---|---|---|---|---|---|---|---|")
    for r in rows:
        def pair(metric: str, digits: int, throughput: bool) -> str:
            off, on = r[f"{metric}_off"], r[f"{metric}_on"]
            cost = r[f"{metric}_cost"]
            if throughput and cost is not None:
                cost = -cost  # slower = a positive cost
            fmt = (lambda v: "-" if v is None else f"{v:,.{digits}f}")
            return f"{fmt(off)} → {fmt(on)} ({_pct(cost)})"

        print(f"| {r['size']} B | {r['partitions']} | {pair('produce_msgs', 0, True)} | {pair('consume_msgs', 0, True)} "
              f"| {pair('produce_broker_cpu_us_per_msg', 3, False)} | {pair('consume_broker_cpu_us_per_msg', 3, False)} "
              f"| {r['scrapes']} ({r['scrape_ms_median'] or 0:.1f}) | {r['verified']} |")


def print_best(rows: list[dict]) -> None:
    print("\nBest run of each side (most msg/s, least broker CPU):")
    print("| message | partitions | produce msg/s off → on | consume msg/s off → on | broker µs/msg produce off → on "
          "| consume off → on |")
    print("|---|---|---|---|---|---|")
    for r in rows:
        def pair(metric: str, digits: int, throughput: bool) -> str:
            off, on, cost = r[f"{metric}_best_off"], r[f"{metric}_best_on"], r[f"{metric}_best_cost"]
            if throughput and cost is not None:
                cost = -cost
            fmt = (lambda v: "-" if v is None else f"{v:,.{digits}f}")
            return f"{fmt(off)} → {fmt(on)} ({_pct(cost)})"

        print(f"| {r['size']} B | {r['partitions']} | {pair('produce_msgs', 0, True)} | {pair('consume_msgs', 0, True)} "
              f"| {pair('produce_broker_cpu_us_per_msg', 3, False)} "
              f"| {pair('consume_broker_cpu_us_per_msg', 3, False)} |")


def scrape_cost(partitions: int, seconds: float = 5.0) -> dict:
    """Broker CPU per /metrics scrape, with `partitions` partitions (the text grows with
    them): the idle broker's CPU over `seconds`, then over `seconds` of back-to-back
    scrapes; the difference per scrape. Measured by the broker's own CPU time, so other
    load on the machine hardly moves it."""
    import urllib.request

    from brokers import free_port, proc_cpu_s, start_broker

    http_port = free_port()
    broker = start_broker("trafka", settings={"http.listeners": f"127.0.0.1:{http_port}"}, data_dir=None)
    try:
        admin = capacity.RawClient(broker.bootstrap)
        try:
            admin.create_topic("scraped", partitions)
            admin.wait_topic("scraped", partitions, timeout_s=60)
        finally:
            admin.close()
        url = f"http://127.0.0.1:{http_port}/metrics"
        size = len(urllib.request.urlopen(url, timeout=30).read())
        time.sleep(1.0)
        cpu, t = proc_cpu_s(broker.pid), time.monotonic()
        time.sleep(seconds)
        idle_rate = (proc_cpu_s(broker.pid) - cpu) / (time.monotonic() - t)
        cpu, t, n = proc_cpu_s(broker.pid), time.monotonic(), 0
        while time.monotonic() - t < seconds:
            urllib.request.urlopen(url, timeout=30).read()
            n += 1
        used = proc_cpu_s(broker.pid) - cpu - idle_rate * (time.monotonic() - t)
    finally:
        broker.stop()
    per_scrape_ms = used / n * 1000
    return {"partitions": partitions, "bytes": size, "scrapes": n, "broker_cpu_ms_per_scrape": per_scrape_ms,
            "core_share_at_1_per_s": per_scrape_ms / 1000}


def request_path_cost(per_request: int, size: int = 100, requests: int = 2000, blocks: int = 30) -> dict:
    """CPU per Produce request through the network layer's own dispatch (Server._dispatch:
    the handler, the quota and metrics hooks, the response encode), in-process against a
    log on tmpfs, with broker.metrics off and on in alternating blocks of `requests`. The
    process's CPU time, so other load on the machine moves it far less than capacity.py's
    msg/s; small requests are where a per-request cost shows most."""
    import shutil
    import tempfile

    import trio

    from server.broker import Broker
    from server.config import load_config
    from server.handlers import HANDLERS
    from server.http.metrics import RequestMetrics
    from server.network import Server
    from server.session import Session
    from wire import ApiKey, Connection, encode_request
    from wire.records import Record, build_batch

    async def run() -> dict:
        data_dir = tempfile.mkdtemp(dir="/dev/shm" if os.path.isdir("/dev/shm") else None)
        broker = Broker(load_config(overrides={"log.dirs": data_dir, "log.segment.bytes": str(1 << 30)}, environ={}))
        broker.open()
        broker.create_topic("t", 1)
        batch = bytes(build_batch([Record(i, 1_700_000_000_000, None, b"x" * size) for i in range(per_request)]))
        frame = encode_request(ApiKey.PRODUCE, 9, 1, {
            "transactional_id": None, "acks": 1, "timeout_ms": 1000,
            "topic_data": [{"name": "t", "partition_data": [{"index": 0, "records": batch}]}]})
        server = Server(broker)
        session = Session("127.0.0.1", 1)
        handler = HANDLERS[ApiKey.PRODUCE]
        conn = Connection(200 << 20)
        metrics = RequestMetrics()
        times: dict[bool, list[float]] = {False: [], True: []}
        for block in range(2 * blocks + 2):
            on = block % 4 in (1, 2)  # off, on, on, off, ...: a drift (the log growing) falls on both
            broker.metrics = metrics if on else None
            t0 = time.process_time()
            for _ in range(requests):
                conn.receive_data(frame)
                await server._dispatch(conn, conn.next_request(), handler, session)
            if block >= 2:  # the first pair warms up
                times[on].append((time.process_time() - t0) / requests * 1e6)
        broker.close()
        shutil.rmtree(data_dir, ignore_errors=True)
        ratios = [b / a - 1 for a, b in zip(times[False], times[True])]
        return {"per_request": per_request, "off_us": statistics.median(times[False]),
                "on_us": statistics.median(times[True]), "cost": statistics.median(ratios),
                "cost_min": min(ratios), "cost_max": max(ratios)}

    return trio.run(run)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--sizes", default="100,1024")
    ap.add_argument("--partitions", default="1,6")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--messages", default="", help="per-size N as in capacity.py (default 100=20M, 1024=2M)")
    ap.add_argument("--trafka-set", action="append", default=[], metavar="KEY=VALUE")
    ap.add_argument("--out", default=None)
    ap.add_argument("--log-dir", default=None)
    ap.add_argument("--request-path", metavar="RECORDS", default=None,
                    help="only measure CPU per Produce request in-process, metrics off vs on, e.g. 1,10,1000")
    ap.add_argument("--scrape-cost", metavar="PARTITIONS", default=None,
                    help="only measure broker CPU per scrape at these partition counts, e.g. 10,1000")
    ap.add_argument("--summarize", nargs="+", default=None, metavar="JSONL", help="only summarize earlier runs")
    args = ap.parse_args(argv)
    if args.request_path:
        for per_request in [int(n) for n in args.request_path.split(",")]:
            r = request_path_cost(per_request)
            print(f"Produce of {per_request} x 100 B through Server._dispatch: {r['off_us']:.1f} µs off, "
                  f"{r['on_us']:.1f} µs on: {r['cost'] * 100:+.2f} % (blocks {r['cost_min'] * 100:+.1f}.."
                  f"{r['cost_max'] * 100:+.1f} %)", flush=True)
        return 0
    if args.scrape_cost:
        for partitions in [int(p) for p in args.scrape_cost.split(",")]:
            r = scrape_cost(partitions)
            print(f"{partitions} partitions: /metrics {r['bytes']:,} B, broker CPU {r['broker_cpu_ms_per_scrape']:.2f} ms "
                  f"per scrape ({r['scrapes']} scrapes): {r['core_share_at_1_per_s'] * 100:.2f} % of a core at one "
                  f"scrape per second", flush=True)
        return 0
    if args.summarize:
        rows = summarize([json.loads(line) for path in args.summarize for line in open(path) if line.strip()])
        print_table(rows)
        print_best(rows)
        return 0
    # capacity.py's own defaults for everything else a run needs
    run_args = argparse.Namespace(trafka_set=args.trafka_set, log_dir=args.log_dir, run_timeout=180.0, inflight=5,
                                  max_wait_ms=500, fetch_max_bytes=52_428_800, partition_max_bytes=1_048_576,
                                  http=False)
    messages = dict(capacity.DEFAULT_MESSAGES)
    messages.update(capacity.parse_messages(args.messages))
    out_path = args.out or os.path.join(capacity.REPO, ".cache", "bench-results",
                                        time.strftime("metrics-cost-%Y%m%d-%H%M%S.jsonl"))
    os.makedirs(os.path.dirname(os.path.abspath(out_path)), exist_ok=True)
    results = []
    with open(out_path, "a") as sink:
        for size in [int(s) for s in args.sizes.split(",")]:
            templates = capacity.build_templates(size, 64, 10_000, 1_000_000)
            for partitions in [int(p) for p in args.partitions.split(",")]:
                requests = capacity.build_requests(templates, partitions, "per-partition", 1)
                per_req = requests[0].records
                n_requests = -(-messages.get(size, 1_000_000_000 // size) // per_req)
                n_requests = -(-n_requests // partitions) * partitions
                expected = n_requests * per_req
                label = {"mode": "metrics-cost", "size": size, "partitions": partitions, "acks": 1,
                         "messages": expected, "requests": n_requests}
                for rep in range(args.repeats):
                    for http in ((False, True) if rep % 2 == 0 else (True, False)):
                        run_args.http = http
                        r = capacity.run_one("trafka", {**label, "repeat": rep}, requests, n_requests, expected,
                                             run_args)
                        r["http"] = http
                        results.append(r)
                        sink.write(json.dumps(r) + "\n")
                        sink.flush()
                        print(f"{size} B P{partitions} rep {rep + 1} metrics {'on ' if http else 'off'}: produce "
                              f"{r.get('produce_msgs') or 0:,.0f} msg/s ({r.get('produce_broker_cpu_us_per_msg') or 0:.3f}"
                              f" µs/msg), consume {r.get('consume_msgs') or 0:,.0f} msg/s "
                              f"({r.get('consume_broker_cpu_us_per_msg') or 0:.3f} µs/msg)"
                              + (f", {r.get('scrapes')} scrapes" if http else "")
                              + ("" if r.get("verified") else f" NOT VERIFIED {r.get('errors')}"), flush=True)
    rows = summarize(results)
    print_table(rows)
    print_best(rows)
    print(f"\nresults in {out_path}")
    return 0 if all(r.get("verified") for r in results) else 1


if __name__ == "__main__":
    sys.exit(main())
