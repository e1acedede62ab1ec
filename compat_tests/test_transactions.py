"""Transactions (KIP-98): what each client's transactional producer and read_committed
consumer see, checked record by record against the offsets the producer was acknowledged.

Every scenario ends the data it checks with a plain (non-transactional) sentinel record per
partition and reads exactly up to it: control records (the commit/abort markers between the
data) must never reach an application, and nothing may be missing or doubled before the
sentinel. A record's offset must be the one its producer was told, so a broker that hides or
shows the wrong records cannot pass by coincidence of values.

kcat has no transactional producer: its column produces with the setup client (kafka-python)
and checks what kcat's read_committed consumer sees; the producer-side scenarios (fencing,
timeouts, misuse) skip for it.
"""

from __future__ import annotations

import contextlib
import time
from collections import defaultdict
from typing import Iterable, Sequence

import pytest

from compat_tests.clients.base import (
    Client, ClientError, Delivery, Message, NotSupportedByClient, Record, TxnProducer)
from compat_tests.helpers import make_topic, unique_name, wait_metadata, wait_until

pytestmark = pytest.mark.timeout(120)

RC = "read_committed"
RU = "read_uncommitted"
READ_TIMEOUT_S = 20.0  # what a read that must complete may take (it returns when complete)
QUIET_S = 3.0  # how long a read that must find nothing more waits
FENCED = (90, 47)  # PRODUCER_FENCED, INVALID_PRODUCER_EPOCH (what older request versions say)
TXN_TIMEOUT_MS = 2000
# Kafka aborts a timed-out transaction at its next check, every
# transaction.abort.timed.out.transaction.cleanup.interval.ms (10 s by default).
ABORT_WAIT_S = 20.0
BROKER_MAX_TXN_TIMEOUT_MS = 900000  # Kafka's transaction.max.timeout.ms default

Written = list[tuple[Delivery, Message]]


# --------------------------------------------------------------------------- helpers


def _txn_producer(client: Client, setup: Client, transactional_id: str,
                  **kwargs) -> TxnProducer:
    """The client's transactional producer, or the setup client's when the client has none
    (kcat): the consume side is then what the scenario checks for this client."""
    try:
        return client.transactional_producer(transactional_id, **kwargs)
    except NotSupportedByClient:
        return setup.transactional_producer(transactional_id, **kwargs)


def _send(producer: TxnProducer, topic: str, messages: Sequence[Message]) -> Written:
    deliveries = producer.produce(topic, messages)
    assert len(deliveries) == len(messages), deliveries
    for d, m in zip(deliveries, messages):
        assert d.offset is not None and d.offset >= 0, f"no offset acknowledged for {m}: {d}"
        assert m.partition is None or d.partition == m.partition, (d, m)
    return list(zip(deliveries, messages))


def _sentinels(setup: Client, topic: str, partitions: int, tag: bytes) -> Written:
    """One plain record per partition after everything else: a read stops there."""
    messages = [Message(b"sentinel-" + tag, partition=p) for p in range(partitions)]
    deliveries = setup.produce(topic, messages, idempotent=False)
    return list(zip(deliveries, messages))


def _assert_records(records: Sequence[Record], expected: Iterable[tuple[Delivery, Message]],
                    what: str) -> None:
    """Per partition, in order: exactly the expected records, each at the offset its
    producer was acknowledged, with its key, value and headers; nothing else."""
    want: dict[int, list[tuple]] = defaultdict(list)
    for d, m in sorted(expected, key=lambda dm: (dm[0].partition, dm[0].offset)):
        want[d.partition].append((d.offset, m.key, m.value, tuple(m.headers)))
    have: dict[int, list[tuple]] = defaultdict(list)
    for r in records:
        have[r.partition].append((r.offset, r.key, r.value, r.headers))
    for p in sorted(set(want) | set(have)):
        if have.get(p, []) != want.get(p, []):
            raise AssertionError(_diff(what, p, have.get(p, []), want.get(p, [])))


def _diff(what: str, p: int, have: list, want: list) -> str:
    lines = [f"{what}, partition {p}: got {len(have)} records, expected {len(want)}"]
    for i in range(max(len(have), len(want))):
        h = have[i] if i < len(have) else "<missing>"
        w = want[i] if i < len(want) else "<none expected>"
        if h != w:
            lines.append(f"  first difference at index {i}: got (offset, key, value, headers) "
                         f"{h}, expected {w}")
            break
    lines.append(f"  got offsets {[x[0] for x in have]}")
    lines.append(f"  expected offsets {[x[0] for x in want]}")
    return "\n".join(lines)


