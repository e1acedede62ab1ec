"""The valid requests of every API, per version: small, hand-written, over the fixture's
state (fixture.py). The first case marked `primary` of each (API, version) is the one the
schema-generated hostile variants start from (hostile.py).

Names a case creates carry the version ("pd-ct-v3"), so every version meets the same state
on both brokers whatever the versions before it did.
"""

from __future__ import annotations

import uuid
from typing import Callable

from compat_tests.protocol_diff import flows, payloads
from compat_tests.protocol_diff.fixture import GROUP, STABLE_GROUP, TOPIC_A, TOPIC_B, TOPIC_TXN, TXN_DONE, TXN_OPEN
from compat_tests.protocol_diff.flows import member, generation, pid, epoch
from compat_tests.protocol_diff.model import Case, Ctx
from wire.registry import ApiKey as K

CaseList = Callable[[int], list[Case]]
API_CASES: dict[int, CaseList] = {}


def api(key: int):
    def register(fn: CaseList) -> CaseList:
        API_CASES[key] = fn
        return fn
    return register


def _c(key: int, v: int, variant: str, body, **kw) -> Case:
    return Case(key, v, variant, body, **kw)


# --------------------------------------------------------------------------- data plane


@api(K.PRODUCE)
def produce(v: int) -> list[Case]:
    # Topics of its own per version: what one version appended (or refused) does not shift
    # the offsets the next one is answered with.
    topic, idem_topic = f"pd-p-v{v}", f"pd-idem-v{v}"
    data = payloads.records(2, tag=f"p{v}-")
    steps = [
        flows.create_topic(topic, 2),
        flows.create_topic(idem_topic, 1),
        _c(K.PRODUCE, v, "valid:acks=all", lambda c: flows.produce_body(topic, 0, data), primary=True),
        _c(K.PRODUCE, v, "valid:acks=1", lambda c: flows.produce_body(topic, 1, data, acks=1)),
        _c(K.PRODUCE, v, "valid:acks=0", lambda c: flows.produce_body(topic, 1, data, acks=0), no_response=True),
        _c(K.PRODUCE, v, "valid:two-topics", lambda c: {
            "transactional_id": None, "acks": -1, "timeout_ms": 10_000,
            "topic_data": [{"name": topic, "partition_data": [{"index": 0, "records": data},
                                                              {"index": 1, "records": data}]},
                           {"name": idem_topic, "partition_data": [{"index": 0, "records": data}]}]}),
    ]
    # An idempotent producer of its own: sequence 0, then a duplicate of it.
    key = f"pd-idem-v{v}"
    steps.append(flows.init_producer(key, None))

    def idem(c: Ctx) -> dict:
        batch = payloads.records(2, tag=f"i{v}-", producer_id=pid(c, key), producer_epoch=epoch(c, key),
                                 base_sequence=0)
        return flows.produce_body(idem_topic, 0, batch)
    steps.append(_c(K.PRODUCE, v, "valid:idempotent", idem))
    steps.append(_c(K.PRODUCE, v, "valid:idempotent-duplicate", idem))
    return steps


def _fetch_body(c: Ctx, partitions: list[tuple[str, int, int]], isolation: int = 0, partition_max: int = 1 << 20,
                session_epoch: int = -1, max_wait: int = 0) -> dict:
    topics: dict[str, list[dict]] = {}
    for topic, partition, offset in partitions:
        topics.setdefault(topic, []).append({
            "partition": partition, "current_leader_epoch": -1, "fetch_offset": offset, "last_fetched_epoch": -1,
            "log_start_offset": -1, "partition_max_bytes": partition_max})
    return {"cluster_id": None, "replica_id": -1, "max_wait_ms": max_wait, "min_bytes": 1, "max_bytes": 1 << 22,
            "isolation_level": isolation, "session_id": 0, "session_epoch": session_epoch,
            "topics": [{"topic": t, "topic_id": c.topic_id(t), "partitions": p} for t, p in topics.items()],
            "forgotten_topics_data": [], "rack_id": ""}


@api(K.FETCH)
def fetch(v: int) -> list[Case]:
    steps = [
        _c(K.FETCH, v, "valid", lambda c: _fetch_body(c, [(TOPIC_A, 0, 0), (TOPIC_A, 1, 1), (TOPIC_A, 2, 0)]),
           primary=True),
        _c(K.FETCH, v, "valid:mid-batch-offset", lambda c: _fetch_body(c, [(TOPIC_A, 0, 3), (TOPIC_B, 0, 1)])),
        _c(K.FETCH, v, "valid:at-end", lambda c: _fetch_body(c, [(TOPIC_A, 0, 5)])),
        _c(K.FETCH, v, "valid:read-uncommitted-txn", lambda c: _fetch_body(c, [(TOPIC_TXN, 0, 0)])),
        _c(K.FETCH, v, "valid:read-committed-txn", lambda c: _fetch_body(c, [(TOPIC_TXN, 0, 0)], isolation=1)),
        _c(K.FETCH, v, "valid:partition-max-bytes=10",
           lambda c: _fetch_body(c, [(TOPIC_B, 0, 0)], partition_max=10)),
    ]
    if v >= 7:
        steps.append(_c(K.FETCH, v, "valid:new-session", lambda c: _fetch_body(c, [(TOPIC_A, 0, 0)], session_epoch=0)))
    return steps


def _list_offsets_body(c: Ctx, parts: list[tuple[str, int, int]], isolation: int = 0) -> dict:
    topics: dict[str, list[dict]] = {}
    for topic, partition, ts in parts:
        topics.setdefault(topic, []).append({"partition_index": partition, "current_leader_epoch": -1,
                                             "timestamp": ts, "max_num_offsets": 1})
    return {"replica_id": -1, "isolation_level": isolation,
            "topics": [{"name": t, "partitions": p} for t, p in topics.items()]}


