"""The Kafka binary protocol as a sans-IO library: no sockets, no trio.

Entry points: `Connection` (broker side: bytes in, requests out, responses to bytes),
`encode_request` / `decode_response` (client side, for tools and tests), `records`
(record batches), `registry` (the versions served), `errors` (error codes and the typed
exceptions malformed input raises).
"""

from wire.connection import (
    NEED_DATA,
    EncodeError,
    Connection,
    Request,
    UnsupportedRequest,
    decode_request,
    decode_response,
    encode_request,
    encode_response,
)
from wire.errors import ErrorCode, FrameTooLarge, MalformedFrame, ProtocolError
from wire.registry import API_VERSIONS, ApiKey

__all__ = [
    "API_VERSIONS",
    "ApiKey",
    "Connection",
    "EncodeError",
    "ErrorCode",
    "FrameTooLarge",
    "MalformedFrame",
    "NEED_DATA",
    "ProtocolError",
    "Request",
    "UnsupportedRequest",
    "decode_request",
    "decode_response",
    "encode_request",
    "encode_response",
]
