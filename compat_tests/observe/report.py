"""The differential report: compat_tests/differences.md for people, differences.json for tools,
and the text the failing generated test prints."""

from __future__ import annotations

import json
import time
from collections import Counter
from pathlib import Path

from compat_tests.observe import normalise
from compat_tests.observe.verdict import Verdict


def _cell(text: str, limit: int = 160) -> str:
    text = " ".join(str(text).split()).replace("|", "\\|")
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _table(diffs, pair_names: bool) -> list[str]:
    head = "| pair | scenario | client | call | path | reference | other |" if pair_names \
        else "| scenario | client | call | path | reference | other |"
    lines = [head, "|" + "---|" * (head.count("|") - 1)]
    for d in diffs:
        cells = ([d.pair] if pair_names else []) + [d.scenario, d.client, d.where(),
                                                     d.path or "(whole call)", d.reference, d.other]
        lines.append("| " + " | ".join(_cell(c) for c in cells) + " |")
    return lines


def render_markdown(verdict: Verdict, started: float) -> str:
    c = verdict.counts()
    pairs = sorted({r.pair for r in verdict.results})
    lines = [
        "# Observed answers: the reference broker beside the broker under test", "",
        f"Generated {time.strftime('%Y-%m-%d %H:%M:%S')} by `compat_tests` "
        f"({time.time() - started:.0f} s into the session); pairs: {', '.join(pairs) or 'none'} "
        "(reference first). Every verb each scenario called through a client adapter, with its "
        "answer, normalised (rules below) and compared call by call.", "",
        f"- (scenario, client) pairs compared: **{c['pairs_compared']}** "
        f"({c['pairs_both_passed']} passed on both brokers, {c['pairs_with_a_failed_side']} with a "
        f"failed side, {c['pairs_with_nothing_recorded']} that called no adapter verb, e.g. "
        "Spark's); not compared (skipped or an expected failure on a side): "
        f"{c['pairs_not_compared']}; run on one broker only: {c['ran_on_one_broker_only']}",
        f"- calls compared: **{c['calls_compared']}** (of {c['calls_recorded']} recorded on the "
        "two sides)",
        f"- differences: **{c['differences_unexplained']} unexplained**, "
        f"{c['differences_allow_listed']} allow-listed, "
        f"{c['differences_in_pairs_with_a_failed_side']} in pairs with a failed side",
        f"- time the check took (normalising, writing, comparing): {verdict.cost_s:.1f} s", ""]
    lines += ["## Unexplained differences", ""]
    if verdict.unexplained:
        lines += ["Each fails the run: fix Trafka, or add an entry with its reason to "
                  "`compat_tests/observe/allowlist.py`.", ""]
        lines += _table(verdict.unexplained, len(pairs) > 1) + [""]
    else:
        lines += ["None.", ""]
    if verdict.with_failure:
        lines += ["## Differences in pairs where a side failed", "",
                  "The failed test fails the run already; listed to help find why.", ""]
        lines += _table(verdict.with_failure, len(pairs) > 1) + [""]
    lines += ["## Allow-listed differences", ""]
    used: Counter = Counter(entry for _d, entry in verdict.allowed)
    if used:
        lines += ["| entry | differences | reason |", "|---|---|---|"]
        for entry, n in used.items():
            lines.append(f"| {_cell(entry.key())} | {n} | {_cell(entry.reason, 400)} |")
        lines.append("")
    else:
        lines += ["None.", ""]
    unused = [a for a in verdict.allow_list if a not in used]
    if unused:
        lines += ["Entries no difference of this run needed (the run may not have covered their "
                  "scenario): " + "; ".join(f"`{_cell(a.key())}`" for a in unused), ""]
    lines += ["## Normalisation rules", "", "| rule | applied | why |", "|---|---|---|"]
    for rule, why in normalise.RULES.items():
        lines.append(f"| {rule} | {verdict.rules.get(rule, 0)} | {_cell(why, 500)} |")
    not_compared = [r for r in verdict.results if not r.comparable]
    if not_compared:
        lines += ["", "## Not compared", "", "| pair | scenario | client | reference | other |",
                  "|---|---|---|---|---|"]
        for r in sorted(not_compared, key=lambda r: (r.pair, r.scenario, r.client)):
            lines.append(f"| {r.pair} | {_cell(r.scenario)} | {r.client} | {r.reference.outcome} "
                         f"| {r.other.outcome} |")
    return "\n".join(lines) + "\n"


def render_json(verdict: Verdict, started: float) -> dict:
    used: Counter = Counter(entry for _d, entry in verdict.allowed)
    return {
        "generated": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
        "elapsed_s": round(time.time() - started, 1),
        "counts": verdict.counts(),
        "cost_s": round(verdict.cost_s, 2),
        "unexplained": [d.as_dict() for d in verdict.unexplained],
        "in_pairs_with_a_failed_side": [d.as_dict() for d in verdict.with_failure],
        "allow_listed": [{**d.as_dict(), "entry": entry.key(), "reason": entry.reason}
                         for d, entry in verdict.allowed],
        "allow_list_entries_used": [{"entry": e.key(), "reason": e.reason, "differences": n}
                                    for e, n in used.items()],
        "rules": {rule: {"applied": verdict.rules.get(rule, 0), "why": why}
                  for rule, why in normalise.RULES.items()},
        "pairs": [{"pair": r.pair, "scenario": r.scenario, "client": r.client,
                   "outcomes": [r.reference.outcome, r.other.outcome],
                   "calls_compared": r.compared_calls, "differences": len(r.differences),
                   "observations": [str(r.reference.path), str(r.other.path)]}
                  for r in verdict.results],
    }


def write(verdict: Verdict, md: Path, js: Path, started: float) -> None:
    md.write_text(render_markdown(verdict, started))
    js.write_text(json.dumps(render_json(verdict, started), indent=1, ensure_ascii=False) + "\n")


def failure_text(verdict: Verdict, shown: int, md: Path) -> str:
    c = verdict.counts()
    lines = [f"{len(verdict.unexplained)} difference(s) between the brokers' answers that no "
             f"allow-list entry explains ({c['pairs_compared']} (scenario, client) pairs, "
             f"{c['calls_compared']} calls compared; report: {md}):"]
    for d in verdict.unexplained[:shown]:
        lines.append(f"  {d.pair} {d.scenario} [{d.client}] {d.where()} "
                     f"{d.path or '(whole call)'}:\n      reference {d.reference}\n"
                     f"      other     {d.other}")
    if len(verdict.unexplained) > shown:
        lines.append(f"  ... and {len(verdict.unexplained) - shown} more in {md}")
    lines.append("Fix the broker under test, or add an entry with its reason to "
                 "compat_tests/observe/allowlist.py.")
    return "\n".join(lines)
