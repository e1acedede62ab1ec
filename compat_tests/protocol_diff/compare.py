"""Field-by-field comparison of two normalised responses.

Paths read like `topics[name=pd-a].partitions[0].error_code`: arrays the schema declares
as maps are matched by their key (an element only one broker has is reported as missing on
the other side), other arrays by position.
"""

from __future__ import annotations

import json
from typing import Any

from compat_tests.protocol_diff.model import Difference

ABSENT = "<absent>"


def compare(kafka: Any, trafka: Any, path: str = "") -> list[Difference]:
    out: list[Difference] = []
    _walk(kafka, trafka, path, out)
    return out


def _key_of(item: Any, fields: list[str]) -> str | None:
    if not isinstance(item, dict) or not all(f in item for f in fields):
        return None
    return ",".join(f"{f}={_short(item[f])}" for f in fields)


def _short(value: Any) -> str:
    return value if isinstance(value, str) else json.dumps(value)


# Arrays the schemas do not mark as maps but whose elements are results per partition, topic,
# group...: matched by that field when it is unique on both sides (Kafka answers, e.g., the
# partitions of a Fetch it could not serve after the ones it could, and ListOffsets in the
# order its purgatory completes them).
KEY_FIELDS = (("partition_index",), ("partition",), ("index",), ("name",), ("topic",), ("topic_id",),
              ("group_id",), ("transactional_id",), ("node_id",), ("broker_id",), ("member_id",), ("api_key",),
              ("resource_type", "resource_name"), ("key",))


def _common_key(a: list, b: list) -> list[str] | None:
    items = a + b
    if not items or not all(isinstance(x, dict) for x in items):
        return None
    for fields in KEY_FIELDS:
        if all(all(f in x for f in fields) for x in items):
            ka = [tuple(json.dumps(x[f], default=str) for f in fields) for x in a]
            kb = [tuple(json.dumps(x[f], default=str) for f in fields) for x in b]
            if len(set(ka)) == len(ka) and len(set(kb)) == len(kb):
                return list(fields)
            return None
    return None


def _walk(a: Any, b: Any, path: str, out: list[Difference]) -> None:
    if isinstance(a, dict) and isinstance(b, dict):
        if "__map__" in a and "__map__" in b:
            _walk_map(a, b, path, out)
            return
        for key in list(a) + [k for k in b if k not in a]:
            sub = f"{path}.{key}" if path else key
            if key not in a:
                out.append(Difference(sub, ABSENT, b[key]))
            elif key not in b:
                out.append(Difference(sub, a[key], ABSENT))
            else:
                _walk(a[key], b[key], sub, out)
        return
    if isinstance(a, list) and isinstance(b, list):
        fields = _common_key(a, b)
        if fields is not None:
            _walk_map({"__map__": fields, "items": a}, {"__map__": fields, "items": b}, path, out)
            return
        for i in range(max(len(a), len(b))):
            sub = f"{path}[{i}]"
            if i >= len(a):
                out.append(Difference(sub, ABSENT, b[i]))
            elif i >= len(b):
                out.append(Difference(sub, a[i], ABSENT))
            else:
                _walk(a[i], b[i], sub, out)
        if len(a) != len(b):
            out.append(Difference(f"{path}.length", len(a), len(b)))
        return
    if a != b:
        out.append(Difference(path, a, b))


def _walk_map(a: dict, b: dict, path: str, out: list[Difference]) -> None:
    fields = a["__map__"]
    ka = [_key_of(x, fields) for x in a["items"]]
    kb = [_key_of(x, fields) for x in b["items"]]
    if None in ka or None in kb or len(set(ka)) != len(ka) or len(set(kb)) != len(kb):
        _walk(a["items"], b["items"], path, out)  # no usable key: positional
        return
    by_b = dict(zip(kb, b["items"]))
    for key, item in zip(ka, a["items"]):
        sub = f"{path}[{key}]"
        if key not in by_b:
            out.append(Difference(sub, item, ABSENT))
        else:
            _walk(item, by_b[key], sub, out)
    for key, item in zip(kb, b["items"]):
        if key not in dict.fromkeys(ka):
            out.append(Difference(f"{path}[{key}]", ABSENT, item))
