"""The server over an in-memory trio stream: a real Broker on a temporary data dir, served
by `Server.serve_stream` with no socket, answering ApiVersions, Metadata, Produce and a
large Fetch (≥ 64 KiB, so the response carries segment regions, read with pread on this
path) — each response decoded with wire's client-side helpers. The same over loopback
TCP covers the SocketStream path (sendfile after MSG_MORE).

Also: the connection's Session (client id, software, API versions used), that regions are
released exactly once (every segment pin given back, none twice) — sent, dropped by an
encode error, or left when the peer goes away — and how protocol errors close a
connection: a peer's bad frame with a warning, our own unencodable response with an
error and its traceback.
"""

from __future__ import annotations

import logging
import struct
import types

import pytest
import trio
import trio.testing

from server.broker import Broker
from server.config import load_config
from server.context import RequestContext
from server.handlers import HANDLERS
from server.handlers import fetch as fetch_handler
from server.network import Server
from server.regions import FileRegion
from server.session import Session
from wire import ApiKey, ErrorCode, decode_response, encode_request, encode_response_parts
from wire.records import Record, build_batch, iter_headers, iter_records

TOPIC = "stream-served"
VALUE = 1000
BATCHES = 40  # 40 batches of 10 records of 1000 B: ~400 KB, well past the 64 KiB region threshold


@pytest.fixture
def broker(tmp_path):
    broker = Broker(load_config(overrides={"log.dirs": str(tmp_path / "data"), "listeners": "127.0.0.1:9092"},
                                environ={}))
    broker.open()
    broker.create_topic(TOPIC, 1)
    yield broker
    broker.close()


def _pins(broker: Broker) -> int:
    """Pins held on the topic's segments: 0 when every region was released exactly once."""
    return sum(segment._pins for segment in broker.logs.log(TOPIC, 0)._segments)


class _Client:
    """The client end of a memory stream: framed requests out, framed responses in."""

    def __init__(self, stream: trio.abc.Stream) -> None:
        self.stream = stream
        self.buffer = bytearray()
        self.correlation = 0

    async def _exactly(self, n: int) -> bytes:
        while len(self.buffer) < n:
            data = await self.stream.receive_some(1 << 20)
            if not data:
                raise EOFError(f"stream closed with {len(self.buffer)} of {n} bytes")
            self.buffer += data
        out = bytes(self.buffer[:n])
        del self.buffer[:n]
        return out

    async def send(self, api_key: int, version: int, body: dict, client_id: str = "stream-test") -> int:
        self.correlation += 1
        await self.stream.send_all(encode_request(api_key, version, self.correlation, body, client_id=client_id))
        return self.correlation

    async def receive(self, api_key: int, version: int, correlation: int) -> dict:
        size = struct.unpack(">i", await self._exactly(4))[0]
        got, body = decode_response(api_key, version, await self._exactly(size))
        assert got == correlation
        return body

    async def call(self, api_key: int, version: int, body: dict, **kw) -> dict:
        return await self.receive(api_key, version, await self.send(api_key, version, body, **kw))

    async def closed_by_server(self) -> bool:
        with trio.fail_after(5):
            while True:
                if not await self.stream.receive_some(65536):
                    return True


def _produce_body(batch: bytes) -> dict:
    return {"transactional_id": None, "acks": -1, "timeout_ms": 10000,
            "topic_data": [{"name": TOPIC, "partition_data": [{"index": 0, "records": batch}]}]}


def _fetch_body(offset: int = 0) -> dict:
    return {"replica_id": -1, "max_wait_ms": 100, "min_bytes": 1, "max_bytes": 50 << 20, "isolation_level": 0,
            "session_id": 0, "session_epoch": -1,
            "topics": [{"topic": TOPIC, "partitions": [{"partition": 0, "fetch_offset": offset,
                                                         "log_start_offset": -1, "partition_max_bytes": 1 << 20,
                                                         "current_leader_epoch": -1}]}],
            "forgotten_topics_data": [], "rack_id": ""}


def _batch(first: int) -> bytes:
    return bytes(build_batch([Record(i, 1_700_000_000_000, None, (first + i).to_bytes(8, "big") + b"v" * (VALUE - 8))
                              for i in range(10)]))


async def _serve(broker: Broker, scenario) -> Session:
    """Run `scenario(client)` against a Server serving the other end of a memory stream."""
    server = Server(broker)
    client_end, server_end = trio.testing.memory_stream_pair()
    result = {}

    async def serve():
        result["session"] = await server.serve_stream(server_end, "192.0.2.7", 40123)

    with trio.fail_after(30):
        async with trio.open_nursery() as nursery:
            nursery.start_soon(serve)
            await scenario(_Client(client_end))
            await client_end.aclose()
    return result["session"]


