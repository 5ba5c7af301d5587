"""``egoeval audit`` on a real workspace: `dvc repro` in a temporary copy, then reported numbers audited against it."""

from __future__ import annotations

import json
import os
import shutil
import sqlite3
import subprocess
import sys
from pathlib import Path

import forked
import pandas as pd
import pytest
import yaml
from conftest import REPO, copy_workspace, dvc, tool_env

from egoeval.audit import EXIT_NOT_PULLED, main, read_report, run_stages
from egoeval.core.benchmarks import Findings
from egoeval.core.errors import InputError
from egoeval.core.settings import workspace_settings
from egoeval.dvc_project import StageInfo, pinned_output, pipeline_stages
from egoeval.egohumans.audit import compare_tracks
from egoeval.egonormia.audit import compare_eval_json

RUN = "bytetrack-file"  # a tracking run of the bundled sample
BENCHMARKS = ("egonormia", "egohumans")
Rederived = tuple[subprocess.CompletedProcess, Path]


def audit(root: Path, *reported: str | Path) -> subprocess.CompletedProcess[str]:
    """The console command, run from inside the workspace as a user would."""
    command = [sys.executable, "-m", "egoeval.cli", "audit", *map(str, reported)]
    return forked.run(command, root, tool_env())


@pytest.fixture(scope="module")
def rederived(reproduced: Path, tmp_path_factory: pytest.TempPathFactory) -> Rederived:
    """One audit of every kind of report (all untouched), keeping its re-derivation for the comparison tests."""
    outside = tmp_path_factory.mktemp("reports")
    shutil.copytree(reproduced / "data/egohumans/tracks" / RUN, outside / RUN)
    baseline = {name: json.loads((reproduced / f"metrics/{name}.json").read_text()) for name in BENCHMARKS}
    (outside / "baseline.json").write_text(json.dumps(baseline))
    work = outside / "work"
    result = audit(
        reproduced,
        "metrics/egonormia.json",
        "metrics/egohumans.json",
        "data/egonormia/predictions_eval.json",
        outside / RUN,
        outside / "baseline.json",
        "--keep",
        work,
    )
    return result, work


@pytest.mark.slow
def test_every_kind_of_report_reproduces(rederived: Rederived) -> None:
    result, _ = rederived
    assert result.returncode == 0, result.stdout + result.stderr
    out = result.stdout
    assert "every parameter, input and output matches dvc.lock" in out
    assert "every output equals dvc.lock's" in out
    assert "(eval-json)" in out and "every clip's answers reproduce" in out
    assert "(tracks)" in out and f"compared with the re-derived run {RUN}\n" in out
    assert out.count("reported numbers reproduce within 1e-06") == 5  # 2 metrics files, eval-JSON, tracks, baseline
    assert "DIFF" not in out and out.rstrip().endswith("verdict: reproduces")
    # only the stages writing what the reports are compared with re-ran; every stage above them, unchanged since
    # dvc.lock, gave its pinned outputs (the tracks of the other runs, the answers: no model call)
    ended = stages_run(result)
    targets = ["egonormia_parse", "egonormia_score", f"egohumans_track@{RUN}", "egohumans_score"]
    assert sorted(ended) == sorted(targets)
    assert ended.index("egonormia_parse") < ended.index("egonormia_score")
    assert ended.index(f"egohumans_track@{RUN}") < ended.index("egohumans_score")
    reused = next(line for line in out.splitlines() if "reused the pinned outputs of" in line)
    assert "egonormia_infer" in reused and "egohumans_track@world-gt" in reused and f"@{RUN}" not in reused
    assert "model answers: none needed" in out
    assert "audit: checking the workspace" in result.stderr and "audit: re-deriving in" in result.stderr


def stages_run(result: subprocess.CompletedProcess[str]) -> list[str]:
    """The stages an audit re-ran, in the order they ended (its progress on stderr)."""
    return [line.split()[1] for line in result.stderr.splitlines() if line.startswith("audit: ") and " done (" in line]


@pytest.mark.slow
def test_full_rederives_every_stage_from_the_pinned_inputs(reproduced: Path) -> None:
    result = audit(reproduced, "metrics/egonormia.json", "--full")
    assert result.returncode == 0, result.stdout + result.stderr
    # progress on stderr as it goes: every stage below the pinned inputs re-ran once, after its upstream stages
    ended = stages_run(result)
    stages = {info.name: info for info in pipeline_stages(reproduced) if info.name in ended}
    assert (
        sorted(ended)
        == sorted(stages)
        == sorted(["egonormia_frames", "egonormia_describe", "egonormia_infer", "egonormia_parse", "egonormia_score"])
    )
    assert all(ended.index(up) < ended.index(name) for name in ended for up in stages[name].upstream if up in stages)
    assert "reused the pinned outputs" not in result.stdout and "more from pinned outputs" in result.stdout
    assert "egohumans" not in result.stdout + result.stderr  # an EgoNormia target needs none of EgoHumans' stages


