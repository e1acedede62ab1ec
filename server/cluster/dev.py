"""`trafka dev cluster`: a ZooKeeper and N brokers on loopback, for a try-out.

    trafka dev cluster --brokers 3            # ZooKeeper from Debian's package + 3 brokers
    trafka dev cluster --brokers auto         # one broker per core: all of the machine
    trafka dev cluster --zookeeper HOST:PORT  # an existing ZooKeeper (a chroot is fine)

Each broker is a `trafka serve` process of its own (a Python process uses one core, so
brokers per host is how Trafka uses a whole machine: leaders spread over them), on ports
`--base-port`, `--base-port`+1, ... of 127.0.0.1, with its data dir and log under
`--data-dir` (a temporary dir, removed at the end, unless given). The topics default to
replication factor min(3, N) and, from 3 brokers on, min.insync.replicas=2, so acks=all
means what it does in production; `--set KEY=VALUE` passes any broker setting on. Prints
the bootstrap string once every broker is registered; Ctrl-C (or SIGTERM) stops the
brokers with a controlled shutdown, then ZooKeeper.
"""

from __future__ import annotations

import argparse
import os
import shutil
import socket
import struct
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from server.cluster.launcher import StopSignal, offset_listener, start_broker, stop_brokers
from server.config import ConfigError, parse_set_options
from server.cluster.zookeeper_server import ZooKeeperServer, free_port, recv_exact

STARTUP_TIMEOUT_S = 60.0


def add_parser(sub: argparse._SubParsersAction) -> None:
    dev = sub.add_parser("dev", help="development helpers")
    dev_sub = dev.add_subparsers(dest="dev_command", required=True)
    cluster = dev_sub.add_parser("cluster", help="run ZooKeeper and N brokers on loopback until Ctrl-C")
    cluster.add_argument("--brokers", default="3",
                         help="number of brokers, or 'auto' for one per core (default 3)")
    cluster.add_argument("--zookeeper", metavar="HOST:PORT[/chroot]",
                         help="use this ZooKeeper instead of starting one")
    cluster.add_argument("--base-port", type=int, default=9092, help="first broker's port (default 9092)")
    cluster.add_argument("--data-dir", metavar="PATH",
                         help="where brokers (and ZooKeeper) keep data and logs (default: a temporary dir, removed)")
    cluster.add_argument("--set", metavar="KEY=VALUE", action="append", default=[],
                         help="a broker setting for every broker (repeatable)")


def broker_count(value: str) -> int:
    if value == "auto":
        return os.cpu_count() or 1
    count = int(value)
    if count < 1:
        raise ValueError("--brokers must be at least 1")
    return count


def default_settings(brokers: int) -> dict[str, str]:
    replication = str(min(3, brokers))
    settings = {"default.replication.factor": replication, "offsets.topic.replication.factor": replication,
                "transaction.state.log.replication.factor": replication}
    settings["transaction.state.log.min.isr"] = str(min(2, brokers))
    if brokers >= 3:
        settings["min.insync.replicas"] = "2"
    return settings