@api(K.LIST_OFFSETS)
def list_offsets(v: int) -> list[Case]:
    ts = payloads.BASE_TS
    steps = [
        _c(K.LIST_OFFSETS, v, "valid", lambda c: _list_offsets_body(
            c, [(TOPIC_A, 0, -1), (TOPIC_A, 1, -2), (TOPIC_A, 2, -1)]), primary=True),
        _c(K.LIST_OFFSETS, v, "valid:by-timestamp", lambda c: _list_offsets_body(
            c, [(TOPIC_A, 0, ts + 2), (TOPIC_A, 1, ts + 100), (TOPIC_A, 2, ts)])),
    ]
    if v >= 2:
        steps.append(_c(K.LIST_OFFSETS, v, "valid:read-committed", lambda c: _list_offsets_body(
            c, [(TOPIC_TXN, 0, -1)], isolation=1)))
    if v >= 7:
        steps.append(_c(K.LIST_OFFSETS, v, "valid:max-timestamp", lambda c: _list_offsets_body(
            c, [(TOPIC_A, 0, -3), (TOPIC_B, 0, -3)])))
    # Max timestamp (-3, v7+), earliest local (-4, v8+) and earliest pending upload (-5, v9+)
    # at every version: what a broker answers below the version that introduced each.
    steps.append(_c(K.LIST_OFFSETS, v, "valid:special-timestamps", lambda c: _list_offsets_body(
        c, [(TOPIC_A, 0, -3), (TOPIC_A, 1, -4), (TOPIC_A, 2, -5)])))
    return steps


@api(K.METADATA)
def metadata(v: int) -> list[Case]:
    def body(topics, auto=False, topic_ops=False, cluster_ops=False):
        return lambda c: {"topics": None if topics is None else [
            {"name": t, "topic_id": uuid.UUID(int=0)} for t in topics],
            "allow_auto_topic_creation": auto, "include_cluster_authorized_operations": cluster_ops,
            "include_topic_authorized_operations": topic_ops}
    steps = [_c(K.METADATA, v, "valid", body([TOPIC_A, TOPIC_B]), primary=True),
             _c(K.METADATA, v, "valid:all-topics", body([] if v == 0 else None))]
    if v >= 8:
        steps.append(_c(K.METADATA, v, "valid:authorized-operations", body([TOPIC_A], topic_ops=True,
                                                                            cluster_ops=True)))
    if v >= 10:
        steps.append(_c(K.METADATA, v, "valid:by-topic-id", lambda c: {
            "topics": [{"name": None, "topic_id": c.topic_id(TOPIC_A)}], "allow_auto_topic_creation": False}))
    if v >= 4:
        steps.append(_c(K.METADATA, v, "valid:auto-create", body([f"pd-auto-v{v}"], auto=True), settle=True))
    return steps


# --------------------------------------------------------------------------- groups


@api(K.OFFSET_COMMIT)
def offset_commit(v: int) -> list[Case]:
    group = f"pd-oc-v{v}"
    steps = [_c(K.OFFSET_COMMIT, v, "valid:simple", lambda c: flows.simple_commit_body(
        f"pd-ocs-v{v}", {(TOPIC_A, 0): 2, (TOPIC_A, 1): 1, (TOPIC_B, 0): 0}))]
    steps += flows.classic_member(group)

    def body(c: Ctx) -> dict:
        out = flows.simple_commit_body(group, {(TOPIC_A, 0): 4, (TOPIC_A, 1): 2})
        out["generation_id_or_member_epoch"] = generation(c, group)
        out["member_id"] = member(c, group)
        return out
    steps.append(_c(K.OFFSET_COMMIT, v, "valid:member", body, primary=True))
    return steps


@api(K.OFFSET_FETCH)
def offset_fetch(v: int) -> list[Case]:
    def body(group: str, topics):
        return lambda c: {
            "group_id": group,
            "topics": None if topics is None else [{"name": t, "partition_indexes": p} for t, p in topics.items()],
            "groups": [{"group_id": group, "member_id": None, "member_epoch": -1,
                        "topics": None if topics is None else [
                            {"name": t, "partition_indexes": p} for t, p in topics.items()]}],
            "require_stable": False}
    steps = [_c(K.OFFSET_FETCH, v, "valid", body(GROUP, {TOPIC_A: [0, 1, 2]}), primary=True)]
    if v >= 2:
        steps.append(_c(K.OFFSET_FETCH, v, "valid:all-partitions", body(GROUP, None)))
    steps.append(_c(K.OFFSET_FETCH, v, "valid:stable-group", body(STABLE_GROUP, {TOPIC_A: [0]})))
    if v >= 7:
        steps.append(_c(K.OFFSET_FETCH, v, "valid:require-stable", lambda c: {
            **body(GROUP, {TOPIC_A: [0]})(c), "require_stable": True}))
    if v >= 8:
        steps.append(_c(K.OFFSET_FETCH, v, "valid:two-groups", lambda c: {
            "groups": [{"group_id": GROUP, "member_id": None, "member_epoch": -1,
                        "topics": [{"name": TOPIC_A, "partition_indexes": [0]}]},
                       {"group_id": STABLE_GROUP, "member_id": None, "member_epoch": -1, "topics": None}],
            "require_stable": False}))
    return steps


