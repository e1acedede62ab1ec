"""Hostile HTTP input against the Schema Registry of a real broker process: schemathesis
generates requests (valid and invalid) from schema_registry/openapi.json and sends
them over real HTTP; no answer may be a 5xx or stray from the description, and the broker
must come out alive with a clean log (tests/fuzzing.py)."""

from __future__ import annotations

import httpx
import pytest
import schemathesis

from tests.fuzzing import CHECKS, assert_broker_survived, fuzz_settings
from tests.openapi_routes import description
from tests.schema_registry.conftest import CT, RegistryBroker

schema = schemathesis.openapi.from_dict(description("schema_registry"))


SUBJECT = "fuzz-value"
AVRO = '{"type": "record", "name": "Fuzz", "fields": [{"name": "a", "type": "int"}]}'
AVRO_2 = '{"type": "record", "name": "Fuzz", "fields": [{"name": "a", "type": "int"}, ' \
         '{"name": "b", "type": "string", "default": ""}]}'


@pytest.fixture(scope="module")
def fuzzed_registry(tmp_path_factory):
    with RegistryBroker(tmp_path_factory.mktemp("fuzz") / "data") as broker:
        with httpx.Client(base_url=broker.url, headers={"Content-Type": CT}, timeout=10) as http:
            for text in (AVRO, AVRO_2):
                r = http.post(f"/subjects/{SUBJECT}/versions", json={"schema": text})
                assert r.status_code == 200, r.text
        yield broker


def aim(case) -> None:
    """About half the cases (chosen by the generated value, so a run stays reproducible) go
    to the subject, versions and schema ids registered above, past the 404s into the handlers;
    deleting that subject or its versions is left to the random names."""
    params = case.path_parameters or {}
    if case.method.upper() == "DELETE" and "/subjects/" in case.path:
        return
    for name, real in (("subject", SUBJECT), ("version", "latest"), ("id", 1)):
        value = params.get(name)
        if value is not None and len(str(value)) % 2 == 0:
            params[name] = real


@schema.parametrize()
@fuzz_settings(max_examples=25)
def test_hostile_requests_get_4xx_answers(case, fuzzed_registry):
    aim(case)
    case.call_and_validate(base_url=fuzzed_registry.url, checks=CHECKS, timeout=30)


def test_the_broker_survived(fuzzed_registry):
    # runs after the parametrized cases above (pytest keeps a module's order)
    assert_broker_survived(fuzzed_registry)
