"""The ``egoeval`` commands misused: an output that would destroy an input or a tracked file, a folder for a file, a
binary input, extra arguments, a tolerance that would talk the audit into yes, a closed or full stdout. Each gets
one clear line and exit 2 (75 for a full disk), never a traceback, and nothing is written."""

from __future__ import annotations

import json
import math
import shutil
import subprocess
import sys
from pathlib import Path

import forked
import pytest
from conftest import EGOEVAL, TEST_DATA, copy_repo, tool_env

from egoeval.audit import audit

pytestmark = pytest.mark.bad_input
MOT = TEST_DATA / "mot"
EVAL = {"clip": {"m": {"best": {"results": [1, 1], "correct": [1, 1]}, "sensible": {}}}}


def egoeval(*args: str | Path, cwd: Path | None = None, shell_suffix: str = "") -> subprocess.CompletedProcess[str]:
    """The console script; with ``shell_suffix`` (a redirection) through bash."""
    if shell_suffix:
        command = " ".join(f"'{word}'" for word in [EGOEVAL, *map(str, args)]) + shell_suffix
        return subprocess.run(command, shell=True, executable="/bin/bash", cwd=cwd, capture_output=True, text=True)
    return forked.run([EGOEVAL, *map(str, args)], cwd or Path.cwd(), tool_env())


def one_error(run: subprocess.CompletedProcess[str], code: int = 2) -> str:
    assert run.returncode == code, run.stdout + run.stderr
    assert "Traceback" not in run.stderr
    lines = [line for line in run.stderr.splitlines() if line.strip()]
    return lines[-1]


@pytest.fixture
def mot(tmp_path: Path) -> Path:
    """A copy of the MOTChallenge fixture: gt/ and pred/ folders."""
    return Path(shutil.copytree(MOT, tmp_path / "mot"))


@pytest.fixture
def eval_json(tmp_path: Path) -> Path:
    path = tmp_path / "eval.json"
    path.write_text(json.dumps(EVAL))
    return path


