"""An acks=all produce waiting for the ISR does not hold up its connection (server/delayed.py).

Kafka mutes a connection until its acks=all request is answered, so a producer with
several requests in flight gets one replication round trip per request; Trafka goes on
reading and appending the connection's next requests while the first waits, and still
answers in request order. Here the first request's wait is made long on purpose: one
follower of its partition is SIGSTOPped while still in the ISR, so the high watermark
cannot pass the batch until the leader drops it from the ISR (replica.lag.time.max.ms=3000)."""

from __future__ import annotations

import os
import select
import signal
import socket
import struct
import time

import pytest

from tests.brokerproc import recv_exact
from tests.cluster.clusterkit import Cluster
from wire import decode_response, encode_request
from wire.records import Record, build_batch
from wire.registry import ApiKey

pytestmark = pytest.mark.timeout(180)

PRODUCE_VERSION = 9


def produce_frame(correlation: int, topic: str, acks: int, value: bytes) -> bytes:
    batch = build_batch([Record(offset=0, timestamp=int(time.time() * 1000), key=None, value=value)])
    body = {"transactional_id": None, "acks": acks, "timeout_ms": 20000,
            "topic_data": [{"name": topic, "partition_data": [{"index": 0, "records": bytes(batch)}]}]}
    return encode_request(ApiKey.PRODUCE, PRODUCE_VERSION, correlation, body, client_id="pipelining-test")


def read_response(sock: socket.socket) -> tuple[int, dict]:
    size = struct.unpack(">i", recv_exact(sock, 4))[0]
    return decode_response(ApiKey.PRODUCE, PRODUCE_VERSION, recv_exact(sock, size))


def log_size(cluster: Cluster, topic: str, node: int) -> int:
    body = {"topics": [{"topic": topic, "partitions": [0]}]}
    answer = cluster.call(ApiKey.DESCRIBE_LOG_DIRS, 4, body, node)
    return sum(p["partition_size"] for d in answer["results"] for t in d["topics"] for p in t["partitions"])


def test_requests_behind_a_waiting_acks_all_produce_are_served_and_answered_in_order(tmp_path, zk_connect):
    with Cluster(tmp_path, zk_connect) as cluster:
        assert cluster.create_topic("slow", 1, 3, {"min.insync.replicas": "2"})["error_code"] == 0
        state = cluster.wait_for(lambda: (p := cluster.partition("slow", 0)) and p["leader_id"] >= 0
                                 and len(p["isr_nodes"]) == 3 and p, 30, "a full ISR")
        leader = state["leader_id"]
        # An unreplicated topic on the same broker: its acks=1 produce needs no follower.
        body = {"topics": [{"name": "quick", "num_partitions": -1, "replication_factor": -1,
                            "assignments": [{"partition_index": 0, "broker_ids": [leader]}], "configs": []}],
                "timeout_ms": 20000, "validate_only": False}
        assert cluster.call(ApiKey.CREATE_TOPICS, 5, body)["topics"][0]["error_code"] == 0
        cluster.wait_for(lambda: cluster.list_offset("quick", -1, leader) == 0, 30, "quick served by the leader")

        # Not the controller: a stopped controller would hold up the ISR change until its
        # ZooKeeper session expires, longer than this test's timing allows.
        controller = cluster.metadata()["controller_id"]
        follower = next(n for n in state["replica_nodes"] if n not in (leader, controller))
        os.kill(cluster.brokers[follower].proc.pid, signal.SIGSTOP)
        try:
            with socket.create_connection(("127.0.0.1", cluster.brokers[leader].port), timeout=30) as sock:
                # Both requests in one write, as a pipelining producer sends them.
                sock.sendall(produce_frame(1, "slow", -1, b"waits for the ISR")
                             + produce_frame(2, "quick", 1, b"behind it"))
                t_sent = time.monotonic()
                # The second request is appended while the first still waits ...
                cluster.wait_for(lambda: cluster.list_offset("quick", -1, leader) == 1, 2.5,
                                 "the request behind the waiting one appended")
                # ... and nothing is answered yet: the first answer comes first.
                readable, _, _ = select.select([sock], [], [], 0)
                assert not readable and time.monotonic() - t_sent < 3.0, \
                    "answered before the stopped follower left the ISR"
                # The ISR drops the stopped follower (replica.lag.time.max.ms=3000), the high
                # watermark passes the first batch, and both answers arrive in order.
                first = read_response(sock)
                second = read_response(sock)
                waited = time.monotonic() - t_sent
        finally:
            os.kill(cluster.brokers[follower].proc.pid, signal.SIGCONT)
        assert first[0] == 1 and second[0] == 2
        slow = first[1]["responses"][0]["partition_responses"][0]
        quick = second[1]["responses"][0]["partition_responses"][0]
        assert (slow["error_code"], slow["base_offset"]) == (0, 0), slow
        assert (quick["error_code"], quick["base_offset"]) == (0, 0), quick
        assert waited >= 2.0, f"the acks=all answer came after {waited:.1f} s, before the ISR could shrink"
        assert cluster.list_offset("slow", -1, leader) == 1

        # A client that goes away while its answer waits: the broker keeps serving.
        cluster.wait_for(lambda: len(cluster.partition("slow", 0)["isr_nodes"]) == 3, 30, "the follower back")
        os.kill(cluster.brokers[follower].proc.pid, signal.SIGSTOP)
        try:
            with socket.create_connection(("127.0.0.1", cluster.brokers[leader].port), timeout=30) as sock:
                sock.sendall(produce_frame(3, "slow", -1, b"nobody waits for this answer"))
                cluster.wait_for(lambda: cluster.call(ApiKey.METADATA, 9, {"topics": None,
                                                                          "allow_auto_topic_creation": False},
                                                      leader)["brokers"], 5, "metadata while the answer waits")
        finally:
            os.kill(cluster.brokers[follower].proc.pid, signal.SIGCONT)
        cluster.wait_for(lambda: cluster.list_offset("slow", -1, leader) == 2, 30, "the abandoned batch committed")
        with socket.create_connection(("127.0.0.1", cluster.brokers[leader].port), timeout=30) as sock:
            sock.sendall(produce_frame(4, "slow", -1, b"after"))
            correlation, answer = read_response(sock)
        part = answer["responses"][0]["partition_responses"][0]
        assert correlation == 4 and (part["error_code"], part["base_offset"]) == (0, 2), part


