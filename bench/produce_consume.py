"""Client-side harness: produce N messages with confluent-kafka, consume them back, verify.

Two modes against one running broker (any Kafka-compatible one; `run_matrix.py` starts
a fresh Trafka or Tansu for each run):

- throughput (default): produce N messages of `--size` bytes as fast as librdkafka takes
  them (linger.ms=10, batch.size=1000000, batch.num.messages=10000,
  queue.buffering.max.messages=1e6, idempotence off, error-only delivery reports), then
  consume them with a fresh group from the earliest offset (session.timeout.ms=6000,
  fetch.wait.max.ms=500, queued.min.messages=1e6, queued.max.messages.kbytes=262144,
  fetch.queue.backoff.ms=10). Produce is timed from the first produce() to the end of
  flush(); consume from the first message to the last (the group join is reported apart
  as group_join_s).
- latency (`--latency`): a consumer tails the topic while a producer sends `--rate`
  msg/s with linger.ms=0 and a delivery callback per message. e2e = receive time minus
  the send time carried in the payload (one process, one monotonic clock); ack = delivery
  report time minus send time. Percentiles p50/p90/p99/p99.9/max of both.

Payload: an 8-byte sequence number (latency mode: then an 8-byte send time) followed by
a slice of a 1 MiB pool of random words (compresses 2-3x). Verification: every sequence
number is seen exactly once and the sum of the per-message CRC32C values matches the
sum computed in an untimed pass (throughput mode) or at send time (latency mode).

CPU: the broker's from /proc/PID/stat (`--broker-pid`, comma-separated for several
processes), the client's (Python thread + librdkafka threads) from os.times(), and the
host's busy share from /proc/stat, each over the timed window of a phase.

The result is printed as a short summary and, with `--json`, as one JSON line on
stdout (the last line), which is what `run_matrix.py` reads.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import struct
import sys
import threading
import time
import uuid

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import crc32c  # noqa: E402
from confluent_kafka import Consumer, KafkaError, Producer  # noqa: E402

from brokers import create_topic, host_cpu, jvm_thread_cpu_s, pids_cpu_s, self_cpu_s  # noqa: E402

POOL_SIZE = 1 << 20
_SEQ = struct.Struct(">Q")
_SEQ_TS = struct.Struct(">QQ")

WORDS = ("kafka trio broker partition offset record batch segment index fetch produce consumer group "
         "leader epoch commit append python socket stream latency throughput topic replica cluster "
         "message header value key timestamp compression checksum lz4 zstd snappy gzip page cache").split()


def make_pool(seed: int = 42) -> bytes:
    """1 MiB of random words: realistic, compressible 2-3x (not all-zero, not random bytes)."""
    rng = random.Random(seed)
    out = bytearray()
    while len(out) < POOL_SIZE:
        word = rng.choice(WORDS)
        out += word.encode() if rng.random() < 0.8 else f"{word}{rng.randint(0, 99999)}".encode()
        out += b" "
    return bytes(out[:POOL_SIZE])


class Payloads:
    """Message i's value: seq(8) + pool[off:off+size-8], the offset stepping through the pool."""

    def __init__(self, size: int, header: int = 8) -> None:
        if size < header:
            raise ValueError(f"message size must be at least {header} bytes")
        self.pool = make_pool()
        self.body = size - header
        self.span = len(self.pool) - self.body

    def body_at(self, i: int) -> bytes:
        off = (i * 7919) % self.span
        return self.pool[off:off + self.body]

    def value(self, i: int) -> bytes:
        return _SEQ.pack(i) + self.body_at(i)


def expected_crc_sum(payloads: Payloads, n: int) -> int:
    crc = crc32c.crc32c
    pack = _SEQ.pack
    body_at = payloads.body_at
    return sum(crc(pack(i) + body_at(i)) for i in range(n))


