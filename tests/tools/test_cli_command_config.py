"""--command-config: a Kafka Java client's properties file becomes librdkafka settings —
the translation on its own, and through the real command (an unknown setting or an
unsupported truststore is one line and exit 2, before anything connects)."""

from __future__ import annotations

import pytest

from cli.tools.common import CliError, librdkafka_config, read_properties
from tests.tools.clikit import trafka


def test_java_properties_become_librdkafka_settings(tmp_path):
    path = tmp_path / "client.properties"
    path.write_text("# comment\n! also a comment\n"
                    "security.protocol = SASL_SSL\n"
                    "sasl.mechanism: SCRAM-SHA-512\n"
                    "sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required \\\n"
                    '    username="alice" \\\n    password="p=w;d";\n'
                    "ssl.truststore.type=PEM\nssl.truststore.location=/etc/ca.pem\n"
                    "ssl.endpoint.identification.algorithm=\n"
                    "key.serializer=org.apache.kafka.common.serialization.StringSerializer\n"
                    "bootstrap.servers=ignored:9092\nclient.id=ops\n")
    assert librdkafka_config(read_properties(str(path))) == {
        "security.protocol": "SASL_SSL", "sasl.mechanisms": "SCRAM-SHA-512", "sasl.username": "alice",
        "sasl.password": "p=w;d", "ssl.ca.location": "/etc/ca.pem", "ssl.endpoint.identification.algorithm": "none",
        "client.id": "ops"}


@pytest.mark.parametrize("props, message", [
    ({"ssl.truststore.location": "/etc/truststore.jks"}, "ssl.ca.location"),
    ({"ssl.truststore.type": "PKCS12", "ssl.truststore.location": "t.p12"}, "ssl.ca.location"),
    ({"ssl.keystore.type": "JKS", "ssl.keystore.location": "k.jks"}, "JKS keystores are not supported"),
])
def test_what_librdkafka_cannot_read_is_refused(props, message):
    with pytest.raises(CliError, match=message):
        librdkafka_config(props)


def test_through_the_command(broker, tmp_path):
    unknown = tmp_path / "unknown.properties"
    unknown.write_text("sasl.login.callback.handler.class=com.example.Handler\n")
    trafka("topic", "list", "--command-config", str(unknown), bootstrap=broker.bootstrap).one_line_error(
        "sasl.login.callback.handler.class")
    jks = tmp_path / "jks.properties"
    jks.write_text("security.protocol=SSL\nssl.truststore.location=/etc/kafka/truststore.jks\n")
    run = trafka("topic", "list", "--command-config", str(jks), bootstrap=broker.bootstrap)
    assert run.code == 2 and run.one_line_error("ssl.truststore.location is not supported", "ssl.ca.location")
    fine = tmp_path / "plain.properties"
    fine.write_text("security.protocol=PLAINTEXT\nclient.id=ops-tool\n")
    trafka("topic", "list", "--command-config", str(fine), bootstrap=broker.bootstrap).ok()
