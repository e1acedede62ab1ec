"""The znode codecs write what Kafka writes: Kafka's examples, byte for byte
(docs/design/replication.md#znode-payloads)."""

from __future__ import annotations

import uuid

import pytest

from server.zookeeper import znodes
from server.zookeeper.znodes import (BrokerRegistration, ControllerRegistration, EndPoint, PartitionState,
                                   TopicAssignment)

TOPIC_ID = uuid.UUID(bytes=bytes(range(16)))
TOPIC_ID_B64 = "AAECAwQFBgcICQoLDA0ODw"


def test_uuid_is_kafkas_base64url_without_padding():
    assert znodes.uuid_to_base64(TOPIC_ID) == TOPIC_ID_B64
    assert znodes.uuid_from_base64(TOPIC_ID_B64) == TOPIC_ID
    # '-' and '_' (URL-safe alphabet), never '+' or '/'
    odd = uuid.UUID(bytes=b"\xfb\xff" * 8)
    assert znodes.uuid_to_base64(odd) == "-__7__v_-__7__v_-__7_w"
    assert znodes.uuid_from_base64(znodes.uuid_to_base64(odd)) == odd
    assert len(znodes.new_cluster_id()) == 22
    with pytest.raises(ValueError):
        znodes.uuid_from_base64(str(TOPIC_ID))


def test_cluster_id_version_is_a_string():
    assert znodes.encode_cluster_id(TOPIC_ID_B64) == b'{"version":"1","id":"AAECAwQFBgcICQoLDA0ODw"}'
    assert znodes.decode_cluster_id(b'{"version":"1","id":"abc","extra":1}') == "abc"


def test_controller_v2_and_bare_decimal_epoch():
    reg = ControllerRegistration(broker_id=2, timestamp=1700000000123)
    assert reg.encode() == b'{"version":2,"brokerid":2,"timestamp":"1700000000123","kraftControllerEpoch":-1}'
    assert ControllerRegistration.decode(reg.encode()) == reg
    # version 1, as Kafka ≤ 3.3 wrote it
    assert ControllerRegistration.decode(b'{"version":1,"brokerid":7,"timestamp":"5"}') == \
        ControllerRegistration(7, 5, -1)
    assert znodes.encode_controller_epoch(7) == b"7"
    assert znodes.decode_controller_epoch(b"12") == 12


def test_broker_registration_v5():
    reg = BrokerRegistration(
        broker_id=1,
        endpoints=[EndPoint("PLAINTEXT", "h", 9092, "PLAINTEXT"), EndPoint("REPL", "h", 9093, "SSL")],
        rack="r1", timestamp=1700000000000, features={"metadata.version": (1, 3)})
    assert reg.host == "h" and reg.port == 9092
    assert reg.encode() == (
        b'{"version":5,"host":"h","port":9092,"jmx_port":-1,"timestamp":"1700000000000",'
        b'"endpoints":["PLAINTEXT://h:9092","REPL://h:9093"],'
        b'"listener_security_protocol_map":{"PLAINTEXT":"PLAINTEXT","REPL":"SSL"},"rack":"r1",'
        b'"features":{"metadata.version":{"min_version":1,"max_version":3}}}')
    assert BrokerRegistration.decode(1, reg.encode()) == reg
    assert reg.endpoint("REPL") == EndPoint("REPL", "h", 9093, "SSL")


def test_broker_registration_without_plaintext_or_rack():
    reg = BrokerRegistration(broker_id=3, endpoints=[EndPoint("INTERNAL", "::1", 19092, "SASL_PLAINTEXT")],
                             timestamp=5)
    # no PLAINTEXT listener: host null, port -1 (Kafka's `new EndPoint(null, -1, ...)`); no rack key
    assert reg.encode() == (
        b'{"version":5,"host":null,"port":-1,"jmx_port":-1,"timestamp":"5","endpoints":["INTERNAL://[::1]:19092"],'
        b'"listener_security_protocol_map":{"INTERNAL":"SASL_PLAINTEXT"},"features":{}}')
    back = BrokerRegistration.decode(3, reg.encode())
    assert back == reg and back.endpoints[0].host == "::1"


def test_broker_registration_older_versions_decode():
    v4 = (b'{"version":4,"host":"localhost","port":9092,"jmx_port":9999,"timestamp":"2233345666",'
          b'"endpoints":["CLIENT://host1:9092","REPLICATION://host1:9093"],"rack":"dc1",'
          b'"listener_security_protocol_map":{"CLIENT":"SSL","REPLICATION":"PLAINTEXT"}}')
    reg = BrokerRegistration.decode(0, v4)
    assert reg.endpoints == (EndPoint("CLIENT", "host1", 9092, "SSL"),
                             EndPoint("REPLICATION", "host1", 9093, "PLAINTEXT"))
    assert (reg.rack, reg.version, reg.jmx_port, reg.features) == ("dc1", 4, 9999, {})
    # v2: no protocol map, listener names are protocol names
    v2 = b'{"version":2,"host":"h","port":1,"jmx_port":-1,"timestamp":"1","endpoints":["PLAINTEXT://h:1","SSL://h:2"]}'
    assert BrokerRegistration.decode(9, v2).endpoints[1] == EndPoint("SSL", "h", 2, "SSL")
    v1 = b'{"version":1,"host":"h","port":9092,"jmx_port":-1,"timestamp":"1"}'
    assert BrokerRegistration.decode(9, v1).endpoints == (EndPoint("PLAINTEXT", "h", 9092, "PLAINTEXT"),)


