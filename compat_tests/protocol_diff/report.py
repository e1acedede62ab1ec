"""The differential report: compat_tests/protocol_differences.md and .json (generated, ignored
by git; CI writes them on every run of the compatibility suite).

It says how many request/response pairs were compared per API, lists every difference not
on the allow-list (api, version, request variant, field path, Kafka's value, Trafka's), and
every allow-list entry used, with its reason and how many differences it explained. Many
differences share one cause (a missing partition shows in every case that reads it), so
they are grouped by API and field path with the number of occurrences and examples.
"""

from __future__ import annotations

import json
import re
import time
from collections import Counter, defaultdict
from pathlib import Path
from typing import Any

from compat_tests.protocol_diff import allowlist, normalise
from compat_tests.protocol_diff.runner import RunResult
from wire.registry import api_name

HERE = Path(__file__).resolve().parent.parent
MARKDOWN = HERE / "protocol_differences.md"
JSON = HERE / "protocol_differences.json"
EXAMPLES = 3
JSON_EXAMPLES = 20
VALUE_CHARS = 160

# APIs one broker advertises and the other does not, and why (for the report).
WHY_NOT_COMPARED = {
    4: "LeaderAndIsr: a ZooKeeper-mode controller-to-broker request; Kafka's KRaft brokers do not expose it",
    5: "StopReplica: ZooKeeper-mode controller-to-broker; not exposed by KRaft brokers",
    6: "UpdateMetadata: ZooKeeper-mode controller-to-broker; not exposed by KRaft brokers",
    7: "ControlledShutdown: ZooKeeper-mode broker-to-controller; KRaft brokers use BrokerHeartbeat",
    56: "AlterPartition: leader-to-controller; a KRaft broker sends it to the controller quorum, "
        "its client listener does not serve it",
}


def reference_api_names(module: str) -> dict[int, str]:
    """API names as the reference broker's own kafka-clients jar spells them (for the APIs
    Trafka's registry has no name for); {} when the jar is not there."""
    import glob
    import zipfile

    from compat_tests import jvm

    names: dict[int, str] = {}
    for jar in glob.glob(str(jvm.JVM_DIR / module / "kafka-clients-*.jar")):
        with zipfile.ZipFile(jar) as z:
            for entry in z.namelist():
                if entry.startswith("common/message/") and entry.endswith("Request.json"):
                    text = "\n".join(line for line in z.read(entry).decode().splitlines()
                                     if not line.strip().startswith("//"))
                    try:
                        schema = json.loads(text)
                    except ValueError:
                        continue
                    names[schema["apiKey"]] = schema["name"].removesuffix("Request")
    return names


def _short(value: Any) -> str:
    text = json.dumps(value, default=str, sort_keys=False)
    text = re.sub(r"([a-zA-Z])\1{19,}", lambda m: f"{m.group(1) * 3}…({len(m.group(0))})", text)
    return text if len(text) <= VALUE_CHARS else text[:VALUE_CHARS] + "…"


def _pattern(path: str) -> str:
    return re.sub(r"\[\d+\]", "[]", _short(path).strip('"'))


