"""Which part of a split run this session is.

.ci/run runs compat_tests as two pytest processes side by side (COMPAT_PART=a and b, a
disjoint set of files each): the suite mostly waits on brokers and JVMs, so on two cores
the parts take about the time of the longer one. A scenario's Kafka and Trafka runs stay in
one part (parts split by file), so each part's differential check is whole; each part
writes its own outputs (report-<part>.json, differences-<part>.md, observations-<part>/),
and `python -m compat_tests.report --merge` makes the run's matrix of the parts'.
"""

from __future__ import annotations

import os


def part_suffix() -> str:
    """"-<part>" in a part of a split run (COMPAT_PART), "" in a whole run."""
    part = os.environ.get("COMPAT_PART", "").strip()
    return f"-{part}" if part else ""
