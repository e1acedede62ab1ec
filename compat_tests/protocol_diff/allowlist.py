"""The differences between Kafka and Trafka that are not Trafka bugs, each with its reason.

A difference not matched here fails the run. An entry matches by API (None: any), version
range, the case variant and the field path (regular expressions, matched in full), and
optionally by the two values. `kind` says what sort of reason it is:

- "kafka-version": Kafka 4.4 and Trafka's Kafka 3.9.2 protocol differ by design (newer
  versions, features Kafka 4 added, versions Kafka 4.0 removed that Trafka still serves);
- "kafka-quirk": Kafka's answer is an accident of its implementation (an unhandled
  exception answered UNKNOWN_SERVER_ERROR, a request never answered) that no client relies
  on, and Trafka answers the documented way instead;
- "deliberate": a documented Trafka choice;
- "open": a Trafka difference not fixed yet, kept visible in the report (the lead's list).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, Callable

from compat_tests.protocol_diff.model import Difference, Pair

ANY = object()


@dataclass(frozen=True)
class Allowed:
    id: str
    kind: str
    reason: str
    api: int | None = None
    path: str = r".*"
    variant: str = r".*"
    versions: tuple[int, int] | None = None
    kafka: Any = ANY  # a value, or a predicate on Kafka's value
    trafka: Any = ANY

    def matches(self, pair: Pair, diff: Difference) -> bool:
        if self.api is not None and pair.api_key != self.api:
            return False
        if self.versions is not None and not self.versions[0] <= pair.version <= self.versions[1]:
            return False
        if not re.fullmatch(self.variant, pair.variant) or not re.fullmatch(self.path, diff.path):
            return False
        return _value_ok(self.kafka, diff.kafka) and _value_ok(self.trafka, diff.trafka)


def _value_ok(want: Any, got: Any) -> bool:
    if want is ANY:
        return True
    if callable(want):
        return bool(want(got))
    return want == got


def absent(value: Any) -> bool:
    return value == "<absent>"


ENTRIES: list[Allowed] = []


def classify(pair: Pair, entries: list[Allowed] | None = None) -> None:
    """Move the differences an entry explains from `pair.differences` to `pair.allowed`."""
    entries = ENTRIES if entries is None else entries
    left: list[Difference] = []
    for diff in pair.differences:
        entry = next((e for e in entries if e.matches(pair, diff)), None)
        if entry is None:
            left.append(diff)
        else:
            pair.allowed.append((diff, entry.id))
    pair.differences = left


def by_id(entries: list[Allowed] | None = None) -> dict[str, Allowed]:
    return {e.id: e for e in (ENTRIES if entries is None else entries)}


Predicate = Callable[[Any], bool]
