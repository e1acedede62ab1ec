"""TLS contexts from Kafka's `ssl.*` settings, and what a handshake tells about the peer.

How this works: every SSL / SASL_SSL listener gets one `ssl.SSLContext` at start, built
from its settings (`listener.name.<name>.ssl.*` over the broker-wide `ssl.*`, as Kafka).
Keystores:
- PEM: `ssl.keystore.location` is one file with the private key and the certificate chain
  (Kafka's PEM keystore), or KIP-651's inline `ssl.keystore.certificate.chain` +
  `ssl.keystore.key`; an encrypted key opens with `ssl.key.password`.
- PKCS12 (and JKS, read as PKCS12 like Java's keystore.type.compat): opened with
  `ssl.keystore.password` by `cryptography`.
The stdlib's `load_cert_chain` reads only files, so keys and chains that are not already a
PEM file on disk are handed to it through an anonymous in-memory file (memfd): nothing
secret is written to a temporary file. Truststores become PEM text for `cadata`.
`ssl.client.auth` none/requested/required is CERT_NONE/OPTIONAL/REQUIRED (mTLS);
`ssl.enabled.protocols` bounds the TLS versions, `ssl.cipher.suites` (OpenSSL or IANA
TLS 1.2 names) the ciphers. Any bad setting is a ConfigError naming it, at start.
"""

from __future__ import annotations

import contextlib
import logging
import os
import re
import ssl
from typing import Iterator

from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.serialization import pkcs12
from cryptography import x509

from server.config import BrokerConfig, ConfigError
from server.security.listener_checks import check_security_protocols
from server.security.principal import NoMatchingRule, PrincipalMapper
from server.security.sasl.client import inter_broker_credentials

log = logging.getLogger("trafka.security.tls")

_VERSIONS = {"TLSv1": ssl.TLSVersion.TLSv1, "TLSv1.1": ssl.TLSVersion.TLSv1_1,
             "TLSv1.2": ssl.TLSVersion.TLSv1_2, "TLSv1.3": ssl.TLSVersion.TLSv1_3}
_CLIENT_AUTH = {"none": ssl.CERT_NONE, "requested": ssl.CERT_OPTIONAL, "required": ssl.CERT_REQUIRED}


class _Settings:
    """The ssl.* values of one listener (None: the broker-wide ones)."""

    def __init__(self, config: BrokerConfig, listener: str | None) -> None:
        self.config = config
        self.listener = listener

    def __getitem__(self, name: str) -> str:
        return self.config.listener_setting(self.listener, name).strip()

    def key(self, name: str) -> str:
        """The name to quote in errors: the prefixed one when that is what was set."""
        prefixed = f"listener.name.{(self.listener or '').lower()}.{name}"
        return prefixed if self.listener and prefixed in self.config.values else name


def server_context(config: BrokerConfig, listener: str) -> ssl.SSLContext:
    """The SSLContext of one TLS listener; ConfigError for anything unusable."""
    s = _Settings(config, listener)
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    _protocols(context, s)
    _ciphers(context, s)
    if not _load_keystore(context, s):
        raise ConfigError(f"listener {listener} is {_protocol_of(config, listener)} but has no keystore: set "
                          f"{s.key('ssl.keystore.location')} (or ssl.keystore.certificate.chain and ssl.keystore.key)")
    auth = s["ssl.client.auth"].lower()
    if auth not in _CLIENT_AUTH:
        raise ConfigError(f"{s.key('ssl.client.auth')}={auth!r}: must be none, requested or required")
    context.verify_mode = _CLIENT_AUTH[auth]
    if auth != "none" and not _load_truststore(context, s):
        context.load_default_certs(ssl.Purpose.CLIENT_AUTH)
    return context


def client_context(config: BrokerConfig, listener: str) -> ssl.SSLContext:
    """The SSLContext of this broker's own connections to `listener` of other brokers
    (the inter-broker listener): verifies their certificate, presents ours for mTLS."""
    s = _Settings(config, listener)
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    _protocols(context, s)
    _ciphers(context, s)
    context.check_hostname = s["ssl.endpoint.identification.algorithm"].lower() == "https"
    if not _load_truststore(context, s):
        context.load_default_certs(ssl.Purpose.SERVER_AUTH)
    _load_keystore(context, s)
    return context


def _protocol_of(config: BrokerConfig, listener: str) -> str:
    return next((l.security_protocol for l in config.listener_list if l.name == listener), "SSL")


def _protocols(context: ssl.SSLContext, s: _Settings) -> None:
    names = [n.strip() for n in s["ssl.enabled.protocols"].split(",") if n.strip()]
    unknown = [n for n in names if n not in _VERSIONS]
    if unknown or not names:
        raise ConfigError(f"{s.key('ssl.enabled.protocols')}: unknown TLS version(s) {unknown or names!r} "
                          f"(known: {', '.join(_VERSIONS)})")
    versions = sorted(_VERSIONS[n] for n in names)
    try:
        context.minimum_version, context.maximum_version = versions[0], versions[-1]
    except ValueError as exc:
        raise ConfigError(f"{s.key('ssl.enabled.protocols')}: {exc}") from None


