"""tests/forked.py gives what ``subprocess.run`` gives: the same exit status, stdout and stderr, byte for byte."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import forked
import pytest
from conftest import EGOEVAL, REPO, tool_env

PROBE = """import os, sys
import egoeval
print(__name__, __file__, sys.argv, os.getcwd(), os.environ.get("PROBE_VALUE"), egoeval.__file__)
print("to stderr", file=sys.stderr)
code = os.environ.get("PROBE_EXIT")
sys.exit(int(code) if code and code.isdigit() else code)  # None: 0; a text: printed, 1
"""


@pytest.mark.parametrize(
    ("command", "in_repo"),
    [
        ([sys.executable, "-m", "stages.egonormia.fetch", "--help"], True),
        ([sys.executable, "-m", "stages.egohumans.fetch", "--no-such-option"], True),
        ([EGOEVAL, "check-params"], True),
        ([EGOEVAL, "score-tracks"], True),
        ([EGOEVAL, "check-params"], False),  # no params.yaml here: exit 2, naming it
        ([sys.executable, "-m", "no_such_module"], False),
        ([sys.executable, "-m", "probe", "a", "b c"], False),  # the module in the working directory, its argv
    ],
)
def test_a_forked_command_gives_what_a_new_process_gives(command: list[str], in_repo: bool, tmp_path: Path) -> None:
    (tmp_path / "probe.py").write_text(PROBE)
    cwd = REPO if in_repo else tmp_path
    for env in (tool_env(), tool_env(PROBE_VALUE="x", PROBE_EXIT="3"), tool_env(PROBE_EXIT="stopped: why")):
        fresh = subprocess.run(command, cwd=cwd, env=env, capture_output=True, text=True, timeout=120)
        warm = forked.run(command, cwd, env, timeout=120)
        assert (warm.returncode, warm.stdout, warm.stderr) == (fresh.returncode, fresh.stdout, fresh.stderr)


def test_a_forked_command_past_its_timeout_is_killed(tmp_path: Path) -> None:
    (tmp_path / "sleeper.py").write_text("import time\ntime.sleep(60)\n")
    with pytest.raises(subprocess.TimeoutExpired):
        forked.run([sys.executable, "-m", "sleeper"], tmp_path, tool_env(), timeout=1)
