"""Apache Kafka's own command-line tools, run as their bin/*.sh scripts run them.

Each tool is `java -cp <.cache/jvm/kafka-tools> <class> args...` in a subprocess of its own:
the class its script names (Kafka 4.4: kafka-topics.sh runs org.apache.kafka.tools.TopicCommand,
...), the heap kafka-run-class.sh gives a tool (-Xmx256M), and Kafka's tools logging (WARN and
above, to stderr: config/tools-log4j2.yaml). A tool that does not finish within its timeout is
SIGKILLed and fails the test with everything it printed.

`ToolRun.normalised()` turns what a tool printed into what two brokers must agree on: the
addresses, topic/cluster ids, consumer member ids, producer ids and times a tool prints differ
from broker to broker and run to run; everything else (exit status, messages, columns, counts,
offsets, configs) is compared as printed. test_kafka_tools.py runs each scenario against Apache
Kafka and Trafka and compares the two transcripts step by step.

JVM start-up is most of a tool's time on a small machine; a class-data-sharing archive of the
tools' classpath (made once, by the first tool run of a session, into .cache/kafka-tools/)
halves it. It changes nothing a tool does.
"""

from __future__ import annotations

import difflib
import fcntl
import hashlib
import os
import re
import signal
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Sequence

from compat_tests import jvm
from compat_tests.brokers import REPO, die_with_parent

# Script -> main class, as Kafka 4.4's bin/<script>.sh names it (kafka-run-class.sh <class>).
# 4.x moved kafka-configs' and kafka-acls' classes from kafka.admin to org.apache.kafka.tools.
CLASSES = {
    "kafka-topics": "org.apache.kafka.tools.TopicCommand",
    "kafka-configs": "org.apache.kafka.tools.ConfigCommand",
    "kafka-consumer-groups": "org.apache.kafka.tools.consumer.group.ConsumerGroupCommand",
    "kafka-acls": "org.apache.kafka.tools.AclCommand",
    "kafka-reassign-partitions": "org.apache.kafka.tools.reassign.ReassignPartitionsCommand",
    "kafka-leader-election": "org.apache.kafka.tools.LeaderElectionCommand",
    "kafka-transactions": "org.apache.kafka.tools.TransactionsCommand",
    "kafka-delete-records": "org.apache.kafka.tools.DeleteRecordsCommand",
    "kafka-log-dirs": "org.apache.kafka.tools.LogDirsCommand",
    "kafka-get-offsets": "org.apache.kafka.tools.GetOffsetShell",
    "kafka-features": "org.apache.kafka.tools.FeatureCommand",
    "kafka-metadata-quorum": "org.apache.kafka.tools.MetadataQuorumCommand",
    "kafka-broker-api-versions": "org.apache.kafka.tools.BrokerApiVersionsCommand",
    "kafka-cluster": "org.apache.kafka.tools.ClusterTool",
    "kafka-console-producer": "org.apache.kafka.tools.ConsoleProducer",
    "kafka-console-consumer": "org.apache.kafka.tools.consumer.ConsoleConsumer",
    "kafka-verifiable-producer": "org.apache.kafka.tools.VerifiableProducer",
    "kafka-verifiable-consumer": "org.apache.kafka.tools.VerifiableConsumer",
    "kafka-producer-perf-test": "org.apache.kafka.tools.ProducerPerformance",
    "kafka-consumer-perf-test": "org.apache.kafka.tools.ConsumerPerformance",
    "kafka-e2e-latency": "org.apache.kafka.tools.EndToEndLatency",
}

# kafka-run-class.sh: KAFKA_HEAP_OPTS defaults to -Xmx256M. Serial GC and C1 only, as the
# suite's brokers run (compat_tests/kafka_brokers.py): CPU is what a 2-core machine lacks.
JVM_FLAGS = ["-Xmx256m", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1", "-Xss512k",
             "-XX:+ExitOnOutOfMemoryError", "-Djava.awt.headless=true"]
DEFAULT_TIMEOUT_S = 60.0
CACHE = REPO / ".cache" / "kafka-tools"

