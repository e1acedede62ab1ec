"""Handshake and metadata: ApiVersions on the wire, then what each client sees of topics."""

from __future__ import annotations

import pytest

from compat_tests import kafka_wire as kw
from compat_tests.helpers import make_topic, unique_name, wait_until

# APIs every stock client in scope needs (docs/design/clients.md#advertised-version-ranges):
# produce, consume, groups, admin.
REQUIRED_APIS = {0, 1, 2, 3, 8, 9, 10, 11, 12, 13, 14, 15, 16, 18, 19, 20, 22, 32}


def _host_port(broker) -> tuple[str, int]:
    host, _, port = broker.bootstrap.rpartition(":")
    return host, int(port)


@pytest.mark.compat(client="raw")
def test_api_versions_raw(broker):
    """ApiVersions v0, v3 and v4 by hand: no error, sane ranges, the APIs clients need."""
    host, port = _host_port(broker)
    v0 = kw.api_versions(host, port, 0)
    assert v0.error_code == 0
    missing = REQUIRED_APIS - set(v0.versions)
    assert not missing, f"APIs not advertised: {sorted(missing)}"
    for key, (lo, hi) in v0.versions.items():
        assert 0 <= lo <= hi, f"api {key}: min {lo} > max {hi}"
    assert v0.versions[18][1] >= 3, "ApiVersions v3 (KIP-511) not advertised"
    # aiokafka only speaks v0-range versions: every minimum must allow it
    # (docs/design/clients.md#non-flexible-versions-for-aiokafka)
    assert v0.versions[1][0] <= 4 and v0.versions[3][0] <= 5 and v0.versions[0][0] <= 3
    for version in (3, 4):
        flex = kw.api_versions(host, port, version)
        assert flex.error_code == 0, f"v{version}: error {flex.error_code}"
        assert flex.versions == v0.versions, f"v{version} ranges differ from v0"
        assert flex.throttle_time_ms == 0


@pytest.mark.compat(client="raw")
def test_api_versions_unsupported_version_raw(broker):
    """KIP-511: an ApiVersions version the broker does not know gets UNSUPPORTED_VERSION with
    a v0 body listing key 18, so the client can retry at a version both support."""
    host, port = _host_port(broker)
    result = kw.api_versions(host, port, 127)
    assert result.error_code == kw.UNSUPPORTED_VERSION, (
        f"error {result.error_code}, expected 35 (UNSUPPORTED_VERSION)")
    assert 18 in result.versions and result.versions[18][1] >= 3


def test_client_handshake(client, broker):
    """The client connects (ApiVersions + Metadata) and sees the broker at its own address."""
    md = client.metadata()
    assert md.brokers, "no brokers in metadata"
    assert _host_port(broker) in md.brokers.values(), (
        f"advertised brokers {md.brokers} do not include {broker.bootstrap}")


def test_metadata_existing_topic(client, setup_client, topic_name):
    make_topic(client, setup_client, topic_name, 3)
    md = client.metadata([topic_name])
    t = md.topics[topic_name]
    assert t.error_code == 0
    assert sorted(t.partitions) == [0, 1, 2]
    for p, leader in t.partitions.items():
        assert leader in md.brokers, f"partition {p} leader {leader} not in {md.brokers}"


def test_metadata_auto_create(client, setup_client):
    """Metadata with allow_auto_topic_creation creates the topic (auto.create.topics.enable
    is on by default in Kafka); it is then usable."""
    topic = unique_name("auto-create")

    def created():
        t = client.metadata([topic], allow_auto_create=True).topics.get(topic)
        return t is not None and t.error_code == 0 and len(t.partitions) >= 1

    wait_until(created, 15, 0.3, f"auto-creation of {topic}")
    md = setup_client.metadata([topic])
    assert md.topics[topic].error_code == 0


def test_metadata_unknown_topic(client, setup_client):
    """Without auto-creation an unknown topic is UNKNOWN_TOPIC_OR_PARTITION, and stays unknown."""
    topic = unique_name("unknown")
    md = client.metadata([topic], allow_auto_create=False)
    t = md.topics.get(topic)
    assert t is not None, f"{topic} missing from the response (expected an error entry)"
    assert t.error_code == 3, f"error {t.error_code}, expected 3 UNKNOWN_TOPIC_OR_PARTITION"
    assert not t.partitions
    again = setup_client.metadata([topic]).topics.get(topic)
    assert again is not None and again.error_code == 3, f"topic was created: {again}"
