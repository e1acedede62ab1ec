"""Client quota model without sockets: Kafka's precedence order, who shares a rate, the
sampled rate and the throttle formula (server/security/quotas.py), on a real Broker
object over a temporary data directory (not opened: the quota table needs nothing else)."""

from __future__ import annotations

import time

import pytest

from server.broker import Broker
from server.config import load_config
from server.security.quotas import Rate, mutes_after, user_of
from server.session import Session

P = "producer_byte_rate"

# Kafka's order, most specific first (docs "Quotas": /config/users/<user>/clients/<client-id> ...)
ORDER = [
    ((("client-id", "app"), ("user", "alice")), ("alice", "app")),
    ((("client-id", None), ("user", "alice")), ("alice", "app")),
    ((("user", "alice"),), ("alice", "")),
    ((("client-id", "app"), ("user", None)), ("alice", "app")),
    ((("client-id", None), ("user", None)), ("alice", "app")),
    ((("user", None),), ("alice", "")),
    ((("client-id", "app"),), ("", "app")),
    ((("client-id", None),), ("", "app")),
]


@pytest.fixture
def quotas(tmp_path):
    return Broker(load_config(environ={}, overrides={"log.dirs": str(tmp_path)})).quotas


def test_precedence_follows_kafka_order(quotas):
    # every level set, with its rank as the value; removing the best one at a time walks the order
    for rank, (entity, _tags) in enumerate(ORDER):
        quotas.configs.apply(entity, {P: float(rank + 1)})
    quotas.changed()
    assert quotas.active
    for rank, (entity, tags) in enumerate(ORDER):
        assert quotas.quota_for(P, "alice", "app") == (float(rank + 1), *tags)
        quotas.configs.apply(entity, {P: None})
        quotas.changed()
    assert quotas.quota_for(P, "alice", "app") is None
    assert not quotas.active


def test_keys_resolve_independently_and_other_clients_are_unaffected(quotas):
    quotas.configs.apply((("user", "alice"),), {P: 100.0})
    quotas.configs.apply((("client-id", None),), {"consumer_byte_rate": 50.0})
    quotas.changed()
    assert quotas.quota_for(P, "alice", "x") == (100.0, "alice", "")
    assert quotas.quota_for("consumer_byte_rate", "alice", "x") == (50.0, "", "x")
    assert quotas.quota_for(P, "bob", "x") is None


def test_rate_and_throttle_formula(quotas):
    rate = Rate(11, 1.0)
    rate.record(2000.0, now=100.0)
    # a fresh rate's window is num-1 samples long (Kafka's Rate.windowSize)
    assert rate.window_s(100.5) == pytest.approx(10.5)
    assert rate.measure(100.5) == pytest.approx(2000 / 10.5)
    # throttle = (observed - quota) / quota * window, recorded even when over
    quotas.configs.apply((("client-id", "c"),), {P: 100.0})
    quotas.changed()
    session = Session("127.0.0.1", 1)
    session.client_id = "c"
    body = {"responses": [], "throttle_time_ms": 0}
    throttle = quotas.record_request(session, 0, 9, 3000, None, body, time.perf_counter())
    assert throttle == pytest.approx((3000 / 10 - 100) / 100 * 10 * 1000, rel=0.01)
    assert body["throttle_time_ms"] == throttle
    assert session.throttle == (throttle / 1000, True)
    # the same principal on another client id has its own (unset) quota
    other = Session("127.0.0.1", 2)
    other.client_id = "d"
    assert quotas.record_request(other, 0, 9, 3000, None, {"throttle_time_ms": 0}, time.perf_counter()) == 0


def test_kip219_versions_and_principal_names():
    assert mutes_after(0, 6) and not mutes_after(0, 5)
    assert mutes_after(1, 8) and not mutes_after(1, 7)
    assert mutes_after(49, 0)  # newer than KIP-219: always
    assert user_of("User:alice") == "alice" and user_of("User:ANONYMOUS") == "ANONYMOUS"


def test_throttled_fetch_is_answered_empty_and_not_counted(quotas):
    quotas.configs.apply((("client-id", "reader"),), {"consumer_byte_rate": 100.0})
    quotas.changed()
    session = Session("127.0.0.1", 3)
    session.client_id = "reader"

    def fetch_body():
        return {"throttle_time_ms": 0, "error_code": 0, "session_id": 0,
                "responses": [{"topic": "t", "partitions": [{"partition_index": 0, "records": b"x" * 500}]}]}

    small = fetch_body()
    assert quotas.record_request(session, 1, 12, 60, {"replica_id": -1}, small, time.perf_counter()) == 0
    assert small["responses"]  # 500 B over a 10 s window is under 100 B/s
    big = fetch_body()
    big["responses"][0]["partitions"][0]["records"] = b"x" * 5000
    assert quotas.record_request(session, 1, 12, 60, {"replica_id": -1}, big, time.perf_counter()) > 0
    assert big["responses"] == [] and big["throttle_time_ms"] > 0
    rate = quotas._rates[("consumer_byte_rate", "", "reader")]
    assert sum(value for _start, value in rate.samples) == 500  # the 5000 were taken back
    # a follower's fetch is replication: no client quota
    follower = fetch_body()
    follower["responses"][0]["partitions"][0]["records"] = b"x" * 5000
    assert quotas.record_request(session, 1, 12, 60, {"replica_id": 2}, follower, time.perf_counter()) == 0
    assert follower["responses"]
