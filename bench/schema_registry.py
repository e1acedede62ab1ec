"""Schema Registry lookups per second (cached) and registrations per second.

Why: a serializer asks the registry for a schema id once and then works from its own
cache, so what matters per record is the client's cache; what the registry itself must
sustain is the cold lookups of many clients starting (GET /schemas/ids/{id}), consumers
resolving the newest version (GET /subjects/{s}/versions/latest) and registrations (each
one a record written to `_schemas` and read back before it is answered). On one fresh
broker with `--schemas` registered AVRO schemas (one subject each), this measures:

- "register": POST /subjects/{s}/versions, one keep-alive httpx client, one after another
  (the registry orders writes through `_schemas`, so writes in parallel buy little);
- "GET /schemas/ids/{id}" and "GET .../versions/latest": `--workers` threads, each with its
  own keep-alive httpx client, random ids / subjects, for `--seconds`; every answer
  checked (status and the schema it carries);
- "client cache": confluent-kafka's SchemaRegistryClient.get_schema(id) once warm — what an
  AvroSerializer / AvroDeserializer pays per record — and its first (uncached) lookups.

Reported: median requests/s of `--repeats`, broker CPU µs per request (the registry runs
in the broker's process) and p50/p99 latency of the HTTP lookups. The client runs on the
same cores as the broker, so HTTP figures are a floor, not the registry's ceiling.

    python bench/schema_registry.py                       # 1 000 schemas, 4 workers, 5 s per mode, 3 repeats
    python bench/schema_registry.py --schemas 200 --seconds 2 --repeats 1
    python bench/schema_registry.py --broker trafka@/tmp/before     # a `git archive` of another commit
"""

from __future__ import annotations

import argparse
import json
import os
import random
import statistics
import sys
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import httpx  # noqa: E402
from confluent_kafka.schema_registry import SchemaRegistryClient  # noqa: E402

from brokers import free_port, start_broker  # noqa: E402

CT = "application/vnd.schemaregistry.v1+json"


def avro(i: int) -> str:
    """A distinct record schema per subject (a few fields, as real value schemas have)."""
    return json.dumps({"type": "record", "name": f"Event{i}", "namespace": "bench.registry", "fields": [
        {"name": "id", "type": "long"}, {"name": "name", "type": "string"},
        {"name": "amount", "type": ["null", "double"], "default": None},
        {"name": f"field_{i}", "type": "int", "default": i}]})


def wait_ready(url: str, timeout_s: float = 30.0) -> None:
    deadline = time.monotonic() + timeout_s
    while True:
        try:
            httpx.get(url + "/subjects", timeout=5).raise_for_status()
            return
        except httpx.HTTPError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.1)


def register_all(url: str, schemas: int, first: int = 0) -> tuple[float, dict[int, dict], dict[str, int]]:
    """Seconds to register `schemas` subjects; id -> schema document and subject -> id."""
    by_id, by_subject = {}, {}
    with httpx.Client(base_url=url, headers={"Content-Type": CT}, timeout=30) as http:
        start = time.perf_counter()
        for i in range(first, first + schemas):
            text = avro(i)
            r = http.post(f"/subjects/bench-{i}-value/versions", json={"schema": text})
            assert r.status_code == 200, r.text
            by_id[r.json()["id"]] = json.loads(text)  # the registry answers it compacted
            by_subject[f"bench-{i}-value"] = r.json()["id"]
        elapsed = time.perf_counter() - start
    return elapsed, by_id, by_subject


def http_lookups(url: str, workers: int, seconds: float, make_request) -> tuple[int, float, list[float]]:
    """`workers` threads asking `make_request(http, rng)` (which checks its answer) for
    `seconds`: (requests, elapsed, latencies in seconds)."""
    counts, latencies, failures = [0] * workers, [[] for _ in range(workers)], []
    go, stop_at = threading.Event(), [0.0]

    def worker(n: int) -> None:
        rng = random.Random(n)
        try:
            with httpx.Client(base_url=url, timeout=30) as http:
                make_request(http, rng)  # connect before the clock starts
                go.wait()
                while time.perf_counter() < stop_at[0]:
                    t0 = time.perf_counter()
                    make_request(http, rng)
                    latencies[n].append(time.perf_counter() - t0)
                    counts[n] += 1
        except Exception as exc:  # reported below: a bench that hides failures measures nothing
            failures.append(repr(exc))

    threads = [threading.Thread(target=worker, args=(n,)) for n in range(workers)]
    for t in threads:
        t.start()
    time.sleep(0.2)
    start = time.perf_counter()
    stop_at[0] = start + seconds
    go.set()
    for t in threads:
        t.join()
    elapsed = time.perf_counter() - start
    assert not failures, failures[:3]
    return sum(counts), elapsed, [x for per in latencies for x in per]


