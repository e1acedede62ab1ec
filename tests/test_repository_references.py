"""Source files point only inside the repository, and their pointers into docs/design resolve.

Why: a clone has nothing beside it, so a comment that justifies a rule by a document outside
the repository (a sibling directory, a notes file of some session) or by an issue number of a
tracker the reader cannot see tells a newcomer nothing. What the code relies on is written in
docs/design/ in the project's own words, and code points at a section there
(`docs/design/replication.md#high-watermark`); this test fails when a pointer names a page
or a heading that does not exist, so a renamed heading cannot leave dangling pointers.

The files checked are the tracked ones (`git ls-files`) that hold code, configuration or
prose: *.py, *.toml, *.sh, *.md and .ci/run.
"""

from __future__ import annotations

import pathlib
import re
import subprocess
import unicodedata

import pytest

ROOT = pathlib.Path(__file__).resolve().parent.parent
THIS = pathlib.Path(__file__).resolve().relative_to(ROOT).as_posix()
DESIGN = "docs/design"

# Built from parts so that this file does not match itself.
OUTSIDE_NAMES = ["CLUSTER", "CLIENTS", "PERF", "STYLE"]
OUTSIDE = re.compile(
    r"\.\./" + "shared"
    + r"|\b(?:" + "|".join(OUTSIDE_NAMES) + r")\.md\b"
    + r"|(?<![\w.~-])/" + "work/"  # the workspace a checkout sits in on the development machine
)
# The word followed by a number ("Issue", "issues", "issue #N"): a number in some tracker.
# Another project's public issue is cited as owner/repo#N, which this does not match.
ISSUE = re.compile(r"\b[Ii]ssues?\s+#?\d+\b")
POINTER = re.compile(r"docs/design/([A-Za-z0-9_.-]+\.md)(?:#([A-Za-z0-9_-]+))?")
HEADING = re.compile(r"^(#{1,6})\s+(.+?)\s*#*\s*$")
FENCE = re.compile(r"^\s*(```|~~~)")


def tracked_files() -> list[str]:
    listing = subprocess.run(["git", "ls-files", "-z"], cwd=ROOT, check=True, capture_output=True).stdout
    names = [name for name in listing.decode().split("\0") if name]
    return [
        name for name in names
        if name.endswith((".py", ".toml", ".sh", ".md")) or name == ".ci/run"
    ]


def slugify(text: str) -> str:
    """A heading's anchor as MkDocs makes it (Python-Markdown's toc extension, default
    slugify): inline code marks dropped, accents folded, punctuation removed, lower case,
    runs of spaces and hyphens made one hyphen."""
    text = re.sub(r"`([^`]*)`", r"\1", text)
    text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", text)
    text = unicodedata.normalize("NFKD", text).encode("ascii", "ignore").decode("ascii")
    text = re.sub(r"[^\w\s-]", "", text).strip().lower()
    return re.sub(r"[-\s]+", "-", text)


def anchors(markdown: str) -> set[str]:
    """The anchors of a page's headings, numbered -1, -2 ... when a heading repeats, as the
    toc extension numbers them; headings inside fenced code are not headings."""
    seen: set[str] = set()
    in_fence = False
    for line in markdown.splitlines():
        if FENCE.match(line):
            in_fence = not in_fence
            continue
        match = None if in_fence else HEADING.match(line)
        if match:
            slug = slugify(match.group(2))
            candidate, n = slug, 0
            while candidate in seen:
                n += 1
                candidate = f"{slug}_{n}"
            seen.add(candidate)
    return seen


def read(name: str) -> str:
    return (ROOT / name).read_text(encoding="utf-8", errors="replace")


def offending_lines(pattern: re.Pattern, skip: set[str]) -> list[str]:
    found = []
    for name in tracked_files():
        if name in skip:
            continue
        for number, line in enumerate(read(name).splitlines(), 1):
            if pattern.search(line):
                found.append(f"{name}:{number}: {line.strip()[:120]}")
    return found


