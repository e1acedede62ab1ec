"""kcat adapter: the Debian `kcat` binary (librdkafka 2.0.2) driven as a subprocess.

kcat has no admin verbs and no way to set a record timestamp. It reads messages as
delimited text, so the adapter frames them with a random delimiter that occurs in no key or
value, and groups consecutive messages sharing the per-invocation settings (partition,
headers, null handling) into one invocation each. Known limits, reported as
NotSupportedByClient: an empty value with a null key, binary or NUL-containing header
values, per-message timestamps, committed-offset queries, group listing.

Consumed output uses `-J`: yajl writes key/payload bytes verbatim (escaping only control
characters), so the JSON is decoded with surrogateescape to get the exact bytes back.
"""

from __future__ import annotations

import json
import os
import re
import secrets
import shutil
import signal
import string
import subprocess
import threading
from typing import Iterable

from compat_tests.clients.base import (
    FETCH_WAIT_MS, HEARTBEAT_MS, LARGE_LIMIT, SESSION_TIMEOUT_MS, Client, ClientError,
    ClusterMetadata, Delivery, GroupMember, Message, NotSupportedByClient, OffsetOutOfRange,
    Record, TopicMetadata)

KCAT = os.environ.get("KCAT_BIN") or shutil.which("kcat") or shutil.which("kafkacat") or "kcat"
METADATA_TIMEOUT_S = 5
TIMESTAMP_TYPES = {"create": "CreateTime", "logappend": "LogAppendTime"}
ASSIGN_RE = re.compile(r"rebalanced \(memberid [^)]*\): (assigned|revoked): (.*)")
PART_RE = re.compile(r"(\S+) \[(\d+)\]")


def available() -> bool:
    return shutil.which(KCAT) is not None


def _text(raw: bytes) -> str:
    return raw.decode("utf-8", "surrogateescape")


def _bytes(value: str | None) -> bytes | None:
    return None if value is None else value.encode("utf-8", "surrogateescape")


def _record(obj: dict) -> Record:
    headers = obj.get("headers") or []
    pairs = tuple((headers[i], _bytes(headers[i + 1])) for i in range(0, len(headers), 2))
    return Record(obj["topic"], obj["partition"], obj["offset"], _bytes(obj.get("key")),
                  _bytes(obj.get("payload")), pairs, obj.get("ts", -1),
                  TIMESTAMP_TYPES.get(obj.get("tstype"), str(obj.get("tstype"))))


def _error_code(text: str) -> int | None:
    """librdkafka error strings for the codes scenarios inspect."""
    table = {"Unknown topic or partition": 3, "Leader not available": 5,
             "Offset out of range": 1, "Message size too large": 10}
    for needle, code in table.items():
        if needle.lower() in text.lower():
            return code
    return None