@pytest.mark.slow
def test_a_damaged_cache_object_is_rederived_not_reused(reproduced: Path, tmp_path: Path) -> None:
    root = copy_workspace(reproduced, tmp_path / "ws")
    run = "world-gt"
    listing = pinned_output(root, f"data/egohumans/tracks/{run}")
    objects = root / ".dvc/cache/files/md5"
    first = json.loads((objects / listing[:2] / listing[2:]).read_text())[0]["md5"]
    damaged = objects / first[:2] / first[2:]
    content = damaged.read_text()
    damaged.unlink()  # a hard link to the shared workspace's object (conftest.copy_workspace): replaced, not rewritten
    damaged.write_text(content.replace("1", "2", 1))  # same name, other content
    result = audit(root, "metrics/egohumans.json")
    reused = next(line for line in result.stdout.splitlines() if "reused the pinned outputs of" in line)
    assert f"egohumans_track@{run}" not in reused and "egohumans_track@bytetrack-gt" in reused
    assert stages_run(result) == [f"egohumans_track@{run}", "egohumans_score"]
    # the re-derived tracks give the reported numbers; the damaged cache object itself is named
    assert "DIFF  output data/egohumans/tracks/world-gt: not in cache since dvc.lock" in result.stdout
    assert "3. metrics/egohumans.json" in result.stdout and "reported numbers reproduce" in result.stdout


@pytest.mark.slow
def test_a_clone_that_did_not_pull_is_told_what_is_missing(reproduced: Path, tmp_path: Path) -> None:
    first = copy_workspace(reproduced, tmp_path / "a")
    assert dvc(first, "remote", "add", "-d", "storage", str(tmp_path / "remote")).returncode == 0
    assert dvc(first, "push").returncode == 0
    for args in (["add", "-A"], ["commit", "-qm", "a run and its DVC remote"]):
        subprocess.run(["git", "-c", "user.name=t", "-c", "user.email=t@t", *args], cwd=first, check=True)
    clone = tmp_path / "b"
    subprocess.run(["git", "clone", "-q", str(first), str(clone)], check=True)

    result = audit(clone, "metrics/egonormia.json")
    out = result.stdout
    assert result.returncode == EXIT_NOT_PULLED, out + result.stderr
    missing = [line.split()[1] for line in out.splitlines() if line.startswith("  MISSING")]
    assert missing == ["data/egonormia/fetched"]  # the pinned input the EgoNormia stages need
    assert "pinned outputs are neither here nor in the DVC cache (not pulled): data/egonormia/" in out
    assert "`dvc pull` fetches" in out and "verdict: NOT PULLED" in out
    assert "DIFF" not in out and "egohumans" not in out  # nothing differs; EgoHumans is not what was asked

    assert dvc(clone, "pull").returncode == 0
    result = audit(clone, "metrics/egonormia.json")
    assert result.returncode == 0 and result.stdout.rstrip().endswith("verdict: reproduces"), result.stdout


@pytest.mark.slow
def test_an_audit_from_a_subfolder_finds_the_project_and_takes_paths_from_there(reproduced: Path) -> None:
    command = [sys.executable, "-m", "egoeval.cli", "audit", "../metrics/egonormia.json"]
    result = subprocess.run(command, cwd=reproduced / "docs", env=tool_env(), capture_output=True, text=True)
    assert result.returncode == 0, result.stdout + result.stderr
    assert f"1. the workspace against {reproduced / 'dvc.lock'}" in result.stdout
    assert "3. ../metrics/egonormia.json (metrics)" in result.stdout and "verdict: reproduces" in result.stdout


def stage(name: str, cmd: str, *upstream: str) -> StageInfo:
    return StageInfo(name=name, cmd=cmd, upstream=upstream, metrics=())


