"""Micro-benchmark of the message codec: µs per operation, with CRC32C beside it.

Usage: python bench/wire_bench.py [--seconds 1.0] [--json]

What is measured (each case for about --seconds, best of 5 rounds):
- Produce request carrying one ~1 MiB record batch: `decode_request` of the frame as the
  Connection holds it, then what the broker does with the batch: parse the 61-byte header
  and check the CRC (`wire.records.iter_headers`). No per-record work, so the cost must
  be flat in the number of records (10, 1 000 and 10 000 records of ~1 MiB in total).
  Also through `Connection.receive_data` + `next_request`, which adds the one copy of
  the bytes into the receive buffer that a socket read costs anyway.
- Fetch response carrying the same 1 MiB batch: dict → framed bytes (`encode_response`).
- Metadata round trip (request encode → decode, response encode → decode) at the versions
  clients use (v12 and v5), and each of the four steps.
- crc32c over the same 1 MiB, so "overhead above CRC" reads as a ratio.
- memcpy of 1 MiB (bytes(bytearray)), the floor for any step that copies the batch.

Batches are built with kafka-python's DefaultRecordBatchBuilder (a foreign builder: the
benchmark does not trust our own encoder to make its input). Bounded: about 22 cases ×
--seconds (plus calibration), well under a minute at the default. Cases that are
compared (an operation and its CRC) are timed in alternating rounds.
"""

from __future__ import annotations

import argparse
import json
import pathlib
import sys
import time
import uuid

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent.parent))

from kafka.record.default_records import DefaultRecordBatchBuilder  # noqa: E402

from wire.connection import (  # noqa: E402
    Connection,
    decode_request,
    decode_response,
    encode_request,
    encode_response,
)
from wire.records import crc32c, iter_headers  # noqa: E402

MiB = 1 << 20


