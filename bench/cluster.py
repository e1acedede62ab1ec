"""What a ZooKeeper-mode cluster costs and how fast it heals: three figures in one run.

(a) throughput: a 3-broker cluster (a real ZooKeeper, cli/zookeeper_server.py; a topic
    with replication.factor=3 and min.insync.replicas=2, produced with acks=all) against
    one broker without ZooKeeper produced with acks=1. The producer is produce_consume.py's
    (linger.ms=10, batch.size=1000000, batch.num.messages=10000,
    queue.buffering.max.messages=1e6, idempotence off, error-only delivery reports); only
    `acks` and the bootstrap differ. Each window produces `--messages` as fast as
    librdkafka takes them and is timed from the first produce() to the end of flush(). The
    two targets alternate A,B / B,A over `--repeats`; each window gets a fresh topic (the
    cluster's is deleted after it), each single-broker window a fresh broker. Ratio =
    cluster msg/s / single msg/s (medians); target >= 0.4 on a 2-core machine. Verified: no
    delivery error and the partitions' high watermarks add up to the messages produced.
    The brokers' CPU per message is recorded per broker (leader and followers).
(b) latency: on the cluster (acks=all), produce_consume.py's latency mode: a consumer
    (group, subscribed) tails a fresh RF=3 topic while a producer sends `--rate` msg/s
    (linger.ms=0, a delivery callback per message); e2e = receive time - send time carried
    in the payload (one process, one monotonic clock). p50/p99/max; target p99 <= 10 ms.
    Two producers, one after the other: "idempotent" (enable.idempotence=true, so at most 5
    requests in flight and messages batch while acks=all waits) and "plain"
    (produce_consume.py's as it is: idempotence off, librdkafka's max.in.flight 1000000,
    every message its own Produce request). A broker answers one connection's requests in
    order (Kafka mutes the channel the same way), so the plain producer needs one acks=all
    round trip per message and queues up once that round trip exceeds 1 / rate. For
    reference, the idempotent producer also runs against a fresh single broker
    (`--latency-reference`): on 2 shared cores p99 follows the neighbours, and that row says
    how much of the cluster's tail the host alone would give.
(c) failover: `--kills` times, while a producer (idempotent, acks=all, linger.ms=0,
    `--rate` msg/s) writes to an RF=3 topic, SIGKILL the partition's leader and measure the
    time until the first acknowledgement of a message produced after the kill (the killed
    broker cannot have acknowledged it, so the new leader did). Also recorded: when a
    surviving broker's Metadata first names a new leader (polled every 50 ms), whether the
    killed leader was also the controller, the longest wait of a message caught by the
    kill (sent before it, acknowledged after it: responses the leader wrote just before
    dying arrive after the kill, which is why the headline counts only messages produced
    after it), and how long the restarted broker took to rejoin the ISR. Between kills the
    killed broker is restarted (same data dir and port) and the ISR must be full again.
    At the end every acknowledged message must be in the log exactly once.

How soon the cluster notices a dead broker is bounded by `zookeeper.session.timeout.ms`:
the controller only learns of the death when the broker's ephemeral /brokers/ids/<id>
expires. Kafka's default is 18000 ms; this bench sets `--zk-session-timeout-ms` (default
6000, as tests/cluster/clusterkit.py does) so that ten kills fit in about two minutes, and
prints the value beside the figures. The ZooKeeper itself ticks every 500 ms
(cli/zookeeper_server.py), so expiry lands up to one tick late. Other broker settings
are Kafka's defaults except offsets.topic.num.partitions=3 (the latency consumer's group
would otherwise create 50 partitions x 3 replicas first).

Why one run: both sides of the ratio share the build, the page cache, the machine's
neighbours and the client. The cluster (3 brokers + ZooKeeper) is started once and stays up
(idle, its followers long-polling) while the single broker is measured; its CPU over those
windows is recorded as `background_cpu_s`.

Results: one JSON line per window / kill in `--out` (default
.cache/bench-results/cluster-<time>.jsonl), the first line the setup (settings, machine);
the table is printed at the end (`--summarize FILE...` re-prints it).

    python bench/cluster.py                             # (a) x 2 repeats, (b) 3 x 10 s, (c) 10 kills: ~3-3.5 min
    python bench/cluster.py --only throughput --repeats 4 --size 100 --messages 1000000
    python bench/cluster.py --only failover --kills 5 --zk-session-timeout-ms 18000
    python bench/cluster.py --summarize .cache/bench-results/cluster-*.jsonl
    python bench/cluster.py --broker kafka              # the same phases on Apache Kafka 4.x: three KRaft
                                                        # combined nodes (KafkaCluster) vs one Kafka node

bench/race.py runs (a) and (b) on a Trafka cluster and a Kafka cluster side by side.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import statistics
import struct
import sys
import tempfile
import threading
import time
import uuid
from types import SimpleNamespace

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(1, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from confluent_kafka import Consumer, Producer, TopicPartition  # noqa: E402
from confluent_kafka.admin import AdminClient, NewTopic  # noqa: E402

from brokers import (KAFKA_COMMON, REPO, BrokerProcess, KafkaNode, create_topic, free_port, kafka_cluster_id,  # noqa: E402
                     proc_cpu_s, start_broker, wait_api_versions, wait_registered)
from produce_consume import CpuWindow, Payloads, producer_config, run_latency  # noqa: E402
from rawclient import RawClient  # noqa: E402
from results import csv, load  # noqa: E402
from transactions import machine  # noqa: E402

from cli.zookeeper_server import ZooKeeperServer  # noqa: E402

_SEQ_TS = struct.Struct(">QQ")
NAN = float("nan")


# ---------------------------------------------------------------------------- the cluster

class BenchCluster:
    """`size` Trafka brokers (node.id 1..size) on one ZooKeeper chroot, each with a fixed port
    and data dir so a killed broker restarts as itself. Each start logs to its own file."""

    def __init__(self, zk_connect: str, size: int, settings: dict[str, str], root: str) -> None:
        self.zk_connect = zk_connect
        self.root = root
        self.settings = settings
        self.ports = {node: free_port() for node in range(1, size + 1)}
        self.procs: dict[int, BrokerProcess | None] = {node: None for node in self.ports}
        self.starts = {node: 0 for node in self.ports}

    @property
    def bootstrap(self) -> str:
        return ",".join(f"127.0.0.1:{p}" for p in self.ports.values())

    def pids(self) -> list[int]:
        return [p.pid for p in self.procs.values() if p is not None and p.alive()]

    def live(self) -> list[int]:
        return [n for n, p in self.procs.items() if p is not None and p.alive()]

    def start_node(self, node: int) -> None:
        self.starts[node] += 1
        log_dir = os.path.join(self.root, f"log-{node}-{self.starts[node]}")
        os.makedirs(log_dir, exist_ok=True)
        self.procs[node] = start_broker(
            "trafka", port=self.ports[node], data_dir=os.path.join(self.root, f"data-{node}"), log_dir=log_dir,
            settings={**self.settings, "node.id": str(node), "zookeeper.connect": self.zk_connect})

    def start(self, timeout_s: float = 60.0) -> None:
        for node in self.ports:
            self.start_node(node)
        self.wait_for(lambda: len(self.metadata()["brokers"]) == len(self.ports), timeout_s, "all brokers registered")

    def kill(self, node: int) -> None:
        proc = self.procs[node]
        proc.popen.send_signal(signal.SIGKILL)
        proc.popen.wait(10)

    def stop(self) -> None:
        for proc in self.procs.values():
            if proc is not None:
                proc.stop()

    def metadata(self, topics: list[str] | None = None, node: int | None = None) -> dict:
        """A Metadata response from `node` (default: the first live broker)."""
        node = node if node is not None else self.live()[0]
        client = RawClient(f"127.0.0.1:{self.ports[node]}", timeout_s=5)
        try:
            return client.metadata(topics)
        finally:
            client.close()

    def partition(self, topic: str, index: int = 0, node: int | None = None) -> dict | None:
        for t in self.metadata([topic], node)["topics"]:
            for p in t["partitions"]:
                if p["partition_index"] == index:
                    return p
        return None

    def full_isr(self, topic: str, partitions: int) -> bool:
        md = self.metadata([topic])
        parts = [p for t in md["topics"] if t["name"] == topic for p in t["partitions"]]
        return len(parts) == partitions and all(
            p["leader_id"] >= 0 and len(p["isr_nodes"]) == len(self.ports) for p in parts)

    def log_tails(self, lines: int = 10) -> dict[str, str]:
        return {str(n): p.log_tail(lines) for n, p in self.procs.items() if p is not None}

    @staticmethod
    def wait_for(condition, timeout_s: float, what: str, interval_s: float = 0.1):
        deadline = time.monotonic() + timeout_s
        last = None
        while time.monotonic() < deadline:
            try:
                last = condition()
                if last:
                    return last
            except (OSError, KeyError, IndexError, TypeError):
                pass
            time.sleep(interval_s)
        raise TimeoutError(f"timed out after {timeout_s} s waiting for {what} (last: {last!r})")


class KafkaCluster(BenchCluster):
    """Three (`size`) Apache Kafka 4.x nodes in KRaft combined mode (each a broker and a voter
    of the metadata quorum), with BenchCluster's interface, so every phase of this bench and
    bench/race.py runs on either. Why KRaft 4.x and not Kafka 3.9 on ZooKeeper, the design
    Trafka's cluster shares: it is the same Kafka as the single-node target (so cluster/single
    compares replication alone), it is what Kafka runs today (4.0 removed ZooKeeper mode),
    and what these phases measure — the produce path with acks=all, followers fetching, the
    ISR and the high watermark — is the same replica manager in both modes; only the
    metadata path (and so failover and topic creation) differs. The quorum's work happens
    inside the broker processes, so it is counted in their CPU (Trafka's ZooKeeper runs
    apart, its CPU reported as such).

    Each node runs as kafka-server-start.sh runs it (brokers.KafkaNode); settings are Kafka's
    defaults plus `settings` (bench: offsets.topic.num.partitions=3, as the Trafka cluster)."""

    def __init__(self, size: int, settings: dict[str, str], root: str) -> None:
        super().__init__("", size, settings, root)
        self.controller_ports = {node: free_port() for node in self.ports}
        self.voters = ",".join(f"{n}@127.0.0.1:{p}" for n, p in self.controller_ports.items())
        self.cluster_id = kafka_cluster_id()

    def spawn_node(self, node: int) -> BrokerProcess:
        self.starts[node] += 1
        log_dir = os.path.join(self.root, f"log-{node}-{self.starts[node]}")
        os.makedirs(log_dir, exist_ok=True)
        kafka = KafkaNode(port=self.ports[node], data_dir=os.path.join(self.root, f"data-{node}"), log_dir=log_dir,
                          log_path=os.path.join(log_dir, f"bench-kafka-{self.ports[node]}.log"),
                          settings={**KAFKA_COMMON, **self.settings}, node_id=node,
                          controller_port=self.controller_ports[node], voters=self.voters, cluster_id=self.cluster_id)
        os.makedirs(kafka.data_dir, exist_ok=True)
        self.procs[node] = kafka.start(f"kafka-{node}", wait=False)
        return self.procs[node]

    def start_node(self, node: int, timeout_s: float = 120.0) -> None:
        """A restart of one node (the others are up): spawn, then wait until it answers."""
        proc = self.spawn_node(node)
        wait_api_versions(proc.bootstrap, time.monotonic() + timeout_s, proc.popen)

    def start(self, timeout_s: float = 180.0) -> None:
        """All nodes at once (a KRaft node waits for a quorum majority before it registers),
        then until every node answers and the Metadata names all of them."""
        for node in self.ports:
            self.spawn_node(node)
        deadline = time.monotonic() + timeout_s
        try:
            for proc in self.procs.values():
                wait_api_versions(proc.bootstrap, deadline, proc.popen)
            for proc in self.procs.values():
                wait_registered(proc.bootstrap, len(self.ports), deadline, proc.popen)
        except Exception as exc:
            tails = "\n".join(f"--- node {n} ---\n{t}" for n, t in self.log_tails(30).items())
            self.stop()
            raise RuntimeError(f"the Kafka cluster did not start: {exc}\n{tails}") from exc

    def stop(self) -> None:
        """SIGTERM to every node first, then wait for each: stopped one by one, the last
        nodes would wait for a quorum that is already gone."""
        live = [p for p in self.procs.values() if p is not None and p.alive()]
        for proc in live:
            proc.popen.send_signal(signal.SIGTERM)
        for proc in self.procs.values():
            if proc is not None:
                proc.stop(grace_s=30)


def make_cluster(kind: str, size: int, settings: dict[str, str], root: str, zk_connect: str = "") -> BenchCluster:
    """"trafka" (on the ZooKeeper at `zk_connect`) or "kafka" (KRaft, no ZooKeeper)."""
    if kind == "kafka":
        return KafkaCluster(size, settings, root)
    return BenchCluster(zk_connect, size, settings, root)


def create_replicated_topic(cluster: BenchCluster, topic: str, partitions: int, min_isr: int,
                            timeout_s: float = 30.0) -> None:
    """RF = the cluster's size, then wait until every partition has its full ISR."""
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap})
    futures = admin.create_topics([NewTopic(topic, num_partitions=partitions, replication_factor=len(cluster.ports),
                                            config={"min.insync.replicas": str(min_isr)})],
                                  operation_timeout=timeout_s)
    futures[topic].result(timeout_s)
    cluster.wait_for(lambda: cluster.full_isr(topic, partitions), timeout_s, f"{topic} with a full ISR")