def percentiles(values: list[float]) -> dict[str, float]:
    if not values:
        return {}
    v = sorted(values)
    n = len(v)

    def at(q: float) -> float:
        return v[min(n - 1, max(0, int(round(q * n + 0.5)) - 1))]

    return {"p50": at(0.50), "p90": at(0.90), "p99": at(0.99), "p99_9": at(0.999), "max": v[-1],
            "mean": sum(v) / n}


class CpuWindow:
    """Broker, client and host CPU between `start()` and `stop()`; of the broker's, what a
    JVM broker's JIT compilers and garbage collector took (broker_jit_cpu_s, broker_gc_cpu_s)."""

    def __init__(self, broker_pids: list[int]) -> None:
        self.pids = broker_pids

    def start(self) -> None:
        self.j0 = jvm_thread_cpu_s(self.pids)
        self.t0 = time.perf_counter()
        self.b0 = pids_cpu_s(self.pids) if self.pids else float("nan")
        self.c0 = self_cpu_s()
        self.h0 = host_cpu()

    def stop(self) -> dict:
        elapsed = time.perf_counter() - self.t0
        b = pids_cpu_s(self.pids) - self.b0 if self.pids else float("nan")
        c = self_cpu_s() - self.c0
        h1 = host_cpu()
        busy, total = h1[0] - self.h0[0], h1[1] - self.h0[1]
        j1 = jvm_thread_cpu_s(self.pids)
        return {"elapsed_s": elapsed, "broker_cpu_s": b, "client_cpu_s": c,
                "host_busy_pct": 100.0 * busy / total if total else float("nan"),
                **{f"broker_{k}_cpu_s": j1[k] - self.j0[k] for k in j1}}


def producer_config(args, *, latency: bool) -> dict:
    conf = {
        "bootstrap.servers": args.bootstrap,
        "acks": args.acks,
        "compression.type": args.compression,
        "enable.idempotence": False,
        "linger.ms": 0 if latency else args.linger_ms,
        "batch.size": 1000000,
        "batch.num.messages": 10000,
        "queue.buffering.max.messages": 1000000,
        "message.max.bytes": 1000000 + 1000,
    }
    if not latency:
        conf["delivery.report.only.error"] = True
    # Other harnesses vary one setting (bench/cluster.py: enable.idempotence) through this.
    conf.update(getattr(args, "producer_overrides", None) or {})
    conf.update(getattr(args, "client_overrides", None) or {})  # both clients (bench/tls.py: security.protocol)
    return conf


def consumer_config(args, group: str) -> dict:
    return {
        "bootstrap.servers": args.bootstrap,
        "group.id": group,
        "auto.offset.reset": "earliest",
        "enable.auto.commit": False,
        "session.timeout.ms": 6000,
        "fetch.wait.max.ms": args.fetch_wait_max_ms,
        "queued.min.messages": 1000000,
        "queued.max.messages.kbytes": 262144,
        "fetch.queue.backoff.ms": 10,
        **(getattr(args, "client_overrides", None) or {}),
    }


# ---------------------------------------------------------------------------- throughput

def _produce_all(args, topic: str, payloads: Payloads, pids: list[int], errors: list[str], on_error) -> dict:
    """The timed produce phase: from the first produce() to the end of flush()."""
    n = args.messages
    producer = Producer({**producer_config(args, latency=False), "error_cb": on_error})
    pack = _SEQ.pack
    body_at = payloads.body_at
    produce = producer.produce
    poll = producer.poll
    window = CpuWindow(pids)
    window.start()
    for i in range(n):
        value = pack(i) + body_at(i)
        while True:
            try:
                produce(topic, value, on_delivery=on_error)
                break
            except BufferError:
                poll(0.005)
    remaining = producer.flush(args.timeout)
    prod = window.stop()
    if remaining:
        errors.append(f"{remaining} messages not delivered within {args.timeout} s")
    return prod


