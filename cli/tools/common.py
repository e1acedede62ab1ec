"""What every operator command shares: the connection options (`-b`, `--command-config`,
`--format`), the Kafka-properties-to-librdkafka translation, output in text or JSON, and
turning a Kafka error into one line on stderr.

The commands are clients of the broker like any other: they speak Kafka through
confluent-kafka (librdkafka), so they work against Trafka and against any Kafka cluster.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import sys
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import Any

DEFAULT_BOOTSTRAP = "127.0.0.1:9092"
TIMEOUT_S = 30.0
_timeout = [TIMEOUT_S]

COMMAND_CONFIG_HELP = (
    "Kafka client properties file (security.protocol, sasl.mechanism, sasl.jaas.config or "
    "sasl.username/sasl.password, ssl.*). Java names are mapped to librdkafka's: sasl.jaas.config's "
    "username/password become sasl.username/sasl.password, an empty ssl.endpoint.identification.algorithm "
    "becomes none, a PEM ssl.truststore.location becomes ssl.ca.location. librdkafka cannot read JKS or "
    "PKCS12 truststores (ssl.truststore.location): give the CA as a PEM file with ssl.ca.location; a PKCS12 "
    "ssl.keystore.location works. Any other librdkafka setting may be given too.")


class CliError(Exception):
    """A failure to report as one line on stderr; `code` is the exit status."""

    def __init__(self, message: str, code: int = 1) -> None:
        super().__init__(message)
        self.code = code


class ToolParser(argparse.ArgumentParser):
    """argparse, but a bad argument is one line on stderr (exit 2), not usage + message."""

    def error(self, message: str) -> None:  # type: ignore[override]
        self.exit(2, f"{self.prog}: error: {message} (see {self.prog} --help)\n")


def common_options() -> argparse.ArgumentParser:
    """The parent parser every leaf command gets (`parents=[...]`)."""
    parent = argparse.ArgumentParser(add_help=False)
    group = parent.add_argument_group("connection")
    group.add_argument("-b", "--bootstrap-server", metavar="HOST:PORT",
                       default=os.environ.get("TRAFKA_BOOTSTRAP", DEFAULT_BOOTSTRAP),
                       help=f"broker(s) to connect to (default {DEFAULT_BOOTSTRAP}; env TRAFKA_BOOTSTRAP)")
    group.add_argument("--command-config", metavar="FILE", help=COMMAND_CONFIG_HELP)
    group.add_argument("--timeout", type=float, default=TIMEOUT_S, metavar="SECONDS",
                       help=f"how long to wait for the cluster's answers (default {TIMEOUT_S:.0f})")
    return parent


def add_output_format(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--format", choices=("text", "json"), default="text", help="output format (default text)")


# ------------------------------------------------------------------ client configuration

_JAAS_OPTION = re.compile(r'(\w+)\s*=\s*"((?:[^"\\]|\\.)*)"')
_NO_TRUSTSTORE = ("librdkafka cannot read a JKS or PKCS12 truststore: give the CA certificates as a PEM file with "
                  "ssl.ca.location")
_DROPPED = {"ssl.keystore.type", "key.serializer", "value.serializer", "key.deserializer", "value.deserializer"}


def read_properties(path: str) -> dict[str, str]:
    """A Java .properties file: key=value or key: value, # and ! comments, \\ continuations."""
    try:
        text = Path(path).read_text()
    except OSError as exc:
        raise CliError(f"cannot read --command-config {path}: {exc.strerror}", 2) from None
    props: dict[str, str] = {}
    pending = ""
    for raw in text.splitlines():
        line = pending + raw.strip()
        pending = ""
        if not line or line[0] in "#!":
            continue
        if line.endswith("\\"):
            pending = line[:-1]
            continue
        key, value = _split(line)
        props[key] = value
    return props


def _split(line: str) -> tuple[str, str]:
    match = re.match(r"([^=:\s]+)\s*[=:]?\s*(.*)", line)
    if not match:
        raise CliError(f"--command-config: cannot read line {line!r}", 2)
    return match.group(1), match.group(2)