def _read(client: Client, topic: str, n: int, isolation_level: str,
          timeout: float = READ_TIMEOUT_S, **kwargs) -> list[Record]:
    return client.consume(topic, n, isolation_level=isolation_level, timeout=timeout, **kwargs)


def _committed(client: Client, setup: Client, group: str, topic: str,
               partitions: list[int]) -> dict[int, int | None]:
    try:
        return client.committed(group, topic, partitions)
    except NotSupportedByClient:
        return setup.committed(group, topic, partitions)


@contextlib.contextmanager
def _closing(*producers: TxnProducer):
    try:
        yield
    finally:
        for producer in producers:
            with contextlib.suppress(Exception):
                producer.close()


def _txn_id(topic: str, tag: str = "") -> str:
    return unique_name(f"tx-{tag}{topic[:40]}")


def _msgs(tag: str, partitions: Iterable[int], count: int) -> list[Message]:
    return [Message(f"{tag}-{p}-{i}".encode(), f"k{i}".encode(), (("txn", tag.encode()),),
                    partition=p)
            for p in partitions for i in range(count)]


# --------------------------------------------------------------------------- scenarios


def test_txn_commit_visible_to_read_committed(client, setup_client, topic_name):
    make_topic(client, setup_client, topic_name, 1)
    producer = _txn_producer(client, setup_client, _txn_id(topic_name))
    with _closing(producer):
        producer.begin()
        written = _send(producer, topic_name, _msgs("c", [0], 5))
        producer.commit()
    expected = written + _sentinels(setup_client, topic_name, 1, b"commit")
    _assert_records(_read(client, topic_name, len(expected), RC), expected,
                    "read_committed after commit")
    _assert_records(_read(client, topic_name, len(expected), RU), expected,
                    "read_uncommitted after commit")


def test_txn_abort_hidden_from_read_committed(client, setup_client, topic_name):
    make_topic(client, setup_client, topic_name, 1)
    producer = _txn_producer(client, setup_client, _txn_id(topic_name))
    with _closing(producer):
        producer.begin()
        aborted = _send(producer, topic_name, _msgs("a", [0], 4))
        producer.abort()
    sentinel = _sentinels(setup_client, topic_name, 1, b"abort")
    _assert_records(_read(client, topic_name, 1, RC), sentinel,
                    "read_committed after abort (the aborted records must not be delivered)")
    everything = aborted + sentinel
    _assert_records(_read(client, topic_name, len(everything), RU), everything,
                    "read_uncommitted after abort (aborted records are delivered, markers not)")


def test_read_committed_interleaved_transactions(client, setup_client, topic_name):
    """Two producers' transactions interleaved on two partitions, committed and aborted in
    turn: read_committed gets exactly the committed ones, read_uncommitted all of them."""
    make_topic(client, setup_client, topic_name, 2)
    one = _txn_producer(client, setup_client, _txn_id(topic_name, "1-"))
    two = _txn_producer(client, setup_client, _txn_id(topic_name, "2-"))
    committed: Written = []
    aborted: Written = []
    with _closing(one, two):
        one.begin()
        committed += _send(one, topic_name, _msgs("c1", [0, 1], 2))
        two.begin()
        aborted += _send(two, topic_name, _msgs("a1", [0, 1], 2))
        committed += _send(one, topic_name, _msgs("c2", [1, 0], 1))
        two.abort()
        one.commit()
        two.begin()
        committed += _send(two, topic_name, _msgs("c3", [0], 3))
        one.begin()
        aborted += _send(one, topic_name, _msgs("a2", [1, 0], 2))
        two.commit()
        one.abort()
        one.begin()
        committed += _send(one, topic_name, _msgs("c4", [1], 1))
        one.commit()
    sentinels = _sentinels(setup_client, topic_name, 2, b"interleaved")
    visible = committed + sentinels
    _assert_records(_read(client, topic_name, len(visible), RC), visible, "read_committed")
    everything = committed + aborted + sentinels
    _assert_records(_read(client, topic_name, len(everything), RU), everything,
                    "read_uncommitted")


