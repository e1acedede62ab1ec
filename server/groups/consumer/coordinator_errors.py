"""The refusal the consumer-group code raises and turns into an error code: shared by
coordinator.py and migration.py (which the coordinator imports)."""

from __future__ import annotations

from wire.errors import ErrorCode


class Reject(Exception):
    def __init__(self, code: ErrorCode, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message
