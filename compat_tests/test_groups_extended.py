"""Consumer groups under stress: dying members, clean leaves, mixed clients, cooperative and
static members, broker restarts, churn. Extends test_groups.py.

Members here are child processes (so a scenario can SIGKILL one) that report what the
application sees as JSON lines: every record, every assignment change, every commit. The
Python clients run this module as their worker (`python -m compat_tests.test_groups_extended
--client NAME ...`), Java its own `worker` mode (clients/java/TrafkaCompat.java, reporting the
same events); kcat is a process already (`kcat -G`). Workers commit the way careful
applications do: synchronously, every 300 ms and when partitions are revoked, and only
offsets of records already reported — so whatever a successor re-reads after a crash is
exactly the redelivery since the last commit, and the scenarios can count it.

Duplicate accounting: for a partition that moved after a crash, every record read twice
must lie between the offset committed when the member died and the last offset the dead
member read; anywhere else a duplicate is a broker bug.

Group generations are read from the broker with a raw Heartbeat (v0) probe: the
generation is the one value for which a member's heartbeat is not ILLEGAL_GENERATION.
"""

from __future__ import annotations

import argparse
import faulthandler
import json
import logging
import os
import random
import signal
import socket
import struct
import subprocess
import sys
import threading
import time
from collections import Counter

import pytest

from compat_tests import kafka_wire
from compat_tests.brokers import SUITE_SETTINGS, SUITE_SETTINGS_KINDS
from compat_tests.clients.base import HEARTBEAT_MS, SESSION_TIMEOUT_MS, Message, NotSupportedByClient
from compat_tests.helpers import make_topic, wait_until

SESSION_S = SESSION_TIMEOUT_MS / 1000
# group.consumer.session.timeout.ms of the suite's brokers (brokers.SUITE_SETTINGS): KIP-848
# members are fenced by the broker's setting, not their own.
KIP848_SESSION_S = int(SUITE_SETTINGS["group.consumer.session.timeout.ms"]) / 1000
# Time for everyone to notice a rebalance and rejoin: heartbeats plus client backoffs.
REJOIN_SLACK_S = 8
SETTLE_TIMEOUT_S = 45
COMMIT_EVERY_MS = 300
PYTHON_CLIENTS = ("kafka-python", "confluent-kafka", "aiokafka")
GROUP_PROTOCOLS = ("classic", "consumer")
# The clients that speak KIP-848's consumer group protocol (ConsumerGroupHeartbeat).
KIP848_CLIENTS = ("confluent-kafka", "java")


# =========================================================================== the worker
class _Out:
    """JSON lines to stdout, one flush per batch so a SIGKILL loses nothing reported."""

    def __init__(self) -> None:
        self.lock = threading.Lock()

    def emit(self, **event) -> None:
        self.emit_many([event])

    def emit_many(self, events: list[dict]) -> None:
        if not events:
            return
        text = "".join(json.dumps(e) + "\n" for e in events)
        with self.lock:
            sys.stdout.write(text)
            sys.stdout.flush()


def _run_kafka_python(args, stop: threading.Event, out: _Out) -> None:
    from kafka import KafkaConsumer
    from kafka.consumer.subscription_state import AsyncConsumerRebalanceListener
    from kafka.coordinator.assignors.cooperative_sticky import CooperativeStickyAssignor
    from kafka.coordinator.assignors.range import RangePartitionAssignor
    from kafka.coordinator.assignors.roundrobin import RoundRobinPartitionAssignor
    from kafka.structs import OffsetAndMetadata

    assignors = {"range": RangePartitionAssignor, "roundrobin": RoundRobinPartitionAssignor,
                 "cooperative-sticky": CooperativeStickyAssignor}
    extra = {}
    if args.assignor:
        extra["partition_assignment_strategy"] = [assignors[args.assignor]]
    if args.instance:
        extra["group_instance_id"] = args.instance
    consumer = KafkaConsumer(
        bootstrap_servers=args.bootstrap, group_id=args.group, client_id=args.client_id,
        enable_auto_commit=False, auto_offset_reset="earliest", fetch_max_wait_ms=100,
        session_timeout_ms=args.session_ms, heartbeat_interval_ms=HEARTBEAT_MS,
        request_timeout_ms=max(30000, args.session_ms + 5000), **extra)
    pending: dict = {}

    def commit(only=None) -> None:
        offsets = {tp: OffsetAndMetadata(o, "", -1) for tp, o in pending.items() if only is None or tp in only}
        if not offsets:
            return
        try:
            consumer.commit(offsets)
        except Exception as exc:  # noqa: BLE001 - reported; the scenario judges
            out.emit(ev="error", msg=f"commit: {exc!r}")
            return
        out.emit(ev="commit", offsets={str(tp.partition): o.offset for tp, o in offsets.items()})
        for tp in offsets:
            pending.pop(tp, None)

    class Listener(AsyncConsumerRebalanceListener):
        # kafka-python 3 runs rebalance listeners on its network event loop: a blocking
        # consumer.commit() cannot work there, so the revoke hook awaits the coordinator's
        # own async commit (what its auto-commit does before a rebalance).
        async def on_partitions_revoked(self, revoked):
            offsets = {tp: OffsetAndMetadata(o, "", -1) for tp, o in list(pending.items()) if tp in revoked}
            if offsets:
                try:
                    await consumer._coordinator._commit_offsets_sync_async(offsets, timeout_ms=10000)
                    out.emit(ev="commit", offsets={str(tp.partition): o.offset for tp, o in offsets.items()})
                    for tp in offsets:
                        pending.pop(tp, None)
                except Exception as exc:  # noqa: BLE001
                    out.emit(ev="error", msg=f"commit on revoke: {exc!r}")
            out.emit(ev="revoked", parts=sorted(tp.partition for tp in revoked))

        async def on_partitions_assigned(self, assigned):
            out.emit(ev="assigned", parts=sorted(tp.partition for tp in assigned))

        async def on_partitions_lost(self, lost):
            out.emit(ev="lost", parts=sorted(tp.partition for tp in lost))
            for tp in lost:
                pending.pop(tp, None)

    consumer.subscribe(args.topics, listener=Listener())
    last = time.monotonic()
    try:
        while not stop.is_set():
            if args.unsubscribe.is_set():
                if consumer.subscription():
                    # kafka-python's unsubscribe() leaves the group without calling the
                    # listener, so what was read is committed first.
                    commit()
                    consumer.unsubscribe()
                    out.emit(ev="unsubscribed")
                time.sleep(0.1)  # poll() needs a subscription
                continue
            try:
                # Not 100 ms: kafka-python 3.0.12 can lose a SyncGroup answer that arrives
                # after poll() gave up waiting mid-rebalance (the member then never
                # assigns, never heartbeats; cf. dpkp/kafka-python#2617). A longer poll
                # rarely expires mid-rebalance; it still returns as soon as records arrive.
                batch = consumer.poll(timeout_ms=2000)
            except Exception as exc:  # noqa: BLE001
                out.emit(ev="error", msg=repr(exc))
                time.sleep(0.1)
                continue
            events = []
            for tp, records in batch.items():
                events += [{"ev": "rec", "p": r.partition, "o": r.offset} for r in records]
                if records:
                    pending[tp] = records[-1].offset + 1
            out.emit_many(events)
            if time.monotonic() - last >= COMMIT_EVERY_MS / 1000:
                commit()
                last = time.monotonic()
        commit()
    finally:
        consumer.close(autocommit=False)


