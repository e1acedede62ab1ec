"""Storage benchmark: append and read throughput against raw file I/O, and lookup cost.

Usage: python bench/storage_bench.py [--mib 128] [--always-mib 32] [--repeats 3] [--chunk-mib 8]
           [--read-mib 128] [--segments 1,100,10000] [--lookups 5000]
           [--only append,read,lookup] [--dir .cache/bench-tmp/storage] [--json FILE]

What is measured (every figure is printed with the baseline measured in the same run):

- Append: `PartitionLog.append` of one pre-built 1 MiB batch (1000 records of ~1 KiB)
  or 16 KiB batch (16 records), over and over, with trafka.fsync.policy never / interval
  (flush.ms=200) / always, against the same bytes written with a plain sequential
  `os.write` loop (never), `os.write` + `fdatasync` every 200 ms (interval), and
  `os.write` + `fdatasync` per write (always). Raw and log writes alternate every
  --chunk-mib within one run (two files growing side by side), so both see the same
  background load; runs are repeated and the figures are medians. The ratio is log / raw
  throughput (target >= 0.8); the CPU ratio (raw CPU / log CPU per append) is the same
  comparison without the noise of other processes, and shows the per-batch overhead
  (offsets patched, an index entry; no record is decoded). The log reserves disk blocks
  ahead of its active segment (trafka.preallocate.bytes; not under "always"), which the
  raw loop does not: the "no-reserve ratio" column is the same log with it switched off,
  measured in the same interleaving, so what the reservation contributes is on show.
- Read: sequential `PartitionLog.read(offset, 1 MiB)` over a log of 1 MiB batches and of
  16 KiB batches, against `os.pread` of 1 MiB chunks of the same file; warm (page cache)
  and cold (after `sync; echo 3 > /proc/sys/vm/drop_caches`, when allowed; otherwise it
  says so and skips cold; raw-then-log and log-then-raw, averaged, as in a VM the second
  read of a file after a drop is partly served by the host's cache).
- Lookup: µs per `read(offset, 1)` and per `offset_for_timestamp` at random offsets, for
  the same 20 000 batches spread over 1, 100 and 10 000 segments (must stay about flat:
  two bisections, segment list then sparse index), plus clean and unclean open times.

Bounded: about a minute at the defaults (disk permitting); data goes under --dir and is
removed afterwards.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import pathlib
import random
import resource
import shutil
import statistics
import struct
import sys
import time

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent.parent))

from kafka.record.default_records import DefaultRecordBatchBuilder  # noqa: E402

from storage import LogConfig, PartitionLog  # noqa: E402
from storage.config import LONG_MAX  # noqa: E402

MiB = 1024 * 1024
T0 = 1_700_000_000_000
INTERVAL_MS = 200


def build_batch(records: int, value_size: int, timestamp: int = T0) -> bytearray:
    builder = DefaultRecordBatchBuilder(magic=2, compression_type=0, is_transactional=0, producer_id=-1,
                                        producer_epoch=-1, base_sequence=-1, batch_size=1 << 30)
    value = os.urandom(value_size)
    for i in range(records):
        builder.append(i, timestamp=timestamp + i, key=b"key-%06d" % i, value=value, headers=[])
    return builder.build()


def fresh_dir(root: pathlib.Path, name: str) -> pathlib.Path:
    path = root / name
    shutil.rmtree(path, ignore_errors=True)
    path.mkdir(parents=True)
    return path


# -- append -----------------------------------------------------------------------------


_FLOOR_FIELDS = struct.Struct(">8xi4xb6xi8xq14xi")  # batchLength, magic, lastOffsetDelta, maxTimestamp, count
_FLOOR_PATCH = struct.Struct(">qii")


def floor_append(fd: int, batch: bytearray, state: list[int]) -> None:
    """The least Python any log must run per append, as a reference: read the header
    fields, check the batch is whole, patch the base offset, one pwrite, advance position
    and next offset. No lock, no roll checks, no index, no result: not a usable log."""
    length, magic, lod, _max_ts, _count = _FLOOR_FIELDS.unpack_from(batch, 0)
    if length + 12 != len(batch) or magic != 2:
        raise ValueError("not a whole batch")
    position, offset = state
    _FLOOR_PATCH.pack_into(batch, 0, offset, length, 0)
    os.pwrite(fd, batch, position)
    state[0] = position + len(batch)
    state[1] = offset + lod + 1


def interleaved_append(work: pathlib.Path, batch: bytearray, total: int, policy: str, chunk_bytes: int) -> dict:
    """Append ``total`` bytes twice, raw and through PartitionLog, alternating in chunks of
    ``chunk_bytes`` so both see the same background load and page-cache state. Under
    "never" and "interval" the same log without block reservation takes the bytes too,
    and under "never" one more file takes them through `floor_append`."""
    config = LogConfig(flush_policy=policy, flush_interval_ms=INTERVAL_MS if policy == "interval" else LONG_MAX,
                       max_message_bytes=2 * MiB)
    plog = PartitionLog.open(work / "bench-0", config)
    plain = PartitionLog.open(work / "plain-0", dataclasses.replace(config, preallocate_bytes=0)) if policy != "always" else None
    fd = os.open(work / "raw.log", os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    floor_fd = os.open(work / "floor.log", os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    floor_state = [0, 0]
    kinds = ["raw", "log"] + (["plain"] if plain else []) + (["floor"] if policy == "never" else [])
    records = int.from_bytes(batch[57:61], "big")
    per_chunk = max(1, chunk_bytes // len(batch))
    count = max(1, total // len(batch))
    spent = {kind: [0.0, 0.0] for kind in kinds}  # wall, cpu
    last_sync = time.perf_counter()
    append = plog.append
    done = 0
    try:
        turn = 0
        while done < count:
            n = min(per_chunk, count - done)
            for kind in (kinds if turn % 2 == 0 else kinds[::-1]):
                cpu0, t0 = time.process_time(), time.perf_counter()
                if kind == "raw":
                    for _ in range(n):
                        os.write(fd, batch)
                        if policy == "always":
                            os.fdatasync(fd)
                        elif policy == "interval":
                            now = time.perf_counter()
                            if (now - last_sync) * 1000 >= INTERVAL_MS:
                                os.fdatasync(fd)
                                last_sync = now
                elif kind == "floor":
                    for _ in range(n):
                        floor_append(floor_fd, batch, floor_state)
                elif kind == "plain":
                    plain_append = plain.append
                    for _ in range(n):
                        plain_append(batch, records)
                else:
                    for _ in range(n):
                        append(batch, records)
                spent[kind][0] += time.perf_counter() - t0
                spent[kind][1] += time.process_time() - cpu0
            done += n
            turn += 1
    finally:
        os.close(fd)
        os.close(floor_fd)
        plog.close()
        if plain:
            plain.close()
    nbytes = count * len(batch)
    out = {"mib": nbytes / MiB}
    for kind in kinds:
        out[f"{kind}_MBps"] = nbytes / spent[kind][0] / 1e6
        out[f"{kind}_cpu_us_per_op"] = spent[kind][1] / count * 1e6
    return out


def bench_append(root: pathlib.Path, args, results: dict) -> None:
    print("\n== append: PartitionLog.append vs raw sequential os.write, interleaved in the same run ==")
    print("   (never: os.write; interval: os.write + fdatasync every 200 ms; always: os.write + fdatasync)")
    print("   no-reserve: the same log with trafka.preallocate.bytes=0 (the raw loop reserves no blocks either)")
    print("   floor (policy never): the bare minimum of Python per append (header read, offset patch, one")
    print("   pwrite into a plain file; no lock, no index, no roll checks)")
    print(f"{'batch':>7} {'policy':>8} {'MiB':>5} {'raw MB/s':>10} {'log MB/s':>10} {'ratio':>6} {'min..max':>11}"
          f" {'raw CPU us/op':>13} {'log CPU us/op':>13} {'CPU ratio':>9} {'no-reserve ratio':>16}"
          f" {'floor ratio':>11}")
    cases = [("1 MiB", build_batch(1000, 1000)), ("16 KiB", build_batch(16, 1000))]
    for label, batch in cases:
        for policy in ("never", "interval", "always"):
            mib = args.always_mib if policy == "always" else args.mib
            runs = []
            for _ in range(args.repeats):
                work = fresh_dir(root, "append")
                runs.append(interleaved_append(work, batch, mib * MiB, policy, args.chunk_mib * MiB))
                shutil.rmtree(work, ignore_errors=True)
            ratios = [r["log_MBps"] / r["raw_MBps"] for r in runs]
            med = lambda key: statistics.median(r[key] for r in runs)  # noqa: E731
            row = {
                "batch": label, "policy": policy, "mib": runs[0]["mib"],
                "raw_MBps": med("raw_MBps"), "log_MBps": med("log_MBps"), "ratio": statistics.median(ratios),
                "ratios": ratios,
                "raw_cpu_us_per_op": med("raw_cpu_us_per_op"), "log_cpu_us_per_op": med("log_cpu_us_per_op"),
            }
            row["cpu_ratio"] = row["raw_cpu_us_per_op"] / row["log_cpu_us_per_op"]
            floor = f"{statistics.median(r['floor_MBps'] / r['raw_MBps'] for r in runs):11.2f}" \
                if "floor_MBps" in runs[0] else f"{'-':>11}"
            if "floor_MBps" in runs[0]:
                row["floor_ratio"] = float(floor)
            plain = f"{statistics.median(r['plain_MBps'] / r['raw_MBps'] for r in runs):16.2f}" \
                if "plain_MBps" in runs[0] else f"{'-':>16}"
            if "plain_MBps" in runs[0]:
                row["no_reserve_ratio"] = float(plain)
            results.setdefault("append", []).append(row)
            print(f"{label:>7} {policy:>8} {row['mib']:5.0f} {row['raw_MBps']:10.0f} {row['log_MBps']:10.0f}"
                  f" {row['ratio']:6.2f} {min(ratios):5.2f}..{max(ratios):<5.2f}"
                  f" {row['raw_cpu_us_per_op']:13.1f} {row['log_cpu_us_per_op']:13.1f} {row['cpu_ratio']:9.2f}"
                  f" {plain} {floor}")


# -- read -------------------------------------------------------------------------------


def drop_caches() -> str | None:
    """None if the page cache was dropped, else why not."""
    try:
        os.sync()
        with open("/proc/sys/vm/drop_caches", "w") as f:
            f.write("3\n")
        return None
    except OSError as exc:
        return f"{type(exc).__name__}: {exc}"


def read_log(plog: PartitionLog, max_bytes: int) -> int:
    offset = plog.log_start_offset
    total = 0
    read = plog.read
    end = plog.log_end_offset
    while offset < end:
        data = read(offset, max_bytes)
        total += len(data)
        # Next offset: last batch's base + lastOffsetDelta + 1, from the header of the last
        # batch (the reader knows where it starts from the index walk; here, re-walk cheaply).
        pos = 0
        while True:
            size = int.from_bytes(data[pos + 8:pos + 12], "big") + 12
            if pos + size >= len(data):
                break
            pos += size
        offset = int.from_bytes(data[pos:pos + 8], "big") + int.from_bytes(data[pos + 23:pos + 27], "big") + 1
    return total


def read_raw(path: pathlib.Path, chunk: int = MiB) -> int:
    fd = os.open(path, os.O_RDONLY)
    try:
        pos = 0
        while True:
            data = os.pread(fd, chunk, pos)
            if not data:
                return pos
            pos += len(data)
    finally:
        os.close(fd)


def bench_read(root: pathlib.Path, args, results: dict) -> None:
    print("\n== read: sequential PartitionLog.read(offset, 1 MiB) vs os.pread 1 MiB chunks of the same file ==")
    print(f"{'batches':>8} {'cache':>6} {'MiB':>5} {'raw MB/s':>10} {'log MB/s':>10} {'ratio':>6}")
    for label, batch in (("1 MiB", build_batch(1000, 1000)), ("16 KiB", build_batch(16, 1000))):
        work = fresh_dir(root, "read")
        plog = PartitionLog.open(work / "bench-0", LogConfig(max_message_bytes=2 * MiB))
        for _ in range(max(1, args.read_mib * MiB // len(batch))):
            plog.append(batch)
        plog.flush()
        segment_path = plog.segments[0].log_path
        for cache in ("warm", "cold"):
            # Cold: both orders, averaged. The file is read first after a drop_caches from
            # the disk and then, in a VM, largely from the host's cache: whichever goes
            # second would look faster.
            samples: dict[str, list[float]] = {"raw": [], "log": []}
            skipped = None
            for order in (("raw", "log"), ("log", "raw")) if cache == "cold" else (("raw", "log"),):
                for kind in order:
                    if cache == "cold":
                        skipped = drop_caches()
                        if skipped is not None:
                            break
                    else:
                        read_raw(segment_path)  # make sure it is cached
                    t0 = time.perf_counter()
                    total = read_raw(segment_path) if kind == "raw" else read_log(plog, MiB)
                    samples[kind].append(total / (time.perf_counter() - t0) / 1e6)
                if skipped is not None:
                    print(f"{label:>8} {'cold':>6}  skipped: cannot drop the page cache ({skipped})")
                    results.setdefault("read", []).append({"batches": label, "cache": "cold", "skipped": skipped})
                    break
            rates = {kind: statistics.mean(values) for kind, values in samples.items() if values}
            if skipped is None and len(rates) == 2:
                row = {"batches": label, "cache": cache, "mib": plog.segments[0].size / MiB,
                       "raw_MBps": rates["raw"], "log_MBps": rates["log"], "ratio": rates["log"] / rates["raw"]}
                results.setdefault("read", []).append(row)
                print(f"{label:>8} {cache:>6} {row['mib']:5.0f} {rates['raw']:10.0f} {rates['log']:10.0f}"
                      f" {row['ratio']:6.2f}")
        plog.close()
        shutil.rmtree(work, ignore_errors=True)


# -- lookup -----------------------------------------------------------------------------


def bench_lookup(root: pathlib.Path, args, results: dict) -> None:
    total_batches = 20_000
    batch = build_batch(1, 60)  # ~130 bytes
    print(f"\n== lookup: the same {total_batches} batches over N segments, random offsets ==")
    print(f"{'segments':>9} {'read(o,1) us':>13} {'locate us':>10} {'by time us':>11}"
          f" {'open clean s':>13} {'open crash s':>13} {'build s':>8}")
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    needed = max(args.segments) + 1000
    if soft < needed:
        resource.setrlimit(resource.RLIMIT_NOFILE, (min(hard, needed), hard))
    rng = random.Random(1)
    base_cost = None
    for n in args.segments:
        work = fresh_dir(root, "lookup")
        per_segment = -(-total_batches // n)
        # LogAppendTime stamps batch i with T0 + i: distinct, increasing timestamps.
        config = LogConfig(segment_bytes=per_segment * len(batch), index_interval_bytes=4096,
                           message_timestamp_type="LogAppendTime")
        t0 = time.perf_counter()
        plog = PartitionLog.open(work / "bench-0", config, now_ms=T0)
        for i in range(total_batches):
            plog.append(bytearray(batch), now_ms=T0 + i)
        build_s = time.perf_counter() - t0
        segments = len(plog.segments)
        offsets = [rng.randrange(total_batches) for _ in range(args.lookups)]
        t0 = time.perf_counter()
        for offset in offsets:
            plog.read(offset, 1)
        read_us = (time.perf_counter() - t0) / len(offsets) * 1e6
        t0 = time.perf_counter()
        for offset in offsets:
            plog.read_location(offset, 1)
        locate_us = (time.perf_counter() - t0) / len(offsets) * 1e6
        stamps = [T0 + rng.randrange(total_batches) for _ in range(args.lookups)]
        t0 = time.perf_counter()
        for ts in stamps:
            assert plog.offset_for_timestamp(ts) == (ts - T0, ts)
        by_time_us = (time.perf_counter() - t0) / len(stamps) * 1e6
        plog.close()
        t0 = time.perf_counter()
        plog = PartitionLog.open(work / "bench-0", config, clean=True, now_ms=T0)
        open_clean = time.perf_counter() - t0
        plog.close()
        t0 = time.perf_counter()
        plog = PartitionLog.open(work / "bench-0", config, clean=False, now_ms=T0)
        open_crash = time.perf_counter() - t0
        assert plog.log_end_offset == total_batches
        plog.close()
        shutil.rmtree(work, ignore_errors=True)
        base_cost = base_cost or locate_us
        row = {"segments": segments, "read_us": read_us, "locate_us": locate_us, "by_time_us": by_time_us,
               "open_clean_s": open_clean, "open_unclean_s": open_crash, "build_s": build_s,
               "locate_vs_1_segment": locate_us / base_cost}
        results.setdefault("lookup", []).append(row)
        print(f"{segments:9d} {read_us:13.1f} {locate_us:10.1f} {by_time_us:11.1f} {open_clean:13.3f}"
              f" {open_crash:13.3f} {build_s:8.2f}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dir", default=str(pathlib.Path(__file__).resolve().parent.parent / ".cache" / "bench-tmp" / "storage"))
    parser.add_argument("--mib", type=int, default=128, help="MiB appended per run (never, interval)")
    parser.add_argument("--always-mib", type=int, default=32, help="MiB appended per run with fsync always")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--chunk-mib", type=int, default=8, help="raw and log alternate every this many MiB")
    parser.add_argument("--read-mib", type=int, default=128)
    parser.add_argument("--segments", default="1,100,10000")
    parser.add_argument("--lookups", type=int, default=5000)
    parser.add_argument("--only", default="append,read,lookup")
    parser.add_argument("--json", help="write the figures to this file")
    args = parser.parse_args()
    args.segments = [int(x) for x in args.segments.split(",")]
    root = pathlib.Path(args.dir)
    root.mkdir(parents=True, exist_ok=True)
    results: dict = {"args": {k: v for k, v in vars(args).items()}}
    started = time.perf_counter()
    try:
        only = set(args.only.split(","))
        if "append" in only:
            bench_append(root, args, results)
        if "read" in only:
            bench_read(root, args, results)
        if "lookup" in only:
            bench_lookup(root, args, results)
    finally:
        shutil.rmtree(root, ignore_errors=True)
    results["seconds"] = time.perf_counter() - started
    print(f"\n(total {results['seconds']:.1f} s)")
    if args.json:
        pathlib.Path(args.json).write_text(json.dumps(results, indent=1))


if __name__ == "__main__":
    main()
