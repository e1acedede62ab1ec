"""The APIs Trafka serves, and at which versions: what ApiVersions advertises.

The ranges (docs/protocol-versions.md says why, per API):
- every version Kafka 3.9 serves for the APIs Trafka implements, from v0: clients and
  tools written before Kafka 4 (Burrow, Sarama, kafka-go, kafka-python with an old
  api_version) still send the versions Kafka 4.0 removed (KIP-896), and a 3.9 broker
  answers them. Old versions keep 3.9's semantics: Produce v0-2 carry magic 0/1 message
  sets, converted to magic 2 when stored; Fetch v0-3 get the stored batches down-converted
  to magic 0 (v0-1) or 1 (v2-3); ListOffsets v0 answers old-style offset lists;
  OffsetCommit/OffsetFetch v0 use ZooKeeper's /consumers znodes in a cluster and are
  unsupported without ZooKeeper, as on a KRaft broker;
- maximums as Kafka 3.9, except where a stock client needs a later version:
- no telemetry (71/72): advertising it makes clients use it;
- KIP-848 consumer groups: ConsumerGroupHeartbeat (68) at v0-1 and ConsumerGroupDescribe (69);
- the share-group APIs (76-79) at v0-1: v1 is Kafka 4.1's stable version (confluent-kafka's
  ShareConsumer), v0 the early access of Kafka 3.9 that kafka-clients 3.9's
  KafkaShareConsumer sends; only share consumers send them. ReadShareGroupState (84) and
  WriteShareGroupState (85) v0 are what share-partition leaders send the share coordinator
  in a cluster, DeleteShareGroupState (86) v0 what the group coordinator sends it when a
  share group is deleted (Kafka's broker listener APIs).

`INTER_BROKER_VERSIONS` holds the APIs brokers of a cluster send each other (controller to
broker, leader to controller) at Kafka 3.9's full ranges. They
are generated, encoded and decoded like the rest, but not advertised: ApiVersions lists
only `API_VERSIONS`, and every key there must have a handler (a test keeps it so). The
controller and the brokers need the codecs before the handlers exist, so a key lives here
until its handler lands, and moves to `API_VERSIONS` in the same commit — Kafka's ZooKeeper
brokers advertise these APIs too. All of the cluster's (`INTER_BROKER_APIS`) have handlers
now, so the table is empty. A request for one of them without a handler is decoded
and answered UNSUPPORTED_VERSION by the network layer, as any API without a handler.
"""

from __future__ import annotations

import enum


