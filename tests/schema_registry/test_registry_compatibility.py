"""Compatibility levels: each refuses an incompatible schema with 409 and accepts a
compatible one, over HTTP; and the AVRO / JSON rules directly."""

from __future__ import annotations

import json

import pytest

from schema_registry import compatibility
from schema_registry.schemas import parse


def avro_record(*fields) -> str:
    return json.dumps({"type": "record", "name": "R", "fields": list(fields)})


A = {"name": "a", "type": "int"}
B_DEFAULT = {"name": "b", "type": "string", "default": ""}
B_NO_DEFAULT = {"name": "b", "type": "string"}
V1 = avro_record(A)
ADD_WITH_DEFAULT = avro_record(A, B_DEFAULT)      # backward + forward compatible
ADD_NO_DEFAULT = avro_record(A, B_NO_DEFAULT)     # forward only: new cannot read old (b missing)
REMOVE_A = avro_record(B_DEFAULT)                 # backward only: old cannot read new (a missing, no default)

# level -> (a compatible next schema, an incompatible one)
CASES = {
    "BACKWARD": (REMOVE_A, ADD_NO_DEFAULT),
    "FORWARD": (ADD_NO_DEFAULT, REMOVE_A),
    "FULL": (ADD_WITH_DEFAULT, ADD_NO_DEFAULT),
    "NONE": (avro_record({"name": "z", "type": "bytes"}), None),
}


@pytest.mark.parametrize("level", sorted(CASES))
def test_level_over_http(http, level):
    subject = f"lvl-{level.lower()}"
    assert http.put(f"/config/{subject}", json={"compatibility": level}).status_code == 200
    assert http.post(f"/subjects/{subject}/versions", json={"schema": V1}).status_code == 200
    good, bad = CASES[level]
    if bad is not None:
        refused = http.post(f"/subjects/{subject}/versions", json={"schema": bad})
        assert refused.status_code == 409, refused.text
        assert refused.json()["error_code"] == 409 and "incompatible" in refused.json()["message"]
    accepted = http.post(f"/subjects/{subject}/versions", json={"schema": good})
    assert accepted.status_code == 200, accepted.text
    assert http.get(f"/subjects/{subject}/versions").json() == [1, 2]


@pytest.mark.parametrize("level", ["BACKWARD_TRANSITIVE", "FORWARD_TRANSITIVE", "FULL_TRANSITIVE"])
def test_transitive_levels_check_every_version(http, level):
    """v1 {a:int}; v2 {a:int, b default}; v3 {b default} is compatible with v2 both ways
    but v1 data has no usable b... a case each transitive level sees and its plain level
    does not."""
    plain = level.removesuffix("_TRANSITIVE")
    for lvl, subject in ((plain, f"p-{level}"), (level, f"t-{level}")):
        http.put(f"/config/{subject}", json={"compatibility": lvl})
    if plain == "BACKWARD":
        # v1 {a}, v2 {a, b default}... v3 needs c without default relative to v1 but with it in v2:
        seq = [avro_record(A), avro_record(A, {"name": "c", "type": "int", "default": 1}),
               avro_record(A, {"name": "c", "type": "int"})]
    else:
        # FORWARD(_T)/FULL(_T): old reads new. v1 {a, c no default}; v2 {a, c default}: FORWARD needs
        # v1 to read v2 data: v2 writes c -> fine. v3 {a}: v2 reads v3 (c default) fine; v1 cannot (c missing).
        seq = [avro_record(A, {"name": "c", "type": "int"}), avro_record(A, {"name": "c", "type": "int", "default": 1}),
               avro_record(A)]
    for subject, transitive in ((f"p-{level}", False), (f"t-{level}", True)):
        for schema in seq[:2]:
            assert http.post(f"/subjects/{subject}/versions", json={"schema": schema}).status_code == 200
        third = http.post(f"/subjects/{subject}/versions", json={"schema": seq[2]})
        assert third.status_code == (409 if transitive else 200), (level, transitive, third.text)


def test_json_schema_levels_over_http(http):
    closed = {"type": "object", "properties": {"a": {"type": "integer"}}, "additionalProperties": False}
    http.put("/config/js", json={"compatibility": "BACKWARD"})
    assert http.post("/subjects/js/versions", json={"schema": json.dumps(closed), "schemaType": "JSON"}).status_code == 200
    # adding an optional property to a closed content model: compatible
    wider = {**closed, "properties": {"a": {"type": "integer"}, "b": {"type": "string"}}}
    resp = http.post("/subjects/js/versions", json={"schema": json.dumps(wider), "schemaType": "JSON"})
    assert resp.status_code == 200, resp.text
    # making it required: not
    required = {**wider, "required": ["b"]}
    resp = http.post("/subjects/js/versions", json={"schema": json.dumps(required), "schemaType": "JSON"})
    assert resp.status_code == 409, resp.text
    # narrowing a type: not
    narrowed = {**wider, "properties": {"a": {"type": "integer"}, "b": {"type": "integer"}}}
    assert http.post("/subjects/js/versions", json={"schema": json.dumps(narrowed), "schemaType": "JSON"}).status_code == 409
    # a schema of another type: not
    assert http.post("/subjects/js/versions", json={"schema": V1}).status_code == 409