def _run_confluent(args, stop: threading.Event, out: _Out) -> None:
    import confluent_kafka as ck

    conf = {"bootstrap.servers": args.bootstrap, "group.id": args.group, "client.id": args.client_id,
            "enable.auto.commit": False, "auto.offset.reset": "earliest", "fetch.wait.max.ms": 100,
            "session.timeout.ms": args.session_ms, "heartbeat.interval.ms": HEARTBEAT_MS,
            "enable.partition.eof": False}
    if args.assignor:
        conf["partition.assignment.strategy"] = args.assignor
    if args.instance:
        conf["group.instance.id"] = args.instance
    if args.protocol == "consumer":
        # KIP-848: the broker assigns and sets the session and heartbeat timing
        # (group.consumer.*); librdkafka refuses these classic settings with it.
        for key in ("session.timeout.ms", "heartbeat.interval.ms", "partition.assignment.strategy"):
            conf.pop(key, None)
        conf["group.protocol"] = "consumer"
    consumer = ck.Consumer(conf)
    pending: dict[int, int] = {}
    topic = args.topics[0]

    def commit(only=None) -> None:
        offsets = {p: o for p, o in pending.items() if only is None or p in only}
        if not offsets:
            return
        try:
            consumer.commit(offsets=[ck.TopicPartition(topic, p, o) for p, o in offsets.items()],
                            asynchronous=False)
        except ck.KafkaException as exc:
            out.emit(ev="error", msg=f"commit: {exc}")
            return
        out.emit(ev="commit", offsets={str(p): o for p, o in offsets.items()})
        for p in offsets:
            pending.pop(p, None)

    def on_assign(_consumer, parts):
        out.emit(ev="assigned", parts=sorted(tp.partition for tp in parts))

    def on_revoke(_consumer, parts):
        commit({tp.partition for tp in parts})
        out.emit(ev="revoked", parts=sorted(tp.partition for tp in parts))

    def on_lost(_consumer, parts):
        out.emit(ev="lost", parts=sorted(tp.partition for tp in parts))
        for tp in parts:
            pending.pop(tp.partition, None)

    consumer.subscribe(args.topics, on_assign=on_assign, on_revoke=on_revoke, on_lost=on_lost)
    last = time.monotonic()
    unsubscribed = False
    try:
        while not stop.is_set():
            if args.unsubscribe.is_set() and not unsubscribed:
                consumer.unsubscribe()  # revokes (on_revoke commits), then LeaveGroup
                unsubscribed = True
                out.emit(ev="unsubscribed")
            events = []
            for msg in consumer.consume(num_messages=500, timeout=0.1):
                if msg.error() is not None:
                    events.append({"ev": "error", "msg": str(msg.error())})
                    continue
                events.append({"ev": "rec", "p": msg.partition(), "o": msg.offset()})
                pending[msg.partition()] = msg.offset() + 1
            out.emit_many(events)
            if time.monotonic() - last >= COMMIT_EVERY_MS / 1000:
                commit()
                last = time.monotonic()
        commit()
    finally:
        consumer.close()


def _run_aiokafka(args, stop: threading.Event, out: _Out) -> None:
    import asyncio

    from aiokafka import AIOKafkaConsumer, ConsumerRebalanceListener
    from aiokafka.coordinator.assignors.range import RangePartitionAssignor
    from aiokafka.coordinator.assignors.roundrobin import RoundRobinPartitionAssignor

    async def main() -> None:
        extra = {}
        if args.assignor:
            extra["partition_assignment_strategy"] = ({"range": RangePartitionAssignor,
                                                       "roundrobin": RoundRobinPartitionAssignor}[args.assignor],)
        if args.instance:
            extra["group_instance_id"] = args.instance
        consumer = AIOKafkaConsumer(
            bootstrap_servers=args.bootstrap, group_id=args.group, client_id=args.client_id,
            enable_auto_commit=False, auto_offset_reset="earliest", fetch_max_wait_ms=100,
            session_timeout_ms=args.session_ms, heartbeat_interval_ms=HEARTBEAT_MS, **extra)
        pending: dict = {}

        async def commit(only=None) -> None:
            offsets = {tp: o for tp, o in pending.items() if only is None or tp in only}
            if not offsets:
                return
            try:
                await consumer.commit(offsets)
            except Exception as exc:  # noqa: BLE001
                out.emit(ev="error", msg=f"commit: {exc!r}")
                return
            out.emit(ev="commit", offsets={str(tp.partition): o for tp, o in offsets.items()})
            for tp in offsets:
                pending.pop(tp, None)

        class Listener(ConsumerRebalanceListener):
            async def on_partitions_revoked(self, revoked):
                await commit(set(revoked))
                out.emit(ev="revoked", parts=sorted(tp.partition for tp in revoked))

            async def on_partitions_assigned(self, assigned):
                out.emit(ev="assigned", parts=sorted(tp.partition for tp in assigned))

        consumer.subscribe(args.topics, listener=Listener())
        await consumer.start()
        last = time.monotonic()
        try:
            while not stop.is_set():
                try:
                    batch = await consumer.getmany(timeout_ms=100)
                except Exception as exc:  # noqa: BLE001
                    out.emit(ev="error", msg=repr(exc))
                    await asyncio.sleep(0.1)
                    continue
                events = []
                for tp, records in batch.items():
                    events += [{"ev": "rec", "p": r.partition, "o": r.offset} for r in records]
                    if records:
                        pending[tp] = records[-1].offset + 1
                out.emit_many(events)
                if time.monotonic() - last >= COMMIT_EVERY_MS / 1000:
                    await commit()
                    last = time.monotonic()
            await commit()
        finally:
            await consumer.stop()

    asyncio.run(main())


