"""What transactions cost: two ratios, measured in one run against one broker.

(a) produce: a transactional confluent-kafka producer (`transactional.id`; begin, produce
    as fast as librdkafka takes messages for `--txn-ms` (100 ms), commit, repeat) against
    the same producer without a transactional id (idempotent, acks=all) — the same message
    size, linger.ms, batch.size, batch.num.messages and queue settings as
    `produce_consume.py`. Each phase produces for `--produce-s` seconds and is timed from
    the first produce() to the end of the last commit_transaction() / flush(), so the
    transactional figure pays the per-transaction round trips (AddPartitionsToTxn, EndTxn),
    the markers the broker writes and the pipeline drain before every commit.
    Ratio = txn msg/s / plain msg/s; target >= 0.8.
(b) consume: one topic filled with `--fill-messages` records in transactions of
    `--fill-txn-size`, every `--abort-every`-th transaction aborted (flushed first, so its
    records are in the log); then read from offset 0 to the end by an assigned (no group)
    consumer with isolation.level=read_committed and one with read_uncommitted, reads
    alternating (RU, RC, RC, RU, ...). Both cover the same log, so the ratio is of log
    progress: read_uncommitted time / read_committed time (the committed reader delivers
    fewer messages for the same log, and is not penalised for that). Delivered msg/s and
    MB/s are printed too. Target >= 0.9.

Why one run and one broker: both sides of a ratio then share the broker build, the page
cache, the machine's neighbours and the client, which is what makes a ratio trustworthy
on a shared 2-core machine when absolute msg/s swings 20-30 % between runs.

Every run starts a fresh broker (`brokers.start_broker`), and everything is verified:
(a) no delivery error, and every partition's high watermark = records produced + commit
markers (one per transaction per partition it touched, so with one partition exactly
records + transactions); (b) read_uncommitted sees every fill record exactly once,
read_committed exactly the committed ones and none of the aborted, each in offset order.

A broker that does not do transactions (InitProducerId with a transactional id fails within
`--init-timeout`: a broker without transactions answers UNSUPPORTED_VERSION) still gets the
non-transactional halves: the plain producer of (a), and (b) with the topic filled by the
plain producer (marked fill=plain: then the two readers see the same records, and the
ratio is the cost of the read_committed fetch path alone).

Results: one JSON line per broker run in `--out` (default
.cache/bench-results/transactions-<time>.jsonl), with the machine (CPU model, cores, load
average) and each window's broker CPU µs/msg and host busy %; a table of medians over the
repeats is printed at the end (`--summarize FILE...` re-prints it).

    python bench/transactions.py                        # trafka,tansu x 2 repeats: ~1.5 min
    python bench/transactions.py --targets tansu --repeats 3
    python bench/transactions.py --size 100 --produce-s 8
    python bench/transactions.py --summarize .cache/bench-results/transactions-*.jsonl
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import struct
import sys
import time
import uuid

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaError, KafkaException, Producer, TopicPartition  # noqa: E402

from brokers import REPO, create_topic, start_broker  # noqa: E402
from produce_consume import CpuWindow, Payloads  # noqa: E402
from results import csv, load  # noqa: E402

_SEQ = struct.Struct(">Q")
CHECK_EVERY = 64  # produce() calls between two looks at the clock, in both producers alike
NAN = float("nan")


# ---------------------------------------------------------------------------- machine

def machine() -> dict:
    """Which machine: the numbers only compare with others from the same one."""
    model = ""
    try:
        with open("/proc/cpuinfo") as f:
            model = next((line.split(":", 1)[1].strip() for line in f if line.startswith("model name")), "")
    except OSError:
        pass
    return {"host": platform.node(), "cpu": model, "cores": os.cpu_count(),
            "loadavg": [round(x, 2) for x in os.getloadavg()], "python": platform.python_version(),
            "librdkafka": __import__("confluent_kafka").libversion()[0]}


# ---------------------------------------------------------------------------- clients

def producer_config(bootstrap: str, args, transactional_id: str | None) -> dict:
    """produce_consume.py's producer, idempotent with acks=all; the two phases differ only
    in `transactional.id`."""
    conf = {
        "bootstrap.servers": bootstrap,
        "acks": "all",
        "enable.idempotence": True,
        "compression.type": args.compression,
        "linger.ms": args.linger_ms,
        "batch.size": 1000000,
        "batch.num.messages": 10000,
        "queue.buffering.max.messages": 1000000,
        "message.max.bytes": 1000000 + 1000,
        "delivery.report.only.error": True,
    }
    if transactional_id:
        conf["transactional.id"] = transactional_id
    return conf


def consumer_config(bootstrap: str, isolation: str, fetch_wait_max_ms: int) -> dict:
    """produce_consume.py's consumer settings; assigned, not subscribed (no group join)."""
    return {
        "bootstrap.servers": bootstrap,
        "group.id": f"txn-bench-{uuid.uuid4().hex[:8]}",
        "enable.auto.commit": False,
        "isolation.level": isolation,
        "enable.partition.eof": True,
        "fetch.wait.max.ms": fetch_wait_max_ms,
        "queued.min.messages": 1000000,
        "queued.max.messages.kbytes": 262144,
        "fetch.queue.backoff.ms": 10,
    }