# Kafka's config/tools-log4j2.yaml: WARN and above, to stderr.
TOOLS_LOG4J2 = """\
Configuration:
  status: warn
  Appenders:
    Console:
      name: STDERR
      target: SYSTEM_ERR
      PatternLayout:
        pattern: "[%d] %p %m (%c)%n"
  Loggers:
    Root:
      level: WARN
      AppenderRef:
        - ref: STDERR
"""


class ToolTimeout(AssertionError):
    """A tool ran past its timeout (it was killed); the message carries its output."""


@dataclass
class ToolRun:
    tool: str
    args: list[str]
    returncode: int
    stdout: str
    stderr: str
    seconds: float

    def __str__(self) -> str:
        return (f"$ {self.tool} {' '.join(self.args)}\n(exit {self.returncode}, {self.seconds:.1f} s)\n"
                f"--- stdout ---\n{self.stdout}--- stderr ---\n{self.stderr}")


class Tools:
    """Runs Kafka's tools; one per test, bound to the addresses a broker advertises."""

    def __init__(self, workdir: Path) -> None:
        self.workdir = workdir
        workdir.mkdir(parents=True, exist_ok=True)
        self.classpath = jvm.classpath_string("kafka-tools")
        self.java = jvm.java()
        self.log_config = workdir / "tools-log4j2.yaml"
        self.log_config.write_text(TOOLS_LOG4J2)
        self.runs: list[ToolRun] = []
        self._archive = _shared_archive(self)

    def argv(self, tool: str, args: Sequence[str], extra_jvm: Sequence[str] = ()) -> list[str]:
        archive = [f"-XX:SharedArchiveFile={self._archive}", "-Xlog:cds=off", "-Xlog:cds+dynamic=off"] \
            if self._archive else []
        return [self.java, *JVM_FLAGS, *archive, *extra_jvm,
                f"-Dlog4j2.configurationFile={self.log_config}", "-cp", self.classpath,
                CLASSES[tool], *args]

    def run(self, tool: str, *args: str, input: str | None = None,
            timeout: float = DEFAULT_TIMEOUT_S, extra_jvm: Sequence[str] = ()) -> ToolRun:
        """Run `tool` to its end; a tool still running after `timeout` is killed and fails."""
        argv = self.argv(tool, [str(a) for a in args], extra_jvm)
        run = _run(argv, input, timeout, tool, [str(a) for a in args])
        self.runs.append(run)
        return run

    def start(self, tool: str, *args: str, extra_jvm: Sequence[str] = ()) -> "RunningTool":
        """A tool left running (a consumer waiting for records); stop it with `.stop()`."""
        return RunningTool(self.argv(tool, [str(a) for a in args], extra_jvm), tool,
                           [str(a) for a in args], self.workdir)


def _run(argv: list[str], input: str | None, timeout: float, tool: str, args: list[str]) -> ToolRun:
    started = time.monotonic()
    proc = subprocess.Popen(argv, stdin=subprocess.PIPE if input is not None else subprocess.DEVNULL,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=REPO,
                            start_new_session=True, preexec_fn=die_with_parent)
    try:
        out, err = proc.communicate(input, timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        out, err = proc.communicate()
        run = ToolRun(tool, args, -9, out, err, time.monotonic() - started)
        raise ToolTimeout(f"{tool} did not finish within {timeout:.0f} s (killed):\n{run}") from None
    return ToolRun(tool, args, proc.returncode, out, err, time.monotonic() - started)


class RunningTool:
    """A tool process in the background, its output collected into files."""

    def __init__(self, argv: list[str], tool: str, args: list[str], workdir: Path) -> None:
        self.tool, self.args = tool, args
        stem = f"{tool}-{time.monotonic_ns()}"
        self.out_path, self.err_path = workdir / f"{stem}.out", workdir / f"{stem}.err"
        self.started = time.monotonic()
        with open(self.out_path, "wb") as out, open(self.err_path, "wb") as err:
            self.proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=out, stderr=err,
                                         cwd=REPO, start_new_session=True, preexec_fn=die_with_parent)

    def output(self) -> str:
        return self.out_path.read_text(errors="replace")

    def wait_output(self, predicate: Callable[[str], bool], timeout: float, what: str) -> str:
        deadline = time.monotonic() + timeout
        while True:
            text = self.output()
            if predicate(text):
                return text
            if self.proc.poll() is not None or time.monotonic() > deadline:
                raise AssertionError(f"{self.tool} {' '.join(self.args)}: no {what} "
                                     f"({'exited ' + str(self.proc.returncode) if self.proc.poll() is not None else 'timed out'})"
                                     f"\n--- stdout ---\n{text}--- stderr ---\n{self.err_path.read_text(errors='replace')}")
            time.sleep(0.2)

    def stop(self, timeout: float = 30.0) -> ToolRun:
        """SIGTERM (the tool's shutdown hook runs, as on Ctrl-C), SIGKILL after `timeout`."""
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait()
        return ToolRun(self.tool, self.args, self.proc.returncode, self.output(),
                       self.err_path.read_text(errors="replace"), time.monotonic() - self.started)

    def wait(self, timeout: float) -> ToolRun:
        """The tool's own end (it exits by itself); killed and failed past `timeout`."""
        try:
            self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            run = self.stop(5)
            raise ToolTimeout(f"{self.tool} did not finish within {timeout:.0f} s (killed):\n{run}") from None
        return ToolRun(self.tool, self.args, self.proc.returncode, self.output(),
                       self.err_path.read_text(errors="replace"), time.monotonic() - self.started)