def _avro(text):
    return parse("AVRO", text)


@pytest.mark.parametrize("reader,writer,ok", [
    ('"long"', '"int"', True), ('"double"', '"int"', True), ('"int"', '"long"', False),
    ('"bytes"', '"string"', True), ('"string"', '"bytes"', True), ('"string"', '"int"', False),
    ('["null", "string"]', '"string"', True), ('"string"', '["null", "string"]', False),
    ('["null", "long"]', '["null", "int"]', True),
    ('{"type": "array", "items": "long"}', '{"type": "array", "items": "int"}', True),
    ('{"type": "map", "values": "int"}', '{"type": "map", "values": "string"}', False),
    ('{"type": "enum", "name": "E", "symbols": ["A", "B"]}', '{"type": "enum", "name": "E", "symbols": ["A"]}', True),
    ('{"type": "enum", "name": "E", "symbols": ["A"]}', '{"type": "enum", "name": "E", "symbols": ["A", "B"]}', False),
    ('{"type": "enum", "name": "E", "symbols": ["A"], "default": "A"}',
     '{"type": "enum", "name": "E", "symbols": ["A", "B"]}', True),
    ('{"type": "fixed", "name": "F", "size": 4}', '{"type": "fixed", "name": "F", "size": 8}', False),
    (avro_record(A), avro_record({"name": "x", "type": "int"}), False),
    (json.dumps({"type": "record", "name": "R", "fields": [{"name": "n", "type": "int", "aliases": ["a"]}]}),
     avro_record(A), True),
    (json.dumps({"type": "record", "name": "Other", "fields": []}), avro_record(A), False),
])
def test_avro_rules(reader, writer, ok):
    assert (not compatibility.can_read(_avro(reader), _avro(writer))) is ok


def test_avro_recursive_types_terminate():
    node = json.dumps({"type": "record", "name": "Node", "fields": [
        {"name": "v", "type": "int"}, {"name": "next", "type": ["null", "Node"], "default": None}]})
    assert compatibility.can_read(_avro(node), _avro(node)) == []


def _js(doc):
    return parse("JSON", json.dumps(doc))


@pytest.mark.parametrize("reader,writer,ok", [
    ({"type": "number"}, {"type": "integer"}, True),
    ({"type": "integer"}, {"type": "number"}, False),
    ({"type": ["string", "null"]}, {"type": "string"}, True),
    ({"type": "string", "maxLength": 5}, {"type": "string", "maxLength": 10}, False),
    ({"type": "string", "maxLength": 10}, {"type": "string", "maxLength": 5}, True),
    ({"enum": ["a", "b"]}, {"enum": ["a"]}, True),
    ({"enum": ["a"]}, {"enum": ["a", "b"]}, False),
    ({"type": "object", "properties": {"a": {"type": "string"}}},
     {"type": "object", "properties": {"a": {"type": "string"}, "b": {"type": "string"}}}, True),
    ({"type": "object", "properties": {"a": {"type": "string"}}, "additionalProperties": False},
     {"type": "object", "properties": {"a": {"type": "string"}, "b": {"type": "string"}}}, False),
    ({"type": "object", "properties": {"a": {"type": "string"}, "b": {"type": "integer"}}},
     {"type": "object", "properties": {"a": {"type": "string"}}}, False),  # added to an open model
    ({"type": "object", "required": ["a"]}, {"type": "object"}, False),
    ({"type": "object"}, {"type": "object", "required": ["a"]}, True),
    ({"anyOf": [{"type": "string"}, {"type": "integer"}]}, {"type": "string"}, True),
    ({"type": "string"}, {"anyOf": [{"type": "string"}, {"type": "integer"}]}, False),
    ({"type": "object", "properties": {"p": {"$ref": "#/definitions/x"}}, "definitions": {"x": {"type": "number"}}},
     {"type": "object", "properties": {"p": {"$ref": "#/definitions/x"}}, "definitions": {"x": {"type": "integer"}}},
     True),
    ({}, {"type": "string"}, True),
])
def test_json_rules(reader, writer, ok):
    assert (not compatibility.can_read(_js(reader), _js(writer))) is ok


def test_a_shared_definition_that_failed_once_fails_again():
    """`a` may hold anything (an anyOf with {}), so its failing $ref branch is rightly passed
    over; `b` names the same pair of definitions and must still be found incompatible (the
    checker once remembered the pair as checked and answered [] for it)."""
    def schema(n_type):
        return {"type": "object", "definitions": {"X": {"type": "object", "additionalProperties": False,
                                                        "properties": {"n": {"type": n_type}}}},
                "properties": {"a": {"anyOf": [{"$ref": "#/definitions/X"}, {}]} if n_type == "string"
                               else {"$ref": "#/definitions/X"},
                               "b": {"$ref": "#/definitions/X"}}}
    problems = compatibility.can_read(_js(schema("string")), _js(schema("integer")))
    assert any("/properties/b" in p for p in problems), problems
