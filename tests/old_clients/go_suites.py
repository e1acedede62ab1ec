"""Go clients from before Kafka 4 (Debian's packages) running their own broker tests.

- kafka-go 0.2 (golang-github-segmentio-kafka-go-dev): its package tests dial
  localhost:9092 and expect broker id 1 advertised as localhost:9092;
- Sarama 1.22 (golang-github-shopify-sarama-dev): its functional tests (functional_*_test.go,
  which Debian leaves out, taken from the github.com/Shopify/sarama v1.22.1 module) reach the
  brokers through Toxiproxy (github.com/Shopify/toxiproxy v2.1.4, the version Sarama 1.22
  pins) and expect the topics test.1, test.4, test.64 and uncommitted-topic-test-4.

Both are built with the machine's Go in GOPATH mode against /usr/share/gocode (Debian's
sources) into .cache/old-clients/, and run inside a network namespace of their own
(`unshare -n`), so their fixed ports never meet another broker of this host:

    unshare -n python -m tests.old_clients.go_suites run SUITE BROKER OUT.json [RUN_REGEX] [--skip-known]

SUITE is kafka-go or sarama, BROKER trafka or kafka-3.9. The broker is started inside the
namespace, set up as the suite's own CI sets up its Kafka, and the suite's `go test -v`
results are written as {test name: PASS|FAIL|SKIP} to OUT.json (with the log beside it).
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
CACHE = REPO / ".cache" / "old-clients"
GOCODE = Path("/usr/share/gocode/src")
SARAMA_MODULE = "github.com/Shopify/sarama@v1.22.1"
TOXIPROXY_MODULE = "github.com/Shopify/toxiproxy@v2.1.4+incompatible"
# Debian packages the builds need (the Go toolchain itself is the machine's).
DEBIAN_PACKAGES = ("golang-github-segmentio-kafka-go-dev", "golang-github-shopify-sarama-dev",
                   "golang-github-stretchr-testify-dev", "golang-github-sirupsen-logrus-dev",
                   "golang-gopkg-tomb.v1-dev", "golang-github-gorilla-mux-dev")
SUITES = ("kafka-go", "sarama")
# Each suite's broker as its own CI configured it (kafka-go: .circleci/config.yml of
# v0.2.1; Sarama: vagrant/server.properties and vagrant/create_topics.sh of v1.22.1),
# replication at 1 for one broker.
SUITE_SETTINGS = {
    "kafka-go": {"auto.create.topics.enable": "true", "delete.topic.enable": "true",
                 "message.max.bytes": "200000000"},
    "sarama": {"auto.create.topics.enable": "false", "delete.topic.enable": "true", "num.partitions": "2",
               "default.replication.factor": "1", "log.retention.hours": "168"},
}
# Tests left out of a run: they hang against Kafka 3.9 as well, and a hang ends the whole
# test binary at its timeout (the tests after it would never run).
SUITE_SKIP = {
    # One connection, a Fetch long-polling for the record a Produce queued behind it on the
    # same connection will write: a broker answers a connection's requests in order.
    "kafka-go": "TestConn/writing_and_reading_messages_concurrently_should_preserve_the_order",
}
# With --skip-known, also left out: slow tests that fail against Kafka 3.9.2 as well (45 s of
# waiting; tests/old_clients/test_go_clients.py lists why, and its Kafka 3.9 run keeps them).
# One pattern for both levels: -test.skip splits a pattern at its slashes.
SUITE_SKIP_KNOWN = {
    "kafka-go": "Test(Conn|ReaderConsumerGroup)/(writing_and_reading_messages_concurrently_should_preserve_the_order"
                "|consumer_group_commits_on_close|consumer_group_rebalance)$",
}
SUITE_TOPICS = {
    "kafka-go": {"test-writer-0": 3, "test-writer-1": 3},
    "sarama": {"test.1": 1, "test.4": 4, "test.64": 64, "uncommitted-topic-test-4": 1},
}
BROKERS = ("trafka", "kafka-3.9")


class Unavailable(Exception):
    """What a suite needs is not on this machine (package, Go, network namespaces)."""


def go() -> str:
    """The Go toolchain: 1.20 or later (GOPATH mode, and -test.skip for the tests left out)."""
    found = shutil.which("go") or ("/usr/local/go/bin/go" if Path("/usr/local/go/bin/go").exists() else None)
    if found is None:
        raise Unavailable("no Go toolchain (go) on PATH")
    version = subprocess.run([found, "env", "GOVERSION"], capture_output=True, text=True).stdout.strip()
    m = re.match(r"go1\.(\d+)", version)
    if m is None or int(m.group(1)) < 20:
        raise Unavailable(f"Go {version or '?'} is older than 1.20")
    return found


def _go_env(gopath: list[Path], modules: bool = False) -> dict[str, str]:
    env = {**os.environ, "GOPATH": ":".join(str(p) for p in gopath), "GOCACHE": str(CACHE / "gocache"),
           "GOFLAGS": "-vet=off"}
    if modules:
        env.update(GO111MODULE="on", GOMODCACHE=str(CACHE / "modcache"), GOFLAGS="-mod=mod")
    else:
        env["GO111MODULE"] = "off"
    return env


def _module_dir(module: str) -> Path:
    """A module from the Go module proxy (sources Debian does not ship), in the cache."""
    out = subprocess.run([go(), "mod", "download", "-json", module], capture_output=True, text=True,
                         env=_go_env([CACHE / "gopath"], modules=True), cwd=CACHE, timeout=300)
    if out.returncode != 0:
        raise Unavailable(f"go mod download {module}: {out.stderr.strip() or out.stdout.strip()}")
    return Path(json.loads(out.stdout)["Dir"])


def _copy_tree(src: Path, dst: Path) -> None:
    if dst.exists():
        shutil.rmtree(dst)
    shutil.copytree(src, dst)
    for path in [dst, *dst.rglob("*")]:
        path.chmod(path.stat().st_mode | 0o200)


def build(suite: str) -> dict[str, Path]:
    """The suite's binaries (built once, kept in .cache/old-clients)."""
    CACHE.mkdir(parents=True, exist_ok=True)
    if suite == "kafka-go":
        if not (GOCODE / "github.com/segmentio/kafka-go").is_dir():
            raise Unavailable("golang-github-segmentio-kafka-go-dev is not installed")
        binary = CACHE / "kafka-go.test"
        if not binary.exists():
            _run_go(["test", "-c", "-o", str(binary), "github.com/segmentio/kafka-go"], [GOCODE.parent])
        return {"test": binary}
    if suite == "sarama":
        if not (GOCODE / "github.com/Shopify/sarama").is_dir():
            raise Unavailable("golang-github-shopify-sarama-dev is not installed")
        binary, proxy = CACHE / "sarama.test", CACHE / "toxiproxy"
        if not (binary.exists() and proxy.exists()):
            work = CACHE / "gopath-sarama"
            sarama = work / "src/github.com/Shopify/sarama"
            _copy_tree(GOCODE / "github.com/Shopify/sarama", sarama)
            for test in sorted(_module_dir(SARAMA_MODULE).glob("functional*_test.go")):
                shutil.copy(test, sarama / test.name)
            _copy_tree(_module_dir(TOXIPROXY_MODULE), work / "src/github.com/Shopify/toxiproxy")
            _run_go(["test", "-c", "-o", str(binary), "github.com/Shopify/sarama"], [work, GOCODE.parent])
            _run_go(["build", "-o", str(proxy), "github.com/Shopify/toxiproxy/cmd"], [work, GOCODE.parent])
        return {"test": binary, "toxiproxy": proxy}
    raise ValueError(f"unknown suite {suite!r}")


