"""Model names that would share a headline file are refused by check-params, before any call is paid for (issue 28
item 15): the score stage used to stop with "two headline rows share a file" after the calls were made."""

from __future__ import annotations

import copy
import subprocess
from pathlib import Path

import pytest
import yaml
from conftest import EGOEVAL, REPO, tool_env

from egoeval.headline import file_stem

BASE = yaml.safe_load((REPO / "params.yaml").read_text())


@pytest.mark.bad_input
@pytest.mark.parametrize(
    ("name", "other"), [("x/y", file_stem("x/y")), ("gpt-4o", "GPT-4o")], ids=["hashed-stem", "case"]
)
def test_check_params_refuses_model_names_that_share_a_headline_file(tmp_path: Path, name: str, other: str) -> None:
    params = copy.deepcopy(BASE)
    params["egonormia"]["model"]["name"] = name
    params["egonormia"]["baselines"] = [{"backend": "random", "name": other}]
    path = tmp_path / "params.yaml"
    path.write_text(yaml.safe_dump(params, sort_keys=False))
    done = subprocess.run([EGOEVAL, "check-params", str(path)], capture_output=True, text=True, env=tool_env())
    assert done.returncode == 2, done.stdout + done.stderr
    assert f"egonormia: model names {name!r} and {other!r} would share one headline file" in done.stderr
    assert "Traceback" not in done.stderr
    params["egonormia"]["baselines"] = [{"backend": "random", "name": "x_y"}]  # a file of its own: fine
    path.write_text(yaml.safe_dump(params, sort_keys=False))
    done = subprocess.run([EGOEVAL, "check-params", str(path)], capture_output=True, text=True, env=tool_env())
    assert done.returncode == 0, done.stderr
