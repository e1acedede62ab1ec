"""What an OpenAPI description and a starlette app must agree on: the same (path, method)
pairs. Shared by the registry's and the REST Proxy's description tests."""

from __future__ import annotations

import json
import re
from importlib.resources import files

METHODS = {"get", "put", "post", "delete", "patch", "options", "head"}


def description(package: str) -> dict:
    """The OpenAPI description shipped as package data of `package`."""
    return json.loads(files(package).joinpath("openapi.json").read_text())


def described_operations(spec: dict) -> set[tuple[str, str]]:
    return {(path, method.upper()) for path, item in spec["paths"].items() for method in item if method in METHODS}


def served_operations(app) -> set[tuple[str, str]]:
    """(path, method) for every route of `app`; `{name:conv}` is written `{name}` as in
    OpenAPI, and the HEAD starlette adds to every GET is left out."""
    out = set()
    for route in app.routes:
        path = re.sub(r"\{(\w+):\w+\}", r"{\1}", route.path)
        out |= {(path, m) for m in route.methods if m != "HEAD"}
    return out


def path_parameters_declared(spec: dict) -> list[str]:
    """Every `{name}` of a path has its path parameter, and no more (the problems found)."""
    problems = []
    for path, item in spec["paths"].items():
        named = set(re.findall(r"\{(\w+)\}", path))
        declared = {p["name"] for p in item.get("parameters", []) if p["in"] == "path"}
        if named != declared:
            problems.append(f"{path}: in the path {sorted(named)}, declared {sorted(declared)}")
    return problems
