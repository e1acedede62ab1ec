"""The container's entrypoint: one broker, or several brokers of one cluster per host.

    TRAFKA_BROKERS_PER_HOST=1 (default)   exec `trafka serve` with the TRAFKA_* settings
    TRAFKA_BROKERS_PER_HOST=N | auto      N `trafka serve` processes (auto: one per core)

A Python process uses one core; on a machine with more, several brokers of the same
cluster are how Trafka uses all of it (leaders spread over them). They need a cluster, so
TRAFKA_ZOOKEEPER_CONNECT must be set. From the one set of TRAFKA_* settings (the same as a
single broker's), broker i (0-based) gets:

- node.id = TRAFKA_NODE_ID (or TRAFKA_BROKER_ID, default 1) + i: on several hosts, give each
  host a base far enough apart (host 1: 1, host 2: 101, ...);
- listeners: the port of TRAFKA_LISTENERS (default 9092) + i, same host;
- advertised.listeners: the host of TRAFKA_ADVERTISED_LISTENERS, its port + i;
- log.dirs: TRAFKA_LOG_DIRS/broker-<node.id>;
- http.listeners: the port of TRAFKA_HTTP_LISTENERS (default 8080) + 10 i (empty: none);
- schema.registry.listeners: the port of TRAFKA_SCHEMA_REGISTRY_LISTENERS (default 8081) + 10 i;
- rest.proxy.listeners: the port of TRAFKA_REST_PROXY_LISTENERS (default 8082) + 10 i.

Every broker's output goes to the container's log. SIGTERM stops them one at a time with
a controlled shutdown; if one broker exits on its own the others are stopped and the
entrypoint exits non-zero, so the container's restart policy restarts the host's brokers.
"""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path

from cli.launcher import StopSignal, offset_listener, start_broker, stop_brokers
from server.config import ConfigError, load_config

ENV = "TRAFKA_BROKERS_PER_HOST"


def brokers_per_host(value: str) -> int:
    if value.strip().lower() == "auto":
        return os.cpu_count() or 1
    count = int(value)
    if count < 1:
        raise ValueError(f"{ENV} must be at least 1 or 'auto'")
    return count


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    try:
        count = brokers_per_host(os.environ.get(ENV, "1"))
    except ValueError as exc:
        print(f"trafka: {ENV}: {exc}", file=sys.stderr)
        return 2
    if count == 1:
        from cli.main import main as cli_main

        return cli_main(["serve", *argv])
    try:
        config = load_config()
    except ConfigError as exc:
        print(f"trafka: configuration error: {exc}", file=sys.stderr)
        return 2
    if not config.clustered:
        print(f"trafka: {ENV}={count} needs a cluster: set TRAFKA_ZOOKEEPER_CONNECT", file=sys.stderr)
        return 2
    root = config.data_dir
    root.mkdir(parents=True, exist_ok=True)
    advertised_host, advertised_port = config.advertised
    if not config.advertised_host and not config.advertised_port:
        advertised_host, advertised_port = None, None
    stop = StopSignal()
    brokers = []
    try:
        for i in range(count):
            node = config.node_id + i
            listen = f"{config.listen_host}:{config.listen_port + i}"
            advertised = f"{advertised_host}:{advertised_port + i}" if advertised_host else None
            print(f"trafka: starting broker {node} on {listen}" + (f" (advertised {advertised})" if advertised else ""),
                  flush=True)
            # each broker its own HTTP and Schema Registry ports: PORT + 10 i (8080, 8090, ... / 8081, 8091, ...)
            own = {"http.listeners": offset_listener(config.get("http.listeners"), i),
                   "schema.registry.listeners": offset_listener(config.raw("schema.registry.listeners"), i),
                   "rest.proxy.listeners": offset_listener(config.raw("rest.proxy.listeners"), i)}
            brokers.append((node, config.listen_port + i, start_broker(Path(root), node, listen, own, advertised,
                                                                       log_file=False)))
        while stop.signum is None:
            exited = [(node, proc.returncode) for node, _port, proc in brokers if proc.poll() is not None]
            if exited:
                print(f"trafka: broker {exited[0][0]} exited with {exited[0][1]}; stopping this host's brokers",
                      file=sys.stderr, flush=True)
                return 1
            time.sleep(0.2)
        return 0
    finally:
        stop_brokers(brokers)
        stop.restore()


if __name__ == "__main__":
    sys.exit(main())
