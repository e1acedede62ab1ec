"""A Trafka broker process with its Schema Registry on a free loopback port."""

from __future__ import annotations

import time

import httpx
import pytest

from tests.brokerproc import BrokerProcess, free_port

CT = "application/vnd.schemaregistry.v1+json"


class RegistryBroker(BrokerProcess):
    """A BrokerProcess whose registry listens on `registry_port`; start() waits for HTTP too."""

    def __init__(self, data_dir, *extra: str, registry_port: int | None = None) -> None:
        self.registry_port = registry_port or free_port()
        super().__init__(data_dir, "--set", f"schema.registry.listeners=127.0.0.1:{self.registry_port}", *extra)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.registry_port}"

    def start(self, timeout: float = 30.0) -> "RegistryBroker":
        super().start(timeout)
        deadline = time.monotonic() + timeout
        while True:
            try:
                httpx.get(self.url + "/subjects", timeout=2).raise_for_status()
                return self
            except httpx.HTTPError:
                if time.monotonic() > deadline:
                    raise RuntimeError(f"registry did not answer:\n{self.log_tail()}") from None
                time.sleep(0.05)


@pytest.fixture
def registry(tmp_path):
    with RegistryBroker(tmp_path / "data") as broker:
        yield broker


@pytest.fixture
def http(registry):
    with httpx.Client(base_url=registry.url, headers={"Content-Type": CT, "Accept": CT}, timeout=10) as client:
        yield client