def delete_topic(bootstrap: str, topic: str, timeout_s: float = 30.0) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.delete_topics([topic], operation_timeout=timeout_s)[topic].result(timeout_s)


def high_watermarks(bootstrap: str, topic: str, partitions: int) -> int:
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "bench-hw", "enable.auto.commit": False})
    try:
        return sum(consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=10)[1] for p in range(partitions))
    finally:
        consumer.close()


# ---------------------------------------------------------------------------- (a) throughput

def produce_for(bootstrap: str, topic: str, acks: str, args, pids: list[int], other_pids: list[int]) -> dict:
    """produce_consume.py's producer: `--messages` as fast as librdkafka takes them, then
    flush; verified by the high watermark."""
    errors: list[str] = []

    def on_error(err, msg=None):
        if err is not None:
            errors.append(str(err))

    conf = producer_config(SimpleNamespace(bootstrap=bootstrap, acks=acks, compression=args.compression,
                                           linger_ms=args.linger_ms), latency=False)
    producer = Producer({**conf, "error_cb": on_error})
    payloads = Payloads(args.size)
    pack, body_at = struct.Struct(">Q").pack, payloads.body_at
    produce, poll = producer.produce, producer.poll
    window = CpuWindow(pids)
    other0 = sum(proc_cpu_s(p) for p in other_pids)
    each0 = [proc_cpu_s(p) for p in pids]
    window.start()
    n = args.messages
    for i in range(n):
        value = pack(i) + body_at(i)
        while True:
            try:
                produce(topic, value, on_delivery=on_error)
                break
            except BufferError:
                poll(0.005)
    remaining = producer.flush(args.timeout)
    cpu = window.stop()
    background = sum(proc_cpu_s(p) for p in other_pids) - other0
    each = [proc_cpu_s(p) - c for p, c in zip(pids, each0)]
    if remaining:
        errors.append(f"{remaining} messages not delivered within {args.timeout} s")
    hw = high_watermarks(bootstrap, topic, args.partitions)
    if hw != n:
        errors.append(f"high watermarks add up to {hw}, {n} produced")
    elapsed = cpu["elapsed_s"]
    return {"messages": n, "elapsed_s": elapsed, "msgs": n / elapsed, "mbps": n * args.size / 1e6 / elapsed,
            "broker_cpu_s": cpu["broker_cpu_s"], "broker_us_per_msg": cpu["broker_cpu_s"] / n * 1e6,
            "broker_jit_us_per_msg": cpu["broker_jit_cpu_s"] / n * 1e6, "broker_gc_us_per_msg": cpu["broker_gc_cpu_s"] / n * 1e6,
            "broker_us_per_msg_each": [c / n * 1e6 for c in each],
            "client_us_per_msg": cpu["client_cpu_s"] / n * 1e6, "host_busy_pct": cpu["host_busy_pct"],
            "background_cpu_s": background, "high_watermark": hw, "errors": errors[:5],
            "verified": not errors}


