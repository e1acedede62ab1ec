"""Every route of the REST Proxy is a function of its own, found by its path's name
(v2's GET /topics/{topic}/partitions is `rest_proxy.v2.get_topics_topic_partitions`, v3's
below /v3/clusters/{cluster_id} likewise in rest_proxy.v3), registered in the one table
`rest_proxy.server.ROUTES` that the app serves."""

import re

from rest_proxy import v3
from rest_proxy.server import ROUTES, build_app
from tests.openapi_routes import misnamed_routes, served_operations


def prefixes(function) -> tuple[str, ...]:
    """v3 names its routes below the cluster (or below /v3 for the clusters themselves)."""
    return ("/v3/clusters/{cluster_id}/", "/v3/") if function.__module__ == v3.__name__ else ()


def test_every_route_function_is_named_by_its_method_and_path():
    assert misnamed_routes(ROUTES, prefixes) == []


def test_the_app_serves_the_table_and_nothing_else():
    table = {(re.sub(r"\{(\w+):\w+\}", r"{\1}", path), method) for method, path, _function in ROUTES}
    assert served_operations(build_app(None)) == table
    assert len(table) == len(ROUTES), "a (method, path) appears twice in ROUTES"
