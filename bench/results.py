"""What the side-by-side benchmarks share: their command-line lists and their JSONL results.

`run_matrix.py` and `capacity.py` both take per-size message counts and comma lists, append
one JSON object per run to a file, and can re-print a summary from such files later.
"""

from __future__ import annotations

import json


def csv(text: str) -> list[str]:
    """'a, b,,c' -> ['a', 'b', 'c']."""
    return [x.strip() for x in text.split(",") if x.strip()]


def parse_messages(text: str) -> dict[int, int]:
    """'100=3000000,1024=1000000' -> {100: 3000000, 1024: 1000000}."""
    out = {}
    for item in csv(text):
        size, n = item.split("=")
        out[int(size)] = int(n)
    return out


def load(paths: list[str]) -> list[dict]:
    """Every run recorded in the given JSONL files, in order."""
    out = []
    for path in paths:
        with open(path) as f:
            out += [json.loads(line) for line in f if line.strip()]
    return out
