"""The compatibility matrix: scenario x client x broker -> outcome, written after every run.

Outcomes: "pass", "fail", "skip" (with the reason), "peer failure" (an expected failure of
the peer broker listed in peer_findings, with the reason), "peer failure (not re-run)" (listed,
reported from peer_findings without running; `--peer-recheck` runs them) and "pass (listed
peer failure)" when a listed peer failure did not happen.

Layout: Apache Kafka is the specification, so the brokers are the columns, Kafka first
(Kafka | Trafka | Kafka cluster | Trafka cluster | Tansu), and each row is one scenario, in
one table per scenario file. A cell sums up the row's clients on that broker ("pass (5/5)",
or the passes and each other client's outcome with the number of its reason). One row per
scenario rather than per scenario and client keeps the matrix about 70 rows long instead of
350, and a row still shows every client that does not pass. The cluster scenarios run on the
three-broker kinds only, so their file's table has the cluster columns and the others do not.
A case that passes on Kafka and fails on Trafka is listed at the top and marked in its cell.

Files: compat_tests/report.md and report.json (this run, git-ignored), printed at the end of
the run. Only runs that executed compat scenarios write them, so a unit-test-only run keeps
the last matrix. Tansu, the peer, is not in the default run: the results of a run against it
are kept in the committed compat_tests/peer_results/tansu.json (refreshed by
`PEER_REFRESH_COMMAND`) and merged in as the Tansu column with their date.

`python -m compat_tests.report` renders report.md again from report.json and the peer
results. The documentation's matrix page (docs/compatibility/matrix.md) is generated too, from
a run's report.json committed beside it (docs/compatibility/report.json) and the peer results:
`python -m compat_tests.report --docs` copies this run's report.json there and renders the page;
`--check` exits 1 when the committed page is not what the committed data renders
(tests/compat/test_matrix_page.py runs that check in every test run, so the page cannot be
edited by hand or left behind a new peer refresh).
"""

from __future__ import annotations

import argparse
import json
import re
import sys
import time
from dataclasses import asdict, dataclass, fields
from pathlib import Path

import pytest

from compat_tests.parts import part_suffix

HERE = Path(__file__).resolve().parent
PEER_RESULTS = HERE / "peer_results"
# The peer kinds whose results are kept between runs (one file each).
PEER_RESULT_KINDS = ("tansu",)
PEER_REFRESH_COMMAND = "python -m pytest -q compat_tests --broker tansu"

ORDER = {"fail": 0, "pass (listed peer failure)": 1, "peer failure": 2, "peer failure (not re-run)": 3,
         "skip": 4, "pass": 5}
LABEL = {"pass": "pass", "fail": "**FAIL**", "skip": "skip", "peer failure": "peer failure",
         "pass (listed peer failure)": "pass (listed peer failure)",
         "peer failure (not re-run)": "peer failure"}
NOTE_PREFIX = {"peer failure (not re-run)": "not re-run, from peer_findings.py: ",
               "peer failure": "re-run, still failing: ",
               "pass (listed peer failure)": "listed in peer_findings.py but passed: "}
CLIENT_ORDER = ["raw", "kafka-python", "confluent-kafka", "aiokafka", "kcat", "java", "spark"]
BROKER_ORDER = ["kafka", "trafka", "kafka-cluster", "trafka-cluster", "tansu", "tansu-tagfix",
                "external", "trafka-lossy", "tansu-lossy"]
BROKER_TITLE = {"kafka": "Kafka", "trafka": "Trafka", "kafka-cluster": "Kafka cluster",
                "trafka-cluster": "Trafka cluster", "tansu": "Tansu"}
BROKER_DESCRIPTION = {
    "kafka": "Apache Kafka 4.4, one KRaft node (controller + broker): the reference",
    "trafka": "Trafka, one broker",
    "kafka-cluster": "three Apache Kafka 3.9 brokers on ZooKeeper: the cluster scenarios' reference",
    "trafka-cluster": "three Trafka brokers on ZooKeeper",
    "tansu": "Tansu, the peer broker (opt-in run)",
}
# Each Trafka kind and the Kafka kind it must match.
REFERENCE = {"trafka": "kafka", "trafka-cluster": "kafka-cluster"}


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
    file: str = ""  # the scenario file, "test_admin.py"
    line: int = 0  # where the scenario is defined, for the row order
    date: str = ""  # when it ran (kept for peer results merged from earlier runs)

    @classmethod
    def from_dict(cls, data: dict) -> "Result":
        known = {f.name for f in fields(cls)}
        result = cls(**{k: v for k, v in data.items() if k in known})
        if not result.file:
            result.file = file_of(result.nodeid)
        return result


