"""`trafka dev cluster`: a ZooKeeper and N brokers on loopback, for a try-out; `trafka dev
zookeeper`: only the ZooKeeper, for brokers started by hand.

    trafka dev cluster --brokers 3            # ZooKeeper from Debian's package + 3 brokers
    trafka dev cluster --brokers auto         # one broker per core: all of the machine
    trafka dev cluster --zookeeper HOST:PORT  # an existing ZooKeeper (a chroot is fine)
    trafka dev zookeeper                      # ZooKeeper on 127.0.0.1:2181 until Ctrl-C

Each broker is a `trafka serve` process of its own (a Python process uses one core, so
brokers per host is how Trafka uses a whole machine: leaders spread over them), on ports
`--base-port`, `--base-port`+1, ... of 127.0.0.1, with its data dir and log under
`--data-dir` (a temporary dir, removed at the end, unless given). The topics default to
replication factor min(3, N) and, from 3 brokers on, min.insync.replicas=2, so acks=all
means what it does in production; `--set KEY=VALUE` passes any broker setting on.

Broker i (from 0) serves its console, Schema Registry and REST Proxy on the default ports
plus 10 i (8080, 8090, ...; 8081, 8091, ...; 8082, 8092, ...), handed over as defaults
(`trafka serve --default`): one that is taken is left off with a warning, and the broker
serves all the same. A base given with --set (or TRAFKA_* in the environment) is the
user's: taken, it stops that broker.

Prints the bootstrap string and what each broker serves once every broker is registered,
and has `__consumer_offsets` and `__transaction_state` created then (Kafka creates them at
first use, never on fewer live brokers than their replication factor: a broker killed
before the first group would otherwise leave groups without a coordinator).
A broker that dies (`kill -9` to try failover) is reported and the others keep serving;
Enter (or SIGUSR1 to this process) starts the dead brokers again, with their node id, ports
and data. Ctrl-C (or SIGTERM) stops the brokers with a controlled shutdown, then ZooKeeper.
"""

from __future__ import annotations

import argparse
import os
import re
import select
import shutil
import signal
import socket
import struct
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

from cli.launcher import StopSignal, offset_listener, start_broker, stop_brokers
from server.config import SETTINGS, ConfigError, parse_set_options
from cli.zookeeper_server import ZooKeeperServer, free_port, recv_exact

STARTUP_TIMEOUT_S = 60.0
# The HTTP sides of a broker and what its start-up line for each says (cli/serve.py and
# the sides' serve()), with the label the dev cluster prints.
HTTP_SIDES = (("http.listeners", "/metrics on http://", "console"),
              ("schema.registry.listeners", "schema registry on http://", "schema registry"),
              ("rest.proxy.listeners", "rest proxy on http://", "rest proxy"))


def add_parser(sub: argparse._SubParsersAction) -> dict[str, argparse.ArgumentParser]:
    """`trafka dev ...`; returns its commands' parsers by name (for their own usage lines)."""
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
    zookeeper = dev_sub.add_parser("zookeeper", help="run Debian's ZooKeeper on loopback until Ctrl-C "
                                                     "(for brokers started by hand)")
    zookeeper.add_argument("--port", type=int, default=2181, help="client port on 127.0.0.1 (default 2181)")
    zookeeper.add_argument("--data-dir", metavar="PATH",
                           help="where ZooKeeper keeps its data and log (default: a temporary dir, removed)")
    return {"cluster": cluster, "zookeeper": zookeeper}


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


def http_bases(settings: dict[str, str], environ: dict[str, str] | os._Environ) -> dict[str, tuple[str, bool]]:
    """Each HTTP side's base address and whether the user chose it (--set, or TRAFKA_* in
    the environment) rather than leaving it at the built-in default. Removes them from
    `settings`: every broker gets its own, offset from the base."""
    bases = {}
    for name, _line, _label in HTTP_SIDES:
        env = "TRAFKA_" + name.upper().replace(".", "_")
        if name in settings:
            bases[name] = (settings.pop(name), True)
        elif env in environ:
            bases[name] = (environ[env], True)
        else:
            bases[name] = (SETTINGS[name].default, False)
    return bases


@dataclass
class DevBroker:
    """One broker of the dev cluster: how to start it again, and its process."""

    node: int
    port: int
    settings: dict[str, str]
    defaults: dict[str, str]
    proc: subprocess.Popen | None = None
    log_offset: int = 0  # where this run's output starts in its log file
    reported: bool = False  # its death was reported
    returning: bool = False  # started again, not yet registered
    sides: dict[str, str] = field(default_factory=dict)  # HTTP side -> the address it was given

    def start(self, root: Path) -> None:
        log = root / f"broker-{self.node}.log"
        self.log_offset = log.stat().st_size if log.exists() else 0
        self.proc = start_broker(root, self.node, f"127.0.0.1:{self.port}", self.settings, defaults=self.defaults)
        self.reported = False

    @property
    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def output(self, root: Path) -> str:
        """What this run of the broker wrote to its log so far."""
        try:
            with open(root / f"broker-{self.node}.log", "rb") as log:
                log.seek(self.log_offset)
                return log.read().decode(errors="replace")
        except OSError:
            return ""


