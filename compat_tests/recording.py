"""Recording the verbs a scenario calls and what they answered.

`start(test)` opens a `TestLog` for the test about to run; `make_client` hands each new adapter
to `recording()`, which wraps it (and the group members and transactional producers it
returns) in proxies that log every verb into the log that was open when the adapter was made.
A client made while no log is open (a child process, a unit test) is returned unwrapped.

What is logged is raw (real names, real timestamps); `observe.normalise` makes it comparable
later. This module sits beside `clients` and `observe`, not inside `observe`: the client
adapters use it, and `observe` compares what the adapters answered.
A call is logged with its object ("client#1:kafka-python", "member#2", "txn#1"), verb,
arguments and either its answer or the exception it raised.

Two things of the log's shape are decided here rather than in `normalise`:
- Streams per thread. A scenario's background thread (a producer under a leader kill, a
  consumer in `_background`) interleaves its calls with the main thread's by timing, so each
  thread logs into a stream of its own ("main", then the thread's name without its counter).
- Polls. A scenario that retries a verb until a condition holds (`wait_until`, a cluster's
  `wait_for`, ...) observed the answer it waited for, not how many times it had to ask: how
  many answers came before is timing. Calls made inside one of `POLLERS` keep only their last
  answer per (object, verb, arguments), in order of their first call, marked `polled`.
"""

from __future__ import annotations

import os
import re
import sys
import threading
from dataclasses import dataclass, field
from typing import Any

# The verbs of base.Client (close excepted: it observes nothing).
CLIENT_VERBS = frozenset({
    "metadata", "create_topic", "delete_topic", "create_partitions", "describe_configs",
    "alter_configs", "describe_topic", "describe_topic_by_id", "produce", "consume", "commit",
    "committed", "list_offsets", "transactional_producer", "group_member", "list_groups",
    "describe_group", "delete_group"})
# base.GroupMember's verbs (`error` is a library's free-text message: not an observation),
# and `kill` of a member that runs in a process of its own (process_member.spawn_member).
MEMBER_VERBS = frozenset({"assignment", "records", "leave", "kill"})
# base.TxnProducer's verbs.
TXN_VERBS = frozenset({"begin", "produce", "send_offsets", "commit", "abort", "close"})

# Functions that call a verb again and again until a condition holds, by (file name,
# function name): the scenarios' retry loops. The outermost one on the stack groups a poll.
POLLERS = frozenset({
    ("base.py", "wait_until"),  # clients/base.py: the suite's generic wait
    ("helpers.py", "wait_metadata"),  # Metadata until a topic shows what was created
    ("brokers.py", "wait_for"),  # the clusters' waits for leaders, ISRs, a controller
    ("test_groups_extended.py", "wait_settled"),  # until every partition is owned once
    ("test_groups_extended.py", "committed"),  # committed offsets, retried after a restart
})

_THREAD_COUNTER = re.compile(r"-\d+")

_lock = threading.Lock()
_active: TestLog | None = None


@dataclass
class Call:
    """One logged call: `outcome` is ("ok", answer) or ("raised", exception)."""

    obj: str
    verb: str
    args: tuple
    kwargs: dict
    outcome: tuple[str, Any]
    polled: bool = False


@dataclass
class _Poll:
    frame: Any  # the poller's frame: the same frame is the same poll
    calls: dict[tuple, Call] = field(default_factory=dict)


@dataclass
class _Stream:
    calls: list[Call] = field(default_factory=list)
    poll: _Poll | None = None

    def flush(self) -> None:
        if self.poll is None:
            return
        calls = list(self.poll.calls.values())
        self.calls.extend(calls)
        # Which member got which partitions depends on member ids (random): what the members
        # held together when the poll ended is the comparable part (see normalise).
        held = [c.outcome[1] for c in calls
                if c.obj.startswith("member#") and c.verb == "assignment" and c.outcome[0] == "ok"]
        if held:
            self.calls.append(Call("members", "assignments (unordered)", (), {}, ("ok", held),
                                   polled=True))
        self.poll = None