def test_open_transaction_holds_read_committed_at_lso(client, setup_client, topic_name):
    """Records after the first offset of an open transaction (the last stable offset) wait
    for it to end, transactional or not; ListOffsets latest read_committed is that LSO."""
    make_topic(client, setup_client, topic_name, 1)
    before = [(d, m) for d, m in zip(setup_client.produce(
        topic_name, [Message(b"before-%d" % i, partition=0) for i in range(3)],
        idempotent=False), [Message(b"before-%d" % i, partition=0) for i in range(3)])]
    producer = _txn_producer(client, setup_client, _txn_id(topic_name))
    with _closing(producer):
        producer.begin()
        pending = _send(producer, topic_name, _msgs("open", [0], 3))
        lso = pending[0][0].offset
        after_msgs = [Message(b"after-%d" % i, partition=0) for i in range(2)]
        after = list(zip(setup_client.produce(topic_name, after_msgs, idempotent=False),
                         after_msgs))
        high_watermark = after[-1][0].offset + 1
        _assert_records(_read(client, topic_name, len(before) + 1, RC, timeout=QUIET_S),
                        before, "read_committed with a transaction open (stops at the LSO)")
        _assert_records(_read(client, topic_name, len(before) + 3 + 2, RU),
                        before + pending + after, "read_uncommitted with a transaction open")
        with contextlib.suppress(NotSupportedByClient):
            assert client.list_offsets(topic_name, 0, "latest", isolation_level=RC) == lso, (
                f"ListOffsets latest read_committed = LSO {lso}")
            assert client.list_offsets(topic_name, 0, "latest") == high_watermark, (
                f"ListOffsets latest read_uncommitted = high watermark {high_watermark}")
        producer.commit()
    everything = before + pending + after
    _assert_records(_read(client, topic_name, len(everything), RC), everything,
                    "read_committed after the commit")
    with contextlib.suppress(NotSupportedByClient):
        end = client.list_offsets(topic_name, 0, "latest", isolation_level=RC)
        assert end == high_watermark + 1, (
            f"ListOffsets latest read_committed after the commit: {end}, expected "
            f"{high_watermark + 1} (the log end, after the commit marker)")


def test_zombie_producer_is_fenced(client, setup_client, topic_name):
    """A second producer with the same transactional.id fences the first: the zombie's next
    produce or commit fails with PRODUCER_FENCED (or INVALID_PRODUCER_EPOCH) and its open
    transaction is aborted."""
    tid = _txn_id(topic_name)
    zombie = client.transactional_producer(tid)  # kcat: skipped here (no such producer)
    make_topic(client, setup_client, topic_name, 1)
    with _closing(zombie):
        zombie.begin()
        _send(zombie, topic_name, _msgs("zombie", [0], 3))
        successor = client.transactional_producer(tid)  # fences the zombie, aborts its txn
        with _closing(successor):
            with pytest.raises(ClientError) as fenced:
                zombie.produce(topic_name, _msgs("zombie-late", [0], 1))
                zombie.commit()
            assert fenced.value.code in FENCED, (
                f"the zombie failed with {fenced.value} (code {fenced.value.code}), expected "
                "PRODUCER_FENCED (90) or INVALID_PRODUCER_EPOCH (47)")
            successor.begin()
            written = _send(successor, topic_name, _msgs("successor", [0], 2))
            successor.commit()
    expected = written + _sentinels(setup_client, topic_name, 1, b"fenced")
    _assert_records(_read(client, topic_name, len(expected), RC), expected,
                    "read_committed: only the successor's transaction")


def test_transaction_timeout_aborts(client, setup_client, topic_name):
    """A transaction left open past its transaction.timeout.ms is aborted by the broker:
    read_committed consumers move past it and never see it; the producer's commit fails."""
    producer = client.transactional_producer(_txn_id(topic_name),
                                             transaction_timeout_ms=TXN_TIMEOUT_MS)
    make_topic(client, setup_client, topic_name, 1)
    with _closing(producer):
        producer.begin()
        _send(producer, topic_name, _msgs("expires", [0], 3))
        sentinel = _sentinels(setup_client, topic_name, 1, b"timeout")
        # The suite runs trafka with a cleanup interval of 500 ms (brokers.TRAFKA_SUITE_ARGS).
        _assert_records(_read(client, topic_name, 1, RC, timeout=ABORT_WAIT_S), sentinel,
                        "read_committed after the transaction timed out")
        with pytest.raises(ClientError):
            producer.commit()


def test_transaction_misuse_error_codes(client, setup_client, topic_name):
    """transaction.timeout.ms above the broker's transaction.max.timeout.ms is refused at
    init with INVALID_TRANSACTION_TIMEOUT. Committing without begin is the client's own
    error: nothing reaches the broker, and the transactional.id works afterwards."""
    make_topic(client, setup_client, topic_name, 1)
    with pytest.raises(ClientError) as refused:
        producer = client.transactional_producer(
            _txn_id(topic_name, "max-"), transaction_timeout_ms=BROKER_MAX_TXN_TIMEOUT_MS + 1)
        producer.close()
    assert refused.value.code == 50, (
        f"init with transaction.timeout.ms > transaction.max.timeout.ms failed with "
        f"{refused.value} (code {refused.value.code}), expected INVALID_TRANSACTION_TIMEOUT (50)")
    tid = _txn_id(topic_name)
    producer = client.transactional_producer(tid)
    with _closing(producer):
        with pytest.raises(ClientError):
            producer.commit()  # no begin(): refused by the client library itself
    producer = client.transactional_producer(tid)
    with _closing(producer):
        producer.begin()
        written = _send(producer, topic_name, _msgs("after-misuse", [0], 2))
        producer.commit()
    expected = written + _sentinels(setup_client, topic_name, 1, b"misuse")
    _assert_records(_read(client, topic_name, len(expected), RC), expected, "read_committed")


