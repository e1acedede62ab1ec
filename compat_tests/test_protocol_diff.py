"""The protocol-level differential: every API version Kafka and Trafka both serve, valid and
hostile requests, answers compared field by field (compat_tests/protocol_diff/).

Runs when the suite's brokers include both `kafka` and `trafka` (CI's default), against a
fresh pair of its own, and writes compat_tests/protocol_differences.md / .json. Fails on
any difference not on compat_tests/protocol_diff/allowlist.py, listing them.
"""

from __future__ import annotations

import pytest

from compat_tests.brokers import BrokerFailed, BrokerUnavailable
from compat_tests.protocol_diff import report
from compat_tests.protocol_diff.run import run_differential
from compat_tests.protocol_diff.runner import BrokerDied

# The run is one test: brokers start once, then a few thousand request pairs.
TIMEOUT_S = 900


def _kinds(config: pytest.Config) -> set[str]:
    return {k.strip() for k in config.getoption("--broker").split(",") if k.strip()}


@pytest.mark.timeout(TIMEOUT_S)
def test_protocol_differences(request: pytest.FixtureRequest, tmp_path) -> None:
    kinds = _kinds(request.config)
    if not {"kafka", "trafka"} <= kinds:
        pytest.skip("the protocol differential needs both --broker kafka and trafka")
    try:
        summary = run_differential("kafka", tmp_path)
    except BrokerUnavailable as exc:
        pytest.skip(str(exc))
    except (BrokerFailed, BrokerDied) as exc:
        pytest.fail(str(exc), pytrace=False)
    assert summary["pairs"] > 0
    if summary["open_differences"]:
        lines = [f"{summary['open_differences']} differences not on the allow-list "
                 f"({len(summary['differences'])} groups; report: {report.MARKDOWN}):"]
        for group in summary["differences"][:40]:
            ex = group["examples"][0]
            lines.append(f"  {group['api_name']} {group['path']} x{group['count']}: "
                         f"v{ex['version']} {ex['variant']}: Kafka {ex['kafka']} / Trafka {ex['trafka']}")
        pytest.fail("\n".join(lines), pytrace=False)
