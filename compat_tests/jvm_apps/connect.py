"""Kafka Connect and MirrorMaker 2 as the suite runs them: Kafka's own main classes on the
`connect` classpath of .ci/jvm/pom.xml (connect-runtime, connect-file, connect-mirror),
configured by properties files the scenario writes.

- `ConnectWorker`: one distributed worker (`org.apache.kafka.connect.cli.ConnectDistributed
  worker.properties`), with its REST API on a loopback port; workers with one group.id form
  a Connect cluster whose config/offset/status live in three compacted topics of the broker.
- `MirrorMakerProcess`: the dedicated MirrorMaker 2 driver
  (`org.apache.kafka.connect.mirror.MirrorMaker mm2.properties`).
"""

from __future__ import annotations

import json
import time
import urllib.error
import urllib.request
from pathlib import Path

from compat_tests.brokers import free_port
from compat_tests.jvm_apps import JvmProcess, classpath

CONNECT_HEAP_MB = 384
START_TIMEOUT_S = 120.0
# Connect's own loggers worth having in a failed test's log: who joined, who got which task.
CONNECT_LOGGERS = {
    "org.apache.kafka.connect.runtime.distributed.DistributedHerder": "INFO",
    "org.apache.kafka.connect.runtime.distributed.WorkerCoordinator": "INFO",
    "org.apache.kafka.connect.runtime.Worker": "INFO",
    "org.apache.kafka.connect.mirror": "INFO",
}


def write_properties(path: Path, settings: dict[str, str]) -> Path:
    path.write_text("".join(f"{k}={v}\n" for k, v in settings.items()))
    return path


class RestError(Exception):
    def __init__(self, status: int, body: str) -> None:
        super().__init__(f"HTTP {status}: {body[:500]}")
        self.status = status
        self.body = body


class ConnectWorker(JvmProcess):
    """A distributed Connect worker; `settings` are its worker.properties."""

    def __init__(self, name: str, workdir: Path, settings: dict[str, str]) -> None:
        self.rest_port = free_port()
        self.settings = {
            "listeners": f"http://127.0.0.1:{self.rest_port}",
            "rest.advertised.host.name": "127.0.0.1",
            "rest.advertised.port": str(self.rest_port),
            **settings,
        }
        workdir.mkdir(parents=True, exist_ok=True)
        config = write_properties(workdir / f"{name}.properties", self.settings)
        super().__init__(name, workdir, classpath("connect"),
                         "org.apache.kafka.connect.cli.ConnectDistributed", [str(config)],
                         heap_mb=CONNECT_HEAP_MB, loggers=CONNECT_LOGGERS)

    @property
    def worker_id(self) -> str:
        """How Connect names this worker in statuses: its advertised REST host:port."""
        return f"127.0.0.1:{self.rest_port}"

    # -- REST

    def rest(self, method: str, path: str, body: dict | None = None, timeout: float = 30.0):
        data = None if body is None else json.dumps(body).encode()
        request = urllib.request.Request(f"http://127.0.0.1:{self.rest_port}{path}", data=data,
                                         method=method,
                                         headers={"Content-Type": "application/json",
                                                  "Accept": "application/json"})
        try:
            with urllib.request.urlopen(request, timeout=timeout) as response:
                text = response.read().decode()
        except urllib.error.HTTPError as exc:
            raise RestError(exc.code, exc.read().decode(errors="replace")) from None
        return json.loads(text) if text else None

    def wait_ready(self, timeout: float = START_TIMEOUT_S) -> None:
        """Until the REST API answers and the worker has joined its group (GET /connectors
        answers only then: before, a request gets 409 or times out)."""
        deadline = time.monotonic() + timeout
        last: object = None
        while True:
            if not self.alive():
                raise AssertionError(f"{self.name} exited ({self.returncode()}):\n{self.log_tail()}")
            try:
                self.rest("GET", "/connectors", timeout=5)
                return
            except (OSError, RestError) as exc:
                last = exc
            if time.monotonic() > deadline:
                raise AssertionError(f"{self.name}: REST not ready after {timeout:.0f}s ({last!r}):\n"
                                     f"{self.log_tail()}")
            time.sleep(0.5)

    def create_connector(self, name: str, config: dict[str, str], timeout: float = 60.0) -> dict:
        """POST /connectors, retried while the group rebalances (409)."""
        deadline = time.monotonic() + timeout
        while True:
            try:
                return self.rest("POST", "/connectors", {"name": name, "config": config})
            except RestError as exc:
                if exc.status != 409 or time.monotonic() > deadline:
                    raise
            time.sleep(1.0)

    def status(self, connector: str) -> dict:
        return self.rest("GET", f"/connectors/{connector}/status")

    def offsets(self, connector: str) -> dict:
        return self.rest("GET", f"/connectors/{connector}/offsets")


class MirrorMakerProcess(JvmProcess):
    """MirrorMaker 2's dedicated driver with `settings` as its mm2.properties."""

    def __init__(self, name: str, workdir: Path, settings: dict[str, str]) -> None:
        workdir.mkdir(parents=True, exist_ok=True)
        config = write_properties(workdir / f"{name}.properties", settings)
        super().__init__(name, workdir, classpath("connect"),
                         "org.apache.kafka.connect.mirror.MirrorMaker", [str(config)],
                         heap_mb=CONNECT_HEAP_MB, loggers=CONNECT_LOGGERS)
