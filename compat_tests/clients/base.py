"""The verbs every client adapter offers, and the plain values they exchange.

A scenario is written once against `Client`; each adapter maps the verbs onto its own
library the way an application would use it. A library that has no way to do something
raises `NotSupportedByClient`, which the suite reports as a skip with that reason, never as
a broker failure.

Conventions all adapters follow:
- bytes in, bytes out: keys, values and header values are `bytes` or None (null).
- `consume` stops after `n` records or `timeout` seconds, whichever comes first, and returns
  what it got; scenarios compare the list exactly, so a short read shows as a diff.
- error codes are Kafka's integers (`ERROR_NAMES` maps the ones scenarios look at).
"""

from __future__ import annotations

import base64
import threading
import time
from dataclasses import dataclass, field
from typing import Callable, Iterable, TypeVar

Headers = tuple[tuple[str, bytes | None], ...]
T = TypeVar("T")

ERROR_NAMES = {
    0: "NONE",
    1: "OFFSET_OUT_OF_RANGE",
    3: "UNKNOWN_TOPIC_OR_PARTITION",
    5: "LEADER_NOT_AVAILABLE",
    10: "MESSAGE_TOO_LARGE",
    15: "COORDINATOR_NOT_AVAILABLE",
    16: "NOT_COORDINATOR",
    17: "INVALID_TOPIC_EXCEPTION",
    35: "UNSUPPORTED_VERSION",
    36: "TOPIC_ALREADY_EXISTS",
    37: "INVALID_PARTITIONS",
    40: "INVALID_CONFIG",
    42: "INVALID_REQUEST",
    47: "INVALID_PRODUCER_EPOCH",
    48: "INVALID_TXN_STATE",
    49: "INVALID_PRODUCER_ID_MAPPING",
    50: "INVALID_TRANSACTION_TIMEOUT",
    51: "CONCURRENT_TRANSACTIONS",
    52: "TRANSACTION_COORDINATOR_FENCED",
    53: "TRANSACTIONAL_ID_AUTHORIZATION_FAILED",
    68: "NON_EMPTY_GROUP",
    69: "GROUP_ID_NOT_FOUND",
    90: "PRODUCER_FENCED",
    100: "UNKNOWN_TOPIC_ID",
}

# Group tests run with the smallest session timeout Kafka allows by default: Tansu delays a
# JoinGroup by about session.timeout.ms / 2, and a dead member is noticed after it.
SESSION_TIMEOUT_MS = 6000
HEARTBEAT_MS = 1000
# Consumers poll the broker often so scenarios stay short; long-poll scenarios override it.
FETCH_WAIT_MS = 100
# Consumers read everything (read_uncommitted, Kafka's default) or only committed
# transactions, stopping at the last stable offset (read_committed).
ISOLATION_LEVELS = ("read_uncommitted", "read_committed")
# How long a transactional verb (init, commit, abort, send_offsets) may block.
TXN_BLOCK_MS = 20000
# 1 MiB values need more than Kafka's 1 MiB default request and message limits.
LARGE_LIMIT = 4 * 1024 * 1024


class NotSupportedByClient(Exception):
    """This client library has no way to perform the verb (or this variant of it)."""


class ClientError(Exception):
    """The library reported an error for a verb; `code` is the Kafka error code when known."""

    def __init__(self, message: str, code: int | None = None) -> None:
        super().__init__(message)
        self.code = code

    @property
    def error_name(self) -> str | None:
        return ERROR_NAMES.get(self.code) if self.code is not None else None


def error_code_by_name(name: str) -> int | None:
    """Kafka's code for an error name ("PRODUCER_FENCED" -> 90), for adapters whose library
    reports names rather than numbers."""
    for code, known in ERROR_NAMES.items():
        if known == name:
            return code
    return None


