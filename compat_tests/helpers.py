"""Small things scenarios share: names, topic setup, exact comparisons."""

from __future__ import annotations

import time
import uuid
from collections import defaultdict
from typing import Iterable, Sequence

from compat_tests.clients.base import (
    Client, ClusterMetadata, Delivery, Message, NotSupportedByClient, Record, wait_until)

__all__ = ["unique_name", "make_topic", "produce_via", "by_partition", "assert_exact",
           "wait_until", "wait_metadata", "now_ms", "Message"]


def unique_name(prefix: str) -> str:
    return f"{prefix[:60].replace('_', '-')}-{uuid.uuid4().hex[:10]}"


def now_ms() -> int:
    return int(time.time() * 1000)


def wait_metadata(client: Client, topic: str, predicate, timeout: float = 15.0,
                  what: str = "metadata") -> ClusterMetadata:
    """Poll metadata (without auto-creation) until `predicate(topic_metadata)` holds."""
    last: list = [None]

    def check():
        md = client.metadata([topic])
        last[0] = md.topics.get(topic)
        return md if last[0] is not None and predicate(last[0]) else None

    try:
        return wait_until(check, timeout, 0.2, what)
    except TimeoutError as exc:
        raise AssertionError(f"{what} for {topic}: last seen {last[0]}") from exc


def make_topic(client: Client, setup: Client, name: str, partitions: int = 1,
               configs: dict[str, str] | None = None) -> None:
    """Create with the client under test when it can, else with the setup client, and wait
    until metadata shows every partition with a leader."""
    try:
        client.create_topic(name, partitions, configs)
    except NotSupportedByClient:
        setup.create_topic(name, partitions, configs)
    wait_metadata(setup, name, lambda t: t.error_code == 0 and len(t.partitions) == partitions
                  and all(leader >= 0 for leader in t.partitions.values()),
                  what=f"{partitions} partitions with leaders")


def produce_via(client: Client, setup: Client, topic: str, messages: Sequence[Message],
                **kwargs) -> list[Delivery] | None:
    """Produce with the client under test, or with the setup client when the client has no
    way to send these messages (kcat and explicit timestamps): the consume side is then
    what the scenario checks for this client."""
    try:
        return client.produce(topic, messages, **kwargs)
    except NotSupportedByClient:
        return setup.produce(topic, messages, **kwargs)


def by_partition(records: Iterable[Record]) -> dict[int, list[Record]]:
    out: dict[int, list[Record]] = defaultdict(list)
    for r in records:
        out[r.partition].append(r)
    return dict(out)


def assert_exact(records: Sequence[Record], expected: dict[int, Sequence[Message]],
                 first_offset: dict[int, int] | None = None) -> None:
    """Records per partition equal the produced messages exactly: same keys, values and
    headers, same order, consecutive offsets from `first_offset` (0 by default), nothing
    missing, nothing extra, nothing twice."""
    got = by_partition(records)
    assert sorted(got) == sorted(p for p, msgs in expected.items() if msgs), (
        f"partitions with records: got {sorted(got)}, expected {sorted(expected)}")
    for p, msgs in expected.items():
        start = (first_offset or {}).get(p, 0)
        recs = got.get(p, [])
        want = [(p, m.key, m.value, tuple(m.headers)) for m in msgs]
        have = [r.content() for r in recs]
        if have != want:
            raise AssertionError(_diff(p, have, want))
        offsets = [r.offset for r in recs]
        assert offsets == list(range(start, start + len(msgs))), (
            f"partition {p}: offsets {_short(offsets)} != {start}..{start + len(msgs) - 1}")


def _short(seq: Sequence, n: int = 12) -> str:
    seq = list(seq)
    return repr(seq) if len(seq) <= n else f"{seq[:n // 2]} ... {seq[-n // 2:]} (len {len(seq)})"


def _trim(value):
    if isinstance(value, (bytes, bytearray)) and len(value) > 40:
        return bytes(value[:20]) + b"..." + f"({len(value)} bytes)".encode()
    return value


def _diff(p: int, have: list, want: list) -> str:
    lines = [f"partition {p}: got {len(have)} records, expected {len(want)}"]
    for i in range(max(len(have), len(want))):
        h = have[i] if i < len(have) else "<missing>"
        w = want[i] if i < len(want) else "<none expected>"
        if h != w:
            fmt = lambda x: tuple(_trim(v) for v in x) if isinstance(x, tuple) else x  # noqa: E731
            lines.append(f"  first difference at index {i}: got {fmt(h)}, expected {fmt(w)}")
            break
    return "\n".join(lines)