def _run_go(args: list[str], gopath: list[Path]) -> None:
    out = subprocess.run([go(), *args], capture_output=True, text=True, env=_go_env(gopath), cwd=CACHE, timeout=900)
    if out.returncode != 0:
        raise RuntimeError(f"go {' '.join(args)} failed:\n{out.stdout}\n{out.stderr}")


def namespaces_available() -> str | None:
    """None when `unshare -n` works here, else why not."""
    if shutil.which("unshare") is None:
        return "no unshare"
    out = subprocess.run(["unshare", "-n", "true"], capture_output=True, text=True)
    return None if out.returncode == 0 else f"unshare -n: {out.stderr.strip()}"


# ---------------------------------------------------------------- inside the namespace

def _loopback_up() -> None:
    """A new network namespace has its loopback down: bring it up (SIOCSIFFLAGS, as
    `ip link set lo up` does, without needing iproute2)."""
    import fcntl
    import socket
    import struct

    siocgifflags, siocsifflags, iff_up = 0x8913, 0x8914, 0x1
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as sock:
        flags = struct.unpack("16sH", fcntl.ioctl(sock, siocgifflags, struct.pack("16sH", b"lo", 0)))[1]
        fcntl.ioctl(sock, siocsifflags, struct.pack("16sH", b"lo", flags | iff_up))


