"""Quotas per authenticated user: a producer_byte_rate for user alice (the SASL principal's
name, Kafka's `user` entity) holds alice's producer to the quota (±20 %) whatever client id
she uses, while bob, on the same listener without a quota, is not throttled. The quota is
set through AlterClientQuotas on a PLAINTEXT listener of the same broker."""

from __future__ import annotations

import pytest

from tests.brokerproc import BrokerProcess, free_port
from tests.security.sasl_kit import client_conf
from tests.security.test_quotas_throttle import QUOTA, produce_for, rate_between, set_quota

pytestmark = pytest.mark.timeout(90)

JAAS = ('org.apache.kafka.common.security.plain.PlainLoginModule required '
        'user_alice="alice-secret" user_bob="bob-secret";')


@pytest.fixture(scope="module")
def broker(tmp_path_factory):
    sasl_port = free_port()
    proc = BrokerProcess(tmp_path_factory.mktemp("quotas-sasl") / "data", "--set", "quota.window.num=4",
                         "--set", "num.partitions=1", "--set", "sasl.enabled.mechanisms=PLAIN",
                         "--set", f"sasl.jaas.config={JAAS}")
    proc.extra[:0] = ["--set", f"listeners=PLAINTEXT://127.0.0.1:{proc.port},SASL_PLAINTEXT://127.0.0.1:{sasl_port}"]
    proc.sasl_bootstrap = f"127.0.0.1:{sasl_port}"
    with proc:
        yield proc


def as_user(broker, user: str) -> dict:
    """Producer settings for the SASL listener, logged in as `user`."""
    return {**client_conf(broker, "PLAIN", user, f"{user}-secret"), "bootstrap.servers": broker.sasl_bootstrap}


def test_user_quota_throttles_that_user_only(broker):
    set_quota(broker, [{"entity_type": "user", "entity_name": "alice"}], "producer_byte_rate", QUOTA)
    throttles: list = []
    delivered = produce_for(broker, "user-quota", "alice-app", 7.0, throttles, config=as_user(broker, "alice"))
    first = delivered[0][0]
    rate = rate_between(delivered, first + 3.0, first + 6.5)
    assert 0.8 * QUOTA <= rate <= 1.2 * QUOTA, rate
    assert throttles and max(throttles) > 0
    free = produce_for(broker, "user-quota", "bob-app", 2.5, [], config=as_user(broker, "bob"))
    t0 = free[0][0]
    assert rate_between(free, t0 + 1.0, t0 + 2.0) > 3 * QUOTA
