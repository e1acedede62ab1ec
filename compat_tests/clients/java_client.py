"""Java adapter: Apache Kafka's own client, kafka-clients 4.x (Admin, producer, consumer).

The verbs run in a JVM (`java/TrafkaCompat.java`, `serve` mode) that the adapter starts on
first use and keeps for its lifetime: one line of JSON per request on its stdin, one per
answer on its stdout, matched by id, so a group member can keep polling in the JVM while
the scenario asks the admin client about its group. Group members are threads of that JVM;
a member that must die without a LeaveGroup (`killable_member`) gets a JVM of its own.
test_groups_extended.py runs the `worker` mode as its member process (`worker_argv`).

The toolchain is put together once per test session, all of it under the git-ignored .cache/:
- the `clients` classpath of .ci/jvm/pom.xml (compat_tests/jvm.py): kafka-clients 4.x with
  its runtime (slf4j-api without a binding: the client logs nowhere; lz4, snappy, zstd),
  gson (the JSON lines) and Jackson (OAUTHBEARER's JWTs), from Maven Central;
- TrafkaCompat.class, compiled with `javac` into .cache/java-compat/, cached by a hash of
  the source and classpath.

When `java`/`javac` or the classpath is missing, every Java scenario is skipped with
that reason (NotSupportedByClient) -- except under CI (`CI` set, as .ci/run does, which
installs all of it), where it is an error: a CI run never quietly loses its Java column.
"""

from __future__ import annotations

import base64
import functools
import json
import os
import shutil
import subprocess
import tempfile
import threading
from collections import deque
from concurrent.futures import Future, TimeoutError as FutureTimeout
from pathlib import Path
from typing import Iterable

from compat_tests import jvm
from compat_tests.clients.base import (
    FETCH_WAIT_MS, TXN_BLOCK_MS, Client, ClientError, ClusterMetadata, Delivery, GroupInfo,
    GroupMember, PublishingGroupMember, GroupMemberInfo, Message, NotSupportedByClient,
    OffsetOutOfRange, Record, TopicDescription, TopicMetadata, TxnProducer, normalize_state)

ROOT = Path(__file__).resolve().parents[2]
SOURCE = Path(__file__).resolve().parent / "java" / "TrafkaCompat.java"
MAIN_CLASS = "TrafkaCompat"
CACHE = ROOT / ".cache" / "java-compat"
# Start fast (the suite starts a JVM per scenario and per worker) and stay small.
JVM_FLAGS = ["-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1", "-Xss512k", "-Xmx512m"]
CALL_TIMEOUT_S = 120


@functools.lru_cache(maxsize=1)
def _toolchain() -> tuple[list[str], str]:
    """(the `java` command with classpath, "") or ([], why the Java column cannot run)."""
    java, javac = shutil.which("java"), shutil.which("javac")
    if not java or not javac:
        return [], "no JDK on PATH (java, javac); apt-get install openjdk-17-jdk-headless"
    try:
        classpath = jvm.classpath("clients")
    except jvm.JvmUnavailable as exc:
        return [], str(exc)
    classes = jvm.compile_java(SOURCE, classpath, CACHE, javac)  # a compile error: never a skip
    return [java, *JVM_FLAGS, "-cp", os.pathsep.join(map(str, [classes, *classpath])), MAIN_CLASS], ""


def java_command() -> list[str]:
    """`java ... TrafkaCompat`, or NotSupportedByClient (ClientError under CI) saying why not."""
    command, missing = _toolchain()
    if missing:
        if os.environ.get("CI"):
            raise ClientError(f"the Java column cannot run on CI: {missing}")
        raise NotSupportedByClient(f"java client unavailable: {missing}")
    return command


def worker_argv(bootstrap: str, group: str, client_id: str, session_ms: int, instance: str | None,
                assignor: str | None, topics: list[str], *, protocol: str = "classic",
                remote_assignor: str | None = None) -> list[str]:
    """The group-member worker of test_groups_extended.py, as a Java process;
    protocol="consumer" joins with KIP-848's group.protocol=consumer (tests/groups/
    test_consumer_group_clients.py), with the server-side `remote_assignor` if given."""
    argv = java_command() + ["worker", "--bootstrap", bootstrap, "--group", group,
                             "--client-id", client_id, "--session-ms", str(session_ms)]
    if instance:
        argv += ["--instance", instance]
    if assignor:
        argv += ["--assignor", assignor]
    if protocol != "classic":
        argv += ["--protocol", protocol]
    if remote_assignor:
        argv += ["--remote-assignor", remote_assignor]
    return argv + list(topics)