def run_throughput(args) -> dict:
    pids = [int(p) for p in args.broker_pid.split(",") if p] if args.broker_pid else []
    n, size = args.messages, args.size
    payloads = Payloads(size)
    t = time.perf_counter()
    want_crc = expected_crc_sum(payloads, n) if args.phase != "produce" else 0
    prep_s = time.perf_counter() - t

    errors: list[str] = []

    def on_error(err, msg=None):
        if err is not None:
            errors.append(str(err))

    topic = args.topic
    if args.phase == "consume":
        prod = {"elapsed_s": float("nan"), "broker_cpu_s": float("nan"), "client_cpu_s": float("nan"),
                "host_busy_pct": float("nan")}
    else:
        prod = _produce_all(args, topic, payloads, pids, errors, on_error)
    if args.phase == "produce":
        return {"mode": "throughput", "phase": "produce", "topic": topic, "messages": n, "size": size,
                "partitions": args.partitions, "acks": args.acks, "compression": args.compression,
                "produce_s": prod["elapsed_s"], "produce_msgs": n / prod["elapsed_s"],
                "produce_mbps": n * size / 1e6 / prod["elapsed_s"],
                "produce_broker_cpu_us_per_msg": prod["broker_cpu_s"] / n * 1e6,
                "produce_client_cpu_us_per_msg": prod["client_cpu_s"] / n * 1e6,
                "produce_host_busy_pct": prod["host_busy_pct"],
                "errors": errors[:10], "error_count": len(errors), "verified": not errors}

    # Consume back with a fresh group.
    consumer = Consumer({**consumer_config(args, f"bench-{uuid.uuid4().hex[:8]}"), "error_cb": on_error})
    t_sub = time.perf_counter()
    consumer.subscribe([topic])
    seen = bytearray(n)
    count = dups = bad = 0
    crc_sum = 0
    crc = crc32c.crc32c
    unpack = _SEQ.unpack_from
    first_at = last_at = None
    cwin = CpuWindow(pids)
    deadline = time.monotonic() + args.timeout
    idle_deadline = None
    while count < n and time.monotonic() < deadline:
        # consume() waits until it has num_messages or the timeout passes: never ask for
        # more than are still due, or the last call would wait out its timeout.
        msgs = consumer.consume(min(10000, n - count), 0.5)
        if not msgs:
            if first_at is not None:
                if idle_deadline is None:
                    idle_deadline = time.monotonic() + args.idle_timeout
                elif time.monotonic() > idle_deadline:
                    break
            continue
        idle_deadline = None
        if first_at is None:
            first_at = time.perf_counter()
            cwin.start()
        for m in msgs:
            if m.error() is not None:
                if m.error().code() != KafkaError._PARTITION_EOF:
                    errors.append(str(m.error()))
                continue
            v = m.value()
            seq = unpack(v)[0]
            if seq >= n:
                bad += 1
                continue
            if seen[seq]:
                dups += 1
            else:
                seen[seq] = 1
                count += 1
            crc_sum += crc(v)
        last_at = time.perf_counter()
    cons = cwin.stop() if first_at is not None else {"elapsed_s": float("nan"), "broker_cpu_s": float("nan"),
                                                     "client_cpu_s": float("nan"), "host_busy_pct": float("nan")}
    consumer.close()
    group_join_s = (first_at - t_sub) if first_at is not None else float("nan")
    consume_s = (last_at - first_at) if first_at is not None and last_at is not None else float("nan")
    missing = n - count
    verified = missing == 0 and dups == 0 and bad == 0 and crc_sum == want_crc and not errors
    mb = size / 1e6
    result = {
        "mode": "throughput", "bootstrap": args.bootstrap, "topic": topic, "messages": n, "size": size,
        "partitions": args.partitions, "acks": args.acks, "compression": args.compression,
        "prep_s": round(prep_s, 3),
        "produce_s": prod["elapsed_s"], "produce_msgs": n / prod["elapsed_s"],
        "produce_mbps": n * mb / prod["elapsed_s"],
        "produce_broker_cpu_us_per_msg": prod["broker_cpu_s"] / n * 1e6,
        "produce_client_cpu_us_per_msg": prod["client_cpu_s"] / n * 1e6,
        "produce_host_busy_pct": prod["host_busy_pct"],
        "group_join_s": group_join_s,
        "consume_s": consume_s,
        "consume_msgs": count / consume_s if consume_s and consume_s == consume_s else float("nan"),
        "consume_mbps": count * mb / consume_s if consume_s and consume_s == consume_s else float("nan"),
        "consume_broker_cpu_us_per_msg": cons["broker_cpu_s"] / max(count, 1) * 1e6,
        "consume_client_cpu_us_per_msg": cons["client_cpu_s"] / max(count, 1) * 1e6,
        "consume_host_busy_pct": cons["host_busy_pct"],
        "received": count, "missing": missing, "duplicates": dups, "foreign": bad,
        "crc_ok": crc_sum == want_crc, "errors": errors[:10], "error_count": len(errors),
        "verified": verified,
    }
    return result


