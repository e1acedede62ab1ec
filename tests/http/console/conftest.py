"""A broker process with its HTTP listener (the console) and Schema Registry on free loopback
ports, and real confluent-kafka clients to feed it."""

from __future__ import annotations

import time

import confluent_kafka as ck
import httpx
import pytest

from tests.brokerproc import BrokerProcess, free_port


class ConsoleBroker(BrokerProcess):
    """BrokerProcess(http=True) with a Schema Registry; start() waits until /readyz says ready."""

    def __init__(self, data_dir, *extra: str) -> None:
        self.registry_port = free_port()
        super().__init__(data_dir, "--set", f"schema.registry.listeners=127.0.0.1:{self.registry_port}", *extra,
                         http=True)

    @property
    def registry_url(self) -> str:
        return f"http://127.0.0.1:{self.registry_port}"

    def start(self, timeout: float = 30.0) -> "ConsoleBroker":
        super().start(timeout)
        deadline = time.monotonic() + timeout
        while httpx.get(self.http_url + "/readyz", timeout=5).status_code != 200:
            if time.monotonic() > deadline:
                raise RuntimeError(f"broker not ready:\n{self.log_tail()}")
            time.sleep(0.05)
        return self


@pytest.fixture(scope="module")
def broker(tmp_path_factory):
    with ConsoleBroker(tmp_path_factory.mktemp("console") / "data") as proc:
        yield proc


@pytest.fixture
def api(broker):
    with httpx.Client(base_url=broker.http_url + "/api", timeout=30) as client:
        yield client


def produce(bootstrap: str, topic: str, messages: list[dict], partition: int = 0) -> None:
    """Each message's key/value/headers/timestamp through a real producer, acknowledged."""
    producer = ck.Producer({"bootstrap.servers": bootstrap, "linger.ms": 0})
    errors = []
    for m in messages:
        producer.produce(topic, key=m.get("key"), value=m.get("value"), headers=m.get("headers"),
                         timestamp=m.get("timestamp", 0), partition=partition,
                         on_delivery=lambda err, _msg: err and errors.append(err))
        producer.flush(30)  # one batch per message: a timestamp start lands between batches
    assert producer.flush(30) == 0
    assert not errors, errors


def wait_for(condition, timeout: float, what: str):
    deadline = time.monotonic() + timeout
    while True:
        got = condition()
        if got:
            return got
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.1)
