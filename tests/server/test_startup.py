"""`trafka serve` on a host shared with other brokers and programs, and its start-up
failures: a default HTTP port that is taken never stops a broker; what stops one (a taken
Kafka port, a data directory that is a file or held by another broker, a ZooKeeper that does
not answer, a malformed setting) is one line on stderr naming the setting, its value and the
cause, with a non-zero exit status."""

from __future__ import annotations

import os
import re
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.brokerproc import REPO, free_port

pytestmark = pytest.mark.timeout(120)

HTTP_OFF = ("--set", "http.listeners=", "--set", "schema.registry.listeners=", "--set", "rest.proxy.listeners=")


def user_env() -> dict[str, str]:
    """A user's shell: no TRAFKA_* settings of the test harness."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("TRAFKA_")}
    env["PYTHONPATH"] = str(REPO)
    return env


def serve(*args: str, timeout: float = 60) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "server", "serve", *args], capture_output=True, text=True,
                          timeout=timeout, cwd=REPO, env=user_env(), stdin=subprocess.DEVNULL)


def start(log: Path, *args: str) -> subprocess.Popen:
    with open(log, "wb") as out:
        return subprocess.Popen([sys.executable, "-m", "server", "serve", *args], stdout=out,
                                stderr=subprocess.STDOUT, cwd=REPO, env=user_env(), stdin=subprocess.DEVNULL)


def wait_listening(proc: subprocess.Popen, log: Path, timeout: float = 60) -> str:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        text = log.read_text(errors="replace")
        if "trafka: listening on" in text:
            return text
        assert proc.poll() is None, f"exited with {proc.returncode}:\n{text}"
        time.sleep(0.1)
    raise AssertionError(f"not listening within {timeout} s:\n{log.read_text()}")


def stop(proc: subprocess.Popen) -> int:
    if proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
    try:
        return proc.wait(30)
    except subprocess.TimeoutExpired:
        proc.kill()
        return proc.wait()


def one_line(done: subprocess.CompletedProcess) -> str:
    """The error a failed start printed: exactly one `trafka: ` line on stderr, no traceback."""
    assert done.returncode != 0, done.stderr
    assert "Traceback" not in done.stderr and "ExceptionGroup" not in done.stderr, done.stderr
    errors = [line for line in done.stderr.splitlines() if line.startswith("trafka: ")]
    assert len(errors) == 1, done.stderr
    return errors[0]


def test_two_brokers_differing_only_in_listen_and_data_dir_run_side_by_side(tmp_path):
    """Every broker's HTTP sides default to 8080-8082: the second broker on a host (or any
    broker where another program holds 8080) leaves what is taken off, with a warning, and
    serves Kafka. Before, the second one exited: `cannot listen for HTTP on 127.0.0.1:8080`."""
    first = start(tmp_path / "first.log", "--listen", f"127.0.0.1:{free_port()}", "--data-dir", str(tmp_path / "a"))
    second = None
    try:
        wait_listening(first, tmp_path / "first.log")
        second = start(tmp_path / "second.log", "--listen", f"127.0.0.1:{free_port()}",
                       "--data-dir", str(tmp_path / "b"))
        text = wait_listening(second, tmp_path / "second.log")
        time.sleep(1)
        assert first.poll() is None and second.poll() is None
        # 8080 is the first broker's (or another program's): the second says so in one line
        assert re.search(r"WARNING trafka: http\.listeners: the default 127\.0\.0\.1:8080 cannot be bound", text), text
        assert "Traceback" not in text
    finally:
        codes = [stop(p) for p in (second, first) if p is not None]
    assert codes == [0, 0]


def test_a_launchers_default_port_taken_is_left_off_but_a_set_one_stops_the_start(tmp_path):
    """`--default` (what `trafka dev cluster` gives each broker) keeps a default's standing;
    the same address with --set is the user's and stops the start in one line."""
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        address = f"127.0.0.1:{taken.getsockname()[1]}"
        log = tmp_path / "broker.log"
        proc = start(log, "--listen", f"127.0.0.1:{free_port()}", "--data-dir", str(tmp_path / "a"),
                     "--set", "http.listeners=", "--set", "rest.proxy.listeners=",
                     "--default", f"schema.registry.listeners={address}")
        try:
            text = wait_listening(proc, log)
            assert f"schema.registry.listeners: the default {address} cannot be bound" in text
            assert "schema registry on" not in text
        finally:
            assert stop(proc) == 0
        done = serve("--listen", f"127.0.0.1:{free_port()}", "--data-dir", str(tmp_path / "b"),
                     "--set", "http.listeners=", "--set", "rest.proxy.listeners=",
                     "--set", f"schema.registry.listeners={address}")
        assert done.returncode == 1
        assert f"cannot listen on {address} (schema.registry.listeners)" in one_line(done)