def client_cache(url: str, ids: list[int], lookups: int) -> tuple[float, float]:
    """(first lookups/s, cached lookups/s) of confluent-kafka's SchemaRegistryClient."""
    client = SchemaRegistryClient({"url": url})
    start = time.perf_counter()
    for schema_id in ids:
        client.get_schema(schema_id)
    cold = len(ids) / (time.perf_counter() - start)
    rng = random.Random(7)
    picks = [rng.choice(ids) for _ in range(lookups)]
    start = time.perf_counter()
    for schema_id in picks:
        client.get_schema(schema_id)
    warm = lookups / (time.perf_counter() - start)
    return cold, warm


def pct(values: list[float], q: float) -> float:
    values = sorted(values)
    return values[min(len(values) - 1, int(q * len(values)))] * 1000 if values else float("nan")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--schemas", type=int, default=1000)
    parser.add_argument("--workers", type=int, default=4, help="HTTP lookup threads, a keep-alive client each")
    parser.add_argument("--seconds", type=float, default=5.0, help="per HTTP lookup mode and repeat")
    parser.add_argument("--cached-lookups", type=int, default=200_000)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--broker", default="trafka", help="trafka, or trafka@DIR: another checkout (before/after)")
    args = parser.parse_args()

    port = free_port()
    broker = start_broker(args.broker, settings={"schema.registry.listeners": f"127.0.0.1:{port}"})
    url = f"http://127.0.0.1:{port}"
    rows: dict[str, list[tuple[float, float, float, float]]] = {}

    def add(mode: str, rate: float, cpu_us: float, p50: float = float("nan"), p99: float = float("nan")) -> None:
        rows.setdefault(mode, []).append((rate, cpu_us, p50, p99))

    try:
        wait_ready(url)
        cpu0 = broker.cpu_s()
        elapsed, by_id, by_subject = register_all(url, args.schemas)
        add("register (POST versions)", args.schemas / elapsed, (broker.cpu_s() - cpu0) / args.schemas * 1e6)
        print(f"registered {args.schemas} schemas in {elapsed:.1f} s", flush=True)
        ids, subjects = sorted(by_id), sorted(by_subject)

        def by_id_request(http: httpx.Client, rng: random.Random) -> None:
            schema_id = rng.choice(ids)
            r = http.get(f"/schemas/ids/{schema_id}")
            assert r.status_code == 200 and json.loads(r.json()["schema"]) == by_id[schema_id], r.text[:200]

        def latest_request(http: httpx.Client, rng: random.Random) -> None:
            subject = rng.choice(subjects)
            r = http.get(f"/subjects/{subject}/versions/latest")
            assert r.status_code == 200 and r.json()["id"] == by_subject[subject], r.text[:200]

        modes = [("GET /schemas/ids/{id}", by_id_request), ("GET /subjects/{s}/versions/latest", latest_request)]
        for repeat in range(args.repeats):
            for name, request in (modes if repeat % 2 == 0 else list(reversed(modes))):
                cpu0 = broker.cpu_s()
                count, elapsed, lat = http_lookups(url, args.workers, args.seconds, request)
                cpu = broker.cpu_s() - cpu0
                add(name, count / elapsed, cpu / count * 1e6, pct(lat, 0.5), pct(lat, 0.99))
                print(f"  repeat {repeat + 1} {name:36s} {count / elapsed:>10,.0f} req/s  "
                      f"broker CPU {cpu / count * 1e6:6.1f} µs/req  p99 {pct(lat, 0.99):.2f} ms", flush=True)
            cpu0 = broker.cpu_s()
            cold, warm = client_cache(url, ids, args.cached_lookups)
            add("client: first get_schema(id)", cold, (broker.cpu_s() - cpu0) / len(ids) * 1e6)
            add("client: cached get_schema(id)", warm, 0.0)
            print(f"  repeat {repeat + 1} SchemaRegistryClient: first {cold:,.0f}/s, cached {warm:,.0f}/s", flush=True)
        if args.repeats > 1:  # registrations once more, on a registry already holding the first ones
            cpu0 = broker.cpu_s()
            elapsed, _i, _s = register_all(url, args.schemas // 4, first=args.schemas)
            add("register (POST versions)", args.schemas // 4 / elapsed,
                (broker.cpu_s() - cpu0) / (args.schemas // 4) * 1e6)
    finally:
        broker.stop()

    print(f"\n{args.schemas} AVRO schemas (one subject each), {args.workers} HTTP workers (keep-alive httpx), "
          f"{args.seconds:g} s per mode, medians of {args.repeats}; client and broker share the machine")
    print(f"{'mode':38s} {'per s':>12s} {'broker µs/req':>14s} {'p50 ms':>8s} {'p99 ms':>8s}")
    for mode, values in rows.items():
        rate = statistics.median(v[0] for v in values)
        cpu = statistics.median(v[1] for v in values)
        p50 = statistics.median(v[2] for v in values)
        p99 = statistics.median(v[3] for v in values)
        cells = [f"{p50:>8.2f}" if p50 == p50 else f"{'-':>8s}", f"{p99:>8.2f}" if p99 == p99 else f"{'-':>8s}"]
        print(f"{mode:38s} {rate:>12,.0f} {cpu:>14.1f} {' '.join(cells)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