def single_broker(args) -> BrokerProcess:
    """A fresh single broker of the bench's kind (`--broker`), with its settings."""
    kind = getattr(args, "broker", "trafka")
    sets = args.trafka_set if kind == "trafka" else getattr(args, "kafka_set", [])
    return start_broker(kind, settings=dict(s.split("=", 1) for s in sets), log_dir=args.log_dir)


def throughput_window(target: str, cluster: BenchCluster, args, rep: int, zk_pid: int | None,
                      background_pids: list[int] | None = None) -> dict:
    """One window: `target` "single" (a fresh broker, acks=1) or any other name for
    `cluster` (RF = its size, acks=all). `background_pids`: processes idle meanwhile (another
    cluster, bench/race.py) whose CPU is recorded as background_cpu_s."""
    row = {"phase": "throughput", "target": target, "repeat": rep, "size": args.size, "partitions": args.partitions,
           "messages": args.messages, "linger_ms": args.linger_ms, "compression": args.compression}
    topic = f"cluster-bench-{target}-{uuid.uuid4().hex[:6]}"
    t0 = time.monotonic()
    if target != "single":
        row.update(acks="all", replication_factor=len(cluster.ports), min_insync_replicas=args.min_isr)
        try:
            create_replicated_topic(cluster, topic, args.partitions, args.min_isr)
            nodes = cluster.live()
            row.update(produce_for(cluster.bootstrap, topic, "all", args, [cluster.procs[n].pid for n in nodes],
                                   background_pids or []))
            parts = [p for t in cluster.metadata([topic])["topics"] for p in t["partitions"]]
            row["isr_after"] = [len(p["isr_nodes"]) for p in parts]
            if len(parts) == 1 and len(row["broker_us_per_msg_each"]) == len(nodes):
                # One partition: its leader's CPU apart from its followers'.
                each = dict(zip(nodes, row["broker_us_per_msg_each"]))
                leader = parts[0]["leader_id"]
                followers = [v for n, v in each.items() if n != leader]
                row.update(leader=leader, leader_us_per_msg=each.get(leader, NAN),
                           follower_us_per_msg=sum(followers) / len(followers) if followers else NAN)
            delete_topic(cluster.bootstrap, topic)  # RF=3 copies of every window would fill the disk
        except Exception as exc:
            row.update(verified=False, errors=[f"{type(exc).__name__}: {exc}"], broker_log_tails=cluster.log_tails())
    else:
        row.update(acks="1", replication_factor=1)
        broker = None
        try:
            broker = single_broker(args)
            create_topic(broker.bootstrap, topic, args.partitions)
            others = cluster.pids() + ([zk_pid] if zk_pid else []) + (background_pids or [])
            row.update(produce_for(broker.bootstrap, topic, "1", args, [broker.pid], others))
        except Exception as exc:
            row.update(verified=False, errors=[f"{type(exc).__name__}: {exc}"])
        finally:
            if broker is not None:
                row["broker_exit"] = broker.stop()
    row["wall_s"] = time.monotonic() - t0
    return row


