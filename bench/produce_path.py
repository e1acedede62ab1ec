"""CPU per Produce request through the broker's own code, in-process: decode (wire.Connection),
the Produce handler (partition lookup, validation, the append), and the response encode.

Why: the broker-capacity figures of `capacity.py` swing several-fold between identical runs
on a small VM (kernel writeback and the allocator's page faults dominate a produce of 1 MB
batches), which hides what a code change costs. This measures only the Python path, against a
log on tmpfs, with the process's user CPU time (the kernel's copying and page allocation,
the same for any version of the code, are left out) — and can run another checkout's code
beside this one's in the same run:

    python bench/produce_path.py                                  # this checkout
    git worktree add ../before REV
    python bench/produce_path.py --against ../before --repeats 5  # interleaved, with ratios

Run it on an otherwise idle machine: other load inflates CPU time too (the minimum over the
repeats is the least disturbed figure).

Shapes: 1 000 x 100 B records per request (the capacity shape in miniature) and 10 x 100 B
(small requests, where fixed per-request costs show).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
SHAPES = [(100, 1000, 8000), (100, 10, 60000)]  # value size, records per request, requests


def measure(size: int, per_request: int, requests: int) -> float:
    """µs of user CPU per Produce request, with the code on sys.path[0]."""
    import trio

    from server.broker import Broker
    from server.config import load_config
    from server.context import RequestContext
    import server.handlers.produce as produce
    from wire import ApiKey, Connection, encode_request
    from wire.connection import encode_response
    from wire.records import Record, build_batch

    async def run() -> float:
        data_dir = tempfile.mkdtemp(dir="/dev/shm" if os.path.isdir("/dev/shm") else None)
        broker = Broker(load_config(overrides={"log.dirs": data_dir}, environ={}))
        broker.open()
        broker.create_topic("t", 1)
        batch = bytes(build_batch([Record(i, 1_700_000_000_000, None, b"x" * size) for i in range(per_request)]))
        frame = encode_request(ApiKey.PRODUCE, 9, 1, {
            "transactional_id": None, "acks": 1, "timeout_ms": 1000,
            "topic_data": [{"name": "t", "partition_data": [{"index": 0, "records": batch}]}]})
        code = RequestContext.__init__.__code__
        if "session" in code.co_varnames[:code.co_argcount]:
            from server.session import Session
            ctx = RequestContext(broker, Session("127.0.0.1", 1), ApiKey.PRODUCE, 9, 1, "bench")
        else:  # checkouts from before the Session (a985a83 and older)
            ctx = RequestContext(broker, ApiKey.PRODUCE, 9, 1, "bench", "127.0.0.1", 1)
        conn = Connection(200 << 20)
        t0 = os.times().user
        for _ in range(requests):
            conn.receive_data(frame)
            request = conn.next_request()
            body = await produce.handle(ctx, request.body)
            encode_response(ApiKey.PRODUCE, 9, request.correlation_id, body)
        cpu = os.times().user - t0
        broker.close()
        shutil.rmtree(data_dir, ignore_errors=True)
        return cpu / requests * 1e6

    return trio.run(run)


def _child(checkout: str, size: int, per_request: int, requests: int) -> float:
    out = subprocess.run([sys.executable, __file__, "--child", checkout, str(size), str(per_request), str(requests)],
                         capture_output=True, text=True, check=True, cwd=checkout,
                         env={**os.environ, "PYTHONPATH": checkout})
    return json.loads(out.stdout.strip().splitlines()[-1])["us"]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--against", help="another checkout to measure beside this one (interleaved)")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--child", nargs=4, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        checkout, size, per_request, requests = args.child
        sys.path.insert(0, checkout)
        print(json.dumps({"us": measure(int(size), int(per_request), int(requests))}))
        return
    targets = {"this": str(REPO)}
    if args.against:
        targets["against"] = str(Path(args.against).resolve())
    for size, per_request, requests in SHAPES:
        results: dict[str, list[float]] = {name: [] for name in targets}
        for rep in range(args.repeats):
            order = list(targets.items()) if rep % 2 == 0 else list(reversed(targets.items()))
            for name, checkout in order:
                results[name].append(_child(checkout, size, per_request, requests))
        line = f"{per_request:5d} x {size} B per request:"
        for name, values in results.items():
            line += f"  {name} {statistics.median(values):6.1f} µs (min {min(values):.1f}, max {max(values):.1f})"
        if "against" in results:
            # The minimum is the repeat least disturbed by other load (CPU time still grows
            # with cache and memory-bandwidth contention); the median is shown as well.
            line += (f"  this/against: min {min(results['this']) / min(results['against']):.2f}, "
                     f"median {statistics.median(results['this']) / statistics.median(results['against']):.2f}")
        print(line, flush=True)


if __name__ == "__main__":
    main()
