"""A Trafka broker in a subprocess on a free loopback port, for tests over real sockets."""

from __future__ import annotations

import itertools
import os
import signal
import socket
import struct
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class BrokerProcess:
    """`python -m server serve` with its own data dir; start(), stop(), kill(), restart()."""

    def __init__(self, data_dir: Path, *extra: str, port: int | None = None, env: dict | None = None,
                 http: bool = False, rest_proxy: bool = False, preexec_fn=None) -> None:
        """`http`: serve the HTTP listener (/metrics, /healthz, /readyz) on a free port of its
        own (`http_url`); off by default, so brokers of a test never compete for 8080.
        `rest_proxy`: serve the REST Proxy on a free port of its own (`rest_url`).
        `preexec_fn`: run in the child before the broker starts (resource limits).
        `env`: added to the environment; a None value removes that variable (a test of a
        built-in default the suite's environment overrides, see conftest.py)."""
        self.data_dir = Path(data_dir)
        self.port = port or free_port()
        self.http_port = free_port() if http else None
        self.rest_port = free_port() if rest_proxy else None
        self.extra = list(extra)
        self.env = env or {}
        self.preexec_fn = preexec_fn
        self.proc: subprocess.Popen | None = None
        self.log_path = self.data_dir.parent / f"broker-{self.port}.log"

    @property
    def bootstrap(self) -> str:
        return f"127.0.0.1:{self.port}"

    @property
    def http_url(self) -> str:
        assert self.http_port is not None, "started without http=True"
        return f"http://127.0.0.1:{self.http_port}"

    @property
    def rest_url(self) -> str:
        assert self.rest_port is not None, "started without rest_proxy=True"
        return f"http://127.0.0.1:{self.rest_port}"

    def start(self, timeout: float = 30.0) -> "BrokerProcess":
        self.data_dir.mkdir(parents=True, exist_ok=True)
        log = open(self.log_path, "ab")
        # The Schema Registry (port 8081 by default) stays off unless a test asks for it
        # (--set schema.registry.listeners=... or this env): brokers share the host.
        env = {**os.environ, "PYTHONPATH": str(REPO), "TRAFKA_SCHEMA_REGISTRY_LISTENERS": "",
               "TRAFKA_REST_PROXY_LISTENERS": f"127.0.0.1:{self.rest_port}" if self.rest_port else "", **self.env}
        env = {k: v for k, v in env.items() if v is not None}
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "server", "serve", "--listen", self.bootstrap, "--data-dir", str(self.data_dir),
             "--set", f"http.listeners=127.0.0.1:{self.http_port}" if self.http_port else "http.listeners=",
             *self.extra],
            stdout=log, stderr=subprocess.STDOUT, env=env, cwd=REPO, preexec_fn=self.preexec_fn,
        )
        log.close()
        deadline = time.monotonic() + timeout
        from server.healthcheck import api_versions

        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"broker exited with {self.proc.returncode}:\n{self.log_tail()}")
            try:
                api_versions("127.0.0.1", self.port, timeout=1.0)
                return self
            except OSError:
                time.sleep(0.05)
        self.kill()
        raise RuntimeError(f"broker did not answer within {timeout} s:\n{self.log_tail()}")

    def stop(self, timeout: float = 20.0) -> int:
        """SIGTERM and wait; returns the exit code."""
        if self.proc is None:
            return 0
        self.proc.send_signal(signal.SIGTERM)
        try:
            return self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            # Never leave a broker behind the test (it would hold its ports and a core): kill
            # it, then let the caller see that the clean stop failed.
            self.proc.kill()
            self.proc.wait()
            raise
        finally:
            self.proc = None

    def kill(self) -> None:
        if self.proc is not None:
            self.proc.kill()
            self.proc.wait()
            self.proc = None

    def restart(self) -> "BrokerProcess":
        self.stop()
        return self.start()

    def log_tail(self, lines: int = 60) -> str:
        try:
            return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-lines:])
        except OSError:
            return "(no log)"

    def __enter__(self) -> "BrokerProcess":
        return self.start()

    def __exit__(self, *exc) -> None:
        if self.proc is not None:
            try:
                self.stop()
            except subprocess.TimeoutExpired:
                self.kill()


_correlation_ids = itertools.count(1)


def recv_exact(sock: socket.socket, n: int) -> bytes:
    data = bytearray()
    while len(data) < n:
        chunk = sock.recv(n - len(data))
        if not chunk:
            raise ConnectionError("broker closed the connection")
        data += chunk
    return bytes(data)


def raw_request(host: str, port: int, api_key: int, version: int, body: dict, client_id: str = "tests") -> dict:
    """One request over a fresh connection, for error codes a client library would hide."""
    from wire import decode_response, encode_request

    correlation = next(_correlation_ids)
    with socket.create_connection((host, port), timeout=10) as sock:
        sock.sendall(encode_request(api_key, version, correlation, body, client_id=client_id))
        size = struct.unpack(">i", recv_exact(sock, 4))[0]
        got, response = decode_response(api_key, version, recv_exact(sock, size))
    assert got == correlation
    return response


def create_topic(port: int, topic: str, partitions: int):
    """CreateTopics v7 for one topic on the broker at 127.0.0.1:`port`; its topic id."""
    from wire.registry import ApiKey

    body = {"topics": [{"name": topic, "num_partitions": partitions, "replication_factor": 1, "assignments": [],
                        "configs": []}], "timeout_ms": 10000, "validate_only": False}
    answer = raw_request("127.0.0.1", port, ApiKey.CREATE_TOPICS, 7, body)
    assert answer["topics"][0]["error_code"] == 0, answer
    return answer["topics"][0]["topic_id"]