def _openssl_cipher_name(name: str) -> str:
    """An IANA TLS 1.2 suite name (Java's) as OpenSSL's: TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256
    -> ECDHE-RSA-AES128-GCM-SHA256. OpenSSL names pass unchanged."""
    if not name.startswith("TLS_") or "_WITH_" not in name:
        return name
    kx, _, cipher = name[4:].partition("_WITH_")
    cipher = re.sub(r"AES_(\d+)", r"AES\1", cipher).replace("CHACHA20_POLY1305_SHA256", "CHACHA20_POLY1305")
    cipher = cipher.replace("_CBC", "")  # OpenSSL names CBC suites without the mode
    return (cipher if kx == "RSA" else f"{kx}_{cipher}").replace("_", "-")


def _ciphers(context: ssl.SSLContext, s: _Settings) -> None:
    names = [n.strip() for n in s["ssl.cipher.suites"].split(",") if n.strip()]
    if not names:
        return
    # TLS 1.3 suites (TLS_AES_128_GCM_SHA256...) are not selectable through Python's ssl:
    # they stay OpenSSL's defaults; the TLS 1.2 list is what set_ciphers restricts.
    tls12 = [_openssl_cipher_name(n) for n in names if n not in _TLS13_SUITES]
    if not tls12:
        log.info("%s lists only TLS 1.3 suites; those are OpenSSL's defaults here", s.key("ssl.cipher.suites"))
        return
    try:
        context.set_ciphers(":".join(tls12))
    except ssl.SSLError as exc:
        raise ConfigError(f"{s.key('ssl.cipher.suites')}: no usable cipher in {names!r} ({exc})") from None


_TLS13_SUITES = frozenset({"TLS_AES_128_GCM_SHA256", "TLS_AES_256_GCM_SHA384", "TLS_CHACHA20_POLY1305_SHA256",
                           "TLS_AES_128_CCM_SHA256", "TLS_AES_128_CCM_8_SHA256"})


def _password(text: str) -> bytes | None:
    return text.encode() if text else None


def _load_keystore(context: ssl.SSLContext, s: _Settings) -> bool:
    """Load the key and chain into `context`; False when none is configured."""
    kind = s["ssl.keystore.type"].upper()
    location = s["ssl.keystore.location"]
    inline_chain, inline_key = s["ssl.keystore.certificate.chain"], s["ssl.keystore.key"]
    if inline_chain or inline_key:
        if kind != "PEM":
            raise ConfigError(f"{s.key('ssl.keystore.certificate.chain')} needs ssl.keystore.type=PEM")
        if not (inline_chain and inline_key) or location:
            raise ConfigError("ssl.keystore.certificate.chain and ssl.keystore.key go together, without "
                              "ssl.keystore.location")
        pem = (inline_key.strip() + "\n" + inline_chain.strip() + "\n").encode()
        password = _password(s["ssl.key.password"])
        where = "ssl.keystore.certificate.chain/ssl.keystore.key"
    elif not location:
        return False
    elif kind == "PEM":
        try:
            pem = open(location, "rb").read()
        except OSError as exc:
            raise ConfigError(f"{s.key('ssl.keystore.location')}: cannot read {location}: {exc}") from None
        password = _password(s["ssl.key.password"] or s["ssl.keystore.password"])
        where = location
    elif kind in ("PKCS12", "JKS"):
        pem, password, where = _pkcs12_keystore(s, location, kind), None, location
    else:
        raise ConfigError(f"{s.key('ssl.keystore.type')}={kind}: must be PEM or PKCS12")
    with _memory_file(pem) as path:
        try:
            context.load_cert_chain(path, password=password)
        except (ssl.SSLError, OSError, ValueError) as exc:
            raise ConfigError(f"{s.key('ssl.keystore.location')}: cannot load the key and certificate chain "
                              f"from {where}: {exc}") from None
    return True


def _pkcs12_keystore(s: _Settings, location: str, kind: str) -> bytes:
    try:
        data = open(location, "rb").read()
    except OSError as exc:
        raise ConfigError(f"{s.key('ssl.keystore.location')}: cannot read {location}: {exc}") from None
    try:
        key, cert, extra = pkcs12.load_key_and_certificates(data, _password(s["ssl.keystore.password"]))
    except ValueError as exc:
        hint = " (JKS stores are read only when they are PKCS12: convert with keytool -importkeystore)" \
            if kind == "JKS" else ""
        raise ConfigError(f"{s.key('ssl.keystore.location')}: cannot open {location} as PKCS12 with "
                          f"ssl.keystore.password: {exc}{hint}") from None
    if key is None or cert is None:
        raise ConfigError(f"{s.key('ssl.keystore.location')}: {location} holds no private key and certificate")
    pem = key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                            serialization.NoEncryption())
    for c in [cert, *extra]:
        pem += c.public_bytes(serialization.Encoding.PEM)
    return pem