def run(args: argparse.Namespace) -> int:
    if args.dev_command == "zookeeper":
        return run_zookeeper(args)
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
    brokers: list[DevBroker] = []
    stop = StopSignal()
    restart = _RestartRequests()
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
        bases = http_bases(settings, os.environ)
        for node in range(1, count + 1):
            # each broker its own HTTP, Schema Registry and REST Proxy ports: PORT + 10 i
            own, defaults, sides = dict(settings), {}, {}
            for name, (base, chosen) in bases.items():
                address = offset_listener(base, node - 1)
                (own if chosen else defaults)[name] = address
                sides[name] = address
            broker = DevBroker(node, args.base_port + node - 1, own, defaults, sides=sides)
            broker.start(root)
            brokers.append(broker)
        failed = _wait_registered(brokers, stop, root)
        if failed:
            print(f"trafka: {failed}", file=sys.stderr)
            return 1
        if stop.signum is not None:
            return 0
        _create_coordinator_topics(brokers[0].port)
        bootstrap = ",".join(f"127.0.0.1:{b.port}" for b in brokers)
        print(f"trafka: {count} brokers up; bootstrap servers: {bootstrap}", flush=True)
        for broker in brokers:
            print(f"trafka: broker {broker.node} (pid {broker.proc.pid}): {_serves(broker, root)}", flush=True)
        print(f"trafka: broker logs in {root}/broker-N.log; a broker that dies is reported and the others go on; "
              f"Enter (or kill -USR1 {os.getpid()}) starts dead brokers again; Ctrl-C stops everything", flush=True)
        _supervise(brokers, stop, restart, root)
        return 0
    finally:
        restart.restore()
        stop_brokers([(b.node, b.port, b.proc) for b in brokers if b.proc is not None])
        if zookeeper is not None:
            zookeeper.stop()
        stop.restore()
        if temporary:
            shutil.rmtree(root, ignore_errors=True)
        print("trafka: stopped", flush=True)


class _RestartRequests:
    """Enter on the terminal, or SIGUSR1: start the dead brokers again. Enter counts only
    while this process is in the terminal's foreground (a background one never reads it)."""

    def __init__(self) -> None:
        self.requested = False
        self._previous = signal.signal(signal.SIGUSR1, self._handle)
        self._stdin: int | None = None
        try:
            fd = sys.stdin.fileno()
            os.fstat(fd)
            self._stdin = fd
        except (OSError, ValueError, AttributeError):
            pass

    def _handle(self, _signum, _frame) -> None:
        self.requested = True

    def wait(self, timeout: float) -> None:
        """Sleep up to `timeout` s, returning early on a line typed on stdin."""
        fd = self._stdin
        if fd is None or (os.isatty(fd) and not _foreground(fd)):
            time.sleep(timeout)
            return
        try:
            readable, _, _ = select.select([fd], [], [], timeout)
        except (OSError, ValueError):
            readable = []
        if not readable:
            return
        try:
            data = os.read(fd, 4096)
        except OSError:
            data = b""
        if not data:  # end of input (/dev/null, a closed pipe): Enter cannot come any more
            self._stdin = None
            return
        if b"\n" in data:
            self.requested = True

    def restore(self) -> None:
        signal.signal(signal.SIGUSR1, self._previous)


def _foreground(fd: int) -> bool:
    try:
        return os.tcgetpgrp(fd) == os.getpgrp()
    except OSError:
        return False


def _supervise(brokers: list[DevBroker], stop: StopSignal, restart: _RestartRequests, root: Path) -> None:
    """Until Ctrl-C: report a broker that died (the others keep serving), start the dead ones
    again when asked, say when a restarted one is registered again."""
    next_check = 0.0
    while stop.signum is None:
        for broker in brokers:
            if broker.proc is not None and not broker.alive and not broker.reported:
                broker.reported = True
                broker.returning = False
                living = [str(b.node) for b in brokers if b.alive]
                last = _last_error(broker.output(root))
                print(f"trafka: broker {broker.node} (pid {broker.proc.pid}) {_how_it_ended(broker.proc.returncode)}"
                      f"{f': {last}' if last else ''}; brokers {', '.join(living) or 'none'} keep serving; "
                      f"Enter (or kill -USR1 {os.getpid()}) starts it again; log {root}/broker-{broker.node}.log",
                      file=sys.stderr, flush=True)
        if restart.requested:
            restart.requested = False
            dead = [b for b in brokers if not b.alive]
            if not dead:
                print("trafka: every broker is running", flush=True)
            for broker in dead:
                broker.start(root)
                broker.returning = True
                print(f"trafka: broker {broker.node} starting again (pid {broker.proc.pid}) on 127.0.0.1:{broker.port}",
                      flush=True)
        now = time.monotonic()
        if now >= next_check:
            next_check = now + 1.0
            for broker in brokers:
                if broker.returning and broker.alive and _registered_brokers(broker.port) >= 1 \
                        and "trafka: listening on" in broker.output(root):
                    broker.returning = False
                    print(f"trafka: broker {broker.node} (pid {broker.proc.pid}) is back: {_serves(broker, root)}",
                          flush=True)
        restart.wait(0.2)


