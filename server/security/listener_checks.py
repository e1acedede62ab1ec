"""The start-up check that every SASL listener can authenticate someone.

Why a module of its own: the listeners are parsed with the configuration
(server/listeners.py, below server/config.py), while this check needs the SASL settings and
the inter-broker client's credentials, which sit on top of the configuration.
"""

from __future__ import annotations

from server.config import BrokerConfig
from server.listeners import Listener
from server.security.sasl.client import inter_broker_credentials
from server.security.sasl.settings import check_listener


def check_security_protocols(config: BrokerConfig, listeners: tuple[Listener, ...]) -> None:
    """Every SASL_PLAINTEXT / SASL_SSL listener must be able to authenticate someone: its
    sasl.enabled.mechanisms supported and their settings present (a SaslConfigError naming
    the setting, at start, rather than clients refused one by one). The one place that
    decides it: the network layer calls this before binding, `trafka serve` at start."""
    for listener in listeners:
        if listener.security_protocol.startswith("SASL_"):
            check_listener(config, listener.name)
    inter_broker_credentials(config)  # a SASL inter-broker listener needs the client side too