class _Trafka:
    def __init__(self, workdir: Path, port: int, advertised: str, settings: dict[str, str]) -> None:
        self.workdir, self.port, self.advertised, self.settings = workdir, port, advertised, settings
        self.proc: subprocess.Popen | None = None

    def start(self) -> None:
        data = self.workdir / "data"
        data.mkdir(parents=True, exist_ok=True)
        env = {**os.environ, "PYTHONPATH": str(REPO), "TRAFKA_SCHEMA_REGISTRY_LISTENERS": "",
               "TRAFKA_REST_PROXY_LISTENERS": ""}
        with open(self.workdir / "broker.log", "ab") as log:
            self.proc = subprocess.Popen(
                [sys.executable, "-m", "server", "serve", "--listen", f"127.0.0.1:{self.port}",
                 "--advertised", self.advertised, "--data-dir", str(data), "--node-id", "1",
                 "--set", "http.listeners=", "--set", "group.initial.rebalance.delay.ms=0",
                 *[arg for k, v in self.settings.items() for arg in ("--set", f"{k}={v}")]],
                stdout=log, stderr=subprocess.STDOUT, env=env, cwd=REPO)
        _wait_port(self.port, self.proc)

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            self.proc.wait(30)


class _Kafka39:
    def __init__(self, workdir: Path, port: int, advertised: str, settings: dict[str, str]) -> None:
        sys.path.insert(0, str(REPO))
        from tests.old_clients.kafka39 import Kafka39KRaftBroker

        self.broker = Kafka39KRaftBroker(workdir, settings, port=port, advertise=advertised)

    def start(self) -> None:
        self.broker.start()

    def stop(self) -> None:
        self.broker.stop()


def _wait_port(port: int, proc: subprocess.Popen | None = None, timeout: float = 60.0) -> None:
    import socket

    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc is not None and proc.poll() is not None:
            raise RuntimeError(f"process exited with {proc.returncode} before listening on {port}")
        try:
            socket.create_connection(("127.0.0.1", port), 1).close()
            return
        except OSError:
            time.sleep(0.2)
    raise TimeoutError(f"nothing listens on {port}")


def _create_topics(port: int, topics: dict[str, int]) -> None:
    sys.path.insert(0, str(REPO))
    from tests.brokerproc import raw_request

    body = {"topics": [{"name": name, "num_partitions": n, "replication_factor": 1, "assignments": [],
                        "configs": []} for name, n in topics.items()], "timeout_ms": 30000, "validate_only": False}
    answer = raw_request("127.0.0.1", port, 19, 4, body)
    for topic in answer["topics"]:
        if topic["error_code"] not in (0, 36):  # 36: TOPIC_ALREADY_EXISTS
            raise RuntimeError(f"create {topic['name']}: error {topic['error_code']}")


def _uncommitted_messages(bootstrap: str) -> None:
    """What Sarama's CI writes to uncommitted-topic-test-4 (its simplest-uncommitted-msg
    tool, case 4): two transactional producers interleaved, so committed and aborted
    records alternate: Committed 1-2 between aborted ones, then Committed 3-6."""
    from confluent_kafka import Producer

    def producer(name: str) -> Producer:
        p = Producer({"bootstrap.servers": bootstrap, "transactional.id": f"sarama-{name}-{time.time_ns()}",
                      "client.id": "test-transactional-producer"})
        p.init_transactions(30)
        return p

    topic = "uncommitted-topic-test-4"
    p1, p2 = producer("1"), producer("2")
    p1.begin_transaction()
    for _ in range(2):
        p1.produce(topic, key=b"key", value=b"uncommitted")
    p1.flush(30)
    p2.begin_transaction()
    for i in (1, 2):
        p2.produce(topic, key=b"key", value=f"Committed {i}".encode())
    p2.flush(30)
    p2.commit_transaction(30)
    p1.abort_transaction(30)
    p2.begin_transaction()
    for _ in range(2):
        p2.produce(topic, key=b"key", value=b"uncommitted")
    p2.flush(30)
    p1.begin_transaction()
    for i in (3, 4, 5, 6):
        p1.produce(topic, key=b"key", value=f"Committed {i}".encode())
    p1.flush(30)
    p2.abort_transaction(30)
    p1.commit_transaction(30)