class Errors(list):
    """Delivery and client errors of one phase (the callback appends)."""

    def __call__(self, err, msg=None) -> None:
        if err is not None:
            self.append(str(err))


def init_transactional(bootstrap: str, args, errors: Errors) -> tuple[Producer | None, str | None]:
    """A transactional producer with its PID, or (None, why not) if the broker has no
    transactions (librdkafka retries UNSUPPORTED_VERSION until the timeout)."""
    # log_level 3: a broker without transactions makes librdkafka log a warning per retry;
    # the failure itself comes back from init_transactions.
    producer = Producer({**producer_config(bootstrap, args, f"txn-bench-{uuid.uuid4().hex[:8]}"),
                         "error_cb": errors, "log_level": 3})
    try:
        producer.init_transactions(args.init_timeout)
    except KafkaException as exc:
        return None, f"init_transactions: {exc.args[0]}"
    return producer, None


def high_watermarks(bootstrap: str, topic: str, partitions: int) -> list[int]:
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"txn-bench-wm-{uuid.uuid4().hex[:8]}"})
    try:
        return [consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=10)[1] for p in range(partitions)]
    finally:
        consumer.close()


# ---------------------------------------------------------------------------- (a) produce

def produce_for(producer: Producer, topic: str, payloads: Payloads, seconds: float, txn_s: float | None,
                pids: list[int]) -> dict:
    """Produce for `seconds`: plainly (txn_s None: then flush) or in transactions of
    `txn_s` (begin, produce, commit). Returns counts and the CPU window."""
    pack, body_at = _SEQ.pack, payloads.body_at
    produce, poll, clock = producer.produce, producer.poll, time.perf_counter
    i = txns = 0
    window = CpuWindow(pids)
    window.start()
    t0 = clock()
    end = t0 + seconds
    while True:
        if txn_s is not None:
            producer.begin_transaction()
            stop = min(clock() + txn_s, end)
        else:
            stop = end
        while True:
            for _ in range(CHECK_EVERY):
                value = pack(i) + body_at(i)
                while True:
                    try:
                        produce(topic, value)
                        break
                    except BufferError:
                        poll(0.001)
                i += 1
            if clock() >= stop:
                break
        if txn_s is not None:
            producer.commit_transaction(60)
            txns += 1
        if clock() >= end:
            break
    if txn_s is None:
        remaining = producer.flush(60)
        if remaining:
            raise RuntimeError(f"{remaining} messages not delivered within 60 s")
    cpu = window.stop()
    return {"messages": i, "transactions": txns, **cpu}