def librdkafka_config(props: dict[str, str]) -> dict[str, str]:
    """Kafka Java client properties → librdkafka settings (see COMMAND_CONFIG_HELP)."""
    conf: dict[str, str] = {}
    pem_truststore = props.get("ssl.truststore.type", "").upper() == "PEM"
    for key, value in props.items():
        if key == "ssl.truststore.location" and pem_truststore:
            conf["ssl.ca.location"] = value  # a PEM "truststore" is what librdkafka calls the CA location
            continue
        if key == "ssl.truststore.type" and pem_truststore:
            continue
        if key.startswith("ssl.truststore."):
            raise CliError(f"--command-config: {key} is not supported: {_NO_TRUSTSTORE}", 2)
        if key == "ssl.keystore.type" and value.upper() == "JKS":
            raise CliError("--command-config: JKS keystores are not supported by librdkafka: use PKCS12 or "
                           "ssl.certificate.location/ssl.key.location (PEM)", 2)
        if key in _DROPPED:
            continue
        if key == "sasl.jaas.config":
            options = dict(_JAAS_OPTION.findall(value))
            if "username" in options:
                conf["sasl.username"] = options["username"]
            if "password" in options:
                conf["sasl.password"] = options["password"]
            continue
        if key == "sasl.mechanism":
            conf["sasl.mechanisms"] = value
            continue
        if key == "ssl.endpoint.identification.algorithm":
            conf[key] = value or "none"
            continue
        if key == "bootstrap.servers":
            continue  # -b decides
        conf[key] = value
    return conf


def client_config(args: argparse.Namespace, **more: Any) -> dict[str, Any]:
    """librdkafka settings for this invocation: bootstrap + --command-config + `more`."""
    conf: dict[str, Any] = {"bootstrap.servers": args.bootstrap_server}
    if getattr(args, "command_config", None):
        conf.update(librdkafka_config(read_properties(args.command_config)))
    conf.setdefault("client.id", "trafka-cli")
    # librdkafka logs connection trouble on stderr by itself; the command reports the
    # error it ends with, in one line (add log_level=7 to --command-config to see them).
    conf.setdefault("log_level", 0)
    conf.update(more)
    return conf


def timeout() -> float:
    """Seconds to wait for an answer: --timeout of this invocation."""
    return _timeout[0]


_clients: list[Any] = []


def admin_client(args: argparse.Namespace):
    """An AdminClient for this invocation. It is kept referenced until the process ends: a
    client that is garbage-collected cancels its pending futures (DESTROY)."""
    from confluent_kafka.admin import AdminClient

    client = AdminClient(client_config(args, **{"socket.timeout.ms": int(timeout() * 1000)}))
    _clients.append(client)
    return client


def result(future, what: str = "") -> Any:
    """A future's value, with the client's timeout (a broker that never answers is an error)."""
    return future.result(timeout=timeout())


# ------------------------------------------------------------------ output

def emit(args: argparse.Namespace, data: Any, text: Callable[[Any], str] | str | None = None) -> None:
    """Print `data` as JSON (--format json) or as `text` (a string, or a function of data)."""
    if getattr(args, "format", "text") == "json":
        print(json.dumps(data, indent=None, sort_keys=False))
        return
    out = text(data) if callable(text) else text
    if out:
        print(out)


def table(headers: Sequence[str], rows: Iterable[Sequence[Any]]) -> str:
    """Left-aligned columns, two spaces apart (rpk's look)."""
    cells = [[str(h) for h in headers]] + [["" if c is None else str(c) for c in row] for row in rows]
    widths = [max(len(row[i]) for row in cells) for i in range(len(headers))]
    return "\n".join("  ".join(c.ljust(w) for c, w in zip(row, widths)).rstrip() for row in cells)


def key_values(pairs: Sequence[str], option: str) -> dict[str, str]:
    """`k=v` arguments → dict (a missing '=' is a bad argument)."""
    out: dict[str, str] = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep or not key:
            raise CliError(f"{option} expects KEY=VALUE, got {pair!r}", 2)
        out[key] = value
    return out


# ------------------------------------------------------------------ errors

def report_futures(args: argparse.Namespace, futures: dict, verb: str) -> int:
    """Wait for per-topic futures; print one line per topic, errors as NAME: message. Exit 1 if any failed."""
    from confluent_kafka import KafkaException

    ok: list[str] = []
    failed: dict[str, str] = {}
    for name, future in futures.items():
        try:
            result(future)
            ok.append(name)
        except KafkaException as exc:
            failed[name] = describe_kafka_error(exc)
    if args.format == "json":
        emit(args, {"ok": ok, "errors": failed})
    else:
        for name in ok:
            print(f"{verb} {name}" if not verb.endswith(":") else f"{name} {verb[:-1]}")
    if failed:
        for name, message in failed.items():
            print(f"{args.prog}: error: {name}: {message}", file=sys.stderr)
        return 1
    return 0