# ---------------------------------------------------------------------------- latency

def run_latency(args) -> dict:
    pids = [int(p) for p in args.broker_pid.split(",") if p] if args.broker_pid else []
    n, size, rate = args.messages, args.size, args.rate
    # Warm-up: the first `warmup` messages go out at the same rate but stay out of the
    # percentiles and the CPU window (a JIT-compiled broker, Kafka, compiles its hot paths
    # in its first seconds); they are verified like the rest.
    warmup = int(rate * (getattr(args, "warmup_s", 0) or 0))
    total = n + warmup
    payloads = Payloads(size, header=16)
    topic = args.topic
    errors: list[str] = []

    def on_error(err, msg=None):
        if err is not None:
            errors.append(str(err))

    # The consumer joins first and is fetching at the log end before the first send.
    consumer = Consumer({**consumer_config(args, f"bench-lat-{uuid.uuid4().hex[:8]}"), "error_cb": on_error})
    assigned = threading.Event()
    stop = threading.Event()
    e2e_ns: list[int] = []
    recv_crc = [0]
    seen = bytearray(total)
    got = [0]
    dups = [0]

    def on_assign(c, parts):
        assigned.set()

    def consume_loop():
        unpack = _SEQ_TS.unpack_from
        crc = crc32c.crc32c
        now = time.monotonic_ns
        while not stop.is_set():
            # poll(), not consume(n): consume waits for n messages or its whole timeout.
            m = consumer.poll(0.1)
            if m is None:
                continue
            t_recv = now()
            if m.error() is not None:
                if m.error().code() != KafkaError._PARTITION_EOF:
                    errors.append(str(m.error()))
                continue
            v = m.value()
            if len(v) < 16:  # the producer's warm-up message
                continue
            seq, sent = unpack(v)
            if seq < total:
                if seen[seq]:
                    dups[0] += 1
                else:
                    seen[seq] = 1
                    got[0] += 1
                    if seq >= warmup:
                        e2e_ns.append(t_recv - sent)
                recv_crc[0] += crc(v)

    consumer.subscribe([topic], on_assign=on_assign)
    t_sub = time.perf_counter()
    reader = threading.Thread(target=consume_loop, daemon=True)
    reader.start()
    if not assigned.wait(args.timeout):
        stop.set()
        reader.join(5)
        consumer.close()
        return {"mode": "latency", "verified": False, "errors": ["no partition assignment"], "error_count": 1}
    group_join_s = time.perf_counter() - t_sub
    time.sleep(args.settle_s)  # let the first fetch reach the log end

    ack_ns: list[int] = []
    sent_crc = 0
    producer = Producer({**producer_config(args, latency=True), "error_cb": on_error})
    # Warm the producer's connection and metadata outside the measurement.
    producer.produce(topic, b"warmup", on_delivery=on_error)
    producer.flush(10)

    def delivered(err, msg, t_send, measured):
        if err is not None:
            errors.append(str(err))
        elif measured:
            ack_ns.append(time.monotonic_ns() - t_send)

    interval_ns = int(1e9 / rate)
    window = CpuWindow(pids)
    start_ns = time.monotonic_ns()
    measured_ns = start_ns
    late = 0
    body_at = payloads.body_at
    crc = crc32c.crc32c
    for i in range(total):
        if i == warmup:
            window.start()
            measured_ns = time.monotonic_ns()
        due = start_ns + i * interval_ns
        while True:
            now = time.monotonic_ns()
            if now >= due:
                break
            # poll's timeout is whole milliseconds: a shorter one is 0 and the loop would
            # spin a core (which the brokers on this 2-core machine then lack). Under 1 ms
            # left: sleep.
            if due - now >= 1_000_000:
                producer.poll(0.001)
            else:
                time.sleep((due - now) / 1e9)
        if now - due > 1_000_000 and i >= warmup:
            late += 1
        t_send = time.monotonic_ns()
        value = _SEQ_TS.pack(i, t_send) + body_at(i)
        sent_crc += crc(value)
        producer.produce(topic, value,
                         on_delivery=lambda err, msg, t=t_send, m=i >= warmup: delivered(err, msg, t, m))
        producer.poll(0)
    send_s = (time.monotonic_ns() - measured_ns) / 1e9
    producer.flush(args.timeout)
    deadline = time.monotonic() + args.idle_timeout
    while got[0] < total and time.monotonic() < deadline:
        time.sleep(0.01)
    cpu = window.stop()
    stop.set()
    reader.join(5)
    consumer.close()
    received = got[0]
    verified = received == total and dups[0] == 0 and recv_crc[0] == sent_crc and not errors
    e2e = percentiles([x / 1e6 for x in e2e_ns])
    ack = percentiles([x / 1e6 for x in ack_ns])
    return {
        "mode": "latency", "bootstrap": args.bootstrap, "topic": topic, "messages": n, "size": size,
        "partitions": args.partitions, "acks": args.acks, "compression": args.compression, "rate": rate,
        "warmup_messages": warmup,
        "achieved_rate": n / send_s if send_s else float("nan"), "late_sends": late,
        "group_join_s": group_join_s, "fetch_wait_max_ms": args.fetch_wait_max_ms,
        **{f"e2e_{k}_ms": v for k, v in e2e.items()}, **{f"ack_{k}_ms": v for k, v in ack.items()},
        "broker_cpu_s": cpu["broker_cpu_s"], "elapsed_s": cpu["elapsed_s"],
        "broker_cpu_us_per_msg": cpu["broker_cpu_s"] / n * 1e6 if n else float("nan"),
        "broker_jit_cpu_pct": 100 * cpu["broker_jit_cpu_s"] / cpu["elapsed_s"],
        "broker_gc_cpu_pct": 100 * cpu["broker_gc_cpu_s"] / cpu["elapsed_s"],
        "broker_cpu_pct": 100 * cpu["broker_cpu_s"] / cpu["elapsed_s"],
        "client_cpu_pct": 100 * cpu["client_cpu_s"] / cpu["elapsed_s"],
        "host_busy_pct": cpu["host_busy_pct"],
        "received": received, "missing": total - received, "duplicates": dups[0],
        "crc_ok": recv_crc[0] == sent_crc, "errors": errors[:10], "error_count": len(errors),
        "verified": verified,
    }