def share_worker_argv(bootstrap: str, group: str, client_id: str, topics: list[str]) -> list[str]:
    """A share-group member (kafka-clients' KafkaShareConsumer) as a Java
    process: one JSON line per record it accepts; "stop" (or EOF) on stdin closes it."""
    return java_command() + ["share_worker", "--bootstrap", bootstrap, "--group", group,
                             "--client-id", client_id, *topics]


def _escape_property(text: str) -> str:
    """A key or value as java.util.Properties.load reads it back (backslashes, separators,
    line breaks and leading blanks escaped)."""
    out = text.replace("\\", "\\\\").replace("\n", "\\n").replace("\r", "\\r")
    out = out.replace("=", "\\=").replace(":", "\\:").replace("#", "\\#").replace("!", "\\!")
    return "\\ " + out[1:] if out.startswith(" ") else out


def _b64(data: bytes | None) -> str | None:
    return None if data is None else base64.b64encode(data).decode()


def _bytes(text: str | None) -> bytes | None:
    return None if text is None else base64.b64decode(text)


def _record(r: dict) -> Record:
    return Record(r["topic"], r["partition"], r["offset"], _bytes(r["key"]), _bytes(r["value"]),
                  tuple((k, _bytes(v)) for k, v in r["headers"]), r["timestamp"],
                  r["timestamp_type"])


def _wire_messages(messages: Iterable[Message]) -> list[dict]:
    return [{"value": _b64(m.value), "key": _b64(m.key), "partition": m.partition,
             "timestamp": m.timestamp, "headers": [[k, _b64(v)] for k, v in m.headers]}
            for m in messages]


def _partitions(pairs) -> frozenset[tuple[str, int]]:
    return frozenset((t, p) for t, p in pairs)


class _Jvm:
    """One `TrafkaCompat serve` process: calls by id, member events to their members."""

    def __init__(self, bootstrap: str, config_file: str | None = None) -> None:
        env = dict(os.environ)
        if config_file:
            env["TRAFKA_COMPAT_CLIENT_CONFIG"] = config_file
        self.proc = subprocess.Popen(java_command() + ["serve", bootstrap], stdin=subprocess.PIPE,
                                     stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                     start_new_session=True, env=env)
        self._lock = threading.Lock()
        self._write_lock = threading.Lock()
        self._next_id = 0
        self._waiting: dict[int, Future] = {}
        self.members: dict[int, _Member] = {}
        self.early: dict[int, list[dict]] = {}
        self.stderr: deque[str] = deque(maxlen=40)
        threading.Thread(target=self._read, daemon=True, name="java-out").start()
        threading.Thread(target=self._read_err, daemon=True, name="java-err").start()

    def _read(self) -> None:
        for line in self.proc.stdout:
            if not line.strip():
                continue
            message = json.loads(line)
            if message.get("ev") == "member":
                with self._lock:
                    member = self.members.get(message["member"])
                    if member is None:  # its thread spoke before member_start was answered
                        self.early.setdefault(message["member"], []).append(message)
                if member is not None:
                    member.on_event(message)
                continue
            with self._lock:
                future = self._waiting.pop(message["id"], None)
            if future is not None:
                future.set_result(message)
        self.proc.wait()
        with self._lock:
            waiting, self._waiting = self._waiting, {}
        for future in waiting.values():
            future.set_result({"error": f"the Java adapter exited ({self.proc.returncode}): "
                                        + self.tail()})

    def _read_err(self) -> None:
        for raw in self.proc.stderr:
            line = raw.decode("utf-8", "replace").rstrip()
            # slf4j says once that it has no binding: that is on purpose.
            if line and not line.startswith("SLF4J"):
                self.stderr.append(line)

    def tail(self) -> str:
        return "\n".join(list(self.stderr)[-10:])

    def call(self, op: str, timeout: float = CALL_TIMEOUT_S, **args) -> dict:
        future: Future = Future()
        with self._lock:
            self._next_id += 1
            request_id = self._next_id
            self._waiting[request_id] = future
        line = json.dumps({"id": request_id, "op": op, **args}) + "\n"
        try:
            with self._write_lock:
                self.proc.stdin.write(line.encode())
                self.proc.stdin.flush()
        except (BrokenPipeError, ValueError) as exc:
            raise ClientError(f"the Java adapter is gone ({self.proc.poll()}): {self.tail()}") from exc
        try:
            answer = future.result(timeout)
        except FutureTimeout:
            raise ClientError(f"java {op}: no answer within {timeout}s; stderr: {self.tail()}") from None
        if "error" in answer:
            if answer.get("kind") == "offset_out_of_range":
                raise OffsetOutOfRange(answer["error"])
            raise ClientError(f"java {op}: {answer['error']}", answer.get("code"))
        return answer

    def close(self) -> None:
        if self.proc.poll() is None:
            try:
                self.call("exit", timeout=60)
            except ClientError:
                pass
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.kill()
        for stream in (self.proc.stdin, self.proc.stdout, self.proc.stderr):
            try:
                stream.close()
            except OSError:
                pass

    def kill(self) -> None:
        self.proc.kill()
        self.proc.wait()


