"""The protocol-level differential: Apache Kafka and Trafka sent the same requests, their
answers compared field by field.

For every API key and version both brokers advertise and Trafka's protocol schemas describe
(wire/: Kafka 3.9.2's JSON schemas), a fresh Kafka and a fresh Trafka get, in the same
order: a fixture (fixture.py: topics with known records, groups, transactions), then per
(API, version) the hand-written valid requests of cases.py and the hostile variants
hostile.py generates from the schema (unknown, empty, null and oversized names, bad
partitions, offsets past the end, wrong epochs, duplicated and 1000-fold arrays, corrupt
records), and per API a version above and one below what either serves. Requests and
answers go through wire/'s codecs (client.py). Answers are normalised where two correct
brokers must differ (normalise.py: ids, ports, clocks, each rule with its reason) and
compared (compare.py); what remains is a Trafka bug or an allow-list entry with its reason
(allowlist.py). report.py writes compat_tests/protocol_differences.md and .json.

    python -m compat_tests.protocol_diff                       # Kafka 4.x vs Trafka
    python -m compat_tests.protocol_diff --reference kafka-3.9 # the versions Kafka 4.0 removed
    python -m pytest compat_tests/test_protocol_diff.py        # what CI runs (fails on open differences)

Why here: it is part of the compatibility suite (it starts the suite's brokers with the
suite's settings, compat_tests/brokers.py), beside the scenario-level comparison, and runs
with it in CI.
"""
