"""The REST Proxy's OpenAPI description (rest_proxy/openapi.json) says what the
starlette app serves, v2 and v3 route for route, and the listener serves it at /openapi.json."""

from __future__ import annotations

import httpx

from rest_proxy.server import build_app
from tests.openapi_routes import description, described_operations, path_parameters_declared, served_operations


def test_every_route_is_described_and_nothing_else():
    spec = description("rest_proxy")
    served = served_operations(build_app(None))
    described = described_operations(spec)
    assert served - described == set(), "routes missing from openapi.json"
    assert described - served == set(), "openapi.json describes routes the app does not serve"
    assert path_parameters_declared(spec) == []
    assert any(path.startswith("/v3/") for path, _m in described) and ("/topics/{topic}", "POST") in described


def test_every_operation_documents_its_error_body():
    spec = description("rest_proxy")
    for path, item in spec["paths"].items():
        for method, operation in item.items():
            if method == "parameters" or path == "/openapi.json":
                continue
            assert "4XX" in operation["responses"], (method, path)
            assert not any(code.startswith("5") for code in operation["responses"]), (method, path)


def test_the_listener_serves_its_description(broker):
    answer = httpx.get(broker.rest_url + "/openapi.json", timeout=10)
    assert answer.status_code == 200
    assert answer.headers["content-type"].startswith("application/json")
    assert answer.json() == description("rest_proxy")