def _load_truststore(context: ssl.SSLContext, s: _Settings) -> bool:
    """Trust the configured CAs; False when none are configured."""
    kind = s["ssl.truststore.type"].upper()
    location, inline = s["ssl.truststore.location"], s["ssl.truststore.certificates"]
    if inline:
        if kind != "PEM":
            raise ConfigError(f"{s.key('ssl.truststore.certificates')} needs ssl.truststore.type=PEM")
        cadata = inline
    elif not location:
        return False
    else:
        try:
            data = open(location, "rb").read()
        except OSError as exc:
            raise ConfigError(f"{s.key('ssl.truststore.location')}: cannot read {location}: {exc}") from None
        if kind == "PEM":
            cadata = data.decode("ascii", "replace")
        elif kind in ("PKCS12", "JKS"):
            try:
                store = pkcs12.load_pkcs12(data, _password(s["ssl.truststore.password"]))
            except ValueError as exc:
                raise ConfigError(f"{s.key('ssl.truststore.location')}: cannot open {location} as PKCS12: "
                                  f"{exc}") from None
            certs = [c.certificate for c in store.additional_certs]
            if store.cert is not None:
                certs.append(store.cert.certificate)
            cadata = "".join(c.public_bytes(serialization.Encoding.PEM).decode() for c in certs)
        else:
            raise ConfigError(f"{s.key('ssl.truststore.type')}={kind}: must be PEM or PKCS12")
    try:
        context.load_verify_locations(cadata=cadata)
    except (ssl.SSLError, ValueError) as exc:
        raise ConfigError(f"{s.key('ssl.truststore.location')}: no usable CA certificate: {exc}") from None
    return True


@contextlib.contextmanager
def _memory_file(data: bytes) -> Iterator[str]:
    """A path to `data` that lives only in memory (Linux memfd); elsewhere a private
    temporary file, removed at once."""
    if hasattr(os, "memfd_create"):
        fd = os.memfd_create("trafka-keystore", getattr(os, "MFD_CLOEXEC", 0))
        try:
            os.write(fd, data)
            yield f"/proc/self/fd/{fd}"
        finally:
            os.close(fd)
        return
    import tempfile

    with tempfile.NamedTemporaryFile(prefix="trafka-keystore-") as handle:  # pragma: no cover - not Linux
        handle.write(data)
        handle.flush()
        yield handle.name


def tls_session_info(ssl_object: "ssl.SSLObject | trio.SSLStream", mapper: PrincipalMapper | None) -> dict | None:
    """What a finished handshake says, for `Session.tls`: version, cipher, the peer's
    subject DN and the principal ssl.principal.mapping.rules make of it ("User:<name>";
    None without a client certificate). None when no rule maps the DN: Kafka fails such
    a client's authentication, so the connection is closed (logged here). A trio.SSLStream
    will do: it answers the SSLObject's methods."""
    der = ssl_object.getpeercert(binary_form=True)
    info = {"version": ssl_object.version(), "cipher": (ssl_object.cipher() or ("",))[0], "peer_dn": None,
            "principal": None}
    if not der:
        return info
    dn = x509.load_der_x509_certificate(der).subject.rfc4514_string()
    info["peer_dn"] = dn
    if mapper is None:
        mapper = PrincipalMapper("DEFAULT")
    try:
        info["principal"] = "User:" + mapper.name(dn)
    except NoMatchingRule as exc:
        log.warning("TLS client certificate rejected: %s", exc)
        return None
    return info


def check_listeners(config: BrokerConfig) -> None:
    """Build what every TLS listener needs once, so a bad setting is a ConfigError at
    start (naming the setting) rather than a failure at the first connection."""
    check_security_protocols(config, config.listener_list)
    for listener in config.listener_list:
        if listener.tls:
            server_context(config, listener.name)
            principal_mapper(config, listener.name)


def principal_mapper(config: BrokerConfig, listener: str) -> PrincipalMapper:
    rules = config.listener_setting(listener, "ssl.principal.mapping.rules")
    try:
        return PrincipalMapper(rules)
    except ValueError as exc:
        raise ConfigError(f"ssl.principal.mapping.rules={rules!r}: {exc}") from None


def inter_broker_client_options(config: BrokerConfig) -> dict:
    """Options of this broker's own connections to other brokers (BrokerChannels): an
    SSLContext when the inter-broker listener is SSL / SASL_SSL, from that listener's
    settings (truststore to verify the other broker, keystore for mTLS), and the SASL
    credentials when it is SASL_PLAINTEXT / SASL_SSL (server/security/sasl/client.py)."""
    options: dict = {}
    listener = next((l for l in config.listener_list if l.name == config.inter_broker_listener), None)
    if listener is not None and listener.tls:
        options["ssl_context"] = client_context(config, listener.name)
    credentials = inter_broker_credentials(config)
    if credentials is not None:
        options["sasl"] = credentials
    return options
