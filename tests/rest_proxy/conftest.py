"""A Trafka broker process with its REST Proxy (and Schema Registry) on free loopback ports,
and httpx helpers speaking Confluent's media types."""

from __future__ import annotations

import time

import httpx
import pytest

from tests.brokerproc import BrokerProcess, free_port

V2 = "application/vnd.kafka.v2+json"
BINARY = "application/vnd.kafka.binary.v2+json"
JSON = "application/vnd.kafka.json.v2+json"
AVRO = "application/vnd.kafka.avro.v2+json"
JSONSCHEMA = "application/vnd.kafka.jsonschema.v2+json"


class RestBroker(BrokerProcess):
    """A BrokerProcess serving the REST Proxy (`rest_url`) and the Schema Registry
    (`registry_url`); start() waits until the proxy answers."""

    def __init__(self, data_dir, *extra: str, port: int | None = None, env: dict | None = None) -> None:
        self.registry_port = free_port()
        super().__init__(data_dir, "--set", f"schema.registry.listeners=127.0.0.1:{self.registry_port}", *extra,
                         port=port, env=env, rest_proxy=True)

    @property
    def registry_url(self) -> str:
        return f"http://127.0.0.1:{self.registry_port}"

    def start(self, timeout: float = 30.0) -> "RestBroker":
        super().start(timeout)
        deadline = time.monotonic() + timeout
        while True:
            try:
                httpx.get(self.rest_url + "/", timeout=2).raise_for_status()
                return self
            except httpx.HTTPError:
                if time.monotonic() > deadline:
                    raise RuntimeError(f"REST Proxy did not answer:\n{self.log_tail()}") from None
                time.sleep(0.05)


@pytest.fixture(scope="module")
def broker(tmp_path_factory):
    # auto.create.topics.enable=false: an unknown topic is Confluent's 40401 (test_rest_lifecycle
    # shows a produce creating one when the broker auto-creates)
    with RestBroker(tmp_path_factory.mktemp("rest") / "data", "--set", "auto.create.topics.enable=false",
                    "--set", "consumer.instance.timeout.ms=300000") as b:
        yield b


@pytest.fixture
def rest(broker):
    with httpx.Client(base_url=broker.rest_url, timeout=30) as client:
        yield client


def read_all(rest: httpx.Client, base_uri: str, accept: str, want: int, deadline_s: float = 30.0) -> list:
    """GET records from a consumer instance until `want` records came (the first calls may
    answer nothing while the consumer joins its group, as Confluent's documentation says)."""
    got: list = []
    deadline = time.monotonic() + deadline_s
    while len(got) < want and time.monotonic() < deadline:
        r = rest.get(base_uri + "/records", params={"timeout": 1000}, headers={"Accept": accept})
        assert r.status_code == 200, r.text
        got += r.json()
    return got
