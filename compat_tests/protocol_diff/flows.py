"""Small request sequences several APIs' cases need before their own request: a topic with
records, a classic group member, a transactional producer. Each step is a `Case` like any
other (marked `prep`, compared too), and records what the broker answered in its context.
"""

from __future__ import annotations

from compat_tests.protocol_diff import payloads
from compat_tests.protocol_diff.model import Case, Ctx
from wire.registry import ApiKey

SESSION_TIMEOUT_MS = 30_000
REBALANCE_TIMEOUT_MS = 10_000
TXN_TIMEOUT_MS = 60_000


# --------------------------------------------------------------------------- topics


def create_topic_body(name: str, partitions: int = 1, configs: dict[str, str] | None = None,
                      validate_only: bool = False) -> dict:
    return {"topics": [{"name": name, "num_partitions": partitions, "replication_factor": 1, "assignments": [],
                        "configs": [{"name": k, "value": v} for k, v in (configs or {}).items()]}],
            "timeout_ms": 30_000, "validate_only": validate_only}


def create_topic(name: str, partitions: int = 1, configs: dict[str, str] | None = None) -> Case:
    return Case(ApiKey.CREATE_TOPICS, 4, f"prep:create {name}",
                lambda c: create_topic_body(name, partitions, configs), prep=True, settle=True)


def produce_body(topic: str, partition: int, data: bytes, acks: int = -1, transactional_id: str | None = None) -> dict:
    return {"transactional_id": transactional_id, "acks": acks, "timeout_ms": 10_000,
            "topic_data": [{"name": topic, "partition_data": [{"index": partition, "records": data}]}]}


def produce(topic: str, partition: int, count: int, first: int = 0, tag: str = "r") -> Case:
    data = payloads.records(count, first=first, tag=tag)
    return Case(ApiKey.PRODUCE, 8, f"prep:produce {count} to {topic}-{partition}",
                lambda c: produce_body(topic, partition, data), prep=True)


def topic_with_records(name: str, partitions: int = 1, counts: tuple[int, ...] = (3,)) -> list[Case]:
    steps = [create_topic(name, partitions)]
    for partition, count in enumerate(counts):
        if count:
            steps.append(produce(name, partition, count))
    return steps


# --------------------------------------------------------------------------- classic groups


def join_body(group: str, member_id: str = "", topics: tuple[str, ...] = ("pd-a",),
              instance_id: str | None = None) -> dict:
    return {"group_id": group, "session_timeout_ms": SESSION_TIMEOUT_MS,
            "rebalance_timeout_ms": REBALANCE_TIMEOUT_MS, "member_id": member_id,
            "group_instance_id": instance_id, "protocol_type": "consumer",
            "protocols": [{"name": "range", "metadata": payloads.subscription(list(topics))}],
            "reason": None}


def _capture_member(group: str):
    def capture(ctx: Ctx, body: dict) -> None:
        if body.get("member_id"):
            ctx.values[f"member:{group}"] = body["member_id"]
        if body.get("error_code") == 0:
            ctx.values[f"generation:{group}"] = body.get("generation_id", -1)
    return capture


def member(ctx: Ctx, group: str) -> str:
    return ctx.get(f"member:{group}", "")


def generation(ctx: Ctx, group: str) -> int:
    return ctx.get(f"generation:{group}", -1)


def sync_body(ctx: Ctx, group: str, assignment: dict[str, list[int]] | None = None) -> dict:
    mid = member(ctx, group)
    return {"group_id": group, "generation_id": generation(ctx, group), "member_id": mid,
            "group_instance_id": None, "protocol_type": "consumer", "protocol_name": "range",
            "assignments": [{"member_id": mid,
                             "assignment": payloads.assignment(assignment or {"pd-a": [0, 1, 2]})}]}


def classic_member(group: str, sync: bool = True) -> list[Case]:
    """JoinGroup v5 twice (the first gets MEMBER_ID_REQUIRED and the member id, KIP-394),
    then, when `sync`, SyncGroup v3 as the leader assigning pd-a to itself: a Stable group."""
    steps = [
        Case(ApiKey.JOIN_GROUP, 5, f"prep:join {group} (member id required)", lambda c: join_body(group),
             prep=True, capture=_capture_member(group)),
        Case(ApiKey.JOIN_GROUP, 5, f"prep:join {group} with member id",
             lambda c: join_body(group, member(c, group)), prep=True, capture=_capture_member(group)),
    ]
    if sync:
        steps.append(Case(ApiKey.SYNC_GROUP, 3, f"prep:sync {group}", lambda c: sync_body(c, group), prep=True))
    return steps


