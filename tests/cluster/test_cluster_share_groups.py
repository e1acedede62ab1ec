"""Share groups (KIP-932) in a 3-broker ZooKeeper cluster, with confluent-kafka's ShareConsumer.

As Kafka 4.x splits the work: membership on the group's coordinator (the leader of its
`__consumer_offsets` partition), share partitions on each data partition's leader, and
their state at the share coordinator (the leader of the key's `__share_group_state`
partition), written there before an acknowledgement is answered.

- three consumers on a topic of six RF=3 partitions led by different brokers get every
  record, and none that was accepted is ever delivered again;
- the leader of a partition is SIGKILLed mid-stream (it also leads partitions of the
  internal topics): consumption goes on, the new leaders read the share state back, no
  accepted record is delivered again and everything produced is accepted;
- a non-leader answers a ShareFetch NOT_LEADER_OR_FOLLOWER with KIP-951's leader hints;
  a broker that is not the group's coordinator answers ShareGroupHeartbeat NOT_COORDINATOR;
- a share group deleted while a partition leader (not the group's coordinator) still holds
  records acquired: the lock expiring there does not write the deleted state back
  (FENCED_STATE_EPOCH), and a new group of the same id starts afresh.
"""

from __future__ import annotations

import threading
import time
import uuid

import confluent_kafka as ck
import pytest

from server.coordinator_log import partition_for_key
from server.groups.share.state import coordinator_key
from tests.brokerproc import raw_request
from tests.cluster.clusterkit import Cluster
from wire.registry import ApiKey

if not hasattr(ck, "ShareConsumer"):
    pytest.skip("confluent-kafka without ShareConsumer", allow_module_level=True)

pytestmark = pytest.mark.timeout(420)

PARTITIONS = 6
EXTRA = ("--set", "share.coordinator.state.topic.num.partitions=3",
         "--set", "group.share.record.lock.duration.ms=5000",
         "--set", "group.share.heartbeat.interval.ms=500",
         "--set", "group.share.session.timeout.ms=10000")


def _ready(cluster: Cluster, topic: str) -> dict[int, int]:
    """partition -> leader, once every partition has a leader and a full ISR."""
    def check():
        leaders = {}
        for p in range(PARTITIONS):
            info = cluster.partition(topic, p)
            if not info or info["leader_id"] < 0 or len(info["isr_nodes"]) != 3:
                return None
            leaders[p] = info["leader_id"]
        return leaders
    return cluster.wait_for(check, 30, f"{topic} led with full ISRs")


def _earliest(cluster: Cluster, group: str) -> None:
    """share.auto.offset.reset=earliest for the group (a GROUP config, IncrementalAlterConfigs)."""
    answer = cluster.call(ApiKey.INCREMENTAL_ALTER_CONFIGS, 1, {
        "resources": [{"resource_type": 32, "resource_name": group, "configs": [
            {"name": "share.auto.offset.reset", "config_operation": 0, "value": "earliest"}]}],
        "validate_only": False})
    assert answer["responses"][0]["error_code"] == 0, answer


class Produced:
    """Records produced with acks=all to explicit partitions; only acknowledged ones count."""

    def __init__(self, bootstrap: str) -> None:
        self.producer = ck.Producer({"bootstrap.servers": bootstrap, "acks": "all", "enable.idempotence": True,
                                     "message.timeout.ms": 120000})
        self.acked: set[tuple[int, int]] = set()
        self.failed: list = []

    def send(self, count: int, prefix: str, pace_s: float = 0.0) -> None:
        def report(err, msg) -> None:
            if err is None:
                self.acked.add((msg.partition(), msg.offset()))
            else:
                self.failed.append(err)

        for i in range(count):
            self.producer.produce("q", value=f"{prefix}{i}".encode(), partition=i % PARTITIONS, on_delivery=report)
            self.producer.poll(0)
            if pace_s:
                time.sleep(pace_s)
        assert self.producer.flush(120) == 0


