"""FindCoordinator's error_message on success, as Apache Kafka 4.4 sends it (found by the
protocol differential): "NONE" (Errors.NONE.message()) in v1-3, "" per coordinator in v4+."""

from __future__ import annotations

import pytest

from tests.brokerproc import BrokerProcess, raw_request
from wire.registry import ApiKey

pytestmark = pytest.mark.timeout(120)


@pytest.fixture(scope="module")
def broker(tmp_path_factory):
    with BrokerProcess(tmp_path_factory.mktemp("parity-find-coordinator") / "data") as proc:
        yield proc


@pytest.mark.parametrize("version", [1, 2, 3])
def test_a_found_coordinator_says_none(broker, version):
    answer = raw_request("127.0.0.1", broker.port, ApiKey.FIND_COORDINATOR, version, {"key": "pfc", "key_type": 0})
    assert (answer["error_code"], answer["error_message"]) == (0, "NONE")


@pytest.mark.parametrize("version", [4, 6])
def test_found_coordinators_say_nothing(broker, version):
    answer = raw_request("127.0.0.1", broker.port, ApiKey.FIND_COORDINATOR, version,
                         {"key_type": 0, "coordinator_keys": ["pfc", "pfc-2"]})
    assert [(c["error_code"], c["error_message"]) for c in answer["coordinators"]] == [(0, ""), (0, "")]