# ---------------------------------------------------------------------------- (b) latency

LATENCY_PRODUCERS = {
    # produce_consume.py's latency producer as it is: idempotence off, so librdkafka's
    # max.in.flight (1000000) lets every message go out as its own Produce request.
    "plain": {},
    # enable.idempotence=true caps in-flight requests at 5 per connection: messages that
    # arrive while 5 wait for acks=all ride together in the next request (the Java
    # client's default with acks=all since Kafka 3.0).
    "idempotent": {"enable.idempotence": True},
}


def latency_run(cluster: BenchCluster, args, producer: str, target: str = "cluster") -> dict:
    """One latency run on the cluster, or (`target="single"`) on a fresh single broker with
    the same producer: the host's noise floor at that moment, since p99 on 2 shared cores
    moves with the neighbours more than with the broker."""
    topic = f"cluster-latency-{uuid.uuid4().hex[:6]}"
    row = {"phase": "latency", "target": target, "producer": producer, "acks": "all",
           "replication_factor": len(cluster.ports) if target != "single" else 1,
           "min_insync_replicas": args.min_isr if target != "single" else 1}
    broker = None
    try:
        if target != "single":
            create_replicated_topic(cluster, topic, 1, args.min_isr)
            bootstrap, pids = cluster.bootstrap, cluster.pids()
        else:
            broker = single_broker(args)
            create_topic(broker.bootstrap, topic, 1)
            bootstrap, pids = broker.bootstrap, [broker.pid]
        ns = SimpleNamespace(bootstrap=bootstrap, topic=topic, broker_pid=",".join(map(str, pids)),
                             messages=int(args.rate * args.latency_s), size=args.latency_size, rate=args.rate,
                             partitions=1, acks="all", compression="none", linger_ms=0, fetch_wait_max_ms=500,
                             settle_s=1.0, timeout=args.timeout, idle_timeout=15.0,
                             warmup_s=getattr(args, "latency_warmup_s", 0.0),
                             producer_overrides=LATENCY_PRODUCERS[producer])
        row.update(run_latency(ns))
    except Exception as exc:
        row.update(verified=False, errors=[f"{type(exc).__name__}: {exc}"],
                   broker_log_tails=cluster.log_tails() if broker is None else {"single": broker.log_tail(10)})
    finally:
        if broker is not None:
            row["broker_exit"] = broker.stop()
    return row


# ---------------------------------------------------------------------------- (c) failover

class PacedProducer(threading.Thread):
    """An idempotent acks=all producer sending `rate` msg/s until stopped; every
    acknowledgement is kept as (ack ns, send ns, seq) in order of arrival."""

    def __init__(self, bootstrap: str, topic: str, size: int, rate: int, timeout_s: float) -> None:
        super().__init__(daemon=True)
        self.bootstrap, self.topic, self.rate, self.timeout_s = bootstrap, topic, rate, timeout_s
        self.payloads = Payloads(size, header=16)
        self.acks: list[tuple[int, int, int]] = []
        self.failed: list[str] = []
        self.sent = 0
        self.unflushed = 0
        self.stop_event = threading.Event()

    def run(self) -> None:
        producer = Producer({"bootstrap.servers": self.bootstrap, "acks": "all", "enable.idempotence": True,
                             "linger.ms": 0, "queue.buffering.max.messages": 1000000,
                             "message.timeout.ms": int(self.timeout_s * 1000),
                             "error_cb": lambda err: self.failed.append(f"error_cb: {err}") if err.fatal() else None})

        def delivered(err, msg, t_send: int, seq: int) -> None:
            if err is not None:
                self.failed.append(str(err))
            else:
                self.acks.append((time.monotonic_ns(), t_send, seq))

        interval_ns = int(1e9 / self.rate)
        start = time.monotonic_ns()
        i = 0
        body_at = self.payloads.body_at
        while not self.stop_event.is_set():
            due = start + i * interval_ns
            while (now := time.monotonic_ns()) < due:
                # poll's timeout is whole milliseconds: a shorter one is 0 and the loop would
                # spin a core (which the brokers on this 2-core machine then lack).
                if due - now >= 1_000_000:
                    producer.poll(0.001)
                else:
                    time.sleep((due - now) / 1e9)
            t_send = time.monotonic_ns()
            producer.produce(self.topic, _SEQ_TS.pack(i, t_send) + body_at(i),
                             on_delivery=lambda err, msg, t=t_send, s=i: delivered(err, msg, t, s))
            producer.poll(0)
            i += 1
        self.sent = i
        self.unflushed = producer.flush(self.timeout_s)


