"""Starting and stopping several `trafka serve` processes on one host: what `trafka dev
cluster` and the container entrypoint (`cli.entrypoint`, TRAFKA_BROKERS_PER_HOST) share.

A Python process uses one core, so several brokers per host is how Trafka uses a whole
machine. They stop one at a time, last started first: SIGTERM makes each move its
leaderships to the brokers still running (controlled shutdown) before it stops.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

STOP_TIMEOUT_S = 30.0


class StopSignal:
    """SIGINT/SIGTERM end the run (once the brokers are up, or while they start)."""

    def __init__(self) -> None:
        self.signum: int | None = None
        self._previous = {sig: signal.signal(sig, self._handle) for sig in (signal.SIGINT, signal.SIGTERM)}

    def _handle(self, signum: int, _frame) -> None:
        self.signum = signum

    def restore(self) -> None:
        for sig, handler in self._previous.items():
            signal.signal(sig, handler)


HTTP_PORT_STRIDE = 10


def offset_listener(address: str, index: int) -> str:
    """An HTTP listener setting (http.listeners, schema.registry.listeners,
    rest.proxy.listeners) for the `index`-th (from 0) broker started on one host: the port
    plus 10 x `index` (8080, 8090, ..., 8081, 8091, ... and 8082, 8092, ...), so brokers started together never compete for a port, and
    one broker's registry (8081) never meets the next broker's metrics (8080 + 1); empty
    (off) and port 0 stay as they are."""
    if not address:
        return ""
    host, _, port = address.removeprefix("http://").rpartition(":")
    return f"{host}:{int(port) + HTTP_PORT_STRIDE * index}" if int(port) else address


def start_broker(root: Path, node: int, listen: str, settings: dict[str, str],
                 advertised: str | None = None, log_file: bool = True,
                 defaults: dict[str, str] | None = None) -> subprocess.Popen:
    """`trafka serve` as broker `node` on `listen`, data in root/broker-<node>, its output
    appended to root/broker-<node>.log (`log_file`) or to this process's (a container's log).
    `settings` are passed as --set (the user's), `defaults` as --default (an HTTP side on a
    taken default port is left off instead of stopping the broker)."""
    command = [sys.executable, "-m", "server", "serve", "--node-id", str(node), "--listen", listen,
               "--data-dir", str(root / f"broker-{node}")]
    if advertised:
        command += ["--advertised", advertised]
    for key, value in settings.items():
        command += ["--set", f"{key}={value}"]
    for key, value in (defaults or {}).items():
        command += ["--default", f"{key}={value}"]
    # The brokers import the same `server` package as this process, installed or not.
    env = dict(os.environ)
    package_root = str(Path(__file__).resolve().parents[2])
    env["PYTHONPATH"] = os.pathsep.join(p for p in (package_root, env.get("PYTHONPATH")) if p)
    # A session of its own: the terminal's Ctrl-C reaches this process only, which then
    # stops the brokers in order (controlled shutdown) instead of all at once.
    if not log_file:
        return subprocess.Popen(command, stdin=subprocess.DEVNULL, start_new_session=True, env=env)
    with open(root / f"broker-{node}.log", "ab") as log:
        return subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                start_new_session=True, env=env)


def stop_brokers(brokers: list[tuple[int, int, subprocess.Popen]]) -> None:
    """One at a time, last started first: SIGTERM makes each move its leaderships to the
    brokers still running (controlled shutdown) before it stops."""
    for _node, _port, proc in reversed(brokers):
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(STOP_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
