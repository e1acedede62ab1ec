"""Replication throttles (KIP-73): Kafka's ReplicationQuotaManager, one for each side.

Why: a reassignment copies whole logs to the new replicas; unthrottled, that copy competes
with producers and consumers for the disks and the network. An operator names the replicas
to hold back in the topic configs `leader.replication.throttled.replicas` /
`follower.replication.throttled.replicas` ("partition:broker,..." or "*") and the rate in
the broker settings `leader.replication.throttled.rate` /
`follower.replication.throttled.rate` (bytes/s).

- Follower side (server/cluster/fetcher.py): while the rate of bytes fetched for throttled
  partitions is over the limit, a throttled partition this broker is not in sync for (it
  was behind the leader's high watermark at its last fetch) is left out of the next fetch.
- Leader side (server/handlers/fetch.py): while the rate of bytes sent for throttled
  partitions is over the limit, a follower outside the ISR gets no records for a throttled
  partition (the fetch answers empty for it, as Kafka's leader does).

In-sync replicas are never held back, so producers with acks=all do not wait for a
throttle. Both the topic configs and the rates are read at the time of use: topic configs
change through ZooKeeper's config notices, and a broker setting made dynamic applies at
the next fetch. The rate is Kafka's sampled Rate: bytes over the last
`replication.quota.window.num` windows of `replication.quota.window.size.seconds`, divided
by their elapsed time but never by less than (num - 1) windows — so a throttle allows a burst
of about (num - 1) x size x rate bytes before it bites.
"""

from __future__ import annotations

import time
from collections import deque

LONG_MAX = (1 << 63) - 1


class ReplicationQuota:
    def __init__(self, config, node_id: int, rate_setting: str, replicas_setting: str) -> None:
        self.config = config
        self.node_id = node_id
        self.rate_setting = rate_setting
        self.replicas_setting = replicas_setting
        self._samples: deque[list] = deque()  # [window start (s), bytes]
        self._parsed: dict[str, object] = {}  # topic config value -> "*" or set of partitions

    @property
    def limit(self) -> int:
        return self.config.get(self.rate_setting)

    def is_throttled(self, partition) -> bool:
        """The topic config names this partition's replica on this broker (or "*")."""
        value = partition.log.config.extras.get(self.replicas_setting)
        if not value:
            return False
        parsed = self._parsed.get(value)
        if parsed is None:
            parsed = self._parsed[value] = _parse(value, self.node_id)
        return parsed == "*" or partition.index in parsed

    def record(self, nbytes: int, now: float | None = None) -> None:
        if nbytes <= 0:
            return
        now = time.monotonic() if now is None else now
        size = self._window_s()
        start = now - now % size
        if self._samples and self._samples[-1][0] == start:
            self._samples[-1][1] += nbytes
        else:
            self._samples.append([start, nbytes])
        self._purge(now)

    def rate(self, now: float | None = None) -> float:
        now = time.monotonic() if now is None else now
        self._purge(now)
        if not self._samples:
            return 0.0
        size = self._window_s()
        elapsed = max(now - self._samples[0][0], (self._windows() - 1) * size, size)
        return sum(b for _s, b in self._samples) / elapsed

    def exceeded(self, now: float | None = None) -> bool:
        limit = self.limit
        return limit < LONG_MAX and self.rate(now) > limit

    def _window_s(self) -> float:
        return max(1, self.config.get("replication.quota.window.size.seconds"))

    def _windows(self) -> int:
        return max(2, self.config.get("replication.quota.window.num"))

    def _purge(self, now: float) -> None:
        horizon = now - self._windows() * self._window_s()
        while self._samples and self._samples[0][0] + self._window_s() <= horizon:
            self._samples.popleft()


def _parse(value: str, node_id: int):
    """Kafka's parseThrottledPartitions: "*" or the partitions listed with this broker's id."""
    items = [item.strip() for item in value.split(",") if item.strip()]
    if items == ["*"]:
        return "*"
    out = set()
    for item in items:
        partition, _, broker = item.partition(":")
        try:
            if int(broker) == node_id:
                out.add(int(partition))
        except ValueError:
            continue
    return out
