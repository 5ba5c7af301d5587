"""params.yaml is validated whole before any stage works: every bad key is named with its value and what is allowed."""

from __future__ import annotations

import copy
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml
from conftest import EGOEVAL, REPO, copy_workspace, dvc, tool_env

from egoeval.core.errors import ParamsError
from egoeval.core.settings import load_settings, validate_params

BASE = yaml.safe_load((REPO / "params.yaml").read_text())
HUB = {**BASE["egonormia"]["fetch"], "source": "huggingface"}  # egonormia.fetch from the Hugging Face hub


def edited(path: str, value: Any) -> dict[str, Any]:
    """A copy of params.yaml with the dotted key set (``value=KeyError`` deletes it)."""
    params = copy.deepcopy(BASE)
    *parents, leaf = path.split(".")
    node = params
    for key in parents:
        node = node[key]
    if value is KeyError:
        del node[leaf]
    else:
        node[leaf] = value
    return params


# (dotted key, bad value, words the message must hold) — each case from a user's real mistake
BAD = [
    ("egonormia.model.temprature", 0.7, ["egonormia.model.temprature", "unknown key", "did you mean 'temperature'"]),
    ("egonormia.model.concurrency", "eight", ["egonormia.model.concurrency", "'eight'", "integer"]),
    ("egohumans.track.config.bytetrack.track_buffer", "thirty", ["track_buffer", "'thirty'", "integer"]),
    ("egonormia.infer", None, ["egonormia.infer", "mapping"]),
    ("egonormia.infer", {}, ["egonormia.infer.settings", "missing"]),
    ("egonormia.model.max_retries", -1, ["egonormia.model.max_retries", "-1", "greater than or equal to 0"]),
    ("egonormia.score.bootstrap_samples", 0, ["bootstrap_samples", "= 0"]),
    ("egonormia.frames.fps", -1, ["egonormia.frames.fps", "-1", "greater than 0"]),
    ("egonormia.frames.fps", 0, ["egonormia.frames.fps", "= 0", "greater than 0"]),
    ("egonormia.frames.reader", "opencv", ["egonormia.frames.reader", "'opencv'", "must be 'decord' or 'pyav'"]),
    ("egohumans.score.iou_threshold", 1.5, ["egohumans.score.iou_threshold", "1.5", "less than or equal to 1"]),
    ("egohumans.track.config.bytetrack.track_high_thresh", 25, ["track_high_thresh", "percent", "write 0.25"]),
    ("egohumans.track.config.botsort.match_thresh", 80, ["botsort.match_thresh", "percent", "write 0.8"]),
    ("egonormia.score.confidence", 95, ["egonormia.score.confidence", "percent", "write 0.95"]),
    ("egonormia.score.confidence", 1.0, ["egonormia.score.confidence", "strictly between 0 and 1"]),
    ("egonormia.infer.settings", "blind", ["egonormia.infer.settings", "'blind'", "list"]),
    ("egonormia.infer.settings", ["blind", "audio"], ["egonormia.infer.settings[1]", "'audio'", "'video'"]),
    ("egonormia.infer.settings", [], ["egonormia.infer.settings", "at least 1"]),
    ("egonormia.infer.settings", ["blind", "blind"], ["egonormia.infer.settings", "twice"]),
    ("egonormia.infer.max_failure_rate", KeyError, ["egonormia.infer.max_failure_rate", "missing"]),
    ("egonormia.infer.max_failure_rate", 10, ["max_failure_rate", "percent", "write 0.1"]),
    ("egonormia.model.base_url", "127.0.0.1:8000/v1", ["egonormia.model.base_url", "http://"]),
    ("egonormia.model.api_key_env", "sk-live-123", ["egonormia.model.api_key_env", "pattern"]),
    ("egonormia.model.backend", "gpt", ["egonormia.model.backend", "unknown backend 'gpt' (known: openai,"]),
    ("egonormia.model.retry_base_s", 60, ["egonormia.model", "retry_base_s (60"]),
    ("egonormia.report.clips", 0, ["egonormia.report.clips", "= 0", "greater than or equal to 1"]),
    ("egohumans.report.image_width", 10, ["egohumans.report.image_width", "= 10", "greater than or equal to 64"]),
    ("egohumans.report.frames", "four", ["egohumans.report.frames", "'four'", "integer"]),
    ("egonormia.fetch.source", "hf", ["egonormia.fetch.source", "'huggingface'"]),
    ("egonormia.fetch.hf_revision", "main", ["egonormia.fetch.hf_revision", "'main'", "pattern"]),
    ("egonormia.fetch", {**HUB, "hf_revision": None}, ["egonormia.fetch: ", "must pin a commit", "None"]),
    (
        "egonormia.fetch",
        {**HUB, "dataset": "ood_robot", "hf_revision": "1" * 40},
        ["egonormia.fetch", "use source local"],
    ),
    ("egonormia.fetch.split", "test", ["egonormia.fetch.split", "'verified'"]),
    ("egonormia.describe.source", "gemini", ["egonormia.describe.source", "'dataset'"]),
    ("egonormia.sample.seconds", 2, ["egonormia.sample.seconds", "greater than or equal to 5"]),
    ("egohumans.detect.modes", ["gt", "gt"], ["egohumans.detect.modes", "twice"]),
    ("egohumans.detect.modes", ["detector"], ["egohumans.detect.modes[0]", "'detector'"]),
    ("egohumans.detect.yolo_imgsz", 650, ["yolo_imgsz", "multiple of 32"]),
    ("egohumans.detect.yolo_conf", 25, ["yolo_conf", "percent"]),
    ("egohumans.detect.yolo_model", "yolo11n.pt", ["egohumans.detect.yolo_model", "architecture .yaml", "yolo11n.pt"]),
    ("egohumans.fetch.manifest", None, ["egohumans.fetch.manifest", "must name the sha256 manifest"]),
    ("egohumans.track.trackers", ["deepsort"], ["egohumans.track", "trackers[0] = 'deepsort'"]),
    ("egohumans.track.config.bytetrack.track_low_thresh", 0.5, ["track_low_thresh (0.5)", "track_high_thresh"]),
    ("egohumans.track.config.botsort.gmc_method", "optflow", ["gmc_method", "'sparseOptFlow'"]),
    ("egohumans.track.config.bytetrack.fuse_score", "yes", ["fuse_score", "true or false"]),
    ("egohumans.track.config.botsort.with_reid", True, ["egohumans.track.config.botsort", "with_reid must be false"]),
    ("egohumans.fetch.source", "s3", ["egohumans.fetch.source", "'local'"]),
    ("egohumans.fetch.modality", "rgb", ["egohumans.fetch.modality", "'ego_rgb'", "'exo'"]),
    ("egohumans.fetch.annotation", "/data/x.json", ["egohumans.fetch", "relative to the data root"]),
    ("egohumans.fetch.duplicate_videos", "merge", ["egohumans.fetch.duplicate_videos", "'drop'"]),
    ("egohumans.score.protocol", "motchallenge", ["egohumans.score.protocol", "(known: official, trackeval)"]),
    ("flows.schedule_cron", "nightly", ["flows.schedule_cron", "cron"]),
    ("flows.timezone", "CEST", ["flows.timezone", "IANA"]),
    ("flows.retries", -2, ["flows.retries", "greater than or equal to 0"]),
    ("flows.dask_workers", 0, ["flows.dask_workers", "greater than or equal to 1"]),
    ("egonormia.model.temperature", 3.0, ["egonormia.model.temperature", "less than or equal to 2"]),
    ("egonormia.model.temperature", "hot", ["egonormia.model.temperature", "'hot'", "a number"]),
    ("egonormia.model.max_tokens", 0, ["egonormia.model.max_tokens", "greater than or equal to 1"]),
    ("egonormia.model.timeout_s", 0, ["egonormia.model.timeout_s", "greater than 0"]),
    ("egonormia.model.retry_max_s", -1, ["egonormia.model.retry_max_s", "greater than 0"]),
    ("egonormia.model.concurrency", 0, ["egonormia.model.concurrency", "greater than or equal to 1"]),
    ("egonormia.model.concurrency", 8.5, ["egonormia.model.concurrency", "8.5", "integer"]),
    ("egonormia.model.api_key_env", "MY KEY", ["egonormia.model.api_key_env", "pattern"]),
    ("egonormia.model.base_url", "ftp://host/v1", ["egonormia.model.base_url", "http:// or https://"]),
    ("egonormia.model.name", "", ["egonormia.model.name", "at least 1 character"]),
    ("egonormia.baselines", "chance", ["egonormia.baselines", "a list"]),
    ("egonormia.infer.seed", "abc", ["egonormia.infer.seed", "integer"]),
    ("egonormia.score.bootstrap_seed", -3, ["egonormia.score.bootstrap_seed", "greater than or equal to 0"]),
    ("egonormia.sample.fps", 0, ["egonormia.sample.fps", "greater than or equal to 1"]),
    ("egohumans.score.iou_threshold", -0.1, ["egohumans.score.iou_threshold", "greater than 0"]),
    ("egohumans.track.config.bytetrack.match_thresh", 1.5, ["bytetrack.match_thresh", "between 0 and 1"]),
    ("egohumans.detect.yolo_batch", 0, ["egohumans.detect.yolo_batch", "greater than or equal to 1"]),
    ("egohumans.detect.yolo_weights", 3, ["egohumans.detect.yolo_weights", "a string"]),
    ("egohumans.sample.sequences", 0, ["egohumans.sample.sequences", "greater than or equal to 1"]),
    ("flows.tolerance", -1, ["flows.tolerance", "greater than or equal to 0"]),
    ("flows.baseline", 5, ["flows.baseline", "a string"]),
]


