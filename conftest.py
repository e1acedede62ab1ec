"""Shared by tests/ and compat_tests/: brokers started by a test serve no HTTP side unless the
test asks for it with --set (flags override the environment).

`trafka serve` opens /metrics on 127.0.0.1:8080 (http.listeners) and the Schema Registry on
127.0.0.1:8081 (schema.registry.listeners) and the REST Proxy on 127.0.0.1:8082
(rest.proxy.listeners) by default; tests start many brokers, some at once,
so a default port would be taken by whichever started first.

Groups: Kafka's (and Trafka's) group.initial.rebalance.delay.ms holds an empty group's first
rebalance 3 s for more members; tests make a fresh group nearly every time, so their brokers
run without the delay (as compat_tests runs Kafka: brokers.SUITE_SETTINGS). Tests of the delay
itself set it.
"""

import os

os.environ.setdefault("TRAFKA_HTTP_LISTENERS", "")
os.environ.setdefault("TRAFKA_SCHEMA_REGISTRY_LISTENERS", "")
os.environ.setdefault("TRAFKA_REST_PROXY_LISTENERS", "")
os.environ.setdefault("TRAFKA_GROUP_INITIAL_REBALANCE_DELAY_MS", "0")
