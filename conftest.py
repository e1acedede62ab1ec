"""Shared by tests/ and compat_tests/: brokers started by a test serve no HTTP side unless the
test asks for it with --set (flags override the environment).

`trafka serve` opens /metrics on 127.0.0.1:8080 (http.listeners) and the Schema Registry on
127.0.0.1:8081 (schema.registry.listeners) and the REST Proxy on 127.0.0.1:8082
(rest.proxy.listeners) by default; tests start many brokers, some at once,
so a default port would be taken by whichever started first.
"""

import os

os.environ.setdefault("TRAFKA_HTTP_LISTENERS", "")
os.environ.setdefault("TRAFKA_SCHEMA_REGISTRY_LISTENERS", "")
os.environ.setdefault("TRAFKA_REST_PROXY_LISTENERS", "")