def phase_rates(r: dict, size: int) -> dict:
    n, s = r["messages"], r["elapsed_s"]
    return {"msgs": n / s, "mbps": n * size / 1e6 / s,
            "broker_us_per_msg": r["broker_cpu_s"] / n * 1e6 if n else NAN}


def run_produce(bootstrap: str, args, pids: list[int], rep: int, tansu: bool = False) -> dict:
    """Phase (a): plain and transactional, each on its own topic, interleaved in `--slices`
    slices in ABBA order (BAAB on odd repeats). The page cache's writeback of what the
    first producer wrote lands on whoever runs next (measured: back-to-back phases swung
    the ratio 0.5..3.8 on this VM); interleaving gives both the same share of it."""
    payloads = Payloads(args.size)
    out: dict = {}
    producers: dict[str, tuple[Producer, str, Errors]] = {}
    for kind in ("plain", "txn"):
        topic = f"txn-bench-{kind}-{uuid.uuid4().hex[:6]}"
        create_topic(bootstrap, topic, args.partitions)
        errors = Errors()
        if kind == "txn":
            producer, why = init_transactional(bootstrap, args, errors)
            if producer is None:
                out["txn"] = {"supported": False, "error": why}
                continue
        else:
            producer = Producer({**producer_config(bootstrap, args, None), "error_cb": errors})
            # One untimed message: connection, metadata and InitProducerId are not measured
            # (the transactional producer did those in init_transactions).
            producer.produce(topic, b"warm-up")
            producer.flush(30)
        producers[kind] = (producer, topic, errors)
    first, second = ("plain", "txn") if rep % 2 == 0 else ("txn", "plain")
    slices = max(args.slices, 1)
    order = [k for i in range(slices) for k in ((first, second) if i % 2 == 0 else (second, first))]
    totals: dict[str, dict] = {}
    for kind in order:
        if kind not in producers or "error" in totals.get(kind, {}):
            continue
        producer, topic, _errors = producers[kind]
        try:
            r = produce_for(producer, topic, payloads, args.produce_s / slices,
                            args.txn_ms / 1000 if kind == "txn" else None, pids)
        except KafkaException as exc:
            totals[kind] = {"error": str(exc.args[0])}
            continue
        t = totals.setdefault(kind, {"messages": 0, "transactions": 0, "elapsed_s": 0.0, "broker_cpu_s": 0.0,
                                     "client_cpu_s": 0.0, "busy": []})
        for key in ("messages", "transactions", "elapsed_s", "broker_cpu_s", "client_cpu_s"):
            t[key] += r[key]
        t["busy"].append(r["host_busy_pct"])
    for kind, (producer, topic, errors) in producers.items():
        t = totals.get(kind, {"error": "not run"})
        if "error" in t:
            out[kind] = {"supported": True, "verified": False, "error": t["error"]}
            continue
        busy = t.pop("busy")
        r = {**t, "host_busy_pct": sum(busy) / len(busy)}
        hwm = sum(high_watermarks(bootstrap, topic, args.partitions))
        records = r["messages"] + (1 if kind == "plain" else 0)  # the warm-up message
        if kind == "txn":
            # One commit marker per partition a transaction touched: all of them, or fewer.
            low, high = records + r["transactions"], records + r["transactions"] * args.partitions
        else:
            low = high = records
        problems, notes = list(errors[:5]), []
        if not low <= hwm <= high:
            what = f"high watermark {hwm:,}, expected {low:,}..{high:,}"
            if tansu and low - 10000 * args.partitions <= hwm < low:
                # Tansu 0.6 answers "latest" with the last batch's base offset + 1
                # (compat_tests/peer_findings.py): short by at most one batch per partition is that bug.
                notes.append(what + " (Tansu's ListOffsets latest = last batch base + 1)")
            else:
                problems.append(what)
        out[kind] = {"supported": True, **r, **phase_rates(r, args.size), "high_watermark": hwm,
                     "verified": not problems, "errors": problems, "notes": notes}
    txn, plain = out.get("txn", {}), out.get("plain", {})
    out["ratio"] = txn["msgs"] / plain["msgs"] if txn.get("msgs") and plain.get("msgs") else NAN
    # The broker's side alone: plain CPU per message over transactional CPU per message.
    out["cpu_ratio"] = (plain["broker_us_per_msg"] / txn["broker_us_per_msg"]
                        if txn.get("broker_us_per_msg") and plain.get("broker_us_per_msg") else NAN)
    return out