class _Member(PublishingGroupMember):
    """A subscribed KafkaConsumer on a thread of the JVM; its events arrive on the JVM's stdout."""

    def __init__(self, jvm: _Jvm, topics: list[str], group: str, own_jvm: bool = False) -> None:
        super().__init__()
        self._jvm = jvm
        self._own_jvm = own_jvm
        self._id = jvm.call("member_start", topics=list(topics), group=group)["member"]
        with jvm._lock:  # the reader waits: early events stay in order before later ones
            jvm.members[self._id] = self
            for event in jvm.early.pop(self._id, []):
                self.on_event(event)

    def on_event(self, event: dict) -> None:
        with self._lock:
            if "records" in event:
                self._records.extend(_record(r) for r in event["records"])
            if "assignment" in event:
                self._assignment = _partitions(event["assignment"])
            if "error" in event:
                self._error = event["error"]

    def error(self) -> str | None:
        with self._lock:
            error = self._error
        if self._jvm.proc.poll() is not None:
            error = "\n".join(filter(None, [error, f"JVM exited {self._jvm.proc.returncode}",
                                            self._jvm.tail()]))
        return error

    def leave(self) -> None:
        if self._jvm.proc.poll() is None:
            self._jvm.call("member_leave", member=self._id)
        with self._jvm._lock:
            self._jvm.members.pop(self._id, None)
        if self._own_jvm:
            self._jvm.close()

    def kill(self) -> None:
        """SIGKILL the member's own JVM: no LeaveGroup, the session timeout must notice."""
        if not self._own_jvm:
            raise RuntimeError("only a killable_member has a JVM of its own")
        self._jvm.kill()


class _TxnProducer(TxnProducer):
    """A KafkaProducer with transactional.id in the adapter's JVM, named by a handle;
    initTransactions() runs before the handle is answered. sendOffsetsToTransaction gets
    `new ConsumerGroupMetadata(group)` (the group id alone)."""

    def __init__(self, jvm: _Jvm, transactional_id: str, transaction_timeout_ms: int | None
                 ) -> None:
        self.transactional_id = transactional_id
        self._jvm = jvm
        self._id = jvm.call("txn_open", transactional_id=transactional_id,
                            transaction_timeout_ms=transaction_timeout_ms,
                            block_ms=TXN_BLOCK_MS)["producer"]

    def _call(self, op: str, **args) -> dict:
        return self._jvm.call(op, producer=self._id, **args)

    def begin(self) -> None:
        self._call("txn_begin")

    def produce(self, topic, messages) -> list[Delivery]:
        answer = self._call("txn_produce", topic=topic, messages=_wire_messages(messages))
        return [Delivery(p, offset) for p, offset in answer["deliveries"]]

    def send_offsets(self, group, offsets) -> None:
        self._call("txn_send_offsets", group=group,
                   offsets=[[t, p, o] for (t, p), o in offsets.items()])

    def commit(self) -> None:
        self._call("txn_commit")

    def abort(self) -> None:
        self._call("txn_abort")

    def close(self) -> None:
        if self._jvm.proc.poll() is None:
            try:
                self._call("txn_close")
            except ClientError:
                pass


def killable_member(bootstrap: str, topics: list[str], group: str) -> _Member:
    return _Member(_Jvm(bootstrap), topics, group, own_jvm=True)


