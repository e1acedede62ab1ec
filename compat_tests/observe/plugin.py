"""The pytest side: a log per compat test, written per (scenario, client, broker kind), the
two brokers of a pair compared as soon as both ran, and one generated test at the end of the
session that fails on any difference the allow-list does not explain.

Pairs: the reference broker first, the broker under test second (`PAIRS`). A (scenario,
client) is compared when both brokers ran it and neither skipped it. When both passed, every
difference the allow-list does not explain fails the generated test "observed answers agree"
(and so the run); when a side failed, its differences are reported but the failure itself is
what fails the run. Every session that compares writes compat_tests/differences.md and
differences.json (what was compared, every difference, every allow-list entry used, every
normalisation rule and how often it applied), and the observations themselves to
compat_tests/observations/<broker kind>/<scenario>~<client>.json (both git-ignored).
"""

from __future__ import annotations

import json
import shutil
import time
from collections import Counter
from pathlib import Path

import pytest

from compat_tests import recording as record
from compat_tests.parts import part_suffix
from compat_tests.observe import allowlist, compare, normalise, report
from compat_tests.observe.verdict import PairResult, Side, Verdict

PAIRS = (("kafka", "trafka"), ("kafka-cluster", "trafka-cluster"))
HERE = Path(__file__).resolve().parent.parent  # compat_tests/: where the outputs go
SHOWN_IN_FAILURE = 40  # differences printed in the failing test's report; all are in the files


def _partner(kind: str) -> tuple[str, str] | None:
    """(pair name, partner kind) of a broker kind that is part of a pair."""
    for ref, other in PAIRS:
        if kind == ref:
            return f"{ref}~{other}", other
        if kind == other:
            return f"{ref}~{other}", ref
    return None


class ObservationPlugin:
    def __init__(self, config: pytest.Config, root: Path = HERE,
                 allowed: tuple[allowlist.Allowance, ...] | None = None) -> None:
        self.config = config
        self.allowed = allowlist.ALLOWED if allowed is None else allowed
        # a part of a split run (COMPAT_PART) keeps its own files: the parts run side by side
        suffix = part_suffix()
        self.out_dir = root / f"observations{suffix}"
        self.report_md = root / f"differences{suffix}.md"
        self.report_json = root / f"differences{suffix}.json"
        self.kinds: set[str] = set()
        self.outcomes: dict[str, str] = {}
        self.sides: dict[tuple[str, str, str, str], Side] = {}  # (kind, module, scenario, client)
        self.results: list[PairResult] = []
        self.rules: Counter = Counter()
        self.started = time.time()
        self.cost_s = 0.0  # normalising, writing and comparing (recording itself is cheap)
        self.cleaned = False
        self.paired: set[tuple[str, str, str, str]] = set()

    # ------------------------------------------------------------------ collection
    @pytest.hookimpl(trylast=True)
    def pytest_collection_modifyitems(self, session: pytest.Session, items: list[pytest.Item]
                                      ) -> None:
        present = {_kind(item) for item in items} - {None}
        pairs = [(r, o) for r, o in PAIRS if r in present and o in present]
        self.kinds = {k for pair in pairs for k in pair}
        if pairs:
            name = "observed answers agree (" + ", ".join(f"{r} vs {o}" for r, o in pairs) + ")"
            items.append(DifferentialItem.from_parent(session, name=name, plugin=self))

    # ------------------------------------------------------------------ per test
    @pytest.hookimpl(hookwrapper=True)
    def pytest_runtest_protocol(self, item: pytest.Item, nextitem):
        kind = _kind(item)
        if kind not in self.kinds:
            yield
            return
        log = record.start(item.nodeid)
        try:
            yield
        finally:
            record.stop()
            streams = log.close()
        began = time.perf_counter()
        self._finished(item, kind, streams)
        self.cost_s += time.perf_counter() - began

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        previous = self.outcomes.get(report.nodeid)
        if previous in ("failed", "skipped", "xfailed"):
            return
        if report.failed:
            self.outcomes[report.nodeid] = "failed"
        elif report.skipped:
            self.outcomes[report.nodeid] = "xfailed" if hasattr(report, "wasxfail") else "skipped"
        elif report.when == "call":
            self.outcomes[report.nodeid] = "passed"

    def _finished(self, item: pytest.Item, kind: str, streams) -> None:
        from compat_tests.report import scenario_of

        scenario, client = scenario_of(item)
        module = item.nodeid.split("::")[0]
        normalised, applied = normalise.normalise(streams)
        self.rules.update(applied)
        if not self.cleaned:  # this session's observations only
            shutil.rmtree(self.out_dir, ignore_errors=True)
            self.cleaned = True
        path = self.out_dir / kind / f"{scenario}~{client}.json".replace("/", "_")
        path.parent.mkdir(parents=True, exist_ok=True)
        outcome = self.outcomes.get(item.nodeid, "failed")
        path.write_text(_dump({"nodeid": item.nodeid, "scenario": scenario, "client": client,
                               "broker": kind, "outcome": outcome}, normalised))
        side = Side(kind, item.nodeid, outcome, path, sum(len(s) for s in normalised.values()))
        self.sides[(kind, module, scenario, client)] = side
        pair, partner_kind = _partner(kind)
        partner = self.sides.get((partner_kind, module, scenario, client))
        if partner is None:
            return
        ref, other = (side, partner) if pair.startswith(kind + "~") else (partner, side)
        self.paired.update({(kind, module, scenario, client), (partner_kind, module, scenario, client)})
        result = PairResult(pair, scenario, client, ref, other)
        if result.comparable:
            ref_streams = normalised if ref is side else _load(ref.path)
            other_streams = normalised if other is side else _load(other.path)
            result.differences, result.compared_calls = compare.compare_streams(
                ref_streams, other_streams, pair=pair, scenario=scenario, client=client)
        self.results.append(result)

    # ------------------------------------------------------------------ the verdict
    def verdict(self) -> "Verdict":
        verdict = Verdict(results=list(self.results), rules=Counter(self.rules),
                          allow_list=self.allowed, cost_s=self.cost_s)
        for result in self.results:
            if not result.comparable:
                continue
            for d in result.differences:
                entry = allowlist.explain(d, self.allowed)
                if entry is not None:
                    verdict.allowed.append((d, entry))
                elif result.both_passed:
                    verdict.unexplained.append(d)
                else:
                    verdict.with_failure.append(d)
        verdict.unpaired = sorted(k for k in self.sides if k not in self.paired)
        return verdict


