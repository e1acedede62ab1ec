"""The JAAS configuration syntax of Kafka's `sasl.jaas.config`.

`<LoginModule class> <flag> key=value key="quoted value" ...;` — Kafka's JaasConfig
parses it with a StreamTokenizer: options are separated by white space, values may be
quoted with double quotes (inside, backslash escapes the next character), and the entry
ends with a semicolon. Only one login module entry is allowed, as in Kafka.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

FLAGS = ("required", "requisite", "sufficient", "optional")


class JaasError(ValueError):
    """A `sasl.jaas.config` value that does not parse (the message says where)."""


@dataclass
class JaasEntry:
    login_module: str
    flag: str
    options: dict[str, str] = field(default_factory=dict)


_TOKEN = re.compile(r'\s*(?:(?P<quoted>"(?:[^"\\]|\\.)*")|(?P<semi>;)|(?P<eq>=)|(?P<word>[^\s=;"]+))', re.S)


def _tokens(text: str) -> list[tuple[str, str]]:
    out, pos = [], 0
    while True:
        while pos < len(text) and text[pos].isspace():
            pos += 1
        if pos >= len(text):
            return out
        match = _TOKEN.match(text, pos)
        if match is None:
            raise JaasError(f"unexpected character at {pos}: {text[pos]!r} (unterminated quote?)")
        kind = match.lastgroup
        value = match.group(kind)
        if kind == "quoted":
            value = re.sub(r"\\(.)", r"\1", value[1:-1], flags=re.S)
        out.append((kind, value))
        pos = match.end()


def parse_jaas(text: str) -> JaasEntry:
    """The one login module of `text`; JaasError if malformed."""
    tokens = _tokens(text)
    if len(tokens) < 3 or tokens[0][0] != "word" or tokens[1][0] != "word":
        raise JaasError("expected '<LoginModule> <flag> [options];'")
    module, flag = tokens[0][1], tokens[1][1]
    if flag.lower() not in FLAGS:
        raise JaasError(f"invalid login module control flag {flag!r} (expected one of {', '.join(FLAGS)})")
    options: dict[str, str] = {}
    i = 2
    while i < len(tokens) and tokens[i][0] != "semi":
        if i + 2 >= len(tokens) or tokens[i][0] != "word" or tokens[i + 1][0] != "eq" or \
                tokens[i + 2][0] not in ("word", "quoted"):
            raise JaasError(f"expected key=value after {module}, near token {i}")
        options[tokens[i][1]] = tokens[i + 2][1]
        i += 3
    if i >= len(tokens):
        raise JaasError("the login module entry must end with ';'")
    if i + 1 != len(tokens):
        raise JaasError("sasl.jaas.config must contain exactly one login module entry")
    return JaasEntry(module, flag.lower(), options)
