"""Client quota enforcement: Kafka's ClientQuotaManager, ClientRequestQuotaManager and
ConnectionQuotas semantics, with throttling by channel muting (KIP-219).

How this works:
- Which quota applies to a (user, client-id) is resolved per quota key in Kafka's order
  (docs "Quotas" / DefaultQuotaCallback): users/<u>/clients/<c>, users/<u>/clients/<default>,
  users/<u>, users/<default>/clients/<c>, users/<default>/clients/<default>,
  users/<default>, clients/<c>, clients/<default>. The level that matched decides who
  shares the rate: a user-level quota is shared by every client id of that user, a
  client-level quota by every user of that client id, and a <default> entity gives each
  user (client) its own rate with the default value — Kafka's metric tags.
- Each (key, user tag, client tag) has a `Rate`: values summed in `quota.window.num`
  samples of `quota.window.size.seconds`, measured as Kafka's `Rate` does (the window is
  at least num-1 samples long, so a fresh client gets a burst allowance).
- A request is recorded whether or not it is over; when the rate is over the quota the
  client is throttled for (observed - quota) / quota * window (Kafka's QuotaUtils.throttleTime):
  the response carries throttle_time_ms, and the broker mutes the connection — it reads no
  further request from it — for that long. KIP-219: responses of the versions where the
  client throttles itself go out at once and the mute follows; older versions get their
  response delayed by the throttle time instead (`mutes_after`).
- Produce records the request's size, Fetch (consumers only: follower fetches are
  replication) the bytes of records in the response — a throttled fetch is answered
  empty and its bytes taken back, as Kafka does — every request its handler time
  as a percentage of one thread (request_percentage, time.perf_counter). Inter-broker
  APIs, ApiVersions and SASL are exempt, as in Kafka.
- `connection_creation_rate` on `ip` entities is checked when a connection is accepted:
  over it the connection is closed after the throttle time and not counted (Kafka's
  ConnectionQuotas: a delayed close, so the client does not reconnect at once); over the
  broker-wide `max.connection.creation.rate` the connection is served after the throttle
  time (Kafka delays the accept).

With no quota configured `active` is False and the network loop skips all of this with
one attribute check.
"""

from __future__ import annotations

import logging
import time
from pathlib import Path
from typing import TYPE_CHECKING

from wire.registry import INTER_BROKER_APIS, ApiKey

from server.config import BrokerConfig
from server.regions import release_regions
from server.security.client_quotas import (CLIENT_ID, CONNECTION_CREATION_RATE, CONSUMER_BYTE_RATE, IP,
                                           PRODUCER_BYTE_RATE, REQUEST_PERCENTAGE, USER, Entity, QuotaConfigs)

if TYPE_CHECKING:
    from server.session import Session

log = logging.getLogger("trafka.quotas")

SASL_HANDSHAKE, SASL_AUTHENTICATE = 17, 36
EXEMPT = frozenset({*INTER_BROKER_APIS, ApiKey.API_VERSIONS, ApiKey.WRITE_TXN_MARKERS, SASL_HANDSHAKE,
                    SASL_AUTHENTICATE})