@pytest.fixture(scope="module")
def workspace(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A fresh clone of this repository (its committed metrics, plots and dvc.lock; nothing run)."""
    return copy_repo(tmp_path_factory.mktemp("clone"))


# ---------------------------------------------------------------- an output never destroys an input


def test_score_norms_refuses_to_write_its_scores_over_its_predictions(eval_json: Path) -> None:
    before = eval_json.read_bytes()
    line = one_error(egoeval("score-norms", "--official-eval", eval_json, "--json", eval_json))
    assert (
        line
        == f"egoeval score-norms: {eval_json}: is this command's input {eval_json}: write the output to another file"
    )
    assert eval_json.read_bytes() == before


def test_an_output_through_a_link_onto_the_input_is_refused(eval_json: Path, tmp_path: Path) -> None:
    before = eval_json.read_bytes()
    (tmp_path / "scores.json").symlink_to(eval_json)
    line = one_error(egoeval("score-norms", "--official-eval", eval_json, "--json", tmp_path / "scores.json"))
    assert "is this command's input" in line and eval_json.read_bytes() == before


@pytest.mark.parametrize("where", ["gt/TUD-Campus.txt", "pred/TUD-Campus.txt", "pred/new.json"])
def test_score_tracks_refuses_an_output_inside_its_inputs(mot: Path, where: str) -> None:
    before = {path: path.read_bytes() for path in mot.rglob("*.txt")}
    line = one_error(egoeval("score-tracks", mot / "gt", mot / "pred", "--json", mot / where))
    folder = where.split("/")[0]
    assert line == (
        f"egoeval score-tracks: {mot / where}: is this command's input {mot / folder}: write the output to another file"
    )
    assert {path: path.read_bytes() for path in mot.rglob("*.txt")} == before and not (mot / "pred/new.json").exists()


@pytest.mark.parametrize(
    ("command", "tracked"),
    [
        (["report", "--out", "metrics/egonormia.json"], "metrics/egonormia.json"),
        (["report", "--out", "dvc.lock"], "dvc.lock"),
        (["report", "--out", ".dvc/cache/files/md5/page.html"], ".dvc"),
        (["report", "--out", "data/egohumans/sample/new.html"], "data/egohumans/sample"),
        (["score-norms", "--official-eval", "EVAL", "--json", "metrics/egohumans.json"], "metrics/egohumans.json"),
        (["score-norms", "--official-eval", "EVAL", "--json", "params.yaml"], "params.yaml"),
        (["score-tracks", "GT", "PRED", "--json", "plots/egonormia/categories.csv"], "plots/egonormia/categories.csv"),
    ],
)
def test_no_command_writes_over_a_file_the_pipeline_tracks(
    workspace: Path, eval_json: Path, mot: Path, command: list[str], tracked: str
) -> None:
    before = {name: (workspace / name).read_bytes() for name in ("dvc.lock", "params.yaml", "metrics/egonormia.json")}
    places = {"EVAL": str(eval_json), "GT": str(mot / "gt"), "PRED": str(mot / "pred")}
    args = [places.get(word, word) for word in command]
    line = one_error(egoeval(*args, cwd=workspace))
    out = args[args.index("--out" if "--out" in args else "--json") + 1]
    assert line.endswith(f"{out}: the pipeline in {workspace} tracks {tracked}: write the output to another file")
    assert {name: (workspace / name).read_bytes() for name in before} == before
    assert not (workspace / "data/egohumans/sample/new.html").exists()


def test_the_report_may_write_its_own_output(workspace: Path) -> None:
    """``reports/index.html`` is the report stage's own output: allowed (here it then misses the stages' data)."""
    line = one_error(egoeval("report", "--out", "reports/index.html", cwd=workspace))
    assert "tracks" not in line and "data/egonormia/fetched/items.parquet: file not found" in line


@pytest.mark.parametrize("command", ["score-norms", "score-tracks", "report"])
def test_an_output_naming_a_folder_is_refused(
    workspace: Path, eval_json: Path, mot: Path, tmp_path: Path, command: str
) -> None:
    (tmp_path / "folder").mkdir()
    args = {
        "score-norms": ["--official-eval", eval_json, "--json"],
        "score-tracks": [mot / "gt", mot / "pred", "--json"],
        "report": ["--out"],
    }[command]
    line = one_error(egoeval(command, *args, tmp_path / "folder", cwd=workspace))
    assert line.endswith(f"{tmp_path / 'folder'}: is a folder: name the file to write")
    assert list((tmp_path / "folder").iterdir()) == []


# ---------------------------------------------------------------- inputs and arguments


@pytest.mark.parametrize("command", ["score-norms", "compare"])
def test_a_binary_input_is_named(tmp_path: Path, command: str) -> None:
    binary = tmp_path / "model.bin"
    binary.write_bytes(bytes(range(256)) * 4)
    args = ["--official-eval", binary] if command == "score-norms" else [binary]
    line = one_error(egoeval(command, *args))
    assert f"{binary}: not a readable JSON file" in line


def test_a_binary_tracks_file_is_named(mot: Path) -> None:
    (mot / "pred" / "TUD-Campus.txt").write_bytes(b"\x89PNG\r\n\x1a\n" + bytes(range(256)))
    line = one_error(egoeval("score-tracks", mot / "gt", mot / "pred"))
    assert str(mot / "pred" / "TUD-Campus.txt") in line


@pytest.mark.parametrize(
    "args",
    [
        ["check-params", "params.yaml", "extra"],
        ["score-norms", "--official-eval", "EVAL", "extra"],
        ["score-tracks", "GT", "PRED", "extra"],
        ["compare", "metrics/egonormia.json", "extra"],
        ["report", "extra"],
        ["audit", "metrics/egonormia.json", "--tolerance"],
        ["no-such-command"],
    ],
    ids=lambda args: " ".join(args),
)
def test_extra_or_missing_arguments_get_usage_not_silence(
    workspace: Path, eval_json: Path, mot: Path, args: list[str]
) -> None:
    places = {"EVAL": str(eval_json), "GT": str(mot / "gt"), "PRED": str(mot / "pred")}
    run = egoeval(*[places.get(word, word) for word in args], cwd=workspace)
    assert run.returncode == 2 and run.stdout == "" and "Traceback" not in run.stderr, run.stderr
    assert "usage: egoeval" in run.stderr


@pytest.mark.parametrize(
    "module",
    [
        "stages.egohumans.track --tracker nope --mode gt",
        "stages.egohumans.track --tracker bytetrack --mode nope",
        "stages.egonormia.score extra",
        "stages.params extra",
    ],
)
def test_a_stage_given_a_wrong_argument_says_which(workspace: Path, module: str) -> None:
    run = forked.run([sys.executable, "-m", *module.split()], workspace, tool_env())
    line = one_error(run)
    if "nope --mode" in module:
        assert line == (
            "error: bad input: egohumans.track.config: --tracker 'nope' is not one of its keys "
            "(botsort, bytetrack, egomotion, linked, multiview, world)"
        )
    else:
        assert "error:" in line and ("nope" in line or "extra" in line)


# ---------------------------------------------------------------- the audit's verdict


@pytest.mark.parametrize("tolerance", ["nan", "inf", "-inf", "-1", "-0.5", "ten", ""])
def test_a_tolerance_that_is_not_finite_and_non_negative_is_refused(workspace: Path, tolerance: str) -> None:
    run = egoeval("audit", "metrics/egonormia.json", f"--tolerance={tolerance}", cwd=workspace)
    line = one_error(run)
    assert line == f"egoeval audit: error: argument --tolerance: must be a finite number >= 0, got {tolerance!r}"
    assert run.stdout == ""  # no verdict at all


@pytest.mark.parametrize("tolerance", [math.nan, math.inf, -1.0])
def test_the_audit_itself_refuses_such_a_tolerance(workspace: Path, tolerance: float) -> None:
    with pytest.raises(ValueError, match="tolerance must be a finite number >= 0"):
        audit([workspace / "metrics/egonormia.json"], workspace, tolerance)


def test_keep_must_name_a_new_or_empty_folder(workspace: Path) -> None:
    line = one_error(egoeval("audit", "metrics/egonormia.json", "--keep", "metrics", cwd=workspace))
    assert (
        line
        == "egoeval audit: bad input: metrics: --keep must name a new or empty folder (the audit re-derives into it)"
    )


# ---------------------------------------------------------------- standard output


@pytest.mark.parametrize(
    ("command", "redirect", "code", "message"),
    [
        ("score-norms", " >&-", 2, "egoeval score-norms: standard output is closed: redirect it to a file instead"),
        (
            "score-norms",
            " >/dev/full",
            75,
            "egoeval score-norms: error: standard output: transient failure: "
            "No space left on device: free space on the disk and run again",
        ),
        ("check-params", " >&-", 2, "egoeval check-params: standard output is closed: redirect it to a file instead"),
        (
            "check-params",
            " >/dev/full",
            75,
            "egoeval check-params: error: standard output: transient failure: "
            "No space left on device: free space on the disk and run again",
        ),
    ],
)
def test_a_closed_or_full_stdout_is_an_error_not_silence(
    workspace: Path, eval_json: Path, command: str, redirect: str, code: int, message: str
) -> None:
    args = ["--official-eval", eval_json] if command == "score-norms" else []
    run = egoeval(command, *args, cwd=workspace, shell_suffix=redirect)
    assert one_error(run, code) == message


def test_a_json_output_past_the_file_size_limit_is_transient(eval_json: Path, tmp_path: Path) -> None:
    out = tmp_path / "scores.json"
    run = egoeval("score-norms", "--official-eval", eval_json, "--json", out, shell_suffix=" 2>&1 >/dev/null")
    assert run.returncode == 0
    limited = subprocess.run(
        f"ulimit -f 0; '{EGOEVAL}' score-norms --official-eval '{eval_json}' --json '{out}' >/dev/null",
        shell=True,
        executable="/bin/bash",
        capture_output=True,
        text=True,
    )
    assert one_error(limited, 75) == (
        f"egoeval score-norms: error: transient failure: {out}: File too large: raise the file size limit (ulimit -f) "
        "and run again"
    )
    assert json.loads(out.read_text())["models"]["m"]["n"] == 1  # the last good output stays
