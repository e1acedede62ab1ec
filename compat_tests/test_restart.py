"""Broker restart: what was acknowledged before must be there after (own broker process).

Adapters drop their cached admin connections after the restart (`close()`): the scenarios
are about the broker's data, not about how each admin client reconnects.
"""

from __future__ import annotations

import pytest

from compat_tests.clients.base import Message
from compat_tests.helpers import assert_exact, make_topic, wait_metadata

pytestmark = pytest.mark.timeout(150)


def test_restart_keeps_acked_data(client, setup_client, fresh_broker, topic_name):
    make_topic(client, setup_client, topic_name, 3, {"retention.ms": "86400000"})
    messages = [Message(b"durable-%d-%d" % (p, i), b"k%d" % i, partition=p)
                for p in range(3) for i in range(10)]
    client.produce(topic_name, messages, acks="all")
    fresh_broker.restart()
    client.close()
    setup_client.close()
    wait_metadata(setup_client, topic_name,
                  lambda t: t.error_code == 0 and sorted(t.partitions) == [0, 1, 2],
                  timeout=8, what="the topic after restart")
    records = client.consume(topic_name, len(messages), timeout=30)
    assert_exact(records, {p: messages[p * 10:(p + 1) * 10] for p in range(3)})
    # and the log continues where it was
    more = setup_client.produce(topic_name, [Message(b"after", partition=0)])
    assert more[0].offset == 10


def test_committed_offsets_survive_broker_restart(client, setup_client, fresh_broker,
                                                  topic_name, group_name):
    make_topic(client, setup_client, topic_name, 1)
    messages = [Message(b"r%d" % i, partition=0) for i in range(10)]
    setup_client.produce(topic_name, messages, acks="all")
    assert_exact(client.consume(topic_name, 4, group=group_name), {0: messages[:4]})
    fresh_broker.restart()
    client.close()
    setup_client.close()
    wait_metadata(setup_client, topic_name, lambda t: t.error_code == 0 and 0 in t.partitions,
                  timeout=8, what="the topic after restart")
    assert_exact(client.consume(topic_name, 6, group=group_name, timeout=30),
                 {0: messages[4:]}, {0: 4})
