"""The compatibility matrix: scenario x client x broker -> outcome, written after every run.

Outcomes: "pass", "fail", "skip" (with the reason), "peer failure" (an expected failure of
the peer broker listed in peer_findings, with the reason), "peer failure (not re-run)" (listed,
reported from peer_findings without running; `--peer-recheck` runs them) and "pass (listed
peer failure)" when a listed peer failure did not happen. Written to compat_tests/report.md and
compat_tests/report.json, and printed at the end of the run. Only runs that executed compat
scenarios write it, so a unit-test-only run keeps the last matrix.
"""

from __future__ import annotations

import json
import time
from dataclasses import asdict, dataclass
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent
ORDER = {"fail": 0, "pass (listed peer failure)": 1, "peer failure": 2, "peer failure (not re-run)": 3,
         "skip": 4, "pass": 5}
SYMBOL = {"pass": "pass", "fail": "**FAIL**", "skip": "skip", "peer failure": "peer failure",
          "pass (listed peer failure)": "pass (listed peer failure)",
          "peer failure (not re-run)": "peer failure (not re-run)"}
CLIENT_ORDER = ["raw", "kafka-python", "confluent-kafka", "aiokafka", "kcat", "java", "spark"]


def scenario_of(item: pytest.Item) -> tuple[str, str]:
    """(scenario, client) of a compat item: the test name plus its non-matrix parameters."""
    name = getattr(item, "originalname", item.name).removeprefix("test_")
    params = dict(getattr(getattr(item, "callspec", None), "params", {}))
    client = params.pop("client_name", None)
    params.pop("broker_kind", None)
    if client is None:
        marker = item.get_closest_marker("compat")
        client = marker.kwargs.get("client", "-") if marker else "-"
    if params:
        name += "[" + "-".join(str(v) for v in params.values()) + "]"
    return name, client


@dataclass
class Result:
    scenario: str
    client: str
    broker: str
    outcome: str
    reason: str
    duration_s: float
    nodeid: str


