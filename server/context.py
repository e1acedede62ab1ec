"""What a handler knows about the request it serves, besides the body.

Built for every request, so it stays a slotted record: the per-connection facts live in
the `Session` it points to, and `client_host` / `connection_id` read through to it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from wire.registry import ApiKey

from server.session import Session

if TYPE_CHECKING:
    from server.broker import Broker
    from server.security.acls import AclOperation, ResourceType


def _api_name(api_key: int) -> str:
    try:
        return ApiKey(api_key).name
    except ValueError:
        return str(api_key)


@dataclass(slots=True)
class RequestContext:
    broker: "Broker"
    session: Session
    api_key: int
    api_version: int
    correlation_id: int
    client_id: str | None

    def authorize(self, op: "AclOperation", resource_type: "ResourceType", name: str, *,
                  log_denied: bool = True) -> bool:
        """The one authorization check of every handler: True when no authorizer is
        configured (a None test), else the authorizer's (cached) answer for this
        connection's principal and host."""
        authorizer = self.broker.authorizer
        if authorizer is None:
            return True
        session = self.session
        return authorizer.authorize(session.principal, session.host, op, resource_type, name,
                                    api=_api_name(self.api_key), log_denied=log_denied)

    @property
    def client_host(self) -> str:
        return self.session.host

    @property
    def connection_id(self) -> int:
        return self.session.connection_id
