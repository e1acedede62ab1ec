"""Broker capacity: Trafka vs Tansu driven by a client that costs next to nothing per message.

Why this exists: `run_matrix.py` drives each broker with the stock client
(confluent-kafka/librdkafka through `produce_consume.py`). At 100 B that client spends
~1.5 µs per message while the brokers spend 0.16 (Trafka) and 0.25 (Tansu) µs, so both
brokers run at the client's speed and msg/s says little about them. This script is the
complement: the same load shape librdkafka puts on the wire, but every byte is built
before the clock starts, so the broker is the bottleneck and msg/s measures the broker.

What one run does (a fresh broker per configuration, repeat and target; Trafka on disk
with its default fsync policy "never" as in run_matrix.py, Tansu with memory://):

- Prep, untimed and shared by all runs of a message size: K (`--templates`, 64) distinct
  uncompressed magic-2 record batches. Each holds min(`--batch-records`,
  what fits in `--batch-bytes`) records — librdkafka's batch.num.messages and batch.size
  as produce_consume.py sets them — of `size`-byte values: the template and record index
  in the first 16 bytes, then words from produce_consume's 1 MiB pool. Each template's
  CRC32C (header bytes 17:21) and record count are kept for verification.
- Produce, timed: one connection, up to `--inflight` Produce v9 requests pipelined,
  partitions taken round-robin, until every request is acknowledged. Request shape: ONE
  partition's batch per ProduceRequest, which is what librdkafka 2.x sends (it has never
  merged partitions into one request: confluentinc/librdkafka#1700 is still open, and its
  message.max.bytes of 1 MB would not fit six 1 MB batches anyway);
  `--request-shape all-partitions` sends one batch per partition per request (the Java
  client's shape) instead. Requests go out with sendmsg() from the prebuilt buffers:
  only a ~40-byte header is patched per request, the batches are never copied in user
  space, from a non-blocking socket (the loop, `produce_phase`, also drives one connection
  per broker for brokers_per_host.py). Any non-zero error code in a response marks the run
  unverified.
- Consume, timed: one connection, Fetch v12 for all partitions, ONE fetch outstanding
  (librdkafka's per-broker behaviour), its defaults max_wait_ms 500, max_bytes 50 MiB,
  partition_max_bytes 1 MiB, from offset 0 until all N records have arrived. Records are
  not decoded; batch headers are walked. Stopping is on the record count, not the high
  watermark (Tansu 0.6 memory:// reports a wrong one).
- Verified only if: every response error code is 0; every fetched batch's CRC32C
  (bytes 21..end) matches its header; per partition, base offsets run contiguously from
  0 (no gap, no overlap, lastOffsetDelta = count - 1); the multiset of
  (partition, CRC, record count) fetched equals the one produced; exactly N records.
  partitionLeaderEpoch and baseOffset lie outside the CRC, so a broker may rewrite them.

Reported per phase: msg/s, MB/s (value bytes / 1e6), broker CPU µs/msg (/proc of the
broker PID over the window), client CPU µs/msg (this process), host busy %. Targets
alternate order between repeats (A,B then B,A). Each run is appended as a JSON line to
`--out` (default .cache/bench-results/capacity-<time>.jsonl); a table of medians, spreads,
ratios and verified counts is printed at the end.

    python bench/capacity.py                          # 100 B and 1 KiB x 1 and 6 partitions, 3 repeats: ~4 min
    python bench/capacity.py --quick --repeats 1      # same shape, small N: ~15 s
    python bench/capacity.py --sizes 100 --partitions 6 --messages 100=20000000
    python bench/capacity.py --targets trafka --trafka-set trafka.fsync.policy=always
    python bench/capacity.py --targets trafka,trafka@../before --baseline trafka@../before   # a change vs an
                                                  # older commit checked out with `git worktree add ../before REV`
    python bench/capacity.py --summarize .cache/bench-results/capacity-*.jsonl

Reading the numbers: "broker %" is the broker's CPU over the window as a share of one
core. Produce keeps the broker busy (~100 % for single-threaded Trafka). Consume, with one
fetch outstanding, is a ping-pong of fetch round trips, so its msg/s can stop short of the
broker's limit (broker % well under 100); broker µs/msg is the capacity figure there. The
client is cheap per message (client µs/msg: mostly the kernel's loopback copy, which any
client pays), but on a 2-core machine it still shares the host with the broker, and a
multi-threaded broker (Tansu) competes with it for the second core. Trafka writes N x size
bytes to the page cache per run, so its produce figures also carry the kernel's writeback
(vm.dirty_*) and vary more between repeats than Tansu's memory:// ones.
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import selectors
import socket
import statistics
import struct
import sys
import time
from collections import Counter, defaultdict, deque
from dataclasses import dataclass, field

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import crc32c  # noqa: E402

from brokers import REPO, free_port, proc_cpu_s, start_broker  # noqa: E402
from results import csv, load, parse_messages  # noqa: E402
from produce_consume import CpuWindow, make_pool  # noqa: E402
from rawclient import FETCH_V, PRODUCE_V, RawClient  # noqa: E402
from wire.connection import decode_response, encode_request  # noqa: E402
from wire.primitives import uvarint_bytes  # noqa: E402
from wire.records import HEADER, HEADER_SIZE, LOG_OVERHEAD, Record, build_batch, encode_record  # noqa: E402

TOPIC = "capacity"
WARMUP_TOPIC = "capacity-warmup"
DEFAULT_MESSAGES = {100: 20_000_000, 1024: 2_000_000}
QUICK_MESSAGES = {100: 2_000_000, 1024: 200_000}
PREFIX = 16  # template id + record index, hex, at the start of every value
_SIZE = struct.Struct(">i")
_CORR_AT = 8  # correlation id offset in a framed request (after size, api key, version)


# ---------------------------------------------------------------------------- prep

@dataclass(frozen=True)
class Template:
    """One prebuilt batch and what verification needs to recognise it again."""

    batch: bytes
    crc: int
    count: int


def records_per_batch(size: int, batch_records: int, batch_bytes: int) -> int:
    """librdkafka's rule: a batch closes at batch.num.messages or before batch.size bytes
    (framing included). The last record of a full batch has the widest varints, so its
    encoded length bounds every record's."""
    probe = Record(offset=batch_records, timestamp=0, key=None, value=b"x" * size)
    per_record = len(encode_record(probe, batch_records, 0))
    return max(1, min(batch_records, (batch_bytes - HEADER_SIZE) // per_record))


def build_templates(size: int, k: int, batch_records: int, batch_bytes: int) -> list[Template]:
    """K distinct batches: value = "%08x%08x" % (template, index) + a pool slice, so every
    record of every template differs and each template has its own CRC."""
    if size < PREFIX:
        raise ValueError(f"message size must be at least {PREFIX} bytes")
    count = records_per_batch(size, batch_records, batch_bytes)
    pool = make_pool()
    body = size - PREFIX
    span = len(pool) - body
    ts = int(time.time() * 1000)
    out = []
    for t in range(k):
        recs = []
        for i in range(count):
            off = (t * 104729 + i * 7919) % span
            recs.append(Record(offset=i, timestamp=ts, key=None, value=b"%08x%08x" % (t, i) + pool[off:off + body]))
        batch = bytes(build_batch(recs))
        if len(batch) > batch_bytes:
            raise AssertionError(f"template of {len(batch)} B exceeds batch.size {batch_bytes}")
        crc = struct.unpack_from(">I", batch, 17)[0]
        out.append(Template(batch, crc, count))
    if len({t.crc for t in out}) != len(out):
        raise AssertionError("two templates share a CRC; the multiset check needs them distinct")
    return out


@dataclass
class ProduceRequest:
    """A Produce v9 frame as scatter-gather pieces: headers (small, patched) and batches
    (shared with the templates, never copied)."""

    views: list[memoryview]
    head: bytearray
    total: int
    records: int
    keys: list[tuple[int, int, int]] = field(default_factory=list)  # (partition, crc, count)


def encode_produce(topic: str, items: list[tuple[int, Template]], acks: int,
                   timeout_ms: int = 30000, client_id: bytes = b"bench") -> ProduceRequest:
    """Produce v9 (flexible) by hand, so batches stay separate buffers; checked against
    `rawclient.produce_frame` (the `wire` encoder) in `build_requests`."""
    head = bytearray(_SIZE.pack(0) + struct.pack(">hhi", 0, PRODUCE_V, 0))
    head += struct.pack(">h", len(client_id)) + client_id + b"\x00"  # client id, header tags
    head += b"\x00" + struct.pack(">hi", acks, timeout_ms)  # transactional_id null, acks, timeout
    name = topic.encode()
    head += uvarint_bytes(2) + uvarint_bytes(len(name) + 1) + name + uvarint_bytes(len(items) + 1)
    pieces: list[bytes | bytearray] = []
    cur = head
    for partition, tpl in items:
        cur += struct.pack(">i", partition) + uvarint_bytes(len(tpl.batch) + 1)
        pieces.append(cur)
        pieces.append(tpl.batch)
        cur = bytearray(b"\x00")  # partition tags
    cur += b"\x00\x00"  # topic tags, request tags
    pieces.append(cur)
    total = sum(len(p) for p in pieces)
    _SIZE.pack_into(head, 0, total - 4)
    return ProduceRequest(views=[memoryview(p) for p in pieces], head=head, total=total,
                          records=sum(t.count for _, t in items),
                          keys=[(p, t.crc, t.count) for p, t in items])


def build_requests(templates: list[Template], partitions: int, shape: str, acks: int,
                   topic: str = TOPIC) -> list[ProduceRequest]:
    """One cycle of requests covering every (template, partition) pair once.

    per-partition: request j carries template (j // P) % K for partition j % P;
    all-partitions: request j carries templates (j*P + p) % K for every partition p."""
    k = len(templates)
    reqs = []
    if shape == "per-partition":
        for j in range(k * partitions):
            reqs.append(encode_produce(topic, [(j % partitions, templates[(j // partitions) % k])], acks))
    elif shape == "all-partitions":
        for j in range(k):
            reqs.append(encode_produce(topic, [(p, templates[(j * partitions + p) % k]) for p in range(partitions)],
                                       acks))
    else:
        raise ValueError(f"unknown request shape {shape!r}")
    # The hand encoder must agree with the protocol library byte for byte.
    ref_items = {p: templates[0].batch for p in range(partitions if shape == "all-partitions" else 1)}
    mine = encode_produce(topic, [(p, templates[0]) for p in ref_items], acks)
    ref = RawClient.__new__(RawClient).produce_frame(topic, ref_items, acks=acks)
    if b"".join(bytes(v) for v in mine.views) != ref:
        raise AssertionError("hand-encoded Produce v9 differs from wire.encode_request")
    return reqs


# ---------------------------------------------------------------------------- connection

class Conn:
    """One blocking socket (`ProducePipe` makes it non-blocking): exact-size receives into one reused
    buffer (decoded `records` are views of it: no copy, no fresh pages per response).
    A response is only valid until the next `recv`."""

    def __init__(self, bootstrap: str, timeout_s: float = 30.0) -> None:
        host, port = bootstrap.rsplit(":", 1)
        self.sock = socket.create_connection((host, int(port)), timeout=timeout_s)
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.corr = 0
        self._size = memoryview(bytearray(4))
        self._buf = memoryview(bytearray(1 << 16))

    def close(self) -> None:
        try:
            self.sock.close()
        except OSError:
            pass

    def send_frame(self, api_key: int, version: int, body: dict) -> int:
        self.corr += 1
        self.sock.sendall(encode_request(api_key, version, self.corr, body, client_id="bench"))
        return self.corr

    def _fill(self, view: memoryview) -> memoryview:
        pos, n = 0, len(view)
        while pos < n:
            got = self.sock.recv_into(view[pos:])
            if not got:
                raise ConnectionError("broker closed the connection")
            pos += got
        return view

    def recv(self, api_key: int, version: int, corr: int) -> dict:
        size = _SIZE.unpack(self._fill(self._size))[0]
        if size > len(self._buf):  # a new, bigger buffer: views of the old one may still be alive
            self._buf = memoryview(bytearray(max(size, 2 * len(self._buf))))
        got, body = decode_response(api_key, version, self._fill(self._buf[:size]))
        if got != corr:
            raise ConnectionError(f"correlation id {got}, expected {corr}")
        return body


# ---------------------------------------------------------------------------- phases

def _window(cpu: dict, n: int, size: int, prefix: str) -> dict:
    el = cpu["elapsed_s"]
    ok = n and el > 0
    return {f"{prefix}_s": el,
            f"{prefix}_msgs": n / el if ok else float("nan"),
            f"{prefix}_mbps": n * size / 1e6 / el if ok else float("nan"),
            f"{prefix}_broker_cpu_us_per_msg": cpu["broker_cpu_s"] / n * 1e6 if n else float("nan"),
            f"{prefix}_client_cpu_us_per_msg": cpu["client_cpu_s"] / n * 1e6 if n else float("nan"),
            f"{prefix}_broker_cpu_pct": 100 * cpu["broker_cpu_s"] / el if el > 0 else float("nan"),
            # Of the broker's CPU, a JVM's JIT compilers and GC (0 for Trafka and Tansu).
            f"{prefix}_broker_jit_us_per_msg": cpu["broker_jit_cpu_s"] / n * 1e6 if n else float("nan"),
            f"{prefix}_broker_gc_us_per_msg": cpu["broker_gc_cpu_s"] / n * 1e6 if n else float("nan"),
            f"{prefix}_host_busy_pct": cpu["host_busy_pct"]}


class ProducePipe:
    """One connection's share of the produce phase, on a non-blocking socket: its requests
    in order, up to `inflight` of them in flight, a send the kernel's buffer cut short
    resumed where it stopped. Several pipes are driven by one thread (`produce_phase`), so
    a client of one core keeps several brokers busy at once."""

    def __init__(self, bootstrap: str, order: list[ProduceRequest], count: int, inflight: int) -> None:
        self.conn = Conn(bootstrap)
        self.conn.sock.setblocking(False)
        self.order, self.count, self.inflight = order, count, inflight
        self.started = self.acked = 0  # requests
        self.pending: deque = deque()  # (correlation id, request), oldest first
        self.out: list[memoryview] = []  # what is left to send of the newest request
        self.inbuf = bytearray()
        self.mask = 0

    @property
    def done(self) -> bool:
        return self.acked >= self.count

    def send_some(self) -> None:
        """Start and send requests until the window is full or the socket would block."""
        conn = self.conn
        while True:
            if not self.out:
                if len(self.pending) >= self.inflight or self.started >= self.count:
                    return
                req = self.order[self.started % len(self.order)]
                self.started += 1
                conn.corr += 1
                struct.pack_into(">i", req.head, _CORR_AT, conn.corr)
                self.pending.append((conn.corr, req))
                self.out = list(req.views)
            try:
                sent = conn.sock.sendmsg(self.out)
            except BlockingIOError:
                return
            rest = []
            for v in self.out:
                if sent >= len(v):
                    sent -= len(v)
                    continue
                rest.append(v[sent:] if sent else v)
                sent = 0
            self.out = rest
            if rest:
                return  # the kernel's send buffer is full: resume when writable

    def recv_some(self) -> list[tuple[dict, ProduceRequest]]:
        """Read what has arrived; return the complete responses with their requests."""
        try:
            data = self.conn.sock.recv(1 << 16)
        except BlockingIOError:
            return []
        if not data:
            raise ConnectionError("broker closed the connection")
        buf = self.inbuf
        buf += data
        out = []
        while len(buf) >= 4:
            size = _SIZE.unpack_from(buf, 0)[0]
            if len(buf) < 4 + size:
                break
            got, body = decode_response(0, PRODUCE_V, bytes(buf[4:4 + size]))
            del buf[:4 + size]
            corr, req = self.pending.popleft()
            if got != corr:
                raise ConnectionError(f"correlation id {got}, expected {corr}")
            self.acked += 1
            out.append((body, req))
        return out


def produce_phase(bootstrap: str | list[str], pid: int | list[int], requests: list[ProduceRequest],
                  n_requests: int, inflight: int, size: int, deadline: float,
                  route: list[int] | None = None) -> tuple[dict, Counter, list[str]]:
    """Send `n_requests` requests (cycling through `requests`), `inflight` at a time per
    connection; return (metrics, sent multiset of (partition, crc, count), errors).

    Several brokers (brokers_per_host.py): `bootstrap` and `pid` are lists, and
    `route[i]` is the index of the connection `requests[i]` goes to (its partition's
    leader). Each connection sends its subsequence of the same request sequence, all from
    this thread through a selector. One broker (capacity.py) is the case of one connection."""
    bootstraps = [bootstrap] if isinstance(bootstrap, str) else list(bootstrap)
    pids = [pid] if isinstance(pid, int) else list(pid)
    cycle = len(requests)
    route = route or [0] * cycle
    counts = Counter(route[j % cycle] for j in range(n_requests))
    pipes = [ProducePipe(b, [r for r, c in zip(requests, route) if c == i], counts[i], inflight)
             for i, b in enumerate(bootstraps)]
    sent: Counter = Counter()
    errors: list[str] = []
    acked = acked_reqs = 0
    sel = selectors.DefaultSelector()
    for p in pipes:
        p.mask = selectors.EVENT_READ
        sel.register(p.conn.sock, p.mask, p)
    window = CpuWindow(pids)
    each0 = [proc_cpu_s(p) for p in pids]
    gc.collect()
    gc.disable()
    try:
        window.start()
        while not errors and not all(p.done for p in pipes):
            for p in pipes:
                p.send_some()
                mask = selectors.EVENT_READ | (selectors.EVENT_WRITE if p.out else 0)
                if mask != p.mask:
                    sel.modify(p.conn.sock, mask, p)
                    p.mask = mask
            for key, events in sel.select(1.0):
                p = key.data
                if events & selectors.EVENT_WRITE:
                    p.send_some()
                if events & selectors.EVENT_READ:
                    for body, req in p.recv_some():
                        for t in body["responses"]:
                            for pr in t["partition_responses"]:
                                if pr["error_code"]:
                                    errors.append(f"produce partition {pr['index']}: error {pr['error_code']}")
                        acked += req.records
                        acked_reqs += 1
                        sent.update(req.keys)
            if not errors and time.monotonic() > deadline:
                errors.append("produce exceeded the run timeout")
        cpu = window.stop()
        each = [proc_cpu_s(p) - c for p, c in zip(pids, each0)]
    finally:
        gc.enable()
        sel.close()
        for p in pipes:
            p.conn.close()
    return ({**_window(cpu, acked, size, "produce"), "produced": acked, "produce_requests": acked_reqs,
             "produce_broker_cpu_s": cpu["broker_cpu_s"], "produce_broker_cpu_s_each": each},
            sent, errors)


def consume_phase(bootstrap: str, pid: int, partitions: int, expected: int, size: int, deadline: float,
                  max_wait_ms: int, max_bytes: int, partition_max_bytes: int,
                  topic: str = TOPIC) -> tuple[dict, Counter, list[str]]:
    """Fetch from offset 0 with one fetch outstanding until `expected` records arrived,
    checking CRCs and offset contiguity on the way; return (metrics, received multiset, errors)."""
    conn = Conn(bootstrap)
    offsets = {p: 0 for p in range(partitions)}
    received: Counter = Counter()
    errors: list[str] = []
    total = fetches = nbytes = batches = 0
    crc = crc32c.crc32c
    unpack = HEADER.unpack_from
    body = RawClient.__new__(RawClient).fetch_body  # a plain function of its arguments
    window = CpuWindow([pid])
    gc.collect()
    gc.disable()
    try:
        window.start()
        while total < expected and not errors:
            if time.monotonic() > deadline:
                errors.append(f"consume exceeded the run timeout ({total:,} of {expected:,} records)")
                break
            corr = conn.send_frame(1, FETCH_V, body(topic, offsets, max_wait_ms=max_wait_ms, min_bytes=1,
                                                    max_bytes=max_bytes, partition_max_bytes=partition_max_bytes))
            resp = conn.recv(1, FETCH_V, corr)
            fetches += 1
            if resp["error_code"]:
                errors.append(f"fetch error {resp['error_code']}")
            for t in resp["responses"]:
                for part in t["partitions"]:
                    p = part["partition_index"]
                    if part["error_code"]:
                        errors.append(f"fetch partition {p}: error {part['error_code']} at offset {offsets.get(p)}")
                        continue
                    data = part["records"]
                    if not data:
                        continue
                    nbytes += len(data)
                    pos, end = 0, len(data)
                    while pos + HEADER_SIZE <= end:
                        (base, length, _ple, magic, want, _attrs, lod, _bts, _mts, _pid, _pe, _bs,
                         count) = unpack(data, pos)
                        stop = pos + LOG_OVERHEAD + length
                        if stop > end:
                            break  # a batch cut at the response limit: fetched again next time
                        if magic != 2:
                            errors.append(f"partition {p} offset {base}: magic {magic}")
                        elif crc(data[pos + 21:stop]) != want:
                            errors.append(f"partition {p} offset {base}: CRC mismatch")
                        elif base != offsets[p]:
                            errors.append(f"partition {p}: batch at {base}, expected {offsets[p]}")
                        elif lod != count - 1:
                            errors.append(f"partition {p} offset {base}: lastOffsetDelta {lod}, count {count}")
                        if errors:
                            break
                        offsets[p] = base + count
                        received[(p, want, count)] += 1
                        total += count
                        batches += 1
                        pos = stop
        cpu = window.stop()
    finally:
        gc.enable()
        conn.close()
    return ({**_window(cpu, total, size, "consume"), "consumed": total, "consume_fetches": fetches,
             "consume_batches": batches, "consume_mb_per_fetch": nbytes / 1e6 / max(fetches, 1)},
            received, errors)


# ---------------------------------------------------------------------------- one run

class Scraper:
    """`--http`: GET the broker's /metrics every `interval_s` on a thread of its own, as a
    Prometheus server would, for the whole run (bench/metrics_cost.py compares with none)."""

    def __init__(self, url: str, interval_s: float = 1.0) -> None:
        import threading

        self.url = url
        self.interval_s = interval_s
        self.times: list[float] = []
        self.failures = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        import urllib.request

        while not self._stop.wait(self.interval_s):
            t = time.perf_counter()
            try:
                with urllib.request.urlopen(self.url, timeout=5) as response:
                    response.read()
                self.times.append(time.perf_counter() - t)
            except OSError:
                self.failures += 1

    def stop(self) -> dict:
        self._stop.set()
        self._thread.join(10)
        ms = sorted(t * 1000 for t in self.times)
        return {"scrapes": len(ms), "scrape_failures": self.failures,
                "scrape_ms_median": ms[len(ms) // 2] if ms else None, "scrape_ms_max": ms[-1] if ms else None}


def target_settings(target: str, args: argparse.Namespace) -> dict[str, str] | None:
    """`--trafka-set` for Trafka targets, `--kafka-set` for Kafka, nothing for Tansu."""
    if target.startswith("trafka"):
        return dict(s.split("=", 1) for s in args.trafka_set)
    if target == "kafka":
        return dict(s.split("=", 1) for s in getattr(args, "kafka_set", []))
    return None


def warmup_builder(templates: list[Template], partitions: int, shape: str, acks: int, n_requests: int):
    """topic -> the warm-up's `n_requests` (rounded up to whole rounds of the partitions)
    Produce requests for that topic."""
    n_requests = -(-n_requests // partitions) * partitions

    def build(topic: str) -> list[ProduceRequest]:
        cycle = build_requests(templates, partitions, shape, acks, topic=topic)
        return [cycle[j % len(cycle)] for j in range(n_requests)]

    return build


def warm_up(broker, make_warmup, partitions: int, size: int, args: argparse.Namespace, deadline: float) -> dict:
    """Untimed rounds of `make_warmup(topic)` requests, each to a topic of its own and read back, so a
    JIT-compiled broker (Kafka) runs its produce and fetch paths compiled when the clock
    starts, as a broker that has been up a while does; the measured topic still starts at
    offset 0. Rounds go on until the JIT compilers took at most `--warmup-jit-share` of the
    broker's CPU in two rounds in a row (C2 compiles in bursts), for at most `--warmup-max-s`
    (Trafka, no JIT: two short rounds).
    An error fails the run like one in the measured phases."""
    from brokers import jvm_thread_cpu_s

    t = time.monotonic()
    rounds = []
    while True:
        topic = f"{WARMUP_TOPIC}-{len(rounds)}"
        admin = RawClient(broker.bootstrap)
        try:
            code = admin.create_topic(topic, partitions)
            if code not in (0, 36):
                raise RuntimeError(f"CreateTopics ({topic}) error {code}")
            admin.wait_topic(topic, partitions, timeout_s=30)
        finally:
            admin.close()
        warmup = make_warmup(topic)
        jit0, cpu0 = jvm_thread_cpu_s([broker.pid])["jit"], proc_cpu_s(broker.pid)
        prod, _sent, perr = produce_phase(broker.bootstrap, broker.pid, warmup, len(warmup), args.inflight, size,
                                          deadline)
        if perr:
            raise RuntimeError(f"warm-up produce: {perr[:3]}")
        cons, _received, cerr = consume_phase(broker.bootstrap, broker.pid, partitions, prod["produced"], size,
                                              deadline, args.max_wait_ms, args.fetch_max_bytes,
                                              args.partition_max_bytes, topic=topic)
        if cerr:
            raise RuntimeError(f"warm-up consume: {cerr[:3]}")
        cpu = proc_cpu_s(broker.pid) - cpu0
        share = (jvm_thread_cpu_s([broker.pid])["jit"] - jit0) / cpu if cpu > 0 else 0.0
        rounds.append(share)
        settled = len(rounds) >= 2 and max(rounds[-2:]) <= getattr(args, "warmup_jit_share", 0.05)
        if settled or time.monotonic() - t > getattr(args, "warmup_max_s", 30.0) or len(rounds) >= 99:
            break
    return {"warmup_records": prod["produced"] * len(rounds), "warmup_rounds": len(rounds),
            "warmup_jit_share_last": rounds[-1], "warmup_s": time.monotonic() - t}


def run_one(target: str, label: dict, requests: list[ProduceRequest], n_requests: int, expected: int,
            args: argparse.Namespace, warmup=None) -> dict:
    """Fresh broker, topic, (warm-up,) produce, consume, verify; the broker is stopped whatever happens."""
    settings = target_settings(target, args)
    http_port = None
    if getattr(args, "http", False) and settings is not None:
        http_port = free_port()
        settings["http.listeners"] = f"127.0.0.1:{http_port}"
        label = {**label, "http": True}
    size, partitions = label["size"], label["partitions"]
    t0 = time.monotonic()
    result: dict = {**label, "target": target, "verified": False}
    try:
        broker = start_broker(target, settings=settings, data_dir=None, log_dir=args.log_dir)
    except Exception as exc:  # a broker that does not start is a result too
        result.update(errors=[f"start failed: {exc}"], error_count=1)
        return result
    errors: list[str] = []
    scraper = Scraper(f"http://127.0.0.1:{http_port}/metrics") if http_port else None
    try:
        deadline = time.monotonic() + args.run_timeout
        admin = RawClient(broker.bootstrap)
        try:
            code = admin.create_topic(TOPIC, partitions)
            if code not in (0, 36):
                raise RuntimeError(f"CreateTopics error {code}")
            admin.wait_topic(TOPIC, partitions, timeout_s=30)
        finally:
            admin.close()
        result["broker_rss_idle_mb"] = broker.rss_mb()  # started, topic created, nothing produced yet
        if warmup:
            result.update(warm_up(broker, warmup, partitions, size, args, deadline))
        prod, sent, perr = produce_phase(broker.bootstrap, broker.pid, requests, n_requests, args.inflight, size,
                                         deadline)
        result.update(prod)
        errors += perr
        if not perr:
            cons, received, cerr = consume_phase(broker.bootstrap, broker.pid, partitions, prod["produced"], size,
                                                 deadline, args.max_wait_ms, args.fetch_max_bytes,
                                                 args.partition_max_bytes)
            result.update(cons)
            errors += cerr
            if not cerr:
                if cons["consumed"] != expected:
                    errors.append(f"consumed {cons['consumed']:,} records, expected {expected:,}")
                if received != sent:
                    missing = sum((sent - received).values())
                    extra = sum((received - sent).values())
                    errors.append(f"batch multiset differs: {missing} batches missing, {extra} unexpected")
        else:
            errors.append("consume skipped: produce failed")
        result["broker_rss_peak_mb"] = broker.hwm_mb()
        result["broker_rss_after_mb"] = broker.rss_mb()  # after the load, before stopping
        result["broker_alive"] = broker.alive()
    except Exception as exc:
        errors.append(f"{type(exc).__name__}: {exc}")
    finally:
        if scraper is not None:
            result.update(scraper.stop())
        result["broker_exit"] = broker.stop()
    result["errors"] = errors[:10]
    result["error_count"] = len(errors)
    result["verified"] = not errors
    result["wall_s"] = time.monotonic() - t0
    if errors:
        result["broker_log_tail"] = broker.log_tail(15)
    return result


# ---------------------------------------------------------------------------- summary

def _med(values) -> float:
    values = [v for v in values if isinstance(v, (int, float)) and v == v]
    return statistics.median(values) if values else float("nan")


def _range(values) -> tuple[float, float]:
    values = [v for v in values if isinstance(v, (int, float)) and v == v]
    return (min(values), max(values)) if values else (float("nan"), float("nan"))


def _fmt(v, digits: int = 0) -> str:
    return "-" if not isinstance(v, (int, float)) or v != v else f"{v:,.{digits}f}"


def summarize(results: list[dict], baseline: str = "tansu", out=sys.stdout) -> dict:
    """Print the tables (medians, ratios, CPU, spreads, verified); return the medians."""
    groups: dict[tuple, dict[str, list[dict]]] = defaultdict(lambda: defaultdict(list))
    for r in results:
        groups[(r.get("size"), r.get("partitions"), str(r.get("acks")))][r.get("target")].append(r)
    targets = sorted({r.get("target") for r in results}, key=lambda t: (t == baseline, t))
    others = [t for t in targets if t != baseline] if baseline in targets else []
    fields = ("produce_msgs", "consume_msgs", "produce_mbps", "consume_mbps", "produce_broker_cpu_us_per_msg",
              "consume_broker_cpu_us_per_msg", "produce_client_cpu_us_per_msg", "consume_client_cpu_us_per_msg",
              "produce_host_busy_pct", "consume_host_busy_pct", "produce_broker_cpu_pct", "consume_broker_cpu_pct")
    keys = sorted(groups, key=lambda k: (k[0], k[1], k[2]))
    summary: dict = {}
    for key in keys:
        summary[key] = {}
        for t in targets:
            rs = groups[key].get(t, [])
            m = {f: _med([r.get(f) for r in rs]) for f in fields}
            m["runs"], m["verified"] = len(rs), sum(1 for r in rs if r.get("verified"))
            m["produce_range"] = _range([r.get("produce_msgs") for r in rs])
            m["consume_range"] = _range([r.get("consume_msgs") for r in rs])
            summary[key][t] = m
        for t in others:
            for f in ("produce_msgs", "consume_msgs"):
                b = summary[key][baseline][f]
                summary[key][t][f + "_ratio"] = summary[key][t][f] / b if b == b and b else float("nan")

    print("\n## Broker capacity (raw pipelined client; medians; MB/s = value bytes / 1e6)\n", file=out)
    head = ["size", "P", "acks"]
    for t in targets:
        head += [f"{t} prod msg/s", f"{t} cons msg/s"]
    for t in others:
        head += [f"{t}/{baseline} prod", f"{t}/{baseline} cons"]
    for t in targets:
        head += [f"{t} prod/cons MB/s"]
    head += ["verified"]
    print("| " + " | ".join(head) + " |", file=out)
    print("|" + "---|" * len(head), file=out)
    for key in keys:
        s = summary[key]
        row = [f"{key[0]} B", str(key[1]), key[2]]
        for t in targets:
            row += [_fmt(s[t]["produce_msgs"]), _fmt(s[t]["consume_msgs"])]
        for t in others:
            row += [_fmt(s[t]["produce_msgs_ratio"], 2) + "×", _fmt(s[t]["consume_msgs_ratio"], 2) + "×"]
        for t in targets:
            row += [f"{_fmt(s[t]['produce_mbps'])} / {_fmt(s[t]['consume_mbps'])}"]
        row += [" ".join(f"{t} {s[t]['verified']}/{s[t]['runs']}" for t in targets)]
        print("| " + " | ".join(row) + " |", file=out)

    print("\n## CPU per message (medians; µs/msg produce / consume; broker % = share of one core)\n", file=out)
    head = ["size", "P"]
    for t in targets:
        head += [f"{t} broker µs/msg", f"{t} broker %", f"client µs/msg ({t} runs)", f"host busy % ({t} runs)"]
    print("| " + " | ".join(head) + " |", file=out)
    print("|" + "---|" * len(head), file=out)
    for key in keys:
        s = summary[key]
        row = [f"{key[0]} B", str(key[1])]
        for t in targets:
            m = s[t]
            row += [f"{_fmt(m['produce_broker_cpu_us_per_msg'], 3)} / {_fmt(m['consume_broker_cpu_us_per_msg'], 3)}",
                    f"{_fmt(m['produce_broker_cpu_pct'])} / {_fmt(m['consume_broker_cpu_pct'])}",
                    f"{_fmt(m['produce_client_cpu_us_per_msg'], 3)} / {_fmt(m['consume_client_cpu_us_per_msg'], 3)}",
                    f"{_fmt(m['produce_host_busy_pct'])} / {_fmt(m['consume_host_busy_pct'])}"]
        print("| " + " | ".join(row) + " |", file=out)

    print("\nSpread (min..max msg/s):", file=out)
    for key in keys:
        parts = []
        for t in targets:
            m = summary[key][t]
            parts.append(f"{t} prod {_fmt(m['produce_range'][0])}..{_fmt(m['produce_range'][1])} "
                         f"cons {_fmt(m['consume_range'][0])}..{_fmt(m['consume_range'][1])}")
        print(f"- {key[0]} B P{key[1]} acks={key[2]}: " + "; ".join(parts), file=out)

    for t in others:
        ratios = [summary[k][t].get(f + "_ratio") for k in keys for f in ("produce_msgs", "consume_msgs")]
        ratios = [r for r in ratios if r is not None and r == r and r > 0]
        if ratios:
            print(f"\n{t}/{baseline} msg/s: geometric mean {statistics.geometric_mean(ratios):.2f}×, "
                  f"min {min(ratios):.2f}×, max {max(ratios):.2f}× over {len(ratios)} cells", file=out)
    failed = [r for r in results if not r.get("verified")]
    print(f"\n{len(results) - len(failed)}/{len(results)} runs verified.", file=out)
    for r in failed[:10]:
        print(f"- FAILED {r.get('target')} {r.get('size')} B P{r.get('partitions')} rep {r.get('repeat')}: "
              f"{r.get('errors')}", file=out)
    return summary




# ---------------------------------------------------------------------------- main





def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--targets", default="trafka,tansu",
                    help="brokers to run (trafka, trafka@DIR: another checkout, kafka: Apache Kafka 4.x, tansu)")
    ap.add_argument("--baseline", default="tansu", help="the target ratios are computed against")
    ap.add_argument("--sizes", default="100,1024", help="value sizes in bytes (at least 16)")
    ap.add_argument("--partitions", default="1,6")
    ap.add_argument("--messages", default="", help="per-size N, e.g. 100=20000000,1024=2000000 "
                    "(rounded up to whole requests)")
    ap.add_argument("--quick", action="store_true", help="small N (100=2000000,1024=200000)")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--batch-bytes", type=int, default=1_000_000, help="librdkafka batch.size")
    ap.add_argument("--batch-records", type=int, default=10_000, help="librdkafka batch.num.messages")
    ap.add_argument("--inflight", type=int, default=5, help="Produce requests in flight on the connection")
    ap.add_argument("--acks", type=int, default=1, choices=[-1, 0, 1], help="1 or -1 (all); 0 is not supported")
    ap.add_argument("--request-shape", choices=["per-partition", "all-partitions"], default="per-partition",
                    help="one partition's batch per ProduceRequest (librdkafka) or one batch per partition")
    ap.add_argument("--templates", type=int, default=64, help="distinct prebuilt batches per message size")
    ap.add_argument("--max-wait-ms", type=int, default=500, help="Fetch max_wait_ms (librdkafka fetch.wait.max.ms)")
    ap.add_argument("--fetch-max-bytes", type=int, default=52_428_800, help="Fetch max_bytes")
    ap.add_argument("--partition-max-bytes", type=int, default=1_048_576, help="Fetch partition_max_bytes")
    ap.add_argument("--trafka-set", action="append", default=[], metavar="KEY=VALUE",
                    help="broker setting for Trafka runs (repeatable)")
    ap.add_argument("--kafka-set", action="append", default=[], metavar="KEY=VALUE",
                    help="server.properties line for Kafka runs (repeatable)")
    ap.add_argument("--warmup-requests", type=int, default=0,
                    help="untimed Produce requests per warm-up round (then read back), each round to a topic of "
                         "its own, before the timed phases, for a JIT-compiled broker (bench/race.py: 100)")
    ap.add_argument("--warmup-jit-share", type=float, default=0.05,
                    help="warm-up rounds go on while the JIT compilers took more than this share of the broker's "
                         "CPU in the last round")
    ap.add_argument("--warmup-max-s", type=float, default=30.0, help="bound on the warm-up rounds, seconds")
    ap.add_argument("--http", action="store_true",
                    help="Trafka serves /metrics (http.listeners on a free port), scraped every second during the run")
    ap.add_argument("--run-timeout", type=float, default=120.0, help="seconds for topic + produce + consume")
    ap.add_argument("--out", "--json", dest="out", default=None,
                    help="JSONL file (default .cache/bench-results/capacity-<time>.jsonl)")
    ap.add_argument("--log-dir", default=None, help="where broker logs go (default: the temp dir)")
    ap.add_argument("--summarize", nargs="+", default=None, help="only print the summary of JSONL files")
    args = ap.parse_args(argv)

    if args.summarize:
        summarize(load(args.summarize), args.baseline)
        return 0
    if args.acks == 0:
        ap.error("acks=0 has no responses to pipeline on; use 1 or -1")

    messages = dict(QUICK_MESSAGES if args.quick else DEFAULT_MESSAGES)
    messages.update(parse_messages(args.messages))
    sizes = [int(s) for s in csv(args.sizes)]
    parts = [int(p) for p in csv(args.partitions)]
    targets = csv(args.targets)
    out_path = args.out or os.path.join(REPO, ".cache", "bench-results", time.strftime("capacity-%Y%m%d-%H%M%S.jsonl"))
    os.makedirs(os.path.dirname(os.path.abspath(out_path)), exist_ok=True)
    total = len(sizes) * len(parts) * len(targets) * args.repeats
    print(f"{total} runs ({len(sizes) * len(parts)} configurations x {len(targets)} targets x {args.repeats} repeats)"
          f" -> {out_path}", flush=True)

    results = []
    started = time.monotonic()
    k = 0
    with open(out_path, "a") as sink:
        for size in sizes:
            t = time.perf_counter()
            templates = build_templates(size, args.templates, args.batch_records, args.batch_bytes)
            per_batch = templates[0].count
            print(f"prep {size} B: {len(templates)} templates x {per_batch:,} records "
                  f"({len(templates[0].batch):,} B per batch) in {time.perf_counter() - t:.1f} s", flush=True)
            for p in parts:
                requests = build_requests(templates, p, args.request_shape, args.acks)
                warmup = None
                if args.warmup_requests:
                    warmup = warmup_builder(templates, p, args.request_shape, args.acks, args.warmup_requests)
                per_req = requests[0].records
                want = messages.get(size) or max(10_000, 1_000_000_000 // size)
                n_requests = -(-want // per_req)
                if args.request_shape == "per-partition":
                    n_requests = -(-n_requests // p) * p  # every partition gets the same number of batches
                expected = n_requests * per_req
                label = {"mode": "capacity", "size": size, "partitions": p, "acks": args.acks,
                         "messages": expected, "records_per_batch": per_batch,
                         "batch_bytes": len(templates[0].batch), "requests": n_requests,
                         "request_shape": args.request_shape, "inflight": args.inflight,
                         "templates": len(templates), "warmup_requests": args.warmup_requests}
                for rep in range(args.repeats):
                    order = targets if rep % 2 == 0 else list(reversed(targets))
                    for target in order:
                        k += 1
                        print(f"[{k}/{total} {time.monotonic() - started:5.0f}s] {target} {size} B P{p} "
                              f"N={expected:,} rep {rep + 1}", flush=True)
                        r = run_one(target, {**label, "repeat": rep}, requests, n_requests, expected, args, warmup)
                        results.append(r)
                        sink.write(json.dumps(r) + "\n")
                        sink.flush()
                        print(f"    produce {_fmt(r.get('produce_msgs'))} msg/s ({_fmt(r.get('produce_mbps'))} MB/s, "
                              f"broker {_fmt(r.get('produce_broker_cpu_us_per_msg'), 3)} µs/msg, client "
                              f"{_fmt(r.get('produce_client_cpu_us_per_msg'), 3)}); consume "
                              f"{_fmt(r.get('consume_msgs'))} msg/s ({_fmt(r.get('consume_mbps'))} MB/s, broker "
                              f"{_fmt(r.get('consume_broker_cpu_us_per_msg'), 3)} µs/msg, client "
                              f"{_fmt(r.get('consume_client_cpu_us_per_msg'), 3)}, "
                              f"{_fmt(r.get('consume_mb_per_fetch'), 2)} MB/fetch); verified {r['verified']}"
                              + ("" if r["verified"] else f" {r['errors'][:3]}"), flush=True)
    print(f"\nfinished in {time.monotonic() - started:.0f} s; results in {out_path}")
    summarize(results, args.baseline)
    return 0 if all(r.get("verified") for r in results) else 1


if __name__ == "__main__":
    sys.exit(main())
