"""ApiVersions v3+ client software names checked as Apache Kafka 4.4 checks them (found by
the protocol differential): a name or version outside KIP-511's pattern (empty, say) is
INVALID_REQUEST with no APIs listed."""

from __future__ import annotations

import pytest

from tests.brokerproc import BrokerProcess, raw_request
from wire.errors import ErrorCode
from wire.registry import ApiKey

pytestmark = pytest.mark.timeout(120)


@pytest.fixture(scope="module")
def broker(tmp_path_factory):
    with BrokerProcess(tmp_path_factory.mktemp("parity-api-versions") / "data") as proc:
        yield proc


@pytest.mark.parametrize("version", [3, 4])
@pytest.mark.parametrize("name, software_version", [("", "1.0"), ("librdkafka", ""), ("-bad", "1"),
                                                     ("ok", "1.0-"), ("sp ace", "1")])
def test_a_bad_software_name_or_version_is_invalid(broker, version, name, software_version):
    answer = raw_request("127.0.0.1", broker.port, ApiKey.API_VERSIONS, version,
                         {"client_software_name": name, "client_software_version": software_version})
    assert (answer["error_code"], answer["api_keys"]) == (ErrorCode.INVALID_REQUEST, [])


@pytest.mark.parametrize("name, software_version", [("confluent-kafka-python", "2.6.1-rdkafka-2.6.1"),
                                                    ("apache-kafka-java", "4.4.0"), ("x", "1")])
def test_real_software_names_are_answered(broker, name, software_version):
    answer = raw_request("127.0.0.1", broker.port, ApiKey.API_VERSIONS, 3,
                         {"client_software_name": name, "client_software_version": software_version})
    assert answer["error_code"] == ErrorCode.NONE and answer["api_keys"]
