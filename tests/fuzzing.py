"""Hostile HTTP input from an OpenAPI description (schemathesis), shared by the Schema
Registry's and the REST Proxy's fuzz tests.

Why these checks: `not_a_server_error` is "every bad input gets its precise 4xx, never a
crash" (the descriptions document no 5xx at all), `response_schema_conformance` keeps the
answers true to the description; after the run the broker must still be alive, answer
ApiVersions on its Kafka port and have no Traceback in its log (an exception the HTTP layer
swallowed into a 500 would leave one). Bounded and reproducible: few examples per
operation, derandomized, no example database. Deeper by hand: TRAFKA_FUZZ_EXAMPLES=200
(examples per operation) and TRAFKA_FUZZ_RANDOM=1 (a new random run each time).
"""

from __future__ import annotations

import os

from hypothesis import HealthCheck, settings
from schemathesis.checks import not_a_server_error
from schemathesis.specs.openapi.checks import response_schema_conformance

from tests.brokerproc import BrokerProcess, raw_request

CHECKS = [not_a_server_error, response_schema_conformance]


def fuzz_settings(max_examples: int):
    """CI's bounded, reproducible run, unless the environment asks for more (see above)."""
    return settings(max_examples=int(os.environ.get("TRAFKA_FUZZ_EXAMPLES", max_examples)),
                    derandomize=os.environ.get("TRAFKA_FUZZ_RANDOM") != "1", deadline=None, database=None,
                    suppress_health_check=list(HealthCheck), print_blob=True)


def assert_broker_survived(broker: BrokerProcess) -> None:
    """The broker process lives, its Kafka port answers ApiVersions, its log has no Traceback."""
    assert broker.proc.poll() is None, f"broker exited:\n{broker.log_tail()}"
    answer = raw_request("127.0.0.1", broker.port, 18, 3, {"client_software_name": "fuzz",
                                                          "client_software_version": "1"})
    assert answer["error_code"] == 0 and answer["api_keys"], answer
    text = broker.log_path.read_text(errors="replace")
    assert "Traceback" not in text, text[text.index("Traceback") - 2000:][:6000]
