"""A group member in a child process, so a scenario can kill it without a LeaveGroup.

    python -m compat_tests.clients.process_member --client NAME --bootstrap H:P --group G TOPIC..

The child prints one JSON line each time its assignment or record count changes and leaves
the group cleanly on SIGTERM. SIGKILL is the "member dies" case: the broker only finds out
when the session times out.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import threading
import time

from compat_tests.brokers import die_with_parent
from compat_tests.clients.base import GroupMember


def main() -> int:
    from compat_tests.clients import make_client

    parser = argparse.ArgumentParser()
    parser.add_argument("--client", required=True)
    parser.add_argument("--bootstrap", required=True)
    parser.add_argument("--group", required=True)
    parser.add_argument("topics", nargs="+")
    args = parser.parse_args()
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    member = make_client(args.client, args.bootstrap).group_member(args.topics, args.group)
    last = None
    while not stop.is_set():
        state = (sorted(member.assignment()), len(member.records()), member.error())
        if state != last:
            print(json.dumps({"assignment": state[0], "records": state[1], "error": state[2]}),
                  flush=True)
            last = state
        time.sleep(0.05)
    member.leave()
    return 0


class ProcessMember(GroupMember):
    def __init__(self, client: str, bootstrap: str, topics: list[str], group: str) -> None:
        argv = [sys.executable, "-m", "compat_tests.clients.process_member", "--client", client,
                "--bootstrap", bootstrap, "--group", group, *topics]
        repo = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
        env = dict(os.environ)
        env["PYTHONPATH"] = os.pathsep.join(filter(None, [repo, env.get("PYTHONPATH")]))
        self._proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                      stdin=subprocess.DEVNULL, text=True, cwd=repo, env=env,
                                      start_new_session=True, preexec_fn=die_with_parent)
        self._lock = threading.Lock()
        self._assignment: frozenset = frozenset()
        self._error: str | None = None
        self._stderr: list[str] = []
        threading.Thread(target=self._read, daemon=True).start()
        threading.Thread(target=self._read_err, daemon=True).start()

    def _read(self) -> None:
        for line in self._proc.stdout:
            state = json.loads(line)
            with self._lock:
                self._assignment = frozenset((t, p) for t, p in state["assignment"])
                self._error = state["error"]

    def _read_err(self) -> None:
        for line in self._proc.stderr:
            with self._lock:
                self._stderr = (self._stderr + [line.rstrip()])[-20:]

    def assignment(self):
        with self._lock:
            return self._assignment

    def records(self):
        raise NotImplementedError("records stay in the child process")

    def error(self):
        with self._lock:
            tail = "\n".join(self._stderr[-5:])
        exited = self._proc.poll()
        status = f"child exited {exited}" if exited is not None else None
        return "\n".join(filter(None, [self._error, tail, status])) or None

    def leave(self) -> None:
        if self._proc.poll() is None:
            self._proc.terminate()
        try:
            self._proc.wait(30)
        except subprocess.TimeoutExpired:
            self._proc.kill()
            self._proc.wait()

    def kill(self) -> None:
        self._proc.kill()
        self._proc.wait()


def spawn_member(client: str, bootstrap: str, topics: list[str], group: str) -> GroupMember:
    """A member that can be SIGKILLed: kcat is a process already, Java gets a JVM of its own,
    the others run in a child."""
    from compat_tests.recording import recording_member

    if client == "kcat":
        from compat_tests.clients import make_client
        return make_client(client, bootstrap).group_member(topics, group)  # recorded there
    if client == "java":
        from compat_tests.clients import java_client
        return recording_member(java_client.killable_member(bootstrap, topics, group))
    return recording_member(ProcessMember(client, bootstrap, topics, group))


if __name__ == "__main__":
    sys.exit(main())