# ---------------------------------------------------------------------------- (b) consume

def fill(bootstrap: str, topic: str, args, producer: Producer | None) -> tuple[bytearray, int, int]:
    """Write the fill records; returns (aborted flag per seq, transactions, aborted ones).

    Transactional when `producer` is given: every `abort_every`-th transaction is flushed
    (so its records reach the log) and then aborted. Plain otherwise."""
    payloads = Payloads(args.size)
    n = args.fill_messages
    aborted = bytearray(n)
    errors = Errors()
    plain = producer is None
    if plain:
        producer = Producer({**producer_config(bootstrap, args, None), "error_cb": errors})
    txns = aborts = 0
    i = 0
    while i < n:
        upto = min(n, i + args.fill_txn_size)
        # Aborted ones in the middle of every k, so the last transaction is a committed one and
        # both readers' last record is the log's last data record.
        abort = not plain and args.abort_every > 0 and txns % args.abort_every == args.abort_every // 2
        if not plain:
            producer.begin_transaction()
        for seq in range(i, upto):
            value = _SEQ.pack(seq) + payloads.body_at(seq)
            while True:
                try:
                    producer.produce(topic, value)
                    break
                except BufferError:
                    producer.poll(0.001)
            if abort:
                aborted[seq] = 1
        if not plain:
            if abort:
                if producer.flush(60):
                    raise RuntimeError("aborted transaction's records not delivered within 60 s")
                producer.abort_transaction(60)
                aborts += 1
            else:
                producer.commit_transaction(60)
            txns += 1
        i = upto
    if plain and producer.flush(60):
        raise RuntimeError("fill records not delivered within 60 s")
    if errors:
        raise RuntimeError(f"fill: {errors[:3]}")
    return aborted, txns, aborts


