"""The compatibility matrix (compat_tests/report.py): brokers as columns with Kafka first, a
case that passes on Kafka and not on Trafka standing out, and the kept Tansu column."""

from __future__ import annotations

import json

from compat_tests import report
from compat_tests.report import Result


def _result(scenario, client, broker, outcome="pass", reason="", file="test_x.py", line=10,
            date="2026-01-02"):
    return Result(scenario, client, broker, outcome, reason, 1.5,
                  f"compat_tests/{file}::test_{scenario}[{broker}-{client}]", file, line, date)


def _table(markdown: str, file: str) -> list[list[str]]:
    """The rows of a file's table, as lists of cells (header first)."""
    lines = markdown.splitlines()
    start = lines.index(f"## {file}")
    rows = []
    for line in lines[start + 1:]:
        if line.startswith("## "):
            break
        if line.startswith("|") and not line.startswith("|---"):
            rows.append([c.strip() for c in line.strip("|").split("|")])
    return rows


def test_brokers_are_columns_kafka_first_and_clients_summed_up():
    results = [_result("produce", c, b) for b in ("tansu", "trafka", "kafka")
               for c in ("kafka-python", "java")]
    results += [_result("leaders", c, b, file="test_cluster.py")
                for b in ("trafka-cluster", "kafka-cluster") for c in ("kcat",)]
    results.append(_result("admin", "kcat", "kafka", "skip", "kcat has no API", line=20))
    results.append(_result("admin", "kcat", "trafka", "skip", "kcat has no API", line=20))
    results.append(_result("admin", "java", "kafka", line=20))
    results.append(_result("admin", "java", "trafka", line=20))
    md = report.render_markdown(results)
    table = _table(md, "test_x.py")
    assert table[0] == ["scenario", "Kafka", "Trafka", "Tansu"]
    assert table[1] == ["produce", "pass (2/2)", "pass (2/2)", "pass (2/2)"]
    assert table[2] == ["admin", "pass (1/2) · kcat: skip [1]", "pass (1/2) · kcat: skip [1]", ""]
    assert _table(md, "test_cluster.py") == [["scenario", "Kafka cluster", "Trafka cluster"],
                                             ["leaders", "pass", "pass"]]
    assert md.index("## test_x.py") < md.index("## test_cluster.py")
    assert "1. kcat has no API" in md
    assert "Every case that passes on Kafka passes on Trafka." in md


def test_passes_on_kafka_fails_on_trafka_stands_out():
    results = [_result("produce", "java", "kafka"),
               _result("produce", "java", "trafka", "fail", "AssertionError: got [], expected [0]"),
               _result("produce", "kcat", "kafka", "fail", "AssertionError: harness"),
               _result("produce", "kcat", "trafka", "fail", "AssertionError: harness")]
    md = report.render_markdown(results)
    assert "**⚠ Passes on Kafka, not on Trafka (1):** produce / java on Trafka: fail [1]" in md
    assert "**Fails on Kafka itself (1)" in md
    row = _table(md, "test_x.py")[1]
    assert row[1] == "pass (1/2) · kcat: **FAIL** [2]", row
    assert row[2] == "java: **FAIL** ⚠ [1] · kcat: **FAIL** [2]", row


def test_peer_results_merge_and_show_their_date(tmp_path, monkeypatch):
    monkeypatch.setattr(report, "PEER_RESULTS", tmp_path)
    monkeypatch.setattr(report, "_peer_version", lambda kind: "tansu 0.6.0")
    old = _result("produce", "java", "tansu", "fail", "old", date="2025-12-01")
    gone = _result("renamed_away", "java", "tansu", date="2025-12-01")
    gone.nodeid = "compat_tests/test_admin.py::test_renamed_away_no_such_scenario[tansu-java]"
    (tmp_path / "tansu.json").write_text(json.dumps(
        {"results": [report._json_result(r) for r in (old, gone)]}))
    new = _result("produce", "java", "tansu", date="2026-01-02")
    report.save_peer_results("tansu", [new], collected={new.nodeid})
    data = json.loads((tmp_path / "tansu.json").read_text())
    kept = {r["scenario"]: (r["outcome"], r["date"]) for r in data["results"]}
    # the case that ran replaces its entry; one whose scenario is not defined any more goes
    assert kept == {"produce": ("pass", "2026-01-02")}
    assert data["version"] == "tansu 0.6.0" and data["command"] == report.PEER_REFRESH_COMMAND

    kafka = [_result("produce", "java", "kafka"), _result("consume", "java", "kafka")]
    md = report.render_markdown(kafka, report.load_peer_results())
    assert _table(md, "test_x.py")[0] == ["scenario", "Kafka", "Tansu"]
    assert "results of 2026-01-02, tansu 0.6.0, kept in `compat_tests/peer_results/tansu.json`" in md
    assert f"`{report.PEER_REFRESH_COMMAND}` refreshes it" in md


def test_peer_entries_of_existing_scenarios_are_kept(tmp_path, monkeypatch):
    monkeypatch.setattr(report, "PEER_RESULTS", tmp_path)
    monkeypatch.setattr(report, "_peer_version", lambda kind: "")
    # a real scenario of the suite, not run in this session: its entry stays
    kept = Result("create_and_delete_topic", "java", "tansu", "pass", "", 2.0,
                  "compat_tests/test_admin.py::test_create_and_delete_topic[tansu-java]",
                  "test_admin.py", 13, "2025-12-01")
    (tmp_path / "tansu.json").write_text(json.dumps({"results": [report._json_result(kept)]}))
    new = _result("produce", "java", "tansu")
    report.save_peer_results("tansu", [new], collected={new.nodeid})
    data = json.loads((tmp_path / "tansu.json").read_text())
    assert sorted(r["scenario"] for r in data["results"]) == ["create_and_delete_topic", "produce"]