# What a group coordinator answers while it is being found, created or loaded: Kafka creates
# __consumer_offsets at a fresh broker's first group request and loads each of its partitions
# in the background, answering COORDINATOR_LOAD_IN_PROGRESS (14), COORDINATOR_NOT_AVAILABLE
# (15) or NOT_COORDINATOR (16) meanwhile. All three are retriable: Kafka's own Admin client
# retries them until its default.api.timeout.ms (60 s); the adapters' admin verbs whose
# library gives up at once retry them the same way (retry_coordinator).
COORDINATOR_RETRIABLE = frozenset({14, 15, 16})
COORDINATOR_RETRY_S = 60.0


def retry_coordinator(call: Callable[[], T], timeout_s: float = COORDINATOR_RETRY_S) -> T:
    """`call()`, again while it fails with a retriable coordinator error, for `timeout_s`."""
    deadline = time.monotonic() + timeout_s
    while True:
        try:
            return call()
        except ClientError as exc:
            if exc.code not in COORDINATOR_RETRIABLE or time.monotonic() >= deadline:
                raise
        time.sleep(0.2)


class OffsetOutOfRange(ClientError):
    """Consuming from an offset outside the log with auto.offset.reset=none."""

    def __init__(self, message: str) -> None:
        super().__init__(message, 1)


@dataclass(frozen=True)
class Message:
    """A record to produce. `partition=None` lets the client's partitioner choose."""

    value: bytes | None
    key: bytes | None = None
    headers: Headers = ()
    partition: int | None = None
    timestamp: int | None = None  # ms since epoch; None lets the client stamp it


@dataclass(frozen=True)
class Delivery:
    partition: int
    offset: int | None  # None when the broker does not say (acks=0)


@dataclass(frozen=True)
class Record:
    """A consumed record, as the client library handed it to the application."""

    topic: str
    partition: int
    offset: int
    key: bytes | None
    value: bytes | None
    headers: Headers
    timestamp: int
    timestamp_type: str  # "CreateTime" | "LogAppendTime"

    def content(self) -> tuple:
        """What a producer controls: compared against the produced `Message`."""
        return (self.partition, self.key, self.value, self.headers)


@dataclass
class TopicMetadata:
    error_code: int
    partitions: dict[int, int] = field(default_factory=dict)  # partition -> leader id


def kafka_uuid(raw: bytes) -> str:
    """A topic id as Kafka prints and parses it (Uuid.toString): URL-safe base64, unpadded."""
    return base64.urlsafe_b64encode(raw).rstrip(b"=").decode()


ZERO_UUID = kafka_uuid(bytes(16))  # "no topic id" on the wire


@dataclass
class TopicDescription:
    """A topic as the admin API describes it, with its KIP-516 topic id."""

    name: str
    topic_id: str  # Kafka's form: URL-safe base64 of the 16 bytes, no padding
    partitions: dict[int, int]  # partition -> leader id


@dataclass
class ClusterMetadata:
    brokers: dict[int, tuple[str, int]]  # node id -> (host, port)
    topics: dict[str, TopicMetadata]


@dataclass
class GroupMemberInfo:
    member_id: str
    client_id: str
    assignment: frozenset[tuple[str, int]]


@dataclass
class GroupInfo:
    group_id: str
    state: str  # Kafka's names: "Stable", "Empty", "Dead", "PreparingRebalance", ...
    protocol_type: str
    members: list[GroupMemberInfo]


def normalize_state(state: str) -> str:
    """'STABLE', 'ConsumerGroupState.STABLE', 'Stable' -> 'Stable'."""
    raw = str(state).rsplit(".", 1)[-1].replace("_", "").lower()
    names = {"stable": "Stable", "empty": "Empty", "dead": "Dead",
             "preparingrebalance": "PreparingRebalance",
             "completingrebalance": "CompletingRebalance", "unknown": "Unknown"}
    return names.get(raw, str(state))