class KcatClient(Client):
    name = "kcat"

    # bootstrap -> why kcat cannot talk to it. kcat retries a failing handshake until its
    # timeouts run out (a group member: forever), so one real `kcat -L` per broker decides,
    # and every later verb against that broker fails at once with the same reason.
    _unreachable: dict[str, str] = {}
    _reachable: set[str] = set()

    def _preflight(self) -> None:
        if self.bootstrap in self._reachable:
            return
        if self.bootstrap not in self._unreachable:
            argv = [KCAT, "-b", self.bootstrap, "-m", str(METADATA_TIMEOUT_S), "-L", "-J"]
            proc = subprocess.run(argv, capture_output=True, timeout=METADATA_TIMEOUT_S + 30)
            if proc.returncode == 0:
                self._reachable.add(self.bootstrap)
                return
            self._unreachable[self.bootstrap] = _text(proc.stderr).strip()[-1500:]
        raise ClientError("kcat cannot talk to this broker (checked once per broker with "
                          f"`kcat -L`): {self._unreachable[self.bootstrap]}")

    def _base(self) -> list[str]:
        self._preflight()
        return [KCAT, "-b", self.bootstrap, "-m", str(METADATA_TIMEOUT_S),
                "-X", "client.id=compat-kcat"]

    def _run(self, argv: list[str], stdin: bytes | None = None, timeout: float = 60
             ) -> subprocess.CompletedProcess:
        try:
            proc = subprocess.run(argv, input=stdin, capture_output=True, timeout=timeout)
        except subprocess.TimeoutExpired as exc:
            raise ClientError(f"kcat timed out after {timeout}s: {_text(exc.stderr or b'')}") from exc
        if proc.returncode != 0:
            err = _text(proc.stderr).strip()
            raise ClientError(f"kcat exited {proc.returncode}: {err[-2000:]}", _error_code(err))
        return proc

    # -- cluster
    def metadata(self, topics=None, allow_auto_create=False) -> ClusterMetadata:
        argv = self._base() + ["-L", "-J",
                               "-X", f"allow.auto.create.topics={str(allow_auto_create).lower()}"]
        results = []
        for topic in topics or [None]:
            extra = ["-t", topic] if topic else []
            results.append(json.loads(_text(self._run(argv + extra).stdout)))
        brokers = {}
        for b in results[0]["brokers"]:
            host, _, port = b["name"].rpartition(":")
            brokers[b["id"]] = (host, int(port))
        out = {}
        for md in results:
            for t in md["topics"]:
                code = _error_code(t["error"]) if "error" in t else 0
                if code is None:
                    code = -1  # an error kcat named but this table does not know
                out[t["topic"]] = TopicMetadata(code, {p["partition"]: p["leader"]
                                                       for p in t["partitions"]})
        return ClusterMetadata(brokers, out)

    # -- data
    def produce(self, topic, messages: Iterable[Message], acks="all", compression="none",
                idempotent=None) -> list[Delivery] | None:
        messages = list(messages)
        if any(m.timestamp is not None for m in messages):
            raise NotSupportedByClient("kcat cannot set record timestamps")
        delim, key_delim = self._delimiters(messages)
        acks_cfg = "all" if acks in ("all", -1) else str(int(acks))
        common = self._base() + ["-P", "-t", topic, "-D", delim, "-K", key_delim,
                                 "-X", f"acks={acks_cfg}",
                                 "-X", f"message.max.bytes={LARGE_LIMIT}",
                                 "-X", f"compression.codec={compression}",
                                 "-X", "linger.ms=5"]
        if idempotent is not None:
            common += ["-X", f"enable.idempotence={str(bool(idempotent)).lower()}"]
        for (partition, headers, nulls), chunk in self._invocations(messages):
            argv = list(common)
            if partition is not None:
                argv += ["-p", str(partition)]
            for name, value in headers:
                argv += ["-H", name if value is None else f"{name}={value.decode()}"]
            if nulls:
                argv.append("-Z")
            payload = bytearray()
            for m in chunk:
                if m.key is not None or nulls:
                    payload += (m.key or b"") + key_delim.encode()
                payload += (m.value or b"") + delim.encode()
            self._run(argv, bytes(payload), timeout=120)
        return None  # kcat prints no delivery reports

    @staticmethod
    def _delimiters(messages: list[Message]) -> tuple[str, str]:
        alphabet = string.ascii_letters + string.digits
        while True:
            delim = "".join(secrets.choice(alphabet) for _ in range(24))
            key_delim = "".join(secrets.choice(alphabet) for _ in range(24))
            blobs = [b for m in messages for b in (m.key, m.value) if b]
            if not any(delim.encode() in b or key_delim.encode() in b for b in blobs):
                return delim, key_delim

    @staticmethod
    def _invocations(messages: list[Message]):
        """Split into runs that one kcat invocation can send: same partition, headers, -Z."""
        runs: list[tuple[tuple, list[Message]]] = []
        for m in messages:
            for name, value in m.headers:
                if "=" in name or (value is not None and (b"\x00" in value or not _utf8(value))):
                    raise NotSupportedByClient(
                        "kcat -H takes text headers only (no NUL, valid UTF-8, no '=' in names)")
            # -Z turns an empty key or value into NULL; without it a line with no key
            # delimiter has a NULL key and an empty line is skipped.
            if m.value is None:
                if m.key == b"":
                    raise NotSupportedByClient("kcat cannot send an empty key with a null value")
                nulls = True
            elif m.value == b"" or m.key == b"":
                if m.key is None:
                    raise NotSupportedByClient("kcat cannot send an empty value with a null key")
                nulls = False
            else:  # either mode works: stay in the current run when possible
                same = runs and runs[-1][0][:2] == (m.partition, m.headers)
                nulls = runs[-1][0][2] if same else False
            settings = (m.partition, m.headers, nulls)
            if runs and runs[-1][0] == settings:
                runs[-1][1].append(m)
            else:
                runs.append((settings, [m]))
        return runs

    def _consumer_conf(self, reset: str, fetch_wait_ms: int) -> list[str]:
        reset = {"none": "error"}.get(reset, reset)
        return ["-X", f"topic.auto.offset.reset={reset}",
                "-X", f"fetch.wait.max.ms={fetch_wait_ms}",
                "-X", f"session.timeout.ms={SESSION_TIMEOUT_MS}",
                "-X", f"heartbeat.interval.ms={HEARTBEAT_MS}",
                "-X", f"fetch.message.max.bytes={LARGE_LIMIT}",
                "-X", f"fetch.max.bytes={LARGE_LIMIT * 2}",
                "-X", f"receive.message.max.bytes={LARGE_LIMIT * 4}",
                "-X", "check.crcs=true"]

    def consume(self, topic, n, *, group=None, start=None, auto_offset_reset="earliest",
                timeout=15.0, fetch_wait_ms=FETCH_WAIT_MS, commit=True,
                isolation_level="read_uncommitted") -> list[Record]:
        argv = self._base() + ["-J", "-u", "-c", str(n)]
        argv += self._consumer_conf(auto_offset_reset, fetch_wait_ms)
        argv += ["-X", f"isolation.level={isolation_level}"]
        if group is not None:
            argv += ["-G", group, "-X", f"enable.auto.commit={str(commit).lower()}", topic]
        else:
            argv += ["-C", "-t", topic]
            if start is not None:
                offsets = set(start.values())
                if len(start) == 1:
                    argv += ["-p", str(next(iter(start)))]
                elif len(offsets) != 1:
                    raise NotSupportedByClient("kcat -o takes one start offset for all partitions")
                argv += ["-o", str(offsets.pop())]
            else:
                argv += ["-o", "end" if auto_offset_reset == "latest" else "beginning"]
        proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                stdin=subprocess.DEVNULL)
        try:
            out, err = proc.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            proc.send_signal(signal.SIGTERM)  # kcat closes cleanly (and commits) on SIGTERM
            try:
                out, err = proc.communicate(timeout=15)
            except subprocess.TimeoutExpired:
                proc.kill()
                out, err = proc.communicate()
        text = _text(err)
        if proc.returncode not in (0, -signal.SIGTERM) and "ERROR" in text:
            if "offset out of range" in text.lower() or "auto offset reset" in text.lower():
                raise OffsetOutOfRange(text.strip()[-1000:])
            raise ClientError(f"kcat exited {proc.returncode}: {text.strip()[-2000:]}",
                              _error_code(text))
        # split on "\n" only: yajl leaves U+2028, U+0085 etc. unescaped inside strings
        return [_record(json.loads(line)) for line in _text(out).split("\n") if line.strip()]

    def list_offsets(self, topic, partition, spec, isolation_level="read_uncommitted"
                     ) -> int | None:
        if isolation_level != "read_uncommitted":
            raise self._unsupported("ListOffsets with an isolation level (-Q takes none)")
        # kcat -Q is offsets_for_times; Kafka's -2 / -1 timestamps mean earliest / latest.
        ts = {"earliest": -2, "latest": -1}.get(spec, spec)
        proc = self._run(self._base() + ["-Q", "-J", "-t", f"{topic}:{partition}:{ts}"])
        result = json.loads(_text(proc.stdout))
        entry = result[topic][str(partition)]
        if "error" in entry:
            raise ClientError(f"kcat -Q: {entry['error']}", _error_code(entry["error"]))
        return entry["offset"] if entry["offset"] >= 0 else None

    # -- groups
    def group_member(self, topics, group) -> GroupMember:
        argv = self._base() + ["-J", "-u", "-G", group,
                               "-X", "enable.auto.commit=false"]
        argv += self._consumer_conf("earliest", FETCH_WAIT_MS) + list(topics)
        return _KcatMember(argv)