@api(K.FIND_COORDINATOR)
def find_coordinator(v: int) -> list[Case]:
    def body(key: str, key_type: int = 0, keys: list[str] | None = None):
        return lambda c: {"key": key, "key_type": key_type, "coordinator_keys": keys or [key]}
    steps = [_c(K.FIND_COORDINATOR, v, "valid:group", body(GROUP), primary=True)]
    if v >= 1:
        steps.append(_c(K.FIND_COORDINATOR, v, "valid:transaction", body(TXN_DONE, 1)))
    if v >= 4:
        steps.append(_c(K.FIND_COORDINATOR, v, "valid:two-groups", body(GROUP, 0, [GROUP, STABLE_GROUP])))
    return steps


@api(K.JOIN_GROUP)
def join_group(v: int) -> list[Case]:
    group = f"pd-join-v{v}"
    steps = [_c(K.JOIN_GROUP, v, "valid:new-member", lambda c: flows.join_body(group), primary=True,
                capture=flows._capture_member(group), isolate="group_id",
                # Kafka 4.4 never answers a v0-3 join (no member id round) that lists a protocol twice.
                hostile_timeouts={"protocols=first-twice": 1.0, "protocols=1000-copies": 1.5} if v < 4 else {})]
    if v >= 4:
        steps.append(_c(K.JOIN_GROUP, v, "valid:with-member-id", lambda c: flows.join_body(group, member(c, group)),
                        capture=flows._capture_member(group)))
    if v >= 5:
        steps.append(_c(K.JOIN_GROUP, v, "valid:static-member", lambda c: flows.join_body(
            f"pd-join-static-v{v}", instance_id="pd-instance-1")))
    return steps


@api(K.HEARTBEAT)
def heartbeat(v: int) -> list[Case]:
    group = f"pd-hb-v{v}"
    steps = flows.classic_member(group)
    steps.append(_c(K.HEARTBEAT, v, "valid", lambda c: {
        "group_id": group, "generation_id": generation(c, group), "member_id": member(c, group),
        "group_instance_id": None}, primary=True))
    return steps


@api(K.LEAVE_GROUP)
def leave_group(v: int) -> list[Case]:
    group = f"pd-leave-v{v}"
    steps = flows.classic_member(group)
    steps.append(_c(K.LEAVE_GROUP, v, "valid", lambda c: {
        "group_id": group, "member_id": member(c, group),
        "members": [{"member_id": member(c, group), "group_instance_id": None, "reason": "pd-leaving"}]},
        primary=True, hostile_first=True))
    return steps


@api(K.SYNC_GROUP)
def sync_group(v: int) -> list[Case]:
    group = f"pd-sync-v{v}"
    steps = flows.classic_member(group, sync=False)
    steps.append(_c(K.SYNC_GROUP, v, "valid:leader", lambda c: flows.sync_body(c, group), primary=True))
    steps.append(_c(K.SYNC_GROUP, v, "valid:again-when-stable", lambda c: flows.sync_body(c, group)))
    return steps


@api(K.DESCRIBE_GROUPS)
def describe_groups(v: int) -> list[Case]:
    return [_c(K.DESCRIBE_GROUPS, v, "valid", lambda c: {
        "groups": [GROUP, STABLE_GROUP], "include_authorized_operations": False}, primary=True),
        _c(K.DESCRIBE_GROUPS, v, "valid:authorized-operations", lambda c: {
            "groups": [STABLE_GROUP], "include_authorized_operations": True})]


@api(K.LIST_GROUPS)
def list_groups(v: int) -> list[Case]:
    steps = [_c(K.LIST_GROUPS, v, "valid", lambda c: {"states_filter": [], "types_filter": []}, primary=True)]
    if v >= 4:
        steps.append(_c(K.LIST_GROUPS, v, "valid:stable", lambda c: {"states_filter": ["Stable"],
                                                                      "types_filter": []}))
    if v >= 5:
        steps.append(_c(K.LIST_GROUPS, v, "valid:classic", lambda c: {"states_filter": [],
                                                                       "types_filter": ["classic"]}))
    return steps


@api(K.SASL_HANDSHAKE)
def sasl_handshake(v: int) -> list[Case]:
    return [_c(K.SASL_HANDSHAKE, v, "valid:PLAIN", lambda c: {"mechanism": "PLAIN"}, primary=True)]


@api(K.API_VERSIONS)
def api_versions(v: int) -> list[Case]:
    return [_c(K.API_VERSIONS, v, "valid", lambda c: {"client_software_name": "pd-client",
                                                       "client_software_version": "1.0.0"}, primary=True)]


# --------------------------------------------------------------------------- admin: topics


@api(K.CREATE_TOPICS)
def create_topics(v: int) -> list[Case]:
    name = f"pd-ct-v{v}"
    steps = [
        _c(K.CREATE_TOPICS, v, "valid", lambda c: flows.create_topic_body(name, 2, {"retention.ms": "3600000"}),
           primary=True, settle=True),
        _c(K.CREATE_TOPICS, v, "valid:existing", lambda c: flows.create_topic_body(TOPIC_A, 1)),
        _c(K.CREATE_TOPICS, v, "valid:assignments", lambda c: {
            "topics": [{"name": f"pd-ct-assign-v{v}", "num_partitions": -1, "replication_factor": -1,
                        "assignments": [{"partition_index": 0, "broker_ids": [1]},
                                        {"partition_index": 1, "broker_ids": [1]}], "configs": []}],
            "timeout_ms": 30_000, "validate_only": False}, settle=True),
        _c(K.CREATE_TOPICS, v, "valid:validate-only",
           lambda c: flows.create_topic_body(f"pd-ct-validate-v{v}", 1, validate_only=True)),
        _c(K.CREATE_TOPICS, v, "valid:bad-config",
           lambda c: flows.create_topic_body(f"pd-ct-badcfg-v{v}", 1, {"retention.ms": "soon"})),
    ]
    if v >= 4:
        steps.append(_c(K.CREATE_TOPICS, v, "valid:defaults", lambda c: {
            "topics": [{"name": f"pd-ct-default-v{v}", "num_partitions": -1, "replication_factor": -1,
                        "assignments": [], "configs": []}], "timeout_ms": 30_000, "validate_only": False},
            settle=True))
    return steps


