"""The generated definitions, and the trees compiled from them, against Kafka's JSON schemas.

Two checks, both skipped when the schemas are absent (.cache/kafka-protocol/messages, which
.ci/run fills from the kafka-clients 3.9.2 jar of Maven Central, or $KAFKA_PROTOCOL_MESSAGES):
- `python -m wire.generate --check`: the committed wire/definitions.py is what the
  generator makes of the schemas today.
- An independent walk of the JSON (its own loader and snake_case, not the generator's)
  compared with what actually runs: for every served API, kind and version, the compiled
  `message_struct` has exactly the JSON's fields for that version, in order, with the
  JSON's types, nullability, compactness (flexible versions), tags and defaults.
Plus registry facts: every served version is inside the JSON validVersions.
"""

from __future__ import annotations

import json
import pathlib
import subprocess
import sys
import uuid

import pytest

from wire import newer_versions, primitives as p
from wire.definitions import MESSAGES
from wire.generate import schema_dir
from wire.registry import CODEC_VERSIONS
from wire.schema import _NullableStruct, is_flexible, message_struct

ROOT = pathlib.Path(__file__).resolve().parents[2]
SCHEMAS = schema_dir()

pytestmark = pytest.mark.skipif(not SCHEMAS.is_dir(), reason=f"{SCHEMAS} not present")


def _load(path: pathlib.Path) -> dict:
    # The later versions clients need (wire.newer_versions) are part of the reference.
    text = "\n".join(line for line in path.read_text().splitlines() if not line.lstrip().startswith("//"))
    return newer_versions.apply(json.loads(text))


def _schemas() -> dict[tuple[int, str], dict]:
    out = {}
    if not SCHEMAS.is_dir():
        return out
    for path in SCHEMAS.glob("*.json"):
        schema = _load(path)
        if schema.get("type") in ("request", "response"):
            out[(schema["apiKey"], schema["type"])] = schema
    return out


JSON = _schemas()


def _versions(text: str | None) -> tuple[int, float] | None:
    """'3+' -> (3, inf); '1-4' -> (1, 4); '2' -> (2, 2); 'none' / absent -> None."""
    if text is None or text == "none":
        return None
    if text.endswith("+"):
        return int(text[:-1]), float("inf")
    lo, _, hi = text.partition("-")
    return int(lo), int(hi or lo)


def _has(rng, version: int) -> bool:
    return rng is not None and rng[0] <= version <= rng[1]


def _snake(name: str) -> str:
    # Written independently of wire.generate.snake: split before an upper-case letter that
    # follows a lower-case letter or digit, or that starts a word after an acronym.
    out = []
    for i, ch in enumerate(name):
        if ch.isupper() and i:
            prev, nxt = name[i - 1], name[i + 1] if i + 1 < len(name) else ""
            if prev.islower() or prev.isdigit() or (prev.isupper() and nxt.islower()):
                out.append("_")
        out.append(ch.lower())
    return "".join(out)


def test_snake_case_examples():
    assert _snake("MemberId") == "member_id"
    assert _snake("GroupInstanceId") == "group_instance_id"
    assert _snake("ThrottleTimeMs") == "throttle_time_ms"
    assert _snake("TopicId") == "topic_id"
    assert _snake("ClusterAuthorizedOperations") == "cluster_authorized_operations"


def test_generated_file_is_current():
    result = subprocess.run(
        [sys.executable, "-m", "wire.generate", str(SCHEMAS), "--check"],
        cwd=ROOT, capture_output=True, text=True, timeout=120,
    )
    assert result.returncode == 0, result.stderr


def test_every_served_api_has_both_schemas_and_definitions():
    for key in CODEC_VERSIONS:
        for kind in ("request", "response"):
            assert (key, kind) in JSON, f"no JSON schema for api {key} {kind}"
            assert (key, kind) in MESSAGES, f"no generated definition for api {key} {kind}"
            assert MESSAGES[(key, kind)]["name"] == JSON[(key, kind)]["name"]