@pytest.mark.parametrize("fetch_version", [11, 12])
def test_api_versions_metadata_produce_and_a_large_fetch_over_a_memory_stream(broker, fetch_version):
    async def scenario(client: _Client):
        versions = await client.call(ApiKey.API_VERSIONS, 3, {"client_software_name": "trafka-tests",
                                                              "client_software_version": "1.2.3"})
        assert versions["error_code"] == ErrorCode.NONE
        assert {k["api_key"] for k in versions["api_keys"]} >= {ApiKey.PRODUCE, ApiKey.FETCH, ApiKey.METADATA}

        metadata = await client.call(ApiKey.METADATA, 12, {"topics": [{"name": TOPIC, "topic_id": None}],
                                                           "allow_auto_topic_creation": False,
                                                           "include_topic_authorized_operations": False})
        (topic,) = metadata["topics"]
        assert topic["name"] == TOPIC and topic["error_code"] == ErrorCode.NONE
        assert [p["partition_index"] for p in topic["partitions"]] == [0]

        # Pipelined produce: every request sent before any answer is read.
        correlations = [await client.send(ApiKey.PRODUCE, 9, _produce_body(_batch(10 * i)), client_id="producer")
                        for i in range(BATCHES)]
        for i, correlation in enumerate(correlations):
            produced = await client.receive(ApiKey.PRODUCE, 9, correlation)
            part = produced["responses"][0]["partition_responses"][0]
            assert part["error_code"] == ErrorCode.NONE and part["base_offset"] == 10 * i

        fetched = await client.call(ApiKey.FETCH, fetch_version, _fetch_body())
        part = fetched["responses"][0]["partitions"][0]
        assert part["error_code"] == ErrorCode.NONE and part["high_watermark"] == 10 * BATCHES
        records = bytes(part["records"])
        assert len(records) >= fetch_handler.REGION_MIN_BYTES
        values = [int.from_bytes(r.value[:8], "big") for pos, h in iter_headers(records)  # CRC-checked
                  for r in iter_records(memoryview(records)[pos:pos + h.size])]
        assert values == list(range(10 * BATCHES))
        assert _pins(broker) == 0

    session = trio.run(_serve, broker, scenario)
    assert (session.host, session.port) == ("192.0.2.7", 40123)
    assert session.client_software_name == "trafka-tests" and session.client_software_version == "1.2.3"
    assert session.client_id == "stream-test"  # the last one seen
    assert session.api_versions == {ApiKey.API_VERSIONS: 3, ApiKey.METADATA: 12, ApiKey.PRODUCE: 9,
                                    ApiKey.FETCH: fetch_version}
    assert session.principal == "User:ANONYMOUS" and session.tls is None
    assert _pins(broker) == 0


def test_fetch_returns_regions_in_its_body_and_the_codec_makes_them_parts(broker):
    async def main():
        session = Session("127.0.0.1", 1)
        ctx = RequestContext(broker, session, ApiKey.PRODUCE, 9, 1, "t")
        for i in range(BATCHES):
            await HANDLERS[ApiKey.PRODUCE].handle(ctx, _produce_body(bytearray(_batch(10 * i))))
        ctx = RequestContext(broker, session, ApiKey.FETCH, 12, 2, "t")
        body = await fetch_handler.handle(ctx, _fetch_body())
        region = body["responses"][0]["partitions"][0]["records"]
        assert type(region) is FileRegion and len(region) >= fetch_handler.REGION_MIN_BYTES
        assert ctx.client_host == "127.0.0.1" and ctx.connection_id == session.connection_id
        assert _pins(broker) == 1
        head, part, tail = encode_response_parts(ApiKey.FETCH, 12, 2, body)
        assert part is region and type(head) is bytes and type(tail) is bytes
        assert struct.unpack(">i", head[:4])[0] == len(head) + len(region) + len(tail) - 4
        region.release()
        region.release()  # a second release is a no-op, never a second unpin
        assert _pins(broker) == 0

    trio.run(main)


def test_a_bad_frame_from_the_peer_closes_the_connection_with_a_warning(broker, caplog):
    async def scenario(client: _Client):
        await client.stream.send_all(b"\x7f\x00\x00\x00")  # a size prefix far over socket.request.max.bytes
        assert await client.closed_by_server()

    with caplog.at_level(logging.INFO, logger="trafka.network"):
        trio.run(_serve, broker, scenario)
    (record,) = [r for r in caplog.records if "closing it" in r.getMessage()]
    assert record.levelno == logging.WARNING and record.exc_info is None


