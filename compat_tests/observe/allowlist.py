"""The differences between Kafka's and Trafka's answers that are not Trafka bugs, each with
its reason. Keep it short and honest: a difference that normalising can make go away belongs
in `normalise` (a rule for everyone); an entry here is for what one scenario or verb does that
no rule can make deterministic.

Patterns: `*` matches any run of characters, everything else literally (so "compression[lz4]"
means that scenario). `path` is matched against the difference's path within the call
("ok.<1>/0[3].timestamp", or "" for a call only one broker's run made).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from compat_tests.observe.compare import ABSENT, Difference


@dataclass(frozen=True)
class Allowance:
    scenario: str
    verb: str
    path: str
    reason: str
    client: str = "*"
    pair: str = "*"
    obj: str = "*"
    one_side_only: bool = False  # only what one side has and the other lacks (ABSENT)

    def matches(self, d: Difference) -> bool:
        if self.one_side_only and ABSENT not in (d.reference, d.other):
            return False
        return all(_glob(pattern).fullmatch(value) for pattern, value in (
            (self.scenario, d.scenario), (self.client, d.client), (self.pair, d.pair),
            (self.obj, d.obj), (self.verb, d.verb), (self.path, d.path)))

    def key(self) -> str:
        return (f"{self.pair} {self.scenario} {self.client} {self.obj}.{self.verb} "
                f"{self.path or '(whole call)'}" + (" (one side only)" if self.one_side_only else ""))


_compiled: dict[str, re.Pattern] = {}


def _glob(pattern: str) -> re.Pattern:
    if pattern not in _compiled:
        _compiled[pattern] = re.compile(".*".join(re.escape(p) for p in pattern.split("*")),
                                        re.DOTALL)
    return _compiled[pattern]


_LEADER_KILLS = ("how many batches the background producer gets acknowledged before, between "
                 "and after the two leader kills is timing (it produces until each step has seen "
                 "progress): the produce calls only one run made, the records only one run read "
                 "back, and the count asked for and the log end offset, which equal that number; "
                 "the scenario itself checks every acknowledged record at its offset, once")

ALLOWED: tuple[Allowance, ...] = (
    Allowance("twenty_members_churn_converges*", "*", "*",
              "the churn's joins and leaves are drawn at random for 20 s (seeded by the group's "
              "random name), so which members come and go differs from run to run: the calls only "
              "one run made; the group they converge to (four members, three partitions each, "
              "Stable) is compared", one_side_only=True),
    Allowance("three_members_one_killed*", "committed", "ok.*",
              "the offsets committed when a member is SIGKILLed are as far as each member had "
              "read and auto-committed by then (timing); the scenario itself bounds the records "
              "read twice by them"),
    Allowance("cooperative_sticky_leave_is_one_round_for_the_stayer*", "describe_group",
              "ok.assignments (unordered)*",
              "the two cooperative-sticky members start one after the other: whether the second "
              "JoinGroup arrives before the first member's round completes is timing, and the "
              "sticky assignor keeps what the first round gave ([0,1]+[2,3] after a round alone, "
              "[0,2]+[1,3] when both joined together); the scenario checks what it is about "
              "(one round for the stayer) itself"),
    Allowance("cluster_leader_killed_under_idempotent_producer", "*", "*", _LEADER_KILLS,
              one_side_only=True),
    Allowance("cluster_leader_killed_under_idempotent_producer", "consume", "args[1]",
              _LEADER_KILLS),
    Allowance("cluster_leader_killed_under_idempotent_producer", "list_offsets", "ok",
              _LEADER_KILLS),
    Allowance("*", "describe_configs", "ok.trafka.*",
              "Trafka's own topic settings (trafka.fsync.policy, trafka.preallocate.bytes: how it "
              "syncs and reserves disk), under its own prefix; Kafka's flush.* and preallocate are "
              "described beside them with Kafka's defaults"),
    Allowance("*", "describe_configs", "ok.confluent.*.schema.validation",
              "Trafka validates produced records against the Schema Registry under Confluent "
              "Server's topic config names (confluent.key/value.schema.validation, default "
              "false); Apache Kafka has no broker-side schema validation"),
    Allowance("*", "describe_configs", "ok.message.downconversion.enable",
              "Kafka 4.0 removed message.downconversion.enable together with Fetch v0-3; Trafka "
              "still serves those versions as Kafka 3.9 does (docs/protocol-versions.md), so it "
              "keeps 3.9's switch for them (default true) and describes it",
              one_side_only=True),
    Allowance("transaction_timeout_aborts", "commit", "raised.*", client="java",
              reason="Kafka 4.4 finalizes transaction.version=2 and the Java 4.4 client uses it "
              "(KIP-890 part 2: every transaction end bumps the epoch, so the commit after the "
              "coordinator aborted the timed-out transaction counts as a retry of the epoch just "
              "before and gets INVALID_TXN_STATE); Trafka advertises no transaction.version, so "
              "the client runs transactions v1, where that commit is PRODUCER_FENCED, as Kafka "
              "answers the v1 clients (kafka-python, confluent-kafka) in the same scenario"),
)


def explain(d: Difference, allowed: tuple[Allowance, ...] = ALLOWED) -> Allowance | None:
    """The first allow-list entry that explains this difference, or None."""
    return next((a for a in allowed if a.matches(d)), None)
