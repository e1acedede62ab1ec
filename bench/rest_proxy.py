"""REST Proxy produce throughput against the native protocol, same broker, same run.

Why: the REST Proxy (rest_proxy/) is a Kafka client living in the broker's process,
so every record produced over HTTP costs JSON + base64 decoding, a librdkafka producer
call and its delivery report on top of what the broker does for a native client. This
measures how much, on one fresh broker:

- "native": confluent-kafka's Producer straight to the broker (linger 5 ms, acks=all as the
  proxy's producer), `--records` values of `--size` bytes;
- "rest-v2": httpx POST /topics/{t} with application/vnd.kafka.binary.v2+json, `--batch`
  records per request, `--connections` clients in parallel threads;
- "rest-v3": POST /v3/clusters/{c}/topics/{t}/records in streaming mode (`--batch` JSON
  records per request body, one answer line each).

Modes run in alternating order per repeat (A,B,C / C,B,A) so drift falls on all; each run
is verified by the topic's end offset (every acknowledged record is there). Reported:
median msg/s and MB/s, broker CPU µs per message (the proxy shares the broker's process,
so its CPU is in there), and the ratio to native.

    python bench/rest_proxy.py                       # 100 B, 60 000 records, batches of 500, 3 repeats
    python bench/rest_proxy.py --size 1024 --records 20000 --repeats 1
"""

from __future__ import annotations

import argparse
import base64
import json
import os
import statistics
import sys
import threading
import time
import uuid

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import httpx  # noqa: E402
from confluent_kafka import Producer, TopicPartition  # noqa: E402
from confluent_kafka.admin import AdminClient, OffsetSpec  # noqa: E402

from brokers import create_topic, free_port, start_broker  # noqa: E402


def end_offset(bootstrap: str, topic: str) -> int:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    tp = TopicPartition(topic, 0)
    return admin.list_offsets({tp: OffsetSpec.latest()})[tp].result(30).offset


def run_native(bootstrap: str, topic: str, records: int, size: int) -> float:
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5, "acks": "all"})
    value = os.urandom(size)
    failed = []
    start = time.perf_counter()
    for _ in range(records):
        while True:
            try:
                producer.produce(topic, value, on_delivery=lambda err, _m: err and failed.append(err))
                break
            except BufferError:
                producer.poll(0.01)
        producer.poll(0)
    assert producer.flush(60) == 0 and not failed, failed
    return time.perf_counter() - start


def run_rest(url: str, topic: str, records: int, size: int, batch: int, connections: int, v3_cluster: str | None
             ) -> float:
    """Seconds to produce `records` through the proxy; every answer checked."""
    value = base64.b64encode(os.urandom(size)).decode()
    requests = [min(batch, records - i) for i in range(0, records, batch)]
    lock = threading.Lock()
    errors: list = []
    if v3_cluster is None:
        bodies = {n: json.dumps({"records": [{"value": value}] * n}).encode() for n in set(requests)}
        path, ctype = f"/topics/{topic}", "application/vnd.kafka.binary.v2+json"
    else:
        line = json.dumps({"partition_id": 0, "value": {"type": "BINARY", "data": value}})
        bodies = {n: (line * n).encode() for n in set(requests)}
        path, ctype = f"/v3/clusters/{v3_cluster}/topics/{topic}/records", "application/json"

    def worker() -> None:
        with httpx.Client(base_url=url, timeout=60, headers={"Content-Type": ctype}) as client:
            while True:
                with lock:
                    if not requests or errors:
                        return
                    n = requests.pop()
                r = client.post(path, content=bodies[n])
                ok = r.status_code == 200
                if ok and v3_cluster is None:
                    ok = all(o["error_code"] is None for o in r.json()["offsets"]) and len(r.json()["offsets"]) == n
                elif ok:
                    lines = r.text.splitlines() if n > 1 else [r.text]
                    ok = len(lines) == n and all(json.loads(x)["error_code"] == 200 for x in lines)
                if not ok:
                    with lock:
                        errors.append(r.text[:300])

    threads = [threading.Thread(target=worker) for _ in range(connections)]
    start = time.perf_counter()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    elapsed = time.perf_counter() - start
    assert not errors, errors[0]
    return elapsed


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--records", type=int, default=60000)
    parser.add_argument("--size", type=int, default=100)
    parser.add_argument("--batch", type=int, default=500, help="records per HTTP request")
    parser.add_argument("--connections", type=int, default=4, help="parallel HTTP clients")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--modes", default="native,rest-v2,rest-v3")
    args = parser.parse_args()
    modes = args.modes.split(",")

    rest_port = free_port()
    broker = start_broker("trafka", settings={"rest.proxy.listeners": f"127.0.0.1:{rest_port}"})
    url = f"http://127.0.0.1:{rest_port}"
    results: dict[str, list[tuple[float, float]]] = {m: [] for m in modes}
    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                cluster = httpx.get(url + "/v3/clusters", timeout=5).json()["data"][0]["cluster_id"]
                break
            except (httpx.HTTPError, KeyError):
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.1)
        # a warm-up through each path (producer connections, JIT-free but caches and pools)
        warm = f"warm-{uuid.uuid4().hex[:6]}"
        create_topic(broker.bootstrap, warm, 1)
        run_native(broker.bootstrap, warm, 1000, args.size)
        run_rest(url, warm, 1000, args.size, args.batch, 1, None)
        for repeat in range(args.repeats):
            order = modes if repeat % 2 == 0 else list(reversed(modes))
            for mode in order:
                topic = f"{mode}-{repeat}-{uuid.uuid4().hex[:6]}"
                create_topic(broker.bootstrap, topic, 1)
                cpu0 = broker.cpu_s()
                if mode == "native":
                    elapsed = run_native(broker.bootstrap, topic, args.records, args.size)
                else:
                    elapsed = run_rest(url, topic, args.records, args.size, args.batch, args.connections,
                                       cluster if mode == "rest-v3" else None)
                cpu = broker.cpu_s() - cpu0
                got = end_offset(broker.bootstrap, topic)
                assert got == args.records, f"{mode}: {got} records in the log, {args.records} acknowledged"
                results[mode].append((args.records / elapsed, cpu / args.records * 1e6))
                print(f"  repeat {repeat + 1} {mode:8s} {args.records / elapsed:>12,.0f} msg/s  "
                      f"broker CPU {cpu / args.records * 1e6:6.1f} µs/msg  (verified {got})", flush=True)
    finally:
        broker.stop()

    native = statistics.median(r[0] for r in results["native"]) if results.get("native") else None
    print(f"\n{args.size} B values, {args.records} records/run, batches of {args.batch} per request, "
          f"{args.connections} HTTP connections, medians of {args.repeats}")
    print(f"{'mode':10s} {'msg/s':>12s} {'MB/s':>8s} {'broker µs/msg':>14s} {'vs native':>10s}")
    for mode in modes:
        rate = statistics.median(r[0] for r in results[mode])
        cpu = statistics.median(r[1] for r in results[mode])
        ratio = f"{rate / native:.3f}×" if native else "-"
        print(f"{mode:10s} {rate:>12,.0f} {rate * args.size / 1e6:>8.1f} {cpu:>14.1f} {ratio:>10s}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