def summarise(result: RunResult, reference: str, entries: list[allowlist.Allowed] | None = None) -> dict:
    entries = allowlist.ENTRIES if entries is None else entries
    per_api: dict[int, Counter] = defaultdict(Counter)
    open_groups: dict[tuple[int, str], list] = defaultdict(list)
    used: dict[str, list] = defaultdict(list)
    for pair in result.pairs:
        kind = pair.variant.split(":", 1)[0]
        c = per_api[pair.api_key]
        c["pairs"] += 1
        c[kind] += 1
        if pair.differences:
            c["pairs with differences"] += 1
        for diff in pair.differences:
            open_groups[(pair.api_key, _pattern(diff.path))].append((pair, diff))
        for diff, entry_id in pair.allowed:
            used[entry_id].append((pair, diff))
    known = allowlist.by_id(entries)

    def example(pair, diff, chars=True):
        return {"api": pair.api_key, "api_name": api_name(pair.api_key), "version": pair.version,
                "variant": pair.variant, "path": diff.path,
                "kafka": _short(diff.kafka) if chars else diff.kafka,
                "trafka": _short(diff.trafka) if chars else diff.trafka}

    differences = [{"api": api, "api_name": api_name(api), "path": path, "count": len(items),
                    "versions": sorted({p.version for p, _d in items}),
                    "examples": [example(p, d) for p, d in items[:JSON_EXAMPLES]]}
                   for (api, path), items in sorted(open_groups.items())]
    allowed = [{"id": eid, "kind": known[eid].kind, "reason": known[eid].reason, "count": len(items),
                "apis": sorted({api_name(p.api_key) for p, _d in items}),
                "examples": [example(p, d) for p, d in items[:JSON_EXAMPLES]]}
               for eid, items in sorted(used.items(), key=lambda kv: (known[kv[0]].kind, kv[0]))]
    unused = [e.id for e in entries if e.id not in used]
    k, t = result.kafka_versions, result.trafka_versions
    reference_names = reference_api_names("kafka" if reference == "kafka" else reference)
    only = []
    for key in sorted(set(k) | set(t)):
        if key in result.versions:
            continue
        who = "Kafka only" if key not in t else "Trafka only" if key not in k else "both"
        why = WHY_NOT_COMPARED.get(key, "no version both serve that our schemas describe" if who == "both"
                                   else "not served by Trafka" if who == "Kafka only" else "")
        name = api_name(key)
        if name.startswith("API_") and key in reference_names:
            name = reference_names[key]
        only.append({"api": key, "api_name": name, "advertised_by": who, "kafka": k.get(key),
                     "trafka": t.get(key), "why": why})
    return {
        "generated": time.strftime("%Y-%m-%d %H:%M:%S %Z"),
        "reference": reference,
        "seconds": round(result.seconds, 1),
        "pairs": len(result.pairs),
        "pairs_with_open_differences": sum(1 for p in result.pairs if p.differences),
        "open_differences": sum(len(p.differences) for p in result.pairs),
        "allowed_differences": sum(len(p.allowed) for p in result.pairs),
        "open_entries_used": sorted({e for p in result.pairs for _d, e in p.allowed if known[e].kind == "open"}),
        "compared_versions": {api_name(a): list(v) for a, v in result.versions.items()},
        "per_api": {api_name(a): dict(c) for a, c in sorted(per_api.items())},
        "not_compared": only,
        "not_sent": [{"api": api_name(a), "version": v, "variant": var, "why": why}
                     for a, v, var, why in result.not_sent],
        "normalisation": {rule: normalise.RULES[rule] for rule in sorted(result.rules_used)},
        "differences": differences,
        "allowed": allowed,
        "unused_allow_entries": unused,
    }


