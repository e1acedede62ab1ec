"""Confluent's REST API over real HTTP against a broker process: register, look up,
versions, ids, deletes, configs, modes, references and the error bodies."""

from __future__ import annotations

import json

AVRO_V1 = json.dumps({"type": "record", "name": "User", "namespace": "t",
                      "fields": [{"name": "name", "type": "string"}]})
AVRO_V2 = json.dumps({"type": "record", "name": "User", "namespace": "t",
                      "fields": [{"name": "name", "type": "string"},
                                 {"name": "age", "type": "int", "default": 0}]})


def register(http, subject, schema, **extra):
    return http.post(f"/subjects/{subject}/versions", json={"schema": schema, **extra})


def test_register_lookup_and_versions(http):
    assert http.get("/subjects").json() == []
    first = register(http, "users-value", AVRO_V1)
    assert first.status_code == 200 and first.headers["content-type"].startswith(
        "application/vnd.schemaregistry.v1+json")
    schema_id = first.json()["id"]
    # The same schema again (other whitespace): the same id, no new version.
    assert register(http, "users-value", json.dumps(json.loads(AVRO_V1), indent=2)).json() == {"id": schema_id}
    assert http.get("/subjects/users-value/versions").json() == [1]
    second = register(http, "users-value", AVRO_V2).json()["id"]
    assert second != schema_id
    assert http.get("/subjects/users-value/versions").json() == [1, 2]
    latest = http.get("/subjects/users-value/versions/latest").json()
    assert latest["version"] == 2 and latest["id"] == second and json.loads(latest["schema"]) == json.loads(AVRO_V2)
    assert "schemaType" not in latest  # AVRO is implied, as Confluent answers
    assert json.loads(http.get("/subjects/users-value/versions/1/schema").text) == json.loads(AVRO_V1)
    # One schema, one id: registering V1 under another subject reuses its id.
    assert register(http, "other-value", AVRO_V1).json()["id"] == schema_id
    assert sorted(http.get(f"/schemas/ids/{schema_id}/subjects").json()) == ["other-value", "users-value"]
    assert {"subject": "users-value", "version": 1} in http.get(f"/schemas/ids/{schema_id}/versions").json()
    by_id = http.get(f"/schemas/ids/{schema_id}").json()
    assert json.loads(by_id["schema"]) == json.loads(AVRO_V1)
    # POST /subjects/{s}: which version holds this schema.
    found = http.post("/subjects/users-value", json={"schema": AVRO_V2}).json()
    assert (found["version"], found["id"]) == (2, second)
    assert sorted(http.get("/schemas/types").json()) == ["AVRO", "JSON", "PROTOBUF"]
    assert http.get("/subjects").json() == ["other-value", "users-value"]
    listed = http.get("/schemas", params={"latestOnly": "true"}).json()
    assert [(s["subject"], s["version"]) for s in listed] == [("other-value", 1), ("users-value", 2)]


def test_errors_have_confluent_codes(http):
    def err(resp):
        return resp.status_code, resp.json()["error_code"]

    assert err(http.get("/subjects/nope/versions")) == (404, 40401)
    register(http, "s", AVRO_V1)
    assert err(http.get("/subjects/s/versions/7")) == (404, 40402)
    assert err(http.get("/subjects/s/versions/zero")) == (422, 42202)
    assert err(http.get("/subjects/s/versions/0")) == (422, 42202)
    assert err(http.get("/schemas/ids/999")) == (404, 40403)
    assert err(http.post("/subjects/s", json={"schema": '"int"'})) == (404, 40403)
    assert err(register(http, "s", '{"type": "record", "name": "X", "fields": [{"name": "a", "type": "nope"}]}')) \
        == (422, 42201)
    assert err(register(http, "s", "not json")) == (422, 42201)
    assert err(register(http, "s", '{"type": 5}', schemaType="JSON")) == (422, 42201)
    assert err(register(http, "s", '"int"', schemaType="XML")) == (422, 42201)
    assert err(http.put("/config", json={"compatibility": "SIDEWAYS"})) == (422, 42203)
    assert err(http.put("/mode", json={"mode": "NAP"})) == (422, 42204)
    assert err(http.post("/subjects/s/versions", content=b"{not json")) == (400, 400)
    assert err(http.post("/subjects/s/versions", content=b"[1, 2]")) == (422, 42201)
    assert err(http.get("/no/such/path")) == (404, 404)
    huge = b'{"schema": "' + b"x" * (17 * 1024 * 1024) + b'"}'
    assert err(http.post("/subjects/s/versions", content=huge)) == (413, 413)
    # and the registry still serves
    assert http.get("/subjects/s/versions").json() == [1]