def test_stages_run_after_their_upstream_side_by_side_and_none_start_after_a_failure(tmp_path: Path, capsys) -> None:
    def step(name: str, seconds: float, code: int = 0) -> str:  # records when it started and ended
        return f"date +%s.%N > {name}.start; sleep {seconds}; date +%s.%N > {name}.end; exit {code}"

    dag = [stage("a", step("a", 0.5)), stage("b", step("b", 0.5)), stage("c", step("c", 0.1), "a", "b")]
    assert run_stages(dag, tmp_path, dict(os.environ), workers=2) is None
    times = {n: {e: float((tmp_path / f"{n}.{e}").read_text()) for e in ("start", "end")} for n in "abc"}
    assert times["a"]["start"] < times["b"]["end"] and times["b"]["start"] < times["a"]["end"]  # side by side
    assert times["c"]["start"] >= max(times["a"]["end"], times["b"]["end"])  # after both upstream stages
    said = [line.split()[1] for line in capsys.readouterr().err.splitlines()]
    assert sorted(said[:2]) == ["a", "b"] and said[2:] == ["c"]

    failing = [stage("x", step("x", 0.1, 3)), stage("y", step("y", 0.1), "x"), stage("z", step("z", 1.0))]
    found = run_stages(failing, tmp_path, dict(os.environ), workers=1)
    assert found is not None and found[0].name == "x" and found[1].returncode == 3
    assert not (tmp_path / "y.start").exists() and not (tmp_path / "z.start").exists()  # nothing more started


@pytest.mark.slow
def test_a_tampered_number_is_named_with_its_delta(reproduced: Path, tmp_path: Path) -> None:
    metrics = json.loads((reproduced / "metrics/egonormia.json").read_text())
    true_value = metrics["blind"]["chance"]["action"]
    low, high = metrics["blind"]["chance"]["ci95"]["action"]
    metrics["blind"]["chance"]["action"] = true_value + 1.5
    (tmp_path / "reported.json").write_text(json.dumps(metrics))
    result = audit(reproduced, tmp_path / "reported.json")
    assert result.returncode == 1, result.stdout + result.stderr
    lines = [line for line in result.stdout.splitlines() if "DIFF" in line]
    assert len(lines) == 1
    assert f"blind/chance/action: reported {true_value + 1.5}, re-derived {float(true_value)} (delta +1.5" in lines[0]
    assert ("inside" if low <= true_value + 1.5 <= high else "outside") in lines[0]
    assert "the re-derived outputs equal dvc.lock's" in result.stdout
    assert "verdict: DOES NOT REPRODUCE (1 differences)" in result.stdout


@pytest.mark.slow
def test_changed_params_inputs_and_missing_answers_are_named(reproduced: Path, tmp_path: Path) -> None:
    root = tmp_path / "ws"
    copy_workspace(reproduced, root)
    params = yaml.safe_load((root / "params.yaml").read_text())
    params["egonormia"]["score"]["bootstrap_seed"] = 1
    (root / "params.yaml").write_text(yaml.safe_dump(params, sort_keys=False))
    clips = root / "data/egonormia/sample/clips.json"
    clips.write_text(clips.read_text() + "\n")
    items = pd.read_parquet(root / "data/egonormia/fetched/items.parquet")
    items.iloc[1:].to_parquet(root / "data/egonormia/fetched/items.parquet", index=False)  # drops a pinned item
    responses = pd.read_parquet(root / "data/egonormia/responses.parquet")
    lost = responses[(responses["setting"] == "pipeline") & (responses["subtask"] == "sensible")].iloc[3]
    with sqlite3.connect(root / ".egoeval-cache/responses.sqlite") as db:
        assert db.execute("DELETE FROM responses WHERE key = ?", (lost.request_key,)).rowcount == 1
    # and the pinned responses are not in the DVC cache either (never pulled): that answer exists nowhere
    md5 = pinned_output(root, "data/egonormia/responses.parquet")
    (root / ".dvc/cache/files/md5" / md5[:2] / md5[2:]).unlink()

    result = audit(root, "metrics/egonormia.json")
    out = result.stdout
    assert result.returncode == 1, out + result.stderr
    assert "param egonormia.score.bootstrap_seed: 0 in dvc.lock, 1 in params.yaml (used by egonormia_score)" in out
    assert "input data/egonormia/sample (clips.json): modified since dvc.lock (input of egonormia_fetch)" in out
    assert "output data/egonormia/fetched (items.parquet): modified since dvc.lock (output of egonormia_fetch)" in out
    # the re-derivation checked the pinned items out of DVC's cache, and replayed every cached answer but one
    assert f"{lost.id} pipeline/{lost.model} sensible: pinned" in out
    assert "(missing item: the answer is not in the response cache)" in out
    assert "note  model answers: " in out and "0 more from pinned outputs" in out
    assert "re-derived output data/egonormia/responses.parquet: not in cache since dvc.lock" in out
    reported = json.loads((reproduced / "metrics/egonormia.json").read_text())["pipeline"][lost.model]
    assert f"pipeline/{lost.model}/coverage: reported {float(reported['coverage'])}" in out


