"""Start-up failures the user can fix, and the checks that find them before anything opens.

A broker that cannot start says so in one line naming the setting, its value and the
cause (`trafka serve` prints it and exits 1), as Kafka does for a taken port or a locked
log directory: a taken Kafka port, a data directory that is a file or cannot be written,
a data directory another broker holds, a ZooKeeper that does not answer, a node id that
another live broker holds, a data directory of another cluster. A traceback is kept for
what the user cannot fix by changing a setting (a bug, a failing disk).
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Iterator
from pathlib import Path


class ConfigError(ValueError):
    """A configuration value that cannot be used; the message names the key. Defined here,
    below server/config.py, because parsing the listeners (server/listeners.py), which
    loading the configuration does, raises it too; server.config re-exports it."""


class StartupError(Exception):
    """The broker cannot start because of `setting` (its value `value`): `cause` says why."""

    def __init__(self, setting: str, value: object, cause: str) -> None:
        super().__init__(f"{setting}={value}: {cause}")
        self.setting = setting
        self.value = value
        self.cause = cause


def check_data_dir(path: Path) -> None:
    """log.dirs exists (or is created) as a directory this process can list and write in;
    StartupError otherwise, before the broker opens anything. Kafka's LogManager checks the
    same at start-up ("Failed to create or validate data directory")."""
    value = str(path)
    if path.exists() and not path.is_dir():
        raise StartupError("log.dirs", value, "not a directory (a file of that name is in the way)")
    try:
        path.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise StartupError("log.dirs", value, f"cannot create the directory: {exc.strerror or exc}") from None
    try:
        os.listdir(path)
        fd, probe = tempfile.mkstemp(prefix=".write-check-", dir=path)
        os.close(fd)
        os.unlink(probe)
    except OSError as exc:
        raise StartupError("log.dirs", value, f"cannot read and write in it: {exc.strerror or exc}") from None


def startup_errors(error: BaseException, kinds: tuple[type[BaseException], ...]) -> Iterator[BaseException]:
    """The exceptions of `kinds` in `error`, looking inside (nested) exception groups: trio's
    nurseries wrap what a task raised."""
    if isinstance(error, kinds):
        yield error
    elif isinstance(error, BaseExceptionGroup):
        for inner in error.exceptions:
            yield from startup_errors(inner, kinds)
