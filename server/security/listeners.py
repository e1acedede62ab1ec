"""The listener name and security protocol of the (one) listener — a stand-in.

sec-tls replaces this with full multi-listener parsing; until then the first entry of
`listeners` gives both: `SASL_PLAINTEXT://host:port` is listener SASL_PLAINTEXT with that
protocol, `CLIENT://host:port` looks CLIENT up in `listener.security.protocol.map`
(Kafka's default map: each protocol name maps to itself). No scheme: PLAINTEXT.
"""

from __future__ import annotations

from typing import Any

PROTOCOLS = ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL")


def listener_and_protocol(config: Any) -> tuple[str, str]:
    """(listener name, security protocol) of the first listener in `listeners`."""
    from server.security.sasl.settings import SaslConfigError, raw

    text = (raw(config, "listeners") or "").split(",")[0].strip()
    name, sep, _ = text.partition("://")
    if not sep:
        return "PLAINTEXT", "PLAINTEXT"
    name = name.strip().upper()
    mapping = {p: p for p in PROTOCOLS}
    for item in (raw(config, "listener.security.protocol.map") or "").split(","):
        key, colon, value = item.partition(":")
        if colon:
            mapping[key.strip().upper()] = value.strip().upper()
    protocol = mapping.get(name)
    if protocol not in PROTOCOLS:
        raise SaslConfigError(f"listener {name}: no security protocol for it in listener.security.protocol.map")
    return name, protocol


def check_listeners(config: Any) -> None:
    """At load: a SASL listener must be able to authenticate someone (SaslConfigError)."""
    from server.security.sasl.settings import SASL_PROTOCOLS, check_listener

    name, protocol = listener_and_protocol(config)
    if protocol == "SSL" or protocol == "SASL_SSL":
        from server.security.sasl.settings import SaslConfigError

        raise SaslConfigError(f"listener {name}: {protocol} needs TLS, which this build does not serve yet")
    if protocol in SASL_PROTOCOLS:
        check_listener(config, name)