def test_a_waiting_acks_all_produce_survives_a_leader_epoch_bump_that_keeps_the_leader(tmp_path, zk_connect):
    """The controller bumps the leader epoch when it takes a follower out of the ISR (a
    broker's controlled shutdown or death); the leader stays, and so does its log. Kafka's
    DelayedProduce only fails when the broker stops leading; an answer that failed here
    would make an idempotent producer retry a batch that is already committed."""
    with Cluster(tmp_path, zk_connect) as cluster:
        assert cluster.create_topic("bump", 1, 3, {"min.insync.replicas": "2"})["error_code"] == 0
        state = cluster.wait_for(lambda: (p := cluster.partition("bump", 0)) and p["leader_id"] >= 0
                                 and len(p["isr_nodes"]) == 3 and p, 30, "a full ISR")
        leader, epoch = state["leader_id"], state["leader_epoch"]
        # The leader's own view: it learns it leads from the controller's LeaderAndIsr, which
        # may reach it after another broker's metadata already names it (a produce sent
        # before then is answered as for an unknown partition).
        cluster.wait_for(lambda: (p := cluster.partition("bump", 0, leader)) and p["leader_id"] == leader
                         and len(p["isr_nodes"]) == 3, 30, "the leader knows it leads a full ISR")
        controller = cluster.metadata()["controller_id"]
        follower = next(n for n in state["replica_nodes"] if n not in (leader, controller))
        os.kill(cluster.brokers[follower].proc.pid, signal.SIGSTOP)
        try:
            with socket.create_connection(("127.0.0.1", cluster.brokers[leader].port), timeout=30) as sock:
                sock.sendall(produce_frame(1, "bump", -1, b"waits for the ISR"))
                # Appended (the high watermark, what ListOffsets shows, stays behind it).
                cluster.wait_for(lambda: log_size(cluster, "bump", leader) > 0, 10, "the batch appended")
                # The stopped follower's controlled shutdown, sent for it: the controller
                # takes it out of the ISR with the leader epoch bumped, the leader unchanged,
                # well before replica.lag.time.max.ms would shrink the ISR by itself.
                answer = cluster.call(ApiKey.CONTROLLED_SHUTDOWN, 3, {"broker_id": follower, "broker_epoch": -1},
                                      controller)
                assert answer["error_code"] == 0, answer
                correlation, response = read_response(sock)
        finally:
            os.kill(cluster.brokers[follower].proc.pid, signal.SIGCONT)
        part = response["responses"][0]["partition_responses"][0]
        assert correlation == 1 and (part["error_code"], part["base_offset"]) == (0, 0), part
        after = cluster.partition("bump", 0, leader)
        assert after["leader_id"] == leader and after["leader_epoch"] > epoch, after