class GroupMember:
    """A consumer-group member running in the background like an application would.

    `assignment()` and `records()` are snapshots; `leave()` closes cleanly (LeaveGroup).
    """

    def assignment(self) -> frozenset[tuple[str, int]]:
        raise NotImplementedError

    def records(self) -> list[Record]:
        raise NotImplementedError

    def error(self) -> str | None:
        """The last error the member's loop saw, for failure messages."""
        return None

    def leave(self) -> None:
        raise NotImplementedError


class PublishingGroupMember(GroupMember):
    """A member whose consumer runs elsewhere (a thread, another process) and publishes what
    it consumed and its assignment here, under a lock."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._records: list[Record] = []
        self._assignment: frozenset = frozenset()
        self._error: str | None = None

    def assignment(self) -> frozenset[tuple[str, int]]:
        with self._lock:
            return self._assignment

    def records(self) -> list[Record]:
        with self._lock:
            return list(self._records)


class ThreadedGroupMember(PublishingGroupMember):
    """A member whose consumer is polled by a thread of its own (`_run`, until `_stop` is
    set; the client libraries' consumers are not thread-safe), publishing what it consumed
    and its assignment under a lock. Subclasses set up their consumer, then `_start()`."""

    def __init__(self, thread_name: str) -> None:
        super().__init__()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True, name=thread_name)

    def _start(self) -> None:
        self._thread.start()

    def _run(self) -> None:
        raise NotImplementedError

    def error(self) -> str | None:
        return self._error

    def leave(self) -> None:
        self._stop.set()
        self._thread.join(30)


class TxnProducer:
    """A transactional producer (transactional.id set), initialized on creation
    (initTransactions: InitProducerId through the transaction coordinator, which fences any
    older producer of the same transactional.id and aborts its open transaction).

    Every verb blocks until the library says it is done; a broker error surfaces as
    ClientError with Kafka's code (PRODUCER_FENCED, INVALID_PRODUCER_EPOCH, ...), or the code
    the library translated it to where it keeps no other (said so in the adapter).
    """

    transactional_id: str

    def begin(self) -> None:
        raise NotImplementedError

    def produce(self, topic: str, messages: Iterable[Message]) -> list[Delivery]:
        """Send inside the open transaction and wait until every record is acknowledged
        (written to the log, not yet visible to read_committed consumers)."""
        raise NotImplementedError

    def send_offsets(self, group: str, offsets: dict[tuple[str, int], int]) -> None:
        """sendOffsetsToTransaction: commit `group`'s offsets ((topic, partition) -> next
        offset to read) with the transaction (AddOffsetsToTxn + TxnOffsetCommit)."""
        raise NotImplementedError

    def commit(self) -> None:
        raise NotImplementedError

    def abort(self) -> None:
        raise NotImplementedError

    def close(self) -> None:
        """Release the producer without waiting long for a broker that may be gone."""
        raise NotImplementedError


class Client:
    """One client library, configured for one broker. Verbs raise NotSupportedByClient."""

    name = "base"

    def __init__(self, bootstrap: str) -> None:
        self.bootstrap = bootstrap

    def close(self) -> None:
        """Release anything cached between verbs (admin connections)."""

    def _unsupported(self, what: str) -> NotSupportedByClient:
        return NotSupportedByClient(f"{self.name} has no API for {what}")

    # -- cluster
    def metadata(self, topics: list[str] | None = None, allow_auto_create: bool = False
                 ) -> ClusterMetadata:
        raise self._unsupported("metadata")

    # -- admin
    def create_topic(self, name: str, partitions: int = 1, configs: dict[str, str] | None = None
                     ) -> None:
        raise self._unsupported("creating topics")

    def delete_topic(self, name: str) -> None:
        raise self._unsupported("deleting topics")

    def create_partitions(self, name: str, total: int) -> None:
        raise self._unsupported("creating partitions")

    def describe_configs(self, name: str) -> dict[str, str | None]:
        raise self._unsupported("describing configs")

    def alter_configs(self, name: str, configs: dict[str, str]) -> None:
        raise self._unsupported("altering configs")

    def describe_topic(self, name: str) -> TopicDescription:
        raise self._unsupported("describing a topic with its topic id")

    def describe_topic_by_id(self, topic_id: str) -> TopicDescription:
        raise self._unsupported("describing a topic by id")

    # -- data
    def produce(self, topic: str, messages: Iterable[Message], acks: int | str = "all",
                compression: str = "none", idempotent: bool | None = None) -> list[Delivery]:
        """Send `messages` in order and wait for every delivery report.

        idempotent=None keeps the library's default, except that idempotence is turned off
        when acks is not "all" (no library allows that combination).
        """
        raise self._unsupported("producing")

    def consume(self, topic: str, n: int, *, group: str | None = None,
                start: dict[int, int] | None = None, auto_offset_reset: str = "earliest",
                timeout: float = 15.0, fetch_wait_ms: int = FETCH_WAIT_MS,
                commit: bool = True, isolation_level: str = "read_uncommitted"
                ) -> list[Record]:
        """Read up to `n` records of `topic`.

        group: subscribe as that group, then commit what was returned (if `commit`) and leave.
        start: partition -> offset to assign and seek to (no group).
        Otherwise: assign every partition and start per `auto_offset_reset`.
        isolation_level: "read_committed" hands back only records of committed transactions
        (and non-transactional ones) and stops at the last stable offset.
        Raises OffsetOutOfRange when the position is out of range and the reset is "none".
        """
        raise self._unsupported("consuming")

    def commit(self, group: str, topic: str, offsets: dict[int, int]) -> None:
        raise self._unsupported("committing offsets without consuming")

    def committed(self, group: str, topic: str, partitions: list[int]) -> dict[int, int | None]:
        raise self._unsupported("reading committed offsets")

    def list_offsets(self, topic: str, partition: int, spec: str | int,
                     isolation_level: str = "read_uncommitted") -> int | None:
        """Offset for "earliest", "latest" or a timestamp (ms); None when no record qualifies.
        With read_committed, "latest" is the last stable offset (LSO), not the high watermark."""
        raise self._unsupported("listing offsets")

    def transactional_producer(self, transactional_id: str, *,
                               transaction_timeout_ms: int | None = None) -> TxnProducer:
        """A producer with this transactional.id, initialized (initTransactions) before it is
        returned; transaction_timeout_ms=None keeps the library's default."""
        raise self._unsupported("transactions")

    # -- groups
    def group_member(self, topics: list[str], group: str) -> GroupMember:
        raise self._unsupported("running a group member")

    def list_groups(self) -> list[str]:
        raise self._unsupported("listing groups")

    def describe_group(self, group: str) -> GroupInfo:
        raise self._unsupported("describing groups")

    def delete_group(self, group: str) -> None:
        raise self._unsupported("deleting groups")


def wait_until(predicate: Callable[[], object], timeout: float, interval: float = 0.1,
               what: str = "condition") -> object:
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() >= deadline:
            raise TimeoutError(f"timed out after {timeout}s waiting for {what}")
        time.sleep(interval)


def decode_consumer_assignment(data: bytes | None) -> frozenset[tuple[str, int]]:
    """ConsumerProtocolAssignment (the group's member_assignment bytes) -> {(topic, p)}."""
    import struct

    if not data:
        return frozenset()
    pos = 2  # version
    (n_topics,) = struct.unpack_from(">i", data, pos)
    pos += 4
    out = set()
    for _ in range(max(n_topics, 0)):
        (tlen,) = struct.unpack_from(">h", data, pos)
        pos += 2
        topic = data[pos : pos + tlen].decode()
        pos += tlen
        (n_parts,) = struct.unpack_from(">i", data, pos)
        pos += 4
        for _ in range(max(n_parts, 0)):
            (p,) = struct.unpack_from(">i", data, pos)
            pos += 4
            out.add((topic, p))
    return frozenset(out)
