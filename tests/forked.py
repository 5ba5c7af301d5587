"""Commands (``python -m MODULE ...``, ``egoeval ...``) run as forks of one warm Python per test process.

A stage or ``egoeval`` process spends ~0.45 CPU s importing NumPy, pandas, pyarrow and the rest before any work; the
hostile-input tests start hundreds of them. Here a server process imports those libraries once and forks a child per
command: the child is a real process of its own (its working directory, environment, argv, stdin from /dev/null,
stdout and stderr captured, exit status as ``python -m`` gives it: SystemExit's code, 1 and a traceback for an
uncaught exception), and runs the module as ``__main__`` from a clean import of the project (only third-party
libraries are preloaded, so no state of the project's modules carries from one command to the next).
The signal, kill and start-up tests keep plain ``subprocess`` (tests/test_process_faults.py, test_reliability.py).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import tempfile
import threading
from pathlib import Path

PRELOAD = ("numpy", "pandas", "pyarrow.parquet", "yaml", "pydantic", "PIL.Image", "scipy.stats", "httpx")
"""Imported once by the server (after ``egoeval``, whose import sets the BLAS thread count before NumPy loads)."""

SERVER = r"""
import atexit, importlib, importlib.util, io, json, os, runpy, signal, sys, threading, traceback
import egoeval  # noqa: F401  (OPENBLAS_NUM_THREADS before NumPy)
for name in sys.argv[1:]:
    importlib.import_module(name)
project = [m for m in sys.modules if m.split(".")[0] in ("egoeval", "stages", "flows", "bench")]
for name in project:  # each command imports the project afresh, as `python -m` does
    del sys.modules[name]
requests, replies = sys.stdin.buffer, sys.stdout.buffer


def child(request):
    try:
        code = run(request)
    except BaseException:
        traceback.print_exc()
        code = 1
    os._exit(code & 0xFF)


def run(request):
    os.dup2(os.open(os.devnull, os.O_RDONLY), 0)
    os.chdir(request["cwd"])
    os.environ.clear()
    os.environ.update(request["env"])
    sys.path[0] = request["path0"]  # as Python sets it: the working directory (-m) or the script's folder
    sys.path_importer_cache.clear()
    importlib.invalidate_caches()
    for fd, name in ((1, "stdout"), (2, "stderr")):
        os.dup2(os.open(request[name], os.O_WRONLY | os.O_TRUNC), fd)
    sys.stdin = open(os.devnull)
    sys.stdout = io.TextIOWrapper(io.BufferedWriter(io.FileIO(1, "w", closefd=False)), encoding="utf-8")
    stderr = io.BufferedWriter(io.FileIO(2, "w", closefd=False))
    sys.stderr = io.TextIOWrapper(stderr, encoding="utf-8", errors="backslashreplace", line_buffering=True)
    signal.signal(signal.SIGINT, signal.default_int_handler)
    argv = request["argv"]
    try:
        if argv[0] == "-m":
            if importlib.util.find_spec(argv[1]) is None:
                print(f"{sys.executable}: No module named {argv[1]}", file=sys.stderr)
                return 1
            sys.argv = [argv[1], *argv[2:]]
            runpy.run_module(argv[1], run_name="__main__", alter_sys=True)
        else:  # the `egoeval` console script
            from egoeval.cli import main
            sys.argv = argv
            sys.exit(main())
        code = 0
    except SystemExit as stop:
        code = stop.code
        if code is None:
            code = 0
        elif not isinstance(code, int):
            print(code, file=sys.stderr)
            code = 1
    except BaseException:
        traceback.print_exc()
        code = 1
    threading._shutdown()
    atexit._run_exitfuncs()
    sys.stdout.flush()
    sys.stderr.flush()
    return code


for line in requests:
    request = json.loads(line)
    pid = os.fork()
    if pid == 0:
        child(request)
    replies.write(json.dumps({"pid": pid}).encode() + b"\n")
    replies.flush()
    _, status = os.waitpid(pid, 0)
    replies.write(json.dumps({"status": os.waitstatus_to_exitcode(status)}).encode() + b"\n")
    replies.flush()
"""


class Forked:
    """One warm server; ``run`` runs a command through it and returns what ``subprocess.run`` would."""

    def __init__(self, env: dict[str, str]) -> None:
        self.env = env
        self._server = subprocess.Popen(
            [sys.executable, "-c", SERVER, *PRELOAD], stdin=subprocess.PIPE, stdout=subprocess.PIPE, env=env
        )
        self._lock = threading.Lock()

    def run(self, argv: list[str], path0: str, cwd: Path, env: dict[str, str], timeout: float) -> tuple[int, str, str]:
        """``argv``: ``["-m", module, ...]`` or ``["egoeval", ...]``; ``path0``: sys.path[0]. Returns the exit status
        (negative: killed by that signal), stdout and stderr."""
        assert self._server.stdin is not None and self._server.stdout is not None
        with self._lock, tempfile.TemporaryDirectory(prefix="forked-") as folder:
            out, err = Path(folder, "stdout"), Path(folder, "stderr")
            out.touch()
            err.touch()
            request = {"argv": argv, "path0": path0, "cwd": str(cwd), "env": env}
            self._server.stdin.write(json.dumps({**request, "stdout": str(out), "stderr": str(err)}).encode() + b"\n")
            self._server.stdin.flush()
            pid = json.loads(self._server.stdout.readline())["pid"]
            expired = threading.Event()

            def expire() -> None:
                expired.set()
                os.kill(pid, signal.SIGKILL)

            timer = threading.Timer(timeout, expire)
            timer.start()
            try:
                status = json.loads(self._server.stdout.readline())["status"]
            finally:
                timer.cancel()
            if expired.is_set():
                raise subprocess.TimeoutExpired(argv, timeout, out.read_text(), err.read_text())
            return status, out.read_text(), err.read_text()


_server: Forked | None = None


def run(command: list[str], cwd: Path, env: dict[str, str], timeout: float = 600) -> subprocess.CompletedProcess[str]:
    """``subprocess.run(command, cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout)``, forked from the
    warm server when ``command`` is ``[sys.executable, "-m", MODULE, ...]`` or ``[.../egoeval, ...]`` and ``env``
    sets Python's start-up (PYTHON*, locale) as the server had it; any other command runs as a plain subprocess.
    A command past ``timeout`` is killed and raises subprocess.TimeoutExpired, as with subprocess.run."""
    global _server
    python = command[:2] == [sys.executable, "-m"] and len(command) > 2
    script = Path(command[0]).name == "egoeval"
    if _server is None:
        _server = Forked(dict(env))
    startup = [key for key in set(env) | set(_server.env) if key.startswith(("PYTHON", "LC_", "LANG"))]
    if not (python or script) or any(env.get(key) != _server.env.get(key) for key in startup):
        return subprocess.run(command, cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout)
    argv = ["-m", *command[2:]] if python else ["egoeval", *command[1:]]
    path0 = str(Path(cwd).resolve()) if python else str(Path(command[0]).parent)
    status, stdout, stderr = _server.run(argv, path0, cwd, env, timeout)
    return subprocess.CompletedProcess(command, status, stdout, stderr)