@api(K.DELETE_TOPICS)
def delete_topics(v: int) -> list[Case]:
    name = f"pd-del-v{v}"
    steps = [flows.create_topic(name, 1)]
    steps.append(_c(K.DELETE_TOPICS, v, "valid", lambda c: {
        "topic_names": [name], "topics": [{"name": name, "topic_id": uuid.UUID(int=0)}], "timeout_ms": 30_000},
        primary=True, hostile_first=True, settle=True))
    if v >= 6:
        steps.append(flows.create_topic(f"pd-del-id-v{v}", 1))
        steps.append(_c(K.DELETE_TOPICS, v, "valid:by-id", lambda c: {
            "topics": [{"name": None, "topic_id": c.topic_id(f"pd-del-id-v{v}")}], "timeout_ms": 30_000},
            settle=True))
    return steps


@api(K.DELETE_RECORDS)
def delete_records(v: int) -> list[Case]:
    name = f"pd-dr-v{v}"
    steps = flows.topic_with_records(name, 1, (5,))
    steps.append(_c(K.DELETE_RECORDS, v, "valid", lambda c: {
        "topics": [{"name": name, "partitions": [{"partition_index": 0, "offset": 2}]}], "timeout_ms": 10_000},
        primary=True))
    steps.append(_c(K.DELETE_RECORDS, v, "valid:to-high-watermark", lambda c: {
        "topics": [{"name": name, "partitions": [{"partition_index": 0, "offset": -1}]}], "timeout_ms": 10_000}))
    return steps


@api(K.CREATE_PARTITIONS)
def create_partitions(v: int) -> list[Case]:
    name = f"pd-cp-v{v}"
    return [flows.create_topic(name, 1),
            _c(K.CREATE_PARTITIONS, v, "valid", lambda c: {
                "topics": [{"name": name, "count": 3, "assignments": None}], "timeout_ms": 30_000,
                "validate_only": False}, primary=True, settle=True),
            _c(K.CREATE_PARTITIONS, v, "valid:validate-only", lambda c: {
                "topics": [{"name": TOPIC_A, "count": 4, "assignments": None}], "timeout_ms": 30_000,
                "validate_only": True}),
            _c(K.CREATE_PARTITIONS, v, "valid:fewer", lambda c: {
                "topics": [{"name": name, "count": 2, "assignments": None}], "timeout_ms": 30_000,
                "validate_only": False})]


# --------------------------------------------------------------------------- producers and transactions


@api(K.INIT_PRODUCER_ID)
def init_producer_id(v: int) -> list[Case]:
    txn = f"pd-ipid-v{v}"
    steps = [
        _c(K.INIT_PRODUCER_ID, v, "valid:transactional", lambda c: flows.init_producer_body(txn), primary=True,
           capture=flows._capture_producer(txn), txn_settle=txn),
        _c(K.INIT_PRODUCER_ID, v, "valid:idempotent", lambda c: flows.init_producer_body(None)),
        _c(K.INIT_PRODUCER_ID, v, "valid:again", lambda c: flows.init_producer_body(txn), txn_settle=txn),
    ]
    if v >= 3:
        steps.append(_c(K.INIT_PRODUCER_ID, v, "valid:bump-epoch", lambda c: flows.init_producer_body(
            txn, producer_id=pid(c, txn), producer_epoch=epoch(c, txn)), txn_settle=txn))
    return steps


@api(K.OFFSET_FOR_LEADER_EPOCH)
def offset_for_leader_epoch(v: int) -> list[Case]:
    return [_c(K.OFFSET_FOR_LEADER_EPOCH, v, "valid", lambda c: {
        "replica_id": -1, "topics": [{"topic": TOPIC_A, "partitions": [
            {"partition": 0, "current_leader_epoch": -1, "leader_epoch": 0},
            {"partition": 2, "current_leader_epoch": 0, "leader_epoch": 0}]}]}, primary=True)]


@api(K.ADD_PARTITIONS_TO_TXN)
def add_partitions_to_txn(v: int) -> list[Case]:
    txn = f"pd-apt-v{v}"
    return [flows.init_producer(txn, txn),
            _c(K.ADD_PARTITIONS_TO_TXN, v, "valid", lambda c: flows.add_partitions_v3_body(
                c, txn, {TOPIC_TXN: [0], TOPIC_A: [1]}), primary=True),
            _c(K.ADD_PARTITIONS_TO_TXN, v, "valid:again", lambda c: flows.add_partitions_v3_body(
                c, txn, {TOPIC_TXN: [0]})),
            flows.end_txn(txn, commit=False)]


@api(K.ADD_OFFSETS_TO_TXN)
def add_offsets_to_txn(v: int) -> list[Case]:
    txn = f"pd-aot-v{v}"
    return [flows.init_producer(txn, txn),
            _c(K.ADD_OFFSETS_TO_TXN, v, "valid", lambda c: {
                "transactional_id": txn, "producer_id": pid(c, txn), "producer_epoch": epoch(c, txn),
                "group_id": f"pd-aot-group-v{v}"}, primary=True),
            flows.end_txn(txn, commit=False)]