# KIP-219: the first version of each response at which the client throttles itself (Kafka's
# AbstractResponse.shouldClientThrottle); below it the broker delays the response. APIs
# newer than Kafka 2.0 (not listed) throttle at every version.
CLIENT_THROTTLES_FROM: dict[int, int] = {
    ApiKey.PRODUCE: 6, ApiKey.FETCH: 8, ApiKey.LIST_OFFSETS: 3, ApiKey.METADATA: 6, ApiKey.OFFSET_COMMIT: 4,
    ApiKey.OFFSET_FETCH: 4, ApiKey.FIND_COORDINATOR: 2, ApiKey.JOIN_GROUP: 3, ApiKey.HEARTBEAT: 2,
    ApiKey.LEAVE_GROUP: 2, ApiKey.SYNC_GROUP: 2, ApiKey.DESCRIBE_GROUPS: 2, ApiKey.LIST_GROUPS: 2,
    ApiKey.API_VERSIONS: 2, ApiKey.CREATE_TOPICS: 3, ApiKey.DELETE_TOPICS: 2, ApiKey.DELETE_RECORDS: 1,
    ApiKey.INIT_PRODUCER_ID: 1, ApiKey.OFFSET_FOR_LEADER_EPOCH: 1, ApiKey.ADD_PARTITIONS_TO_TXN: 1,
    ApiKey.ADD_OFFSETS_TO_TXN: 1, ApiKey.END_TXN: 1, ApiKey.TXN_OFFSET_COMMIT: 1, 29: 1, 30: 1, 31: 1,
    ApiKey.DESCRIBE_CONFIGS: 2, ApiKey.ALTER_CONFIGS: 1, ApiKey.DESCRIBE_LOG_DIRS: 1, SASL_AUTHENTICATE: 1,
    ApiKey.CREATE_PARTITIONS: 1, ApiKey.DELETE_GROUPS: 1,
}

_NANOS_TO_PERCENT = 100.0 / 1e9


def mutes_after(api_key: int, api_version: int) -> bool:
    """True when the client throttles itself (KIP-219): answer now, then mute."""
    return api_version >= CLIENT_THROTTLES_FROM.get(api_key, 0)


def user_of(principal: str) -> str:
    """The quota `user` of a principal: "User:alice" -> "alice" (Kafka's principal name)."""
    return principal.partition(":")[2] if ":" in principal else principal


def _from_follower(request: dict | None) -> bool:
    """A replica's fetch (replication, which client quotas leave alone)."""
    if not request:
        return False
    replica_id = request.get("replica_id", -1)
    state = request.get("replica_state")
    if state:
        replica_id = state.get("replica_id", -1)
    return replica_id >= 0


class Rate:
    """Kafka's sampled `Rate`: sum over `num` samples of `size_s` each, per second."""

    __slots__ = ("num", "size_s", "samples")

    def __init__(self, num: int, size_s: float) -> None:
        self.num = num
        self.size_s = size_s
        self.samples: list[list[float]] = []  # [start time, value], oldest first

    def record(self, value: float, now: float) -> None:
        samples = self.samples
        if not samples or now - samples[-1][0] >= self.size_s:
            samples.append([now, 0.0])
            if len(samples) > self.num:
                del samples[0]
        samples[-1][1] += value

    def unrecord(self, value: float) -> None:
        if self.samples:
            self.samples[-1][1] -= value

    def window_s(self, now: float) -> float:
        """Kafka's Rate.windowSize: time since the oldest live sample, at least num-1 samples."""
        expire = self.num * self.size_s
        while self.samples and now - self.samples[0][0] >= expire:
            del self.samples[0]
        elapsed = now - self.samples[0][0] if self.samples else 0.0
        full = int(elapsed / self.size_s)
        if full < self.num - 1:
            elapsed += (self.num - 1 - full) * self.size_s
        return elapsed

    def measure(self, now: float) -> float:
        window = self.window_s(now)
        return sum(s[1] for s in self.samples) / window if window > 0 else 0.0


