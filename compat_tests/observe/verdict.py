"""What the differential check found: each (scenario, client) pair of runs on Kafka and on
Trafka (`PairResult`, one `Side` per broker) and the session's `Verdict`.

Why a module of its own: the plugin builds these and the report renders them; the report
must not import the plugin that calls it.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

from compat_tests.observe import allowlist, compare


@dataclass
class Side:
    kind: str
    nodeid: str
    outcome: str  # passed / failed / skipped / xfailed
    path: Path
    calls: int


@dataclass
class PairResult:
    pair: str
    scenario: str
    client: str
    reference: Side
    other: Side
    compared_calls: int = 0
    differences: list[compare.Difference] = field(default_factory=list)

    @property
    def comparable(self) -> bool:
        return "skipped" not in (self.reference.outcome, self.other.outcome) \
            and "xfailed" not in (self.reference.outcome, self.other.outcome)

    @property
    def both_passed(self) -> bool:
        return self.reference.outcome == "passed" and self.other.outcome == "passed"


@dataclass
class Verdict:
    results: list[PairResult]
    rules: Counter
    unexplained: list[compare.Difference] = field(default_factory=list)
    with_failure: list[compare.Difference] = field(default_factory=list)
    allowed: list[tuple[compare.Difference, allowlist.Allowance]] = field(default_factory=list)
    unpaired: list = field(default_factory=list)
    allow_list: tuple = ()
    cost_s: float = 0.0

    def counts(self) -> dict:
        comparable = [r for r in self.results if r.comparable]
        return {
            "pairs_compared": len(comparable),
            "pairs_both_passed": sum(1 for r in comparable if r.both_passed),
            "pairs_with_a_failed_side": sum(1 for r in comparable if not r.both_passed),
            "pairs_with_nothing_recorded": sum(1 for r in comparable
                                               if r.reference.calls + r.other.calls == 0),
            "pairs_not_compared": len(self.results) - len(comparable),
            "ran_on_one_broker_only": len(self.unpaired),
            "calls_compared": sum(r.compared_calls for r in comparable),
            "calls_recorded": sum(r.reference.calls + r.other.calls for r in comparable),
            "differences_unexplained": len(self.unexplained),
            "differences_allow_listed": len(self.allowed),
            "differences_in_pairs_with_a_failed_side": len(self.with_failure),
        }
