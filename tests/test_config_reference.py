"""The configuration reference (docs/configuration/reference.md) is generated from the
broker's settings table by `python -m server.config_docs`; this fails when the committed page
is not what the generator makes from today's tables (a setting added, renamed, re-documented or
given another default without regenerating, or the page edited by hand)."""

from __future__ import annotations

import subprocess
import sys

from server.config import SETTINGS
from server.config_docs import REFERENCE, render
from storage.config import TOPIC_CONFIGS
from tests.brokerproc import REPO


def test_the_committed_reference_is_what_the_generator_renders():
    assert REFERENCE == REPO / "docs" / "configuration" / "reference.md"
    assert REFERENCE.read_text() == render(), \
        "docs/configuration/reference.md is stale: run `python -m server.config_docs` and commit it"


def test_every_setting_and_topic_config_has_a_row_with_its_default():
    page = REFERENCE.read_text()
    rows = {line.split("|")[1].strip().strip("`"): line for line in page.splitlines() if line.startswith("| `")}
    assert set(SETTINGS) | set(TOPIC_CONFIGS) <= set(rows)
    assert "| `num.partitions` | INT | `1` |" in rows["num.partitions"]
    assert "| `log.retention.ms` | LONG | (empty) | yes |" in rows["log.retention.ms"]  # null, as Kafka's
    assert "| `log.retention.hours` | INT | `168` |" in rows["log.retention.hours"]


def test_check_mode_fails_on_a_stale_page(tmp_path):
    stale = tmp_path / "reference.md"
    stale.write_text(render().replace("| `num.partitions` | INT | `1` |", "| `num.partitions` | INT | `3` |"))
    check = [sys.executable, "-m", "server.config_docs", "--check", "--output"]
    stale_run = subprocess.run([*check, str(stale)], cwd=REPO, capture_output=True, text=True)
    assert stale_run.returncode == 1 and "is stale" in stale_run.stderr
    assert subprocess.run([*check, str(REFERENCE)], cwd=REPO).returncode == 0
