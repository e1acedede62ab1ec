"""Raw share-group requests (KIP-932, v1, or 3.9's early-access v0 with `version=0`) over a real socket, for the share-group tests.

A `ShareClient` keeps one connection, as a consumer does: a share session ends when the
connection that opened it closes (then the member's records are released). After a broker
restart it connects again. The error codes a client library would hide are visible.
"""

from __future__ import annotations

import itertools
import socket
import struct
import time
import uuid

from tests.brokerproc import BrokerProcess, raw_request, recv_exact
from wire.registry import ApiKey as K


class ShareClient:
    def __init__(self, broker: BrokerProcess, group: str, member: str | None = None, *, version: int = 1) -> None:
        self.broker = broker
        self.version = version
        self.group = group
        self.member = uuid.uuid4().hex[:22] if member is None else member
        self.member_epoch = 0
        self.session_epoch = 0
        self.sock: socket.socket | None = None
        self._correlation = itertools.count(1)

    def _call(self, key: int, body: dict) -> dict:
        from wire import decode_response, encode_request

        for attempt in (0, 1):
            if self.sock is None:
                self.sock = socket.create_connection(("127.0.0.1", self.broker.port), timeout=15)
            correlation = next(self._correlation)
            try:
                self.sock.sendall(encode_request(key, self.version, correlation, body, client_id="share-tests"))
                size = struct.unpack(">i", recv_exact(self.sock, 4))[0]
                got, response = decode_response(key, self.version, recv_exact(self.sock, size))
            except (ConnectionError, OSError):
                self.close()
                if attempt:
                    raise
                continue  # the broker restarted: a new connection
            assert got == correlation
            return response
        raise AssertionError("unreachable")

    def close(self) -> None:
        """Close the connection (its share session ends)."""
        if self.sock is not None:
            self.sock.close()
            self.sock = None

    def heartbeat(self, epoch: int | None = None, topics: list[str] | None = None, member: str | None = None) -> dict:
        body = {"group_id": self.group, "member_id": self.member if member is None else member,
                "member_epoch": self.member_epoch if epoch is None else epoch, "rack_id": None,
                "subscribed_topic_names": topics}
        r = self._call(K.SHARE_GROUP_HEARTBEAT, body)
        if r["error_code"] == 0 and member is None:
            self.member_epoch = r["member_epoch"]
        return r

    def join(self, *topics: str) -> dict:
        self.member_epoch = 0
        r = self.heartbeat(0, list(topics))
        assert r["error_code"] == 0, r
        return r

    def fetch(self, topic_id: uuid.UUID, partitions=(0,), *,
              acks: dict[int, list[tuple[int, int, list[int]]]] | None = None,
              epoch: int | None = None, max_wait_ms: int = 0, max_records: int = 500, forget=(),
              partition_max_bytes: int = 1048576) -> dict:
        acks = acks or {}
        parts = sorted(set(partitions) | set(acks))
        body = {"group_id": self.group, "member_id": self.member,
                "share_session_epoch": self.session_epoch if epoch is None else epoch,
                "max_wait_ms": max_wait_ms, "min_bytes": 1, "max_bytes": 52428800, "max_records": max_records,
                "batch_size": max_records,
                "topics": [{"topic_id": topic_id, "partitions": [
                    {"partition_index": p, "partition_max_bytes": partition_max_bytes,  # v0 only
                     "acknowledgement_batches": [
                        {"first_offset": f, "last_offset": last, "acknowledge_types": types}
                        for f, last, types in acks.get(p, [])]} for p in parts]}] if parts else [],
                "forgotten_topics_data": [{"topic_id": topic_id, "partitions": list(forget)}] if forget else []}
        r = self._call(K.SHARE_FETCH, body)
        if r["error_code"] == 0 and epoch is None:
            self.session_epoch = 1 if self.session_epoch in (0, -1) else self.session_epoch + 1
        return r

    def acknowledge(self, topic_id: uuid.UUID, acks: dict[int, list[tuple[int, int, list[int]]]],
                    epoch: int | None = None) -> dict:
        body = {"group_id": self.group, "member_id": self.member,
                "share_session_epoch": self.session_epoch if epoch is None else epoch,
                "topics": [{"topic_id": topic_id, "partitions": [
                    {"partition_index": p, "acknowledgement_batches": [
                        {"first_offset": f, "last_offset": last, "acknowledge_types": types}
                        for f, last, types in batches]} for p, batches in acks.items()]}]}
        r = self._call(K.SHARE_ACKNOWLEDGE, body)
        if r["error_code"] == 0 and epoch is None:
            self.session_epoch += 1
        return r

    def describe(self, *groups: str) -> dict:
        return self._call(K.SHARE_GROUP_DESCRIBE, {"group_ids": list(groups or [self.group]),
                                                   "include_authorized_operations": False})


def acquired(response: dict, partition: int = 0) -> list[tuple[int, int, int]]:
    """(first, last, delivery count) ranges of one partition of a ShareFetch answer."""
    out = []
    for topic in response["responses"]:
        for part in topic["partitions"]:
            if part["partition_index"] == partition:
                out += [(a["first_offset"], a["last_offset"], a["delivery_count"]) for a in part["acquired_records"]]
    return out


def offsets(response: dict, partition: int = 0) -> list[int]:
    return [o for first, last, _count in acquired(response, partition) for o in range(first, last + 1)]


def partition_entry(response: dict, partition: int = 0) -> dict:
    for topic in response["responses"]:
        for part in topic["partitions"]:
            if part["partition_index"] == partition:
                return part
    raise AssertionError(f"partition {partition} not in {response}")


def produce(bootstrap: str, topic: str, count: int, partition: int = 0, prefix: str = "m", *,
            one_per_batch: bool = False) -> None:
    from confluent_kafka import Producer

    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 0})
    for i in range(count):
        producer.produce(topic, f"{prefix}{i}".encode(), partition=partition)
        if one_per_batch:
            assert producer.flush(15) == 0
    assert producer.flush(15) == 0


def create_topic(bootstrap: str, name: str, partitions: int = 1) -> uuid.UUID:
    """Create a topic and return its id (from Metadata v12)."""
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": bootstrap})  # kept alive until the result is in
    admin.create_topics([NewTopic(name, partitions, 1)])[name].result(15)
    host, port = bootstrap.split(":")
    deadline = time.monotonic() + 10
    while True:
        meta = raw_request(host, int(port), K.METADATA, 12, {"topics": [{"topic_id": uuid.UUID(int=0), "name": name}],
                                                             "allow_auto_topic_creation": False,
                                                             "include_topic_authorized_operations": False})
        topic = meta["topics"][0]
        if topic["error_code"] == 0:
            return topic["topic_id"]
        assert time.monotonic() < deadline, meta
        time.sleep(0.05)