def read_back(bootstrap: str, topic: str, timeout_s: float) -> tuple[bytearray, int, int]:
    """Every sequence in partition 0 from offset 0 to the high watermark: (seen counts capped
    at 255, duplicates, records read)."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "bench-readback", "enable.auto.commit": False,
                         "enable.partition.eof": True})
    hw = consumer.get_watermark_offsets(TopicPartition(topic, 0), timeout=10)[1]
    consumer.assign([TopicPartition(topic, 0, 0)])
    seen = bytearray()
    dups = read = 0
    deadline = time.monotonic() + timeout_s
    last = -1
    while last + 1 < hw and time.monotonic() < deadline:
        for m in consumer.consume(10000, 0.5):
            if m.error() is not None:
                continue
            last = m.offset()
            read += 1
            seq = _SEQ_TS.unpack_from(m.value())[0]
            if seq >= len(seen):
                seen.extend(bytes(seq + 1 - len(seen)))
            if seen[seq]:
                dups += 1
            seen[seq] = min(255, seen[seq] + 1)
    consumer.close()
    return seen, dups, read


def one_kill(cluster: BenchCluster, topic: str, producer: PacedProducer, args, k: int) -> dict:
    row: dict = {"phase": "failover", "kill": k + 1,
                 "zookeeper_session_timeout_ms": args.zk_session_timeout_ms
                 if getattr(args, "broker", "trafka") == "trafka" else None}
    cluster.wait_for(lambda: cluster.full_isr(topic, 1), args.kill_timeout, "a full ISR before the kill")
    time.sleep(args.steady_s)
    t_pre = time.monotonic_ns()
    mark = len(producer.acks)
    cluster.wait_for(lambda: len(producer.acks) > mark, 10, "writes acknowledged before the kill", 0.01)
    row["pre_kill_ack_wait_ms"] = (time.monotonic_ns() - t_pre) / 1e6
    md = cluster.metadata([topic])
    leader = md["topics"][0]["partitions"][0]["leader_id"]
    row.update(leader=leader, controller=md["controller_id"], leader_was_controller=leader == md["controller_id"])
    mark = len(producer.acks)
    t_kill = time.monotonic_ns()
    cluster.kill(leader)
    survivors = [n for n in cluster.ports if n != leader]

    def new_leader():
        p = cluster.partition(topic, 0, survivors[0])
        return p["leader_id"] if p and p["leader_id"] not in (-1, leader) else None

    first_ack = elected = None
    new = None
    deadline = time.monotonic() + args.kill_timeout
    next_md = 0.0
    while time.monotonic() < deadline and (first_ack is None or elected is None):
        if first_ack is None:
            for t_ack, t_send, _seq in producer.acks[mark:]:
                if t_send >= t_kill:
                    first_ack = t_ack
                    break
        if elected is None and time.monotonic() >= next_md:
            next_md = time.monotonic() + 0.05
            try:
                new = new_leader()
            except OSError:
                new = None
            if new is not None:
                elected = time.monotonic_ns()
        time.sleep(0.005)
    caught = [(a - s) for a, s, _ in producer.acks[mark:] if s < t_kill]
    row.update(new_leader=new, kill_to_elected_ms=(elected - t_kill) / 1e6 if elected else NAN,
               kill_to_first_ack_ms=(first_ack - t_kill) / 1e6 if first_ack else NAN,
               caught_messages=len(caught), caught_max_wait_ms=max(caught) / 1e6 if caught else NAN)
    problems = []
    if first_ack is None:
        problems.append(f"no write acknowledged within {args.kill_timeout} s of the kill")
    # Restart the killed broker as itself; wait until it is back in the ISR.
    t_restart = time.monotonic()
    cluster.start_node(leader)
    try:
        cluster.wait_for(lambda: cluster.full_isr(topic, 1), args.kill_timeout, "the ISR back to full")
        row["restart_to_full_isr_s"] = time.monotonic() - t_restart
    except TimeoutError as exc:
        problems.append(str(exc))
    row["errors"] = problems
    row["verified"] = not problems
    return row


def failover_runs(cluster: BenchCluster, args, out) -> list[dict]:
    topic = f"cluster-failover-{uuid.uuid4().hex[:6]}"
    rows: list[dict] = []
    try:
        create_replicated_topic(cluster, topic, 1, args.min_isr)
    except Exception as exc:
        return [out({"phase": "failover-check", "verified": False, "errors": [f"{type(exc).__name__}: {exc}"]})]
    producer = PacedProducer(cluster.bootstrap, topic, args.latency_size, args.rate, timeout_s=120)
    producer.start()
    try:
        for k in range(args.kills):
            try:
                row = one_kill(cluster, topic, producer, args, k)
            except Exception as exc:
                row = {"phase": "failover", "kill": k + 1, "verified": False,
                       "errors": [f"{type(exc).__name__}: {exc}"], "broker_log_tails": cluster.log_tails()}
            rows.append(out(row))
            print(f"    kill {k + 1}: leader {row.get('leader')} (controller: {row.get('leader_was_controller')}) -> "
                  f"{row.get('new_leader')}; elected after {_fmt(row.get('kill_to_elected_ms'))} ms, first ack after "
                  f"{_fmt(row.get('kill_to_first_ack_ms'))} ms; ISR full again {_fmt(row.get('restart_to_full_isr_s'), 1)} s "
                  f"after restart" + ("" if row.get("verified") else f"; {row.get('errors')}"), flush=True)
            if not row.get("verified") and not all(cluster.procs[n] and cluster.procs[n].alive() for n in cluster.ports):
                break  # a broker is down that should be up: further kills would measure something else
    finally:
        producer.stop_event.set()
        producer.join(150)
    # Every acknowledged message is in the log exactly once (idempotent producer, acks=all).
    check = {"phase": "failover-check", "sent": producer.sent, "acked": len(producer.acks),
             "delivery_errors": producer.failed[:5], "unflushed": producer.unflushed}
    problems = list(producer.failed[:5])
    if producer.unflushed:
        problems.append(f"{producer.unflushed} messages not delivered at the end")
    try:
        seen, dups, read = read_back(cluster.bootstrap, topic, 60)
        missing = sum(1 for _a, _s, seq in producer.acks if seq >= len(seen) or not seen[seq])
        check.update(read=read, duplicates=dups, acked_missing=missing)
        if missing or dups:
            problems.append(f"{missing} acknowledged messages missing from the log, {dups} duplicates")
    except Exception as exc:
        problems.append(f"read back: {type(exc).__name__}: {exc}")
    check["errors"] = problems
    check["verified"] = not problems
    rows.append(out(check))
    return rows


# ---------------------------------------------------------------------------- summary

def _med(values) -> float:
    values = [v for v in values if isinstance(v, (int, float)) and v == v]
    return statistics.median(values) if values else NAN


def _max(values) -> float:
    values = [v for v in values if isinstance(v, (int, float)) and v == v]
    return max(values) if values else NAN


def _fmt(v, digits: int = 0) -> str:
    return "-" if not isinstance(v, (int, float)) or v != v else f"{v:,.{digits}f}"


def summarize(rows: list[dict], out=sys.stdout) -> None:
    setup = next((r for r in rows if r.get("phase") == "setup"), {})
    m = setup.get("machine", {})
    print(f"\nmachine: {m.get('cpu')} x {m.get('cores')} cores ({m.get('host')}), load average at start "
          f"{m.get('loadavg')}, librdkafka {m.get('librdkafka')}", file=out)
    print(f"cluster: {setup.get('brokers')} brokers, ZooKeeper {setup.get('zookeeper')}, "
          f"settings {setup.get('cluster_settings')}", file=out)

    thr = [r for r in rows if r.get("phase") == "throughput"]
    if thr:
        print("\n## (a) throughput: 3-broker cluster (RF=3, acks=all, min.insync.replicas=2) vs one broker "
              "(acks=1); medians over repeats\n", file=out)
        print("| target | acks | repeats | msg/s | MB/s | broker µs/msg (all brokers) | leader / each follower µs/msg | "
              "client µs/msg | host busy % | verified |", file=out)
        print("|" + "---|" * 10, file=out)
        med = {}
        for target in ("single", "cluster"):
            rs = [r for r in thr if r["target"] == target]
            if not rs:
                continue
            med[target] = _med([r.get("msgs") for r in rs])
            print(f"| {target} | {rs[0].get('acks')} | {len(rs)} | {_fmt(med[target])} | "
                  f"{_fmt(_med([r.get('mbps') for r in rs]), 1)} | {_fmt(_med([r.get('broker_us_per_msg') for r in rs]), 2)} | "
                  + (f"{_fmt(_med([r.get('leader_us_per_msg') for r in rs]), 2)} / "
                     f"{_fmt(_med([r.get('follower_us_per_msg') for r in rs]), 2)} | " if target == "cluster" else "- | ")
                  + f"{_fmt(_med([r.get('client_us_per_msg') for r in rs]), 2)} | "
                  f"{_fmt(_med([r.get('host_busy_pct') for r in rs]))} | "
                  f"{sum(bool(r.get('verified')) for r in rs)}/{len(rs)} |", file=out)
        if len(med) == 2 and med["single"]:
            ratio = med["cluster"] / med["single"]
            pairs = []
            for rep in sorted({r["repeat"] for r in thr}):
                a = [r.get("msgs") for r in thr if r["repeat"] == rep and r["target"] == "single"]
                b = [r.get("msgs") for r in thr if r["repeat"] == rep and r["target"] == "cluster"]
                if a and b and a[0] and b[0] == b[0]:
                    pairs.append(b[0] / a[0])
            r0 = thr[0]
            print(f"\ncluster/single msg/s: {_fmt(ratio, 2)} ({'meets' if ratio >= 0.4 else 'BELOW'} the 0.4 target); "
                  f"per repeat {', '.join(_fmt(p, 2) for p in pairs)}; {r0.get('size')} B, {r0.get('partitions')} "
                  f"partition(s), {r0.get('messages'):,} messages a window, linger.ms={r0.get('linger_ms')}, "
                  f"compression={r0.get('compression')}; idle cluster CPU during the single-broker windows: "
                  f"{_fmt(_med([r.get('background_cpu_s') / r['elapsed_s'] * 100 for r in thr if r['target'] == 'single' and r.get('elapsed_s')]))} %",
                  file=out)

    lat = [r for r in rows if r.get("phase") == "latency"]
    if lat:
        print("\n## (b) end-to-end latency on the cluster (acks=all, RF=3, min.insync.replicas=2); "
              "single: one broker, same producer, for reference\n", file=out)
        print("| target | producer | rate msg/s | messages | size | e2e p50 ms | p90 | p99 | p99.9 | max | ack p50 ms | ack p99 | "
              "target p99 ≤ 10 ms | broker CPU % (all) | verified |", file=out)
        print("|" + "---|" * 15, file=out)
        for r in lat:
            p99 = r.get("e2e_p99_ms", NAN)
            print(f"| {r.get('target', 'cluster')} | {r.get('producer')} | {r.get('rate')} | {r.get('messages')} | {r.get('size')} | {_fmt(r.get('e2e_p50_ms'), 2)} | "
                  f"{_fmt(r.get('e2e_p90_ms'), 2)} | {_fmt(p99, 2)} | {_fmt(r.get('e2e_p99_9_ms'), 2)} | "
                  f"{_fmt(r.get('e2e_max_ms'), 2)} | {_fmt(r.get('ack_p50_ms'), 2)} | {_fmt(r.get('ack_p99_ms'), 2)} | "
                  f"{'-' if p99 != p99 or r.get('target') == 'single' else ('meets' if p99 <= 10 else 'ABOVE')} | {_fmt(r.get('broker_cpu_pct'))} | "
                  f"{r.get('verified')} |", file=out)
        print("\nplain: produce_consume.py's latency producer (linger.ms=0, idempotence off: up to 1000000 requests "
              "in flight, each message its own Produce request); idempotent: the same with enable.idempotence=true "
              "(at most 5 requests in flight, so messages batch while acks=all waits). A broker answers a "
              "connection's requests in order, so a connection carries at most 1 / (acks=all round trip) requests "
              "a second.", file=out)

    kills = [r for r in rows if r.get("phase") == "failover"]
    check = next((r for r in rows if r.get("phase") == "failover-check"), None)
    if kills:
        timeout = next((r.get("zookeeper_session_timeout_ms") for r in kills if r.get("zookeeper_session_timeout_ms")),
                       setup.get("cluster_settings", {}).get("zookeeper.session.timeout.ms"))
        if setup.get("broker") == "kafka":
            print("\n## (c) leader SIGKILL → next acknowledged write (Kafka KRaft: a dead broker is fenced after "
                  "broker.session.timeout.ms, default 9000; 'controller' is whichever broker Metadata names)\n",
                  file=out)
        else:
            print(f"\n## (c) leader SIGKILL → next acknowledged write (zookeeper.session.timeout.ms={timeout}; "
                  f"Kafka's default 18000)\n", file=out)
        print("| kills | kill → new leader in Metadata ms, median / max | kill → first ack ms, median / max | "
              "longest ack wait of a message sent before the kill, ms | restart → full ISR s, median | leader was controller | "
              "verified |", file=out)
        print("|" + "---|" * 7, file=out)
        ok = sum(bool(r.get("verified")) for r in kills)
        print(f"| {len(kills)} | {_fmt(_med([r.get('kill_to_elected_ms') for r in kills]))} / "
              f"{_fmt(_max([r.get('kill_to_elected_ms') for r in kills]))} | "
              f"{_fmt(_med([r.get('kill_to_first_ack_ms') for r in kills]))} / "
              f"{_fmt(_max([r.get('kill_to_first_ack_ms') for r in kills]))} | "
              f"{_fmt(_max([r.get('caught_max_wait_ms') for r in kills]))} | "
              f"{_fmt(_med([r.get('restart_to_full_isr_s') for r in kills]), 1)} | "
              f"{sum(bool(r.get('leader_was_controller')) for r in kills)}/{len(kills)} | "
              f"{ok}/{len(kills)}{'' if check is None else ', log ' + ('checked' if check.get('verified') else 'FAILED')} |",
              file=out)
        by_ctl = {flag: [r.get("kill_to_first_ack_ms") for r in kills if bool(r.get("leader_was_controller")) == flag]
                  for flag in (False, True)}
        gap = [r.get("kill_to_first_ack_ms", NAN) - r.get("kill_to_elected_ms", NAN) for r in kills]
        print(f"\nnew leader in Metadata → first ack (client rediscovery, follower fetching from the new leader): "
              f"median {_fmt(_med(gap))} ms, max {_fmt(_max(gap))} ms", file=out)
        print(f"kill → first ack, median: {_fmt(_med(by_ctl[False]))} ms when the leader was not the controller "
              f"({len(by_ctl[False])}), {_fmt(_med(by_ctl[True]))} ms when it was ({len(by_ctl[True])}); per kill: "
              + ", ".join(_fmt(r.get("kill_to_first_ack_ms")) for r in kills), file=out)
        if check is not None:
            print(f"producer: {check.get('sent')} sent, {check.get('acked')} acknowledged, {check.get('read')} read back, "
                  f"{check.get('acked_missing')} acknowledged missing, {check.get('duplicates')} duplicates", file=out)
    failed = [r for r in rows if r.get("phase") != "setup" and not r.get("verified")]
    print(f"\n{len(failed)} unverified windows.", file=out)
    for r in failed[:10]:
        print(f"- FAILED {r.get('phase')} {r.get('target', '')} {r.get('repeat', r.get('kill', ''))}: "
              f"{r.get('errors')}", file=out)


# ---------------------------------------------------------------------------- main

def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--only", default="throughput,latency,failover", help="phases: throughput, latency, failover")
    ap.add_argument("--repeats", type=int, default=2, help="(a) windows per target, order alternating A,B / B,A")
    ap.add_argument("--size", type=int, default=1024, help="(a) message value size in bytes")
    ap.add_argument("--partitions", type=int, default=1, help="(a) partitions of each topic")
    ap.add_argument("--messages", type=int, default=500_000, help="(a) messages each window produces")
    ap.add_argument("--linger-ms", type=int, default=10)
    ap.add_argument("--compression", default="none")
    ap.add_argument("--rate", type=int, default=1000, help="(b), (c) messages per second")
    ap.add_argument("--latency-s", type=float, default=10.0, help="(b) seconds of sending")
    ap.add_argument("--latency-producers", default="idempotent,plain",
                    help="(b) producers measured: idempotent (max 5 requests in flight), plain (produce_consume.py's)")
    ap.add_argument("--latency-reference", default="idempotent",
                    help="(b) producers also measured on a fresh single broker (acks=all), the host's noise floor; "
                         "'' for none")
    ap.add_argument("--latency-size", type=int, default=100, help="(b), (c) message value size (>= 16)")
    ap.add_argument("--kills", type=int, default=10, help="(c) leader kills")
    ap.add_argument("--steady-s", type=float, default=1.0, help="(c) writes flowing with a full ISR before a kill")
    ap.add_argument("--kill-timeout", type=float, default=60.0, help="(c) bound on each wait of a kill")
    ap.add_argument("--zk-session-timeout-ms", type=int, default=6000,
                    help="zookeeper.session.timeout.ms of the cluster (Kafka's default: 18000)")
    ap.add_argument("--min-isr", type=int, default=2, help="min.insync.replicas of the cluster's topics")
    ap.add_argument("--brokers", type=int, default=3)
    ap.add_argument("--timeout", type=float, default=120.0, help="bound on a flush or a latency run, seconds")
    ap.add_argument("--trafka-set", action="append", default=[], metavar="KEY=VALUE",
                    help="a broker setting for the single broker and every cluster broker")
    ap.add_argument("--broker", choices=["trafka", "kafka"], default="trafka",
                    help="the brokers of the cluster and of the single-broker windows: Trafka on ZooKeeper, or "
                         "Apache Kafka 4.x (KRaft combined nodes, see KafkaCluster)")
    ap.add_argument("--kafka-set", action="append", default=[], metavar="KEY=VALUE",
                    help="a server.properties line for every Kafka node (--broker kafka)")
    ap.add_argument("--out", default=None, help="JSONL file (default .cache/bench-results/cluster-<time>.jsonl)")
    ap.add_argument("--log-dir", default=None, help="where broker logs go (default: a temporary dir, kept on failure)")
    ap.add_argument("--summarize", nargs="+", default=None, help="only print the summary of JSONL files")
    args = ap.parse_args(argv)
    if args.summarize:
        summarize(load(args.summarize))
        return 0
    only = set(csv(args.only))
    reason = ZooKeeperServer.unavailable_reason() if args.broker == "trafka" else None
    if reason:
        print(f"cannot run: no ZooKeeper ({reason})", file=sys.stderr)
        return 2
    out_path = args.out or os.path.join(REPO, ".cache", "bench-results", time.strftime("cluster-%Y%m%d-%H%M%S.jsonl"))
    os.makedirs(os.path.dirname(os.path.abspath(out_path)), exist_ok=True)
    root = tempfile.mkdtemp(prefix="trafka-cluster-bench-")
    args.log_dir = args.log_dir or root
    if args.broker == "kafka":
        settings = {"offsets.topic.num.partitions": "3", **dict(s.split("=", 1) for s in args.kafka_set)}
    else:
        settings = {"zookeeper.session.timeout.ms": str(args.zk_session_timeout_ms),
                    "offsets.topic.num.partitions": "3", **dict(s.split("=", 1) for s in args.trafka_set)}
    m = machine()
    print(f"cluster bench ({', '.join(p for p in ('throughput', 'latency', 'failover') if p in only)}) -> {out_path}\n"
          f"machine: {m['cpu']} x {m['cores']} cores, load average {m['loadavg']}; brokers: {args.broker}; "
          + (f"zookeeper.session.timeout.ms={args.zk_session_timeout_ms}" if args.broker == "trafka"
             else "KRaft (broker.session.timeout.ms: Kafka's default 9000)"), flush=True)
    rows: list[dict] = []
    started = time.monotonic()
    os.makedirs(os.path.join(root, "zookeeper"))
    zk = ZooKeeperServer(data_dir=os.path.join(root, "zookeeper"))
    cluster = None
    with open(out_path, "a") as sink:
        def out(row: dict) -> dict:
            rows.append(row)
            sink.write(json.dumps(row) + "\n")
            sink.flush()
            return row

        try:
            if args.broker == "trafka":
                zk.start()
            cluster = make_cluster(args.broker, args.brokers, settings, root,
                                   zk.chroot_connect_string("bench") if args.broker == "trafka" else "")
            cluster.start()
            out({"phase": "setup", "machine": m, "broker": args.broker, "brokers": args.brokers,
                 "zookeeper": zk.connect_string if args.broker == "trafka" else None,
                 "cluster_settings": settings, "single_settings": dict(s.split("=", 1) for s in args.trafka_set),
                 "args": {k: v for k, v in vars(args).items() if k != "summarize"},
                 "cluster_start_s": time.monotonic() - started})
            print(f"[{time.monotonic() - started:4.0f}s] cluster up: brokers on {cluster.bootstrap}", flush=True)
            if "throughput" in only:
                for rep in range(args.repeats):
                    for target in (("single", "cluster") if rep % 2 == 0 else ("cluster", "single")):
                        r = out(throughput_window(target, cluster, args, rep,
                                                  zk.proc.pid if args.broker == "trafka" else None))
                        print(f"[{time.monotonic() - started:4.0f}s] (a) {target} rep {rep + 1}: "
                              f"{_fmt(r.get('msgs'))} msg/s {_fmt(r.get('mbps'), 1)} MB/s, broker "
                              f"{_fmt(r.get('broker_us_per_msg'), 2)} µs/msg; verified {r.get('verified')}"
                              + ("" if r.get("verified") else f" {r.get('errors')}"), flush=True)
            runs = [("cluster", p) for p in csv(args.latency_producers)]
            runs += [("single", p) for p in csv(args.latency_reference)]
            for target, producer in (runs if "latency" in only else []):
                r = out(latency_run(cluster, args, producer, target))
                print(f"[{time.monotonic() - started:4.0f}s] (b) {target}, {producer} producer: e2e p50 {_fmt(r.get('e2e_p50_ms'), 2)} p99 "
                      f"{_fmt(r.get('e2e_p99_ms'), 2)} max {_fmt(r.get('e2e_max_ms'), 2)} ms; verified "
                      f"{r.get('verified')}" + ("" if r.get("verified") else f" {r.get('errors')}"), flush=True)
            if "failover" in only:
                print(f"[{time.monotonic() - started:4.0f}s] (c) {args.kills} leader kills", flush=True)
                failover_runs(cluster, args, out)
        except Exception as exc:
            out({"phase": "setup-failed", "verified": False, "errors": [f"{type(exc).__name__}: {exc}"],
                 "broker_log_tails": cluster.log_tails() if cluster else {}, "zookeeper_log": zk.log_tail(20)})
        finally:
            if cluster is not None:
                cluster.stop()
            zk.close()
    ok = all(r.get("verified", True) for r in rows)
    if ok and args.log_dir == root:
        shutil.rmtree(root, ignore_errors=True)
    else:
        print(f"broker logs kept in {args.log_dir}")
    print(f"\nfinished in {time.monotonic() - started:.0f} s; results in {out_path}")
    summarize(rows)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