def file_of(nodeid: str) -> str:
    return nodeid.split("::", 1)[0].replace("\\", "/").rsplit("/", 1)[-1]


class MatrixReport:
    def __init__(self, config: pytest.Config) -> None:
        self.config = config
        self.results: dict[str, Result] = {}
        self.items: dict[str, pytest.Item] = {}
        self.collected: set[str] = set()  # every compat nodeid, before -k/-m deselection
        self.started = time.time()

    @pytest.hookimpl(tryfirst=True)
    def pytest_collection_modifyitems(self, items: list[pytest.Item]) -> None:
        for item in items:
            params = getattr(getattr(item, "callspec", None), "params", {})
            in_suite = "compat_tests" in item.nodeid.split("::")[0].replace("\\", "/").split("/")
            # A scenario whose broker kinds none of --broker's choose is parametrized with an
            # empty set (pytest's NOTSET, a skip): not a broker of the matrix.
            if in_suite and isinstance(params.get("broker_kind"), str):
                self.items[item.nodeid] = item
                self.collected.add(item.nodeid)

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
                previous.duration_s += report.duration
                return  # keep the call's verdict
            if report.when == "teardown" and outcome == "pass":
                previous.duration_s += report.duration
                return
        duration = report.duration + (previous.duration_s if previous else 0.0)
        self.results[report.nodeid] = Result(
            scenario, client, broker, outcome, reason, duration, report.nodeid,
            file=file_of(report.nodeid), line=(item.location[1] or 0) + 1,
            date=time.strftime("%Y-%m-%d"))

    def pytest_terminal_summary(self, terminalreporter) -> None:
        if not self.results:
            return
        results = list(self.results.values())
        elapsed = time.time() - self.started
        generated = time.strftime("%Y-%m-%dT%H:%M:%S%z")
        for kind in PEER_RESULT_KINDS:
            own = [r for r in results if r.broker == kind]
            if own:
                path = save_peer_results(kind, own, self.collected)
                terminalreporter.write_line(f"{kind} results kept in {path.relative_to(HERE.parent)}")
        markdown = render_markdown(results, load_peer_results(skip={r.broker for r in results}),
                                   generated=generated, elapsed_s=elapsed)
        suffix = part_suffix()
        (HERE / f"report{suffix}.md").write_text(markdown)
        (HERE / f"report{suffix}.json").write_text(json.dumps({
            "generated": generated,
            "elapsed_s": round(elapsed, 1),
            "brokers": order_brokers({r.broker for r in results}),
            "results": [_json_result(r) for r in sorted(results, key=_result_key)],
        }, indent=1) + "\n")
        terminalreporter.write_sep("=", f"compatibility matrix (compat_tests/report{suffix}.md)")
        terminalreporter.write_line(markdown)


def merge_parts(paths: list[Path]) -> dict:
    """One run's report.json contents from its parts' (the results of all; the latest
    generation time; the longest part's elapsed time, the parts having run side by side)."""
    parts = [json.loads(path.read_text()) for path in paths]
    results = [r for part in parts for r in part["results"]]
    results.sort(key=lambda r: _result_key(Result.from_dict(r)))
    return {"generated": max(part["generated"] for part in parts),
            "elapsed_s": max(part.get("elapsed_s") or 0 for part in parts),
            "brokers": order_brokers({r["broker"] for r in results}),
            "results": results}


def _json_result(r: Result) -> dict:
    return {**asdict(r), "duration_s": round(r.duration_s, 2)}


def _result_key(r: Result) -> tuple:
    return (_broker_key(r.broker), r.file, r.line, r.scenario, _client_key(r.client))


def _broker_key(broker: str) -> tuple:
    return (BROKER_ORDER.index(broker) if broker in BROKER_ORDER else 99, broker)


def _client_key(client: str) -> tuple:
    return (CLIENT_ORDER.index(client) if client in CLIENT_ORDER else 99, client)


def order_brokers(brokers) -> list[str]:
    return sorted(set(brokers), key=_broker_key)


def title(broker: str) -> str:
    return BROKER_TITLE.get(broker, broker)


# --------------------------------------------------------------------------- peer results


def peer_results_path(kind: str) -> Path:
    return PEER_RESULTS / f"{kind}.json"