class ShareReaders:
    """Consumers polling in threads, each poll's records accepted with commit_sync. A record
    counts as accepted when the broker answered its partition's acknowledgement without
    error; a delivery of a record already accepted is a violation. A record whose
    acknowledgement got no answer or an error is in doubt: the broker either rolled it back
    (it is delivered again) or wrote it before the answer was lost with its broker (it is
    not)."""

    def __init__(self, cluster: Cluster, group: str, count: int) -> None:
        self.cluster = cluster
        self.group = group
        self.lock = threading.Lock()
        self.accepted: dict[tuple[int, int], int] = {}
        self.in_doubt: set[tuple[int, int]] = set()
        self.delivered = 0
        self.violations: list = []
        self.errors: list = []
        self.stop = threading.Event()
        self.threads = [threading.Thread(target=self._run, args=(n,), daemon=True) for n in range(count)]

    def __enter__(self) -> "ShareReaders":
        for t in self.threads:
            t.start()
        return self

    def __exit__(self, *exc) -> None:
        self.stop.set()
        for t in self.threads:
            t.join(60)

    def _run(self, n: int) -> None:
        c = ck.ShareConsumer({"bootstrap.servers": self.cluster.bootstrap, "group.id": self.group,
                              "client.id": f"reader-{n}"})
        c.subscribe(["q"])
        try:
            while not self.stop.is_set():
                try:
                    msgs = [m for m in c.poll(0.5) if m.error() is None]
                except ck.KafkaException as exc:
                    self.errors.append(exc)
                    continue
                if not msgs:
                    continue
                with self.lock:
                    self.delivered += len(msgs)
                    for m in msgs:
                        if (m.partition(), m.offset()) in self.accepted:
                            self.violations.append((n, m.partition(), m.offset(), m.value()))
                try:
                    results = c.commit_sync(30)
                except ck.KafkaException as exc:
                    self.errors.append(exc)
                    results = {}
                ok = {tp.partition for tp, err in results.items() if err is None}
                with self.lock:
                    for m in msgs:
                        key = (m.partition(), m.offset())
                        if m.partition() in ok:
                            self.accepted[key] = self.accepted.get(key, 0) + 1
                            self.in_doubt.discard(key)
                        elif key not in self.accepted:
                            self.in_doubt.add(key)
        finally:
            c.close()

    def wait_for(self, wanted: set[tuple[int, int]], timeout: float, *, settle_s: float = 0.0) -> None:
        """Until every record of `wanted` is accepted or in doubt (then `settle_s` more, for
        rolled-back ones to come back once their locks expire)."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            with self.lock:
                missing = wanted - set(self.accepted) - self.in_doubt
            if not missing:
                time.sleep(settle_s)
                return
            time.sleep(0.2)
        raise AssertionError(f"{len(missing)} records never accepted, e.g. {sorted(missing)[:10]}; "
                             f"{len(self.accepted)} accepted, errors {self.errors[:3]}")


def test_share_consumers_get_every_record_once_through_a_leader_kill(tmp_path, zk_connect):
    with Cluster(tmp_path, zk_connect, 3, *EXTRA) as cluster:
        assert cluster.create_topic("q", PARTITIONS, 3, {"min.insync.replicas": "2"})["error_code"] == 0
        leaders = _ready(cluster, "q")
        assert len(set(leaders.values())) >= 2, f"leaders spread over brokers: {leaders}"
        _earliest(cluster, "sg")
        produced = Produced(cluster.bootstrap)
        produced.send(600, "a")
        with ShareReaders(cluster, "sg", 3) as readers:
            readers.wait_for(set(produced.acked), 120)
            # The share state is written at the share coordinators (the __share_group_state leaders).
            state = cluster.metadata(["__share_group_state"])["topics"][0]
            assert state["error_code"] == 0 and len(state["partitions"]) == 3, state

            # Mid-stream, SIGKILL a broker leading both data partitions and a share coordinator
            # (a __share_group_state partition holding this group's state) while records keep coming.
            state_leaders = {p["leader_id"] for p in state["partitions"]}
            victim = next(leaders[p] for p in range(PARTITIONS) if leaders[p] in state_leaders)
            moved = [p for p in range(PARTITIONS) if leaders[p] == victim]
            sender = threading.Thread(target=produced.send, args=(900, "b", 0.004), daemon=True)
            sender.start()
            time.sleep(1.0)
            cluster.brokers[victim].kill()
            sender.join(180)
            assert not sender.is_alive()
            assert not produced.failed, produced.failed[:3]
            assert len(produced.acked) == 1500
            readers.wait_for(set(produced.acked), 180, settle_s=12)
            for p in moved:
                assert cluster.partition("q", p)["leader_id"] not in (victim, -1), p
        assert not readers.violations, f"accepted records delivered again: {readers.violations[:10]}"
        twice = {k: v for k, v in readers.accepted.items() if v > 1}
        assert not twice, f"records accepted twice: {sorted(twice)[:10]}"
        assert set(readers.accepted) <= produced.acked
        unconfirmed = produced.acked - set(readers.accepted)
        # Only acknowledgements in flight to the killed leader can be written with their
        # answer lost: a handful, of the partitions it led, never delivered again.
        assert unconfirmed <= readers.in_doubt, sorted(unconfirmed - readers.in_doubt)[:10]
        assert len(unconfirmed) <= 100, (len(unconfirmed), sorted(unconfirmed)[:20])


def test_share_requests_go_to_leaders_and_the_group_coordinator(tmp_path, zk_connect):
    with Cluster(tmp_path, zk_connect, 3, *EXTRA) as cluster:
        assert cluster.create_topic("q", PARTITIONS, 3, {"min.insync.replicas": "2"})["error_code"] == 0
        leaders = _ready(cluster, "q")
        topic_id = next(t["topic_id"] for t in cluster.metadata(["q"])["topics"])
        found = cluster.call(ApiKey.FIND_COORDINATOR, 4, {"key_type": 0, "coordinator_keys": ["raw"]})

        def coordinator():
            c = cluster.call(ApiKey.FIND_COORDINATOR, 4, {"key_type": 0, "coordinator_keys": ["raw"]})["coordinators"][0]
            return c["node_id"] if c["error_code"] == 0 else None
        coordinator_id = cluster.wait_for(coordinator, 30, "a coordinator for group raw")
        other = next(n for n in (1, 2, 3) if n != coordinator_id)
        body = {"group_id": "raw", "member_id": uuid.uuid4().hex[:22], "member_epoch": 0, "rack_id": None,
                "subscribed_topic_names": ["q"]}
        refused = raw_request("127.0.0.1", cluster.brokers[other].port, ApiKey.SHARE_GROUP_HEARTBEAT, 1, body)
        assert refused["error_code"] == 16, refused  # NOT_COORDINATOR
        joined = cluster.wait_for(lambda: (lambda r: r if r["error_code"] == 0 else None)(raw_request(
            "127.0.0.1", cluster.brokers[coordinator_id].port, ApiKey.SHARE_GROUP_HEARTBEAT, 1, body)), 30, "a join")
        assigned = {p for t in joined["assignment"]["topic_partitions"] for p in t["partitions"]}
        assert assigned == set(range(PARTITIONS)), joined  # every partition of the topic, wherever led

        # ShareFetch of partition 0 at a broker that does not lead it: NOT_LEADER_OR_FOLLOWER with hints.
        follower = next(n for n in (1, 2, 3) if n != leaders[0])
        fetch = raw_request("127.0.0.1", cluster.brokers[follower].port, ApiKey.SHARE_FETCH, 1, {
            "group_id": "raw", "member_id": body["member_id"], "share_session_epoch": 0, "max_wait_ms": 0,
            "min_bytes": 1, "max_bytes": 1 << 20, "max_records": 10, "batch_size": 10,
            "topics": [{"topic_id": topic_id, "partitions": [{"partition_index": 0, "acknowledgement_batches": []}]}],
            "forgotten_topics_data": []})
        part = fetch["responses"][0]["partitions"][0]
        assert part["error_code"] == 6, fetch  # NOT_LEADER_OR_FOLLOWER
        assert part["current_leader"]["leader_id"] == leaders[0], part
        assert any(e["node_id"] == leaders[0] for e in fetch["node_endpoints"]), fetch
        assert found is not None

        # The leader initialises the share partition at its share coordinator; DeleteGroups
        # at the group coordinator deletes that state (DeleteShareGroupState there).
        at_leader = raw_request("127.0.0.1", cluster.brokers[leaders[0]].port, ApiKey.SHARE_FETCH, 1,
                                fetch_body(body["member_id"], topic_id))
        assert at_leader["error_code"] == 0 and at_leader["responses"][0]["partitions"][0]["error_code"] == 0, at_leader

        def stored_start() -> int:
            state = cluster.metadata(["__share_group_state"])["topics"][0]
            index = partition_for_key(coordinator_key(("raw", topic_id, 0)), len(state["partitions"]))
            leader = next(p["leader_id"] for p in state["partitions"] if p["partition_index"] == index)
            answer = raw_request("127.0.0.1", cluster.brokers[leader].port, ApiKey.READ_SHARE_GROUP_STATE, 0, {
                "group_id": "raw", "topics": [{"topic_id": topic_id, "partitions": [
                    {"partition": 0, "leader_epoch": cluster.partition("q", 0)["leader_epoch"]}]}]})
            part = answer["results"][0]["partitions"][0]
            assert part["error_code"] == 0, answer
            return part["start_offset"]

        assert stored_start() == 0
        coordinator_port = cluster.brokers[coordinator_id].port
        delete = {"groups_names": ["raw"]}
        assert raw_request("127.0.0.1", coordinator_port, ApiKey.DELETE_GROUPS, 2, delete)["results"][0][
            "error_code"] == 68  # NON_EMPTY_GROUP
        assert raw_request("127.0.0.1", coordinator_port, ApiKey.SHARE_GROUP_HEARTBEAT, 1,
                           {**body, "member_epoch": -1})["error_code"] == 0
        assert raw_request("127.0.0.1", coordinator_port, ApiKey.DELETE_GROUPS, 2, delete)["results"][0][
            "error_code"] == 0
        assert stored_start() == -1  # never initialised, as far as the share coordinator knows


def fetch_body(member_id: str, topic_id, partition: int = 0) -> dict:
    return {"group_id": "raw", "member_id": member_id, "share_session_epoch": 0, "max_wait_ms": 0,
            "min_bytes": 1, "max_bytes": 1 << 20, "max_records": 10, "batch_size": 10,
            "topics": [{"topic_id": topic_id, "partitions": [{"partition_index": partition,
                                                              "acknowledgement_batches": []}]}],
            "forgotten_topics_data": []}


def test_an_acknowledgement_not_written_is_refused_and_rolled_back(tmp_path, zk_connect):
    """The share coordinator cannot write (its `__share_group_state` partition is below
    min.insync.replicas=2 once two brokers are gone): the acknowledgement is answered with
    the error, and the record is not left accepted — it is delivered again once its lock
    expires. Before the rollback it stayed ACKNOWLEDGED in memory and never came back."""
    from tests.groups.share_wire import ShareClient, offsets, partition_entry, produce

    # A lock long enough to outlast the wait for the ISRs to shrink (then the write is refused).
    with Cluster(tmp_path, zk_connect, 3, *EXTRA, "--set", "group.share.record.lock.duration.ms=20000") as cluster:
        # One replica: losing the other brokers leaves r-0's leader epoch alone (an ISR change
        # would move it and the share partition would be loaded anew instead).
        assert cluster.create_topic("r", 1, 1)["error_code"] == 0
        cluster.wait_for(lambda: (lambda x: x and x["leader_id"] > 0)(cluster.partition("r", 0)), 30, "r-0 led")
        _earliest(cluster, "rb")
        produce(cluster.bootstrap, "r", 2, one_per_batch=True)
        leader = cluster.partition("r", 0)["leader_id"]
        topic_id = next(t["topic_id"] for t in cluster.metadata(["r"])["topics"])
        c = ShareClient(cluster.brokers[leader], "rb")

        def fetch_until(offset: int, timeout: float = 30) -> dict:
            deadline = time.monotonic() + timeout
            while time.monotonic() < deadline:
                got = c.fetch(topic_id, max_records=1, max_wait_ms=1000)
                if offsets(got):
                    assert offsets(got) == [offset], got
                    return got
            raise AssertionError(f"offset {offset} never delivered")

        fetch_until(0)
        assert partition_entry(c.acknowledge(topic_id, {0: [(0, 0, [1])]}))["error_code"] == 0
        fetch_until(1)
        for node in (n for n in (1, 2, 3) if n != leader):
            cluster.brokers[node].kill()

        def state_isrs_shrunk():
            topic = cluster.metadata(["__share_group_state"], leader)["topics"][0]
            return all(p["leader_id"] == leader and p["isr_nodes"] == [leader] for p in topic["partitions"])
        cluster.wait_for(state_isrs_shrunk, 40, "__share_group_state led by the survivor alone")
        c.sock.settimeout(60)  # the share-partition leader retries the write for up to 15 s
        refused = partition_entry(c.acknowledge(topic_id, {0: [(1, 1, [1])]}))
        # COORDINATOR_NOT_AVAILABLE (the append short of min.insync.replicas), not INVALID_RECORD_STATE.
        assert refused["error_code"] in (7, 15, 19, 20), refused
        again = fetch_until(1, 40)  # once the lock expired: offset 1 comes back, its second delivery
        assert partition_entry(again)["acquired_records"][0]["delivery_count"] == 2, again
        c.close()


class _Bootstrap:
    """What JavaShareMember needs of a broker: a bootstrap list (here the cluster's)."""

    def __init__(self, bootstrap: str) -> None:
        self.bootstrap = bootstrap


def test_java_and_confluent_share_consumers_in_a_cluster_every_record_once(tmp_path, zk_connect):
    """kafka-clients 3.9's KafkaShareConsumer (share APIs v0) and confluent-kafka's
    ShareConsumer (v1) in one share group of a cluster: each record of six partitions led by
    three brokers goes to exactly one of them."""
    from tests.groups.test_share_group_java import JavaShareMember

    with Cluster(tmp_path, zk_connect, 3, *EXTRA) as cluster:
        assert cluster.create_topic("q", PARTITIONS, 3)["error_code"] == 0
        _ready(cluster, "q")
        _earliest(cluster, "g")
        java = JavaShareMember(_Bootstrap(cluster.bootstrap), "java-0")
        librd = ck.ShareConsumer({"bootstrap.servers": cluster.bootstrap, "group.id": "g",
                                  "share.acknowledgement.mode": "explicit"})
        librd.subscribe(["q"])
        librd_values: list[str] = []
        try:
            # Both members with an assignment (three partitions each, the simple assignor),
            # asked of the group's coordinator; the records after, so both get some.
            def both_assigned():
                librd.poll(0.2)
                found = cluster.call(ApiKey.FIND_COORDINATOR, 4, {"key_type": 0, "coordinator_keys": ["g"]})
                node = found["coordinators"][0]
                if node["error_code"] != 0:
                    return None
                group = raw_request("127.0.0.1", node["port"], ApiKey.SHARE_GROUP_DESCRIBE, 1,
                                    {"group_ids": ["g"], "include_authorized_operations": False})["groups"][0]
                members = group["members"]
                return len(members) == 2 and all(m["assignment"]["topic_partitions"] for m in members)
            cluster.wait_for(both_assigned, 90, "both share consumers assigned")
            # A heartbeat later each client fetches only its own three partitions (the first to
            # join held all six until then); records paced, not one burst a single fetch takes.
            deadline = time.monotonic() + 1.5
            while time.monotonic() < deadline:
                librd.poll(0.2)
            produced = Produced(cluster.bootstrap)
            sender = threading.Thread(target=produced.send, args=(600, "j", 0.005), daemon=True)
            sender.start()
            deadline = time.monotonic() + 120
            while len(librd_values) + len(java.values) < 600 and time.monotonic() < deadline:
                for m in librd.poll(0.2):
                    assert m.error() is None, m.error()
                    librd_values.append(m.value().decode())
                    librd.acknowledge(m, ck.AcknowledgeType.ACCEPT)
            librd.commit_sync(30)
            sender.join(60)
            java.stop()
            librd.close()
        finally:
            if java.proc.poll() is None:
                java.proc.kill()
        every = librd_values + java.values
        assert sorted(every) == sorted(f"j{i}" for i in range(600)), (len(every), len(set(every)))
        assert java.values and librd_values, (len(java.values), len(librd_values))
        assert not java.errors, java.errors[:3]


def _read_state(cluster: Cluster, group: str, topic: str, topic_id, partition: int = 0) -> dict:
    """ReadShareGroupState at the share partition's share coordinator (its answer's partition)."""
    state = cluster.metadata(["__share_group_state"])["topics"][0]
    index = partition_for_key(coordinator_key((group, topic_id, partition)), len(state["partitions"]))
    leader = next(p["leader_id"] for p in state["partitions"] if p["partition_index"] == index)
    answer = raw_request("127.0.0.1", cluster.brokers[leader].port, ApiKey.READ_SHARE_GROUP_STATE, 0, {
        "group_id": group, "topics": [{"topic_id": topic_id, "partitions": [
            {"partition": partition, "leader_epoch": cluster.partition(topic, partition)["leader_epoch"]}]}]})
    part = answer["results"][0]["partitions"][0]
    assert part["error_code"] == 0, answer
    return part


def test_a_deleted_share_groups_state_is_not_written_back_by_a_partition_leader(tmp_path, zk_connect):
    """DeleteGroups at the group's coordinator while the leader of the data partition (another
    broker) still holds records acquired by the group's last member, its share session open:
    when their locks expire the leader's write of the released records carries the state epoch
    the share coordinator deleted, is FENCED_STATE_EPOCH, and the leader drops its copy. The
    deleted state stays deleted (ReadShareGroupState: StartOffset -1), and a new member of a
    group of the same id gets a fresh share partition — every record from the earliest offset,
    first deliveries. Before state epochs the release was written back (StartOffset 0 with the
    old acknowledgement) and the new member got only the old group's released records, second
    deliveries."""
    from tests.groups.share_wire import ShareClient, acquired, partition_entry, produce

    with Cluster(tmp_path, zk_connect, 3, *EXTRA) as cluster:
        assert cluster.create_topic("d", 1, 3)["error_code"] == 0
        info = cluster.wait_for(lambda: (lambda x: x if x and x["leader_id"] > 0 and len(x["isr_nodes"]) == 3
                                         else None)(cluster.partition("d", 0)), 30, "d-0 led with a full ISR")
        leader = info["leader_id"]
        topic_id = next(t["topic_id"] for t in cluster.metadata(["d"])["topics"])

        def coordinator_of(group: str):
            found = cluster.call(ApiKey.FIND_COORDINATOR, 4, {"key_type": 0, "coordinator_keys": [group]})
            c = found["coordinators"][0]
            return c["node_id"] if c["error_code"] == 0 else None
        # A group coordinated elsewhere than d-0's leader: the coordinator retires its own copies.
        group, coordinator_id = next((g, n) for g in (f"dg{i}" for i in range(100))
                                     for n in [cluster.wait_for(lambda g=g: coordinator_of(g), 30, "a coordinator")]
                                     if n != leader)
        _earliest(cluster, group)
        produce(cluster.bootstrap, "d", 3)

        member = ShareClient(cluster.brokers[coordinator_id], group)
        member.join("d")
        at_leader = ShareClient(cluster.brokers[leader], group, member.member)

        def first_fetch():
            got = at_leader.fetch(topic_id, max_wait_ms=1000)
            return got if got["error_code"] == 0 and acquired(got) else None
        assert acquired(cluster.wait_for(first_fetch, 60, "the first ShareFetch at d-0's leader")) == [(0, 2, 1)]
        assert partition_entry(at_leader.acknowledge(topic_id, {0: [(0, 0, [1])]}))["error_code"] == 0
        assert _read_state(cluster, group, "d", topic_id)["start_offset"] == 1  # offset 0 settled
        # Offsets 1 and 2 stay acquired at the leader; the member leaves, its session stays open.
        assert member.heartbeat(-1)["error_code"] == 0
        deleted = raw_request("127.0.0.1", cluster.brokers[coordinator_id].port, ApiKey.DELETE_GROUPS, 2,
                              {"groups_names": [group]})
        assert deleted["results"][0]["error_code"] == 0, deleted
        after_delete = _read_state(cluster, group, "d", topic_id)
        assert after_delete["start_offset"] == -1 and after_delete["state_epoch"] >= 1, after_delete

        time.sleep(5.0 + 2.0)  # group.share.record.lock.duration.ms=5000: the locks expire at the leader
        stale = _read_state(cluster, group, "d", topic_id)
        assert stale["start_offset"] == -1 and not stale["state_batches"], f"deleted state written back: {stale}"
        assert stale["state_epoch"] == after_delete["state_epoch"], stale

        _earliest(cluster, group)
        again = ShareClient(cluster.brokers[coordinator_id], group)
        again.join("d")
        fresh = ShareClient(cluster.brokers[leader], group, again.member)
        got = cluster.wait_for(lambda: (lambda r: r if r["error_code"] == 0 and acquired(r) else None)(
            fresh.fetch(topic_id, max_wait_ms=1000)), 30, "the new group's first records")
        assert acquired(got) == [(0, 2, 1)], got  # a fresh share partition at earliest, first deliveries
        assert partition_entry(fresh.acknowledge(topic_id, {0: [(0, 2, [1])]}))["error_code"] == 0
        written = _read_state(cluster, group, "d", topic_id)
        assert written["state_epoch"] == after_delete["state_epoch"] and written["start_offset"] >= 0, written
        # The old member's late acknowledgement is refused: its share partition is gone.
        assert partition_entry(at_leader.acknowledge(topic_id, {0: [(1, 2, [1])]}))["error_code"] != 0
        for c in (member, at_leader, again, fresh):
            c.close()