def test_a_response_that_does_not_encode_closes_the_connection_with_an_error_and_frees_its_regions(
        broker, caplog, monkeypatch):
    """A handler whose body does not fit its schema: our bug (LocalProtocolError). The
    answers before it still go out, the connection closes, and the region the body held
    is released although it never became a part."""

    async def fill():
        ctx = RequestContext(broker, Session("127.0.0.1", 1), ApiKey.PRODUCE, 9, 1, "t")
        for i in range(BATCHES):
            await HANDLERS[ApiKey.PRODUCE].handle(ctx, _produce_body(bytearray(_batch(10 * i))))

    trio.run(fill)
    real_fetch = HANDLERS[ApiKey.FETCH]

    async def broken_fetch(ctx, request):
        body = await real_fetch.handle(ctx, request)
        assert type(body["responses"][0]["partitions"][0]["records"]) is FileRegion
        body["responses"][0]["partitions"][0]["high_watermark"] = "not a number"
        return body

    monkeypatch.setitem(HANDLERS, ApiKey.FETCH, types.SimpleNamespace(MAY_BLOCK=True, handle=broken_fetch))

    async def scenario(client: _Client):
        metadata = await client.send(ApiKey.METADATA, 12, {"topics": None, "allow_auto_topic_creation": False,
                                                           "include_topic_authorized_operations": False})
        await client.send(ApiKey.FETCH, 12, _fetch_body())
        assert (await client.receive(ApiKey.METADATA, 12, metadata))["topics"]
        assert await client.closed_by_server()

    with caplog.at_level(logging.INFO, logger="trafka.network"):
        trio.run(_serve, broker, scenario)
    (record,) = [r for r in caplog.records if "cannot answer" in r.getMessage()]
    assert record.levelno == logging.ERROR and record.exc_info is not None
    assert "high_watermark" in str(record.exc_info[1])
    assert _pins(broker) == 0


async def _serve_tcp(broker: Broker, scenario) -> Session:
    """As `_serve`, over a loopback TCP connection: the SocketStream path (sendfile, MSG_MORE)."""
    server = Server(broker)
    (listener,) = await trio.open_tcp_listeners(0, host="127.0.0.1")
    port = listener.socket.getsockname()[1]
    result = {}

    async def serve():
        stream = await listener.accept()
        result["session"] = await server.serve_stream(stream, *stream.socket.getpeername()[:2])

    with trio.fail_after(30):
        async with trio.open_nursery() as nursery:
            nursery.start_soon(serve)
            client_end = await trio.open_tcp_stream("127.0.0.1", port)
            await scenario(_Client(client_end))
            await client_end.aclose()
    await listener.aclose()
    return result["session"]


def _fill(broker: Broker) -> None:
    async def fill():
        ctx = RequestContext(broker, Session("127.0.0.1", 1), ApiKey.PRODUCE, 9, 1, "t")
        for i in range(BATCHES):
            await HANDLERS[ApiKey.PRODUCE].handle(ctx, _produce_body(bytearray(_batch(10 * i))))

    trio.run(fill)


@pytest.mark.parametrize("fetch_version", [11, 12])
def test_a_large_fetch_over_a_socket_goes_out_with_sendfile_and_releases_its_regions(broker, fetch_version):
    _fill(broker)

    async def scenario(client: _Client):
        # Two fetches pipelined behind a metadata request: bytes, region, bytes, region in one flush.
        first = await client.send(ApiKey.FETCH, fetch_version, _fetch_body())
        second = await client.send(ApiKey.FETCH, fetch_version, _fetch_body(10 * (BATCHES // 2)))
        for correlation, start in ((first, 0), (second, 10 * (BATCHES // 2))):
            part = (await client.receive(ApiKey.FETCH, fetch_version, correlation))["responses"][0]["partitions"][0]
            records = bytes(part["records"])
            values = [int.from_bytes(r.value[:8], "big") for pos, h in iter_headers(records)
                      for r in iter_records(memoryview(records)[pos:pos + h.size])]
            assert values == list(range(start, 10 * BATCHES))

    session = trio.run(_serve_tcp, broker, scenario)
    assert session.host == "127.0.0.1" and session.api_versions == {ApiKey.FETCH: fetch_version}
    assert _pins(broker) == 0


def test_regions_are_released_when_the_peer_goes_away_mid_response(broker):
    _fill(broker)

    async def scenario(client: _Client):
        for _ in range(20):  # ~8 MB of answers that nobody reads
            await client.send(ApiKey.FETCH, 12, _fetch_body())
        await trio.sleep(0.05)

    trio.run(_serve_tcp, broker, scenario)
    assert _pins(broker) == 0
