"""Record-batch costs: what produce pays per batch, and what decoding records costs.

Produce validates a batch by parsing the 61-byte header and checking the CRC32C;
nothing looks at records, so the cost must stay flat in the number of records
and close to the bare CRC. This prints, for a 1 MiB batch of 10, 1 000 and
10 000 records:

- validate: `iter_headers(..., check_crc=True)` over the batch (header + CRC),
- crc32c:   the bare crc32c over the same bytes, and the ratio between them,
- patch:    `patch_base_offset` + `patch_leader_epoch` (what produce writes),
- lat:      `set_log_append_time` (rewrites the CRC: one more pass),
- iter:     `iter_records` per record, for reference (never on the hot path),
  uncompressed and lz4.

Bounded: each figure takes at most ~0.25 s of timing, the whole run well under
30 s. Run: python bench/records_bench.py
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from wire import compression  # noqa: E402
from wire.records import (  # noqa: E402
    CRC_START,
    Record,
    build_batch,
    crc32c,
    iter_headers,
    iter_records,
    patch_base_offset,
    patch_leader_epoch,
    set_log_append_time,
)

BATCH_BYTES = 1024 * 1024
RECORD_COUNTS = (10, 1_000, 10_000)
BUDGET_S = 0.25


def per_call_us(func, budget: float = BUDGET_S) -> float:
    """Best-of-rounds µs per call, spending about ``budget`` seconds."""
    func()  # warm up
    start = time.perf_counter()
    func()
    once = max(time.perf_counter() - start, 1e-7)
    per_round = max(1, int(budget / 5 / once))
    best = float("inf")
    deadline = time.perf_counter() + budget
    rounds = 0
    while rounds < 3 or (time.perf_counter() < deadline and rounds < 50):
        t0 = time.perf_counter()
        for _ in range(per_round):
            func()
        best = min(best, (time.perf_counter() - t0) / per_round)
        rounds += 1
    return best * 1e6


def make_batch(count: int, codec: int = compression.NONE) -> bytearray:
    """A batch of ``count`` records whose total size is about 1 MiB."""
    # Varied but compressible bytes, like real payloads.
    pool = b"".join(b"trafka record payload %08d " % i for i in range(40_000))
    value_size = BATCH_BYTES // count
    for _ in range(2):  # second pass corrects for the per-record overhead
        records = []
        for i in range(count):
            start = (i * 37) % (len(pool) - value_size - 1)
            records.append(Record(i, 1_700_000_000_000 + i, b"key-%06d" % i, pool[start:start + value_size]))
        uncompressed = build_batch(records)
        value_size -= -(-(len(uncompressed) - BATCH_BYTES) // count)
    return build_batch(records, compression=codec, producer_id=1, producer_epoch=0, base_sequence=0)


def main() -> None:
    started = time.perf_counter()
    print(f"record batch costs, {BATCH_BYTES // 1024} KiB batches (µs per operation, best of rounds)")
    print(f"{'records':>8} {'bytes':>9} {'validate':>9} {'crc32c':>8} {'ratio':>6} "
          f"{'patch':>7} {'lat':>8} {'iter/rec':>9} {'lz4 iter/rec':>13}")
    validates = []
    for count in RECORD_COUNTS:
        batch = make_batch(count)
        data = bytes(batch)
        view = memoryview(data)[CRC_START:]

        def validate() -> None:
            for _pos, _header in iter_headers(data, check_crc=True):
                pass

        def bare_crc() -> None:
            crc32c(view)

        def patch() -> None:
            patch_base_offset(batch, 123_456)
            patch_leader_epoch(batch, 7)

        def log_append_time() -> None:
            set_log_append_time(batch, 1_800_000_000_000)

        validate_us = per_call_us(validate)
        crc_us = per_call_us(bare_crc)
        patch_us = per_call_us(patch)
        lat_us = per_call_us(log_append_time)
        iter_us = per_call_us(lambda: sum(1 for _ in iter_records(data)), budget=0.5) / count
        lz4_data = bytes(make_batch(count, compression.LZ4))
        lz4_us = per_call_us(lambda: sum(1 for _ in iter_records(lz4_data)), budget=0.5) / count
        validates.append(validate_us)
        print(f"{count:>8} {len(data):>9} {validate_us:>9.1f} {crc_us:>8.1f} {validate_us / crc_us:>6.2f} "
              f"{patch_us:>7.2f} {lat_us:>8.1f} {iter_us:>9.2f} {lz4_us:>13.2f}")
    spread = max(validates) / min(validates)
    print(f"validate max/min across record counts: {spread:.2f} (flat means ~1)")
    print(f"total {time.perf_counter() - started:.1f} s")


if __name__ == "__main__":
    main()
