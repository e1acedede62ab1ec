"""Kafka's listeners: `listeners`, `advertised.listeners`, `listener.security.protocol.map`
and the inter-broker listener, parsed once at start.

How this works: `listeners=PLAINTEXT://127.0.0.1:9092,SSL://:9093` names each listener;
the four security protocol names map to themselves, any other name (CLIENT, INTERNAL...)
must appear in `listener.security.protocol.map=CLIENT:SSL,...` (Kafka's rule). A listener
without a scheme (`--listen 127.0.0.1:9092`, how Trafka always started) is PLAINTEXT.
`advertised.listeners` gives, per listener name, the address clients are told; a listener
it does not name advertises its own address (0.0.0.0 becomes 127.0.0.1 as before). An
advertised address without a scheme (`--advertised`) belongs to the first listener.
The inter-broker listener is `inter.broker.listener.name`, or the listener whose protocol
is `security.inter.broker.protocol` (Kafka allows setting one of the two).

Below server/config.py, which loads the configuration with these (load_config): it reads a
configuration through the `Settings` protocol. Whether a SASL listener can authenticate
anyone is checked on top, in server/security/listener_checks.py.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

from server.startup import ConfigError

SECURITY_PROTOCOLS = ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL")
# UpdateMetadata's security_protocol field: Kafka's SecurityProtocol ids.
SECURITY_PROTOCOL_IDS = {"PLAINTEXT": 0, "SSL": 1, "SASL_PLAINTEXT": 2, "SASL_SSL": 3}
TLS_PROTOCOLS = frozenset({"SSL", "SASL_SSL"})


class Settings(Protocol):
    """What parsing the listeners reads of a configuration (server.config.BrokerConfig,
    which is built with the result: this module sits below it)."""

    def raw(self, name: str) -> str: ...

    def source(self, name: str) -> str: ...


@dataclass(frozen=True)
class Listener:
    """One listener: where it binds, what it advertises, and its security protocol."""

    name: str
    security_protocol: str
    host: str
    port: int
    advertised_host: str
    advertised_port: int

    @property
    def tls(self) -> bool:
        return self.security_protocol in TLS_PROTOCOLS


def _split_address(text: str, what: str) -> tuple[str | None, str, int]:
    """`NAME://host:port` or `host:port` as (NAME or None, host, port)."""
    text = text.strip()
    name = None
    if "://" in text:
        name, text = text.split("://", 1)
        name = name.strip()
        if not name:
            raise ConfigError(f"{what}: a listener name is missing before :// in {text!r}")
    host, sep, port = text.rpartition(":")
    if not sep:
        raise ConfigError(f"{what} must be NAME://HOST:PORT, got {text!r}")
    try:
        number = int(port)
    except ValueError:
        raise ConfigError(f"{what} port must be a number, got {port!r}") from None
    if not 0 <= number <= 65535:
        raise ConfigError(f"{what} port {number} out of range")
    return name, host.strip("[]"), number


def protocol_map(config: Settings) -> dict[str, str]:
    """listener.security.protocol.map as {LISTENER: PROTOCOL}; the protocol names map to
    themselves unless the map says otherwise."""
    mapping = {p: p for p in SECURITY_PROTOCOLS}
    raw = config.raw("listener.security.protocol.map").strip()
    for item in filter(None, (i.strip() for i in raw.split(","))):
        name, sep, protocol = item.partition(":")
        name, protocol = name.strip().upper(), protocol.strip().upper()
        if not sep or not name:
            raise ConfigError(f"listener.security.protocol.map: {item!r} is not LISTENER:PROTOCOL")
        if protocol not in SECURITY_PROTOCOLS:
            raise ConfigError(f"listener.security.protocol.map: unknown security protocol {protocol!r} "
                              f"(one of {', '.join(SECURITY_PROTOCOLS)})")
        mapping[name] = protocol
    return mapping


def parse_listeners(config: Settings) -> tuple[Listener, ...]:
    """Every listener of `config`, in the order of `listeners`; ConfigError names the
    first problem (unknown protocol, duplicate name or port, advertising an unknown one)."""
    mapping = protocol_map(config)
    bound: list[tuple[str, str, int]] = []
    for item in filter(None, (i.strip() for i in config.raw("listeners").split(","))):
        name, host, port = _split_address(item, "listeners")
        name = (name or "PLAINTEXT").upper()
        if name not in mapping:
            raise ConfigError(f"listeners: no security protocol for listener {name}; "
                              f"add it to listener.security.protocol.map (e.g. {name}:SSL)")
        if any(b[0] == name for b in bound):
            raise ConfigError(f"listeners: listener name {name} appears more than once")
        if port and any(b[2] == port and b[1] == host for b in bound):
            raise ConfigError(f"listeners: {host}:{port} is used by more than one listener")
        bound.append((name, host or "0.0.0.0", port))
    if not bound:
        raise ConfigError("listeners is empty")
    advertised: dict[str, tuple[str, int]] = {}
    raw = config.raw("advertised.listeners").strip()
    for item in filter(None, (i.strip() for i in raw.split(","))):
        name, host, port = _split_address(item, "advertised.listeners")
        name = (name or bound[0][0]).upper()
        if not any(b[0] == name for b in bound):
            raise ConfigError(f"advertised.listeners: {name} is not one of the listeners "
                              f"({', '.join(b[0] for b in bound)})")
        if host in ("0.0.0.0", "::"):  # Kafka refuses it too: clients cannot connect to it
            raise ConfigError(f"advertised.listeners={raw}: cannot advertise the non-routable meta-address {host}; "
                              "give the address clients connect to")
        advertised[name] = (host, port)
    out = []
    for name, host, port in bound:
        ad_host, ad_port = advertised.get(name, (host, port))
        if ad_host in ("0.0.0.0", "", "::"):
            ad_host = "127.0.0.1" if ad_host != "::" else "::1"
        out.append(Listener(name, mapping[name], host, port, ad_host, ad_port or port))
    return tuple(out)


def inter_broker_listener(config: Settings, listeners: tuple[Listener, ...]) -> Listener:
    """The listener other brokers use: inter.broker.listener.name when set (Kafka rejects
    setting both it and security.inter.broker.protocol), else the first listener with the
    security.inter.broker.protocol, else (a single listener of another kind, as Trafka
    always had) the first listener."""
    by_name = {l.name: l for l in listeners}
    name_set = config.source("inter.broker.listener.name") != "default"
    protocol_set = config.source("security.inter.broker.protocol") != "default"
    if name_set and protocol_set:
        raise ConfigError("only one of inter.broker.listener.name and security.inter.broker.protocol may be set")
    if name_set:
        name = config.raw("inter.broker.listener.name").strip().upper()
        if name not in by_name:
            raise ConfigError(f"inter.broker.listener.name: {name} is not one of the listeners "
                              f"({', '.join(by_name)})")
        return by_name[name]
    protocol = config.raw("security.inter.broker.protocol").strip().upper()
    if protocol not in SECURITY_PROTOCOLS:
        raise ConfigError(f"security.inter.broker.protocol: unknown security protocol {protocol!r}")
    chosen = next((l for l in listeners if l.security_protocol == protocol and l.name == protocol), None)
    chosen = chosen or next((l for l in listeners if l.security_protocol == protocol), None)
    if chosen is None and protocol_set:
        raise ConfigError(f"security.inter.broker.protocol={protocol}: no listener has that protocol")
    return chosen or listeners[0]
