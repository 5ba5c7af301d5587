"""Install requirements into this interpreter's environment with uv, from the package sources pip is set up with.

`make setup` runs it (``.venv/bin/python .ci/install.py -e '.[test]'``): the same resolution pip would make (every
index searched for the best match, pip's constraint files honoured), installed from uv's cache by links instead of
unpacking each wheel again (torch's CUDA build alone is ~6 GB). Unlike pip, it compiles no bytecode up front (all
~22,000 modules, ~50 CPU s): Python writes a module's bytecode the first time a command imports it (the Makefile's
commands may, whatever PYTHONDONTWRITEBYTECODE says). uv reads no pip configuration, so pip's own (``pip config
list``: files and PIP_* variables; a variable beats a file, ``install`` beats ``global``) is passed on here.
Arguments after the script are ``uv pip install``'s. uv is the one beside this Python (the Makefile installs it
there), else the one on PATH.
"""

from __future__ import annotations

import os
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

LISTS = {  # pip option -> uv option, for options whose value is a whitespace-separated list
    "extra-index-url": "--extra-index-url",
    "find-links": "--find-links",
    "constraint": "--constraint",
    "trusted-host": "--allow-insecure-host",
}


def pip_settings() -> dict[str, str]:
    """pip's effective settings, as ``pip config list`` prints them, one value per option."""
    listed = subprocess.run(
        [sys.executable, "-m", "pip", "config", "list"], capture_output=True, text=True, check=True
    ).stdout
    found: dict[str, dict[str, str]] = {}
    for line in listed.splitlines():
        key, _, value = line.partition("=")
        section, _, option = key.rpartition(".")
        found.setdefault(option, {})[section] = shlex.split(value)[0] if value else ""
    order = (":env:", "install", "global")
    return {option: next(v[s] for s in order if s in v) for option, v in found.items() if any(s in v for s in order)}


def uv_arguments(settings: dict[str, str]) -> list[str]:
    """uv's options for pip's ``settings``."""
    arguments = ["--index-strategy", "unsafe-best-match"]
    if settings.get("index-url"):
        arguments += ["--index-url", settings["index-url"]]
    if settings.get("no-index", "").lower() in ("1", "true", "yes", "on"):
        arguments.append("--no-index")
    for option, flag in LISTS.items():
        for value in settings.get(option, "").split():
            arguments += [flag, value]
    return arguments


def main(requirements: list[str]) -> int:
    settings = pip_settings()
    env = dict(os.environ)
    if settings.get("cert"):
        env.setdefault("SSL_CERT_FILE", settings["cert"])
    beside = Path(sys.executable).with_name("uv")
    uv = str(beside) if beside.exists() else shutil.which("uv")
    if uv is None:
        print("error: uv not found beside this Python nor on PATH (pip install uv)", file=sys.stderr)
        return 2
    command = [uv, "pip", "install", "--quiet", "--python", sys.executable, *uv_arguments(settings)]
    return subprocess.run([*command, *requirements], env=env).returncode


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
