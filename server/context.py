"""What a handler knows about the request it serves, besides the body.

Built for every request, so it stays a slotted record: the per-connection facts live in
the `Session` it points to, and `client_host` / `connection_id` read through to it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from server.session import Session

if TYPE_CHECKING:
    from server.broker import Broker


@dataclass(slots=True)
class RequestContext:
    broker: "Broker"
    session: Session
    api_key: int
    api_version: int
    correlation_id: int
    client_id: str | None

    @property
    def client_host(self) -> str:
        return self.session.host

    @property
    def connection_id(self) -> int:
        return self.session.connection_id