def read_all(bootstrap: str, topic: str, partitions: int, isolation: str, n: int, aborted: bytearray,
             args, pids: list[int]) -> dict:
    """Read from offset 0 to the end (EOF on every partition: the high watermark, or the
    last stable offset for read_committed). Timed from assign() to the last record, not to
    the EOF, which comes only after a further fetch has waited out fetch.wait.max.ms. The
    fill ends with a committed transaction, so both readers' last record is the same one."""
    errors = Errors()
    consumer = Consumer({**consumer_config(bootstrap, isolation, args.fetch_wait_max_ms), "error_cb": errors})
    seen = bytearray(n)
    count = dups = bad = disorder = 0
    last_offset = [-1] * partitions
    eof: set[int] = set()
    window = CpuWindow(pids)
    cpu = {"elapsed_s": NAN, "broker_cpu_s": NAN, "host_busy_pct": NAN}
    unpack = _SEQ.unpack_from
    deadline = time.monotonic() + args.read_timeout
    window.start()
    consumer.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in range(partitions)])
    while len(eof) < partitions and time.monotonic() < deadline:
        msgs = consumer.consume(10000, 0.5)
        got = False
        for m in msgs:
            err = m.error()
            if err is not None:
                if err.code() == KafkaError._PARTITION_EOF:
                    eof.add(m.partition())
                else:
                    errors.append(str(err))
                continue
            got = True
            p, off = m.partition(), m.offset()
            if off <= last_offset[p]:
                disorder += 1
            last_offset[p] = off
            seq = unpack(m.value())[0]
            if seq >= n:
                bad += 1
            elif seen[seq]:
                dups += 1
            else:
                seen[seq] = 1
                count += 1
        if got:
            cpu = window.stop()  # a reading, not an end: the window runs on to the last record
    consumer.close()
    want = bytes(1 - a for a in aborted) if isolation == "read_committed" else bytes([1]) * n
    missing = sum(1 for s, w in zip(seen, want) if w and not s)
    unwanted = sum(1 for s, w in zip(seen, want) if s and not w)
    problems = list(errors[:5])
    if len(eof) < partitions:
        problems.append(f"end not reached within {args.read_timeout} s ({len(eof)}/{partitions} partitions)")
    if missing or unwanted or dups or bad or disorder:
        problems.append(f"{missing} records missing, {unwanted} records of aborted transactions delivered, "
                        f"{dups} duplicates, {bad} foreign, {disorder} out of order")
    elapsed = cpu["elapsed_s"]
    return {"isolation": isolation, "messages": count, "elapsed_s": elapsed, "msgs": count / elapsed,
            "mbps": count * args.size / 1e6 / elapsed, "broker_cpu_s": cpu["broker_cpu_s"],
            "broker_us_per_msg": cpu["broker_cpu_s"] / count * 1e6 if count else NAN,
            "host_busy_pct": cpu["host_busy_pct"], "verified": not problems, "errors": problems}


def run_consume(bootstrap: str, args, pids: list[int], rep: int, no_txn: str | None = None) -> dict:
    """Phase (b): fill one topic, then read it alternately read_uncommitted / read_committed.
    `no_txn`: why phase (a) found no transactions (then the fill is plain at once)."""
    topic = f"txn-bench-read-{uuid.uuid4().hex[:6]}"
    create_topic(bootstrap, topic, args.partitions)
    producer, why = (None, no_txn) if no_txn else init_transactional(bootstrap, args, Errors())
    t = time.perf_counter()
    aborted, txns, aborts = fill(bootstrap, topic, args, producer)
    fill_s = time.perf_counter() - t
    reads: dict[str, list[dict]] = {"read_uncommitted": [], "read_committed": []}
    first = ["read_uncommitted", "read_committed"] if rep % 2 == 0 else ["read_committed", "read_uncommitted"]
    for k in range(args.reads):
        for isolation in (first if k % 2 == 0 else first[::-1]):
            reads[isolation].append(read_all(bootstrap, topic, args.partitions, isolation, args.fill_messages,
                                             aborted, args, pids))
    med = {iso: _med([r["elapsed_s"] for r in rs]) for iso, rs in reads.items()}
    return {"fill": "plain" if producer is None else "transactional", "fill_error": why,
            "fill_messages": args.fill_messages, "fill_transactions": txns, "fill_aborted_transactions": aborts,
            "fill_aborted_records": sum(aborted), "fill_s": fill_s, "reads": reads,
            "ratio": med["read_uncommitted"] / med["read_committed"] if med["read_committed"] else NAN,
            "verified": all(r["verified"] for rs in reads.values() for r in rs)}


# ---------------------------------------------------------------------------- one run

