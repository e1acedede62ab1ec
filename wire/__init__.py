"""The Kafka binary protocol as a sans-IO library: no sockets, no trio.

Entry points: `Connection` (broker side: bytes in, requests out, responses to parts: bytes
and `Region`s),
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
    encode_response_parts,
)
from wire.errors import (
    ErrorCode,
    FrameTooLarge,
    LocalProtocolError,
    MalformedFrame,
    ProtocolError,
    RemoteProtocolError,
)
from wire.primitives import Region
from wire.registry import API_VERSIONS, ApiKey

__all__ = [
    "API_VERSIONS",
    "ApiKey",
    "Connection",
    "EncodeError",
    "ErrorCode",
    "FrameTooLarge",
    "LocalProtocolError",
    "MalformedFrame",
    "NEED_DATA",
    "ProtocolError",
    "Region",
    "RemoteProtocolError",
    "Request",
    "UnsupportedRequest",
    "decode_request",
    "decode_response",
    "encode_request",
    "encode_response",
    "encode_response_parts",
]