_RESULT = re.compile(r"^\s*--- (PASS|FAIL|SKIP): (\S+)")


def parse_results(output: str) -> dict[str, str]:
    results: dict[str, str] = {}
    for line in output.splitlines():
        m = _RESULT.match(line)
        if m:
            results[m.group(2)] = m.group(1)
    for m in re.finditer(r"panic: test timed out after \S+\n\s*running tests:\n((?:\s+\S+ \(\S+\)\n)+)", output):
        for line in m.group(1).splitlines():
            results[line.split()[0]] = "TIMEOUT"
    return results


def run(suite: str, broker_kind: str, out: Path, run_filter: str | None = None, timeout_s: int = 480,
        skip_known: bool = False) -> dict:
    binaries = build(suite)
    _loopback_up()
    workdir = out.parent / f"{suite}-{broker_kind}"
    if workdir.exists():
        shutil.rmtree(workdir)
    workdir.mkdir(parents=True)
    if suite == "kafka-go":
        port, advertised, env_extra = 9092, "localhost:9092", {}
    else:
        port, advertised = 29092, "127.0.0.1:9092"
        env_extra = {"KAFKA_PEERS": "127.0.0.1:9092", "TOXIPROXY_ADDR": "http://127.0.0.1:8474",
                     "KAFKA_VERSION": "2.2.0"}
    broker = (_Trafka if broker_kind == "trafka" else _Kafka39)(workdir, port, advertised, SUITE_SETTINGS[suite])
    proxy = None
    started = time.monotonic()
    try:
        broker.start()
        _create_topics(port, SUITE_TOPICS[suite])
        if suite == "sarama":
            config = workdir / "toxiproxy.json"
            config.write_text(json.dumps([{"name": "kafka1", "listen": "127.0.0.1:9092",
                                           "upstream": f"127.0.0.1:{port}"}]))
            proxy = subprocess.Popen([str(binaries["toxiproxy"]), "-host", "127.0.0.1", "-port", "8474",
                                      "-config", str(config)], stdout=open(workdir / "toxiproxy.log", "wb"),
                                     stderr=subprocess.STDOUT)
            _wait_port(8474, proxy)
            _wait_port(9092, proxy)
            _uncommitted_messages(f"127.0.0.1:{port}")
        argv = [str(binaries["test"]), "-test.v", "-test.timeout", f"{timeout_s}s"]
        if run_filter:
            argv += ["-test.run", run_filter]
        skip = SUITE_SKIP_KNOWN.get(suite) if skip_known else None
        skip = skip or SUITE_SKIP.get(suite)
        if skip:
            argv += ["-test.skip", skip]
        env = {**os.environ, **env_extra}
        env.pop("CI", None)  # Sarama fails instead of skipping when CI is set and no broker answers
        done = subprocess.run(argv, capture_output=True, text=True, env=env, cwd=workdir,
                              timeout=timeout_s + 60)
        output = done.stdout + done.stderr
    finally:
        if proxy is not None:
            proxy.terminate()
            proxy.wait(10)
        broker.stop()
    (workdir / "go-test.log").write_text(output)
    report = {"suite": suite, "broker": broker_kind, "exit": done.returncode, "seconds": time.monotonic() - started,
              "results": parse_results(output), "log": str(workdir / "go-test.log")}
    out.write_text(json.dumps(report, indent=1, sort_keys=True))
    return report


def main(argv: list[str]) -> int:
    if len(argv) >= 4 and argv[0] == "run":
        skip_known = "--skip-known" in argv
        args = [a for a in argv if a != "--skip-known"]
        run(args[1], args[2], Path(args[3]).resolve(), args[4] if len(args) > 4 else None, skip_known=skip_known)
        return 0
    if len(argv) == 2 and argv[0] == "build":
        print(build(argv[1]))
        return 0
    print(__doc__, file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