# --------------------------------------------------------------------------- start-up


def _shared_archive(tools: Tools) -> Path | None:
    """A dynamic CDS archive of the tools' classpath (JDK 13+), made once under a lock by a
    run of kafka-topics --version plus an Admin client that cannot connect; None if the JVM
    cannot make one (the tools then just start slower)."""
    if os.environ.get("KAFKA_TOOLS_NO_CDS"):
        return None
    key = hashlib.sha256((tools.java + "\n" + tools.classpath + "\n" + _java_version(tools.java)
                          ).encode()).hexdigest()[:16]
    CACHE.mkdir(parents=True, exist_ok=True)
    archive = CACHE / f"tools-{key}.jsa"
    if archive.exists():
        return archive
    with open(CACHE / ".lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if archive.exists():
            return archive
        partial = CACHE / f"tools-{key}.{os.getpid()}.jsa"
        config = tools.workdir / "cds-warmup.properties"
        config.write_text("request.timeout.ms=200\ndefault.api.timeout.ms=400\n"
                          "socket.connection.setup.timeout.ms=100\n")
        argv = [tools.java, *JVM_FLAGS, f"-XX:ArchiveClassesAtExit={partial}",
                f"-Dlog4j2.configurationFile={tools.log_config}", "-cp", tools.classpath,
                CLASSES["kafka-topics"], "--bootstrap-server", "127.0.0.1:9", "--list",
                "--command-config", str(config)]
        try:
            subprocess.run(argv, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                           stderr=subprocess.DEVNULL, timeout=120, cwd=REPO)
        except subprocess.TimeoutExpired:
            return None
        if not partial.exists():
            return None
        partial.rename(archive)
        return archive


def _java_version(java: str) -> str:
    try:
        return subprocess.run([java, "-version"], capture_output=True, text=True, timeout=30).stderr
    except (OSError, subprocess.TimeoutExpired):
        return ""


# --------------------------------------------------------------------------- normalising

# A Kafka topic or cluster id as the tools print it: 22 characters of base64url (16 bytes),
# after the labels the tools print them with (a bare 22-letter word may be a class name).
_UUID22 = re.compile(r"(TopicId: |topicId=|Cluster ID: |ClusterId: |\"topicId\":\")"
                     r"[A-Za-z0-9_-]{22}(?![A-Za-z0-9_-])")
_UUID36 = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}")
_HOSTPORT = re.compile(r"(?:/)?(?:127\.0\.0\.1|localhost):\d+")
_LOG_TIME = re.compile(r"^\[\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d+\] ", re.M)
_ISO_TIME = re.compile(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(?:\.\d+)?(?:Z|[+-]\d\d:?\d\d)?")


# A client's warning that one bootstrap address did not answer: which address a client tries
# first is its random choice, so with a broker of a cluster down it comes and goes.
_UNREACHABLE = re.compile(r"^.*WARN \[\w+ clientId=[^\]]*\] Connection to node -?\d+ \([^)]*\) could not "
                          r"be established\. Node may not be available\..*\n", re.M)


def normalise(text: str, extra: Sequence[tuple[str | re.Pattern, str]] = ()) -> str:
    """What differs between two brokers by nature (addresses, ids, times) replaced by a
    placeholder; `extra` adds (pattern, replacement) pairs for one step."""
    text = _UNREACHABLE.sub("", text)
    text = _LOG_TIME.sub("[<time>] ", text)
    text = _HOSTPORT.sub("<host:port>", text)
    text = _UUID36.sub("<uuid>", text)
    text = _ISO_TIME.sub("<time>", text)
    for pattern, replacement in extra:
        text = re.sub(pattern, replacement, text)
    text = _UUID22.sub(r"\1<id>", text)
    return text


# Differences by design between Kafka 4.x in KRaft mode (the `kafka` kind) and a ZooKeeper-mode
# design (Trafka, Kafka 3.9's `kafka-cluster`), taken out of the KRaft broker's transcript
# only: (broker kind, pattern, replacement, reason). docs/operations/kafka-tools.md lists them.
BY_DESIGN: list[tuple[str, str, str, str]] = [
    ("kafka", r"(?:(?<=Configs: )min\.insync\.replicas=1(?:,|(?=\n))|,min\.insync\.replicas=1(?=[,\n]))", "",
     "Kafka 4.x with eligible leader replicas (KIP-966, on in a cluster formatted with the newest "
     "features) sets min.insync.replicas as a cluster-wide dynamic default, so every topic lists it "
     "among its non-default configs; ZooKeeper mode has no such setting"),
    ("kafka", r"\n  min\.insync\.replicas=1 sensitive=false synonyms=\{DYNAMIC_DEFAULT_BROKER_CONFIG:"
              r"min\.insync\.replicas=1\}", "",
     "the same cluster-wide min.insync.replicas (KIP-966), listed among the brokers' default configs"),
    ("kafka-cluster", r"Elr: N/A\tLastKnownElr: N/A", "Elr: \tLastKnownElr: ",
     "Kafka 3.9 in ZooKeeper mode has no DescribeTopicPartitions (KIP-966, a KRaft API), so "
     "kafka-topics falls back to Metadata, which has no eligible leader replicas (printed N/A); "
     "Trafka serves DescribeTopicPartitions in a cluster too and reports none (printed empty)"),
]


@dataclass
class Step:
    """One tool run as the transcript keeps it."""

    label: str
    returncode: int
    stdout: str
    stderr: str
    # Why this step may print something else on a ZooKeeper-mode design than on KRaft (run
    # and kept on both, never compared); None: compared.
    differs: str | None = None

    def render(self) -> str:
        return (f"### {self.label}\nexit {self.returncode}\n--- stdout ---\n{self.stdout}"
                f"--- stderr ---\n{self.stderr}")


@dataclass
class Transcript:
    """A scenario's steps against one broker, normalised, in order."""

    broker: str
    steps: list[Step] = field(default_factory=list)

    def add(self, label: str, run: ToolRun, stdout: str | None = None, stderr: str | None = None,
            extra: Sequence[tuple[str | re.Pattern, str]] = (), differs: str | None = None) -> None:
        """Keep `run` under `label`; `stdout`/`stderr` replace what is compared (a summary
        of output whose numbers are measurements), `extra` normalises more."""
        extra = [*extra, *((pattern, replacement) for kind, pattern, replacement, _ in BY_DESIGN
                           if kind == self.broker)]
        self.steps.append(Step(label, run.returncode,
                               normalise(run.stdout if stdout is None else stdout, extra),
                               normalise(run.stderr if stderr is None else stderr, extra), differs))

    def render(self) -> str:
        return "\n".join(s.render() for s in self.steps)


def compare(reference: Transcript, candidate: Transcript) -> str | None:
    """None when equal; else a unified diff of the first differing step (and the count)."""
    if [s.label for s in reference.steps] != [s.label for s in candidate.steps]:
        return (f"the scenario took other steps on {candidate.broker} than on {reference.broker}:\n"
                f"{[s.label for s in reference.steps]}\n{[s.label for s in candidate.steps]}")
    differing = [(a, b) for a, b in zip(reference.steps, candidate.steps)
                 if a != b and not (a.differs or b.differs)]
    if not differing:
        return None
    lines = [f"{len(differing)} of {len(reference.steps)} steps differ between {reference.broker} "
             f"and {candidate.broker}"]
    for a, b in differing:
        lines += difflib.unified_diff(a.render().splitlines(), b.render().splitlines(),
                                      reference.broker, candidate.broker, lineterm="", n=2)
    return "\n".join(lines)


# --------------------------------------------------------------------------- scenarios


class ToolScenario:
    """What a scenario body gets: the broker, a `Tools`, its transcript, and names that are
    the same on every broker of the session (so the transcripts compare as printed)."""

    def __init__(self, name: str, broker, tools: Tools, token: str, workdir: Path) -> None:
        self.name = name
        self.broker = broker
        self.tools = tools
        self.token = token
        self.workdir = workdir
        self.transcript = Transcript(broker.name)
        self._admin = None
        self._extra: list[tuple[str | re.Pattern, str]] = []
        for path in _data_dirs(broker):
            self._extra.append((re.escape(str(path)), "<log-dir>"))

    @property
    def bootstrap(self) -> str:
        return self.broker.bootstrap

    def topic(self, suffix: str = "") -> str:
        return f"kt-{self.name}{'-' + suffix if suffix else ''}-{self.token}".replace("_", "-")

    def group(self, suffix: str = "") -> str:
        return f"kt-g-{self.name}{'-' + suffix if suffix else ''}-{self.token}".replace("_", "-")

    def file(self, name: str, text: str) -> Path:
        path = self.workdir / name
        path.write_text(text)
        return path

    # Setup steps are not the tools under test: they go through confluent-kafka's AdminClient
    # (no JVM start-up each).
    def admin(self):
        from confluent_kafka.admin import AdminClient

        if self._admin is None:
            self._admin = AdminClient({"bootstrap.servers": self.bootstrap})
        return self._admin

    def create_topic(self, name: str, partitions: int = 1, assignment: list[list[int]] | None = None,
                     configs: dict[str, str] | None = None) -> None:
        """Create `name` and wait until every partition has a leader."""
        from confluent_kafka.admin import NewTopic

        admin = self.admin()
        topic = NewTopic(name, len(assignment), replica_assignment=assignment, config=configs or {}) \
            if assignment else NewTopic(name, partitions, config=configs or {})
        admin.create_topics([topic])[name].result(30)
        count = len(assignment) if assignment else partitions
        deadline = time.monotonic() + 30
        while True:
            found = admin.list_topics(name, timeout=10).topics.get(name)
            if found is not None and found.error is None and len(found.partitions) == count \
                    and all(p.leader >= 0 for p in found.partitions.values()):
                return
            if time.monotonic() > deadline:
                raise AssertionError(f"{name}: no leader for every partition after 30 s: {found}")
            time.sleep(0.2)

    def commit_offsets(self, group: str, topic: str, offsets: dict[int, int]) -> None:
        """Committed offsets for an inactive group (what --reset-offsets --execute writes)."""
        from confluent_kafka import ConsumerGroupTopicPartitions, KafkaError, TopicPartition

        request = ConsumerGroupTopicPartitions(group, [TopicPartition(topic, p, o) for p, o in offsets.items()])
        retriable = {KafkaError.NOT_COORDINATOR, KafkaError.COORDINATOR_LOAD_IN_PROGRESS,
                     KafkaError.COORDINATOR_NOT_AVAILABLE}
        deadline = time.monotonic() + 30
        while True:
            result = self.admin().alter_consumer_group_offsets([request])[group].result(30)
            errors = [(tp.partition, tp.error) for tp in result.topic_partitions if tp.error is not None]
            # A fresh broker's offsets topic may still be created or loaded (NOT_COORDINATOR,
            # COORDINATOR_LOAD_IN_PROGRESS): retriable, and the admin client leaves the retry
            # of a partition's error to its caller.
            if not errors or not all(e.code() in retriable for _, e in errors) or time.monotonic() > deadline:
                break
            time.sleep(0.5)
        assert not errors, f"committing {offsets} of {topic} for {group}: {errors}"

    def normalise(self, pattern: str | re.Pattern, replacement: str) -> None:
        """Normalise `pattern` in every later step of this scenario."""
        self._extra.append((pattern, replacement))

    def run(self, tool: str, *args, label: str | None = None, input: str | None = None,
            timeout: float = DEFAULT_TIMEOUT_S, bootstrap: bool = True, record: bool = True,
            stdout: Callable[[str], str] | None = None, stderr: Callable[[str], str] | None = None,
            extra: Sequence[tuple[str | re.Pattern, str]] = (), differs: str | None = None) -> ToolRun:
        """Run a tool with `--bootstrap-server <broker>` first (unless `bootstrap=False`) and
        keep it in the transcript under `label` (default: the tool and its arguments).
        `stdout`/`stderr` map the printed text to what is compared; `differs` says why this
        step's output is not compared (a difference by design, listed in the docs)."""
        argv = (["--bootstrap-server", self.bootstrap] if bootstrap else []) + [str(a) for a in args]
        result = self.tools.run(tool, *argv, input=input, timeout=timeout)
        if record:
            self.record(label or _label(tool, args, self), result, stdout, stderr, extra, differs)
        return result

    def record(self, label: str, result: ToolRun, stdout: Callable[[str], str] | None = None,
               stderr: Callable[[str], str] | None = None,
               extra: Sequence[tuple[str | re.Pattern, str]] = (), differs: str | None = None) -> None:
        self.transcript.add(label, result,
                            stdout(result.stdout) if stdout else None,
                            stderr(result.stderr) if stderr else None,
                            [*self._extra, *extra], differs)


def _label(tool: str, args: Sequence, scenario: ToolScenario) -> str:
    text = f"{tool} {' '.join(str(a) for a in args)}"
    return text.replace(str(scenario.workdir) + "/", "").replace(scenario.bootstrap, "<bootstrap>")


def _data_dirs(broker) -> list[Path]:
    nodes = getattr(broker, "nodes", None)
    brokers = list(nodes.values()) if nodes else [getattr(broker, "inner", broker)]
    return [b.data_dir for b in brokers if getattr(b, "data_dir", None) is not None]


# --------------------------------------------------------------------------- differential

# Which broker a kind's transcripts are compared with. The reference kinds are compared with
# nothing (their scenario checks alone apply): they are Apache Kafka.
REFERENCE = {"trafka": "kafka", "trafka-cluster": "kafka-cluster", "trafka-lossy": "kafka"}
SESSION_TOKEN = os.urandom(4).hex()
_transcripts: dict[tuple[str, str], Transcript | BaseException] = {}


def differential(name: str, kind: str, get_broker: Callable[[str], object], workdir: Path,
                 body: Callable[[ToolScenario], None], reference: str | None = None) -> Transcript:
    """Run `body` against the broker of `kind`; unless `kind` is Kafka itself, run it against
    the reference kind too (once per session) and fail on any step that differs."""
    own = _play(name, kind, get_broker, workdir, body)
    ref_kind = reference or REFERENCE.get(kind)
    if ref_kind is None or ref_kind == kind:
        if isinstance(own, BaseException):
            raise own
        return own
    ref = _transcripts.get((name, ref_kind))
    if ref is None:
        ref = _play(name, ref_kind, get_broker, workdir, body)
    if isinstance(ref, BaseException):
        raise AssertionError(f"{name}: the reference {ref_kind} failed the scenario, nothing to "
                             f"compare with: {ref or repr(ref)}") from ref
    if isinstance(own, BaseException):
        so_far = getattr(own, "transcript", None)
        diff = compare(_prefix(ref, so_far), so_far) if so_far else None
        raise AssertionError(f"{name} on {kind}: {own or repr(own)}\n"
                             + (f"(steps so far against {ref_kind}:)\n{diff}" if diff else "")) from own
    diff = compare(ref, own)
    if diff:
        raise AssertionError(diff)
    return own


def _play(name: str, kind: str, get_broker, workdir: Path, body) -> Transcript | BaseException:
    broker = get_broker(kind)
    folder = workdir / kind
    scenario = ToolScenario(name, broker, Tools(folder), SESSION_TOKEN, folder)
    try:
        body(scenario)
        result: Transcript | BaseException = scenario.transcript
    except Exception as exc:  # kept to compare the steps made so far
        exc.transcript = scenario.transcript  # type: ignore[attr-defined]
        result = exc
    _transcripts[(name, kind)] = result
    return result


def _prefix(ref: Transcript, own: Transcript) -> Transcript:
    return Transcript(ref.broker, ref.steps[:len(own.steps)])