def markdown(summary: dict) -> str:
    out = [f"# Protocol differences: Apache Kafka ({summary['reference']}) vs Trafka", "",
           f"Generated {summary['generated']} by `python -m compat_tests.protocol_diff` "
           f"(compat_tests/test_protocol_diff.py in CI); {summary['seconds']} s.", "",
           f"**{summary['pairs']} request/response pairs compared**; "
           f"{summary['open_differences']} differences not on the allow-list "
           f"(in {summary['pairs_with_open_differences']} pairs); "
           f"{summary['allowed_differences']} allow-listed.", "",
           "## Pairs per API", "",
           "| API | versions | pairs | valid | prep | hostile | unsupported version | with open differences |",
           "|---|---|---:|---:|---:|---:|---:|---:|"]
    for name, counts in summary["per_api"].items():
        versions = summary["compared_versions"].get(name)
        unsupported = counts.get("too-new-version", 0) + counts.get("too-old-version", 0)
        out.append(f"| {name} | {versions[0]}-{versions[1] if versions else ''} | {counts['pairs']} | "
                   f"{counts.get('valid', 0)} | {counts.get('prep', 0)} | {counts.get('hostile', 0)} | "
                   f"{unsupported} | {counts.get('pairs with differences', 0)} |")
    out += ["", "## Differences not on the allow-list", ""]
    if not summary["differences"]:
        out.append("None.")
    for group in summary["differences"]:
        out.append(f"### {group['api_name']} `{group['path']}` ({group['count']}, versions "
                   f"{_ranges(group['versions'])})")
        out.append("")
        out.append("| version | variant | Kafka | Trafka |")
        out.append("|---|---|---|---|")
        for ex in group["examples"][:EXAMPLES]:
            out.append(f"| {ex['version']} | `{_md(ex['variant'])}` | `{_md(ex['kafka'])}` | `{_md(ex['trafka'])}` |")
        out.append("")
    opened = [e for e in summary["allowed"] if e["kind"] == "open"]
    out += ["## Open: differences not fixed yet (allow-listed as `open`)", ""]
    if not opened:
        out.append("None.")
    for entry in opened:
        out.append(f"- `{entry['id']}` ({entry['count']} differences; {', '.join(entry['apis'])}): "
                   f"{_md(entry['reason'])}")
        for ex in entry["examples"][:EXAMPLES]:
            out.append(f"  - {ex['api_name']} v{ex['version']} `{_md(ex['variant'])}` `{_md(ex['path'])}`: "
                       f"Kafka `{_md(ex['kafka'])}`, Trafka `{_md(ex['trafka'])}`")
    out += ["", "## Allow-listed differences", "", "| entry | kind | count | APIs | reason | example |",
            "|---|---|---:|---|---|---|"]
    for entry in summary["allowed"]:
        if entry["kind"] == "open":
            continue
        ex = entry["examples"][0] if entry["examples"] else None
        example = (f"{ex['api_name']} v{ex['version']} `{_md(ex['variant'])}` `{_md(ex['path'])}`: "
                   f"Kafka `{_md(ex['kafka'])}`, Trafka `{_md(ex['trafka'])}`") if ex else ""
        out.append(f"| `{entry['id']}` | {entry['kind']} | {entry['count']} | {', '.join(entry['apis'])} | "
                   f"{_md(entry['reason'])} | {example} |")
    if summary["unused_allow_entries"]:
        out += ["", "Allow-list entries that matched nothing this run: "
                + ", ".join(f"`{e}`" for e in summary["unused_allow_entries"])]
    out += ["", "## Normalisation (what is made equal before comparing, and why)", ""]
    for rule, why in summary["normalisation"].items():
        out.append(f"- **{rule}**: {why}")
    out += ["", "## APIs not compared", "",
            "Only the versions both brokers advertise and Trafka's Kafka 3.9.2 schemas describe are compared.", "",
            "| API | advertised by | Kafka | Trafka | why |", "|---|---|---|---|---|"]
    for row in summary["not_compared"]:
        out.append(f"| {row['api']} {row['api_name']} | {row['advertised_by']} | {row['kafka']} | {row['trafka']} | "
                   f"{row['why']} |")
    if summary["not_sent"]:
        out += ["", "## Variants not sent (the body does not encode at that version)", ""]
        for row in summary["not_sent"][:50]:
            out.append(f"- {row['api']} v{row['version']} `{row['variant']}`: {row['why']}")
    return "\n".join(out) + "\n"


def _md(text: str) -> str:
    return str(text).replace("|", "\\|").replace("`", "'")


def _ranges(versions: list[int]) -> str:
    if not versions:
        return ""
    out, start, prev = [], versions[0], versions[0]
    for v in versions[1:] + [None]:
        if v is not None and v == prev + 1:
            prev = v
            continue
        out.append(f"{start}" if start == prev else f"{start}-{prev}")
        if v is not None:
            start = prev = v
    return ", ".join(out)


def default_path(reference: str) -> Path:
    """compat_tests/protocol_differences.md for Kafka 4.x, ...-kafka-3.9.md for 3.9."""
    return MARKDOWN if reference == "kafka" else MARKDOWN.with_name(f"protocol_differences-{reference}.md")


def write(summary: dict, markdown_path: Path = MARKDOWN, json_path: Path = JSON) -> None:
    markdown_path.write_text(markdown(summary))
    json_path.write_text(json.dumps(summary, indent=1, default=str) + "\n")