def test_topic_assignment_v3():
    ta = TopicAssignment(partitions={1: [2, 3, 1], 0: [1, 2, 3]}, topic_id=TOPIC_ID,
                         adding_replicas={0: [3]}, removing_replicas={0: [4], 1: []})
    assert ta.encode() == (
        b'{"version":3,"topic_id":"AAECAwQFBgcICQoLDA0ODw","partitions":{"0":[1,2,3],"1":[2,3,1]},'
        b'"adding_replicas":{"0":[3]},"removing_replicas":{"0":[4]}}')
    back = TopicAssignment.decode(ta.encode())
    assert back.partitions == {0: [1, 2, 3], 1: [2, 3, 1]}
    assert back.topic_id == TOPIC_ID and back.adding_replicas == {0: [3]} and back.removing_replicas == {0: [4]}
    plain = TopicAssignment(partitions={0: [1]}, topic_id=TOPIC_ID)
    assert plain.encode() == (b'{"version":3,"topic_id":"AAECAwQFBgcICQoLDA0ODw","partitions":{"0":[1]},'
                              b'"adding_replicas":{},"removing_replicas":{}}')
    # a topic created before 2.8 (v1: no id, no reassignment maps)
    old = TopicAssignment.decode(b'{"version":1,"partitions":{"0":[1,2]}}')
    assert old == TopicAssignment(partitions={0: [1, 2]})


def test_partition_state_v1_and_zk_version():
    st = PartitionState(leader=1, leader_epoch=12, isr=[1, 2, 3], controller_epoch=5, zk_version=4)
    assert st.encode() == b'{"controller_epoch":5,"leader":1,"version":1,"leader_epoch":12,"isr":[1,2,3]}'
    assert PartitionState.decode(st.encode(), zk_version=4) == st
    unclean = PartitionState(leader=2, leader_epoch=13, isr=[2], controller_epoch=5,
                             leader_recovery_state=znodes.LEADER_RECOVERING)
    assert unclean.encode() == (b'{"controller_epoch":5,"leader":2,"version":1,"leader_epoch":13,"isr":[2],'
                                b'"leader_recovery_state":1}')
    assert PartitionState.decode(unclean.encode()).leader_recovery_state == 1


def test_config_entity_and_change_notification():
    assert znodes.encode_entity_config({"k": "v"}) == b'{"version":1,"config":{"k":"v"}}'
    assert znodes.decode_entity_config(b'{"version":1,"config":{"retention.ms":"1000"}}') == {"retention.ms": "1000"}
    assert znodes.decode_entity_config(None) == {} and znodes.decode_entity_config(b"") == {}
    assert znodes.encode_config_change_notification("topics/t") == b'{"version":2,"entity_path":"topics/t"}'
    assert znodes.decode_config_change_notification(
        b'{"version":1,"entity_type":"topics","entity_name":"t"}') == "topics/t"


def test_paths():
    assert znodes.broker_path(3) == "/brokers/ids/3"
    assert znodes.topic_path("t") == "/brokers/topics/t"
    assert znodes.partition_state_path("t", 2) == "/brokers/topics/t/partitions/2/state"
    assert znodes.topic_config_path("t") == "/config/topics/t"
    assert znodes.broker_config_path(1) == "/config/brokers/1"
    assert znodes.broker_config_path(znodes.DEFAULT_ENTITY) == "/config/brokers/<default>"
    assert znodes.delete_topic_path("t") == "/admin/delete_topics/t"
    assert set(znodes.PERSISTENT_PATHS) == {
        "/consumers", "/brokers/ids", "/brokers/topics", "/brokers/seqid", "/config/changes", "/config/topics",
        "/config/clients", "/config/users", "/config/brokers", "/config/ips", "/admin/delete_topics",
        "/isr_change_notification", "/latest_producer_id_block", "/log_dir_event_notification"}


def test_producer_id_block_bounds_are_strings():
    block = znodes.ProducerIdBlock(broker_id=2, first=0, last=999)
    assert block.encode() == b'{"version":1,"broker":2,"block_start":"0","block_end":"999"}'
    assert znodes.ProducerIdBlock.decode(block.encode()) == block
    assert block.next_block(3) == znodes.ProducerIdBlock(3, 1000, 1999)
    assert znodes.ProducerIdBlock.decode(b"") is None  # the empty znode made at start
    assert znodes.ProducerIdBlock.decode(b'{"version":1,"broker":1,"block_start":5000,"block_end":"5999","x":0}') \
        == znodes.ProducerIdBlock(1, 5000, 5999)
