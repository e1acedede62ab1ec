"""`trafka topic ...` against a real broker process: the whole life of a topic (create,
list, describe, alter-config, add-partitions, produce, trim, delete), each step checked
through another command's output, and errors as one stderr line with a non-zero exit."""

from __future__ import annotations

import uuid

import pytest

from tests.tools.clikit import trafka

pytestmark = pytest.mark.timeout(300)


def unique(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


def describe(broker, name: str) -> dict:
    return trafka("topic", "describe", name, "--format", "json", bootstrap=broker.bootstrap).json()


def test_topic_lifecycle(broker):
    name = unique("life")
    b = broker.bootstrap
    assert trafka("topic", "create", name, "-p", "3", "-r", "1", "-c", "retention.ms=123456",
                  bootstrap=b).ok().out == f"created {name}\n"

    listed = trafka("topic", "list", bootstrap=b).ok().out.splitlines()
    assert listed[0].split() == ["NAME", "PARTITIONS", "REPLICAS"]
    assert [name, "3", "1"] in [line.split() for line in listed]
    assert {"name": name, "partitions": 3, "replicas": 1} in trafka("topic", "list", "--format", "json",
                                                                    bootstrap=b).json()

    info = describe(broker, name)
    assert [p["partition"] for p in info["partitions"]] == [0, 1, 2]
    assert all(p["leader"] == 1 and p["replicas"] == [1] and p["isr"] == [1] for p in info["partitions"])
    assert all(p["log_start_offset"] == 0 and p["high_watermark"] == 0 for p in info["partitions"])
    assert info["configs"] == {"retention.ms": "123456"}  # non-default settings only

    trafka("topic", "alter-config", name, "--set", "retention.bytes=1048576", "--delete", "retention.ms",
           bootstrap=b).ok()
    assert describe(broker, name)["configs"] == {"retention.bytes": "1048576"}

    assert trafka("topic", "add-partitions", name, "--num", "5", bootstrap=b).ok().out == f"{name} now has 5 partitions\n"
    assert len(describe(broker, name)["partitions"]) == 5

    trafka("topic", "produce", name, "-p", "4", stdin="a\nb\nc\nd\n", bootstrap=b).ok()
    part4 = describe(broker, name)["partitions"][4]
    assert (part4["log_start_offset"], part4["high_watermark"]) == (0, 4)

    trimmed = trafka("topic", "trim", name, "--offset", "3", "--partition", "4", "--format", "json", bootstrap=b)
    assert trimmed.json()["partitions"] == [{"partition": 4, "log_start_offset": 3}]
    part4 = describe(broker, name)["partitions"][4]
    assert (part4["log_start_offset"], part4["high_watermark"]) == (3, 4)
    assert trafka("topic", "consume", name, "-p", "4", bootstrap=b).ok().out == "d\n"

    text = trafka("topic", "describe", name, bootstrap=b).ok().out
    assert "PARTITION  LEADER  REPLICAS  ISR  LOG-START-OFFSET  HIGH-WATERMARK" in text
    assert "retention.bytes  1048576" in text

    assert trafka("topic", "delete", name, bootstrap=b).ok().out == f"deleted {name}\n"
    assert name not in trafka("topic", "list", bootstrap=b).ok().out
    trafka("topic", "describe", name, bootstrap=b).one_line_error("trafka topic describe: error:",
                                                                  "UNKNOWN_TOPIC_OR_PART")


def test_produce_with_keys_and_headers_then_consume_with_a_template(broker):
    name = unique("records")
    b = broker.bootstrap
    trafka("topic", "create", name, "-p", "2", bootstrap=b).ok()
    lines = "k1:hello\nk2:world: with a colon\nno key here\n"
    produced = trafka("topic", "produce", name, "-k", ":", "-H", "app=cli", "-H", "trace=42", "-p", "1",
                      "-z", "gzip", stdin=lines, bootstrap=b)
    assert produced.ok().err == f"produced 3 records to {name}\n"

    out = trafka("topic", "consume", name, "-f", r"%t|%p|%o|%k|%v|%h\n", bootstrap=b).ok().out
    assert out == (f"{name}|1|0|k1|hello|app=cli,trace=42\n"
                   f"{name}|1|1|k2|world: with a colon|app=cli,trace=42\n"
                   f"{name}|1|2||no key here|app=cli,trace=42\n")

    # -n stops early; -o -N starts N before the end; %T is the record's timestamp in ms
    assert trafka("topic", "consume", name, "-n", "1", "-f", r"%v\n", bootstrap=b).ok().out == "hello\n"
    last = trafka("topic", "consume", name, "-o", "-1", "-f", r"%o %T\n", bootstrap=b).ok().out.split()
    assert last[0] == "2" and int(last[1]) > 1_600_000_000_000
    assert trafka("topic", "consume", name, "-o", "end", bootstrap=b).ok().out == ""

    records = [__import__("json").loads(line) for line in
               trafka("topic", "consume", name, "-f", "json", "-o", "1", bootstrap=b).ok().out.splitlines()]
    assert [(r["partition"], r["offset"], r["key"], r["value"], r["headers"]) for r in records] == [
        (1, 1, "k2", "world: with a colon", [["app", "cli"], ["trace", "42"]]),
        (1, 2, None, "no key here", [["app", "cli"], ["trace", "42"]])]


def test_errors_are_one_line_with_a_non_zero_exit(broker, tmp_path):
    b = broker.bootstrap
    name = unique("errors")
    trafka("topic", "consume", unique("missing"), bootstrap=b).one_line_error("UNKNOWN_TOPIC_OR_PART")
    trafka("topic", "create", name, bootstrap=b).ok()
    again = trafka("topic", "create", name, bootstrap=b)
    assert again.one_line_error("TOPIC_ALREADY_EXISTS", name) and again.code == 1
    assert trafka("topic", "add-partitions", name, "--num", "1", bootstrap=b).one_line_error("INVALID_PARTITIONS")

    bad = trafka("topic", "create", name, "-p", "many", bootstrap=b)
    assert bad.code == 2 and bad.one_line_error("argument -p/--partitions", "invalid int value")
    assert trafka("topic", "crate", name, bootstrap=b).one_line_error("invalid choice: 'crate'")
    assert trafka("topic", "list", "--bogus", bootstrap=b).one_line_error("unrecognized arguments: --bogus")
    assert trafka("topic", "alter-config", name, bootstrap=b).one_line_error("nothing to change")
    assert trafka("topic", "consume", name, "-f", "%x", bootstrap=b).one_line_error("unknown template field %x")
    assert trafka("topic", "create", unique("c"), "-c", "novalue", bootstrap=b).one_line_error("KEY=VALUE")

    props = tmp_path / "client.properties"
    props.write_text("security.protocol=SSL\nssl.truststore.location=/etc/kafka/truststore.jks\n")
    assert trafka("topic", "list", "--command-config", str(props), bootstrap=b).one_line_error(
        "ssl.truststore.location is not supported", "ssl.ca.location")
    assert trafka("topic", "list", "--command-config", str(tmp_path / "none"), bootstrap=b).one_line_error(
        "cannot read --command-config")


def test_a_broker_that_does_not_answer(broker):
    from tests.brokerproc import free_port

    nobody = f"127.0.0.1:{free_port()}"
    trafka("topic", "list", "--timeout", "2", bootstrap=nobody).one_line_error("trafka topic list: error:",
                                                                                "TRANSPORT")
    trafka("cluster", "health", "--timeout", "2", bootstrap=nobody).one_line_error("TRANSPORT")


def test_bootstrap_from_the_environment(broker):
    """No -b: TRAFKA_BOOTSTRAP names the broker."""
    name = unique("env")
    trafka("topic", "create", name, bootstrap=broker.bootstrap).ok()
    listed = trafka("topic", "list", env={"TRAFKA_BOOTSTRAP": broker.bootstrap}).ok()
    assert name in listed.out


def test_consume_writes_binary_keys_and_values_as_stored(broker):
    """A template writes keys, values and header values as their bytes, as kcat does: a binary
    payload piped to a file is the payload (they were decoded as UTF-8 with replacement before)."""
    import os
    import subprocess
    import sys

    from confluent_kafka import Producer

    from tests.brokerproc import REPO

    name = unique("binary")
    trafka("topic", "create", name, bootstrap=broker.bootstrap).ok()
    value = bytes(range(256))
    producer = Producer({"bootstrap.servers": broker.bootstrap})
    producer.produce(name, value=value, key=b"\xff\x00k", headers=[("h", b"\x80\x81")])
    assert producer.flush(30) == 0
    proc = subprocess.run([sys.executable, "-m", "server", "topic", "consume", name, "-f", r"%k|%v|%h\n",
                           "-b", broker.bootstrap], capture_output=True, timeout=90, cwd=REPO,
                          env=dict(os.environ, PYTHONPATH=str(REPO)))
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout == b"\xff\x00k|" + value + b"|h=\x80\x81\n"


def test_an_unreachable_bootstrap_fails_fast_naming_what_was_tried(broker):
    """librdkafka retried for the whole --timeout (30 s) and ended with "Failed to get
    metadata: Local: Broker transport failure", naming no address. Now a few seconds, one
    line naming each address tried and why: refused, or a port that accepts but is no Kafka."""
    import socket
    import threading
    import time

    from tests.brokerproc import free_port

    refused = f"127.0.0.1:{free_port()}"
    started = time.monotonic()
    line = trafka("topic", "list", bootstrap=refused).one_line_error("TRANSPORT", refused, "Connection refused")
    assert time.monotonic() - started < 15, line

    with socket.socket() as server:  # accepts, then hangs up without a word (an HTTP server would too)
        server.bind(("127.0.0.1", 0))
        server.listen()
        mute = f"127.0.0.1:{server.getsockname()[1]}"

        def hang_up() -> None:
            for _ in range(2):
                conn, _addr = server.accept()
                conn.close()

        threading.Thread(target=hang_up, daemon=True).start()
        started = time.monotonic()
        trafka("topic", "consume", "t", bootstrap=f"{mute},{refused}").one_line_error(
            "TRANSPORT", f"{mute} (accepts connections but answered no Kafka ApiVersions request)", refused)
        assert time.monotonic() - started < 15
    # one live broker among the bootstrap servers is enough
    assert trafka("topic", "list", bootstrap=f"{refused},{broker.bootstrap}").ok()


def test_consume_from_an_offset_past_the_end_starts_at_the_end(broker):
    """`-o 999999` silently read from offset 0 (librdkafka's OFFSET_OUT_OF_RANGE reset to
    earliest). As Kafka's console consumer (out of range: latest) and rpk (the nearer end):
    it starts at the end, says so on stderr, and reads only what comes after."""
    import subprocess
    import time

    from tests.tools.clikit import popen

    name = unique("past")
    b = broker.bootstrap
    trafka("topic", "create", name, bootstrap=b).ok()
    trafka("topic", "produce", name, stdin="a\nb\nc\n", bootstrap=b).ok()
    past = trafka("topic", "consume", name, "-o", "999999", bootstrap=b).ok()
    assert past.out == ""
    assert f"{name} partition 0: offset 999999 is past the end (offsets 0..3): starting at 3" in past.err
    assert trafka("topic", "consume", name, "-o", "1", bootstrap=b).ok().out == "b\nc\n"

    follower = popen("topic", "consume", name, "-o", "999999", "--follow", "-n", "1", bootstrap=b)
    try:
        deadline = time.monotonic() + 30
        while "starting at 3" not in (line := follower.stderr.readline()) and time.monotonic() < deadline:
            assert line or follower.poll() is None
        trafka("topic", "produce", name, stdin="d\n", bootstrap=b).ok()
        out, _err = follower.communicate(timeout=60)
    except subprocess.TimeoutExpired:
        follower.kill()
        raise
    assert out == "d\n"