@pytest.mark.parametrize("key", sorted(CODEC_VERSIONS))
def test_served_versions_inside_valid_versions(key):
    lo, hi = CODEC_VERSIONS[key]
    assert lo <= hi
    for kind in ("request", "response"):
        valid = _versions(JSON[(key, kind)]["validVersions"])
        assert valid is not None
        assert valid[0] <= lo and hi <= valid[1], f"{JSON[(key, kind)]['name']} serves {lo}-{hi}, JSON says {valid}"


_FIXED = {
    "int8": ">b", "int16": ">h", "int32": ">i", "int64": ">q",
    "uint16": ">H", "uint32": ">I", "float64": ">d", "bool": ">?",
}


def _json_default(typ: str, field: dict, nullable: bool):
    """What an absent field should encode as, read off the JSON the way Kafka's generator does."""
    raw = field.get("default")
    if typ.startswith("[]"):
        return None if raw == "null" else []
    if raw == "null":
        return None
    if typ in ("int8", "int16", "int32", "int64", "uint16", "uint32"):
        if raw is None or raw == "":
            return 0
        text = str(raw).strip().lower()
        sign = -1 if text.startswith("-") else 1
        text = text.lstrip("-")
        return sign * (int(text[2:], 16) if text.startswith("0x") else int(text, 10))
    if typ == "float64":
        return float(raw) if raw not in (None, "") else 0.0
    if typ == "bool":
        return str(raw).lower() == "true" if raw is not None else False
    if typ == "string":
        return "" if raw is None else raw
    if typ == "uuid":
        return uuid.UUID(int=0)
    if typ == "bytes":
        return b""
    if typ == "records":
        return None
    return "struct"


def _check_type(where: str, typ: str, node, json_field: dict, version: int, flexible: bool, common: dict):
    """Assert that compiled `node` is the JSON type `typ` at `version`."""
    nullable = _has(_versions(json_field.get("nullableVersions")), version)
    if "flexibleVersions" in json_field:
        flexible = _has(_versions(json_field["flexibleVersions"]), version)
    if typ.startswith("[]"):
        assert type(node) is p.Array, f"{where}: {type(node).__name__} for {typ}"
        assert node.compact == flexible, f"{where}: compact={node.compact}, flexible={flexible}"
        assert node.nullable == nullable, f"{where}: nullable={node.nullable}, JSON {json_field.get('nullableVersions')}"
        base = typ[2:]
        element = node.element
        if base in _FIXED or base == "uuid":
            _check_scalar(where + "[]", base, element)
        elif base == "string":
            assert type(element) is p.String and element.compact == flexible and not element.nullable, where
        elif base in ("bytes", "records"):
            assert isinstance(element, p.Bytes) and element.compact == flexible and not element.nullable, where
        else:
            children = json_field.get("fields") or common[base]
            _check_struct(where + "[]", element, children, version, flexible, common)
        return
    if typ in _FIXED or typ == "uuid":
        _check_scalar(where, typ, node)
        return
    if typ == "string":
        assert type(node) is p.String, f"{where}: {type(node).__name__} for string"
        assert node.compact == flexible and node.nullable == nullable, f"{where}: compact/nullable"
        return
    if typ in ("bytes", "records"):
        assert type(node) is (p.Records if typ == "records" else p.Bytes), f"{where}: {type(node).__name__} for {typ}"
        assert node.compact == flexible and node.nullable == nullable, f"{where}: compact/nullable"
        return
    children = json_field.get("fields") or common[typ]
    if nullable:
        assert type(node) is _NullableStruct, f"{where}: nullable struct expected"
        node = node.struct
    _check_struct(where, node, children, version, flexible, common)


def _check_scalar(where: str, typ: str, node) -> None:
    if typ == "uuid":
        assert type(node) is p.Uuid, f"{where}: {type(node).__name__} for uuid"
    elif typ == "bool":
        assert type(node) is p.Boolean, f"{where}: {type(node).__name__} for bool"
    else:
        assert type(node) is p.Fixed and node.fmt.format == _FIXED[typ], f"{where}: {node!r} for {typ}"


