"""Every route of the Schema Registry is a function of its own, found by its path's name
(GET /subjects/{subject}/versions is `get_subjects_subject_versions`), registered in the one
table `schema_registry.api.ROUTES` that the app serves."""

from schema_registry.api import ROUTES, build_app
from tests.openapi_routes import misnamed_routes, served_operations


def test_every_route_function_is_named_by_its_method_and_path():
    assert misnamed_routes(ROUTES, lambda function: ()) == []


def test_the_app_serves_the_table_and_nothing_else():
    table = {(path.replace("{subject:path}", "{subject}"), method) for method, path, _function in ROUTES}
    assert served_operations(build_app(None)) == table
    assert len(table) == len(ROUTES), "a (method, path) appears twice in ROUTES"
