"""`python -m server.healthcheck HOST:PORT`: exit 0 if the broker answers ApiVersions.

Used by the Docker HEALTHCHECK: an open port is not enough, the broker must answer.
"""

from __future__ import annotations

import socket
import struct
import sys

from wire import ApiKey, decode_response, encode_request
from wire.errors import ErrorCode


def api_versions(host: str, port: int, timeout: float = 5.0) -> list[dict]:
    """One ApiVersions v0 round trip; returns the advertised API ranges."""
    with socket.create_connection((host, port), timeout=timeout) as sock:
        sock.sendall(encode_request(ApiKey.API_VERSIONS, 0, 1, {}, client_id="trafka-healthcheck"))
        size_bytes = _recv_exact(sock, 4)
        frame = _recv_exact(sock, struct.unpack(">i", size_bytes)[0])
    _cid, body = decode_response(ApiKey.API_VERSIONS, 0, frame)
    if body["error_code"] != ErrorCode.NONE:
        raise RuntimeError(f"ApiVersions error {body['error_code']}")
    return body["api_keys"]


def _recv_exact(sock: socket.socket, n: int) -> bytes:
    chunks = bytearray()
    while len(chunks) < n:
        chunk = sock.recv(n - len(chunks))
        if not chunk:
            raise ConnectionError("broker closed the connection")
        chunks += chunk
    return bytes(chunks)


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    target = args[0] if args else "127.0.0.1:9092"
    host, _, port = target.rpartition(":")
    try:
        keys = api_versions(host or "127.0.0.1", int(port))
    except Exception as exc:  # any failure is "unhealthy"
        print(f"unhealthy: {exc}", file=sys.stderr)
        return 1
    print(f"healthy: {len(keys)} APIs advertised")
    return 0


if __name__ == "__main__":
    sys.exit(main())