@pytest.mark.bad_input
@pytest.mark.parametrize(("key", "value", "words"), BAD, ids=[f"{k}={v!r}" for k, v, _ in BAD])
def test_bad_param_is_named(key: str, value: Any, words: list[str]) -> None:
    with pytest.raises(ParamsError) as caught:
        validate_params(edited(key, value))
    message = str(caught.value)
    assert message.startswith("params.yaml: invalid params")
    for word in words:
        assert word in message, message


@pytest.mark.bad_input
def test_yolo_mode_without_weights_is_refused_by_check_params(tmp_path: Path) -> None:
    params = edited("egohumans.detect.modes", ["gt", "yolo"])
    params["egohumans"]["detect"]["yolo_weights"] = None
    (tmp_path / "params.yaml").write_text(yaml.safe_dump(params))
    run = subprocess.run([EGOEVAL, "check-params", str(tmp_path / "params.yaml")], capture_output=True, text=True)
    assert run.returncode == 2 and "Traceback" not in run.stderr, run.stderr
    assert "egohumans.detect" in run.stderr and "mode yolo needs yolo_weights" in run.stderr, run.stderr


@pytest.mark.bad_input
@pytest.mark.parametrize(
    "revision", ["main", "v1.0", "refs/pr/2", "0" * 40, "1a6be84", "g" * 40, "1A6BE84" + "0" * 33, None]
)
def test_the_hub_source_needs_a_pinned_commit(revision: object) -> None:
    """Before anything is downloaded: a branch, tag, short or placeholder sha is refused, naming the key."""
    with pytest.raises(ParamsError, match=r"egonormia.fetch(.hf_revision = .*pattern|: .*must pin a commit)"):
        validate_params(edited("egonormia.fetch", {**HUB, "hf_revision": revision}))
    validate_params(edited("egonormia.fetch", {**HUB, "hf_revision": "1a6be84" + "0" * 33}))