class ClientQuotas:
    """The broker's quotas: configuration (server/security/client_quotas.py) plus the
    per-client rates that enforce it. It reads the broker's settings and, on a single
    broker, keeps its configs in the data directory; the broker above owns it."""

    def __init__(self, config: BrokerConfig, data_dir: Path) -> None:
        self.config = config
        self.configs = QuotaConfigs(None if config.clustered else data_dir)
        self.active = False  # any user/client-id quota: the hot path checks only this
        self.connection_limits = False  # any ip quota or max.connection.creation.rate
        self._resolved: dict[tuple[str, str, str], tuple[float, str, str] | None] = {}
        self._rates: dict[tuple[str, str, str], Rate] = {}

    # ---- configuration -------------------------------------------------------------
    def load(self) -> None:
        self.configs.load()
        self.changed()

    def changed(self) -> None:
        """After any change to the configs: recompute the switches, drop cached lookups."""
        entries = self.configs.entries
        self.active = any(entity[0][0] != IP for entity in entries)
        self.connection_limits = any(entity[0][0] == IP for entity in entries) or \
            self.config.get("max.connection.creation.rate") < 2 ** 31 - 1
        self._resolved.clear()

    def replace_all(self, entries: dict[Entity, dict[str, float]]) -> None:
        """Cluster mode: the whole table as ZooKeeper has it."""
        self.configs.entries = entries
        self.changed()

    @property
    def window(self) -> tuple[int, float]:
        config = self.config
        # Kafka's ConfigDef says atLeast(1) for both; a smaller value would divide by zero.
        return max(1, config.get("quota.window.num")), float(max(1, config.get("quota.window.size.seconds")))

    def quota_for(self, key: str, user: str, client_id: str) -> tuple[float, str, str] | None:
        """(quota, user tag, client tag) for `key`, or None when no entity sets it."""
        cache_key = (key, user, client_id)
        try:
            return self._resolved[cache_key]
        except KeyError:
            pass
        entries = self.configs.entries
        found = None
        for entity, tags in (
                (((CLIENT_ID, client_id), (USER, user)), (user, client_id)),
                (((CLIENT_ID, None), (USER, user)), (user, client_id)),
                (((USER, user),), (user, "")),
                (((CLIENT_ID, client_id), (USER, None)), (user, client_id)),
                (((CLIENT_ID, None), (USER, None)), (user, client_id)),
                (((USER, None),), (user, "")),
                (((CLIENT_ID, client_id),), ("", client_id)),
                (((CLIENT_ID, None),), ("", client_id))):
            config = entries.get(entity)
            if config is not None and key in config:
                found = (config[key], *tags)
                break
        if len(self._resolved) > 100_000:  # client ids are the client's choice: bound the cache
            self._resolved.clear()
        self._resolved[cache_key] = found
        return found

    # ---- enforcement ---------------------------------------------------------------
    def _record(self, key: str, user: str, client_id: str, value: float, now: float) -> int:
        """Record `value` against the quota of `key` that applies; the throttle in ms."""
        found = self.quota_for(key, user, client_id)
        if found is None:
            return 0
        quota, user_tag, client_tag = found
        rate_key = (key, user_tag, client_tag)
        rate = self._rates.get(rate_key)
        if rate is None:
            if len(self._rates) >= 10_000:
                self._expire(now)
            rate = self._rates[rate_key] = Rate(*self.window)
        rate.record(value, now)
        observed = rate.measure(now)
        if observed <= quota:
            return 0
        throttle_ms = round((observed - quota) / quota * rate.window_s(now) * 1000)
        if key == REQUEST_PERCENTAGE:  # Kafka's ClientRequestQuotaManager bounds it to one sample
            throttle_ms = min(throttle_ms, int(rate.size_s * 1000))
        return throttle_ms

    def _unrecord(self, key: str, user: str, client_id: str, value: float) -> None:
        found = self.quota_for(key, user, client_id)
        if found is not None:
            rate = self._rates.get((key, found[1], found[2]))
            if rate is not None:
                rate.unrecord(value)

    def _expire(self, now: float) -> None:
        """Forget rates with no live sample (Kafka expires idle quota sensors too): client
        ids are the client's choice, so their number is not ours to bound otherwise."""
        for key, rate in list(self._rates.items()):
            if not rate.samples or now - rate.samples[-1][0] >= rate.num * rate.size_s:
                del self._rates[key]

    def record_request(self, session: "Session", api_key: int, api_version: int, request_size: int,
                       request: dict | None, body: dict | None, started: float) -> int:
        """Record one handled request, set its response's throttle_time_ms and the
        connection's mute; returns the throttle in ms (0: not throttled)."""
        if api_key in EXEMPT or (api_key == ApiKey.FETCH and _from_follower(request)):
            return 0  # cluster actions (replication included) are not throttled, as in Kafka
        now = time.monotonic()
        user = user_of(session.principal)
        client_id = session.client_id or ""
        throttle = self._record(REQUEST_PERCENTAGE, user, client_id,
                                (time.perf_counter() - started) * 1e9 * _NANOS_TO_PERCENT, now)
        if api_key == ApiKey.PRODUCE:
            throttle = max(throttle, self._record(PRODUCER_BYTE_RATE, user, client_id, request_size, now))
        elif api_key == ApiKey.FETCH and body is not None:
            size = sum(len(p["records"] or b"") for t in body.get("responses", ()) for p in t["partitions"])
            throttle = max(throttle, self._record(CONSUMER_BYTE_RATE, user, client_id, size, now))
            if throttle > 0 and body.get("error_code", 0) == 0 and "session_id" in body:
                # Kafka (KafkaApis.handleFetchRequest): a throttled fetch is answered empty
                # and its bytes are taken back off the rate — they were never sent.
                self._unrecord(CONSUMER_BYTE_RATE, user, client_id, size)
                release_regions(body["responses"])
                body["responses"] = []
                body.pop("node_endpoints", None)
        if throttle <= 0:
            return 0
        if body is not None and "throttle_time_ms" in body:
            body["throttle_time_ms"] = max(body["throttle_time_ms"], throttle)
        session.throttle = (throttle / 1000, mutes_after(api_key, api_version))
        log.debug("connection %d (%s, client %s): %s v%d throttled %d ms", session.connection_id, user, client_id,
                  api_key, api_version, throttle)
        return throttle

    def record_connection(self, host: str) -> tuple[float, bool]:
        """A connection accepted from `host`: (seconds to wait before going on, close it then?).

        Over its ip's connection_creation_rate the connection is refused after the throttle
        time and not counted (Kafka's ConnectionQuotas: a delayed close, so the client does
        not reconnect at once); over the broker's max.connection.creation.rate it is served
        after the throttle time (Kafka delays the accept)."""
        now = time.monotonic()
        entries = self.configs.entries
        for entity in (((IP, host),), ((IP, None),)):
            config = entries.get(entity)
            if config is not None and CONNECTION_CREATION_RATE in config:
                delay_ms = self._connection_rate(("ip", host), config[CONNECTION_CREATION_RATE], now, refund=True)
                if delay_ms:
                    log.info("connection from %s refused after %d ms: over its connection_creation_rate of %g/s",
                             host, delay_ms, config[CONNECTION_CREATION_RATE])
                    return delay_ms / 1000, True
                break
        broker_rate = self.config.get("max.connection.creation.rate")
        if broker_rate < 2 ** 31 - 1:
            delay_ms = self._connection_rate(("broker", ""), broker_rate, now, refund=False)
            if delay_ms:
                log.info("connection from %s delayed %d ms: over max.connection.creation.rate=%d", host, delay_ms,
                         broker_rate)
                return delay_ms / 1000, False
        return 0.0, False

    def _connection_rate(self, tags: tuple[str, str], quota: float, now: float, refund: bool) -> int:
        rate_key = (CONNECTION_CREATION_RATE, *tags)
        rate = self._rates.get(rate_key)
        if rate is None:
            rate = self._rates[rate_key] = Rate(*self.window)
        rate.record(1, now)
        observed = rate.measure(now)
        if observed <= quota:
            return 0
        if refund:
            rate.unrecord(1)
        return round((observed - quota) / quota * rate.window_s(now) * 1000)

    def statistics(self) -> dict:
        return {"entities": len(self.configs.entries), "rates": len(self._rates), "active": self.active}
