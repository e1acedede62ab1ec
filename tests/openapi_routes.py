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


def route_function_name(method: str, path: str, prefixes: tuple[str, ...] = ()) -> str:
    """The name a route's function has by its method and path: the method, then each path
    segment (a parameter by its name, `-` `.` `:` as `_`), after the first of `prefixes`
    the path starts with; `get_root` for GET /. GET /topics/{topic}/partitions is
    `get_topics_topic_partitions`."""
    for prefix in prefixes:
        if path.startswith(prefix):
            path = path[len(prefix):]
            break
    words = []
    for segment in filter(None, path.split("/")):
        parameter = re.fullmatch(r"\{(\w+)(?::\w+)?\}", segment)
        words.append(parameter.group(1) if parameter else re.sub(r"[-.:]", "_", segment))
    return f"{method.lower()}_{'_'.join(words) or 'root'}"


def misnamed_routes(routes, module_of) -> list[str]:
    """Every (method, path, function) row whose function is not named by its method and path
    (`module_of(function)` gives the prefixes its module strips) or cannot be found by that
    name in its module (the problems found)."""
    import sys

    problems = []
    for method, path, function in routes:
        expected = route_function_name(method, path, module_of(function))
        if function.__name__ != expected:
            problems.append(f"{method} {path}: {function.__module__}.{function.__name__}, expected {expected}")
        elif getattr(sys.modules[function.__module__], expected, None) is not function:
            problems.append(f"{method} {path}: {expected} is not a function of {function.__module__}")
    return problems
