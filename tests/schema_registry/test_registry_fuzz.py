"""Hostile HTTP input against the Schema Registry of a real broker process: schemathesis
generates requests (valid and invalid) from server/schema_registry/openapi.json and sends
them over real HTTP; no answer may be a 5xx or stray from the description, and the broker
must come out alive with a clean log (tests/fuzzing.py)."""

from __future__ import annotations

import pytest
import schemathesis

from tests.fuzzing import CHECKS, assert_broker_survived, fuzz_settings
from tests.openapi_routes import description
from tests.schema_registry.conftest import RegistryBroker

schema = schemathesis.openapi.from_dict(description("server.schema_registry"))


@pytest.fixture(scope="module")
def fuzzed_registry(tmp_path_factory):
    with RegistryBroker(tmp_path_factory.mktemp("fuzz") / "data") as broker:
        yield broker


@schema.parametrize()
@fuzz_settings(max_examples=25)
def test_hostile_requests_get_4xx_answers(case, fuzzed_registry):
    case.call_and_validate(base_url=fuzzed_registry.url, checks=CHECKS, timeout=30)


def test_the_broker_survived(fuzzed_registry):
    # runs after the parametrized cases above (pytest keeps a module's order)
    assert_broker_survived(fuzzed_registry)