def _how_it_ended(returncode: int) -> str:
    if returncode < 0:
        try:
            return f"was killed by {signal.Signals(-returncode).name}"
        except ValueError:
            return f"was killed by signal {-returncode}"
    return f"exited with {returncode}"


def _last_error(output: str) -> str:
    """The one-line reason a broker gives for stopping (`trafka: ...` on stderr), if any."""
    lines = [line for line in output.splitlines() if line.startswith("trafka: ") and " on http://" not in line
             and not line.startswith("trafka: listening on")]
    return lines[-1][len("trafka: "):] if lines else ""


def _serves(broker: DevBroker, root: Path) -> str:
    """What the broker serves, from its start-up lines: Kafka and each HTTP side it could bind."""
    output = broker.output(root)
    parts = [f"kafka 127.0.0.1:{broker.port}"]
    for name, line, label in HTTP_SIDES:
        found = re.search(re.escape(line) + r"(\S+)", output)
        if found:
            parts.append(f"{label} http://{found.group(1)}")
        elif broker.sides.get(name):
            parts.append(f"{label} off ({broker.sides[name]} taken, see its log)")
    return ", ".join(parts)


def _wait_registered(brokers: list[DevBroker], stop: StopSignal, root: Path) -> str | None:
    """Until every broker answers Metadata listing all of them and has finished starting (its
    `listening on` line: the HTTP sides are up); an error message if not."""
    deadline = time.monotonic() + STARTUP_TIMEOUT_S
    while stop.signum is None:
        for broker in brokers:
            if not broker.alive:
                last = _last_error(broker.output(root))
                return (f"broker {broker.node} {_how_it_ended(broker.proc.returncode)} while starting"
                        f"{f': {last}' if last else ''} (log {root}/broker-{broker.node}.log)")
        if all(_registered_brokers(b.port) == len(brokers) and "trafka: listening on" in b.output(root)
               for b in brokers):
            return None
        if time.monotonic() > deadline:
            return f"the brokers did not all register within {STARTUP_TIMEOUT_S:.0f} s"
        time.sleep(0.2)
    return None


def _create_coordinator_topics(port: int) -> None:
    """Have `__consumer_offsets` and `__transaction_state` created now that every broker is
    live: as in Kafka they are created at first use, and never on fewer live brokers than
    their replication factor, so a broker killed before any group or transaction ran would
    leave groups and transactions without a coordinator until it is back. A FindCoordinator
    for each creates them (the answer is COORDINATOR_NOT_AVAILABLE meanwhile)."""
    from wire import encode_request
    from wire.registry import ApiKey

    for key_type in (0, 1):  # GROUP, TRANSACTION
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=5) as sock:
                sock.sendall(encode_request(ApiKey.FIND_COORDINATOR, 2, 1, {"key": "trafka-dev", "key_type": key_type},
                                            client_id="trafka-dev"))
                size = struct.unpack(">i", recv_exact(sock, 4))[0]
                recv_exact(sock, size)
        except (OSError, struct.error):
            pass  # created at first use then


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


def run_zookeeper(args: argparse.Namespace) -> int:
    """`trafka dev zookeeper`: Debian's ZooKeeper on 127.0.0.1:--port until Ctrl-C."""
    reason = ZooKeeperServer.unavailable_reason()
    if reason:
        print(f"trafka: cannot start ZooKeeper: {reason}", file=sys.stderr)
        return 1
    try:
        with socket.socket() as probe:  # another ZooKeeper there would answer our readiness check
            probe.bind(("127.0.0.1", args.port))
    except OSError as exc:
        print(f"trafka: --port {args.port}: 127.0.0.1:{args.port} is taken ({exc.strerror}); a ZooKeeper "
              "already running there can be used as it is", file=sys.stderr)
        return 1
    temporary = args.data_dir is None
    root = Path(tempfile.mkdtemp(prefix="trafka-zk-")) if temporary else Path(args.data_dir)
    stop = StopSignal()
    zookeeper = ZooKeeperServer(port=args.port, data_dir=root)
    try:
        try:
            zookeeper.start()
        except RuntimeError as exc:
            print(f"trafka: {str(exc).splitlines()[0]} (log {zookeeper.log_path})", file=sys.stderr)
            return 1
        print(f"trafka: ZooKeeper on {zookeeper.connect_string} (data and log in {root}); "
              f"zookeeper.connect={zookeeper.connect_string}/trafka for the brokers; Ctrl-C stops it", flush=True)
        while stop.signum is None:
            if not zookeeper.running:
                print(f"trafka: ZooKeeper exited; see {zookeeper.log_path}", file=sys.stderr)
                return 1
            time.sleep(0.2)
        return 0
    finally:
        zookeeper.stop()
        stop.restore()
        if temporary:
            shutil.rmtree(root, ignore_errors=True)