@api(K.END_TXN)
def end_txn(v: int) -> list[Case]:
    txn = f"pd-end-v{v}"
    return [flows.init_producer(txn, txn),
            flows.add_partitions(txn, {TOPIC_TXN: [0]}),
            _c(K.END_TXN, v, "valid:commit", lambda c: flows.end_txn_body(c, txn), primary=True, txn_settle=txn),
            _c(K.END_TXN, v, "valid:commit-again", lambda c: flows.end_txn_body(c, txn), txn_settle=txn),
            _c(K.END_TXN, v, "valid:abort-nothing", lambda c: flows.end_txn_body(c, txn, commit=False),
               txn_settle=txn)]


@api(K.WRITE_TXN_MARKERS)
def write_txn_markers(v: int) -> list[Case]:
    return [_c(K.WRITE_TXN_MARKERS, v, "valid:unknown-producer", lambda c: {
        "markers": [{"producer_id": 424242, "producer_epoch": 0, "transaction_result": False,
                     "topics": [{"name": TOPIC_TXN, "partition_indexes": [0]}], "coordinator_epoch": 0}]},
        primary=True)]


@api(K.TXN_OFFSET_COMMIT)
def txn_offset_commit(v: int) -> list[Case]:
    txn = f"pd-toc-v{v}"
    group = f"pd-toc-group-v{v}"
    return [flows.init_producer(txn, txn),
            _c(K.ADD_OFFSETS_TO_TXN, 3, "prep:add offsets", lambda c: {
                "transactional_id": txn, "producer_id": pid(c, txn), "producer_epoch": epoch(c, txn),
                "group_id": group}, prep=True),
            _c(K.TXN_OFFSET_COMMIT, v, "valid", lambda c: {
                "transactional_id": txn, "group_id": group, "producer_id": pid(c, txn),
                "producer_epoch": epoch(c, txn), "generation_id": -1, "member_id": "", "group_instance_id": None,
                "topics": [{"name": TOPIC_A, "partitions": [
                    {"partition_index": 0, "committed_offset": 1, "committed_leader_epoch": -1,
                     "committed_metadata": "pd-txn-meta"}]}]}, primary=True),
            flows.end_txn(txn, commit=True)]


@api(K.DESCRIBE_TRANSACTIONS)
def describe_transactions(v: int) -> list[Case]:
    return [_c(K.DESCRIBE_TRANSACTIONS, v, "valid", lambda c: {
        "transactional_ids": [TXN_DONE, TXN_OPEN]}, primary=True)]


@api(K.LIST_TRANSACTIONS)
def list_transactions(v: int) -> list[Case]:
    steps = [_c(K.LIST_TRANSACTIONS, v, "valid", lambda c: {
        "state_filters": [], "producer_id_filters": [], "duration_filter": -1}, primary=True),
        _c(K.LIST_TRANSACTIONS, v, "valid:ongoing", lambda c: {
            "state_filters": ["Ongoing"], "producer_id_filters": [], "duration_filter": -1}),
        _c(K.LIST_TRANSACTIONS, v, "valid:by-producer", lambda c: {
            "state_filters": [], "producer_id_filters": [pid(c, TXN_DONE)], "duration_filter": -1})]
    if v >= 1:
        steps.append(_c(K.LIST_TRANSACTIONS, v, "valid:older-than-1h", lambda c: {
            "state_filters": [], "producer_id_filters": [], "duration_filter": 3_600_000}))
    return steps


# --------------------------------------------------------------------------- ACLs, configs, quotas, SCRAM


def _acl_filter() -> dict:
    return {"resource_type_filter": 1, "resource_name_filter": None, "pattern_type_filter": 1,
            "principal_filter": None, "host_filter": None, "operation": 1, "permission_type": 1}


@api(K.DESCRIBE_ACLS)
def describe_acls(v: int) -> list[Case]:
    return [_c(K.DESCRIBE_ACLS, v, "valid:any", lambda c: _acl_filter(), primary=True)]


@api(K.CREATE_ACLS)
def create_acls(v: int) -> list[Case]:
    return [_c(K.CREATE_ACLS, v, "valid", lambda c: {"creations": [{
        "resource_type": 2, "resource_name": TOPIC_A, "resource_pattern_type": 3, "principal": "User:pd-alice",
        "host": "*", "operation": 3, "permission_type": 3}]}, primary=True)]


@api(K.DELETE_ACLS)
def delete_acls(v: int) -> list[Case]:
    return [_c(K.DELETE_ACLS, v, "valid:any", lambda c: {"filters": [_acl_filter()]}, primary=True)]


@api(K.DESCRIBE_CONFIGS)
def describe_configs(v: int) -> list[Case]:
    def body(resources, synonyms=False, docs=False):
        return lambda c: {"resources": [{"resource_type": t, "resource_name": n, "configuration_keys": k}
                                        for t, n, k in resources],
                          "include_synonyms": synonyms, "include_documentation": docs}
    broker_keys = ["num.partitions", "auto.create.topics.enable", "message.max.bytes", "log.retention.hours",
                   "default.replication.factor", "offsets.retention.minutes", "log.segment.bytes"]
    steps = [_c(K.DESCRIBE_CONFIGS, v, "valid:topic", body([(2, TOPIC_B, None)]), primary=True),
             _c(K.DESCRIBE_CONFIGS, v, "valid:topic-keys", body([(2, TOPIC_B, ["retention.ms", "cleanup.policy",
                                                                                 "max.message.bytes"])])),
             _c(K.DESCRIBE_CONFIGS, v, "valid:broker-keys", body([(4, "1", broker_keys)])),
             _c(K.DESCRIBE_CONFIGS, v, "valid:synonyms", body([(2, TOPIC_B, ["retention.ms", "segment.bytes"]),
                                                               (4, "1", ["log.retention.hours"])], synonyms=True))]
    if v >= 3:
        steps.append(_c(K.DESCRIBE_CONFIGS, v, "valid:documentation",
                        body([(2, TOPIC_B, ["retention.ms"])], docs=True)))
    return steps