class ApiKey(enum.IntEnum):
    PRODUCE = 0
    FETCH = 1
    LIST_OFFSETS = 2
    METADATA = 3
    LEADER_AND_ISR = 4
    STOP_REPLICA = 5
    UPDATE_METADATA = 6
    CONTROLLED_SHUTDOWN = 7
    OFFSET_COMMIT = 8
    OFFSET_FETCH = 9
    FIND_COORDINATOR = 10
    JOIN_GROUP = 11
    HEARTBEAT = 12
    LEAVE_GROUP = 13
    SYNC_GROUP = 14
    DESCRIBE_GROUPS = 15
    LIST_GROUPS = 16
    SASL_HANDSHAKE = 17
    API_VERSIONS = 18
    CREATE_TOPICS = 19
    DELETE_TOPICS = 20
    DELETE_RECORDS = 21
    INIT_PRODUCER_ID = 22
    OFFSET_FOR_LEADER_EPOCH = 23
    ADD_PARTITIONS_TO_TXN = 24
    ADD_OFFSETS_TO_TXN = 25
    END_TXN = 26
    WRITE_TXN_MARKERS = 27
    TXN_OFFSET_COMMIT = 28
    DESCRIBE_ACLS = 29
    CREATE_ACLS = 30
    DELETE_ACLS = 31
    DESCRIBE_CONFIGS = 32
    ALTER_CONFIGS = 33
    DESCRIBE_LOG_DIRS = 35
    SASL_AUTHENTICATE = 36
    CREATE_PARTITIONS = 37
    DELETE_GROUPS = 42
    ELECT_LEADERS = 43
    INCREMENTAL_ALTER_CONFIGS = 44
    ALTER_PARTITION_REASSIGNMENTS = 45
    LIST_PARTITION_REASSIGNMENTS = 46
    OFFSET_DELETE = 47
    DESCRIBE_USER_SCRAM_CREDENTIALS = 50
    ALTER_USER_SCRAM_CREDENTIALS = 51
    DESCRIBE_CLIENT_QUOTAS = 48
    ALTER_CLIENT_QUOTAS = 49
    ALTER_PARTITION = 56
    DESCRIBE_CLUSTER = 60
    DESCRIBE_PRODUCERS = 61
    DESCRIBE_TRANSACTIONS = 65
    LIST_TRANSACTIONS = 66
    DESCRIBE_TOPIC_PARTITIONS = 75
    SHARE_GROUP_HEARTBEAT = 76
    SHARE_GROUP_DESCRIBE = 77
    SHARE_FETCH = 78
    SHARE_ACKNOWLEDGE = 79
    READ_SHARE_GROUP_STATE = 84
    WRITE_SHARE_GROUP_STATE = 85
    DELETE_SHARE_GROUP_STATE = 86
    CONSUMER_GROUP_HEARTBEAT = 68
    CONSUMER_GROUP_DESCRIBE = 69


