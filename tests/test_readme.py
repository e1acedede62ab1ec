"""The README is what a newcomer reads first: it stays short (the manual is docs/, built by
`mkdocs build --strict`, which checks the manual's own links but not the README's), every
relative link in it points at a file of the repository, and it states the test command CI runs."""

from __future__ import annotations

import re

from tests.brokerproc import REPO

README = REPO / "README.md"


def test_the_readme_stays_short():
    assert len(README.read_bytes()) <= 12 * 1024, "README.md over 12 KB: move the detail into docs/"


def test_every_relative_link_of_the_readme_exists():
    links = re.findall(r"\]\(([^)\s]+)\)", README.read_text())
    relative = [link.split("#", 1)[0] for link in links if not re.match(r"[a-z]+:", link)]
    assert relative, "the README links into docs/"
    missing = [link for link in relative if not (REPO / link).exists()]
    assert missing == []


def test_the_readme_states_the_ci_test_command_after_the_two_commands():
    text = README.read_text()
    first_block = re.search(r"```sh\n(.*?)```", text, re.S).group(1)
    assert "trafka serve" in first_block and "bash .ci/run" in first_block
    assert "python -m pytest -q tests compat_tests --broker kafka,trafka" in text
    ci = (REPO / ".ci" / "run").read_text()
    assert 'BROKERS="${COMPAT_BROKERS:-kafka,trafka}"' in ci and '-m pytest -q tests compat_tests --broker "$BROKERS"' in ci
    # run by default as three processes side by side: tests/ and compat_tests/ in two parts
    assert "`python -m pytest -q tests`, and `python -m pytest -q compat_tests\n--broker kafka,trafka` in two parts" in text
    assert "half tests tests &" in ci and 'COMPAT_PART=a half compat_tests-a compat_tests "${ignore_b[@]}" --broker "$BROKERS"' in ci
    assert 'COMPAT_PART=b half compat_tests-b "${COMPAT_B[@]}" --broker "$BROKERS"' in ci
