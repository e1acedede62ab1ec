"""Produce realistic click events into a topic: keys, headers and out-of-order event times.

Events follow a synthetic timeline: record i "arrives" at --start + i * --spacing-ms (that is
its Kafka timestamp), and happened a little earlier (event_time = arrival - lateness, lateness
mostly small, at most --skew-ms), so event times are out of order by up to --skew-ms, as on a
mobile client that buffers. Pages are picked with a skewed popularity, actions depend on the
page (only product pages get add_to_cart, only /checkout gets purchase). The key is the user
id, so one user's events stay in one partition, in order. Headers: event-id (a UUID),
source, content-type and schema-version. The same --seed gives the same events.

Value example:
    {"user": "u007", "page": "/product/3", "action": "click", "event_time": "2025-03-01T12:00:03.250Z",
     "session": "s0007-2", "seq": 41}

Prints a JSON summary (records per partition, event-time range) when done. Uses the
confluent-kafka producer with idempotence and acks=all.

Usage:
    python -m spark_jobs.generate --bootstrap 127.0.0.1:9092 --topic events --count 10000 \\
        [--start 2025-03-01T12:00:00Z | --start now] [--spacing-ms 100] [--skew-ms 30000] \\
        [--users 50] [--seed 1] [--rate 2000]
"""

from __future__ import annotations

import argparse
import json
import random
import sys
import time
import uuid
from collections import Counter
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import Iterable, Iterator

PAGES = ["/", "/search", "/product/1", "/product/2", "/product/3", "/product/4", "/cart", "/checkout", "/help"]
# Popularity: the home page and search dominate, help is rare (roughly Zipf-like).
PAGE_WEIGHTS = [30, 20, 12, 9, 7, 5, 8, 5, 4]
ACTIONS_BY_PAGE = {
    "/": (["view", "click"], [3, 2]),
    "/search": (["view", "click", "scroll"], [2, 3, 1]),
    "/cart": (["view", "click"], [2, 1]),
    "/checkout": (["view", "purchase"], [3, 1]),
    "/help": (["view", "scroll"], [1, 1]),
}
PRODUCT_ACTIONS = (["view", "click", "add_to_cart"], [4, 2, 1])


@dataclass(frozen=True)
class GeneratedEvent:
    """One record to produce, with the event fields kept typed for reference computations."""

    key: str
    user: str
    page: str
    action: str
    event_time_ms: int
    timestamp_ms: int  # the Kafka record timestamp ("arrival")
    value: bytes
    headers: tuple[tuple[str, bytes], ...]


def iso_ms(epoch_ms: int) -> str:
    """Epoch ms -> ISO-8601 UTC with milliseconds and a Z, the format Spark's from_json reads."""
    dt = datetime.fromtimestamp(epoch_ms / 1000, tz=timezone.utc)
    return dt.strftime("%Y-%m-%dT%H:%M:%S.") + f"{epoch_ms % 1000:03d}Z"


def make_events(
    count: int,
    *,
    start_ms: int,
    spacing_ms: int = 100,
    skew_ms: int = 30_000,
    users: int = 50,
    seed: int = 1,
) -> Iterator[GeneratedEvent]:
    """Yield ``count`` events on the synthetic timeline described in the module docstring."""
    rng = random.Random(seed)
    sessions: Counter[str] = Counter()
    seq = 0
    for i in range(count):
        arrival = start_ms + i * spacing_ms
        # Most events arrive within a second; one in ten is a buffered straggler.
        if skew_ms and rng.random() < 0.1:
            lateness = rng.randint(0, skew_ms)
        else:
            lateness = rng.randint(0, min(skew_ms, 1000))
        event_time = max(0, arrival - lateness)
        user = f"u{rng.randrange(users):03d}"
        if rng.random() < 0.02:
            sessions[user] += 1
        page = rng.choices(PAGES, PAGE_WEIGHTS)[0]
        actions, weights = ACTIONS_BY_PAGE.get(page, PRODUCT_ACTIONS)
        action = rng.choices(actions, weights)[0]
        seq += 1
        value = {
            "user": user,
            "page": page,
            "action": action,
            "event_time": iso_ms(event_time),
            "session": f"s{user[1:]}-{sessions[user]}",
            "seq": seq,
        }
        headers = (
            ("event-id", str(uuid.UUID(int=rng.getrandbits(128), version=4)).encode()),
            ("source", b"spark_jobs.generate"),
            ("content-type", b"application/json"),
            ("schema-version", b"1"),
        )
        yield GeneratedEvent(
            key=user,
            user=user,
            page=page,
            action=action,
            event_time_ms=event_time,
            timestamp_ms=arrival,
            value=json.dumps(value, separators=(",", ":")).encode(),
            headers=headers,
        )


