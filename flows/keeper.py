"""``python flows/keeper.py COMMAND...``: COMMAND (a stage's ``dvc repro``) in the keeper's process group, taken down
with the flow's process however that process ends.

A flow run's stage runs in a process group of its own (a terminal's Ctrl-C reaches the flow, which stops the stage
and says so). The keeper leads that group: when the flow's process dies, even by SIGKILL (a Prefect worker
kills its flow-run process when it is itself stopped), Linux sends the keeper SIGTERM (PR_SET_PDEATHSIG), and the
keeper passes it to the group (DVC and the stage, which stops within seconds saying what it kept), then SIGKILL to
what is left after ``GRACE_S``, and marks the flow run Crashed through the Prefect API (nothing else is left to
end it, and a run left Running holds its deployment's concurrency slot). SIGTERM or SIGINT sent to the keeper stops
the group the same way. Otherwise it exits with COMMAND's status. Imports nothing heavy: it starts before every stage.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from types import FrameType

from egoeval.core.errors import Interrupted

GRACE_S = 10.0  # the group's time to stop after SIGTERM before SIGKILL
REPORT_TIMEOUT_S = 5.0  # the most the keeper waits for the Prefect API when it reports a crashed run
PR_SET_PDEATHSIG = 1


def die_with_parent(parent: int) -> None:
    """SIGTERM to this process as soon as its parent dies (Linux); if ``parent`` is already gone, SIGTERM now."""
    if sys.platform.startswith("linux"):
        import ctypes

        ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGTERM)
    if os.getppid() != parent:  # the parent died before the line above took effect
        os.kill(os.getpid(), signal.SIGTERM)


def stop_group(child: subprocess.Popen[bytes] | None, grace_s: float = GRACE_S) -> None:
    """SIGTERM to every other process of this group, SIGKILL to those left after ``grace_s``."""
    for signum in (signal.SIGTERM, signal.SIGINT):
        signal.signal(signum, signal.SIG_IGN)  # the keeper outlives its own signal to the group
    group, me = os.getpgrp(), os.getpid()
    os.killpg(group, signal.SIGTERM)
    deadline = time.monotonic() + grace_s
    if child is not None:
        with contextlib.suppress(subprocess.TimeoutExpired):
            child.wait(timeout=grace_s)  # COMMAND (DVC) first: what it started ends with it or just after
    while time.monotonic() < deadline:
        if not [pid for pid in _group_members(group) if pid != me]:
            return
        time.sleep(0.02)
    for pid in _group_members(group):
        if pid != me:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)


def live_processes() -> dict[int, list[str]]:
    """Every live process (not a zombie): pid -> the fields of /proc/PID/stat after the command name (state, parent
    pid, process group, ...); empty where there is no /proc."""
    found = {}
    for entry in os.scandir("/proc") if os.path.isdir("/proc") else ():
        if entry.name.isdigit():
            try:
                fields = Path(f"/proc/{entry.name}/stat").read_text().rsplit(")", 1)[1].split()
            except OSError:
                continue
            if fields[0] != "Z":
                found[int(entry.name)] = fields
    return found


def _group_members(group: int) -> list[int]:
    """The live processes of process group ``group``."""
    return [pid for pid, fields in live_processes().items() if int(fields[2]) == group]


def report_crash(command: list[str]) -> None:
    """The flow run whose process died (Prefect's ``PREFECT__FLOW_RUN_ID``, its API at ``PREFECT_API_URL``) marked
    Crashed: no process is left to say so, and a run left Running would hold the deployment's concurrency slot."""
    run, api = os.environ.get("PREFECT__FLOW_RUN_ID"), os.environ.get("PREFECT_API_URL")
    if not run or not api:
        return
    import json
    import urllib.request

    message = f"the flow-run process ended while `{' '.join(command[-4:])}` ran (its worker stopped?): stage stopped"
    body = {"state": {"type": "CRASHED", "name": "Crashed", "message": message}, "force": True}
    headers = {"Content-Type": "application/json"}
    if os.environ.get("PREFECT_API_KEY"):
        headers["Authorization"] = f"Bearer {os.environ['PREFECT_API_KEY']}"
    url = f"{api.rstrip('/')}/flow_runs/{run}/set_state"
    request = urllib.request.Request(url, json.dumps(body).encode(), headers, method="POST")
    with contextlib.suppress(OSError), urllib.request.urlopen(request, timeout=REPORT_TIMEOUT_S):
        pass


def main(argv: list[str]) -> int:
    if not argv:
        print("usage: python flows/keeper.py COMMAND...", file=sys.stderr)
        return 2
    parent = os.getppid()
    children: list[subprocess.Popen[bytes]] = []

    def stop(signum: int, frame: FrameType | None) -> None:
        raise Interrupted(signum)  # out of the wait (whose lock the group's stop needs to reap COMMAND)

    for signum in (signal.SIGTERM, signal.SIGINT):
        signal.signal(signum, stop)
    try:
        die_with_parent(parent)
        children.append(subprocess.Popen(argv))
        return children[0].wait()
    except Interrupted as interrupted:
        stop_group(children[0] if children else None)
        if os.getppid() != parent:  # the flow's process died: the SIGTERM came from PR_SET_PDEATHSIG
            report_crash(argv)
        return 128 + interrupted.signum


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