def run_one(target: str, args, rep: int) -> dict:
    settings = dict(s.split("=", 1) for s in args.trafka_set) if target.startswith("trafka") else None
    result: dict = {"mode": "transactions", "target": target, "repeat": rep, "size": args.size,
                    "partitions": args.partitions, "produce_s": args.produce_s, "txn_ms": args.txn_ms,
                    "linger_ms": args.linger_ms, "compression": args.compression, "machine": machine()}
    t0 = time.monotonic()
    try:
        broker = start_broker(target, settings=settings, log_dir=args.log_dir)
    except Exception as exc:
        result.update(verified=False, errors=[f"start failed: {exc}"])
        return result
    errors: list[str] = []
    try:
        if "produce" in args.only:
            result["produce"] = run_produce(broker.bootstrap, args, [broker.pid], rep, target == "tansu")
        if "consume" in args.only:
            txn = result.get("produce", {}).get("txn", {})
            no_txn = txn.get("error") if txn.get("supported") is False else None
            result["consume"] = run_consume(broker.bootstrap, args, [broker.pid], rep, no_txn)
        result["broker_rss_peak_mb"] = broker.hwm_mb()
    except Exception as exc:
        errors.append(f"{type(exc).__name__}: {exc}")
    finally:
        result["broker_exit"] = broker.stop()
    prod = result.get("produce", {})
    for kind in ("plain", "txn"):
        if prod.get(kind, {}).get("supported") and not prod[kind].get("verified"):
            errors.append(f"produce {kind}: {prod[kind].get('errors') or prod[kind].get('error')}")
    cons = result.get("consume", {})
    if cons and not cons["verified"]:
        errors += [f"{r['isolation']}: {r['errors']}" for rs in cons["reads"].values() for r in rs if not r["verified"]]
    result["errors"] = errors[:10]
    result["verified"] = not errors
    result["wall_s"] = time.monotonic() - t0
    if errors:
        result["broker_log_tail"] = broker.log_tail(15)
    return result


# ---------------------------------------------------------------------------- summary

def _med(values) -> float:
    values = [v for v in values if isinstance(v, (int, float)) and v == v]
    return statistics.median(values) if values else NAN


def _fmt(v, digits: int = 0) -> str:
    return "-" if not isinstance(v, (int, float)) or v != v else f"{v:,.{digits}f}"


def _verdict(ratio: float, target: float) -> str:
    return "-" if ratio != ratio else ("meets" if ratio >= target else "BELOW") + f" {target}"


