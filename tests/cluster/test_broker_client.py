"""`server.cluster.client` against real Trafka brokers (subprocesses on loopback ports) and,
for a peer that never answers, a tiny trio listener: handshake, Metadata and CreateTopics
round trips, 50 pipelined requests on one connection, reconnection after a broker restart,
request timeouts, and `BrokerChannels` over two brokers.
"""

from __future__ import annotations

import time

import pytest
import trio

from server.cluster.client import (
    CLIENT_SOFTWARE_VERSION,
    BrokerChannels,
    BrokerClient,
    ClientClosed,
    ConnectionFailed,
    ConnectionLost,
    RequestTimedOut,
    UnknownBroker,
)
from tests.brokerproc import BrokerProcess, free_port
from wire import ApiKey, Request, encode_response
from wire.connection import NEED_DATA, Connection
from wire.errors import ErrorCode
from wire.registry import API_VERSIONS, INTER_BROKER_VERSIONS


@pytest.fixture(scope="module")
def broker(tmp_path_factory):
    with BrokerProcess(tmp_path_factory.mktemp("client-broker") / "data") as proc:
        yield proc


def _metadata(topics: list[str] | None) -> dict:
    return {"topics": None if topics is None else [{"name": t} for t in topics],
            "allow_auto_topic_creation": False, "include_topic_authorized_operations": False}


def run(main, *args, timeout: float = 60.0):
    async def bounded():
        with trio.fail_after(timeout):
            return await main(*args)
    return trio.run(bounded)


def test_handshake_metadata_and_create_topics(broker):
    async def main():
        async with BrokerClient("127.0.0.1", broker.port, broker_id=0) as client:
            await client.connect()
            # The handshake kept the peer's ranges: exactly what the broker advertises.
            assert client.api_versions == dict(API_VERSIONS)
            meta = await client.request(ApiKey.METADATA, 12, _metadata(None), timeout_s=10)
            assert [(b["host"], b["port"]) for b in meta["brokers"]] == [("127.0.0.1", broker.port)]
            created = await client.request(ApiKey.CREATE_TOPICS, 7, {
                "topics": [{"name": "inter-broker", "num_partitions": 3, "replication_factor": 1,
                            "assignments": [], "configs": []}],
                "timeout_ms": 10_000, "validate_only": False}, timeout_s=10)
            assert [(t["name"], t["error_code"], t["num_partitions"]) for t in created["topics"]] == [
                ("inter-broker", ErrorCode.NONE, 3)]
            meta = await client.request(ApiKey.METADATA, 12, _metadata(["inter-broker"]), timeout_s=10)
            (topic,) = meta["topics"]
            assert topic["error_code"] == ErrorCode.NONE
            assert sorted(p["partition_index"] for p in topic["partitions"]) == [0, 1, 2]
            # An older, non-flexible version on the same connection.
            meta = await client.request(ApiKey.METADATA, 1, {"topics": [{"name": "inter-broker"}]}, timeout_s=10)
            assert meta["topics"][0]["name"] == "inter-broker"
            assert client.connections_opened == 1
    run(main)


def test_inter_broker_api_without_a_handler_is_answered_unsupported(broker):
    from server.handlers import HANDLERS

    unhandled = [k for k in INTER_BROKER_VERSIONS if k not in HANDLERS]
    if ApiKey.UPDATE_METADATA not in unhandled:
        pytest.skip("UpdateMetadata has a handler now")

    async def main():
        async with BrokerClient("127.0.0.1", broker.port) as client:
            body = {"controller_id": 1, "controller_epoch": 1, "broker_epoch": -1, "topic_states": [],
                    "live_brokers": []}
            response = await client.request(ApiKey.UPDATE_METADATA, 8, body, timeout_s=10)
            assert response["error_code"] == ErrorCode.UNSUPPORTED_VERSION
            # The connection survives it.
            assert (await client.request(ApiKey.METADATA, 12, _metadata(None)))["brokers"]
    run(main)


async def _fifty(client: BrokerClient) -> dict[int, dict]:
    """50 concurrent requests, two APIs interleaved: a response matched to the wrong request
    would not even decode, or would name another topic. Returns them by index, checked."""
    results: dict[int, dict] = {}

    async def one(i: int) -> None:
        if i % 5 == 0:
            results[i] = await client.request(ApiKey.API_VERSIONS, 3, {
                "client_software_name": "t", "client_software_version": str(i)}, timeout_s=20)
        else:
            results[i] = await client.request(ApiKey.METADATA, 12, _metadata([f"missing-{i}"]), timeout_s=20)

    async with trio.open_nursery() as nursery:
        for i in range(50):
            nursery.start_soon(one, i)
    assert len(results) == 50
    for i, body in results.items():
        if i % 5 == 0:
            assert body["error_code"] == ErrorCode.NONE
        else:
            assert [(t["name"], t["error_code"]) for t in body["topics"]] == [
                (f"missing-{i}", ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)]
    return results