def build_batch(record_count: int, total: int = MiB) -> bytes:
    """One uncompressed magic-2 batch of `record_count` records, about `total` bytes."""
    value_size = max(1, total // record_count - 12)
    value = b"v" * value_size
    builder = DefaultRecordBatchBuilder(
        magic=2, compression_type=0, is_transactional=0,
        producer_id=-1, producer_epoch=-1, base_sequence=-1, batch_size=total * 2,
    )
    for offset in range(record_count):
        builder.append(offset, timestamp=1_700_000_000_000 + offset, key=None, value=value, headers=[])
    return bytes(builder.build())


def produce_frame(batch: bytes) -> bytes:
    body = {
        "transactional_id": None,
        "acks": -1,
        "timeout_ms": 30000,
        "topic_data": [{"name": "bench", "partition_data": [{"index": 0, "records": batch}]}],
    }
    return encode_request(0, 9, 7, body, client_id="bench")


def fetch_body(batch: bytes) -> dict:
    return {
        "throttle_time_ms": 0,
        "error_code": 0,
        "session_id": 0,
        "responses": [{
            "topic": "bench",
            "partitions": [{
                "partition_index": 0,
                "error_code": 0,
                "high_watermark": 10_000,
                "last_stable_offset": 10_000,
                "log_start_offset": 0,
                "aborted_transactions": None,
                "preferred_read_replica": -1,
                "records": batch,
            }],
        }],
    }


def metadata_bodies(topics: int = 3, partitions: int = 6) -> tuple[dict, dict]:
    request = {
        "topics": [{"topic_id": uuid.UUID(int=0), "name": f"topic-{i}"} for i in range(topics)],
        "allow_auto_topic_creation": False,
        "include_topic_authorized_operations": False,
    }
    response = {
        "throttle_time_ms": 0,
        "brokers": [{"node_id": 1, "host": "127.0.0.1", "port": 9092, "rack": None}],
        "cluster_id": "trafka-bench",
        "controller_id": 1,
        "topics": [{
            "error_code": 0,
            "name": f"topic-{i}",
            "topic_id": uuid.UUID(int=i + 1),
            "is_internal": False,
            "partitions": [{
                "error_code": 0, "partition_index": p, "leader_id": 1, "leader_epoch": 0,
                "replica_nodes": [1], "isr_nodes": [1], "offline_replicas": [],
            } for p in range(partitions)],
            "topic_authorized_operations": -2147483648,
        } for i in range(topics)],
    }
    return request, response


def timeit(*fns, seconds: float, rounds: int = 7) -> list[float]:
    """CPU µs per call of each of `fns`: the best of `rounds` rounds, the functions taking
    turns round by round so that a ratio between them compares like with like.

    CPU time of this thread (`time.thread_time`), not wall time: the machine is shared,
    and time spent descheduled is not the codec's cost.
    """
    reps = []
    for fn in fns:
        fn()
        n = 1
        while True:  # calibrate: how many calls make a measurable batch
            t0 = time.thread_time()
            for _ in range(n):
                fn()
            dt = time.thread_time() - t0
            if dt > seconds / 40 or n >= 1 << 20:
                break
            n *= 4
        reps.append(max(1, int(n * seconds / rounds / len(fns) / max(dt, 1e-9))))
    best = [float("inf")] * len(fns)
    for _ in range(rounds):
        for i, (fn, count) in enumerate(zip(fns, reps)):
            t0 = time.thread_time()
            for _ in range(count):
                fn()
            best[i] = min(best[i], (time.thread_time() - t0) / count)
    return [b * 1e6 for b in best]


def run(seconds: float) -> list[dict]:
    rows: list[dict] = []

    def add(case: str, us: float, crc_us: float | None = None, records: int | None = None) -> None:
        rows.append({"case": case, "records": records, "us": round(us, 2),
                     "crc_us": None if crc_us is None else round(crc_us, 2),
                     "ratio": None if not crc_us else round(us / crc_us, 2)})

    for count in (10, 1_000, 10_000):
        batch = build_batch(count)
        frame = produce_frame(batch)
        received = bytearray(frame)  # as the Connection holds it after the socket read

        def receive_and_decode(frame=frame):
            conn = Connection()
            conn.receive_data(frame)  # the copy a socket read into the buffer costs anyway
            request = conn.next_request()
            for partition in request.body["topic_data"][0]["partition_data"]:
                for _pos, _header in iter_headers(partition["records"]):
                    pass

        def decode(view=memoryview(received)[4:]):
            request = decode_request(view)
            for partition in request.body["topic_data"][0]["partition_data"]:
                for _pos, _header in iter_headers(partition["records"]):
                    pass

        body = fetch_body(batch)
        crc_us, decode_us, receive_us, fetch_us = timeit(
            lambda b=batch: crc32c(b), decode, receive_and_decode,
            lambda body=body: encode_response(1, 12, 7, body), seconds=seconds * 3)
        add(f"produce v9 decode + header + CRC ({len(batch)} B batch)", decode_us, crc_us, count)
        add("  same, through Connection.receive_data (+1 buffer copy)", receive_us, crc_us, count)
        add(f"fetch v12 response encode ({len(batch)} B batch)", fetch_us, crc_us, count)

    batch = build_batch(1_000)
    mutable = bytearray(batch)
    crc_us, copy_us = timeit(lambda: crc32c(batch), lambda: bytes(mutable), seconds=seconds)
    add("crc32c 1 MiB", crc_us, crc_us)
    add("memcpy 1 MiB (bytes(bytearray))", copy_us, crc_us)

    for version in (12, 5):
        req_body, resp_body = metadata_bodies()
        if version < 10:
            for topic in req_body["topics"]:
                del topic["topic_id"]
        req_frame = encode_request(3, version, 1, req_body, client_id="bench")
        resp_frame = encode_response(3, version, 1, resp_body)

        def round_trip(version=version, req_body=req_body, resp_body=resp_body):
            request = decode_request(memoryview(encode_request(3, version, 1, req_body))[4:])
            frame = encode_response(3, version, request.correlation_id, resp_body)
            decode_response(3, version, memoryview(frame)[4:])

        times = timeit(
            round_trip,
            lambda: encode_request(3, version, 1, req_body),
            lambda: decode_request(memoryview(req_frame)[4:]),
            lambda: encode_response(3, version, 1, resp_body),
            lambda: decode_response(3, version, memoryview(resp_frame)[4:]),
            seconds=seconds * 3,
        )
        add(f"metadata v{version} round trip (3 topics x 6 partitions)", times[0])
        add("  request encode", times[1])
        add("  request decode (broker side)", times[2])
        add("  response encode (broker side)", times[3])
        add("  response decode", times[4])
    return rows


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=1.0, help="time spent measuring each case")
    parser.add_argument("--json", action="store_true", help="print JSON lines instead of a table")
    args = parser.parse_args(argv)
    started = time.perf_counter()
    rows = run(args.seconds)
    if args.json:
        for row in rows:
            print(json.dumps(row))
    else:
        print(f"{'case':<62} {'records':>8} {'µs/op':>10} {'crc µs':>8} {'x crc':>6}")
        for row in rows:
            print(f"{row['case']:<62} {row['records'] or '':>8} {row['us']:>10.2f} "
                  f"{'' if row['crc_us'] is None else format(row['crc_us'], '.2f'):>8} "
                  f"{'' if row['ratio'] is None else format(row['ratio'], '.2f'):>6}")
        print(f"(total {time.perf_counter() - started:.1f} s wall; µs are CPU time of the benchmark thread)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