def worker_main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="a consumer-group member reporting JSON lines")
    parser.add_argument("--client", required=True, choices=PYTHON_CLIENTS)
    parser.add_argument("--bootstrap", required=True)
    parser.add_argument("--group", required=True)
    parser.add_argument("--client-id", default="compat-ext")
    parser.add_argument("--instance", default=None)
    parser.add_argument("--assignor", default=None)
    parser.add_argument("--session-ms", type=int, default=SESSION_TIMEOUT_MS)
    parser.add_argument("--protocol", choices=GROUP_PROTOCOLS, default="classic",
                        help="group.protocol: classic, or KIP-848's consumer (confluent-kafka only)")
    parser.add_argument("topics", nargs="+")
    args = parser.parse_args(argv)
    if args.protocol != "classic" and args.client not in KIP848_CLIENTS:
        parser.error(f"{args.client} has no group.protocol={args.protocol}")
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    # SIGUSR2: unsubscribe() and stay alive (kafka-python and confluent-kafka workers).
    args.unsubscribe = threading.Event()
    signal.signal(signal.SIGUSR2, lambda *_: args.unsubscribe.set())
    faulthandler.register(signal.SIGUSR1, all_threads=True)  # stack dump when a member hangs
    log_dir = os.environ.get("COMPAT_GROUP_WORKER_LOG_DIR")  # client debug logs, for diagnosis
    if log_dir:
        logging.basicConfig(level=logging.DEBUG, filename=os.path.join(log_dir, f"{args.client_id}-{os.getpid()}.log"),
                            format="%(asctime)s %(threadName)s %(name)s %(levelname)s %(message)s")
    logging.basicConfig(level=logging.WARNING, stream=sys.stderr)
    out = _Out()
    run = {"kafka-python": _run_kafka_python, "confluent-kafka": _run_confluent, "aiokafka": _run_aiokafka}
    try:
        run[args.client](args, stop, out)
    except Exception as exc:  # noqa: BLE001
        out.emit(ev="fatal", msg=repr(exc))
        raise
    out.emit(ev="closed")
    return 0


# =========================================================================== the harness
class Member:
    """One member process and everything it reported."""

    def __init__(self, client: str, bootstrap: str, group: str, topic: str, *, instance: str | None = None,
                 assignor: str | None = None, session_ms: int = SESSION_TIMEOUT_MS, name: str = "m",
                 protocol: str = "classic") -> None:
        if protocol != "classic" and client not in KIP848_CLIENTS:
            raise NotSupportedByClient(f"{client} does not speak group.protocol={protocol} (KIP-848)")
        self.client = client
        self.name = name
        self.topic = topic
        self.lock = threading.Lock()
        self.records: list[tuple[int, int]] = []  # (partition, offset) in the order the app saw them
        self.assignment: set[int] = set()
        self.events: list[tuple[float, str, frozenset[int]]] = []
        self.commits: dict[int, int] = {}
        # Reads and acknowledged commits in the order the member reported them:
        # ("rec", partition, offset) and ("commit", {partition: offset}).
        self.log: list[tuple] = []
        self.errors: list[str] = []
        self.stderr: list[str] = []
        if client == "kcat":
            from compat_tests.clients import kcat
            if not kcat.available():
                raise NotSupportedByClient("kcat binary not found")
            if assignor == "cooperative-sticky":
                raise NotSupportedByClient("kcat 1.7 assigns eagerly (rd_kafka_assign) and cannot run "
                                           "the cooperative protocol")
            argv = [kcat.KCAT, "-b", bootstrap, "-J", "-u", "-G", group, "-X", f"client.id=compat-ext-{name}",
                    "-X", "enable.auto.commit=true", "-X", f"auto.commit.interval.ms={COMMIT_EVERY_MS}",
                    "-X", f"session.timeout.ms={session_ms}", "-X", f"heartbeat.interval.ms={HEARTBEAT_MS}",
                    "-X", "topic.auto.offset.reset=earliest", "-X", "fetch.wait.max.ms=100"]
            if instance:
                argv += ["-X", f"group.instance.id={instance}"]
            if assignor:
                argv += ["-X", f"partition.assignment.strategy={assignor}"]
            argv.append(topic)
        elif client == "java":
            from compat_tests.clients import java_client
            argv = java_client.worker_argv(bootstrap, group, f"compat-ext-{name}", session_ms, instance,
                                           assignor, [topic], protocol=protocol)
        else:
            argv = [sys.executable, "-m", "compat_tests.test_groups_extended", "--client", client,
                    "--bootstrap", bootstrap, "--group", group, "--client-id", f"compat-ext-{name}",
                    "--session-ms", str(session_ms)]
            if instance:
                argv += ["--instance", instance]
            if assignor:
                argv += ["--assignor", assignor]
            if protocol != "classic":
                argv += ["--protocol", protocol]
            argv.append(topic)
        repo = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
        env = dict(os.environ, PYTHONPATH=os.pathsep.join(filter(None, [repo, os.environ.get("PYTHONPATH")])))
        self.proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, stdin=subprocess.DEVNULL,
                                     cwd=repo, env=env, start_new_session=True)
        self._threads = [threading.Thread(target=self._read_out, daemon=True),
                         threading.Thread(target=self._read_err, daemon=True)]
        for t in self._threads:
            t.start()

    # -- reading what the member reports
    def _change(self, kind: str, parts: frozenset[int]) -> None:
        self.events.append((time.monotonic(), kind, parts))
        if kind == "assigned":
            self.assignment |= parts
        else:
            self.assignment -= parts

    def _read_out(self) -> None:
        for raw in self.proc.stdout:
            line = raw.decode("utf-8", "replace").strip()
            if not line:
                continue
            try:
                event = json.loads(line)
            except ValueError:
                continue
            with self.lock:
                if self.client == "kcat":
                    self.records.append((event["partition"], event["offset"]))
                    self.log.append(("rec", event["partition"], event["offset"]))
                    continue
                kind = event.get("ev")
                if kind == "rec":
                    self.records.append((event["p"], event["o"]))
                    self.log.append(("rec", event["p"], event["o"]))
                elif kind in ("assigned", "revoked", "lost"):
                    self._change(kind, frozenset(event["parts"]))
                elif kind == "commit":
                    self.commits.update({int(p): o for p, o in event["offsets"].items()})
                    self.log.append(("commit", {int(p): o for p, o in event["offsets"].items()}))
                elif kind in ("error", "fatal"):
                    self.errors.append(event["msg"])

    def _read_err(self) -> None:
        from compat_tests.clients.kcat import ASSIGN_RE, PART_RE

        for raw in self.proc.stderr:
            line = raw.decode("utf-8", "replace").rstrip("\n")
            with self.lock:
                self.stderr = (self.stderr + [line])[-400:]
                if self.client == "kcat":
                    match = ASSIGN_RE.search(line)
                    if match:
                        parts = frozenset(int(p) for _t, p in PART_RE.findall(match.group(2)))
                        self._change("assigned" if match.group(1) == "assigned" else "revoked", parts)
                    elif "ERROR" in line or "FAIL" in line:
                        self.errors.append(line)

    # -- snapshots
    def owned(self) -> frozenset[int]:
        with self.lock:
            return frozenset(self.assignment)

    def seen(self) -> list[tuple[int, int]]:
        with self.lock:
            return list(self.records)

    def read_log(self) -> list[tuple]:
        with self.lock:
            return list(self.log)

    def history(self) -> list[tuple[float, str, frozenset[int]]]:
        with self.lock:
            return list(self.events)

    def describe(self) -> str:
        with self.lock:
            return (f"{self.name}({self.client}) owns {sorted(self.assignment)}, read {len(self.records)}, "
                    f"errors {self.errors[-3:]}, stderr {self.stderr[-3:]}, exit {self.proc.poll()}")

    def stacks(self) -> str:
        """Every thread's stack of a member that seems stuck (SIGUSR1: faulthandler in the
        Python workers, a handler of its own in the Java one)."""
        if self.client == "kcat" or self.proc.poll() is not None:
            return ""
        with self.lock:
            mark = len(self.stderr)
        self.proc.send_signal(signal.SIGUSR1)
        time.sleep(1.0)
        with self.lock:
            dump = [line for line in self.stderr[mark:] if "kafka.net.selector" not in line]
        return f"--- {self.name} stacks ---\n" + "\n".join(dump)

    # -- endings
    def unsubscribe(self) -> None:
        """consumer.unsubscribe() in a process that stays alive (it leaves the group)."""
        if self.client not in ("kafka-python", "confluent-kafka"):
            raise NotSupportedByClient(f"the {self.client} worker has no unsubscribe")
        self.proc.send_signal(signal.SIGUSR2)

    def stop(self, timeout: float = 30) -> None:
        """A clean shutdown: the member commits and (unless static) leaves the group."""
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
        try:
            self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        for t in self._threads:
            t.join(5)

    def kill(self) -> None:
        """Die without a word (SIGKILL): only the session timeout tells the broker."""
        self.proc.kill()
        self.proc.wait()
        for t in self._threads:
            t.join(5)


