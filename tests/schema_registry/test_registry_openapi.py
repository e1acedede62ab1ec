"""The registry's OpenAPI description (schema_registry/openapi.json) says what the
starlette app serves, route for route, and the listener serves it at /openapi.json."""

from __future__ import annotations

import json

import httpx

from schema_registry.api import build_app
from tests.openapi_routes import description, described_operations, path_parameters_declared, served_operations


def test_every_route_is_described_and_nothing_else():
    spec = description("schema_registry")
    served = served_operations(build_app(None))
    described = described_operations(spec)
    assert served - described == set(), "routes missing from openapi.json"
    assert described - served == set(), "openapi.json describes routes the app does not serve"
    assert path_parameters_declared(spec) == []


def test_every_operation_documents_its_error_body():
    spec = description("schema_registry")
    for path, item in spec["paths"].items():
        for method, operation in item.items():
            if method == "parameters" or path == "/openapi.json":
                continue
            assert "4XX" in operation["responses"], (method, path)
            assert not any(code.startswith("5") for code in operation["responses"]), (method, path)


def test_the_listener_serves_its_description(registry):
    answer = httpx.get(registry.url + "/openapi.json", timeout=10)
    assert answer.status_code == 200
    assert answer.headers["content-type"].startswith("application/json")
    assert answer.json() == description("schema_registry")
    assert json.loads(answer.content)["openapi"].startswith("3.")
