"""The state both brokers get before the comparison: the same topics, records, groups and
transactions, made by the same requests in the same order (each compared like any case).

- pd-a: 3 partitions holding 5, 2 and 0 records (one batch each);
- pd-b: 1 partition with topic configs, 3 records in 3 batches;
- pd-t: 1 partition with one committed transaction (2 records and its marker) and one
  transaction left open (1 record), so read_committed stops before it;
- pd-ac: what the config cases alter;
- pd-g: a group with committed offsets and no members; pd-stable: a classic group with one
  member, Stable.
"""

from __future__ import annotations

from compat_tests.protocol_diff import flows
from compat_tests.protocol_diff.model import Case

TOPIC_A = "pd-a"
TOPIC_B = "pd-b"
TOPIC_TXN = "pd-t"
GROUP = "pd-g"
STABLE_GROUP = "pd-stable"
TXN_DONE = "pd-txn-done"
TXN_OPEN = "pd-txn-open"
# Long enough that the coordinator does not abort the open transaction during a run.
OPEN_TXN_TIMEOUT_MS = 600_000


def cases() -> list[Case]:
    steps: list[Case] = []
    steps += flows.topic_with_records(TOPIC_A, 3, (5, 2, 0))
    steps.append(flows.create_topic(TOPIC_B, 1, {"retention.ms": "86400000", "max.message.bytes": "500000"}))
    for first in range(3):
        steps.append(flows.produce(TOPIC_B, 0, 1, first=first, tag="b"))
    steps.append(flows.create_topic(TOPIC_TXN, 1))
    steps.append(flows.create_topic("pd-ac", 1))
    steps.append(flows.simple_commit(GROUP, {(TOPIC_A, 0): 3, (TOPIC_A, 1): 1}))
    steps += flows.classic_member(STABLE_GROUP)
    # A committed transaction on pd-t ...
    steps.append(flows.init_producer(TXN_DONE, TXN_DONE))
    steps.append(flows.add_partitions(TXN_DONE, {TOPIC_TXN: [0]}))
    steps.append(flows.txn_produce(TXN_DONE, TOPIC_TXN, 0, 2))
    steps.append(flows.end_txn(TXN_DONE, commit=True))
    # ... and an open one after it.
    open_init = flows.init_producer(TXN_OPEN, TXN_OPEN)
    open_init.body = lambda c: flows.init_producer_body(TXN_OPEN, OPEN_TXN_TIMEOUT_MS)
    steps.append(open_init)
    steps.append(flows.add_partitions(TXN_OPEN, {TOPIC_TXN: [0]}))
    steps.append(flows.txn_produce(TXN_OPEN, TOPIC_TXN, 0, 1))
    return steps
