"""In-process: each broker has a registry of its own (tests run several brokers in one
process), nothing goes to prometheus_client's global registry, and /readyz's reasons
follow the broker's start and stop."""

from __future__ import annotations

import socket

import pytest
from prometheus_client import REGISTRY, generate_latest

from server.broker import Broker
from server.config import load_config
from server.http.server import HttpBindError, HttpEndpoint


def _broker(tmp_path, name: str) -> tuple[Broker, HttpEndpoint]:
    config = load_config(environ={}, overrides={"log.dirs": str(tmp_path / name), "http.listeners": "127.0.0.1:0"})
    endpoint = HttpEndpoint(config)
    broker = Broker(config)
    endpoint.attach(broker)
    return broker, endpoint


def test_each_broker_has_its_own_registry(tmp_path):
    a, http_a = _broker(tmp_path, "a")
    b, http_b = _broker(tmp_path, "b")
    try:
        a.open()
        b.open()
        a.create_topic("only-on-a", 2)
        text_a = generate_latest(http_a.registry).decode()
        text_b = generate_latest(http_b.registry).decode()
        assert 'kafka_log_log_size{partition="1",topic="only-on-a"}' in text_a
        assert "only-on-a" not in text_b
        assert "kafka_" not in generate_latest(REGISTRY).decode()
    finally:
        a.close()
        b.close()


def test_readyz_reasons_follow_the_start_and_the_stop(tmp_path):
    config = load_config(environ={}, overrides={"log.dirs": str(tmp_path / "r"), "http.listeners": "127.0.0.1:0"})
    endpoint = HttpEndpoint(config)
    assert endpoint.not_ready() == "recovering logs"
    assert "kafka_" not in generate_latest(endpoint.registry).decode()  # no broker yet: no metrics, no error
    broker = Broker(config)
    endpoint.attach(broker)
    assert endpoint.not_ready() == "recovering logs"
    broker.open()
    try:
        endpoint.opened = True
        assert endpoint.not_ready() == "Kafka listeners not bound yet"
        endpoint.attach_server(None)
        assert endpoint.not_ready() is None
        broker.shutting_down = True
        assert endpoint.not_ready() == "shutting down"
    finally:
        broker.close()


def test_bind_names_the_setting_when_the_port_is_taken(tmp_path):
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        config = load_config(environ={}, overrides={"log.dirs": str(tmp_path), "http.listeners": f"127.0.0.1:{port}"})
        with pytest.raises(HttpBindError, match=r"http\.listeners"):
            HttpEndpoint(config).bind()
    endpoint = HttpEndpoint(load_config(environ={}, overrides={"log.dirs": str(tmp_path), "http.listeners": "127.0.0.1:0"}))
    host, bound = endpoint.bind()
    assert host == "127.0.0.1" and bound > 0
    endpoint.sock.close()
