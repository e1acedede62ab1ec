"""Hostile HTTP input against the REST Proxy (v2 and v3) of a real broker process:
schemathesis generates requests (valid and invalid) from rest_proxy/openapi.json and
sends them over real HTTP; no answer may be a 5xx or stray from the description, and the
broker must come out alive with a clean log (tests/fuzzing.py)."""

from __future__ import annotations

import httpx
import pytest
import schemathesis

from tests.brokerproc import create_topic
from tests.fuzzing import CHECKS, assert_broker_survived, fuzz_settings
from tests.openapi_routes import description
from tests.rest_proxy.conftest import V2, RestBroker

TOPIC, GROUP, INSTANCE = "fuzz", "fuzz-group", "fuzz-instance"

schema = schemathesis.openapi.from_dict(description("rest_proxy"))


@pytest.fixture(scope="module")
def fuzzed_proxy(tmp_path_factory):
    with RestBroker(tmp_path_factory.mktemp("fuzz") / "data", "--set", "auto.create.topics.enable=false") as broker:
        create_topic(broker.port, TOPIC, 2)
        with httpx.Client(base_url=broker.rest_url, timeout=30) as rest:
            broker.cluster_id = rest.get("/v3/clusters").json()["data"][0]["cluster_id"]
            r = rest.post(f"/consumers/{GROUP}", headers={"Content-Type": V2},
                          json={"name": INSTANCE, "format": "binary"})
            assert r.status_code == 200, r.text
        yield broker


def aim(case, broker) -> None:
    """Point a generated case at things that exist, so the fuzzer gets past the 404s into the
    handlers: always the broker's cluster id, and about half the time (chosen by the generated
    name, so a run stays reproducible) the topic, group and consumer instance made above."""
    params = case.path_parameters or {}
    if "cluster_id" in params:
        params["cluster_id"] = broker.cluster_id
    if case.method.upper() == "DELETE" and case.path.endswith(("/topics/{topic}", "/instances/{name}")):
        return  # deleting the shared topic or instance would leave the cases after it 404s
    for name, real in (("topic", TOPIC), ("group", GROUP), ("name", INSTANCE)):
        if name == "name" and "/consumers/" not in case.path:
            continue  # a config's name, not an instance's
        if isinstance(params.get(name), str) and len(params[name]) % 2 == 0:
            params[name] = real


@schema.parametrize()
@fuzz_settings(max_examples=12)
def test_hostile_requests_get_4xx_answers(case, fuzzed_proxy):
    aim(case, fuzzed_proxy)
    case.call_and_validate(base_url=fuzzed_proxy.rest_url, checks=CHECKS, timeout=60)


def test_the_broker_survived(fuzzed_proxy):
    # runs after the parametrized cases above (pytest keeps a module's order)
    assert_broker_survived(fuzzed_proxy)