def test_fifty_pipelined_requests_on_one_connection(broker):
    async def main():
        async with BrokerClient("127.0.0.1", broker.port) as client:
            results = await _fifty(client)
            assert all(results[i]["api_keys"] for i in range(0, 50, 5))
            assert client.connections_opened == 1 and client.in_flight == 0
    run(main)


def test_fifty_requests_all_in_flight_before_the_first_answer():
    # A peer that holds every answer until all 50 requests have arrived, then writes them in
    # one go: the requests were really in flight together, and 50 frames arriving in one
    # read are handed out in order.
    async def peer(stream: trio.SocketStream, received: list) -> None:
        conn = Connection()
        async for data in stream:
            conn.receive_data(data)
            while (request := conn.next_request()) is not NEED_DATA:
                if request.api_key == ApiKey.API_VERSIONS and request.correlation_id == 1:  # the handshake
                    await stream.send_all(encode_response(ApiKey.API_VERSIONS, 3, 1, {
                        "error_code": 0, "api_keys": [], "throttle_time_ms": 0}))
                    continue
                received.append(request)
            if len(received) == 50:
                answers = b""
                for request in received:
                    if request.api_key == ApiKey.API_VERSIONS:
                        body = {"error_code": 0, "api_keys": [], "throttle_time_ms": 0}
                    else:
                        body = {"brokers": [], "cluster_id": None, "controller_id": -1, "topics": [
                            {"error_code": ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, "name": t["name"],
                             "partitions": []} for t in request.body["topics"]]}
                    answers += encode_response(request.api_key, request.api_version, request.correlation_id, body)
                await stream.send_all(answers)

    async def main():
        received: list = []
        async with trio.open_nursery() as nursery:
            (listener,) = await trio.open_tcp_listeners(0, host="127.0.0.1")
            port = listener.socket.getsockname()[1]
            nursery.start_soon(trio.serve_listeners, lambda stream: peer(stream, received), [listener])
            async with BrokerClient("127.0.0.1", port) as client:
                await _fifty(client)
                assert len(received) == 50 and client.connections_opened == 1
            nursery.cancel_scope.cancel()
    run(main, timeout=30)


def test_next_request_reconnects_after_a_broker_restart(tmp_path):
    with BrokerProcess(tmp_path / "data") as proc:
        async def main():
            async with BrokerClient("127.0.0.1", proc.port) as client:
                assert (await client.request(ApiKey.METADATA, 12, _metadata(None), timeout_s=10))["brokers"]
                await trio.to_thread.run_sync(proc.restart)
                meta = await client.request(ApiKey.METADATA, 12, _metadata(None), timeout_s=10)
                assert meta["brokers"][0]["port"] == proc.port
                assert client.connections_opened == 2
                # Down: the request fails fast as not sent; back up: the next one connects.
                await trio.to_thread.run_sync(proc.stop)
                with pytest.raises(ConnectionFailed):
                    await client.request(ApiKey.METADATA, 12, _metadata(None), timeout_s=10)
                await trio.to_thread.run_sync(proc.start)
                assert (await client.request(ApiKey.METADATA, 12, _metadata(None), timeout_s=10))["brokers"]
                assert client.connections_opened == 3
        run(main)


async def _serve_silent(listener: trio.SocketListener, answer_handshake: bool, accepted: list,
                        seen: list | None = None) -> None:
    """Accept connections; answer ApiVersions if asked to, then read and never answer.
    `seen` collects the requests received."""
    async def handle(stream: trio.SocketStream) -> None:
        accepted.append(stream)
        conn = Connection()
        async for data in stream:
            conn.receive_data(data)
            while (request := conn.next_request()) is not NEED_DATA:
                assert isinstance(request, Request)
                if seen is not None:
                    seen.append(request)
                if answer_handshake and request.api_key == ApiKey.API_VERSIONS:
                    await stream.send_all(encode_response(ApiKey.API_VERSIONS, request.api_version,
                                                          request.correlation_id,
                                                          {"error_code": 0, "api_keys": [], "throttle_time_ms": 0}))
    await trio.serve_listeners(handle, [listener])


def test_timeout_on_a_peer_that_accepts_but_never_answers():
    async def main():
        async with trio.open_nursery() as nursery:
            (listener,) = await trio.open_tcp_listeners(0, host="127.0.0.1")
            port = listener.socket.getsockname()[1]
            accepted: list = []
            nursery.start_soon(_serve_silent, listener, False, accepted)
            async with BrokerClient("127.0.0.1", port) as client:
                started = time.monotonic()
                with pytest.raises(RequestTimedOut) as caught:
                    await client.request(ApiKey.METADATA, 12, _metadata(None), timeout_s=0.5)
                assert 0.4 < time.monotonic() - started < 3
                assert caught.value.code == ErrorCode.REQUEST_TIMED_OUT
                assert not client.connected
            nursery.cancel_scope.cancel()
    run(main, timeout=20)