def save_peer_results(kind: str, results: list[Result], collected: set[str]) -> Path:
    """Merge this run's results of a peer kind into its kept file: the cases that ran replace
    their old entries; entries of cases this session did not run are kept (a partial re-run
    refreshes part of the column), unless their scenario no longer exists (renamed or removed
    scenarios go)."""
    path = peer_results_path(kind)
    old = load_peer_file(path)
    kept = {r.nodeid: r for r in old.get("results", [])
            if r.nodeid in collected or _still_defined(r.nodeid)}
    kept.update({r.nodeid: r for r in results})
    version = _peer_version(kind)
    data = {
        "broker": kind,
        "about": BROKER_DESCRIPTION.get(kind, kind),
        "version": version or old.get("version", ""),
        "refreshed": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
        "command": PEER_REFRESH_COMMAND.replace("tansu", kind),
        "results": [_json_result(r) for r in sorted(kept.values(), key=_result_key)],
    }
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(data, indent=1) + "\n")
    return path


def _still_defined(nodeid: str) -> bool:
    """Whether the test function of `nodeid` is still defined in its file."""
    path, _, rest = nodeid.partition("::")
    function = rest.split("[", 1)[0].split("::")[-1]
    try:
        text = (HERE.parent / path).read_text()
    except OSError:
        return False
    return re.search(rf"^(async )?def {re.escape(function)}\(", text, re.M) is not None


def _peer_version(kind: str) -> str:
    if kind != "tansu":
        return ""
    import subprocess

    from compat_tests.brokers import BrokerUnavailable, find_tansu

    try:
        out = subprocess.run([str(find_tansu()), "--version"], capture_output=True, text=True,
                             timeout=20).stdout.strip()
    except (BrokerUnavailable, OSError, subprocess.SubprocessError):
        return ""
    return out


def load_peer_file(path: Path) -> dict:
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError):
        return {}
    data["results"] = [Result.from_dict(r) for r in data.get("results", [])]
    return data


def load_peer_results(skip: set[str] = frozenset()) -> dict[str, dict]:
    """The kept results of each peer kind (not among `skip`, the kinds this run has)."""
    out = {}
    for kind in PEER_RESULT_KINDS:
        if kind in skip:
            continue
        data = load_peer_file(peer_results_path(kind))
        if data.get("results"):
            out[kind] = data
    return out


# --------------------------------------------------------------------------- rendering


def render_markdown(results: list[Result], peers: dict[str, dict] | None = None,
                    generated: str = "", elapsed_s: float | None = None) -> str:
    """The matrix of `results` (this run) with the kept results of peer kinds (`peers`,
    load_peer_results) as further columns, limited to this run's scenario files."""
    peers = peers or {}
    scenarios_run = {(r.file, r.scenario) for r in results}
    merged = list(results)
    for data in peers.values():
        merged += [r for r in data["results"] if (r.file, r.scenario) in scenarios_run]
    brokers = order_brokers({r.broker for r in merged})
    notes = _Notes()
    by_file: dict[str, list[Result]] = {}
    for r in merged:
        by_file.setdefault(r.file, []).append(r)
    cell_of = {(r.scenario, r.client, r.broker): r for r in merged}

    lines = ["# Compatibility matrix", ""]
    when = generated.replace("T", " ")[:16] if generated else time.strftime("%Y-%m-%d %H:%M")
    took = f", {elapsed_s:.0f} s" if elapsed_s is not None else ""
    lines += [f"Generated {when} by `compat_tests` ({len(results)} cases{took}). Apache Kafka is "
              "the specification: the brokers are the columns, Kafka first; each row is a "
              "scenario, each cell its clients on that broker.", ""]
    lines += _broker_table(brokers, merged, peers)
    lines += _peer_lines(peers)
    lines += _regressions(merged, cell_of, notes)
    lines += ["Cells: `pass (n/n)` when all n clients pass; otherwise the passes, then each other "
              "outcome with its clients and the number of its reason (notes at the end). "
              "Clients: " + ", ".join(c for c in CLIENT_ORDER) + " (`raw`: the scenario speaks "
              "the protocol by hand; `spark`: Spark's connector). A client without the verb is "
              "a skip; \"peer failure\" is a Tansu failure listed in "
              "`compat_tests/peer_findings.py`. ⚠ marks a case that passes on Kafka and not on "
              "Trafka.", ""]
    for file in sorted(by_file, key=lambda f: (f == "test_cluster.py", f)):
        rows = by_file[file]
        cols = order_brokers({r.broker for r in rows})
        times = " · ".join(f"{title(b)} {sum(r.duration_s for r in rows if r.broker == b):.0f} s"
                           for b in cols)
        lines += [f"## {file}", "", f"Time per broker (the sum of its cases): {times}.", "",
                  "| scenario | " + " | ".join(title(b) for b in cols) + " |",
                  "|---|" + "---|" * len(cols)]
        for scenario in sorted({r.scenario for r in rows}, key=lambda s: (_min_line(rows, s), s)):
            cells = [_cell([r for r in rows if r.scenario == scenario and r.broker == b],
                           cell_of, notes) for b in cols]
            lines.append(f"| {scenario} | " + " | ".join(cells) + " |")
        lines.append("")
    if notes.items:
        lines += ["## Notes", ""]
        lines += [f"{i}. {_one_line(text)}" for i, text in enumerate(notes.items, 1)]
        lines.append("")
    return "\n".join(lines)


