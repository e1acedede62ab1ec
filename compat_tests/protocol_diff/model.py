"""The pieces of a differential run: per-broker context, cases, and what a comparison found.

A `Case` is one request sent to both brokers. Its body is built per broker from that
broker's `Ctx`, because some values in a request are what the same broker answered before
(the topic id it gave a topic, the member id it gave a member, the producer id it
allocated); everything else in the two requests is the same. `capture` records such values
from each broker's own answer into its own context.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field
from typing import Any, Callable

from compat_tests.protocol_diff.client import Outcome


@dataclass
class Ctx:
    """One broker's view of the run: what it answered that later requests must quote."""

    name: str  # "kafka" / "trafka"
    port: int
    values: dict[str, Any] = field(default_factory=dict)
    topic_ids: dict[str, uuid.UUID] = field(default_factory=dict)  # name -> id, from Metadata
    cluster_id: str | None = None
    data_dir: str = ""
    extra_ports: tuple[int, ...] = ()  # other listeners' ports (Kafka's controller listener)

    def get(self, key: str, default: Any = None) -> Any:
        return self.values.get(key, default)

    def topic_id(self, name: str) -> uuid.UUID:
        """The broker's id of topic `name`, or a fixed id no broker has (a missing topic)."""
        return self.topic_ids.get(name, MISSING_TOPIC_ID)


MISSING_TOPIC_ID = uuid.UUID("0badc0de-0000-4000-8000-000000000001")

Body = Callable[[Ctx], dict]
Capture = Callable[[Ctx, dict], None]


@dataclass
class Case:
    """One request for both brokers.

    `variant` names it in the report ("valid", "valid:all-topics", "hostile:...");
    `primary` cases also get the schema-generated hostile variants; `prep` marks a request
    that only sets up state for the next ones (still compared). `header_version` overrides
    the version the header states (too-new / too-old versions). `settle` waits for both
    brokers' metadata to settle afterwards (topic creation and deletion are asynchronous in
    Kafka's KRaft broker). `no_response` for acks=0 Produce.
    """

    api_key: int
    version: int
    variant: str
    body: Body
    primary: bool = False
    prep: bool = False
    capture: Capture | None = None
    header_version: int | None = None
    settle: bool = False
    # Wait afterwards until this transaction is no longer completing (PrepareCommit /
    # PrepareAbort) on both brokers: Kafka writes the markers after EndTxn has answered.
    txn_settle: str | None = None
    # Send the hostile variants before the valid request (when the valid one ends the
    # state they should meet: LeaveGroup, DeleteTopics).
    hostile_first: bool = False
    no_response: bool = False
    # A field (e.g. "group_id") each hostile variant gets a value of its own in, unless the
    # variant mutates it: a JoinGroup variant must not make the next one wait for a rebalance.
    isolate: str | None = None
    # Hostile variants (label suffix after "=", e.g. "protocols=first-twice") Kafka is known
    # never to answer: waited for this long only, so the "timeout" outcome still compares.
    hostile_timeouts: dict[str, float] = field(default_factory=dict)
    timeout_s: float = 5.0
    # Variants to skip for this case's hostile generation (labels of `hostile.py`), each
    # with the reason in a comment where the case is written.
    skip_mutations: tuple[str, ...] = ()


@dataclass
class Difference:
    path: str
    kafka: Any
    trafka: Any


@dataclass
class Pair:
    """One compared request/response pair and what differed."""

    api_key: int
    version: int
    variant: str
    kafka: Outcome
    trafka: Outcome
    differences: list[Difference]
    allowed: list[tuple[Difference, str]] = field(default_factory=list)  # (difference, allow-list id)
    seconds: float = 0.0  # from the first send to the last answer