@pytest.mark.slow
def test_a_tampered_eval_json_names_the_clip(rederived: Rederived, tmp_path: Path) -> None:
    _, work = rederived
    answers = json.loads((work / "data/egonormia/predictions_eval.json").read_text())
    clip = sorted(answers)[2]
    best = answers[clip]["blind_chance"]["best"]  # the official results' name of the blind run
    right = best["results"][0] == best["correct"][0]
    best["results"][0] = -1 if right else best["correct"][0]
    both_moves = best["results"][1] == best["correct"][1]  # both = action and justification
    (tmp_path / "eval.json").write_text(json.dumps(answers))
    findings = Findings()
    report = read_report(tmp_path / "eval.json")
    compare_eval_json(report.path, report.data, work, 1e-6, findings)
    diffs = [line for line in findings.lines if "DIFF" in line]
    assert any(line.startswith("  DIFF  blind_chance/action: reported") for line in diffs), diffs
    assert any(line.startswith(f"  DIFF  {clip} blind_chance: reported") for line in diffs), diffs
    assert any(line.startswith("  DIFF  blind_chance/both: reported") for line in diffs) == both_moves
    assert len(diffs) == 2 + both_moves


@pytest.mark.slow
def test_tracker_results_folder_reproduces_or_differs(rederived: Rederived, tmp_path: Path) -> None:
    _, work = rederived
    folder = tmp_path / "some-results"  # not named after a run: compared with every run, the closest reported
    shutil.copytree(work / "data/egohumans/tracks" / RUN, folder)
    findings = Findings()
    compare_tracks(read_report(folder).path, work, workspace_settings(work).egohumans.score, 1e-6, findings)
    assert findings.differences == 0 and f"compared with the re-derived run {RUN} (the closest)" in findings.lines[0]

    sequence = sorted(folder.glob("*.txt"))[0]
    rows = sequence.read_text().splitlines()
    sequence.write_text("\n".join(rows[len(rows) // 2 :]) + "\n")  # the first half of the boxes is gone
    (folder / "99_unknown.txt").write_text(rows[0] + "\n")
    findings = Findings()
    compare_tracks(read_report(folder).path, work, workspace_settings(work).egohumans.score, 1e-6, findings)
    text = "\n".join(findings.lines)
    assert "DIFF  sequences not in the pinned ground truth: ['99_unknown']" in text
    assert f"DIFF  sequences/{sequence.stem}/FN: reported" in text and "DIFF  COMBINED/HOTA: reported" in text
    other = next(p for p in sorted(folder.glob("*.txt")) if p.stem not in (sequence.stem, "99_unknown"))
    assert f"DIFF  sequences/{other.stem}/" not in text  # the other sequences reproduce


@pytest.mark.bad_input
@pytest.mark.parametrize(
    ("content", "message"),
    [
        ("{not json", "not a readable JSON file"),
        ("[1, 2]", "expected a JSON object of objects"),
        ('{"a": {"b": 1}}', "neither a metrics JSON"),
    ],
)
def test_unreadable_reports_are_bad_input(tmp_path: Path, content: str, message: str, capsys) -> None:
    (tmp_path / "report.json").write_text(content)
    with pytest.raises(InputError, match=message):
        read_report(tmp_path / "report.json")
    assert main([str(tmp_path / "report.json"), "--root", str(tmp_path)]) == 2
    assert f"{tmp_path / 'report.json'}: {message}" in capsys.readouterr().err


@pytest.mark.bad_input
def test_a_missing_report_and_an_empty_folder_are_bad_input(tmp_path: Path, capsys) -> None:
    assert main([str(tmp_path / "absent.json")]) == 2
    assert "absent.json: no such file or folder" in capsys.readouterr().err
    with pytest.raises(InputError, match=r"not a results folder any benchmark reads"):
        read_report(tmp_path)


def test_the_exit_statuses_are_in_the_help_and_the_user_guide(capsys) -> None:
    with pytest.raises(SystemExit):
        main(["--help"])
    text = " ".join(capsys.readouterr().out.split())
    assert "0 when everything reproduces, 1 when something does not (DIFF lines), 2 on bad input, 3" in text
    assert "3 when pinned outputs the audit needs are not here" in text and "`dvc pull` fetches them" in text
    guide = " ".join((REPO / "docs/user-guide.md").read_text().split())
    assert "3 when pinned outputs the audit needs are not here (`MISSING`" in guide
    assert "--full" in text and "`--full` re-runs every stage below the pinned inputs" in guide