def describe_kafka_error(exc: BaseException) -> str:
    """'NAME: message' for a KafkaException / KafkaError, str() otherwise."""
    from confluent_kafka import KafkaError, KafkaException

    err = exc.args[0] if isinstance(exc, KafkaException) and exc.args else exc
    if isinstance(err, KafkaError):
        name = err.name().lstrip("_")
        message = err.str()
        return f"{name}: {message}" if message and message != name else name
    return str(exc)


CONNECT_TIMEOUT_S = 5.0
# librdkafka's errors for "could not talk to the cluster": the bootstrap servers tried are
# named with them, since librdkafka's own message names none.
_UNREACHABLE = ("_TRANSPORT", "_ALL_BROKERS_DOWN", "_TIMED_OUT", "_RESOLVE")


def bootstrap_addresses(bootstrap: str) -> list[tuple[str, int]]:
    """`-b` as (host, port) pairs: comma separated HOST:PORT, a PLAINTEXT:// (any scheme)
    prefix allowed, IPv6 in brackets; a bad one is a bad argument."""
    addresses = []
    for item in filter(None, (i.strip() for i in bootstrap.split(","))):
        text = item.split("://", 1)[1] if "://" in item else item
        host, sep, port = text.rpartition(":")
        if not sep or not host or not port.isdigit():
            raise CliError(f"-b/--bootstrap-server: expected HOST:PORT[,HOST:PORT...], got {item!r}", 2)
        addresses.append((host.strip("[]"), int(port)))
    if not addresses:
        raise CliError("-b/--bootstrap-server: no address given", 2)
    return addresses


def check_reachable(bootstrap: str, seconds: float, tls: bool = False) -> None:
    """Fail fast, naming what was tried, when no bootstrap server answers: librdkafka would
    retry for the whole --timeout (30 s) and end with "Broker transport failure", naming no
    address; rpk answers at once ("unable to dial"). One server that answers is enough.
    Without TLS the probe is a Kafka ApiVersions v0 request (allowed before SASL too), so a
    port that accepts connections but is no Kafka broker (an HTTP port) fails fast as well;
    with TLS the TCP connection is all that is tried, the handshake is librdkafka's."""
    import socket
    import struct

    request = struct.pack(">hhih", 18, 0, 1, len(b"trafka-cli")) + b"trafka-cli"  # ApiVersions v0, correlation 1
    tried = []
    for host, port in bootstrap_addresses(bootstrap):
        try:
            sock = socket.create_connection((host, port), timeout=seconds)
        except OSError as exc:
            reason = f"no connection within {seconds:g} s" if isinstance(exc, TimeoutError) else \
                (exc.strerror or str(exc))
            tried.append(f"{host}:{port} ({reason})")
            continue
        head = b""
        with sock:
            if tls:
                return
            try:
                sock.sendall(struct.pack(">i", len(request)) + request)
                while len(head) < 8:
                    chunk = sock.recv(8 - len(head))
                    if not chunk:
                        break
                    head += chunk
            except OSError:  # reset, or silent past `seconds`: not a Kafka broker's answer either way
                pass
        if len(head) == 8 and struct.unpack(">ii", head)[1] == 1:
            return
        tried.append(f"{host}:{port} (accepts connections but answered no Kafka ApiVersions request)")
    raise CliError(f"TRANSPORT: no Kafka broker at {', '.join(tried)}")


def run_guarded(prog: str, handler: Callable[[argparse.Namespace], int | None], args: argparse.Namespace) -> int:
    """Run a command; Kafka errors and bad arguments become one stderr line and an exit code."""
    from confluent_kafka import KafkaError, KafkaException

    _timeout[0] = getattr(args, "timeout", TIMEOUT_S)
    try:
        if getattr(args, "bootstrap_server", None):
            protocol = client_config(args).get("security.protocol", "plaintext").upper()
            check_reachable(args.bootstrap_server, min(CONNECT_TIMEOUT_S, timeout()), tls="SSL" in protocol)
        return handler(args) or 0
    except CliError as exc:
        print(f"{prog}: error: {exc}", file=sys.stderr)
        return exc.code
    except (KafkaException, KafkaError) as exc:
        message = describe_kafka_error(exc)
        if message.startswith(tuple(name.lstrip("_") for name in _UNREACHABLE)):
            message += f" (bootstrap servers: {args.bootstrap_server})"
        print(f"{prog}: error: {message}", file=sys.stderr)
        return 1
    except TimeoutError:
        print(f"{prog}: error: no answer from {args.bootstrap_server} within {timeout():g} s", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:
        return 0
