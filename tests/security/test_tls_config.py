"""Listener and TLS settings without a broker process: parsing errors name the setting,
and the SSLContexts built from Kafka's ssl.* settings are exercised with real TLS
handshakes over memory BIOs (server context from our code, client from the stdlib)."""

from __future__ import annotations

import ssl

import pytest

from server.config import ConfigError, load_config
from server.security.principal import NoMatchingRule, PrincipalMapper
from server.security.tls import check_listeners, server_context, tls_session_info
from tests.security.certs import CertificateAuthority


@pytest.fixture(scope="module")
def pki(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("pki")
    ca = CertificateAuthority(tmp)
    server = ca.issue("broker", server=True, CN="localhost")
    client = ca.issue("bob", CN="bob", OU="ops", O="Acme")
    return {"ca": ca, "server": server, "client": client, "pem": ca.pem_keystore(server, tmp / "ks.pem", "pw"),
            "p12": ca.pkcs12_keystore(server, tmp / "ks.p12", "storepw")}


def _config(tmp_path, **settings):
    overrides = {"log.dirs": str(tmp_path), "listeners": "SSL://127.0.0.1:0"}
    overrides.update({k.replace("_", "."): v for k, v in settings.items()})
    return load_config(overrides=overrides, environ={})


def _handshake(server_ctx: ssl.SSLContext, client_ctx: ssl.SSLContext):
    """Run a TLS handshake between two contexts in memory; the server side SSLObject."""
    s_in, s_out, c_in, c_out = (ssl.MemoryBIO() for _ in range(4))
    server = server_ctx.wrap_bio(s_in, s_out, server_side=True)
    client = client_ctx.wrap_bio(c_in, c_out, server_hostname="localhost")
    done = {"client": False, "server": False}
    for _ in range(10):
        for name, obj, out, peer in (("client", client, c_out, s_in), ("server", server, s_out, c_in)):
            if not done[name]:
                try:
                    obj.do_handshake()
                    done[name] = True
                except ssl.SSLWantReadError:
                    pass
            data = out.read()
            if data:
                peer.write(data)
        if all(done.values()):
            # TLS 1.3: the server checks the client certificate after the client thinks it is done
            client.write(b"x")
            s_in.write(c_out.read())
            assert server.read(1) == b"x"
            return server
    raise AssertionError("handshake did not finish")


def _client(pki, certificate: bool = False, **options) -> ssl.SSLContext:
    context = ssl.create_default_context(cafile=str(pki["ca"].cert_pem))
    if certificate:
        context.load_cert_chain(str(pki["client"].cert_pem), str(pki["client"].key_pem))
    for name, value in options.items():
        setattr(context, name, value)
    return context


def test_plain_listen_flag_stays_one_plaintext_listener(tmp_path):
    config = load_config(overrides={"log.dirs": str(tmp_path), "listeners": "127.0.0.1:19092",
                                    "advertised.listeners": "kafka.example:9092"}, environ={})
    (listener,) = config.listener_list
    assert (listener.name, listener.security_protocol, listener.host, listener.port) == \
        ("PLAINTEXT", "PLAINTEXT", "127.0.0.1", 19092)
    assert config.advertised == ("kafka.example", 9092) == config.advertised_for("PLAINTEXT")
    assert config.inter_broker_listener == "PLAINTEXT"


def test_named_listeners_protocol_map_advertised_and_inter_broker(tmp_path):
    config = _config(tmp_path, listeners="INTERNAL://127.0.0.1:9092,EXTERNAL://0.0.0.0:9093",
                     **{"listener.security.protocol.map": "INTERNAL:PLAINTEXT,EXTERNAL:SSL",
                        "advertised.listeners": "EXTERNAL://kafka.example:443",
                        "inter.broker.listener.name": "INTERNAL"})
    assert [(l.name, l.security_protocol, l.advertised_host, l.advertised_port) for l in config.listener_list] == \
        [("INTERNAL", "PLAINTEXT", "127.0.0.1", 9092), ("EXTERNAL", "SSL", "kafka.example", 443)]
    assert config.inter_broker_listener == "INTERNAL"
    assert config.advertised_for("EXTERNAL") == ("kafka.example", 443)
    assert config.advertised_for("OTHER") is None


@pytest.mark.parametrize("settings, message", [
    ({"listeners": "CLIENT://127.0.0.1:9092"}, "listener.security.protocol.map"),
    ({"listeners": "PLAINTEXT://127.0.0.1:9092,PLAINTEXT://127.0.0.1:9093"}, "more than once"),
    ({"listeners": "PLAINTEXT://127.0.0.1:9092", "advertised.listeners": "SSL://x:1"}, "not one of the listeners"),
    ({"listeners": "PLAINTEXT://127.0.0.1:9092", "listener.security.protocol.map": "PLAINTEXT:TLS"},
     "unknown security protocol"),
    ({"listeners": "PLAINTEXT://127.0.0.1:9092", "inter.broker.listener.name": "SSL"}, "inter.broker.listener.name"),
    ({"listeners": "PLAINTEXT://127.0.0.1:9092", "inter.broker.listener.name": "PLAINTEXT",
      "security.inter.broker.protocol": "PLAINTEXT"}, "only one of"),
])
def test_bad_listener_settings_are_config_errors(tmp_path, settings, message):
    with pytest.raises(ConfigError, match=message):
        load_config(overrides={"log.dirs": str(tmp_path), **settings}, environ={})


def test_a_sasl_ssl_listener_needs_usable_mechanisms_and_a_keystore(tmp_path, pki):
    tls = {"ssl.keystore.type": "PEM", "ssl.keystore.location": str(pki["pem"]), "ssl.key.password": "pw"}
    # Kafka's default mechanism, GSSAPI, is not implemented: refused at start, naming the setting.
    with pytest.raises(ConfigError, match="sasl.enabled.mechanisms"):
        check_listeners(_config(tmp_path, listeners="SASL_SSL://127.0.0.1:9094", **tls))
    plain = {"sasl.enabled.mechanisms": "PLAIN", "sasl.jaas.config":
             'org.apache.kafka.common.security.plain.PlainLoginModule required user_alice="a";'}
    check_listeners(_config(tmp_path, listeners="SASL_SSL://127.0.0.1:9094", **tls, **plain))
    # SASL_SSL is TLS too: without a keystore it cannot start either.
    with pytest.raises(ConfigError, match="keystore"):
        check_listeners(_config(tmp_path, listeners="SASL_SSL://127.0.0.1:9094", **plain))


def test_tls_listener_without_keystore_or_with_wrong_password(tmp_path, pki):
    with pytest.raises(ConfigError, match="no keystore"):
        check_listeners(_config(tmp_path))
    with pytest.raises(ConfigError, match="ssl.keystore.location"):
        check_listeners(_config(tmp_path, **{"ssl.keystore.type": "PKCS12", "ssl.keystore.location": str(pki["p12"]),
                                             "ssl.keystore.password": "wrong"}))
    with pytest.raises(ConfigError, match="ssl.keystore.location"):
        check_listeners(_config(tmp_path, **{"ssl.keystore.type": "PEM", "ssl.keystore.location": str(pki["pem"]),
                                             "ssl.key.password": "wrong"}))
    with pytest.raises(ConfigError, match="ssl.principal.mapping.rules"):
        check_listeners(_config(tmp_path, **{"ssl.keystore.type": "PEM", "ssl.keystore.location": str(pki["pem"]),
                                             "ssl.key.password": "pw", "ssl.principal.mapping.rules": "RULE:x"}))


def test_inline_pem_keystore_kip651_and_pkcs12_truststore_with_mtls(tmp_path, pki):
    truststore = pki["ca"].pkcs12_truststore(tmp_path / "trust.p12", "tpw")
    config = _config(tmp_path, **{
        "ssl.keystore.type": "PEM", "ssl.keystore.certificate.chain": pki["server"].cert_text,
        "ssl.keystore.key": pki["server"].key_text, "ssl.truststore.type": "PKCS12",
        "ssl.truststore.location": str(truststore), "ssl.truststore.password": "tpw", "ssl.client.auth": "required",
        "ssl.principal.mapping.rules": r"RULE:^CN=(.*?),OU=(.*?),.*$/$1@$2/U"})
    server = _handshake(server_context(config, "SSL"), _client(pki, certificate=True))
    info = tls_session_info(server, PrincipalMapper(config.raw("ssl.principal.mapping.rules")))
    assert info["peer_dn"] == "CN=bob,OU=ops,O=Acme"
    assert info["principal"] == "User:BOB@OPS"
    with pytest.raises(ssl.SSLError):
        _handshake(server_context(config, "SSL"), _client(pki, certificate=False))


def test_enabled_protocols_and_cipher_suites_are_enforced(tmp_path, pki):
    base = {"ssl.keystore.type": "PEM", "ssl.keystore.location": str(pki["pem"]), "ssl.key.password": "pw"}
    only13 = server_context(_config(tmp_path, **base, **{"ssl.enabled.protocols": "TLSv1.3"}), "SSL")
    with pytest.raises(ssl.SSLError):
        _handshake(only13, _client(pki, maximum_version=ssl.TLSVersion.TLSv1_2))
    assert _handshake(only13, _client(pki)).version() == "TLSv1.3"
    # Java's (IANA) suite name, as in a Kafka server.properties
    one_suite = server_context(_config(tmp_path, **base, **{
        "ssl.enabled.protocols": "TLSv1.2", "ssl.cipher.suites": "TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384"}), "SSL")
    assert _handshake(one_suite, _client(pki)).cipher()[0] == "ECDHE-ECDSA-AES256-GCM-SHA384"
    with pytest.raises(ConfigError, match="ssl.enabled.protocols"):
        server_context(_config(tmp_path, **base, **{"ssl.enabled.protocols": "SSLv3"}), "SSL")


def test_per_listener_prefix_overrides_the_broker_wide_setting(tmp_path, pki):
    config = _config(tmp_path, listeners="SSL://127.0.0.1:0,OTHER://127.0.0.1:0", **{
        "listener.security.protocol.map": "SSL:SSL,OTHER:SSL",
        "ssl.keystore.type": "PEM", "ssl.keystore.location": str(pki["pem"]), "ssl.key.password": "pw",
        "ssl.client.auth": "required", "listener.name.other.ssl.client.auth": "none"})
    assert server_context(config, "SSL").verify_mode == ssl.CERT_REQUIRED
    _handshake(server_context(config, "OTHER"), _client(pki, certificate=False))


def test_principal_mapping_rules_as_kafka_documents_them():
    mapper = PrincipalMapper(r"RULE:^CN=(.*?),OU=ServiceUsers.*$/$1/,"
                             r"RULE:^CN=(.*?),OU=(.*?),O=(.*?),L=(.*?),ST=(.*?),C=(.*?)$/$1@$2/L,DEFAULT")
    assert mapper.name("CN=kafka1,OU=ServiceUsers,O=Org,C=US") == "kafka1"
    assert mapper.name("CN=Duke,OU=JavaSoft,O=Sun Microsystems,L=Santa Clara,ST=CA,C=US") == "duke@javasoft"
    assert mapper.name("CN=other,O=x") == "CN=other,O=x"  # DEFAULT: the whole DN
    assert PrincipalMapper(r"RULE:^CN=([^,]*)\/(.*)$/$1/U").name("CN=a/b") == "A"  # \/ escapes a slash
    with pytest.raises(NoMatchingRule):
        PrincipalMapper(r"RULE:^CN=(.*),OU=x$/$1/").name("CN=a")
    with pytest.raises(ValueError):
        PrincipalMapper("RULE:^CN=(.*)$/$1")


def test_requested_client_auth_takes_a_certificate_when_offered(tmp_path, pki):
    config = _config(tmp_path, **{"ssl.keystore.type": "PEM", "ssl.keystore.location": str(pki["pem"]),
                                  "ssl.key.password": "pw", "ssl.truststore.type": "PEM",
                                  "ssl.truststore.location": str(pki["ca"].cert_pem), "ssl.client.auth": "requested"})
    mapper = PrincipalMapper("DEFAULT")
    anonymous = tls_session_info(_handshake(server_context(config, "SSL"), _client(pki)), mapper)
    assert anonymous["peer_dn"] is None and anonymous["principal"] is None  # stays User:ANONYMOUS
    known = tls_session_info(_handshake(server_context(config, "SSL"), _client(pki, certificate=True)), mapper)
    assert known["principal"] == "User:CN=bob,OU=ops,O=Acme"


def test_a_certificate_no_rule_maps_is_refused(tmp_path, pki):
    config = _config(tmp_path, **{"ssl.keystore.type": "PEM", "ssl.keystore.location": str(pki["pem"]),
                                  "ssl.key.password": "pw", "ssl.truststore.type": "PEM",
                                  "ssl.truststore.location": str(pki["ca"].cert_pem), "ssl.client.auth": "required"})
    server = _handshake(server_context(config, "SSL"), _client(pki, certificate=True))
    assert tls_session_info(server, PrincipalMapper(r"RULE:^CN=(.*),OU=ServiceUsers$/$1/")) is None