def _dump(head: dict, streams: dict[str, list[dict]]) -> str:
    """JSON with one call per line: readable, and quick to write for 10 000 records."""
    lines = [json.dumps(head, ensure_ascii=False)[:-1] + (", " if head else "") + '"streams": {']
    for n, (name, calls) in enumerate(streams.items()):
        lines.append(f" {json.dumps(name)}: [")
        lines += [json.dumps(c, ensure_ascii=False) + ("," if i < len(calls) - 1 else "")
                  for i, c in enumerate(calls)]
        lines.append(" ]" + ("," if n < len(streams) - 1 else ""))
    return "\n".join(lines + ["}}"]) + "\n"


def _load(path: Path) -> dict:
    return json.loads(path.read_text())["streams"]


def _kind(item: pytest.Item) -> str | None:
    params = getattr(getattr(item, "callspec", None), "params", {})
    kind = params.get("broker_kind")
    if kind is None or "compat_tests" not in item.nodeid.split("::")[0].split("/"):
        return None
    return kind if _partner(kind) else None


class ObservationsDiffer(Exception):
    """Kafka and Trafka answered a scenario differently, and no allow-list entry says why."""


class DifferentialItem(pytest.Item):
    """The generated last test of the session: compares and writes the report."""

    def __init__(self, *, plugin: ObservationPlugin, **kwargs) -> None:
        super().__init__(**kwargs)
        self.plugin = plugin

    def runtest(self) -> None:
        verdict = self.plugin.verdict()
        plugin = self.plugin
        report.write(verdict, plugin.report_md, plugin.report_json, plugin.started)
        if verdict.unexplained:
            raise ObservationsDiffer(report.failure_text(verdict, SHOWN_IN_FAILURE,
                                                         plugin.report_md))

    def repr_failure(self, excinfo, style=None):
        if excinfo.errisinstance(ObservationsDiffer):
            return str(excinfo.value)
        return super().repr_failure(excinfo, style)

    def reportinfo(self):
        return self.path, None, self.name
