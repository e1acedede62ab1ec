"""Client quotas through Apache Kafka's own Admin client (kafka-clients 3.9.2:
Admin.alterClientQuotas / describeClientQuotas, what kafka-configs.sh calls), via the
compat harness's JVM adapter (compat_tests/clients/java_client.py). Skipped with the reason
when java or the cached client jars are missing (an error under CI, as the harness does)."""

from __future__ import annotations

import pytest

from compat_tests.clients.base import ClientError, NotSupportedByClient
from tests.brokerproc import BrokerProcess

pytestmark = pytest.mark.timeout(180)


@pytest.fixture
def java(tmp_path):
    from compat_tests.clients.java_client import JavaClient

    with BrokerProcess(tmp_path / "data") as broker:
        try:
            client = JavaClient(broker.bootstrap)
        except NotSupportedByClient as exc:
            pytest.skip(str(exc))
        try:
            yield client
        finally:
            client.close()


def test_java_admin_alters_and_describes_quotas(java):
    java._call("alter_client_quotas", entity={"user": "alice", "client-id": None},
               ops={"producer_byte_rate": 1024, "request_percentage": 25.5})
    java._call("alter_client_quotas", entity={"client-id": "app"}, ops={"consumer_byte_rate": 2048})
    found = java._call("describe_client_quotas", filter={"user": "alice"}, strict=False)["entries"]
    assert found == [{"entity": {"user": "alice", "client-id": None},
                      "values": {"producer_byte_rate": 1024.0, "request_percentage": 25.5}}]
    found = java._call("describe_client_quotas", filter={"client-id": "app"}, strict=True)["entries"]
    assert found == [{"entity": {"client-id": "app"}, "values": {"consumer_byte_rate": 2048.0}}]
    # remove (a null value) and Kafka's error for an unknown key
    java._call("alter_client_quotas", entity={"client-id": "app"}, ops={"consumer_byte_rate": None})
    assert java._call("describe_client_quotas", filter={"client-id": "app"}, strict=True)["entries"] == []
    with pytest.raises(ClientError) as failure:
        java._call("alter_client_quotas", entity={"client-id": "app"}, ops={"no_such_rate": 5})
    assert failure.value.code == 42, failure.value  # INVALID_REQUEST
    assert "InvalidRequestException" in str(failure.value)