def _utf8(value: bytes) -> bool:
    try:
        value.decode()
        return True
    except UnicodeDecodeError:
        return False


class _KcatMember(GroupMember):
    """`kcat -G` as a process: records from stdout, assignment from its rebalance log lines."""

    def __init__(self, argv: list[str]) -> None:
        self._proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                      stdin=subprocess.DEVNULL, start_new_session=True)
        self._lock = threading.Lock()
        self._records: list[Record] = []
        self._assignment: frozenset = frozenset()
        self._stderr: list[str] = []
        threading.Thread(target=self._read_stdout, daemon=True).start()
        threading.Thread(target=self._read_stderr, daemon=True).start()

    def _read_stdout(self) -> None:
        for line in self._proc.stdout:
            if line.strip():
                record = _record(json.loads(_text(line)))
                with self._lock:
                    self._records.append(record)

    def _read_stderr(self) -> None:
        for raw in self._proc.stderr:
            line = _text(raw).rstrip("\n")
            with self._lock:
                self._stderr.append(line)
                match = ASSIGN_RE.search(line)
                if match:
                    parts = frozenset((t, int(p)) for t, p in PART_RE.findall(match.group(2)))
                    self._assignment = parts if match.group(1) == "assigned" else frozenset()

    def assignment(self):
        with self._lock:
            return self._assignment

    def records(self):
        with self._lock:
            return list(self._records)

    def error(self):
        with self._lock:
            errors = [line for line in self._stderr if "ERROR" in line or "FAIL" in line]
        exited = self._proc.poll()
        if exited is not None:
            errors.append(f"kcat exited {exited}")
        return "\n".join(errors[-5:]) or None

    def leave(self) -> None:
        if self._proc.poll() is None:
            self._proc.send_signal(signal.SIGTERM)
        try:
            self._proc.wait(20)
        except subprocess.TimeoutExpired:
            self._proc.kill()
            self._proc.wait()

    def kill(self) -> None:
        """Die without leaving the group (SIGKILL): the broker must notice via session timeout."""
        self._proc.kill()
        self._proc.wait()