@api(K.ALTER_CONFIGS)
def alter_configs(v: int) -> list[Case]:
    def body(configs: dict[str, str | None], validate_only=False):
        return lambda c: {"resources": [{"resource_type": 2, "resource_name": "pd-ac", "configs": [
            {"name": k, "value": val} for k, val in configs.items()]}], "validate_only": validate_only}
    return [_c(K.ALTER_CONFIGS, v, "valid", body({"retention.ms": str(3_600_000 + v)}), primary=True),
            _c(K.ALTER_CONFIGS, v, "valid:validate-only", body({"retention.ms": "1"}, validate_only=True)),
            _c(K.ALTER_CONFIGS, v, "valid:bad-value", body({"retention.ms": "soon"})),
            _c(K.ALTER_CONFIGS, v, "valid:unknown-key", body({"pd.no.such.config": "1"}))]


@api(K.INCREMENTAL_ALTER_CONFIGS)
def incremental_alter_configs(v: int) -> list[Case]:
    def body(ops: list[tuple[str, int, str | None]], validate_only=False, name="pd-ac", rtype=2):
        return lambda c: {"resources": [{"resource_type": rtype, "resource_name": name, "configs": [
            {"name": k, "config_operation": op, "value": val} for k, op, val in ops]}],
            "validate_only": validate_only}
    return [_c(K.INCREMENTAL_ALTER_CONFIGS, v, "valid:set", body([("segment.ms", 0, str(86_400_000 + v))]),
               primary=True),
            _c(K.INCREMENTAL_ALTER_CONFIGS, v, "valid:delete", body([("segment.ms", 1, None)])),
            _c(K.INCREMENTAL_ALTER_CONFIGS, v, "valid:append", body([("cleanup.policy", 2, "compact")])),
            _c(K.INCREMENTAL_ALTER_CONFIGS, v, "valid:subtract", body([("cleanup.policy", 3, "compact")])),
            _c(K.INCREMENTAL_ALTER_CONFIGS, v, "valid:validate-only",
               body([("retention.ms", 0, "1000")], validate_only=True)),
            _c(K.INCREMENTAL_ALTER_CONFIGS, v, "valid:broker-dynamic-validate",
               body([("log.cleaner.threads", 0, "2")], validate_only=True, name="1", rtype=4))]


@api(K.DESCRIBE_LOG_DIRS)
def describe_log_dirs(v: int) -> list[Case]:
    return [_c(K.DESCRIBE_LOG_DIRS, v, "valid", lambda c: {"topics": [
        {"topic": TOPIC_A, "partitions": [0, 1, 2]}, {"topic": TOPIC_B, "partitions": [0]}]}, primary=True)]


@api(K.SASL_AUTHENTICATE)
def sasl_authenticate(v: int) -> list[Case]:
    return [_c(K.SASL_AUTHENTICATE, v, "valid:PLAIN-token", lambda c: {"auth_bytes": b"\x00pd-user\x00pd-pass"},
               primary=True)]


@api(K.DELETE_GROUPS)
def delete_groups(v: int) -> list[Case]:
    group = f"pd-dg-v{v}"
    return [flows.simple_commit(group, {(TOPIC_A, 0): 1}),
            _c(K.DELETE_GROUPS, v, "valid", lambda c: {"groups_names": [group]}, primary=True, hostile_first=True),
            _c(K.DELETE_GROUPS, v, "valid:non-empty", lambda c: {"groups_names": [STABLE_GROUP]})]


@api(K.ELECT_LEADERS)
def elect_leaders(v: int) -> list[Case]:
    return [_c(K.ELECT_LEADERS, v, "valid:preferred", lambda c: {
        "election_type": 0, "topic_partitions": [{"topic": TOPIC_A, "partitions": [0, 1]}], "timeout_ms": 10_000},
        primary=True),
        _c(K.ELECT_LEADERS, v, "valid:all-partitions", lambda c: {
            "election_type": 0, "topic_partitions": None, "timeout_ms": 10_000})]


@api(K.ALTER_PARTITION_REASSIGNMENTS)
def alter_partition_reassignments(v: int) -> list[Case]:
    return [_c(K.ALTER_PARTITION_REASSIGNMENTS, v, "valid:same-replicas", lambda c: {
        "timeout_ms": 10_000, "topics": [{"name": TOPIC_A, "partitions": [{"partition_index": 0, "replicas": [1]}]}]},
        primary=True),
        _c(K.ALTER_PARTITION_REASSIGNMENTS, v, "valid:cancel-none", lambda c: {
            "timeout_ms": 10_000, "topics": [{"name": TOPIC_A, "partitions": [
                {"partition_index": 1, "replicas": None}]}]})]


@api(K.LIST_PARTITION_REASSIGNMENTS)
def list_partition_reassignments(v: int) -> list[Case]:
    return [_c(K.LIST_PARTITION_REASSIGNMENTS, v, "valid", lambda c: {
        "timeout_ms": 10_000, "topics": [{"name": TOPIC_A, "partition_indexes": [0, 1]}]}, primary=True),
        _c(K.LIST_PARTITION_REASSIGNMENTS, v, "valid:all", lambda c: {"timeout_ms": 10_000, "topics": None})]