def reference_counts(
    events: Iterable[GeneratedEvent], window_ms: int, watermark_ms: int | None = None
) -> dict[tuple[int, str, str], int]:
    """Plain-Python windowed counts: (window_start_ms, page, action) -> count.

    With ``watermark_ms``, only windows a Spark append-mode query has emitted once it has seen
    every event: those ending at or before max(event_time) - watermark (Spark evicts a window
    when ``window.end <= watermark``). Assumes no event was late when it was read, which holds
    when the generator's skew is below the watermark delay.
    """
    events = list(events)
    counts: Counter[tuple[int, str, str]] = Counter()
    for e in events:
        counts[(e.event_time_ms - e.event_time_ms % window_ms, e.page, e.action)] += 1
    if watermark_ms is None or not events:
        return dict(counts)
    watermark = max(e.event_time_ms for e in events) - watermark_ms
    return {k: n for k, n in counts.items() if k[0] + window_ms <= watermark}


def produce(
    events: Iterable[GeneratedEvent],
    bootstrap: str,
    topic: str,
    *,
    rate: float = 0.0,
    extra_config: dict[str, str] | None = None,
    timeout: float = 60.0,
) -> Counter[int]:
    """Produce ``events`` and wait for every delivery; return records per partition.

    Raises RuntimeError on the first failed delivery or if deliveries do not finish within
    ``timeout`` seconds after the last send.
    """
    from confluent_kafka import Producer

    config = {
        "bootstrap.servers": bootstrap,
        "enable.idempotence": True,
        "acks": "all",
        "linger.ms": 5,
        **(extra_config or {}),
    }
    producer = Producer(config)
    delivered: Counter[int] = Counter()
    errors: list[str] = []

    def on_delivery(err, msg) -> None:
        if err is not None:
            errors.append(str(err))
        else:
            delivered[msg.partition()] += 1

    started = time.monotonic()
    sent = 0
    for event in events:
        if errors:
            break
        while True:
            try:
                producer.produce(
                    topic,
                    key=event.key.encode(),
                    value=event.value,
                    headers=list(event.headers),
                    timestamp=event.timestamp_ms,
                    on_delivery=on_delivery,
                )
                break
            except BufferError:  # local queue full: let deliveries drain
                producer.poll(0.1)
        sent += 1
        producer.poll(0)
        if rate > 0:
            ahead = sent / rate - (time.monotonic() - started)
            if ahead > 0:
                time.sleep(ahead)
    remaining = producer.flush(timeout)
    if errors:
        raise RuntimeError(f"delivery failed: {errors[0]} ({len(errors)} failures)")
    if remaining:
        raise RuntimeError(f"{remaining} records not delivered within {timeout}s")
    return delivered


def _start_ms(text: str) -> int:
    if text == "now":
        return int(time.time() * 1000)
    try:
        parsed = datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected 'now' or ISO-8601, got {text!r}") from None
    if parsed.tzinfo is None:
        parsed = parsed.replace(tzinfo=timezone.utc)
    return int(parsed.timestamp() * 1000)


def _non_negative_int(text: str) -> int:
    value = int(text)
    if value < 0:
        raise argparse.ArgumentTypeError(f"must be >= 0: {text}")
    return value


def build_parser() -> argparse.ArgumentParser:
    # Imported here so that `--help` and the pure functions above need no pyspark.
    from spark_jobs.kafka_io import kafka_option, positive_int, topic_name

    parser = argparse.ArgumentParser(
        prog="python -m spark_jobs.generate",
        description=__doc__.split("\n\n")[0],
        formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog=__doc__.split("\n\n", 1)[1],
    )
    parser.add_argument("--bootstrap", default="127.0.0.1:9092", help="(default %(default)s)")
    parser.add_argument("--topic", required=True, type=topic_name)
    parser.add_argument("--count", type=positive_int, default=1000, help="(default %(default)s)")
    parser.add_argument("--start", type=_start_ms, default="now", help="timeline start (default now)")
    parser.add_argument("--spacing-ms", type=positive_int, default=100, help="(default %(default)s)")
    parser.add_argument("--skew-ms", type=_non_negative_int, default=30_000, help="(default %(default)s)")
    parser.add_argument("--users", type=positive_int, default=50, help="(default %(default)s)")
    parser.add_argument("--seed", type=int, default=1, help="(default %(default)s)")
    parser.add_argument("--rate", type=float, default=0.0, help="max records/s sent, 0 = no limit")
    parser.add_argument(
        "--producer-option",
        "-P",
        type=kafka_option,
        action="append",
        default=[],
        metavar="NAME=VALUE",
        help="librdkafka producer property, e.g. -P compression.type=lz4 (repeatable)",
    )
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.rate < 0:
        parser.error("--rate must be >= 0")
    events = list(
        make_events(
            args.count,
            start_ms=args.start,
            spacing_ms=args.spacing_ms,
            skew_ms=args.skew_ms,
            users=args.users,
            seed=args.seed,
        )
    )
    per_partition = produce(
        events, args.bootstrap, args.topic, rate=args.rate, extra_config=dict(args.producer_option)
    )
    print(
        json.dumps(
            {
                "topic": args.topic,
                "records": sum(per_partition.values()),
                "partitions": {str(p): n for p, n in sorted(per_partition.items())},
                "first_event_time": iso_ms(min(e.event_time_ms for e in events)),
                "last_event_time": iso_ms(max(e.event_time_ms for e in events)),
            },
            indent=2,
        )
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