# ---------------------------------------------------------------------------- CLI

def build_parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--bootstrap", required=True, help="HOST:PORT of the broker")
    ap.add_argument("--topic", default=None, help="topic (default: a fresh bench-<random> name)")
    ap.add_argument("--no-create", action="store_true", help="do not create the topic first (it exists or is auto-created)")
    ap.add_argument("--messages", type=int, default=1_000_000)
    ap.add_argument("--size", type=int, default=100, help="message value size in bytes (>= 8, >= 16 with --latency)")
    ap.add_argument("--partitions", type=int, default=1)
    ap.add_argument("--acks", default="1", help="0, 1 or all")
    ap.add_argument("--compression", default="none", help="none, lz4, zstd, snappy, gzip")
    ap.add_argument("--linger-ms", type=int, default=10)
    ap.add_argument("--fetch-wait-max-ms", type=int, default=500)
    ap.add_argument("--latency", action="store_true", help="latency mode (see module doc)")
    ap.add_argument("--phase", choices=["both", "produce", "consume"], default="both",
                    help="throughput mode: one phase only (consume: --topic of an earlier produce, --no-create)")
    ap.add_argument("--rate", type=int, default=1000, help="latency mode: messages per second")
    ap.add_argument("--settle-s", type=float, default=1.0, help="latency mode: pause after assignment")
    ap.add_argument("--warmup-s", type=float, default=0.0,
                    help="latency mode: send at --rate this long first, outside the percentiles and CPU figures")
    ap.add_argument("--broker-pid", default="", help="PID(s) of the broker, comma-separated, for CPU figures")
    ap.add_argument("--timeout", type=float, default=180.0, help="bound on each phase, seconds")
    ap.add_argument("--idle-timeout", type=float, default=15.0, help="give up after this long without a message")
    ap.add_argument("--json", action="store_true", help="print the result as one JSON line last")
    return ap


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    if args.topic is None:
        args.topic = f"bench-{uuid.uuid4().hex[:10]}"
    if not args.no_create:
        create_topic(args.bootstrap, args.topic, args.partitions)
    result = run_latency(args) if args.latency else run_throughput(args)
    print_summary(result, file=sys.stderr if args.json else sys.stdout)
    if args.json:
        print(json.dumps(result), flush=True)
    return 0 if result.get("verified") else 1


