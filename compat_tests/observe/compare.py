"""Comparing two normalised logs of the same (scenario, client): the reference broker's and
the broker under test's, stream by stream.

The calls of a stream are aligned by what was called (object, verb, arguments), so one extra
or missing call shows as that call, not as every later call shifted. For aligned calls the
answers (or raised errors) are compared field by field and each differing field is a
`Difference` with its path ("ok.<1>/0[3].timestamp_type"; "ok.<1>/0[7:]" for the items
of a list only one side has). A call that only one broker's run
made is a difference too: the scenario took another path because an earlier answer differed.
"""

from __future__ import annotations

import difflib
import json
from dataclasses import asdict, dataclass
from typing import Any

ABSENT = "<absent>"
MAX_PER_CALL = 8  # differing fields listed per call; the rest are counted
VALUE_CHARS = 300


@dataclass
class Difference:
    pair: str  # "kafka~trafka"
    scenario: str
    client: str
    stream: str
    index: int  # position of the call in the reference's stream (or the other's, if only there)
    obj: str
    verb: str
    path: str  # "" for a whole call; "ok...." / "raised...." / "args..." within it
    reference: str  # the reference broker's value (JSON), or ABSENT
    other: str

    def where(self) -> str:
        return f"{self.stream}[{self.index}] {self.obj}.{self.verb}"

    def as_dict(self) -> dict:
        return asdict(self)


def _show(value: Any) -> str:
    if value is ABSENT:
        return ABSENT
    text = json.dumps(value, sort_keys=True, ensure_ascii=False)
    return text if len(text) <= VALUE_CHARS else text[:VALUE_CHARS - 20] + f"... ({len(text)} chars)"


def deep_diff(a: Any, b: Any, path: str = "") -> list[tuple[str, Any, Any]]:
    """(path, a's value, b's value) of every leaf where a and b differ."""
    if isinstance(a, dict) and isinstance(b, dict):
        out = []
        for key in sorted(set(a) | set(b), key=str):
            sub = f"{path}.{key}" if path else str(key)
            out += deep_diff(a.get(key, ABSENT), b.get(key, ABSENT), sub)
        return out
    if isinstance(a, list) and isinstance(b, list):
        out = []
        for i in range(min(len(a), len(b))):
            out += deep_diff(a[i], b[i], f"{path}[{i}]")
        if len(a) != len(b):  # one difference for the items only one side has
            n = min(len(a), len(b))
            out.append((f"{path}[{n}:]", a[n:] or ABSENT, b[n:] or ABSENT))
        return out
    if a == b and type(a) is type(b):
        return []
    return [(path, a, b)]


def _key(entry: dict) -> str:
    return json.dumps([entry["obj"], entry["verb"], entry["args"], entry.get("kwargs")],
                      sort_keys=True)


def _outcome(entry: dict) -> dict:
    return {k: entry[k] for k in ("ok", "raised") if k in entry}


def compare_streams(reference: dict[str, list[dict]], other: dict[str, list[dict]], *,
                    pair: str, scenario: str, client: str) -> tuple[list[Difference], int]:
    """The differences, and how many calls were compared (aligned pairs)."""
    diffs: list[Difference] = []
    compared = 0

    def add(stream: str, index: int, entry: dict, path: str, a: Any, b: Any) -> None:
        diffs.append(Difference(pair, scenario, client, stream, index, entry["obj"],
                                entry["verb"], path, _show(a), _show(b)))

    for stream in list(reference) + [s for s in other if s not in reference]:
        ref = reference.get(stream, [])
        oth = other.get(stream, [])
        matcher = difflib.SequenceMatcher(None, [_key(e) for e in ref], [_key(e) for e in oth],
                                          autojunk=False)
        for op, i1, i2, j1, j2 in matcher.get_opcodes():
            if op == "equal":
                for i, j in zip(range(i1, i2), range(j1, j2)):
                    compared += 1
                    found = deep_diff(_outcome(ref[i]), _outcome(oth[j]))
                    for path, a, b in found[:MAX_PER_CALL]:
                        add(stream, i, ref[i], path, a, b)
                    if len(found) > MAX_PER_CALL:
                        add(stream, i, ref[i], "(more fields)", f"{len(found) - MAX_PER_CALL} more",
                            "differ")
                continue
            # A replaced run: calls of the same object and verb in the same place differ in
            # their arguments (an earlier answer differed); anything else was made on one side.
            paired = 0
            while (i1 + paired < i2 and j1 + paired < j2
                   and ref[i1 + paired]["obj"] == oth[j1 + paired]["obj"]
                   and ref[i1 + paired]["verb"] == oth[j1 + paired]["verb"]):
                i, j = i1 + paired, j1 + paired
                compared += 1
                found = deep_diff({"args": ref[i]["args"], "kwargs": ref[i].get("kwargs"),
                                   **_outcome(ref[i])},
                                  {"args": oth[j]["args"], "kwargs": oth[j].get("kwargs"),
                                   **_outcome(oth[j])})
                for path, a, b in found[:MAX_PER_CALL]:
                    add(stream, i, ref[i], path, a, b)
                if len(found) > MAX_PER_CALL:
                    add(stream, i, ref[i], "(more fields)", f"{len(found) - MAX_PER_CALL} more",
                        "differ")
                paired += 1
            for i in range(i1 + paired, i2):
                add(stream, i, ref[i], "", ref[i], ABSENT)
            for j in range(j1 + paired, j2):
                add(stream, j, oth[j], "", ABSENT, oth[j])
    return diffs, compared
