"""An auditor elsewhere: clone A runs and pushes to a DVC remote, clone B pulls and audits with no model call."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from conftest import copy_workspace, dvc, tool_env, write_params
from openai_server import OpenAIServer

from egoeval.audit import EXIT_NOT_PULLED
from egoeval.dvc_project import pinned_output

pytestmark = pytest.mark.slow
KEY_ENV = "EGOEVAL_REMOTE_TEST_KEY"
REPORTS = ("metrics/egonormia.json", "metrics/egohumans.json")
ANSWERS = ("data/egonormia/responses.parquet", "data/egonormia/descriptions.parquet")


def run(root: Path, *command: str) -> subprocess.CompletedProcess[str]:
    env = tool_env(**{KEY_ENV: "sk-remote-test"})
    return subprocess.run(command, cwd=root, env=env, capture_output=True, text=True, check=False, timeout=1200)


def git(root: Path, *args: str) -> None:
    done = run(root, "git", "-c", "user.name=t", "-c", "user.email=t@t", *args)
    assert done.returncode == 0, done.stderr


def audit(root: Path, *options: str, reports: tuple[str, ...] = REPORTS) -> subprocess.CompletedProcess[str]:
    return run(root, sys.executable, "-m", "egoeval.cli", "audit", *reports, *options)


def test_a_second_clone_audits_from_a_dvc_remote_with_no_model_call(reproduced: Path, tmp_path: Path) -> None:
    # the reproduced sample with another model: its EgoNormia stages run again, EgoHumans' are up to date
    first = copy_workspace(reproduced, tmp_path / "a")
    with OpenAIServer() as server:
        model = {"backend": "openai", "name": "loopback-vlm", "base_url": server.url, "api_key_env": KEY_ENV}
        write_params(first, {"egonormia": {"model": model, "describe": {"source": "model"}}})
        repro = run(first, "dvc", "repro")
        assert repro.returncode == 0, repro.stdout[-3000:] + repro.stderr[-3000:]
        assert server.requests, "the model under evaluation was asked nothing"
        git(first, "add", "-A")
        git(first, "commit", "-qm", "a run")
        assert dvc(first, "remote", "add", "-d", "storage", str(tmp_path / "remote")).returncode == 0
        git(first, "commit", "-qam", "a DVC remote")
        pushed = dvc(first, "push")
        assert pushed.returncode == 0, pushed.stdout + pushed.stderr

        second = tmp_path / "b"
        git(tmp_path, "clone", "-q", str(first), str(second))
        assert not (second / ".egoeval-cache").exists()  # no response cache travels with git
        pulled = dvc(second, "pull")
        assert pulled.returncode == 0, pulled.stdout + pulled.stderr
        asked = len(server.requests)
        # every EgoNormia stage again, the answers replayed from the pulled outputs (EgoHumans calls no model; its
        # stages re-derived from scratch equal the committed numbers: the reproduced workspace, tests/test_pipeline.py)
        result = audit(second, "--full", reports=REPORTS[:1])
        assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
        assert len(server.requests) == asked  # not one model call
        assert "more from pinned outputs" in result.stdout and "0 from the local response cache" in result.stdout
        assert result.stdout.rstrip().endswith("verdict: reproduces")

        # a remote without the model answers: the audit says which and what a re-run would cost
        third = tmp_path / "c"
        git(tmp_path, "clone", "-q", str(first), str(third))
        assert dvc(third, "pull").returncode == 0
        for answers in ANSWERS:  # as if the remote had every output but these
            md5 = pinned_output(third, answers)
            (third / ".dvc/cache/files/md5" / md5[:2] / md5[2:]).unlink()
            (third / answers).unlink()
        result = audit(third)
        assert len(server.requests) == asked
    assert result.returncode == EXIT_NOT_PULLED, result.stdout[-3000:] + result.stderr[-3000:]
    lines = [line for line in result.stdout.splitlines() if "model answers are missing" in line]
    assert len(lines) == 1, result.stdout
    (line,) = lines
    assert line.startswith("  MISSING  stage egonormia_describe:") and "verdict: NOT PULLED" in result.stdout
    assert f"not pulled: {', '.join(ANSWERS)}" in line
    assert "re-deriving them costs 16 model calls" in line  # the describe stage asks one per clip, first
