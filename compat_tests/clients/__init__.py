"""Client adapters: one per library, all exposing the verbs of `base.Client`."""

from __future__ import annotations

from compat_tests.clients.base import (
    Client, ClientError, Delivery, GroupMember, Message, NotSupportedByClient, OffsetOutOfRange,
    Record)

__all__ = ["CLIENT_NAMES", "make_client", "Client", "ClientError", "Delivery", "GroupMember",
           "Message", "NotSupportedByClient", "OffsetOutOfRange", "Record"]

CLIENT_NAMES = ("kafka-python", "confluent-kafka", "aiokafka", "kcat", "java")


def make_client(name: str, bootstrap: str) -> Client:
    """A fresh adapter, recording its verbs while a compat test runs (compat_tests.observe)."""
    from compat_tests.recording import recording
    return recording(_adapter(name, bootstrap), name)


def _adapter(name: str, bootstrap: str) -> Client:
    """Imports lazily so a missing library only affects its own column."""
    if name == "kafka-python":
        from compat_tests.clients.kafka_python import KafkaPythonClient
        return KafkaPythonClient(bootstrap)
    if name == "confluent-kafka":
        from compat_tests.clients.confluent import ConfluentClient
        return ConfluentClient(bootstrap)
    if name == "aiokafka":
        from compat_tests.clients.aiokafka_client import AiokafkaClient
        return AiokafkaClient(bootstrap)
    if name == "kcat":
        from compat_tests.clients import kcat
        if not kcat.available():
            raise NotSupportedByClient(f"kcat binary not found ({kcat.KCAT}); apt-get install kcat")
        return kcat.KcatClient(bootstrap)
    if name == "java":
        from compat_tests.clients.java_client import JavaClient
        return JavaClient(bootstrap)  # skips (NotSupportedByClient) without a JDK or jars
    raise ValueError(f"unknown client {name!r}; known: {', '.join(CLIENT_NAMES)}")