class TestLog:
    """What one test observed: streams of calls, per thread."""

    def __init__(self, nodeid: str) -> None:
        self.nodeid = nodeid
        self.closed = False
        self._lock = threading.Lock()
        self._streams: dict[str, _Stream] = {}
        self._thread_labels: dict[int, str] = {}
        self._counters: dict[str, int] = {}
        self.members: list[RecordingMember] = []

    def label(self, kind: str, suffix: str = "") -> str:
        """"client#2:kcat": objects are numbered per kind in order of creation."""
        with self._lock:
            self._counters[kind] = self._counters.get(kind, 0) + 1
            return f"{kind}#{self._counters[kind]}" + (f":{suffix}" if suffix else "")

    def _stream_name(self) -> str:
        thread = threading.current_thread()
        if thread is threading.main_thread():
            return "main"
        label = self._thread_labels.get(thread.ident or 0)
        if label is None:
            base = _THREAD_COUNTER.sub("", thread.name)
            taken = sum(1 for v in self._thread_labels.values() if v.split("#")[0] == base)
            label = f"{base}#{taken + 1}" if taken else base
            self._thread_labels[thread.ident or 0] = label
        return label

    def add(self, call: Call, poller: Any) -> None:
        with self._lock:
            if self.closed:
                return  # a daemon thread of a test that ended: not this log's business
            stream = self._streams.setdefault(self._stream_name(), _Stream())
            if poller is None:
                stream.flush()
                stream.calls.append(call)
                return
            if stream.poll is None or stream.poll.frame is not poller:
                stream.flush()
                stream.poll = _Poll(poller)
            call.polled = True
            key = (call.obj, call.verb, repr(call.args), repr(sorted(call.kwargs.items())))
            stream.poll.calls[key] = call  # the last answer, in the place of the first call

    def close(self) -> dict[str, list[Call]]:
        """The streams, "main" first; nothing is logged after."""
        with self._lock:
            self.closed = True
            for stream in self._streams.values():
                stream.flush()
            if self.members:
                # Every member's records as last seen, together: which member read which
                # partition is the member ids' doing, what the group read is the broker's.
                pooled = [r for m in self.members for r in m.last_records]
                self._streams.setdefault("main", _Stream()).calls.append(
                    Call("members", "records (pooled)", (), {}, ("ok", pooled)))
            names = sorted(self._streams, key=lambda n: (n != "main", n))
            return {n: self._streams[n].calls for n in names}


def start(nodeid: str) -> TestLog:
    global _active
    log = TestLog(nodeid)
    with _lock:
        _active = log
    return log


def stop() -> None:
    global _active
    with _lock:
        _active = None


def active() -> TestLog | None:
    return _active


def recording(adapter: Any, client_name: str) -> Any:
    """The adapter, logging its verbs into the open test log (unchanged when none is open)."""
    log = _active
    if log is None:
        return adapter
    return RecordingClient(adapter, log, log.label("client", client_name))


def recording_member(member: Any) -> Any:
    """A group member made without a client adapter (a process of its own), logged like the
    members adapters make, so a group's assignments are seen whole."""
    log = _active
    if log is None:
        return member
    wrapped = RecordingMember(member, log, log.label("member"))
    log.members.append(wrapped)
    return wrapped


def _poller_frame() -> Any:
    """The outermost polling loop on this thread's stack, or None."""
    frame = sys._getframe(2)
    found = None
    while frame is not None:
        code = frame.f_code
        if (os.path.basename(code.co_filename), code.co_name) in POLLERS:
            found = frame
        frame = frame.f_back
    return found


class _Recorder:
    """Delegates everything to the wrapped object; the verbs in `_verbs` are logged."""

    _verbs: frozenset = frozenset()

    def __init__(self, inner: Any, log: TestLog, label: str) -> None:
        self._inner = inner
        self._log = log
        self._label = label

    def __getattr__(self, name: str) -> Any:
        attr = getattr(self._inner, name)
        if name not in self._verbs or not callable(attr):
            return attr

        def logged(*args: Any, **kwargs: Any) -> Any:
            poller = _poller_frame()
            try:
                result = attr(*args, **kwargs)
            except BaseException as exc:
                self._log.add(Call(self._label, name, args, kwargs, ("raised", exc)), poller)
                raise
            result = self._wrap_result(name, result)
            self._log.add(Call(self._label, name, args, kwargs, ("ok", result)), poller)
            return result

        logged.__name__ = name
        return logged

    def _wrap_result(self, verb: str, result: Any) -> Any:
        return result

    def __repr__(self) -> str:
        return f"<recording {self._label} {self._inner!r}>"


class RecordingClient(_Recorder):
    _verbs = CLIENT_VERBS

    def _wrap_result(self, verb: str, result: Any) -> Any:
        if verb == "group_member":
            member = RecordingMember(result, self._log, self._log.label("member"))
            self._log.members.append(member)
            return member
        if verb == "transactional_producer":
            return RecordingTxnProducer(result, self._log, self._log.label("txn"))
        return result


class RecordingMember(_Recorder):
    """A group member; remembers the last records it was seen to hold (for the pooled view
    `normalise` makes of all members' records)."""

    _verbs = MEMBER_VERBS

    def __init__(self, inner: Any, log: TestLog, label: str) -> None:
        super().__init__(inner, log, label)
        self.last_records: list = []

    def _wrap_result(self, verb: str, result: Any) -> Any:
        if verb == "records":
            self.last_records = list(result)
        return result


class RecordingTxnProducer(_Recorder):
    _verbs = TXN_VERBS