def test_soft_and_hard_deletes(http):
    register(http, "d", AVRO_V1)
    register(http, "d", AVRO_V2)
    # hard delete of a live version: soft first
    resp = http.delete("/subjects/d/versions/1", params={"permanent": "true"})
    assert (resp.status_code, resp.json()["error_code"]) == (404, 40407)
    assert http.delete("/subjects/d/versions/1").json() == 1
    assert http.get("/subjects/d/versions").json() == [2]
    assert http.get("/subjects/d/versions", params={"deleted": "true"}).json() == [1, 2]
    assert http.get("/subjects/d/versions/1").json()["error_code"] == 40402
    assert http.get("/subjects/d/versions/1", params={"deleted": "true"}).json()["version"] == 1
    assert http.delete("/subjects/d/versions/1").json()["error_code"] == 40406
    assert http.delete("/subjects/d/versions/1", params={"permanent": "true"}).json() == 1
    assert http.get("/subjects/d/versions", params={"deleted": "true"}).json() == [2]
    # subject: hard needs soft first; soft twice is 40404
    assert http.delete("/subjects/d", params={"permanent": "true"}).json()["error_code"] == 40405
    assert http.delete("/subjects/d").json() == [2]
    assert http.delete("/subjects/d").json()["error_code"] == 40404
    assert http.get("/subjects").json() == []
    assert http.get("/subjects", params={"deleted": "true"}).json() == ["d"]
    # a new registration after a soft delete continues the version numbers
    assert register(http, "d", AVRO_V1).status_code == 200
    assert http.get("/subjects/d/versions").json() == [3]
    assert http.delete("/subjects/d").json() == [3]
    assert http.delete("/subjects/d", params={"permanent": "true"}).json() == [2, 3]
    assert http.get("/subjects", params={"deleted": "true"}).json() == []
    assert http.get("/subjects/d/versions").json()["error_code"] == 40401


def test_config_and_defaults(http):
    assert http.get("/config").json() == {"compatibilityLevel": "BACKWARD"}
    assert http.put("/config", json={"compatibility": "full"}).json() == {"compatibility": "FULL"}
    assert http.get("/config").json() == {"compatibilityLevel": "FULL"}
    assert http.get("/config/x").json()["error_code"] == 40408
    assert http.get("/config/x", params={"defaultToGlobal": "true"}).json() == {"compatibilityLevel": "FULL"}
    assert http.put("/config/x", json={"compatibility": "NONE"}).json() == {"compatibility": "NONE"}
    assert http.get("/config/x").json() == {"compatibilityLevel": "NONE"}
    register(http, "x", AVRO_V1)
    assert http.delete("/config/x").json() == {"compatibilityLevel": "NONE"}
    assert http.get("/config/x", params={"defaultToGlobal": "true"}).json() == {"compatibilityLevel": "FULL"}