# api key -> (min version, max version) advertised and decoded.
API_VERSIONS: dict[int, tuple[int, int]] = {
    ApiKey.PRODUCE: (0, 11),
    ApiKey.FETCH: (0, 17),
    ApiKey.LIST_OFFSETS: (0, 9),
    ApiKey.METADATA: (0, 12),
    ApiKey.OFFSET_COMMIT: (0, 9),
    ApiKey.OFFSET_FETCH: (0, 9),
    ApiKey.FIND_COORDINATOR: (0, 6),
    ApiKey.JOIN_GROUP: (0, 9),
    ApiKey.HEARTBEAT: (0, 4),
    ApiKey.LEAVE_GROUP: (0, 5),
    ApiKey.SYNC_GROUP: (0, 5),
    ApiKey.DESCRIBE_GROUPS: (0, 6),  # v6: Kafka 4.0 (wire.newer_versions)
    ApiKey.LIST_GROUPS: (0, 5),
    ApiKey.SASL_HANDSHAKE: (0, 1),
    ApiKey.API_VERSIONS: (0, 4),
    ApiKey.CREATE_TOPICS: (0, 7),
    ApiKey.DELETE_TOPICS: (0, 6),
    ApiKey.DELETE_RECORDS: (0, 2),
    ApiKey.INIT_PRODUCER_ID: (0, 5),
    ApiKey.LEADER_AND_ISR: (0, 7),
    ApiKey.STOP_REPLICA: (0, 4),
    ApiKey.UPDATE_METADATA: (0, 8),
    ApiKey.CONTROLLED_SHUTDOWN: (0, 3),
    ApiKey.OFFSET_FOR_LEADER_EPOCH: (0, 4),
    ApiKey.ADD_PARTITIONS_TO_TXN: (0, 5),
    ApiKey.ADD_OFFSETS_TO_TXN: (0, 4),
    ApiKey.END_TXN: (0, 4),
    ApiKey.WRITE_TXN_MARKERS: (0, 1),
    ApiKey.TXN_OFFSET_COMMIT: (0, 4),
    ApiKey.DESCRIBE_ACLS: (0, 3),
    ApiKey.CREATE_ACLS: (0, 3),
    ApiKey.DELETE_ACLS: (0, 3),
    ApiKey.DESCRIBE_CONFIGS: (0, 4),
    ApiKey.ALTER_CONFIGS: (0, 2),
    ApiKey.DESCRIBE_LOG_DIRS: (0, 4),
    ApiKey.SASL_AUTHENTICATE: (0, 2),
    ApiKey.CREATE_PARTITIONS: (0, 3),
    ApiKey.DELETE_GROUPS: (0, 2),
    ApiKey.ELECT_LEADERS: (0, 2),
    ApiKey.INCREMENTAL_ALTER_CONFIGS: (0, 1),
    ApiKey.ALTER_PARTITION_REASSIGNMENTS: (0, 0),
    ApiKey.LIST_PARTITION_REASSIGNMENTS: (0, 0),
    ApiKey.OFFSET_DELETE: (0, 0),
    ApiKey.DESCRIBE_USER_SCRAM_CREDENTIALS: (0, 0),
    ApiKey.ALTER_USER_SCRAM_CREDENTIALS: (0, 0),
    ApiKey.DESCRIBE_CLIENT_QUOTAS: (0, 1),
    ApiKey.ALTER_CLIENT_QUOTAS: (0, 1),
    ApiKey.DESCRIBE_CLUSTER: (0, 1),
    ApiKey.DESCRIBE_PRODUCERS: (0, 0),
    ApiKey.ALTER_PARTITION: (0, 3),
    ApiKey.DESCRIBE_TRANSACTIONS: (0, 0),
    ApiKey.LIST_TRANSACTIONS: (0, 1),
    ApiKey.DESCRIBE_TOPIC_PARTITIONS: (0, 0),
    # Share groups (KIP-932): v1 as Kafka 4.1, and 3.9's early-access v0 for kafka-clients
    # 3.9's KafkaShareConsumer (wire.newer_versions; Kafka 4.1 itself dropped v0).
    ApiKey.SHARE_GROUP_HEARTBEAT: (0, 1),
    ApiKey.SHARE_GROUP_DESCRIBE: (0, 1),
    ApiKey.SHARE_FETCH: (0, 1),
    ApiKey.SHARE_ACKNOWLEDGE: (0, 1),
    # The share coordinator's (KIP-932), sent between brokers of a cluster: a share-partition
    # leader reads and writes its state at the leader of its `__share_group_state` partition.
    ApiKey.READ_SHARE_GROUP_STATE: (0, 0),
    ApiKey.WRITE_SHARE_GROUP_STATE: (0, 0),
    ApiKey.DELETE_SHARE_GROUP_STATE: (0, 0),
    ApiKey.CONSUMER_GROUP_HEARTBEAT: (0, 1),  # v1: Kafka 4.0 (wire.newer_versions), librdkafka 2.16's only version
    ApiKey.CONSUMER_GROUP_DESCRIBE: (0, 0),
}

# api key -> (min version, max version) decoded and encoded but not advertised (see above).
INTER_BROKER_VERSIONS: dict[int, tuple[int, int]] = {}

# The inter-broker APIs of a ZooKeeper-mode cluster (controller → brokers, leader →
# controller), now all handled and advertised, as Kafka's ZooKeeper brokers advertise them.
INTER_BROKER_APIS: tuple[int, ...] = (ApiKey.LEADER_AND_ISR, ApiKey.STOP_REPLICA, ApiKey.UPDATE_METADATA,
                                      ApiKey.CONTROLLED_SHUTDOWN, ApiKey.ALTER_PARTITION)

# Every API the codec knows (what `wire.generate` emits): both tables, which never share a key.
CODEC_VERSIONS: dict[int, tuple[int, int]] = {**API_VERSIONS, **INTER_BROKER_VERSIONS}


def is_supported(api_key: int, api_version: int) -> bool:
    """True when the codec decodes this (API, version): advertised or inter-broker."""
    versions = CODEC_VERSIONS.get(api_key)
    return versions is not None and versions[0] <= api_version <= versions[1]


def api_name(api_key: int) -> str:
    try:
        return ApiKey(api_key).name
    except ValueError:
        return f"API_{api_key}"
