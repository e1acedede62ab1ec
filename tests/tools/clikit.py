"""Runs the real `trafka` command line (`python -m server ...`, what the console script
runs) in a subprocess, as an operator would, and parses what it prints."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from dataclasses import dataclass

from tests.brokerproc import REPO


@dataclass
class Run:
    code: int
    out: str
    err: str

    def json(self):
        assert self.code == 0, f"exit {self.code}: {self.err}"
        return json.loads(self.out)

    def json_any(self):
        """The JSON output whatever the exit code (`cluster health` exits 1 when unhealthy)."""
        return json.loads(self.out)

    def ok(self) -> "Run":
        assert self.code == 0, f"exit {self.code}\nstdout: {self.out}\nstderr: {self.err}"
        return self

    def one_line_error(self, *fragments: str) -> str:
        """A failure reported as exactly one stderr line (no traceback) holding `fragments`."""
        assert self.code != 0, f"expected a failure, got exit 0: {self.out}"
        lines = self.err.strip().splitlines()
        assert len(lines) == 1, f"expected one stderr line, got:\n{self.err}"
        assert "Traceback" not in self.err
        for fragment in fragments:
            assert fragment in lines[0], f"{fragment!r} not in {lines[0]!r}"
        return lines[0]


def trafka(*args: str, bootstrap: str | None = None, stdin: str | None = None, timeout: float = 90,
           env: dict | None = None) -> Run:
    """`trafka ARGS...` with `-b bootstrap` added after the verb when given."""
    argv = list(args)
    if bootstrap is not None:
        argv += ["-b", bootstrap]
    full_env = {k: v for k, v in os.environ.items() if k != "TRAFKA_BOOTSTRAP"}
    full_env.update(PYTHONPATH=str(REPO), **(env or {}))
    proc = subprocess.run([sys.executable, "-m", "server", *argv], input=stdin, capture_output=True, text=True,
                          timeout=timeout, env=full_env, cwd=REPO)
    return Run(proc.returncode, proc.stdout, proc.stderr)


def popen(*args: str, bootstrap: str) -> subprocess.Popen:
    """A long-running `trafka ...` (a --follow consumer); stop it with .terminate()."""
    env = dict(os.environ, PYTHONPATH=str(REPO))
    return subprocess.Popen([sys.executable, "-m", "server", *args, "-b", bootstrap], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, env=env, cwd=REPO)
