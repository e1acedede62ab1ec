"""Authorization checks where Trafka differed from Kafka 3.9's KafkaApis (tests/security/README.md
has the whole review). One broker process with the authorizer on; every connection is
User:ANONYMOUS, so the broker allows everyone where a resource has no ACLs, and an ACL for
User:alice on a resource is what takes ANONYMOUS's access to it away (tests/security/test_acls_clients.py).
"""

from __future__ import annotations

import time
import uuid

import pytest
from confluent_kafka.admin import (AclBinding, AclBindingFilter, AclOperation, AclPermissionType, AdminClient,
                                   NewTopic, ResourcePatternType, ResourceType)

from tests.brokerproc import BrokerProcess, raw_request
from wire.primitives import ZERO_UUID
from wire.records import Record, build_batch

pytestmark = pytest.mark.timeout(120)

ANY_FILTER = AclBindingFilter(ResourceType.ANY, None, ResourcePatternType.ANY, None, None, AclOperation.ANY,
                              AclPermissionType.ANY)
NONE, TOPIC_AUTHORIZATION_FAILED, UNKNOWN_TOPIC_OR_PARTITION, TRANSACTIONAL_ID_AUTHORIZATION_FAILED = 0, 29, 3, 53


@pytest.fixture(scope="module")
def broker(tmp_path_factory):
    with BrokerProcess(tmp_path_factory.mktemp("acl-rules") / "data",
                       "--set", "authorizer.class.name=kafka.security.authorizer.AclAuthorizer",
                       "--set", "allow.everyone.if.no.acl.found=true") as b:
        yield b


@pytest.fixture
def admin(broker):
    client = AdminClient({"bootstrap.servers": broker.bootstrap})
    yield client
    client.delete_acls([ANY_FILTER])[ANY_FILTER].result(timeout=10)


