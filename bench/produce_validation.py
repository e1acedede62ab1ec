"""What Produce's record walk costs: wire.records.check_records beside the header + CRC check.

Kafka refuses a client's batch whose records do not parse (INVALID_RECORD) even when its CRC
is right, so Produce walks every record of every batch (server/validation.py,
docs/design/produce-validation.md). The walk builds no objects; this prints its cost per batch, per
record and per byte for the batches producers send (16 KiB, the Java client's and
librdkafka's batch.size, and 1 MiB), 100 B and 1 KiB values, uncompressed, lz4 and zstd,
beside what produce paid before (header + CRC32C over the batch) and beside a full decode
(iter_records). For the whole request path, with and without the walk, use
bench/produce_path.py --against a checkout without it.

Bounded: each figure takes at most ~0.25 s of timing, the whole run well under a minute.
Run: python bench/produce_validation.py
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.records_bench import per_call_us  # noqa: E402
from wire import compression  # noqa: E402
from wire.records import Record, build_batch, check_records, iter_headers, iter_records, parse_header  # noqa: E402

SHAPES = [(16 * 1024, 100), (16 * 1024, 1024), (1024 * 1024, 100), (1024 * 1024, 1024)]
CODECS = [("none", compression.NONE), ("lz4", compression.LZ4), ("zstd", compression.ZSTD)]


def make_batch(batch_bytes: int, value_size: int, codec: int) -> bytes:
    pool = b"".join(b"trafka record payload %08d " % i for i in range(40_000))
    count = max(1, batch_bytes // (value_size + 20))
    records = [Record(i, 1_700_000_000_000 + i, b"key-%06d" % i,
                      pool[(i * 37) % (len(pool) - value_size):][:value_size], headers=[("h", b"1")] if i % 4 == 0 else [])
               for i in range(count)]
    return bytes(build_batch(records, compression=codec, producer_id=1, producer_epoch=0, base_sequence=0))


def main() -> None:
    started = time.perf_counter()
    print("produce validation costs (µs, best of rounds)")
    print(f"{'batch':>8} {'value':>6} {'codec':>5} {'records':>8} {'hdr+crc':>9} {'walk':>9} {'walk/rec':>9} "
          f"{'ns/byte':>8} {'decode/rec':>11}")
    for batch_bytes, value_size in SHAPES:
        for name, codec in CODECS:
            data = make_batch(batch_bytes, value_size, codec)
            header = parse_header(data)
            count = header.record_count
            crc_us = per_call_us(lambda: list(iter_headers(data, check_crc=True)))
            walk_us = per_call_us(lambda: check_records(data, header))
            decode_us = per_call_us(lambda: sum(1 for _ in iter_records(data)))
            raw_bytes = len(make_batch(batch_bytes, value_size, compression.NONE))
            print(f"{batch_bytes // 1024:>7}K {value_size:>6} {name:>5} {count:>8} {crc_us:>9.1f} {walk_us:>9.1f} "
                  f"{walk_us / count:>9.3f} {walk_us * 1000 / raw_bytes:>8.2f} {decode_us / count:>11.3f}")
    print(f"total {time.perf_counter() - started:.1f} s")


if __name__ == "__main__":
    main()