def test_timeout_after_the_handshake_fails_the_other_requests_in_flight():
    async def main():
        async with trio.open_nursery() as nursery:
            (listener,) = await trio.open_tcp_listeners(0, host="127.0.0.1")
            port = listener.socket.getsockname()[1]
            accepted: list = []
            seen: list = []
            nursery.start_soon(_serve_silent, listener, True, accepted, seen)
            async with BrokerClient("127.0.0.1", port, client_id="trafka-broker-3") as client:
                await client.connect()
                assert client.api_versions == {}
                # The handshake: ApiVersions v3 naming the client software (KIP-511).
                (hello,) = seen
                assert (hello.api_key, hello.api_version, hello.client_id) == (ApiKey.API_VERSIONS, 3,
                                                                              "trafka-broker-3")
                assert hello.body["client_software_name"] == "trafka"
                assert hello.body["client_software_version"] == CLIENT_SOFTWARE_VERSION
                outcomes: dict[str, BaseException] = {}

                async def one(name: str, timeout_s: float) -> None:
                    try:
                        await client.request(ApiKey.METADATA, 12, _metadata([name]), timeout_s=timeout_s)
                    except Exception as exc:  # noqa: BLE001 - recorded and checked below
                        outcomes[name] = exc

                started = time.monotonic()
                async with trio.open_nursery() as inner:
                    inner.start_soon(one, "short", 0.5)
                    inner.start_soon(one, "long", 30)
                # Kafka's rule: a request timeout closes the connection, so the long one fails
                # at once with ConnectionLost instead of waiting out its 30 s.
                assert time.monotonic() - started < 5
                assert isinstance(outcomes["short"], RequestTimedOut)
                assert isinstance(outcomes["long"], ConnectionLost)
                # The next request opens a new connection (and times out too, on this peer).
                with pytest.raises(RequestTimedOut):
                    await client.request(ApiKey.METADATA, 12, _metadata(None), timeout_s=0.3)
                assert client.connections_opened == 2 and len(accepted) == 2
            nursery.cancel_scope.cancel()
    run(main, timeout=30)


def test_connection_refused_is_connection_failed():
    async def main():
        async with BrokerClient("127.0.0.1", free_port()) as client:
            with pytest.raises(ConnectionFailed):
                await client.request(ApiKey.METADATA, 12, _metadata(None), timeout_s=5)
    run(main)


def test_broker_channels_with_two_brokers(broker, tmp_path):
    with BrokerProcess(tmp_path / "data") as second:
        async def main():
            channels = BrokerChannels(client_id="trafka-broker-0")
            channels.update_endpoints({1: ("127.0.0.1", broker.port), 2: ("127.0.0.1", second.port)})
            for broker_id, port in ((1, broker.port), (2, second.port)):
                meta = await channels.request(broker_id, ApiKey.METADATA, 12, _metadata(None), timeout_s=10)
                assert meta["brokers"][0]["port"] == port
            first_client = channels.client(1)
            assert channels.client(1) is first_client and first_client.connected
            # Broker 2 leaves: its client is closed, and requests to it are refused.
            gone = channels.client(2)
            channels.update_endpoints({1: ("127.0.0.1", broker.port)})
            assert not gone.connected
            with pytest.raises(UnknownBroker) as caught:
                await channels.request(2, ApiKey.METADATA, 12, _metadata(None))
            assert caught.value.code == ErrorCode.BROKER_NOT_AVAILABLE
            # Broker 1 moves (re-registered elsewhere): a new client to the new endpoint.
            channels.update_endpoints({1: ("127.0.0.1", second.port)})
            assert not first_client.connected
            meta = await channels.request(1, ApiKey.METADATA, 12, _metadata(None), timeout_s=10)
            assert meta["brokers"][0]["port"] == second.port
            moved = channels.client(1)
            channels.close()
            assert not moved.connected
            with pytest.raises(ClientClosed):
                await moved.request(ApiKey.METADATA, 12, _metadata(None))
            with pytest.raises(ClientClosed):
                channels.client(1)
        run(main)


def test_close_fails_requests_in_flight():
    async def main():
        async with trio.open_nursery() as nursery:
            (listener,) = await trio.open_tcp_listeners(0, host="127.0.0.1")
            port = listener.socket.getsockname()[1]
            nursery.start_soon(_serve_silent, listener, True, [])
            client = BrokerClient("127.0.0.1", port)
            await client.connect()
            failures = []

            async def waiting() -> None:
                with pytest.raises(ClientClosed):
                    await client.request(ApiKey.METADATA, 12, _metadata(None), timeout_s=30)
                failures.append(True)

            async with trio.open_nursery() as inner:
                inner.start_soon(waiting)
                inner.start_soon(waiting)
                await trio.sleep(0.1)
                client.close()
            assert failures == [True, True]
            nursery.cancel_scope.cancel()
    run(main, timeout=20)
