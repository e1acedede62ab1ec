"""Requests found answered 500 / 50001 with a Traceback while fuzzing the registry (and
probing around what test_registry_fuzz.py generates): JSON nested deeper than Python's parser
goes, and a recursive JSON schema compared with an open one (the checker recursed forever).
Each must be its 4xx / 409, with no traceback in the log."""

from __future__ import annotations

import httpx
import pytest

from schema_registry import records
from tests.schema_registry.conftest import CT, RegistryBroker

DEEP = b"[" * 100_000 + b"]" * 100_000


@pytest.fixture(scope="module")
def reg(tmp_path_factory):
    with RegistryBroker(tmp_path_factory.mktemp("findings") / "data") as broker:
        with httpx.Client(base_url=broker.url, headers={"Content-Type": CT}, timeout=30) as http:
            http.broker = broker
            yield http


def no_traceback(http) -> None:
    log = http.broker.log_tail(400)
    assert "Traceback" not in log, log


def test_a_request_body_nested_too_deep_is_400(reg):
    r = reg.post("/subjects/deep/versions", content=DEEP)
    assert r.status_code == 400 and r.json()["error_code"] == 400, r.text
    no_traceback(reg)


@pytest.mark.parametrize("schema_type", ["AVRO", "JSON"])
def test_a_schema_nested_too_deep_is_invalid(reg, schema_type):
    text = "[" * 100_000 + "]" * 100_000
    r = reg.post("/subjects/deep/versions", json={"schema": text, "schemaType": schema_type})
    assert r.status_code == 422 and r.json()["error_code"] == 42201, r.text
    no_traceback(reg)


def test_a_recursive_json_schema_against_an_open_one_is_compared(reg):
    subject = "recursive-value"
    anything = {"schema": '{"$ref": "#"}', "schemaType": "JSON"}
    recursive = {"schema": '{"type": "object", "properties": {"a": {"$ref": "#"}}}', "schemaType": "JSON"}
    assert reg.post(f"/subjects/{subject}/versions", json=anything).status_code == 200
    r = reg.post(f"/compatibility/subjects/{subject}/versions/latest?verbose=true", json=recursive)
    assert r.status_code == 200 and r.json()["is_compatible"] is False, r.text
    r = reg.post(f"/subjects/{subject}/versions", json=recursive)
    assert r.status_code == 409, r.text
    no_traceback(reg)


def test_a_schemas_record_nested_too_deep_is_unreadable_not_fatal():
    # anyone allowed to produce to _schemas can write one; replay skips what decode refuses
    with pytest.raises(ValueError):
        records.decode(DEEP, b"{}")
    with pytest.raises(ValueError):
        records.decode(b'{"keytype": "SCHEMA", "subject": "s", "version": 1, "magic": 1}', DEEP)