@api(K.OFFSET_DELETE)
def offset_delete(v: int) -> list[Case]:
    group = f"pd-od-v{v}"
    return [flows.simple_commit(group, {(TOPIC_A, 0): 1, (TOPIC_A, 1): 1}),
            _c(K.OFFSET_DELETE, v, "valid", lambda c: {"group_id": group, "topics": [
                {"name": TOPIC_A, "partitions": [{"partition_index": 0}]}]}, primary=True),
            _c(K.OFFSET_DELETE, v, "valid:subscribed", lambda c: {"group_id": STABLE_GROUP, "topics": [
                {"name": TOPIC_A, "partitions": [{"partition_index": 0}]}]})]


@api(K.DESCRIBE_CLIENT_QUOTAS)
def describe_client_quotas(v: int) -> list[Case]:
    return [_c(K.DESCRIBE_CLIENT_QUOTAS, v, "valid:user", lambda c: {
        "components": [{"entity_type": "user", "match_type": 0, "match": "pd-user"}], "strict": False},
        primary=True),
        _c(K.DESCRIBE_CLIENT_QUOTAS, v, "valid:any-user", lambda c: {
            "components": [{"entity_type": "user", "match_type": 2, "match": None}], "strict": True})]


@api(K.ALTER_CLIENT_QUOTAS)
def alter_client_quotas(v: int) -> list[Case]:
    # Quotas far above anything the run sends: a hostile variant that lands on the default
    # user (entity_name null) must not throttle the cases after it.
    return [_c(K.ALTER_CLIENT_QUOTAS, v, "valid", lambda c: {"entries": [{
        "entity": [{"entity_type": "user", "entity_name": "pd-user"}],
        "ops": [{"key": "producer_byte_rate", "value": 1e9 + v, "remove": False}]}], "validate_only": False},
        primary=True),
        _c(K.ALTER_CLIENT_QUOTAS, v, "valid:validate-only", lambda c: {"entries": [{
            "entity": [{"entity_type": "client-id", "entity_name": "pd-client"}],
            "ops": [{"key": "consumer_byte_rate", "value": 2e9, "remove": False}]}], "validate_only": True}),
        _c(K.ALTER_CLIENT_QUOTAS, v, "valid:remove", lambda c: {"entries": [{
            "entity": [{"entity_type": "user", "entity_name": "pd-user"}],
            "ops": [{"key": "producer_byte_rate", "value": 0.0, "remove": True}]}], "validate_only": False})]


@api(K.DESCRIBE_USER_SCRAM_CREDENTIALS)
def describe_user_scram_credentials(v: int) -> list[Case]:
    return [_c(K.DESCRIBE_USER_SCRAM_CREDENTIALS, v, "valid", lambda c: {"users": [{"name": "pd-user"}]},
               primary=True),
            _c(K.DESCRIBE_USER_SCRAM_CREDENTIALS, v, "valid:all", lambda c: {"users": None})]


@api(K.ALTER_USER_SCRAM_CREDENTIALS)
def alter_user_scram_credentials(v: int) -> list[Case]:
    return [_c(K.ALTER_USER_SCRAM_CREDENTIALS, v, "valid", lambda c: {
        "deletions": [], "upsertions": [{"name": "pd-user", "mechanism": 1, "iterations": 4096,
                                         "salt": b"pd-salt-0123456789", "salted_password": b"\x01" * 32}]},
        primary=True),
        _c(K.ALTER_USER_SCRAM_CREDENTIALS, v, "valid:delete-missing", lambda c: {
            "deletions": [{"name": "pd-nobody", "mechanism": 2}], "upsertions": []})]


@api(K.DESCRIBE_CLUSTER)
def describe_cluster(v: int) -> list[Case]:
    steps = [_c(K.DESCRIBE_CLUSTER, v, "valid", lambda c: {"include_cluster_authorized_operations": False,
                                                           "endpoint_type": 1}, primary=True),
             _c(K.DESCRIBE_CLUSTER, v, "valid:authorized-operations", lambda c: {
                 "include_cluster_authorized_operations": True, "endpoint_type": 1})]
    if v >= 1:
        steps.append(_c(K.DESCRIBE_CLUSTER, v, "valid:controllers", lambda c: {
            "include_cluster_authorized_operations": False, "endpoint_type": 2}))
    return steps


@api(K.DESCRIBE_TOPIC_PARTITIONS)
def describe_topic_partitions(v: int) -> list[Case]:
    return [_c(K.DESCRIBE_TOPIC_PARTITIONS, v, "valid", lambda c: {
        "topics": [{"name": TOPIC_A}, {"name": TOPIC_B}], "response_partition_limit": 2000, "cursor": None},
        primary=True),
        _c(K.DESCRIBE_TOPIC_PARTITIONS, v, "valid:cursor", lambda c: {
            "topics": [{"name": TOPIC_A}, {"name": TOPIC_B}], "response_partition_limit": 1,
            "cursor": {"topic_name": TOPIC_A, "partition_index": 1}})]


# --------------------------------------------------------------------------- KIP-848 and share groups