def kip848_only(client_name: str, broker_kind: str) -> None:
    """Skip a KIP-848 scenario for a client that does not speak the consumer protocol, or a
    broker without the suite's short group.consumer.* timing (brokers.SUITE_SETTINGS, which
    the `kafka` and `trafka` kinds run with; a peer broker keeps its own defaults)."""
    if client_name not in KIP848_CLIENTS:
        raise NotSupportedByClient(f"{client_name} does not speak group.protocol=consumer (KIP-848)")
    if broker_kind.split("-")[0] not in SUITE_SETTINGS_KINDS:
        pytest.skip(f"the KIP-848 scenarios rely on the suite's group.consumer.* settings "
                    f"(brokers.SUITE_SETTINGS), which {broker_kind} does not take")


class ProcessGroupMember:
    """A `Member` process behind the adapters' GroupMember verbs (assignment, leave, error),
    for scenarios written against `client.group_member` run with group.protocol=consumer."""

    def __init__(self, member: Member) -> None:
        self.member = member

    def assignment(self) -> set[tuple[str, int]]:
        return {(self.member.topic, p) for p in self.member.owned()}

    def leave(self) -> None:
        self.member.stop()

    def error(self) -> str | None:
        with self.member.lock:
            return "; ".join(self.member.errors[-3:] + self.member.stderr[-3:]) or None

    def unknown_member_reports(self) -> int:
        with self.member.lock:
            lines = self.member.errors + self.member.stderr
        return sum(1 for line in lines if "UNKNOWN_MEMBER_ID" in line.upper() or "FENCED_MEMBER_EPOCH" in line.upper())


def stop_all(members) -> None:
    for m in members:
        try:
            m.stop()
        except Exception:  # noqa: BLE001 - best effort
            pass


def wait_settled(members, partitions: int, what: str, sizes: list[int] | None = None,
                 timeout: float = SETTLE_TIMEOUT_S) -> list[frozenset[int]]:
    """Until every partition is owned by exactly one of `members` (optionally with the given
    sizes), for a second in a row."""
    everything = set(range(partitions))

    def settled():
        sets = [m.owned() for m in members]
        ok = (sum(len(s) for s in sets) == partitions and set().union(*sets) == everything
              and (sizes is None or sorted(len(s) for s in sets) == sorted(sizes)))
        return sets if ok else None

    deadline = time.monotonic() + timeout
    while True:
        try:
            first = wait_until(settled, max(deadline - time.monotonic(), 0.1), 0.1, what)
        except TimeoutError:
            stacks = "\n".join(m.stacks() for m in members if not m.owned())
            raise AssertionError(f"{what}: not settled after {timeout}s: "
                                 + "; ".join(m.describe() for m in members) + "\n" + stacks) from None
        time.sleep(1.0)
        if settled() == first:
            return first


# Records produced per (topic, partition): the scenarios' own count of what must be read.
# (Deliberately not ListOffsets: a broker that answers a wrong log end offset would make
# "every record read" hold vacuously.) Every scenario uses a fresh topic, so offsets start at 0.
_SENT: Counter = Counter()


def produce(setup_client, topic: str, partitions: int, per_partition: int, tag: str) -> None:
    setup_client.produce(topic, [Message(f"{tag}-{p}-{i}".encode(), partition=p)
                                 for i in range(per_partition) for p in range(partitions)])
    for p in range(partitions):
        _SENT[(topic, p)] += per_partition


def sent_to(topic: str, partitions: int) -> dict[int, int]:
    """The offset after the last record produced to each partition."""
    return {p: _SENT[(topic, p)] for p in range(partitions)}


def wait_all_read(members, ends: dict[int, int], timeout: float = 60) -> Counter:
    """Until the members together have read every offset below `ends`; the count of reads
    of each (partition, offset)."""
    wanted = {(p, o) for p, end in ends.items() for o in range(end)}

    def done():
        seen = Counter(r for m in members for r in m.seen())
        return seen if wanted <= set(seen) else None

    try:
        return wait_until(done, timeout, 0.2, "every record read")
    except TimeoutError:
        seen = Counter(r for m in members for r in m.seen())
        missing = sorted(wanted - set(seen))
        raise AssertionError(f"{len(missing)} records never read, e.g. {missing[:10]}; "
                             + "; ".join(m.describe() for m in members)) from None