class MatrixReport:
    def __init__(self, config: pytest.Config) -> None:
        self.config = config
        self.results: dict[str, Result] = {}
        self.items: dict[str, pytest.Item] = {}
        self.started = time.time()

    @pytest.hookimpl(trylast=True)
    def pytest_collection_modifyitems(self, items: list[pytest.Item]) -> None:
        for item in items:
            params = getattr(getattr(item, "callspec", None), "params", {})
            in_suite = "compat_tests" in item.nodeid.split("::")[0].replace("\\", "/").split("/")
            # (a scenario whose `broker_kinds` none of --broker's kinds matches has no kind:
            # pytest skips it with an empty parameter set, and it has no matrix cell)
            if in_suite and isinstance(params.get("broker_kind"), str):
                self.items[item.nodeid] = item

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        item = self.items.get(report.nodeid)
        if item is None:
            return
        scenario, client = scenario_of(item)
        broker = item.callspec.params["broker_kind"]
        previous = self.results.get(report.nodeid)
        outcome, reason = _classify(report)
        if outcome is None:
            return
        if previous is not None and report.when != "setup":
            if previous.outcome in ("fail", "skip") and report.when == "teardown" \
                    and outcome == "pass":
                return  # keep the call's verdict
            if report.when == "teardown" and outcome == "pass":
                previous.duration_s += report.duration
                return
        duration = report.duration + (previous.duration_s if previous else 0.0)
        self.results[report.nodeid] = Result(scenario, client, broker, outcome, reason,
                                             duration, report.nodeid)

    def pytest_terminal_summary(self, terminalreporter) -> None:
        if not self.results:
            return
        markdown = self.render_markdown()
        (HERE / "report.md").write_text(markdown)
        (HERE / "report.json").write_text(json.dumps({
            "generated": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
            "elapsed_s": round(time.time() - self.started, 1),
            "brokers": sorted({r.broker for r in self.results.values()}),
            "results": [{**asdict(r), "duration_s": round(r.duration_s, 2)}
                        for r in sorted(self.results.values(),
                                        key=lambda r: (r.broker, r.scenario, r.client))],
        }, indent=1) + "\n")
        terminalreporter.write_sep("=", "compatibility matrix (compat_tests/report.md)")
        terminalreporter.write_line(markdown)

    def render_markdown(self) -> str:
        results = list(self.results.values())
        lines = ["# Compatibility matrix", "",
                 f"Generated {time.strftime('%Y-%m-%d %H:%M:%S')} by `compat_tests` "
                 f"({len(results)} cases, {time.time() - self.started:.0f} s).", "",
                 "Cells: pass / **FAIL** / skip / peer failure (a known failure of the peer "
                 "broker, listed in `compat_tests/peer_findings.py`; \"not re-run\": reported from "
                 "that list without running, `--peer-recheck` runs them). Numbers point to the "
                 "reasons under each table.", ""]
        for broker in sorted({r.broker for r in results}):
            rows = [r for r in results if r.broker == broker]
            clients = sorted({r.client for r in rows},
                             key=lambda c: (CLIENT_ORDER.index(c) if c in CLIENT_ORDER else 99, c))
            scenarios = sorted({r.scenario for r in rows})
            counts = {k: sum(1 for r in rows if r.outcome == k) for k in ORDER}
            lines += [f"## Broker: {broker}", "",
                      ", ".join(f"{v} {k}" for k, v in counts.items() if v), "",
                      "| scenario | " + " | ".join(clients) + " |",
                      "|---|" + "---|" * len(clients)]
            notes: list[str] = []
            cell = {(r.scenario, r.client): r for r in rows}
            for scenario in scenarios:
                cells = []
                for c in clients:
                    r = cell.get((scenario, c))
                    if r is None:
                        cells.append("")
                        continue
                    text = SYMBOL[r.outcome]
                    if r.reason and r.outcome != "pass":
                        if r.reason not in notes:
                            notes.append(r.reason)
                        text += f" [{notes.index(r.reason) + 1}]"
                    cells.append(text)
                lines.append(f"| {scenario} | " + " | ".join(cells) + " |")
            lines.append("")
            for i, note in enumerate(notes, 1):
                lines.append(f"{i}. {_one_line(note)}")
            lines.append("")
        return "\n".join(lines)


def _one_line(text: str, limit: int = 400) -> str:
    text = " ".join(str(text).split()).replace("|", "/")
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _classify(report: pytest.TestReport) -> tuple[str | None, str]:
    """(outcome, reason) of one phase report; (None, "") when it changes nothing."""
    wasxfail = getattr(report, "wasxfail", None)
    if report.skipped:
        if wasxfail is not None and wasxfail.startswith("[NOTRUN] "):  # not re-run (no --peer-recheck)
            return "peer failure (not re-run)", wasxfail.removeprefix("[NOTRUN] ").removeprefix("peer failure: ")
        if wasxfail is not None:  # an xfail that did fail
            return "peer failure", wasxfail.removeprefix("peer failure: ")
        longrepr = report.longrepr
        reason = longrepr[2] if isinstance(longrepr, tuple) else str(longrepr)
        return "skip", reason.removeprefix("Skipped: ")
    if report.failed:
        if report.when == "call" or report.when == "setup":
            return "fail", _failure_reason(report)
        return "fail", "teardown: " + _failure_reason(report)
    if report.when == "call":
        if wasxfail is not None:
            return "pass (listed peer failure)", wasxfail.removeprefix("peer failure: ")
        return "pass", ""
    if report.when == "setup":
        return None, ""
    return "pass", ""


def _failure_reason(report: pytest.TestReport) -> str:
    crash = getattr(report.longrepr, "reprcrash", None)
    if crash is not None:
        return crash.message.splitlines()[0] if crash.message else "failed"
    return str(report.longrepr).strip().splitlines()[-1] if report.longrepr else "failed"