def _check_struct(where: str, node, fields: list[dict], version: int, flexible: bool, common: dict) -> None:
    assert type(node) is p.KStruct, f"{where}: {type(node).__name__} for a struct"
    present = [f for f in fields if _has(_versions(f["versions"]), version)]
    plain = [f for f in present if not (flexible and _has(_versions(f.get("taggedVersions")), version))]
    tagged = [f for f in present if flexible and _has(_versions(f.get("taggedVersions")), version)]
    names = [name for name, _t, _d in node.fields]
    assert names == [_snake(f["name"]) for f in plain], f"{where} v{version}: fields {names}"
    for (name, typ_node, default), field in zip(node.fields, plain):
        _check_type(f"{where}.{name}", field["type"], typ_node, field, version, flexible, common)
        _check_default(f"{where}.{name}", field, typ_node, default, version)
    if not flexible:
        assert node.tagged is None, f"{where} v{version}: tagged section in a non-flexible version"
        assert not tagged
        return
    assert node.tagged is not None, f"{where} v{version}: flexible version without a tagged section"
    expected = {f["tag"]: f for f in tagged}
    assert sorted(node.tagged.fields) == sorted(expected), f"{where} v{version}: tags {sorted(node.tagged.fields)}"
    for tag, (name, typ_node, default) in node.tagged.fields.items():
        field = expected[tag]
        assert name == _snake(field["name"]), f"{where}: tag {tag} is {name}"
        _check_type(f"{where}.{name}(tag {tag})", field["type"], typ_node, field, version, flexible, common)
        _check_default(f"{where}.{name}", field, typ_node, default, version)


def _check_default(where: str, field: dict, node, default, version: int) -> None:
    typ = field["type"]
    nullable = _has(_versions(field.get("nullableVersions")), version)
    expected = _json_default(typ, field, nullable)
    if expected == "struct":
        struct = node.struct if type(node) is _NullableStruct else node
        if nullable:
            assert default is None, f"{where}: default {default!r} for a nullable struct"
        else:
            assert default == struct.defaults(), f"{where}: struct default {default!r}"
        return
    if expected is None and not nullable and typ.startswith("[]"):
        expected = []  # a null default on a non-nullable array encodes as empty
    assert default == expected, f"{where}: default {default!r}, JSON {field.get('default')!r}"


def _cases():
    for key in sorted(CODEC_VERSIONS):
        lo, hi = CODEC_VERSIONS[key]
        for kind in ("request", "response"):
            for version in range(lo, hi + 1):
                yield key, kind, version


@pytest.mark.parametrize("key,kind,version", list(_cases()))
def test_compiled_tree_matches_json(key, kind, version):
    schema = JSON[(key, kind)]
    common = {c["name"]: c["fields"] for c in schema.get("commonStructs", [])}
    flexible = _has(_versions(schema["flexibleVersions"]), version)
    assert is_flexible(key, kind, version) == flexible
    node = message_struct(key, kind, version)
    _check_struct(f"{schema['name']}", node, schema["fields"], version, flexible, common)


def _walk(node):
    yield node
    if type(node) is p.KStruct:
        for _n, t, _d in node.fields:
            yield from _walk(t)
        if node.tagged is not None:
            for _n, t, _d in node.tagged.fields.values():
                yield from _walk(t)
    elif type(node) is p.Array:
        yield from _walk(node.element)
    elif type(node) is _NullableStruct:
        yield from _walk(node.struct)


@pytest.mark.parametrize("key,kind,version", list(_cases()))
def test_array_elements_take_at_least_one_byte(key, kind, version):
    """Arrays reject counts the bytes left cannot hold; that needs every element to take ≥ 1 byte."""
    for node in _walk(message_struct(key, kind, version)):
        if type(node) is p.Array:
            assert node.element.min_size >= 1, f"zero-size element in {node!r}"


def test_inter_broker_apis_are_decoded_but_kept_apart_from_the_advertised_ones():
    # A key is either advertised (API_VERSIONS, with a handler) or inter-broker only.
    from wire.registry import API_VERSIONS, INTER_BROKER_VERSIONS, is_supported

    assert not set(API_VERSIONS) & set(INTER_BROKER_VERSIONS)
    assert CODEC_VERSIONS == {**API_VERSIONS, **INTER_BROKER_VERSIONS}
    for key, (lo, hi) in INTER_BROKER_VERSIONS.items():
        assert is_supported(key, lo) and is_supported(key, hi) and not is_supported(key, hi + 1)
        assert (key, "request") in MESSAGES and (key, "response") in MESSAGES