def committed(setup_client, group: str, topic: str, partitions: int, timeout: float = 30) -> dict[int, int]:
    """Committed offsets (0 where none), retried while the admin client reconnects."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            got = setup_client.committed(group, topic, list(range(partitions)))
            return {p: (o if o is not None else 0) for p, o in got.items()}
        except Exception:  # noqa: BLE001 - NodeNotReady and friends right after a restart
            if time.monotonic() > deadline:
                raise
            time.sleep(0.5)


def probe_generation(bootstrap: str, group: str, member_id: str, limit: int = 2000) -> int | None:
    """The group's generation, found with Heartbeat v0: only the current one is not
    ILLEGAL_GENERATION (22). None if the member is unknown."""
    host, port = bootstrap.rsplit(":", 1)
    with socket.create_connection((host, int(port)), timeout=10) as sock:
        for generation in range(0, limit):
            body = kafka_wire.string(group) + struct.pack(">i", generation) + kafka_wire.string(member_id)
            payload = kafka_wire.request_header(12, 0, generation + 1, "compat-probe", False) + body
            sock.sendall(kafka_wire.frame(payload))
            response = kafka_wire.read_frame(sock)
            _correlation, error = struct.unpack(">ih", response[:6])
            if error == 25:  # UNKNOWN_MEMBER_ID
                return None
            if error != 22:
                return generation
    return None


def describe(setup_client, bootstrap: str, group: str):
    """DescribeGroups through kafka-python, or confluent-kafka when kafka-python cannot
    decode the answer (it rejects authorized-operation bits it does not know, which
    Tansu sets)."""
    try:
        return setup_client.describe_group(group)
    except ValueError:
        from compat_tests.clients import make_client

        other = make_client("confluent-kafka", bootstrap)
        try:
            return other.describe_group(group)
        finally:
            other.close()


def group_generation(setup_client, bootstrap: str, group: str) -> int | None:
    info = describe(setup_client, bootstrap, group)
    if not info.members:
        return None
    return probe_generation(bootstrap, group, info.members[0].member_id)


def assert_duplicates_bounded(reads: Counter, moved: dict[int, tuple[int, int]]) -> int:
    """Records read twice must lie in [committed, last read by the dead member] of a
    partition that moved after the crash; returns how many there were."""
    dups = {k: n for k, n in reads.items() if n > 1}
    bad = []
    for (p, o), n in sorted(dups.items()):
        window = moved.get(p)
        if window is None or not window[0] <= o <= window[1] or n > 2:
            bad.append((p, o, n))
    assert not bad, (f"records read more often than the redelivery since the last commit allows "
                     f"(partition, offset, reads): {bad[:10]}; redelivery windows {moved}")
    bound = sum(max(hi - lo + 1, 0) for lo, hi in moved.values())
    assert len(dups) <= bound
    return len(dups)


def assert_no_committed_record_read_again(members: list, marks: dict, floor: dict[int, int]) -> int:
    """After the restart (each member's read log from `marks[member]` on), a record may be
    read a second time only while no commit covering it has been acknowledged: its offset
    is at or past both the group's committed offset seen before the restart (`floor`) and
    every commit acknowledged to the member before that read. That is Kafka's at-least-once
    promise: a member that loses its membership (Kafka's coordinator, loading the group
    after its restart, expires a member that does not heartbeat within the session
    timeout) is handed its partitions again from the last commit, so what it read since is
    read again; what was committed never is. Returns the number of records read twice."""
    reads = Counter()
    bad = []
    for member in members:
        log = member.read_log()
        for event in log[:marks.get(member, 0)]:
            if event[0] == "rec":
                reads[event[1:]] += 1
        acked = dict(floor)
        for event in log[marks.get(member, 0):]:
            if event[0] == "commit":
                for p, o in event[1].items():
                    acked[p] = max(acked.get(p, 0), o)
                continue
            _, p, o = event
            reads[(p, o)] += 1
            if reads[(p, o)] > 2 or (reads[(p, o)] > 1 and o < acked.get(p, 0)):
                bad.append((p, o, reads[(p, o)], acked.get(p, 0)))
    assert not bad, (f"records read again after a commit covering them was acknowledged, or more than "
                     f"twice (partition, offset, reads, acknowledged commit): {bad[:10]}")
    return sum(1 for n in reads.values() if n > 1)


# =========================================================================== scenarios
@pytest.mark.timeout(180)
def test_three_members_one_killed(client_name, client, broker, setup_client, topic_name, group_name):
    """Three members on six partitions; one is SIGKILLed mid-stream. Its partitions move to
    the others within the session timeout, every record is read, and the only records read
    twice are the dead member's reads since its last commit."""
    three_members_one_killed(client_name, client, broker, setup_client, topic_name, group_name, "classic")


@pytest.mark.timeout(180)
def test_three_members_one_killed_kip848(client_name, client, broker_kind, broker, setup_client, topic_name,
                                         group_name):
    """The same with group.protocol=consumer: the broker fences the dead member after
    group.consumer.session.timeout.ms and hands its partitions to the survivors, who revoke
    nothing of their own (no group-wide stop-the-world in KIP-848)."""
    kip848_only(client_name, broker_kind)
    three_members_one_killed(client_name, client, broker, setup_client, topic_name, group_name, "consumer")


def three_members_one_killed(client_name, client, broker, setup_client, topic_name, group_name,
                             protocol: str) -> None:
    make_topic(client, setup_client, topic_name, 6)
    produce(setup_client, topic_name, 6, 40, "before")
    members = [Member(client_name, broker.bootstrap, group_name, topic_name, name=f"m{i}", protocol=protocol)
               for i in range(3)]
    try:
        wait_settled(members, 6, "three members owning two partitions each", sizes=[2, 2, 2])
        produce(setup_client, topic_name, 6, 40, "during")
        victim, survivors = members[0], members[1:]
        wait_until(lambda: len(victim.seen()) >= 40, 30, 0.1, "the victim reading")
        victim_parts = victim.owned()
        victim.kill()
        killed_at = time.monotonic()
        time.sleep(0.5)  # a commit already on the wire lands before we look
        at_death = committed(setup_client, group_name, topic_name, 6)
        produce(setup_client, topic_name, 6, 40, "after")
        wait_settled(survivors, 6, "the survivors owning all six partitions")
        moved_after = time.monotonic() - killed_at
        session_s = SESSION_S if protocol == "classic" else KIP848_SESSION_S
        assert moved_after <= session_s + REJOIN_SLACK_S, (
            f"partitions moved {moved_after:.1f}s after the kill (session timeout {session_s}s)")
        if protocol == "consumer":
            for member in survivors:
                taken = [(k, sorted(p)) for t, k, p in member.history() if t >= killed_at and k != "assigned"]
                assert not taken, f"{member.name} gave up partitions when another member died: {taken}"
        reads = wait_all_read(members, sent_to(topic_name, 6))
        victim_last = {}
        for p, o in victim.seen():
            victim_last[p] = max(victim_last.get(p, -1), o)
        moved = {p: (at_death[p], victim_last.get(p, at_death[p] - 1)) for p in victim_parts}
        duplicates = assert_duplicates_bounded(reads, moved)
        print(f"{client_name} ({protocol}): partitions moved {moved_after:.1f}s after the kill; "
              f"{duplicates} records redelivered (windows {moved})")
    finally:
        stop_all(members)


@pytest.mark.timeout(150)
def test_clean_leave_rebalances_without_waiting(client_name, client, broker, setup_client, topic_name, group_name):
    """With a 30 s session timeout, a member that closes (LeaveGroup) has its partitions
    moved in a few seconds, and nothing is read twice."""
    make_topic(client, setup_client, topic_name, 6)
    produce(setup_client, topic_name, 6, 20, "before")
    members = [Member(client_name, broker.bootstrap, group_name, topic_name, session_ms=30000, name=f"m{i}")
               for i in range(3)]
    try:
        wait_settled(members, 6, "three members owning two partitions each", sizes=[2, 2, 2])
        wait_all_read(members, sent_to(topic_name, 6))
        leaver, stayers = members[0], members[1:]
        started = time.monotonic()
        leaver.stop()
        wait_settled(stayers, 6, "the two stayers owning all six partitions", timeout=25)
        took = time.monotonic() - started
        assert took < 15, f"rebalance after a clean leave took {took:.1f}s: it waited for a timeout"
        produce(setup_client, topic_name, 6, 20, "after")
        reads = wait_all_read(members, sent_to(topic_name, 6))
        assert_duplicates_bounded(reads, {})
    finally:
        stop_all(members)


@pytest.mark.compat(client="kafka-python+confluent-kafka")
@pytest.mark.timeout(150)
def test_mixed_clients_range_assignor(broker, setup_client, topic_name, group_name):
    """kafka-python and confluent-kafka members in one group, both on the range assignor:
    contiguous blocks, every partition once, every record read exactly once."""
    setup_client.create_topic(topic_name, 8)
    clients = ["kafka-python", "confluent-kafka", "kafka-python", "confluent-kafka"]
    members = [Member(c, broker.bootstrap, group_name, topic_name, assignor="range", name=f"m{i}")
               for i, c in enumerate(clients)]
    try:
        sets = wait_settled(members, 8, "four members with two partitions each", sizes=[2, 2, 2, 2])
        for owned in sets:
            assert max(owned) - min(owned) == 1, f"range assigns contiguous blocks, got {sorted(owned)}"
        produce(setup_client, topic_name, 8, 10, "mixed")
        reads = wait_all_read(members, sent_to(topic_name, 8))
        assert_duplicates_bounded(reads, {})
        info = describe(setup_client, broker.bootstrap, group_name)
        assert info.state == "Stable" and len(info.members) == 4
        # Partition p is read by the member that owns it, no one else.
        for member, owned in zip(members, sets):
            assert {p for p, _ in member.seen()} == set(owned)
    finally:
        stop_all(members)


@pytest.mark.timeout(150)
def test_cooperative_sticky_never_revokes_what_stays(client_name, client, broker, setup_client, topic_name,
                                                    group_name):
    """cooperative-sticky (KIP-429): when a member joins and later leaves, partitions that
    stay with their owner are never revoked, and owners keep consuming throughout."""
    if client_name not in ("confluent-kafka", "kafka-python", "java"):
        raise NotSupportedByClient(f"{client_name} has no cooperative-sticky assignor")
    make_topic(client, setup_client, topic_name, 6)
    first = [Member(client_name, broker.bootstrap, group_name, topic_name, assignor="cooperative-sticky",
                    name=f"m{i}") for i in range(2)]
    members = list(first)
    try:
        before = wait_settled(first, 6, "two members owning three partitions each", sizes=[3, 3])
        mark = time.monotonic()
        members.append(Member(client_name, broker.bootstrap, group_name, topic_name,
                              assignor="cooperative-sticky", name="m2"))
        after = wait_settled(members, 6, "three members owning two partitions each", sizes=[2, 2, 2])
        for member, had, has in zip(first, before, after):
            revoked = set().union(*[parts for t, kind, parts in member.history() if t >= mark and kind != "assigned"])
            assert has <= had, f"{member.name} gained partitions when a member joined: {sorted(had)} -> {sorted(has)}"
            assert revoked == had - has, (f"{member.name} kept {sorted(has)} but revoked {sorted(revoked)} "
                                          f"(only {sorted(had - has)} moved)")
            assert not [k for t, k, _ in member.history() if t >= mark and k == "lost"], "partitions lost"
        # The newcomer leaves: its partitions go back; nobody else gives anything up.
        mark = time.monotonic()
        members[2].stop()
        final = wait_settled(first, 6, "two members owning three partitions each again", sizes=[3, 3])
        for member, had, has in zip(first, after, final):
            revoked = set().union(*[parts for t, kind, parts in member.history() if t >= mark and kind != "assigned"])
            assert had <= has and not revoked, f"{member.name} revoked {sorted(revoked)} while only gaining"
        produce(setup_client, topic_name, 6, 10, "coop")
        reads = wait_all_read(members, sent_to(topic_name, 6))
        assert_duplicates_bounded(reads, {})
    finally:
        stop_all(members)


@pytest.mark.parametrize("how", ["close", "unsubscribe"])
@pytest.mark.timeout(150)
def test_cooperative_sticky_leave_is_one_round_for_the_stayer(client_name, client, broker, setup_client, topic_name,
                                                             group_name, how):
    """cooperative-sticky, two members on four partitions; one leaves (close, or
    unsubscribe() in a process that stays). The leaver revoked its partitions before its
    LeaveGroup, so the stayer rejoins once and is handed them in that one round: one
    assign callback with exactly the freed partitions, nothing revoked or lost, and one
    generation more at the broker (Kafka: removeMemberAndUpdateGroup, one DelayedJoin)."""
    if client_name not in ("confluent-kafka", "kafka-python"):
        raise NotSupportedByClient(f"{client_name} has no cooperative-sticky assignor")
    make_topic(client, setup_client, topic_name, 4)
    members = [Member(client_name, broker.bootstrap, group_name, topic_name, assignor="cooperative-sticky",
                      name=f"m{i}") for i in range(2)]
    stayer, leaver = members
    try:
        before = wait_settled(members, 4, "two members owning two partitions each", sizes=[2, 2])
        generation = group_generation(setup_client, broker.bootstrap, group_name)
        mark = time.monotonic()
        if how == "close":
            leaver.stop()
        else:
            leaver.unsubscribe()
        wait_settled([stayer], 4, "the stayer owning all four partitions", sizes=[4], timeout=SESSION_S + REJOIN_SLACK_S)
        time.sleep(3 * HEARTBEAT_MS / 1000 + 1)  # long enough for a needless second round to show
        changes = [(kind, sorted(parts)) for t, kind, parts in stayer.history() if t >= mark]
        assert changes == [("assigned", sorted(before[1]))], (
            f"after the other member's {how}, the stayer's rebalance callbacks were {changes}; "
            f"one round handing it {sorted(before[1])} was expected")
        if generation is not None:
            now = group_generation(setup_client, broker.bootstrap, group_name)
            assert now == generation + 1, f"generation {generation} -> {now}: the leave took {now - generation} rounds"
        produce(setup_client, topic_name, 4, 10, "after")
        reads = wait_all_read([stayer], sent_to(topic_name, 4))
        assert sum(reads.values()) >= 40
    finally:
        stop_all(members)


@pytest.mark.timeout(150)
def test_static_member_restart_without_rebalance(client_name, client, broker, setup_client, topic_name,
                                                 group_name):
    """KIP-345: a static member (group.instance.id) that restarts within its session
    timeout gets its partitions back; the generation does not change and the other
    members see no rebalance."""
    static_member_restart(client_name, client, broker, setup_client, topic_name, group_name, "classic")


@pytest.mark.timeout(150)
def test_static_member_restart_without_rebalance_kip848(client_name, client, broker_kind, broker, setup_client,
                                                        topic_name, group_name):
    """The same with group.protocol=consumer: a static member leaving says so (member epoch
    -2), the broker keeps its assignment for group.consumer.session.timeout.ms, and the
    restarted member with that group.instance.id is handed the same partitions; the other
    members' assignments never change (KIP-848, static membership)."""
    kip848_only(client_name, broker_kind)
    static_member_restart(client_name, client, broker, setup_client, topic_name, group_name, "consumer")


def static_member_restart(client_name, client, broker, setup_client, topic_name, group_name, protocol: str) -> None:
    make_topic(client, setup_client, topic_name, 6)
    session_ms = 30000  # classic members; consumer members have the broker's

    def start(i: int) -> Member:
        return Member(client_name, broker.bootstrap, group_name, topic_name, instance=f"{group_name}-i{i}",
                      session_ms=session_ms, name=f"static{i}", protocol=protocol)

    members = [start(i) for i in range(3)]
    try:
        before = wait_settled(members, 6, "three static members owning two partitions each", sizes=[2, 2, 2])
        # The broker's generation, when DescribeGroups names a member to probe with
        # (Tansu's lists none); the members' own view below is checked regardless. A
        # KIP-848 group has no generation to probe with Heartbeat v0.
        generation = (group_generation(setup_client, broker.bootstrap, group_name) if protocol == "classic"
                      else None)
        mark = time.monotonic()
        members[1].stop()  # static members do not send LeaveGroup
        members[1] = start(1)
        wait_until(lambda: members[1].owned() == before[1], 30, 0.1, "the restarted member's old partitions")
        time.sleep(2 * HEARTBEAT_MS / 1000 + 1)  # long enough for the others to hear of any rebalance
        for member in (members[0], members[2]):
            changes = [(k, sorted(p)) for t, k, p in member.history() if t >= mark]
            assert not changes, f"{member.name} went through a rebalance: {changes}"
        assert [m.owned() for m in members] == before
        if generation is not None:
            assert group_generation(setup_client, broker.bootstrap, group_name) == generation
        produce(setup_client, topic_name, 6, 10, "static")
        reads = wait_all_read(members, sent_to(topic_name, 6))
        assert sum(reads.values()) >= 60
    finally:
        stop_all(members)


@pytest.mark.timeout(180)
def test_broker_restart_resumes_from_committed_offsets(client_name, client, fresh_broker, setup_client,
                                                       topic_name, group_name):
    """The broker restarts under a running group: afterwards every record is read, no record
    is read again once a commit covering it was acknowledged (the member may lose its
    membership across the restart and re-read what it had not committed yet, at most once),
    and a new member of the group starts exactly at the committed offsets."""
    broker_restart_resumes(client_name, client, fresh_broker, setup_client, topic_name, group_name, "classic")


@pytest.mark.timeout(180)
def test_broker_restart_resumes_from_committed_offsets_kip848(client_name, client, broker_kind, fresh_broker,
                                                              setup_client, topic_name, group_name):
    """The same with group.protocol=consumer members: the consumer group and its offsets
    come back from __consumer_offsets, so everything is consumed exactly once after commits."""
    kip848_only(client_name, broker_kind)
    broker_restart_resumes(client_name, client, fresh_broker, setup_client, topic_name, group_name, "consumer")


def broker_restart_resumes(client_name, client, fresh_broker, setup_client, topic_name, group_name,
                           protocol: str) -> None:
    make_topic(client, setup_client, topic_name, 3)
    produce(setup_client, topic_name, 3, 30, "before")
    member = Member(client_name, fresh_broker.bootstrap, group_name, topic_name, name="m", protocol=protocol)
    members = [member]
    try:
        wait_settled([member], 3, "one member owning all three partitions")
        ends = sent_to(topic_name, 3)
        wait_all_read([member], ends)
        # Everything read is committed, so nothing can change between this look and the restart.
        seen: list = [None]

        def all_committed():
            seen[0] = committed(setup_client, group_name, topic_name, 3)
            return seen[0] if seen[0] == ends else None

        try:
            at_restart = wait_until(all_committed, 30, 0.3, "the member committing what it read")
        except TimeoutError:
            raise AssertionError(f"committed offsets {seen[0]} never reached what the member read {ends}; "
                                 f"its commits: {member.commits}, errors: {member.errors[-3:]}") from None
        marks = {member: len(member.read_log())}
        fresh_broker.restart()
        assert committed(setup_client, group_name, topic_name, 3) == at_restart, "committed offsets changed"
        produce(setup_client, topic_name, 3, 30, "after")
        if client_name == "kcat":
            # kcat exits when every broker is down ("All broker connections are down:
            # terminating"); its supervisor starts it again, in the same group.
            wait_until(lambda: member.proc.poll() is not None, 30, 0.2, "kcat giving up")
            members.append(Member(client_name, fresh_broker.bootstrap, group_name, topic_name, name="m-again"))
        wait_all_read(members, sent_to(topic_name, 3), timeout=90)
        assert_no_committed_record_read_again(members, marks, at_restart)
    finally:
        stop_all(members)
    final = committed(setup_client, group_name, topic_name, 3)
    fresh_broker.restart()
    assert committed(setup_client, group_name, topic_name, 3) == final
    produce(setup_client, topic_name, 3, 2, "late")
    ends = sent_to(topic_name, 3)
    successor = Member(client_name, fresh_broker.bootstrap, group_name, topic_name, name="successor",
                       protocol=protocol)
    try:
        wait_until(lambda: {(p, o) for p, o in successor.seen()} >= {(p, o) for p in range(3)
                                                                      for o in range(final[p], ends[p])},
                   60, 0.2, "the successor reading from the committed offsets")
        time.sleep(1)
        assert sorted(successor.seen()) == sorted((p, o) for p in range(3) for o in range(final[p], ends[p])), (
            f"a new member must start at the committed offsets {final}")
    finally:
        successor.stop()


@pytest.mark.timeout(150)
def test_twenty_members_churn_converges(client_name, client, broker, setup_client, topic_name, group_name):
    """Twenty members join and leave at random for 20 s; afterwards the group converges to
    the members still running, with every partition owned once, and no storm of
    UNKNOWN_MEMBER_ID errors on the way."""
    twenty_members_churn(client_name, client, broker, setup_client, topic_name, group_name, "classic")


@pytest.mark.timeout(240)
def test_twenty_members_churn_converges_kip848(client_name, client, broker_kind, broker, setup_client, topic_name,
                                               group_name):
    """The same with group.protocol=consumer members (one process each): the group converges
    to the four left, three partitions each (the uniform assignor), is Stable with four
    members in ConsumerGroupDescribe, and no member is fenced on the way."""
    kip848_only(client_name, broker_kind)
    twenty_members_churn(client_name, client, broker, setup_client, topic_name, group_name, "consumer")


def describe_consumer_group(bootstrap: str, group: str):
    """ConsumerGroupDescribe (KIP-848) through confluent-kafka's admin client: DescribeGroups
    does not describe consumer-protocol groups."""
    from confluent_kafka.admin import AdminClient

    admin = AdminClient({"bootstrap.servers": bootstrap})
    return admin.describe_consumer_groups([group])[group].result(30)


def twenty_members_churn(client_name, client, broker, setup_client, topic_name, group_name, protocol: str) -> None:
    make_topic(client, setup_client, topic_name, 12)
    processes: list[ProcessGroupMember] = []

    def join():
        if protocol == "classic":
            return client.group_member([topic_name], group_name)
        member = ProcessGroupMember(Member(client_name, broker.bootstrap, group_name, topic_name,
                                           name=f"c{len(processes)}", protocol=protocol))
        processes.append(member)
        return member
    unknown = Counter()

    class Count(logging.Handler):
        """Counts the coordinator's "unknown member id" / "member_id was not recognized"
        reports of the in-process Python clients (kafka-python logs them at INFO and
        WARNING, aiokafka at DEBUG and WARNING)."""

        def emit(self, record: logging.LogRecord) -> None:
            text = record.getMessage().lower()
            if "unknown member" in text or "not recognized" in text or "unknownmemberid" in text:
                unknown["n"] += 1

    handler = Count()
    watched = [logging.getLogger(n) for n in ("kafka.coordinator", "aiokafka.consumer.group_coordinator")]
    levels = [lg.level for lg in watched]
    for lg in watched:
        lg.addHandler(handler)
        lg.setLevel(logging.DEBUG)
    rng = random.Random(group_name)
    slots: list = [None] * 20
    changes = 0
    try:
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            i = rng.randrange(20)
            if slots[i] is None:
                slots[i] = join()
            else:
                slots[i].leave()
                slots[i] = None
            changes += 1
            time.sleep(rng.uniform(0.2, 0.8))
        # End with a handful of members that must converge.
        for i in range(20):
            if slots[i] is not None and i >= 4:
                slots[i].leave()
                slots[i] = None
            elif slots[i] is None and i < 4:
                slots[i] = join()
        alive = [m for m in slots if m is not None]
        everything = {(topic_name, p) for p in range(12)}

        def converged():
            sets = [m.assignment() for m in alive]
            return (sum(len(s) for s in sets) == 12 and set().union(*sets) == everything
                    and all(len(s) == 3 for s in sets))

        try:
            wait_until(converged, 60, 0.2, "four members owning three partitions each")
        except TimeoutError:
            raise AssertionError(f"no convergence after {changes} membership changes: "
                                 + str([(sorted(p for _t, p in m.assignment()), m.error()) for m in alive])) from None
        if protocol == "classic":
            info = describe(setup_client, broker.bootstrap, group_name)
            assert info.state == "Stable" and len(info.members) == 4, info
            assert unknown["n"] <= changes, (f"{unknown['n']} UNKNOWN_MEMBER_ID errors for {changes} membership "
                                             f"changes: members are being thrown out")
        else:
            from confluent_kafka import ConsumerGroupState

            # A member stopped before its first heartbeat was answered may be known to the
            # broker but not to itself, so it sends no leave: the broker fences it after
            # group.consumer.session.timeout.ms, as Kafka does.
            seen: list = [None]

            def stable_with_four():
                info = seen[0] = describe_consumer_group(broker.bootstrap, group_name)
                return info.state == ConsumerGroupState.STABLE and len(info.members) == 4

            try:
                wait_until(stable_with_four, KIP848_SESSION_S + REJOIN_SLACK_S, 0.5, "a Stable group of four")
            except TimeoutError:
                info = seen[0]
                raise AssertionError(f"ConsumerGroupDescribe: {info.state}, members "
                                     + str([(m.client_id, sorted(tp.partition for tp in m.assignment.topic_partitions))
                                            for m in info.members])) from None
            fenced = sum(m.unknown_member_reports() for m in processes)
            assert fenced == 0, (f"{fenced} UNKNOWN_MEMBER_ID / FENCED_MEMBER_EPOCH reports in {changes} "
                                 f"membership changes: " + "; ".join(filter(None, (m.error() for m in processes))))
            unknown["n"] = fenced
        print(f"{client_name} ({protocol}): converged after {changes} membership changes; "
              f"{unknown['n']} UNKNOWN_MEMBER_ID reports")
    finally:
        for lg, level in zip(watched, levels):
            lg.removeHandler(handler)
            lg.setLevel(level)
        for m in slots:
            if m is not None:
                try:
                    m.leave()
                except Exception:  # noqa: BLE001
                    pass


if __name__ == "__main__":
    sys.exit(worker_main())
