"""One module per API key. Each module defines:

- `API_KEY`: the key it serves (versions come from `wire.registry.API_VERSIONS`);
- `MAY_BLOCK`: True if it can wait (long-poll, rebalance), so earlier responses on the
  connection are flushed before it runs;
- `async def handle(ctx, request) -> dict | None`: the response body (None: no response),
  or a `server.delayed.DelayedResponse` when the answer waits after the in-order part of
  the work (Produce with acks=all in a cluster waits for the ISR).
"""

from __future__ import annotations

import importlib
import pkgutil
from types import ModuleType

from wire.registry import API_VERSIONS


def _load() -> dict[int, ModuleType]:
    handlers: dict[int, ModuleType] = {}
    for info in pkgutil.iter_modules(__path__):
        if info.name.startswith("_"):
            continue
        module = importlib.import_module(f"{__name__}.{info.name}")
        key = getattr(module, "API_KEY", None)
        if key is None:
            continue
        if key in handlers:
            raise RuntimeError(f"two handlers for API key {key}: {handlers[key].__name__}, {module.__name__}")
        if not hasattr(module, "MAY_BLOCK"):
            module.MAY_BLOCK = False
        handlers[int(key)] = module
    return handlers


HANDLERS: dict[int, ModuleType] = _load()


def missing_handlers() -> list[int]:
    """API keys advertised without a handler (a test keeps this empty)."""
    return sorted(set(API_VERSIONS) - set(HANDLERS))