@api(K.CONSUMER_GROUP_HEARTBEAT)
def consumer_group_heartbeat(v: int) -> list[Case]:
    group = f"pd-cgh-v{v}"
    # v1 (KIP-1082): the client makes the member id; v0: the broker does.
    own_id = "pd-member-cgh-0000000001" if v >= 1 else ""

    def capture(ctx: Ctx, body: dict) -> None:
        if body.get("error_code") == 0:
            ctx.values[f"member:{group}"] = body.get("member_id") or own_id
            ctx.values[f"epoch:{group}"] = body.get("member_epoch", 0)

    def beat(epoch_of=lambda c: c.get(f"epoch:{group}", 0), join=False):
        def body(c: Ctx) -> dict:
            return {"group_id": group, "member_id": own_id if join else c.get(f"member:{group}", own_id),
                    "member_epoch": 0 if join else epoch_of(c), "instance_id": None, "rack_id": None,
                    "rebalance_timeout_ms": 30_000, "subscribed_topic_names": [TOPIC_A],
                    "subscribed_topic_regex": None, "server_assignor": None, "topic_partitions": []}
        return body
    return [_c(K.CONSUMER_GROUP_HEARTBEAT, v, "valid:join", beat(join=True), primary=True, capture=capture,
               isolate="group_id"),
            _c(K.CONSUMER_GROUP_HEARTBEAT, v, "valid:heartbeat", beat(), capture=capture),
            _c(K.CONSUMER_GROUP_HEARTBEAT, v, "valid:leave", beat(lambda c: -1))]


@api(K.CONSUMER_GROUP_DESCRIBE)
def consumer_group_describe(v: int) -> list[Case]:
    group = f"pd-cgd-v{v}"

    def join(c: Ctx) -> dict:
        return {"group_id": group, "member_id": "pd-member-cgd-0000000001", "member_epoch": 0,
                "instance_id": None, "rack_id": None, "rebalance_timeout_ms": 30_000,
                "subscribed_topic_names": [TOPIC_A], "subscribed_topic_regex": None, "server_assignor": None,
                "topic_partitions": []}
    return [_c(K.CONSUMER_GROUP_HEARTBEAT, 1, f"prep:join {group}", join, prep=True),
            _c(K.CONSUMER_GROUP_DESCRIBE, v, "valid", lambda c: {
                "group_ids": [group, STABLE_GROUP], "include_authorized_operations": False}, primary=True)]


SHARE_GROUP = "pd-share"
SHARE_MEMBER = "pd-member-share-000000001"


@api(K.SHARE_GROUP_HEARTBEAT)
def share_group_heartbeat(v: int) -> list[Case]:
    def capture(ctx: Ctx, body: dict) -> None:
        if body.get("error_code") == 0:
            ctx.values["share-epoch"] = body.get("member_epoch", 0)

    def body(epoch_of):
        return lambda c: {"group_id": SHARE_GROUP, "member_id": SHARE_MEMBER, "member_epoch": epoch_of(c),
                          "rack_id": None, "subscribed_topic_names": [TOPIC_A]}
    return [_c(K.SHARE_GROUP_HEARTBEAT, v, "valid:join", body(lambda c: 0), primary=True, capture=capture,
               isolate="group_id"),
            _c(K.SHARE_GROUP_HEARTBEAT, v, "valid:heartbeat", body(lambda c: c.get("share-epoch", 0)),
               capture=capture)]


@api(K.SHARE_GROUP_DESCRIBE)
def share_group_describe(v: int) -> list[Case]:
    return [_c(K.SHARE_GROUP_DESCRIBE, v, "valid", lambda c: {
        "group_ids": [SHARE_GROUP, GROUP], "include_authorized_operations": False}, primary=True)]


@api(K.SHARE_FETCH)
def share_fetch(v: int) -> list[Case]:
    return [_c(K.SHARE_FETCH, v, "valid:open-session", lambda c: {
        "group_id": SHARE_GROUP, "member_id": SHARE_MEMBER, "share_session_epoch": 0, "max_wait_ms": 0,
        "min_bytes": 1, "max_bytes": 1 << 20, "max_records": 100, "batch_size": 100,
        "topics": [{"topic_id": c.topic_id(TOPIC_A), "partitions": [
            {"partition_index": 0, "partition_max_bytes": 1 << 20, "acknowledgement_batches": []}]}],
        "forgotten_topics_data": []}, primary=True)]


@api(K.SHARE_ACKNOWLEDGE)
def share_acknowledge(v: int) -> list[Case]:
    return [_c(K.SHARE_ACKNOWLEDGE, v, "valid:nothing-acquired", lambda c: {
        "group_id": SHARE_GROUP, "member_id": SHARE_MEMBER, "share_session_epoch": 1,
        "topics": [{"topic_id": c.topic_id(TOPIC_A), "partitions": [
            {"partition_index": 0, "acknowledgement_batches": [
                {"first_offset": 0, "last_offset": 0, "acknowledge_types": [1]}]}]}]}, primary=True)]


def _share_state_topics(c: Ctx, extra: dict) -> list[dict]:
    return [{"topic_id": c.topic_id(TOPIC_A), "partitions": [{"partition": 0, **extra}]}]


@api(K.READ_SHARE_GROUP_STATE)
def read_share_group_state(v: int) -> list[Case]:
    return [_c(K.READ_SHARE_GROUP_STATE, v, "valid", lambda c: {
        "group_id": "pd-share-state", "topics": _share_state_topics(c, {"leader_epoch": 0})}, primary=True)]


@api(K.WRITE_SHARE_GROUP_STATE)
def write_share_group_state(v: int) -> list[Case]:
    return [_c(K.WRITE_SHARE_GROUP_STATE, v, "valid", lambda c: {
        "group_id": "pd-share-state", "topics": _share_state_topics(c, {
            "state_epoch": 0, "leader_epoch": 0, "start_offset": 0, "state_batches": [
                {"first_offset": 0, "last_offset": 1, "delivery_state": 2, "delivery_count": 1}]})}, primary=True)]


@api(K.DELETE_SHARE_GROUP_STATE)
def delete_share_group_state(v: int) -> list[Case]:
    return [_c(K.DELETE_SHARE_GROUP_STATE, v, "valid", lambda c: {
        "group_id": "pd-share-state-none", "topics": _share_state_topics(c, {})}, primary=True)]