@pytest.mark.bad_input
def test_every_error_is_listed_at_once() -> None:
    params = edited("egonormia.model.temprature", 0.7)
    params["egohumans"]["score"]["iou_threshold"] = 50
    with pytest.raises(ParamsError) as caught:
        validate_params(params)
    assert "temprature" in str(caught.value) and "iou_threshold" in str(caught.value)


@pytest.mark.bad_input
def test_unknown_section_and_not_a_mapping() -> None:
    with pytest.raises(ParamsError, match="egonormiaa: unknown key \\(did you mean 'egonormia'\\?\\)"):
        validate_params({**BASE, "egonormiaa": {}})
    with pytest.raises(ParamsError, match="must be a mapping"):
        validate_params(["egonormia"])


def test_one_benchmarks_stage_validates_and_imports_that_benchmark_only(tmp_path: Path) -> None:
    """A stage checks its own section (the params stage checks the whole file first) and loads no other benchmark's
    code, so adding or editing a benchmark re-runs none of the others' stages."""
    params = edited("egohumans.score.iou_threshold", 50)
    params["egonormia"]["model"]["temprature"] = 0.7
    (tmp_path / "params.yaml").write_text(yaml.safe_dump(params))
    for own, other, bad in [("egohumans", "egonormia", "iou_threshold"), ("egonormia", "egohumans", "temprature")]:
        probe = (
            "import sys; from egoeval.core.settings import load_settings; from egoeval.core.errors import ParamsError\n"
            f"try: load_settings({str(tmp_path / 'params.yaml')!r}, only={own!r})\n"
            "except ParamsError as error: print(error)\n"
            f"print(sorted(m for m in sys.modules if m.startswith('egoeval.{other}')))"
        )
        run = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True)
        assert bad in run.stdout and run.stdout.rstrip().endswith("[]"), run.stdout
    for section in ("egonormia", "egohumans"):  # every section is still required, and no unknown one is accepted
        with pytest.raises(ParamsError, match=f"{section}: missing"):
            validate_params({k: v for k, v in BASE.items() if k != section}, only="egonormia")
    with pytest.raises(ParamsError, match="egonormiaa: unknown key"):
        validate_params({**BASE, "egonormiaa": {}}, only="egohumans")


