"""Fetch sessions (KIP-227) vs sessionless fetches: bytes on the wire and broker CPU per round.

Why: a consumer of many partitions without a session sends every partition in every Fetch
and gets every partition back; with a session it sends only the partitions whose fetch
offset moved and gets back only those with news. This measures what that saves on one
broker, for a consumer of 1 000 partitions, in one run: two raw consumers (bench/rawclient.py,
Fetch v12), one sessionless (session_id 0, epoch -1: what librdkafka and aiokafka send) and
one with a session (what the Java consumer and kafka-python do), alternating in blocks of
rounds so that both see the same broker state and the same machine load.

Shapes:
- idle: every partition caught up (fetch at the high watermark, max_wait_ms 0): the answer
  has no records; the sessionless one still lists 1 000 partitions, the incremental one none;
- active: ACTIVE partitions have a backlog of one-batch steps (partition_max_bytes = one
  batch), so each round returns one batch of each active partition and the consumer moves
  their offsets on; the other partitions stay idle. No produce during the measurement, so the
  broker CPU is the fetches' only.

Broker CPU is user+system time of the broker process from /proc (bench/brokers.py), per
fetch round (request sent, response read). Bytes are whole frames, size prefix included.

    python bench/fetch_sessions.py [--partitions 1000] [--rounds 200] [--blocks 4]
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.brokers import start_broker  # noqa: E402
from bench.rawclient import RawClient, make_batch  # noqa: E402
from wire.connection import decode_response, encode_request  # noqa: E402

FETCH = 1
VERSION = 12
ACTIVE = 5
BATCH_RECORDS = 10
VALUE_SIZE = 100


def _partition(p: int, offset: int, max_bytes: int) -> dict:
    return {"partition": p, "current_leader_epoch": -1, "fetch_offset": offset, "last_fetched_epoch": -1,
            "log_start_offset": -1, "partition_max_bytes": max_bytes}


class Consumer:
    """A raw consumer of one topic, with or without a fetch session."""

    def __init__(self, bootstrap: str, topic: str, offsets: dict[int, int], session: bool, max_bytes: int) -> None:
        self.client = RawClient(bootstrap)
        self.topic = topic
        self.offsets = dict(offsets)
        self.use_session = session
        self.max_bytes = max_bytes
        self.session_id = 0
        self.epoch = 0 if session else -1
        self.changed: set[int] = set()

    def _body(self) -> dict:
        if self.use_session and self.session_id:
            parts = [_partition(p, self.offsets[p], self.max_bytes) for p in sorted(self.changed)]
        else:
            parts = [_partition(p, o, self.max_bytes) for p, o in self.offsets.items()]
        return {"replica_id": -1, "max_wait_ms": 0, "min_bytes": 1, "max_bytes": 50 << 20, "isolation_level": 0,
                "session_id": self.session_id, "session_epoch": self.epoch,
                "topics": [{"topic": self.topic, "partitions": parts}] if parts else [],
                "forgotten_topics_data": [], "rack_id": ""}

    def round(self) -> tuple[int, int, int]:
        """One fetch: (request bytes, response bytes, partitions listed in the answer)."""
        frame = encode_request(FETCH, VERSION, 0, self._body(), client_id="bench")
        self.client.send(FETCH, VERSION, {}, frame=frame)
        answer = self.client._read_frame()
        self.client._pending.clear()
        _corr, body = decode_response(FETCH, VERSION, answer)
        if body["error_code"]:
            raise RuntimeError(f"fetch error {body['error_code']}")
        self.changed.clear()
        listed = 0
        for topic in body["responses"]:
            for part in topic["partitions"]:
                listed += 1
                records = part["records"] or b""
                if part["error_code"]:
                    raise RuntimeError(f"partition error {part}")
                if records:
                    self.offsets[part["partition_index"]] += BATCH_RECORDS * (len(records) // self.batch_size)
                    self.changed.add(part["partition_index"])
        if self.use_session:
            if self.session_id == 0:
                self.session_id = body["session_id"]
                if self.session_id == 0:
                    raise RuntimeError("no session given")
                self.epoch = 1
            else:
                self.epoch += 1
        return len(frame), len(answer) + 4, listed

    batch_size = 0


def run(partitions: int, rounds: int, blocks: int) -> list[dict]:
    broker = start_broker("trafka")
    try:
        admin = RawClient(broker.bootstrap)
        results = []
        for shape in ("idle", "active"):
            topic = f"fs-{shape}"
            assert admin.create_topic(topic, partitions) == 0
            admin.wait_topic(topic, partitions)
            batch = bytes(make_batch(BATCH_RECORDS, VALUE_SIZE))
            Consumer.batch_size = len(batch)
            # every partition gets one batch; the active ones a backlog for every round of both consumers
            frame = admin.produce_frame(topic, {p: batch for p in range(partitions)})
            admin.send(0, 9, {}, frame=frame)
            admin.recv()
            if shape == "active":
                backlog = rounds * blocks + 2
                frame = admin.produce_frame(topic, {p: batch for p in range(ACTIVE)})
                for _ in range(backlog):
                    admin.send(0, 9, {}, frame=frame)
                for _ in range(backlog):
                    admin.recv()
            start = {p: BATCH_RECORDS for p in range(partitions)}
            if shape == "active":
                start.update({p: 0 for p in range(ACTIVE)})
            consumers = {mode: Consumer(broker.bootstrap, topic, start, mode == "session", len(batch))
                         for mode in ("sessionless", "session")}
            consumers["session"].round()  # the full fetch that creates the session
            consumers["sessionless"].round()  # (one round each, so both are equally far along)
            totals = {mode: {"req": 0, "resp": 0, "listed": 0, "cpu": [], "rounds": 0} for mode in consumers}
            for block in range(blocks):
                order = ("sessionless", "session") if block % 2 == 0 else ("session", "sessionless")
                for mode in order:
                    consumer = consumers[mode]
                    cpu0 = broker.cpu_s()
                    for _ in range(rounds):
                        req, resp, listed = consumer.round()
                        t = totals[mode]
                        t["req"] += req
                        t["resp"] += resp
                        t["listed"] += listed
                        t["rounds"] += 1
                    totals[mode]["cpu"].append((broker.cpu_s() - cpu0) / rounds)
            for mode, t in totals.items():
                n = t["rounds"]
                results.append({"shape": shape, "mode": mode, "partitions": partitions,
                                "request_bytes": t["req"] / n, "response_bytes": t["resp"] / n,
                                "listed": t["listed"] / n,
                                "broker_cpu_us": statistics.median(t["cpu"]) * 1e6,
                                "broker_cpu_us_min": min(t["cpu"]) * 1e6})
            for consumer in consumers.values():
                consumer.client.close()
        admin.close()
        return results
    finally:
        broker.stop()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--partitions", type=int, default=1000)
    parser.add_argument("--rounds", type=int, default=200, help="fetch rounds per block")
    parser.add_argument("--blocks", type=int, default=4, help="alternating blocks per mode")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    results = run(args.partitions, args.rounds, args.blocks)
    if args.json:
        print(json.dumps(results, indent=1))
        return
    print(f"{args.partitions} partitions, Fetch v{VERSION}, {ACTIVE} active partitions in 'active', "
          f"{args.rounds} rounds x {args.blocks} blocks per mode (interleaved)")
    print(f"{'shape':<8}{'mode':<13}{'req B/round':>12}{'resp B/round':>14}{'listed':>8}"
          f"{'broker CPU µs/round (median, min)':>36}")
    for r in results:
        print(f"{r['shape']:<8}{r['mode']:<13}{r['request_bytes']:>12.0f}{r['response_bytes']:>14.0f}"
              f"{r['listed']:>8.0f}{r['broker_cpu_us']:>26.0f}, {r['broker_cpu_us_min']:.0f}")


if __name__ == "__main__":
    main()
