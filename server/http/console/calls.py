"""One Kafka request answered by its own handler, in the broker's process.

Why: the console's actions (create and delete topics, reset a group's offsets) must
validate, fail and behave in a ZooKeeper cluster exactly as CreateTopics, DeleteTopics,
ListOffsets and OffsetCommit do for a Kafka client, so they are those handlers, called
with a request body and a `RequestContext` of a console session. With an authorizer the
console is the principal `User:ANONYMOUS` from 127.0.0.1, as an unauthenticated client
would be: the console grants nothing a client could not get.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from server.context import RequestContext
from server.session import Session

if TYPE_CHECKING:  # pragma: no cover
    from server.broker import Broker

CLIENT_ID = "trafka-console"


def console_context(broker: "Broker", api_key: int, api_version: int = 0) -> RequestContext:
    """The context of a console request: an unauthenticated client on the first listener.
    The reads use it too (`ctx.authorize`), so with an authorizer the console shows only
    what such a client could describe or read."""
    listeners = broker.config.listener_list
    session = Session("127.0.0.1", 0, listener=listeners[0].name if listeners else None)
    session.client_id = CLIENT_ID
    return RequestContext(broker, session, int(api_key), api_version, 0, CLIENT_ID)


async def kafka_call(broker: "Broker", api_key: int, api_version: int, body: dict[str, Any]) -> dict[str, Any]:
    """The response body of one request, as its handler answers it (a delayed answer,
    such as an acks=all Produce's, is awaited)."""
    from server.delayed import DelayedResponse
    from server.handlers import HANDLERS

    ctx = console_context(broker, api_key, api_version)
    answer = await HANDLERS[int(api_key)].handle(ctx, body)
    if isinstance(answer, DelayedResponse):
        answer = await answer.finish()
    return answer