def print_summary(r: dict, file=sys.stdout) -> None:
    if r.get("phase") == "produce":
        print(f"{r['size']} B x {r['messages']:,} P={r['partitions']} acks={r['acks']} comp={r['compression']}: "
              f"produce {r['produce_msgs']:,.0f} msg/s {r['produce_mbps']:.1f} MB/s "
              f"(broker {r['produce_broker_cpu_us_per_msg']:.2f} us/msg, client {r['produce_client_cpu_us_per_msg']:.2f}) "
              f"topic {r['topic']}; verified={r['verified']}", file=file)
    elif r.get("mode") == "throughput":
        print(f"{r['size']} B x {r['messages']:,} P={r['partitions']} acks={r['acks']} comp={r['compression']}: "
              f"produce {r['produce_msgs']:,.0f} msg/s {r['produce_mbps']:.1f} MB/s "
              f"(broker {r['produce_broker_cpu_us_per_msg']:.2f} us/msg, client {r['produce_client_cpu_us_per_msg']:.2f}); "
              f"consume {r['consume_msgs']:,.0f} msg/s {r['consume_mbps']:.1f} MB/s "
              f"(broker {r['consume_broker_cpu_us_per_msg']:.2f} us/msg, client {r['consume_client_cpu_us_per_msg']:.2f}); "
              f"join {r['group_join_s']:.1f} s; verified={r['verified']}"
              + (f" missing={r['missing']} dups={r['duplicates']} crc_ok={r['crc_ok']} errors={r['errors'][:3]}"
                 if not r["verified"] else ""), file=file)
    elif r.get("mode") == "latency" and "e2e_p50_ms" in r:
        print(f"latency {r['rate']} msg/s x {r['messages']:,} {r['size']} B acks={r['acks']}: "
              f"e2e p50 {r['e2e_p50_ms']:.2f} p90 {r['e2e_p90_ms']:.2f} p99 {r['e2e_p99_ms']:.2f} "
              f"p99.9 {r['e2e_p99_9_ms']:.2f} max {r['e2e_max_ms']:.2f} ms; ack p50 {r['ack_p50_ms']:.2f} "
              f"p99 {r['ack_p99_ms']:.2f} ms; broker CPU {r['broker_cpu_pct']:.0f}%; verified={r['verified']}"
              + (f" missing={r['missing']} errors={r['errors'][:3]}" if not r["verified"] else ""), file=file)
    else:
        print(json.dumps(r), file=file)


if __name__ == "__main__":
    sys.exit(main())