def test_consume_transform_produce_exactly_once_across_broker_kill(
        client, setup_client, fresh_broker, topic_name, group_name):
    """Read input (read_committed) from the group's committed offsets, write the transformed
    records and the group's new offsets in one transaction; SIGKILL the broker in the middle
    of a transaction, start it again, and carry on with a new producer of the same
    transactional.id. Every input record must be transformed exactly once, and the group's
    committed offsets must be the input's end."""
    partitions = [0, 1]
    per_partition = 8
    source, sink = topic_name + "-in", topic_name + "-out"
    make_topic(client, setup_client, source, len(partitions))
    make_topic(client, setup_client, sink, len(partitions))
    inputs = [Message(b"in-%d-%d" % (p, i), b"k%d" % i, partition=p)
              for p in partitions for i in range(per_partition)]
    setup_client.produce(source, inputs, idempotent=False)
    tid = _txn_id(topic_name)

    def transform(r: Record) -> Message:
        return Message(b"out:" + r.value.upper(), r.key, (("from", b"%d" % r.offset),),
                       partition=r.partition)

    def one_batch(producer: TxnProducer, per_partition_limit: int, kill_before_commit: bool
                  ) -> int:
        positions = _committed(client, setup_client, group_name, source, partitions)
        done = 0
        producer.begin()
        offsets = {}
        for p in partitions:
            start = positions.get(p) or 0
            if start >= per_partition:
                continue
            wanted = min(per_partition_limit, per_partition - start)
            records = _read(client, source, wanted, RC, start={p: start})
            assert [r.offset for r in records] == list(range(start, start + wanted)), (
                f"input partition {p} from {start}: offsets {[r.offset for r in records]}")
            _send(producer, sink, [transform(r) for r in records])
            offsets[(source, p)] = records[-1].offset + 1
            done += len(records)
        if offsets:
            producer.send_offsets(group_name, offsets)
        if kill_before_commit:
            fresh_broker.restart(kill=True)
            return 0
        producer.commit()
        # EndTxn is answered before the markers are written: the group's offsets are stable
        # (what OffsetFetch answers) a moment later. An application's consumer asks with
        # require_stable; the adapters' committed() does not, so wait for them here.
        want = {p: o for (_t, p), o in offsets.items()}
        try:
            wait_until(lambda: all(_committed(client, setup_client, group_name, source,
                                              partitions).get(p) == o
                                   for p, o in want.items()),
                       10, 0.1, "the transaction's offsets committed")
        except TimeoutError as exc:
            raise AssertionError(
                f"committed offsets {_committed(client, setup_client, group_name, source, partitions)}"
                f", expected {want} after the transaction committed") from exc
        return done

    producer = _txn_producer(client, setup_client, tid)
    with _closing(producer):
        one_batch(producer, 3, kill_before_commit=False)
        one_batch(producer, 2, kill_before_commit=True)
    client.close()
    setup_client.close()
    for topic in (source, sink):
        wait_metadata(setup_client, topic, lambda t: t.error_code == 0
                      and sorted(t.partitions) == partitions, timeout=10,
                      what=f"{topic} after the broker was killed and started again")
    # A new instance of the application: initTransactions aborts the killed transaction.
    producer = _txn_producer(client, setup_client, tid)
    with _closing(producer):
        deadline = time.monotonic() + 60
        while one_batch(producer, 3, kill_before_commit=False):
            assert time.monotonic() < deadline, "the input was not consumed within 60 s"
    assert _committed(client, setup_client, group_name, source, partitions) == {
        p: per_partition for p in partitions}, "the group's committed offsets = the input's end"
    sentinels = _sentinels(setup_client, sink, len(partitions), b"eos")
    got = _read(client, sink, len(inputs) + len(sentinels), RC, timeout=30)
    by_partition: dict[int, list[Record]] = defaultdict(list)
    for r in got:
        by_partition[r.partition].append(r)
    for p in partitions:
        values = [(r.key, r.value, r.headers) for r in by_partition[p]]
        want = [(b"k%d" % i, b"out:IN-%d-%d" % (p, i), (("from", b"%d" % i),))
                for i in range(per_partition)] + [(None, b"sentinel-eos", ())]
        assert values == want, (
            f"output partition {p}: every input record transformed exactly once, in order\n"
            f"  got      {values}\n  expected {want}")
