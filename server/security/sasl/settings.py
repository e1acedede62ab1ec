"""Where a SASL listener's settings come from, with Kafka's listener prefixes.

Kafka reads a listener's SASL settings first under `listener.name.<listener>.` (lower
case listener name), the mechanism-specific ones (sasl.jaas.config, the server callback
handler) under `listener.name.<listener>.<mechanism lower case>.`, then the plain
broker-wide name. These prefixed names are not in server/config.py's table (there is one
per listener and mechanism), so they are read from the configuration's layers as given.

`sasl.enabled.mechanisms` keeps Kafka's default, GSSAPI, which Trafka does not implement
(no Kerberos): a SASL listener must name its mechanisms, and a broker whose SASL listener
would offer GSSAPI refuses to start, as Kafka refuses to start without a JAAS entry.
"""

from __future__ import annotations

from typing import Any

from server.config import ConfigError

PLAIN = "PLAIN"
SCRAM_SHA_256 = "SCRAM-SHA-256"
SCRAM_SHA_512 = "SCRAM-SHA-512"
OAUTHBEARER = "OAUTHBEARER"
SUPPORTED = (PLAIN, SCRAM_SHA_256, SCRAM_SHA_512, OAUTHBEARER)

SASL_PROTOCOLS = ("SASL_PLAINTEXT", "SASL_SSL")
OAUTH_VALIDATOR = "org.apache.kafka.common.security.oauthbearer.OAuthBearerValidatorCallbackHandler"
PLAIN_LOGIN_MODULE = "org.apache.kafka.common.security.plain.PlainLoginModule"


class SaslConfigError(ConfigError):
    """A SASL listener cannot work with these settings; the message names the setting."""


def raw(config: Any, name: str) -> str | None:
    """The effective value of `name` (known setting or not), None when unset."""
    try:
        return config.raw(name)
    except KeyError:
        return None


def listener_setting(config: Any, listener: str | None, name: str, mechanism: str | None = None) -> str | None:
    """`name` as Kafka resolves it for `listener` (and `mechanism`): the most specific
    prefix first, then the broker-wide name."""
    candidates = []
    if listener:
        prefix = f"listener.name.{listener.lower()}."
        if mechanism:
            candidates.append(f"{prefix}{mechanism.lower()}.{name}")
        candidates.append(prefix + name)
    candidates.append(name)
    for candidate in candidates:
        value = raw(config, candidate)
        if value is not None and value != "":
            return value
    return None


def enabled_mechanisms(config: Any, listener: str | None) -> list[str]:
    """`sasl.enabled.mechanisms` of the listener, as given (upper case, in order)."""
    text = listener_setting(config, listener, "sasl.enabled.mechanisms") or "GSSAPI"
    return [m.strip().upper() for m in text.split(",") if m.strip()]


def check_listener(config: Any, listener: str | None) -> None:
    """Refuse, with the setting named, a SASL listener that could not authenticate anyone."""
    from server.security.sasl.jaas import JaasError, parse_jaas

    mechanisms = enabled_mechanisms(config, listener)
    unknown = [m for m in mechanisms if m not in SUPPORTED]
    if unknown:
        raise SaslConfigError(
            f"sasl.enabled.mechanisms of listener {listener}: {', '.join(unknown)} not supported "
            f"(Trafka implements {', '.join(SUPPORTED)}; GSSAPI/Kerberos, Kafka's default, is not)")
    if PLAIN in mechanisms:
        text = listener_setting(config, listener, "sasl.jaas.config", PLAIN)
        if not text:
            raise SaslConfigError(f"PLAIN on listener {listener} needs listener.name.{(listener or '').lower()}"
                                  f".plain.sasl.jaas.config (or sasl.jaas.config) with user_<name>=\"<password>\"")
        try:
            entry = parse_jaas(text)
        except JaasError as exc:
            raise SaslConfigError(f"sasl.jaas.config for PLAIN on listener {listener}: {exc}") from None
        if entry.login_module != PLAIN_LOGIN_MODULE:
            raise SaslConfigError(f"sasl.jaas.config for PLAIN on listener {listener}: login module "
                                  f"{entry.login_module} (expected {PLAIN_LOGIN_MODULE})")
    if OAUTHBEARER in mechanisms:
        handler = listener_setting(config, listener, "sasl.server.callback.handler.class", OAUTHBEARER)
        if handler and handler.strip() == OAUTH_VALIDATOR and \
                not listener_setting(config, listener, "sasl.oauthbearer.jwks.endpoint.url", OAUTHBEARER):
            raise SaslConfigError(f"OAUTHBEARER on listener {listener} with {OAUTH_VALIDATOR} needs "
                                  "sasl.oauthbearer.jwks.endpoint.url")