def test_a_taken_kafka_port_is_one_line_naming_listeners(tmp_path):
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        done = serve("--listen", f"127.0.0.1:{port}", "--data-dir", str(tmp_path / "data"), *HTTP_OFF)
    assert done.returncode == 1
    line = one_line(done)
    assert line.startswith(f"trafka: listeners=127.0.0.1:{port}: cannot listen on 127.0.0.1:{port}: "), line
    assert "Address already in use" in line


def test_a_listen_address_not_of_this_host_is_one_line(tmp_path):
    done = serve("--listen", "203.0.113.7:9092", "--data-dir", str(tmp_path / "data"), *HTTP_OFF)
    assert one_line(done).startswith("trafka: listeners=203.0.113.7:9092: cannot listen on 203.0.113.7:9092: ")


def test_a_data_directory_that_is_a_file_is_one_line(tmp_path):
    afile = tmp_path / "data"
    afile.write_text("not a directory")
    done = serve("--listen", f"127.0.0.1:{free_port()}", "--data-dir", str(afile), *HTTP_OFF)
    assert done.returncode == 1
    assert one_line(done) == f"trafka: log.dirs={afile}: not a directory (a file of that name is in the way)"
    done = serve("--listen", f"127.0.0.1:{free_port()}", "--data-dir", str(afile / "below"), *HTTP_OFF)
    assert one_line(done) == f"trafka: log.dirs={afile / 'below'}: cannot create the directory: Not a directory"


def test_a_data_directory_another_broker_holds_is_one_line(tmp_path):
    log = tmp_path / "first.log"
    first = start(log, "--listen", f"127.0.0.1:{free_port()}", "--data-dir", str(tmp_path / "data"), *HTTP_OFF)
    try:
        wait_listening(first, log)
        done = serve("--listen", f"127.0.0.1:{free_port()}", "--data-dir", str(tmp_path / "data"), *HTTP_OFF)
        assert done.returncode == 1
        assert one_line(done).startswith(f"trafka: log.dirs={tmp_path / 'data'}: in use by another broker process")
    finally:
        assert stop(first) == 0


def test_a_zookeeper_that_does_not_answer_is_one_line(tmp_path):
    done = serve("--listen", f"127.0.0.1:{free_port()}", "--data-dir", str(tmp_path / "data"), *HTTP_OFF,
                 "--set", "zookeeper.connect=127.0.0.1:1/trafka", "--set", "zookeeper.session.timeout.ms=2000")
    assert done.returncode == 1
    assert one_line(done).startswith("trafka: zookeeper.connect=127.0.0.1:1/trafka: "), done.stderr


def test_a_malformed_zookeeper_connect_is_a_configuration_error(tmp_path):
    done = serve("--listen", f"127.0.0.1:{free_port()}", "--data-dir", str(tmp_path / "data"), *HTTP_OFF,
                 "--set", "zookeeper.connect=127.0.0.1:2181:2181")
    assert done.returncode == 2
    assert one_line(done) == ("trafka: configuration error: zookeeper.connect='127.0.0.1:2181:2181': "
                              "must be HOST:PORT[,HOST:PORT...][/chroot]")


def test_an_unknown_flag_of_serve_shows_serves_usage():
    done = serve("--unknown-flag")
    assert done.returncode == 2
    assert done.stderr.startswith("usage: trafka serve "), done.stderr
    assert done.stderr.rstrip().endswith("trafka serve: error: unrecognized arguments: --unknown-flag")


def test_advertising_the_meta_address_is_a_configuration_error(tmp_path):
    """Kafka refuses advertised.listeners on 0.0.0.0 at start-up: a client told to connect
    there cannot. (A listener on 0.0.0.0 with nothing advertised still advertises 127.0.0.1.)"""
    done = serve("--listen", f"127.0.0.1:{free_port()}", "--advertised", "0.0.0.0:9092",
                 "--data-dir", str(tmp_path / "data"), *HTTP_OFF)
    assert done.returncode == 2
    assert "advertised.listeners=0.0.0.0:9092: cannot advertise the non-routable meta-address 0.0.0.0" \
        in one_line(done)