def summarize(results: list[dict], out=sys.stdout) -> None:
    targets = list(dict.fromkeys(r["target"] for r in results))
    m = results[0].get("machine", {}) if results else {}
    print(f"\nmachine: {m.get('cpu')} x {m.get('cores')} cores ({m.get('host')}), load average at start "
          f"{m.get('loadavg')}, librdkafka {m.get('librdkafka')}; medians over repeats", file=out)

    print("\n## (a) transactional vs plain producer (idempotent, acks=all; same batching)\n", file=out)
    print("| target | repeats | plain msg/s | plain MB/s | txn msg/s | txn MB/s | txns/s | "
          "broker µs/msg plain / txn | txn/plain msg/s | target ≥ 0.8 | plain/txn broker µs | verified |", file=out)
    print("|" + "---|" * 12, file=out)
    unsupported: list[str] = []
    for t in targets:
        rs = [r for r in results if r["target"] == t and "produce" in r]
        plain = [r["produce"].get("plain", {}) for r in rs]
        txn = [r["produce"].get("txn", {}) for r in rs]
        if any(x.get("supported") is False for x in txn):
            why = next(x.get("error") for x in txn if x.get("supported") is False)
            txn_cells = ["unsupported", "-", "-"]
        else:
            why = None
            txn_cells = [_fmt(_med([x.get("msgs") for x in txn])), _fmt(_med([x.get("mbps") for x in txn]), 1),
                         _fmt(_med([x.get("transactions", 0) / x["elapsed_s"] for x in txn if x.get("elapsed_s")]), 1)]
        ratio = _med([r["produce"].get("ratio") for r in rs])
        ok = sum(1 for r in rs if all(r["produce"].get(k, {}).get("verified", True) for k in ("plain", "txn")))
        verdict = _verdict(ratio, 0.8) + ("" if ok == len(rs) else " (unverified runs)")
        print(f"| {t} | {len(rs)} | {_fmt(_med([x.get('msgs') for x in plain]))} | "
              f"{_fmt(_med([x.get('mbps') for x in plain]), 1)} | {' | '.join(txn_cells)} | "
              f"{_fmt(_med([x.get('broker_us_per_msg') for x in plain]), 2)} / "
              f"{_fmt(_med([x.get('broker_us_per_msg') for x in txn]), 2)} | {_fmt(ratio, 2)} | "
              f"{verdict} | {_fmt(_med([r['produce'].get('cpu_ratio') for r in rs]), 2)} | "
              f"{ok}/{len(rs)} |", file=out)
        if why:
            unsupported.append(f"{t}: transactions unsupported ({why})")
    for line in unsupported:
        print("\n" + line, file=out)

    print("\n## (b) read_committed vs read_uncommitted consumer (same topic, offset 0 to the end)\n", file=out)
    print("| target | fill | reads | RU msg/s | RU MB/s | RC msg/s | RC MB/s | RU s / RC s | "
          "broker µs/msg RU / RC | target ≥ 0.9 | verified |", file=out)
    print("|" + "---|" * 11, file=out)
    for t in targets:
        rs = [r["consume"] for r in results if r["target"] == t and "consume" in r]
        if not rs:
            continue
        ru = [x for c in rs for x in c["reads"]["read_uncommitted"]]
        rc = [x for c in rs for x in c["reads"]["read_committed"]]
        ratio = _med([c["ratio"] for c in rs])
        fills = sorted({c["fill"] for c in rs})
        c0 = rs[0]
        fill = (f"{'/'.join(fills)} {c0['fill_messages']:,} msgs, {c0['fill_transactions']} txns "
                f"({c0['fill_aborted_transactions']} aborted)") if fills != ["plain"] else f"plain {c0['fill_messages']:,} msgs"
        print(f"| {t} | {fill} | {len(ru)} + {len(rc)} | {_fmt(_med([x['msgs'] for x in ru]))} | "
              f"{_fmt(_med([x['mbps'] for x in ru]), 1)} | {_fmt(_med([x['msgs'] for x in rc]))} | "
              f"{_fmt(_med([x['mbps'] for x in rc]), 1)} | {_fmt(ratio, 2)} | "
              f"{_fmt(_med([x['broker_us_per_msg'] for x in ru]), 2)} / {_fmt(_med([x['broker_us_per_msg'] for x in rc]), 2)} | "
              f"{_verdict(ratio, 0.9)}{' (plain fill)' if fills == ['plain'] else ''}"
              f"{'' if all(c['verified'] for c in rs) else ' (unverified reads)'} | "
              f"{sum(c['verified'] for c in rs)}/{len(rs)} |", file=out)

    print("\nSpread over repeats (ratios min..max):", file=out)
    for t in targets:
        pr = [r["produce"]["ratio"] for r in results if r["target"] == t and "produce" in r]
        cr = [r["consume"]["ratio"] for r in results if r["target"] == t and "consume" in r]
        pr = [x for x in pr if x == x]
        print(f"- {t}: produce {_fmt(min(pr), 2) if pr else '-'}..{_fmt(max(pr), 2) if pr else '-'}, "
              f"consume {_fmt(min(cr), 2) if cr else '-'}..{_fmt(max(cr), 2) if cr else '-'}; host busy % "
              f"(consume reads) {_fmt(_med([x['host_busy_pct'] for r in results if r['target'] == t and 'consume' in r for rs in r['consume']['reads'].values() for x in rs]))}",
              file=out)
    failed = [r for r in results if not r.get("verified")]
    print(f"\n{len(results) - len(failed)}/{len(results)} runs verified.", file=out)
    for r in failed[:10]:
        print(f"- FAILED {r['target']} rep {r.get('repeat')}: {r.get('errors')}", file=out)


# ---------------------------------------------------------------------------- main