def unique(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


def alice_only(admin: AdminClient, resource_type: ResourceType, name: str, op: AclOperation) -> None:
    """An ALLOW for User:alice: the resource now has ACLs, none of them ANONYMOUS's."""
    binding = AclBinding(resource_type, name, ResourcePatternType.LITERAL, "User:alice", "*", op,
                         AclPermissionType.ALLOW)
    for future in admin.create_acls([binding]).values():
        future.result(timeout=10)


def make_topic(admin: AdminClient, name: str) -> str:
    admin.create_topics([NewTopic(name, 1, 1)])[name].result(timeout=10)
    return name


def produce(broker, topic: str, batch: bytes, transactional_id: str | None) -> int:
    body = {"transactional_id": transactional_id, "acks": 1, "timeout_ms": 5000,
            "topic_data": [{"name": topic, "partition_data": [{"index": 0, "records": bytes(batch)}]}]}
    answer = raw_request("127.0.0.1", broker.port, 0, 8, body)
    return answer["responses"][0]["partition_responses"][0]["error_code"]


def one_record(**batch: object) -> bytes:
    return bytes(build_batch([Record(offset=0, timestamp=int(time.time() * 1000), key=None, value=b"v")], **batch))


def test_produce_checks_the_transactional_id_only_for_transactional_batches(broker, admin):
    """Kafka (handleProduceRequest): WRITE on the transactional id is checked only when the
    request carries transactional batches (RequestUtils.hasTransactionalRecords); such batches
    without a transactional id are refused with TRANSACTIONAL_ID_AUTHORIZATION_FAILED too."""
    topic = make_topic(admin, unique("plain"))
    tid = unique("tx")
    alice_only(admin, ResourceType.TRANSACTIONAL_ID, tid, AclOperation.WRITE)
    # A plain batch with a transactional id ANONYMOUS may not use: written, as in Kafka.
    assert produce(broker, topic, one_record(), tid) == NONE
    # A transactional batch: refused, with the id ...
    txn = one_record(producer_id=1000, producer_epoch=0, base_sequence=0, is_transactional=True)
    assert produce(broker, topic, txn, tid) == TRANSACTIONAL_ID_AUTHORIZATION_FAILED
    # ... and without one.
    assert produce(broker, topic, txn, None) == TRANSACTIONAL_ID_AUTHORIZATION_FAILED


def metadata_topic_id(broker, topic: str):
    body = {"topics": [{"topic_id": ZERO_UUID, "name": topic}], "allow_auto_topic_creation": False,
            "include_topic_authorized_operations": False}
    answer = raw_request("127.0.0.1", broker.port, 3, 12, body)
    assert answer["topics"][0]["error_code"] == NONE
    return answer["topics"][0]["topic_id"]


def test_delete_topics_by_id_hides_the_name_without_describe(broker, admin):
    """Kafka (handleDeleteTopicsRequest): a topic asked for by id that the principal may not
    DESCRIBE answers TOPIC_AUTHORIZATION_FAILED with a null name; by name, no DELETE is
    TOPIC_AUTHORIZATION_FAILED whether or not the topic exists."""
    topic = make_topic(admin, unique("secret"))
    topic_id = metadata_topic_id(broker, topic)
    alice_only(admin, ResourceType.TOPIC, topic, AclOperation.DELETE)
    answer = raw_request("127.0.0.1", broker.port, 20, 6,
                         {"topics": [{"name": None, "topic_id": topic_id}], "timeout_ms": 5000})
    result = answer["responses"][0]
    assert (result["name"], result["error_code"]) == (None, TOPIC_AUTHORIZATION_FAILED)
    missing = unique("missing")
    alice_only(admin, ResourceType.TOPIC, missing, AclOperation.DELETE)
    answer = raw_request("127.0.0.1", broker.port, 20, 6,
                         {"topics": [{"name": missing, "topic_id": ZERO_UUID}], "timeout_ms": 5000})
    assert answer["responses"][0]["error_code"] == TOPIC_AUTHORIZATION_FAILED
    # With DESCRIBE but no DELETE, asked by id: the name is known, the deletion still refused.
    alice_only(admin, ResourceType.TOPIC, topic, AclOperation.DESCRIBE)
    binding = AclBinding(ResourceType.TOPIC, topic, ResourcePatternType.LITERAL, "User:ANONYMOUS", "*",
                         AclOperation.DESCRIBE, AclPermissionType.ALLOW)
    admin.create_acls([binding])[binding].result(timeout=10)
    answer = raw_request("127.0.0.1", broker.port, 20, 6,
                         {"topics": [{"name": None, "topic_id": topic_id}], "timeout_ms": 5000})
    result = answer["responses"][0]
    assert (result["name"], result["error_code"]) == (topic, TOPIC_AUTHORIZATION_FAILED)


def metadata(broker, topics: list[dict], allow_auto: bool) -> list[dict]:
    body = {"topics": topics, "allow_auto_topic_creation": allow_auto, "include_topic_authorized_operations": False}
    return raw_request("127.0.0.1", broker.port, 3, 12, body)["topics"]


def test_metadata_hides_names_asked_by_id(broker, admin):
    """Kafka (handleTopicMetadataRequest): a topic asked for by id without DESCRIBE answers
    TOPIC_AUTHORIZATION_FAILED with a null name (the id stays); by name, with a zero id."""
    topic = make_topic(admin, unique("hidden"))
    topic_id = metadata_topic_id(broker, topic)
    alice_only(admin, ResourceType.TOPIC, topic, AclOperation.DESCRIBE)
    [entry] = metadata(broker, [{"topic_id": topic_id, "name": None}], False)
    assert (entry["name"], entry["topic_id"], entry["error_code"]) == (None, topic_id, TOPIC_AUTHORIZATION_FAILED)
    [entry] = metadata(broker, [{"topic_id": ZERO_UUID, "name": topic}], False)
    assert (entry["name"], entry["topic_id"], entry["error_code"]) == (topic, ZERO_UUID, TOPIC_AUTHORIZATION_FAILED)


def test_metadata_refuses_auto_creation_without_create(broker, admin):
    """Kafka (handleTopicMetadataRequest): a missing topic the request would auto-create
    (auto.create.topics.enable is on by default) without CREATE on the cluster or the topic
    answers TOPIC_AUTHORIZATION_FAILED, not UNKNOWN_TOPIC_OR_PARTITION."""
    missing = unique("auto")
    # ANONYMOUS may DESCRIBE the missing topic and ALTER the cluster (to manage ACLs), but CREATE
    # neither the topic nor on the cluster: both have ACLs, only alice's grant CREATE.
    for resource_type, name, op in ((ResourceType.TOPIC, missing, AclOperation.DESCRIBE),
                                    (ResourceType.BROKER, "kafka-cluster", AclOperation.ALTER)):
        binding = AclBinding(resource_type, name, ResourcePatternType.LITERAL, "User:ANONYMOUS", "*", op,
                             AclPermissionType.ALLOW)
        admin.create_acls([binding])[binding].result(timeout=10)
    alice_only(admin, ResourceType.BROKER, "kafka-cluster", AclOperation.CREATE)
    alice_only(admin, ResourceType.TOPIC, missing, AclOperation.CREATE)
    [entry] = metadata(broker, [{"topic_id": ZERO_UUID, "name": missing}], True)
    assert entry["error_code"] == TOPIC_AUTHORIZATION_FAILED
    # Without auto-creation asked for, a missing topic is just unknown.
    [entry] = metadata(broker, [{"topic_id": ZERO_UUID, "name": missing}], False)
    assert entry["error_code"] == UNKNOWN_TOPIC_OR_PARTITION
    assert missing not in admin.list_topics(timeout=10).topics


def test_write_txn_markers_allowed_by_alter_on_the_cluster(broker, admin):
    """Kafka 3.9 (handleWriteTxnMarkersRequest): ALTER on the cluster is enough; only without
    it is CLUSTER_ACTION required (CLUSTER_AUTHORIZATION_FAILED per partition)."""
    topic = make_topic(admin, unique("markers"))
    binding = AclBinding(ResourceType.BROKER, "kafka-cluster", ResourcePatternType.LITERAL, "User:ANONYMOUS", "*",
                         AclOperation.ALTER, AclPermissionType.ALLOW)
    admin.create_acls([binding])[binding].result(timeout=10)
    body = {"markers": [{"producer_id": 4242, "producer_epoch": 0, "transaction_result": False,
                         "topics": [{"name": topic, "partition_indexes": [0]}], "coordinator_epoch": 0}]}
    answer = raw_request("127.0.0.1", broker.port, 27, 1, body)
    code = answer["markers"][0]["topics"][0]["partitions"][0]["error_code"]
    assert code != 31, "ALTER on the cluster must be enough"  # CLUSTER_AUTHORIZATION_FAILED
    assert code == NONE


def test_cluster_authorized_operations_are_none_without_describe(broker, admin):
    """Kafka (AuthHelper.computeDescribeClusterResponse; Metadata v8-10 alike): the cluster's
    authorized operations are 0 unless the principal may DESCRIBE the cluster, whatever else
    it may do there."""
    for op, permission in ((AclOperation.ALL, AclPermissionType.ALLOW), (AclOperation.DESCRIBE, AclPermissionType.DENY)):
        binding = AclBinding(ResourceType.BROKER, "kafka-cluster", ResourcePatternType.LITERAL, "User:ANONYMOUS",
                             "*", op, permission)
        admin.create_acls([binding])[binding].result(timeout=10)
    answer = raw_request("127.0.0.1", broker.port, 60, 0, {"include_cluster_authorized_operations": True})
    assert answer["cluster_authorized_operations"] == 0
    body = {"topics": [], "allow_auto_topic_creation": False, "include_cluster_authorized_operations": True,
            "include_topic_authorized_operations": False}
    assert raw_request("127.0.0.1", broker.port, 3, 10, body)["cluster_authorized_operations"] == 0


def test_describe_transactions_shows_only_topics_the_principal_may_describe(broker, admin):
    """Kafka (handleDescribeTransactionsRequest): the partitions of a transaction are listed
    only for topics the principal may DESCRIBE."""
    from confluent_kafka import Producer

    shown, hidden = make_topic(admin, unique("shown")), make_topic(admin, unique("hidden"))
    tid = unique("tx")
    producer = Producer({"bootstrap.servers": broker.bootstrap, "transactional.id": tid})
    producer.init_transactions(10)
    producer.begin_transaction()
    for topic in (shown, hidden):
        producer.produce(topic, b"v")
    producer.flush(10)
    try:
        alice_only(admin, ResourceType.TOPIC, hidden, AclOperation.DESCRIBE)
        answer = raw_request("127.0.0.1", broker.port, 65, 0, {"transactional_ids": [tid]})
        [state] = answer["transaction_states"]
        assert state["error_code"] == NONE and state["transaction_state"] == "Ongoing"
        assert [t["topic"] for t in state["topics"]] == [shown]
    finally:
        producer.abort_transaction(10)


def test_create_topics_shows_configs_only_with_describe_configs(broker, admin):
    """Kafka (handleCreateTopicsRequest): a topic created by a principal that may not
    DESCRIBE_CONFIGS it answers no configs, -1 partitions and replication factor, and
    topic_config_error_code TOPIC_AUTHORIZATION_FAILED (v5+); with it, all of them."""
    def create(name: str) -> dict:
        body = {"topics": [{"name": name, "num_partitions": 2, "replication_factor": 1, "assignments": [],
                            "configs": []}], "timeout_ms": 5000, "validate_only": False}
        return raw_request("127.0.0.1", broker.port, 19, 7, body)["topics"][0]

    visible = create(unique("visible"))
    # topic_config_error_code is a tagged field: absent when NONE
    assert (visible["error_code"], visible.get("topic_config_error_code", NONE), visible["num_partitions"]) == \
        (NONE, NONE, 2)
    assert visible["configs"]
    name = unique("blind")
    alice_only(admin, ResourceType.TOPIC, name, AclOperation.DESCRIBE_CONFIGS)  # CREATE: the cluster has no ACLs
    blind = create(name)
    assert (blind["error_code"], blind.get("topic_config_error_code", NONE)) == (NONE, TOPIC_AUTHORIZATION_FAILED)
    assert (blind["num_partitions"], blind["replication_factor"], blind["configs"]) == (-1, -1, [])
    answer = raw_request("127.0.0.1", broker.port, 19, 7, {"topics": [{"name": name, "num_partitions": 1,
                         "replication_factor": 1, "assignments": [], "configs": []}], "timeout_ms": 5000,
                         "validate_only": False})
    assert answer["topics"][0]["error_code"] == 36  # TOPIC_ALREADY_EXISTS: it was created


def test_elect_leaders_without_alter_fails_every_partition(tmp_path):
    """Kafka (handleElectLeaders): without ALTER on the cluster the answer carries
    CLUSTER_AUTHORIZATION_FAILED at the top and for each partition asked for (v0 has only
    the partitions' codes). A broker of its own: ANONYMOUS loses ALTER, so it could not
    remove the ACLs afterwards."""
    with BrokerProcess(tmp_path / "data", "--set", "authorizer.class.name=kafka.security.authorizer.AclAuthorizer",
                       "--set", "allow.everyone.if.no.acl.found=true") as own:
        client = AdminClient({"bootstrap.servers": own.bootstrap})
        make_topic(client, "elect")
        binding = AclBinding(ResourceType.BROKER, "kafka-cluster", ResourcePatternType.LITERAL, "User:ANONYMOUS",
                             "*", AclOperation.ALTER, AclPermissionType.DENY)
        client.create_acls([binding])[binding].result(timeout=10)
        body = {"topic_partitions": [{"topic": "elect", "partitions": [0]}], "timeout_ms": 5000}
        answer = raw_request("127.0.0.1", own.port, 43, 0, body)
        [topic] = answer["replica_election_results"]
        assert [p["error_code"] for p in topic["partition_result"]] == [31]  # CLUSTER_AUTHORIZATION_FAILED
        answer = raw_request("127.0.0.1", own.port, 43, 1, {**body, "election_type": 0})
        assert answer["error_code"] == 31
        assert answer["replica_election_results"][0]["partition_result"][0]["error_code"] == 31


def test_add_partitions_to_txn_never_adds_an_internal_topic(broker, admin):
    """Kafka (handleAddPartitionsToTxnRequest, v0-3): internal topics are left out of the
    topics a client may WRITE, so __consumer_offsets answers TOPIC_AUTHORIZATION_FAILED even
    where everything is allowed, and the other partitions OPERATION_NOT_ATTEMPTED."""
    topic = make_topic(admin, unique("txn"))
    body = {"v3_and_below_transactional_id": unique("tx"), "v3_and_below_producer_id": 1000,
            "v3_and_below_producer_epoch": 0,
            "v3_and_below_topics": [{"name": "__consumer_offsets", "partitions": [0]},
                                    {"name": topic, "partitions": [0]}]}
    answer = raw_request("127.0.0.1", broker.port, 24, 3, body)
    codes = {t["name"]: [r["partition_error_code"] for r in t["results_by_partition"]]
             for t in answer["results_by_topic_v3_and_below"]}
    assert codes == {"__consumer_offsets": [TOPIC_AUTHORIZATION_FAILED], topic: [55]}  # 55: OPERATION_NOT_ATTEMPTED
