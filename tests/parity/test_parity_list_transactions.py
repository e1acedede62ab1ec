"""ListTransactions v1's duration filter as Apache Kafka 4.4 applies it (found by the
protocol differential): now minus the transaction's start time must exceed the filter, so a
transactional id with no transaction running (start -1) is listed under any filter."""

from __future__ import annotations

import pytest

from tests.brokerproc import BrokerProcess, raw_request
from wire.registry import ApiKey

pytestmark = pytest.mark.timeout(120)


@pytest.fixture(scope="module")
def broker(tmp_path_factory):
    with BrokerProcess(tmp_path_factory.mktemp("parity-list-txn") / "data") as proc:
        yield proc


def test_an_idle_transactional_id_passes_the_duration_filter(broker):
    init = raw_request("127.0.0.1", broker.port, ApiKey.INIT_PRODUCER_ID, 4, {
        "transactional_id": "plt-idle", "transaction_timeout_ms": 60000, "producer_id": -1, "producer_epoch": -1})
    assert init["error_code"] == 0
    answer = raw_request("127.0.0.1", broker.port, ApiKey.LIST_TRANSACTIONS, 1, {
        "state_filters": [], "producer_id_filters": [], "duration_filter": 3_600_000})
    assert [(t["transactional_id"], t["transaction_state"]) for t in answer["transaction_states"]] == [
        ("plt-idle", "Empty")]