def test_the_repository_params_are_valid() -> None:
    settings = load_settings(REPO / "params.yaml")
    assert settings.egonormia.infer.settings == ["blind", "pipeline", "video"]


@pytest.mark.bad_input
def test_unreadable_and_malformed_files(tmp_path: Path) -> None:
    with pytest.raises(ParamsError, match="cannot read"):
        load_settings(tmp_path / "missing.yaml")
    broken = tmp_path / "params.yaml"
    broken.write_text("egonormia: [unclosed\n")
    with pytest.raises(ParamsError, match=f"{broken}: not valid YAML"):
        load_settings(broken)


@pytest.mark.bad_input
def test_check_params_command(tmp_path: Path) -> None:
    ok = subprocess.run([str(EGOEVAL), "check-params", str(REPO / "params.yaml")], capture_output=True, text=True)
    assert ok.returncode == 0, ok.stderr
    bad = tmp_path / "params.yaml"
    bad.write_text(yaml.safe_dump(edited("egonormia.model.temprature", 0.7)))
    run = subprocess.run([str(EGOEVAL), "check-params", str(bad)], capture_output=True, text=True)
    assert run.returncode == 2
    assert "egonormia.model.temprature: unknown key (did you mean 'temperature'?)" in run.stderr


@pytest.mark.bad_input
def test_a_stage_refuses_bad_params_before_any_work(tmp_path: Path) -> None:
    """The stage CLI exits 2 naming the key, and writes nothing (here: no fetched folder appears)."""
    (tmp_path / "params.yaml").write_text(yaml.safe_dump(edited("egonormia.fetch.split", "test")))
    run = subprocess.run(
        [sys.executable, "-m", "stages.egonormia.fetch"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        env={"PYTHONPATH": str(REPO), "PATH": str(Path(sys.executable).parent)},
    )
    assert run.returncode == 2, run.stderr
    assert "egonormia.fetch.split = 'test'" in run.stderr
    assert list(tmp_path.iterdir()) == [tmp_path / "params.yaml"]


KEPT = ("metrics/egonormia.json", "metrics/egohumans.json", "plots/egonormia/categories.csv", "dvc.lock")


@pytest.mark.slow
@pytest.mark.bad_input
def test_a_typo_in_params_stops_dvc_repro_and_keeps_the_last_good_outputs(reproduced: Path, tmp_path: Path) -> None:

    root = copy_workspace(reproduced, tmp_path / "ws")
    before = {name: (root / name).read_bytes() for name in KEPT}
    (root / "params.yaml").write_text(yaml.safe_dump(edited("egonormia.model.temprature", 0.7), sort_keys=False))
    run = dvc(root, "repro")
    assert run.returncode != 0 and "exited with 2" in run.stderr, run.stderr[-2000:]
    assert "egonormia.model.temprature: unknown key (did you mean 'temperature'?)" in run.stderr
    for name, content in before.items():
        assert (root / name).read_bytes() == content, f"{name} changed by the refused run"
    check = subprocess.run(
        [EGOEVAL, "check-params"], cwd=root, env=tool_env(), capture_output=True, text=True, check=False
    )
    assert check.returncode == 2 and "did you mean 'temperature'?" in check.stderr + check.stdout