def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--targets", default="trafka,tansu", help="brokers (trafka, trafka@DIR, tansu)")
    ap.add_argument("--repeats", type=int, default=2, help="fresh broker runs per target, order alternating")
    ap.add_argument("--only", default="produce,consume", help="phases to run: produce, consume or both")
    ap.add_argument("--size", type=int, default=1024, help="message value size in bytes (>= 8)")
    ap.add_argument("--partitions", type=int, default=1)
    ap.add_argument("--compression", default="none")
    ap.add_argument("--linger-ms", type=int, default=10)
    ap.add_argument("--produce-s", type=float, default=4.0, help="(a) seconds each producer produces")
    ap.add_argument("--slices", type=int, default=4,
                    help="(a) the produce seconds are split into this many slices, plain and txn interleaved ABBA")
    ap.add_argument("--txn-ms", type=float, default=100.0, help="(a) length of one transaction")
    ap.add_argument("--fill-messages", type=int, default=100_000, help="(b) records in the topic read")
    ap.add_argument("--fill-txn-size", type=int, default=1000, help="(b) records per fill transaction")
    ap.add_argument("--abort-every", type=int, default=10, help="(b) every k-th fill transaction is aborted (0: none)")
    ap.add_argument("--reads", type=int, default=2, help="(b) reads per isolation level per run")
    ap.add_argument("--fetch-wait-max-ms", type=int, default=500)
    ap.add_argument("--init-timeout", type=float, default=8.0,
                    help="seconds for init_transactions before the broker counts as without transactions")
    ap.add_argument("--read-timeout", type=float, default=60.0)
    ap.add_argument("--trafka-set", action="append", default=[], metavar="KEY=VALUE")
    ap.add_argument("--out", default=None, help="JSONL file (default .cache/bench-results/transactions-<time>.jsonl)")
    ap.add_argument("--log-dir", default=None)
    ap.add_argument("--summarize", nargs="+", default=None, help="only print the summary of JSONL files")
    args = ap.parse_args(argv)
    if args.summarize:
        summarize(load(args.summarize))
        return 0
    args.only = set(csv(args.only))
    targets = csv(args.targets)
    out_path = args.out or os.path.join(REPO, ".cache", "bench-results",
                                        time.strftime("transactions-%Y%m%d-%H%M%S.jsonl"))
    os.makedirs(os.path.dirname(os.path.abspath(out_path)), exist_ok=True)
    m = machine()
    print(f"{len(targets) * args.repeats} runs ({len(targets)} targets x {args.repeats} repeats) -> {out_path}\n"
          f"machine: {m['cpu']} x {m['cores']} cores, load average {m['loadavg']}", flush=True)
    results = []
    started = time.monotonic()
    with open(out_path, "a") as sink:
        for rep in range(args.repeats):
            for target in (targets if rep % 2 == 0 else targets[::-1]):
                print(f"[{time.monotonic() - started:4.0f}s] {target} rep {rep + 1}", flush=True)
                r = run_one(target, args, rep)
                results.append(r)
                sink.write(json.dumps(r) + "\n")
                sink.flush()
                p, c = r.get("produce", {}), r.get("consume", {})
                pl, tx = p.get("plain", {}), p.get("txn", {})
                print(f"    produce plain {_fmt(pl.get('msgs'))} msg/s, txn "
                      + (f"{_fmt(tx.get('msgs'))} msg/s ({tx.get('transactions', 0)} txns)" if tx.get("supported")
                         else "unsupported") + f", ratio {_fmt(p.get('ratio'), 2)}; "
                      + (f"consume ({c['fill']} fill) RU s / RC s {_fmt(c['ratio'], 2)}; " if c else "")
                      + f"verified {r['verified']}" + ("" if r["verified"] else f" {r['errors'][:3]}"), flush=True)
    print(f"\nfinished in {time.monotonic() - started:.0f} s; results in {out_path}")
    summarize(results)
    return 0 if all(r.get("verified") for r in results) else 1


if __name__ == "__main__":
    sys.exit(main())
