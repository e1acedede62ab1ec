"""`trafka serve`: the process wiring — the broker, and beside it in the same process its
HTTP listener (server/http/), the Schema Registry (schema_registry/, reaching the broker
through server/app_host.py) and the REST Proxy (rest_proxy/, a Kafka client of it).

The one module that imports the broker and the applications together: the broker never
imports an application (import contracts in pyproject.toml).

SIGTERM / SIGINT: stop accepting, wake waiting fetches, give in-flight requests up to
shutdown.timeout.ms to finish, flush the logs, exit 0.
"""

from __future__ import annotations

import argparse
import gc
import logging
import resource
import signal
import sys

import trio

from http_common.listen import BindError
from server.broker import Broker
from server.config import ConfigError, load_config, parse_set_options
from server.network import Server
from server.security.tls import check_listeners
from server.startup import StartupError, check_data_dir, startup_errors
from storage import DirectoryInUse

log = logging.getLogger("trafka")


def raise_open_files_limit() -> tuple[int, int]:
    """Raise the soft RLIMIT_NOFILE (`ulimit -n`) to the hard limit, as the JVM does for
    Kafka (-XX:+MaxFDLimit, on by default): a container's soft limit (often 1 024) is far
    below its hard one, and 100 000 partitions plus 10 000 connections need descriptors
    (docs/design/performance.md#file-descriptors). log.open.files.max, half the soft limit by
    default, follows. Returns (soft
    before, soft after); a limit that cannot be raised is logged and left as it is."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft == hard or soft == resource.RLIM_INFINITY:
        log.info("open files limit (RLIMIT_NOFILE): soft %s, hard %s", _limit(soft), _limit(hard))
        return soft, soft
    try:
        resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    except (ValueError, OSError) as exc:
        # e.g. an unlimited hard limit above the kernel's fs.nr_open
        log.warning("open files limit (RLIMIT_NOFILE): soft %s, hard %s; raising the soft limit failed: %s",
                    _limit(soft), _limit(hard), exc)
        return soft, soft
    log.info("open files limit (RLIMIT_NOFILE): soft %s raised to the hard limit %s", _limit(soft), _limit(hard))
    return soft, hard


def _limit(value: int) -> str:
    return "unlimited" if value == resource.RLIM_INFINITY else str(value)


def serve(args: argparse.Namespace) -> int:
    import os

    level = (args.log_level or os.environ.get("TRAFKA_LOG_LEVEL") or "INFO").upper()
    logging.basicConfig(level=getattr(logging, level, logging.INFO),
                        format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    raise_open_files_limit()
    overrides: dict[str, str] = {}
    if args.listen:
        overrides["listeners"] = args.listen
    if args.advertised:
        overrides["advertised.listeners"] = args.advertised
    if args.data_dir:
        overrides["log.dirs"] = args.data_dir
    if args.node_id is not None:
        overrides["node.id"] = str(args.node_id)
    if args.cluster_id:
        overrides["cluster.id"] = args.cluster_id
    try:
        overrides.update(parse_set_options(args.set))
        config = load_config(config_file=args.config, overrides=overrides, defaults=parse_set_options(args.default))
        check_listeners(config)  # keystores, truststores, mapping rules: fail here, not at a connection
    except ConfigError as exc:
        print(f"trafka: configuration error: {exc}", file=sys.stderr)
        return 2
    refused: list[BaseException] = []
    try:
        check_data_dir(config.data_dir)
        try:
            trio.run(run_broker, config)
        except* (StartupError, BindError) as group:  # alone or inside the nurseries' groups
            refused.extend(startup_errors(group, (StartupError, BindError)))
    except StartupError as exc:
        refused.append(exc)
    except KeyboardInterrupt:  # pragma: no cover - trio turns SIGINT into this outside our receiver
        pass
    if refused:  # one line, on stderr (where the log goes too)
        print(f"trafka: {refused[0]}", file=sys.stderr)
        return 1
    return 0


async def run_broker(config, *, task_status=trio.TASK_STATUS_IGNORED) -> None:
    """The broker, and its HTTP listener (server/http/) unless http.listeners is empty: bound
    before anything else (a taken port stops the start) and serving while the logs recover."""
    if not config.get("http.listeners"):
        await _run_broker(config, None, task_status=task_status)
        return
    from server.http.server import HttpBindError, HttpEndpoint

    http = HttpEndpoint(config)
    try:
        http.bind()
    except HttpBindError as exc:
        if config.explicit("http.listeners"):
            raise
        _default_port_taken("http.listeners", config, exc, "no console, /metrics, /healthz or /readyz")
        await _run_broker(config, None, task_status=task_status)
        return
    async with trio.open_nursery() as nursery:
        await nursery.start(http.serve)
        await _run_broker(config, http, task_status=task_status)
        nursery.cancel_scope.cancel()


async def _run_broker(config, http, *, task_status=trio.TASK_STATUS_IGNORED) -> None:
    broker = Broker(config)
    if http is not None:
        http.attach(broker)
    registry = _schema_registry(broker, config)  # binds its port first: a taken port stops start-up here
    rest_proxy = _rest_proxy(config)  # the same for the REST Proxy's port
    # Start-up allocates millions of objects that live as long as the process (100 000
    # partitions: logs, segments, indexes, producer state), and nothing it makes is cyclic
    # garbage worth finding: each full pass of the cyclic collector meanwhile walked all of
    # them, a third of a clean restart (23 s -> 14 s;
    # docs/design/performance.md#the-cyclic-collector). Collection resumes after,
    # with that heap frozen out of its full passes.
    gc.disable()
    try:
        try:
            await trio.to_thread.run_sync(broker.open)
        except DirectoryInUse:
            raise StartupError("log.dirs", config.raw("log.dirs"), "in use by another broker process (the lock on "
                               "its .lock file is held); each broker needs a data directory of its own") from None
        if registry is not None:
            await trio.to_thread.run_sync(registry.load)
    finally:
        gc.enable()
    if http is not None:
        http.opened = True
    gc.freeze()
    server = Server(broker)
    try:
        async with trio.open_nursery() as root:
            connections = await root.start(_connection_nursery)
            broker.nursery = root
            await root.start(broker.purgatory_timer.run)
            await root.start(broker.groups.run)
            await root.start(broker.txn.run)
            await root.start(broker.share.run)
            if broker.cluster is not None:
                await root.start(broker.cluster.run)
            await root.start(broker.run_background)
            if registry is not None:
                await root.start(registry.serve)
            addresses = await root.start(server.serve_listeners, config.listener_list, connections.nursery)
            if http is not None:
                http.attach_server(server)
            if rest_proxy is not None:
                rest_proxy.set_bootstrap(addresses)
                await root.start(rest_proxy.serve)
            host, port = config.advertised
            listening = ", ".join(f"{a[0]}:{a[1]}" for a in addresses)
            if len(config.listener_list) > 1 or config.listener_list[0].name != "PLAINTEXT":
                advertised = ", ".join(f"{l.name}://{l.advertised_host}:{l.advertised_port}" for l in config.listener_list)
            else:
                advertised = f"{host}:{port}"
            print(f"trafka: listening on {listening} (advertised {advertised}), data in {broker.data_dir.resolve()}",
                  flush=True)
            task_status.started(addresses)
            with trio.open_signal_receiver(signal.SIGTERM, signal.SIGINT) as signals:
                async for signum in signals:
                    log.info("received %s: shutting down", signal.Signals(signum).name)
                    break
            if broker.cluster is not None and config.get("controlled.shutdown.enable"):
                # Leaderships move to other brokers while this one still serves (Kafka's
                # controlled shutdown), so clients see a new leader, not a dead one.
                with trio.move_on_after(config.get("shutdown.timeout.ms") / 1000):
                    await broker.cluster.controlled_shutdown()
            if rest_proxy is not None:
                # while the Kafka listeners still serve: its consumers leave their groups
                await rest_proxy.close()
            broker.shutting_down = True
            server.close_listeners()
            broker.wake_all()
            grace = config.get("shutdown.timeout.ms") / 1000
            with trio.move_on_after(grace):
                while server.connections:
                    await trio.sleep(0.05)
            root.cancel_scope.cancel()
    finally:
        with trio.CancelScope(shield=True):
            await trio.to_thread.run_sync(broker.close)
        log.info("stopped; logs flushed")


def _default_port_taken(setting: str, config, exc: BaseException, without: str) -> None:
    """An HTTP side left off because its default address cannot be had: the user never
    asked for that port, so it must not stop the broker (several brokers on one host, or
    another program on 8080). One warning says what is missing and how to get it."""
    cause = str(exc).rpartition("): ")[2] or str(exc)  # the bind errors end with "(<setting>): <cause>"
    log.warning("%s: the default %s cannot be bound (%s): %s on this broker; set %s=HOST:PORT to serve it "
                "(a port set explicitly that cannot be bound stops the start)", setting, config.raw(setting), cause,
                without, setting)


def _schema_registry(broker, config):
    """The Schema Registry (schema_registry/) when schema.registry.listeners is set,
    its port bound; a port set explicitly that cannot be bound ends the start (serve()
    logs it, exit 1), a default one leaves the registry off."""
    listener = config.get("schema.registry.listeners")
    if not listener:
        return None
    from schema_registry import RegistryBindError, RegistryServer
    from server.app_host import AppHost

    try:
        return RegistryServer(AppHost(broker), listener)
    except RegistryBindError as exc:
        if config.explicit("schema.registry.listeners"):
            raise  # reported by serve()
        _default_port_taken("schema.registry.listeners", config, exc, "no Schema Registry")
        return None


def _rest_proxy(config):
    """The REST Proxy (rest_proxy/) when rest.proxy.listeners is set, its port bound;
    without confluent-kafka (the `rest` extra) it stays off with one log line and the broker
    starts all the same."""
    listener = config.get("rest.proxy.listeners")
    if not listener:
        return None
    import importlib

    # the proxy is a librdkafka client of this broker, and an HTTP client of its Schema Registry
    for module in ("confluent_kafka", "httpx"):
        try:
            importlib.import_module(module)
        except ImportError:
            log.warning("rest proxy: off: %s is not installed (pip install 'trafka[rest]'); "
                        "rest.proxy.listeners=%s is not served", module, listener)
            return None
    if all(item.tls for item in config.listener_list):
        log.warning("rest proxy: off: every Kafka listener uses TLS and the proxy connects to a PLAINTEXT or "
                    "SASL_PLAINTEXT one; rest.proxy.listeners=%s is not served", listener)
        return None
    from rest_proxy import RestProxyBindError, RestProxyServer

    try:
        return RestProxyServer(config, listener)
    except RestProxyBindError as exc:
        if config.explicit("rest.proxy.listeners"):
            raise  # reported by serve()
        _default_port_taken("rest.proxy.listeners", config, exc, "no REST Proxy")
        return None


class _ConnectionNursery:
    def __init__(self, nursery: trio.Nursery) -> None:
        self.nursery = nursery


async def _connection_nursery(task_status=trio.TASK_STATUS_IGNORED) -> None:
    async with trio.open_nursery() as nursery:
        task_status.started(_ConnectionNursery(nursery))
        await trio.sleep_forever()