def run(args: argparse.Namespace) -> int:
    try:
        count = broker_count(args.brokers)
    except ValueError as exc:
        print(f"trafka: {exc}", file=sys.stderr)
        return 2
    settings = default_settings(count)
    try:
        settings.update(parse_set_options(args.set))
    except ConfigError as exc:
        print(f"trafka: {exc}", file=sys.stderr)
        return 2
    temporary = args.data_dir is None
    root = Path(tempfile.mkdtemp(prefix="trafka-dev-")) if temporary else Path(args.data_dir)
    root.mkdir(parents=True, exist_ok=True)
    zookeeper: ZooKeeperServer | None = None
    brokers: list[tuple[int, int, subprocess.Popen]] = []
    stop = StopSignal()
    try:
        if args.zookeeper:
            connect = args.zookeeper
        else:
            reason = ZooKeeperServer.unavailable_reason()
            if reason:
                print(f"trafka: cannot start ZooKeeper: {reason}; or pass --zookeeper HOST:PORT", file=sys.stderr)
                return 1
            zk_dir = root / "zookeeper"
            zk_dir.mkdir(exist_ok=True)
            zookeeper = ZooKeeperServer(port=free_port(), data_dir=zk_dir).start()
            connect = zookeeper.connect_string
            print(f"trafka: ZooKeeper on {connect} (data and log in {zk_dir})", flush=True)
        settings["zookeeper.connect"] = connect
        # No HTTP listeners unless --set http.listeners=HOST:PORT asks (then PORT, PORT+10, ...):
        # a try-out should not fail on a taken 8080.
        http = settings.pop("http.listeners", "")
        for node in range(1, count + 1):
            port = args.base_port + node - 1
            # each broker its own HTTP, Schema Registry and REST Proxy ports: PORT, PORT+10, ... (8080, 8090 / 8081, 8091 / 8082, 8092, ...)
            registry = settings.get("schema.registry.listeners",
                                    os.environ.get("TRAFKA_SCHEMA_REGISTRY_LISTENERS", "127.0.0.1:8081"))
            rest = settings.get("rest.proxy.listeners", os.environ.get("TRAFKA_REST_PROXY_LISTENERS", "127.0.0.1:8082"))
            own = {**settings, "http.listeners": offset_listener(http, node - 1),
                   "schema.registry.listeners": offset_listener(registry, node - 1),
                   "rest.proxy.listeners": offset_listener(rest, node - 1)}
            brokers.append((node, port, start_broker(root, node, f"127.0.0.1:{port}", own)))
        ports = [port for _node, port, _proc in brokers]
        failed = _wait_registered(brokers, ports, stop)
        if failed:
            print(f"trafka: {failed}", file=sys.stderr)
            return 1
        if stop.signum is None:
            bootstrap = ",".join(f"127.0.0.1:{p}" for p in ports)
            print(f"trafka: {count} brokers up; bootstrap servers: {bootstrap}", flush=True)
            print(f"trafka: broker logs in {root}/broker-N.log; Ctrl-C stops everything", flush=True)
            while stop.signum is None:
                exited = [(node, proc.returncode) for node, _port, proc in brokers if proc.poll() is not None]
                if exited:
                    print(f"trafka: broker {exited[0][0]} exited with {exited[0][1]}; see {root}/broker-"
                          f"{exited[0][0]}.log; stopping", file=sys.stderr)
                    return 1
                time.sleep(0.2)
        return 0
    finally:
        stop_brokers(brokers)
        if zookeeper is not None:
            zookeeper.stop()
        stop.restore()
        if temporary:
            shutil.rmtree(root, ignore_errors=True)
        print("trafka: stopped", flush=True)


def _wait_registered(brokers: list[tuple[int, int, subprocess.Popen]], ports: list[int],
                     stop: StopSignal) -> str | None:
    """Until every broker answers Metadata listing all of them; an error message if not."""
    deadline = time.monotonic() + STARTUP_TIMEOUT_S
    while stop.signum is None:
        for node, _port, proc in brokers:
            if proc.poll() is not None:
                return f"broker {node} exited with {proc.returncode} while starting"
        if all(_registered_brokers(port) == len(ports) for port in ports):
            return None
        if time.monotonic() > deadline:
            return f"the brokers did not all register within {STARTUP_TIMEOUT_S:.0f} s"
        time.sleep(0.2)
    return None


def _registered_brokers(port: int) -> int:
    """How many brokers this one's Metadata lists (0 if it does not answer yet)."""
    from wire import decode_response, encode_request
    from wire.registry import ApiKey

    try:
        with socket.create_connection(("127.0.0.1", port), timeout=2) as sock:
            sock.sendall(encode_request(ApiKey.METADATA, 9, 1, {"topics": [], "allow_auto_topic_creation": False},
                                        client_id="trafka-dev"))
            size = struct.unpack(">i", recv_exact(sock, 4))[0]
            _correlation, body = decode_response(ApiKey.METADATA, 9, recv_exact(sock, size))
        return len(body["brokers"])
    except (OSError, ValueError, struct.error):
        return 0