def _min_line(rows: list[Result], scenario: str) -> int:
    return min((r.line for r in rows if r.scenario == scenario), default=0)


class _Notes:
    """Numbered reasons, shared by the whole matrix: the same reason has one number."""

    def __init__(self) -> None:
        self.items: list[str] = []

    def number(self, r: Result) -> int:
        text = NOTE_PREFIX.get(r.outcome, "") + (r.reason or r.outcome)
        if text not in self.items:
            self.items.append(text)
        return self.items.index(text) + 1


def _behind_kafka(r: Result, cell_of: dict) -> bool:
    """A Trafka case that does not pass where its Kafka case passes."""
    ref = REFERENCE.get(r.broker)
    if ref is None or r.outcome == "pass":
        return False
    other = cell_of.get((r.scenario, r.client, ref))
    return other is not None and other.outcome == "pass"


def _cell(rows: list[Result], cell_of: dict, notes: _Notes) -> str:
    if not rows:
        return ""
    rows = sorted(rows, key=lambda r: _client_key(r.client))
    n = len(rows)
    passed = [r for r in rows if r.outcome == "pass"]
    parts = []
    if passed:
        parts.append(f"pass ({len(passed)}/{n})" if n > 1 else "pass")
    groups: dict[tuple, list[Result]] = {}
    for r in rows:
        if r.outcome != "pass":
            key = (ORDER[r.outcome], r.outcome, notes.number(r), _behind_kafka(r, cell_of))
            groups.setdefault(key, []).append(r)
    for (_, outcome, note, behind), members in sorted(groups.items()):
        label = LABEL[outcome] + (" ⚠" if behind else "")
        if n == 1:
            parts.append(f"{label} [{note}]")
        elif len(members) == n:
            parts.append(f"{label} ({n}/{n}) [{note}]")
        else:
            parts.append(f"{', '.join(r.client for r in members)}: {label} [{note}]")
    return " · ".join(parts)


def _broker_table(brokers: list[str], merged: list[Result], peers: dict) -> list[str]:
    kinds = [k for k in ORDER if any(r.outcome == k for r in merged)]
    kinds.sort(key=lambda k: (k != "pass", ORDER[k]))
    lines = ["| | " + " | ".join(title(b) for b in brokers) + " |",
             "|---|" + "---:|" * len(brokers)]
    for k in kinds:
        counts = [sum(1 for r in merged if r.broker == b and r.outcome == k) for b in brokers]
        name = "**fail**" if k == "fail" else k
        lines.append(f"| {name} | " + " | ".join(str(c) for c in counts) + " |")
    lines.append("| cases | " + " | ".join(str(sum(1 for r in merged if r.broker == b))
                                          for b in brokers) + " |")
    lines.append("| time (s) | " + " | ".join(
        f"{sum(r.duration_s for r in merged if r.broker == b):.0f}" for b in brokers) + " |")
    lines.append("")
    lines += [f"- {title(b)}: {BROKER_DESCRIPTION[b]}" for b in brokers if b in BROKER_DESCRIPTION]
    lines.append("")
    return lines


def _peer_lines(peers: dict) -> list[str]:
    lines = []
    for kind, data in peers.items():
        dates = sorted({r.date for r in data["results"] if r.date})
        when = dates[0] if len(dates) == 1 else (f"{dates[0]} to {dates[-1]}" if dates else "?")
        version = f", {data['version']}" if data.get("version") else ""
        lines.append(f"The {title(kind)} column is not from this run: it is the results of "
                     f"{when}{version}, kept in `compat_tests/peer_results/{kind}.json`; "
                     f"`{data.get('command', PEER_REFRESH_COMMAND)}` refreshes it.")
    return lines + ([""] if lines else [])