def simple_commit_body(group: str, offsets: dict[tuple[str, int], int], metadata: str = "pd-meta") -> dict:
    topics: dict[str, list[dict]] = {}
    for (topic, partition), offset in offsets.items():
        topics.setdefault(topic, []).append({"partition_index": partition, "committed_offset": offset,
                                             "committed_leader_epoch": -1, "committed_metadata": metadata})
    return {"group_id": group, "generation_id_or_member_epoch": -1, "member_id": "", "group_instance_id": None,
            "retention_time_ms": -1,
            "topics": [{"name": t, "partitions": p} for t, p in topics.items()]}


def simple_commit(group: str, offsets: dict[tuple[str, int], int]) -> Case:
    return Case(ApiKey.OFFSET_COMMIT, 8, f"prep:commit {group}", lambda c: simple_commit_body(group, offsets),
                prep=True)


# --------------------------------------------------------------------------- producers


def _capture_producer(key: str):
    def capture(ctx: Ctx, body: dict) -> None:
        if body.get("error_code") == 0:
            ctx.values[f"pid:{key}"] = body["producer_id"]
            ctx.values[f"epoch:{key}"] = body["producer_epoch"]
    return capture


def pid(ctx: Ctx, key: str) -> int:
    return ctx.get(f"pid:{key}", -1)


def epoch(ctx: Ctx, key: str) -> int:
    return ctx.get(f"epoch:{key}", -1)


def init_producer_body(txn: str | None, timeout_ms: int = TXN_TIMEOUT_MS, producer_id: int = -1,
                       producer_epoch: int = -1) -> dict:
    return {"transactional_id": txn, "transaction_timeout_ms": timeout_ms, "producer_id": producer_id,
            "producer_epoch": producer_epoch}


def init_producer(key: str, txn: str | None, version: int = 4) -> Case:
    """InitProducerId (idempotent when `txn` is None); pid/epoch kept under `key`."""
    return Case(ApiKey.INIT_PRODUCER_ID, version, f"prep:init producer {txn or key}",
                lambda c: init_producer_body(txn), prep=True, capture=_capture_producer(key), txn_settle=txn)


def add_partitions_v3_body(ctx: Ctx, txn: str, topics: dict[str, list[int]]) -> dict:
    return {"v3_and_below_transactional_id": txn, "v3_and_below_producer_id": pid(ctx, txn),
            "v3_and_below_producer_epoch": epoch(ctx, txn),
            "v3_and_below_topics": [{"name": t, "partitions": p} for t, p in topics.items()],
            "transactions": [{"transactional_id": txn, "producer_id": pid(ctx, txn),
                              "producer_epoch": epoch(ctx, txn), "verify_only": False,
                              "topics": [{"name": t, "partitions": p} for t, p in topics.items()]}]}


def add_partitions(txn: str, topics: dict[str, list[int]]) -> Case:
    return Case(ApiKey.ADD_PARTITIONS_TO_TXN, 3, f"prep:add partitions to {txn}",
                lambda c: add_partitions_v3_body(c, txn, topics), prep=True)


def txn_produce(txn: str, topic: str, partition: int, count: int, sequence: int = 0) -> Case:
    def body(c: Ctx) -> dict:
        data = payloads.records(count, tag="t", producer_id=pid(c, txn), producer_epoch=epoch(c, txn),
                                base_sequence=sequence, transactional=True)
        return produce_body(topic, partition, data, transactional_id=txn)
    return Case(ApiKey.PRODUCE, 8, f"prep:transactional produce {txn}", body, prep=True)


def end_txn_body(ctx: Ctx, txn: str, commit: bool = True) -> dict:
    return {"transactional_id": txn, "producer_id": pid(ctx, txn), "producer_epoch": epoch(ctx, txn),
            "committed": commit}


def end_txn(txn: str, commit: bool = True) -> Case:
    return Case(ApiKey.END_TXN, 3, f"prep:end {txn}", lambda c: end_txn_body(c, txn, commit), prep=True,
                txn_settle=txn)