def test_modes(http):
    assert http.get("/mode").json() == {"mode": "READWRITE"}
    register(http, "m", AVRO_V1)
    assert http.put("/mode/m", json={"mode": "READONLY"}).json() == {"mode": "READONLY"}
    resp = register(http, "m", AVRO_V2)
    assert (resp.status_code, resp.json()["error_code"]) == (422, 42205)
    assert http.delete("/subjects/m").json()["error_code"] == 42205
    assert register(http, "n", AVRO_V1).status_code == 200  # other subjects unaffected
    assert http.delete("/mode/m").json() == {"mode": "READONLY"}
    assert register(http, "m", AVRO_V2).status_code == 200
    # IMPORT: refused while subjects exist (unless forced); then ids and versions come from the request
    assert http.put("/mode", json={"mode": "IMPORT"}).json()["error_code"] == 42205
    assert http.put("/mode/fresh", json={"mode": "IMPORT"}).json() == {"mode": "IMPORT"}
    assert register(http, "fresh", AVRO_V1).json()["error_code"] == 42205  # no id given
    assert register(http, "fresh", '"string"', id=100, version=5).json() == {"id": 100}
    assert http.get("/subjects/fresh/versions/5").json()["id"] == 100
    assert register(http, "fresh", '"long"', id=100, version=6).json()["error_code"] == 42205  # id taken
    assert register(http, "n", AVRO_V2, id=200).json()["error_code"] == 42205  # not in IMPORT mode


def test_references(http):
    address = json.dumps({"type": "record", "name": "Address", "namespace": "t",
                          "fields": [{"name": "city", "type": "string"}]})
    person = json.dumps({"type": "record", "name": "Person", "namespace": "t",
                         "fields": [{"name": "home", "type": "t.Address"}]})
    ref_id = register(http, "address", address).json()["id"]
    # without the reference the type is unknown
    assert register(http, "person", person).json()["error_code"] == 42201
    missing = [{"name": "t.Address", "subject": "address", "version": 9}]
    assert register(http, "person", person, references=missing).json()["error_code"] == 42201
    refs = [{"name": "t.Address", "subject": "address", "version": 1}]
    person_id = register(http, "person", person, references=refs).json()["id"]
    got = http.get("/subjects/person/versions/1").json()
    assert got["references"] == refs
    assert http.get(f"/schemas/ids/{person_id}").json()["references"] == refs
    assert http.get("/subjects/address/versions/1/referencedby").json() == [person_id]
    # a referenced version cannot be deleted
    assert http.delete("/subjects/address/versions/1").json()["error_code"] == 42206
    assert ref_id != person_id


def test_compatibility_endpoint(http):
    register(http, "c", AVRO_V1)
    ok = http.post("/compatibility/subjects/c/versions/latest", json={"schema": AVRO_V2}).json()
    assert ok == {"is_compatible": True}
    bad_schema = json.dumps({"type": "record", "name": "User", "namespace": "t",
                             "fields": [{"name": "name", "type": "int"}]})
    bad = http.post("/compatibility/subjects/c/versions/1", params={"verbose": "true"},
                    json={"schema": bad_schema}).json()
    assert bad["is_compatible"] is False and bad["messages"]
    assert http.post("/compatibility/subjects/c/versions", json={"schema": AVRO_V2}).json()["is_compatible"]
    assert http.post("/compatibility/subjects/nope/versions/latest",
                     json={"schema": AVRO_V2}).json()["error_code"] == 40401


def test_normalize_makes_key_order_irrelevant(http):
    one = '{"type": "record", "name": "N", "fields": [{"name": "a", "type": "int"}]}'
    other = '{"fields": [{"type": "int", "name": "a"}], "name": "N", "type": "record"}'
    first = http.post("/subjects/norm/versions", params={"normalize": "true"}, json={"schema": one}).json()["id"]
    again = http.post("/subjects/norm/versions", params={"normalize": "true"}, json={"schema": other}).json()["id"]
    assert first == again and http.get("/subjects/norm/versions").json() == [1]
    found = http.post("/subjects/norm", params={"normalize": "true"}, json={"schema": other}).json()
    assert found["version"] == 1