def _regressions(merged: list[Result], cell_of: dict, notes: _Notes) -> list[str]:
    behind = sorted((r for r in merged if _behind_kafka(r, cell_of)),
                    key=lambda r: (r.file, r.line, r.scenario, _client_key(r.client)))
    kafka_fails = sorted((r for r in merged if r.broker in REFERENCE.values() and r.outcome == "fail"),
                         key=lambda r: (r.file, r.line, r.scenario, _client_key(r.client)))
    lines = []
    if any(r.broker in REFERENCE for r in merged):
        if behind:
            lines += [f"**⚠ Passes on Kafka, not on Trafka ({len(behind)}):** "
                      + "; ".join(f"{r.scenario} / {r.client} on {title(r.broker)}: "
                                  f"{r.outcome} [{notes.number(r)}]" for r in behind), ""]
        elif any(r.broker in REFERENCE.values() for r in merged):
            lines += ["Every case that passes on Kafka passes on Trafka.", ""]
    if kafka_fails:
        lines += [f"**Fails on Kafka itself ({len(kafka_fails)}), so the scenario or the harness is "
                  "wrong:** " + "; ".join(f"{r.scenario} / {r.client} on {title(r.broker)} "
                                          f"[{notes.number(r)}]" for r in kafka_fails), ""]
    return lines


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


# --------------------------------------------------------------------------- command line

DOCS_PAGE = HERE.parent / "docs" / "compatibility" / "matrix.md"
DOCS_DATA = DOCS_PAGE.with_name("report.json")
PAGE_NOTE = ("<!-- Generated by `python -m compat_tests.report --docs` from docs/compatibility/report.json "
             "(a run's compat_tests/report.json)\n     and compat_tests/peer_results/. Do not edit by hand: "
             "tests/compat/test_matrix_page.py fails when this page drifts. -->")


def render_from_data(data: dict) -> str:
    """The matrix of one run's report.json contents with the kept peer results as columns."""
    results = [Result.from_dict(r) for r in data["results"]]
    peers = load_peer_results(skip={r.broker for r in results})
    return render_markdown(results, peers, generated=data.get("generated", ""), elapsed_s=data.get("elapsed_s"))


def render_page(data: dict) -> str:
    """The documentation page: the matrix, marked as generated, with where its data came from.
    Needs the run's own date ("generated"), so the same data always renders the same page."""
    if not data.get("generated"):
        raise ValueError("report.json has no 'generated' date")
    title, _, rest = render_from_data(data).partition("\n")
    intro = ("What the scenarios of `compat_tests/` (the same steps through every stock client) "
             "gave on each broker in the run recorded in `docs/compatibility/report.json`. "
             "How the suite works and how to run it: [Compatibility](index.md).")
    return f"{title}\n\n{PAGE_NOTE}\n\n{intro}\n{rest}"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m compat_tests.report",
        description="Render compat_tests/report.md again from report.json (the last run) and "
        "the kept peer results (compat_tests/peer_results/); --docs/--check: the documentation's "
        "matrix page.")
    parser.add_argument("--json", type=Path, default=HERE / "report.json",
                        help="the run's results (default: compat_tests/report.json)")
    parser.add_argument("--docs", action="store_true",
                        help="commit this run to the documentation: copy --json to "
                        "docs/compatibility/report.json and render docs/compatibility/matrix.md from it")
    parser.add_argument("--check", action="store_true",
                        help="exit 1 when docs/compatibility/matrix.md is not what "
                        "docs/compatibility/report.json renders (writes nothing)")
    parser.add_argument("--merge", nargs="+", type=Path, metavar="PART_JSON",
                        help="make report.json and report.md from the report-<part>.json of a run "
                        "split into parts (COMPAT_PART), and print the matrix")
    args = parser.parse_args(argv)
    if args.merge:
        data = merge_parts(args.merge)
        (HERE / "report.json").write_text(json.dumps(data, indent=1) + "\n")
        markdown = render_from_data(data)
        (HERE / "report.md").write_text(markdown)
        print(markdown)
        print(f"wrote {HERE / 'report.json'} and {HERE / 'report.md'} from {len(args.merge)} parts")
        return 0
    if args.check:
        page = render_page(json.loads(DOCS_DATA.read_text()))
        if not DOCS_PAGE.exists() or DOCS_PAGE.read_text() != page:
            print(f"{DOCS_PAGE} is stale: run python -m compat_tests.report --docs "
                  f"--json {DOCS_DATA.relative_to(HERE.parent)}", file=sys.stderr)
            return 1
        return 0
    raw = args.json.read_text()
    data = json.loads(raw)
    if args.docs:
        if args.json.resolve() != DOCS_DATA.resolve():
            DOCS_DATA.write_text(raw)
        DOCS_PAGE.write_text(render_page(data))
        print(f"wrote {DOCS_PAGE} from {DOCS_DATA}")
        return 0
    (HERE / "report.md").write_text(render_from_data(data))
    print(f"wrote {HERE / 'report.md'}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