class JavaClient(Client):
    name = "java"

    def __init__(self, bootstrap: str, config: dict[str, str] | None = None) -> None:
        """`config`: client settings added to every producer, consumer and admin the JVM
        makes (security.protocol, ssl.truststore.location, sasl.jaas.config...)."""
        super().__init__(bootstrap)
        java_command()  # skip (or fail under CI) before the scenario does anything
        self._lock = threading.Lock()
        self._process: _Jvm | None = None
        self._config_file: str | None = None
        if config:
            fd, self._config_file = tempfile.mkstemp(prefix="trafka-java-client-", suffix=".properties")
            with os.fdopen(fd, "w") as out:
                for key, value in config.items():
                    out.write(f"{_escape_property(key)}={_escape_property(str(value))}\n")

    def _jvm(self) -> _Jvm:
        """This adapter's JVM, started on first use (and again after close())."""
        with self._lock:
            if self._process is None or self._process.proc.poll() is not None:
                self._process = _Jvm(self.bootstrap, self._config_file)
            return self._process

    def _call(self, op: str, timeout: float = CALL_TIMEOUT_S, **args) -> dict:
        return self._jvm().call(op, timeout, **args)

    def close(self) -> None:
        """Stops the JVM (leaving any member still running); the next verb starts another."""
        with self._lock:
            jvm, self._process = self._process, None
        if jvm is not None:
            jvm.close()

    # -- cluster
    def metadata(self, topics=None, allow_auto_create=False) -> ClusterMetadata:
        answer = self._call("metadata", topics=topics, auto_create=allow_auto_create)
        brokers = {int(i): (host, port) for i, (host, port) in answer["brokers"].items()}
        return ClusterMetadata(brokers, {
            name: TopicMetadata(t["error"], {int(p): leader for p, leader in t["partitions"].items()})
            for name, t in answer["topics"].items()})

    # -- admin
    def create_topic(self, name, partitions=1, configs=None) -> None:
        self._call("create_topic", name=name, partitions=partitions, configs=dict(configs or {}))

    def delete_topic(self, name) -> None:
        self._call("delete_topic", name=name)

    def create_partitions(self, name, total) -> None:
        self._call("create_partitions", name=name, total=total)

    def describe_configs(self, name) -> dict[str, str | None]:
        return self._call("describe_configs", name=name)["configs"]

    def alter_configs(self, name, configs) -> None:
        self._call("alter_configs", name=name, configs=dict(configs))

    def describe_topic(self, name) -> TopicDescription:
        return self._description(self._call("describe_topic", name=name))

    def create_acl(self, name: str, pattern: str, principal: str, operation: str, permission: str) -> None:
        """One topic ACL through Admin.createAcls (Kafka's enum names: LITERAL, READ, ALLOW)."""
        self._call("create_acl", name=name, pattern=pattern, principal=principal, operation=operation,
                   permission=permission)

    def describe_acls(self) -> list[dict]:
        """Every ACL, through Admin.describeAcls(AclBindingFilter.ANY)."""
        return self._call("describe_acls")["acls"]

    def describe_topic_by_id(self, topic_id) -> TopicDescription:
        return self._description(self._call("describe_topic", topic_id=topic_id))

    @staticmethod
    def _description(answer: dict) -> TopicDescription:
        return TopicDescription(answer["name"], answer["topic_id"],
                                {int(p): leader for p, leader in answer["partitions"].items()})

    # -- data
    def produce(self, topic, messages: Iterable[Message], acks="all", compression="none",
                idempotent=None) -> list[Delivery]:
        wire = _wire_messages(messages)
        answer = self._call("produce", topic=topic, messages=wire,
                            acks="all" if acks in ("all", -1) else str(int(acks)),
                            compression=compression, idempotent=idempotent)
        return [Delivery(p, offset) for p, offset in answer["deliveries"]]

    def consume(self, topic, n, *, group=None, start=None, auto_offset_reset="earliest",
                timeout=15.0, fetch_wait_ms=FETCH_WAIT_MS, commit=True,
                isolation_level="read_uncommitted", client_rack=None) -> list[Record]:
        answer = self._call(
            "consume", timeout=timeout + 60, topic=topic, n=n, group=group,
            start=None if start is None else {str(p): o for p, o in start.items()},
            reset=auto_offset_reset, timeout_ms=int(timeout * 1000), fetch_wait_ms=fetch_wait_ms,
            commit=commit, isolation_level=isolation_level, client_rack=client_rack)
        return [_record(r) for r in answer["records"]]

    def commit(self, group, topic, offsets) -> None:
        self._call("commit", group=group, topic=topic, offsets={str(p): o for p, o in offsets.items()})

    def committed(self, group, topic, partitions) -> dict[int, int | None]:
        answer = self._call("committed", group=group, topic=topic, partitions=list(partitions))
        return {int(p): o for p, o in answer["offsets"].items()}

    def list_offsets(self, topic, partition, spec, isolation_level="read_uncommitted"
                     ) -> int | None:
        return self._call("list_offsets", topic=topic, partition=partition, spec=spec,
                          isolation_level=isolation_level)["offset"]

    def transactional_producer(self, transactional_id, *, transaction_timeout_ms=None
                               ) -> TxnProducer:
        return _TxnProducer(self._jvm(), transactional_id, transaction_timeout_ms)

    # -- groups
    def group_member(self, topics, group) -> GroupMember:
        return _Member(self._jvm(), topics, group)

    def list_groups(self) -> list[str]:
        return self._call("list_groups")["groups"]

    def describe_group(self, group) -> GroupInfo:
        g = self._call("describe_group", group=group)
        members = [GroupMemberInfo(m["member_id"], m["client_id"], _partitions(m["assignment"]))
                   for m in g["members"]]
        return GroupInfo(g["group_id"], normalize_state(g["state"]), g["protocol_type"], members)

    def delete_group(self, group) -> None:
        self._call("delete_group", group=group)
