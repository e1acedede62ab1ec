"""The principal of a TLS client: its certificate's subject DN through
`ssl.principal.mapping.rules` (Kafka's SslPrincipalMapper, KIP-371).

Rules are a comma list of `RULE:pattern/replacement/[LU]` and `DEFAULT`, tried in order;
the first whose pattern matches the whole DN gives the name (`$1` refers to a group; `L`
or `U` lower/upper-cases it), `DEFAULT` gives the DN itself. The DN is written as Java's
X500Principal.getName() does (RFC 2253, most specific first, no spaces: "CN=alice,OU=eng,
O=Acme,C=US"), so rules written for Kafka match the same strings here. No rule matching is
an authentication failure in Kafka: `NoMatchingRule`.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from cryptography import x509

# Kafka's SslPrincipalMapper.RULE_PATTERN: DEFAULT, or RULE:pattern/replacement/[LU]
# where `\/` escapes a slash; anything else is a syntax error.
_RULE = r"(DEFAULT)|RULE:((?:\\.|[^\\/])*)/((?:\\.|[^\\/])*)/([LU]?)"
_SPLITTER = re.compile(r"\s*(?:" + _RULE + r")\s*(?:,\s*|$)")


class NoMatchingRule(ValueError):
    """No ssl.principal.mapping.rules rule matches a DN (Kafka fails the authentication)."""


@dataclass(frozen=True)
class _Rule:
    default: bool
    pattern: re.Pattern | None = None
    replacement: str = ""
    case: str = ""

    def apply(self, dn: str) -> str | None:
        if self.default:
            return dn
        match = self.pattern.fullmatch(dn)
        if match is None:
            return None
        # Java's Matcher.replaceAll on a whole-string match: $n are groups.
        name = re.sub(r"\$(\d+)", lambda m: match.group(int(m.group(1))) or "", self.replacement)
        return name.lower() if self.case == "L" else name.upper() if self.case == "U" else name


class PrincipalMapper:
    """Parsed `ssl.principal.mapping.rules`; `name(dn)` maps one DN."""

    def __init__(self, rules: str) -> None:
        self.rules = parse_rules(rules)

    def name(self, dn: str) -> str:
        for rule in self.rules:
            name = rule.apply(dn)
            if name is not None:
                return name
        raise NoMatchingRule(f"no rule of ssl.principal.mapping.rules matches {dn!r}")


def parse_rules(text: str) -> list[_Rule]:
    """ValueError for a malformed rule (Kafka: "Invalid rule")."""
    text = text.strip() or "DEFAULT"
    rules: list[_Rule] = []
    position = 0
    while position < len(text):
        match = _SPLITTER.match(text, position)
        if match is None or match.end() == position:
            raise ValueError(f"invalid rule at {text[position:]!r}")
        position = match.end()
        if match.group(1):
            rules.append(_Rule(True))
            continue
        pattern = match.group(2).replace("\\/", "/")
        replacement = match.group(3).replace("\\/", "/")
        try:
            compiled = re.compile(pattern)
        except re.error as exc:
            raise ValueError(f"invalid rule pattern {pattern!r}: {exc}") from None
        rules.append(_Rule(False, compiled, replacement, match.group(4)))
    return rules


def subject_dn(der: bytes) -> str:
    """The subject DN of a DER certificate as Java's X500Principal.getName() writes it."""
    return x509.load_der_x509_certificate(der).subject.rfc4514_string()