def test_the_patterns_catch_what_they_are_for():
    """The checks below can fail: each pattern matches the forms it exists to catch and
    leaves alone what is fine."""
    bad_outside = ["see ../" + "shared/notes", "(CLUSTER" + ".md §4.7)", "PERF" + ".md: copies",
                   'default="/' + 'work/main/.cache/x.jar"']
    for text in bad_outside:
        assert OUTSIDE.search(text), text
    assert not OUTSIDE.search("docs/design/replication.md#high-watermark")
    assert not OUTSIDE.search("bench/work/x and .cache/work/y")
    n = 21  # kept out of the literals, so that a plain grep of the tree finds none either
    for text in [f"(issue {n})", f"Issue {n}: partitions", f"issues 5 and {n}", f"issue #{n}00"]:
        assert ISSUE.search(text), text
    assert not ISSUE.search("confluentinc/librdkafka#1700 is still open")
    assert slugify("Acknowledgements and minimum ISR") == "acknowledgements-and-minimum-isr"
    assert slugify("Leader epochs and truncation") == "leader-epochs-and-truncation"
    assert slugify("Socket reads of 64 KiB") == "socket-reads-of-64-kib"
    assert anchors("# A\n```\n# not a heading\n```\n## A\n") == {"a", "a_1"}


def test_no_file_points_outside_the_repository():
    found = offending_lines(OUTSIDE, skip={THIS})
    assert not found, "files that point at documents outside the repository:\n" + "\n".join(found)


def test_no_file_names_an_issue_number():
    found = offending_lines(ISSUE, skip={THIS})
    assert not found, "say what the work is about instead of its issue number:\n" + "\n".join(found)


def pointers() -> list[tuple[str, int, str, str | None]]:
    found = []
    for name in tracked_files():
        if name == THIS:
            continue
        for number, line in enumerate(read(name).splitlines(), 1):
            for match in POINTER.finditer(line):
                found.append((name, number, match.group(1), match.group(2)))
    return found


def test_code_points_into_docs_design():
    """The pointers exist at all: the code's reasons moved into docs/design, and a change
    that silently dropped every pointer would make the resolution test below vacuous."""
    assert len(pointers()) >= 30


@pytest.mark.parametrize("page", sorted(p.name for p in (ROOT / DESIGN).glob("*.md")))
def test_design_pages_have_unique_headings(page):
    """Every heading of a design page has an anchor of its own: a repeated heading would get
    a numbered anchor that changes when another heading is added above it."""
    slugs = [a for a in anchors(read(f"{DESIGN}/{page}")) if not re.search(r"_\d+$", a)]
    assert len(slugs) == len(anchors(read(f"{DESIGN}/{page}"))), f"{page} repeats a heading"


def test_every_pointer_into_docs_design_resolves():
    missing = []
    cache: dict[str, set[str]] = {}
    for name, number, page, anchor in pointers():
        path = ROOT / DESIGN / page
        if not path.is_file():
            missing.append(f"{name}:{number}: no page {DESIGN}/{page}")
            continue
        if anchor is None:
            continue
        if page not in cache:
            cache[page] = anchors(read(f"{DESIGN}/{page}"))
        if anchor not in cache[page]:
            missing.append(f"{name}:{number}: {DESIGN}/{page} has no heading #{anchor}")
    assert not missing, "pointers into docs/design that do not resolve:\n" + "\n".join(missing)


def test_links_between_design_pages_resolve():
    """Relative links inside docs/design (`[x](clients.md#quirks)`, `[x](#high-watermark)`,
    `[x](../protocol-versions.md)`) name files under docs/ and headings that exist, as
    `mkdocs build --strict` will demand."""
    docs = ROOT / "docs"
    missing = []
    for page in sorted((ROOT / DESIGN).glob("*.md")):
        for target, anchor in re.findall(r"\]\(([^)#\s]*)(?:#([^)\s]+))?\)", page.read_text(encoding="utf-8")):
            if re.match(r"[a-z]+:", target):
                continue  # an absolute URL
            resolved = (page.parent / target).resolve() if target else page
            if docs not in resolved.parents or not resolved.is_file():
                missing.append(f"{page.name}: link to {target} leaves docs/ or does not exist")
                continue
            if anchor and anchor not in anchors(resolved.read_text(encoding="utf-8")):
                missing.append(f"{page.name}: {target or page.name} has no heading #{anchor}")
    assert not missing, "\n".join(missing)
