"""Confluent's HTTP error answers, shared by the Schema Registry and the REST Proxy: an HTTP
status plus `{"error_code": ..., "message": ...}`.

Why shared: both APIs answer refusals the same way and clients (confluent-kafka's
SchemaRegistryClient, REST clients) branch on `error_code`; each room names its own codes
(schema_registry/errors.py, rest_proxy/errors.py) as constructors of this.
"""

from __future__ import annotations


class ConfluentError(Exception):
    """A refusal with Confluent's HTTP status and error code."""

    def __init__(self, status: int, code: int, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.code = code
        self.message = message

    def body(self) -> dict:
        return {"error_code": self.code, "message": self.message}
