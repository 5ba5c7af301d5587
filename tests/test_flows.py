"""The Prefect orchestration (flows/): DVC-derived cache keys, caching across runs, retries, the regression report
and sharded inference, on a toy DVC project in a temporary folder (and on this repo); Prefect runs are slow."""

from __future__ import annotations

import hashlib
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import pytest
import yaml
from conftest import REPO, copy_repo, dvc, free_port, nightly_env, running, start, wait_healthy, write_params

from egoeval.core.settings import workspace_settings
from egoeval.dvc_project import cache_key, lock_snapshot, pipeline_stages, stage_state
from egoeval.reported import Metric, compare, flatten_metrics
from flows.nightly_report import build_report

if TYPE_CHECKING:
    from egoeval.egonormia.settings import EgoNormiaSettings

STEP = '''\
"""The toy pipeline's only program: every run appends its arguments to runs.log (not an output of any stage)."""
import json, sys
from pathlib import Path
import yaml

step = sys.argv[1]
params = yaml.safe_load(Path("toy.yaml").read_text())["toy"]
with open("runs.log", "a") as log:
    log.write(" ".join(sys.argv[1:]) + "\\n")
Path("work").mkdir(exist_ok=True)
if step == "prepare":
    p = params["prepare"]
    attempts = Path("runs.log").read_text().splitlines().count("prepare")
    if attempts <= p["fail_times"]:
        sys.exit(p["fail_code"])
    Path("work/prepared.txt").write_text(Path("src/input.txt").read_text() * p["scale"])
elif step == "count":
    text = Path("work/prepared.txt").read_text()
    half = text[: len(text) // 2] if sys.argv[2] == "left" else text[len(text) // 2 :]
    Path(f"work/count-{sys.argv[2]}.txt").write_text(str(len(half)))
elif step == "side":
    Path("work/side.txt").write_text("side")
else:
    size = sum(int(Path(f"work/count-{p}.txt").read_text()) for p in ("left", "right"))
    acc = params["score"]["accuracy"]
    metrics = {"total": {"size": size, "accuracy": {"value": acc, "ci95": [acc - 5, acc + 5]}}}
    Path("metrics/toy.json").write_text(json.dumps(metrics))
'''

DVC_YAML = """\
stages:
  prepare:
    cmd: python src/step.py prepare
    deps: [src/step.py, src/input.txt]
    params: [{toy.yaml: [toy.prepare]}]
    outs: [work/prepared.txt]
  count:
    matrix:
      part: [left, right]
    cmd: python src/step.py count ${item.part}
    deps: [src/step.py, work/prepared.txt]
    outs: ["work/count-${item.part}.txt"]
  side:
    cmd: python src/step.py side
    deps: [src/step.py]
    outs: [work/side.txt]
  score:
    cmd: python src/step.py score
    deps: [src/step.py, work/count-left.txt, work/count-right.txt]
    params: [{toy.yaml: [toy.score]}]
    metrics:
      - metrics/toy.json:
          cache: false
"""

TOY_PARAMS = {"toy": {"prepare": {"scale": 2, "fail_code": 0, "fail_times": 0}, "score": {"accuracy": 50.0}}}
# the flows validate params.yaml as egoeval's: the toy project keeps egoeval's with quicker retries
PARAMS = yaml.safe_load((REPO / "params.yaml").read_text())
PARAMS["flows"].update(tolerance=0.5, retries=2, retry_backoff_s=0.05, gate=None)
ORDER = ["prepare", "count@left", "count@right", "side", "score"]


def egonormia_settings() -> EgoNormiaSettings:
    """The repository's ``egonormia`` section (what a sharded form receives)."""
    from egoeval.egonormia.settings import EgoNormiaSettings

    return workspace_settings(REPO).named_section("egonormia", EgoNormiaSettings)


def _run(args: list[str], cwd: Path, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(args, cwd=cwd, env=env, capture_output=True, text=True, timeout=600)


def set_params(root: Path, **toy: dict[str, object]) -> None:
    params = yaml.safe_load((root / "toy.yaml").read_text())
    for section, values in toy.items():
        params["toy"][section].update(values)
    (root / "toy.yaml").write_text(yaml.safe_dump(params))


def summary_states(stdout: str, names: list[str]) -> dict[str, str]:
    """Stage -> final state from the summary table ``--once`` prints."""
    rows = (line.split() for line in stdout.splitlines())
    return {row[0]: row[1] for row in rows if len(row) >= 2 and row[0] in names}


def runs(root: Path) -> list[str]:
    log = root / "runs.log"
    return log.read_text().splitlines() if log.exists() else []


@pytest.fixture
def toy(tmp_path: Path) -> Path:
    """A fresh git + DVC project with the toy pipeline (nothing run yet)."""
    root = tmp_path / "toy"
    (root / "src").mkdir(parents=True)
    (root / "metrics").mkdir()
    (root / "src" / "step.py").write_text(STEP)
    (root / "src" / "input.txt").write_text("hello\n")
    (root / "dvc.yaml").write_text(DVC_YAML)
    (root / "params.yaml").write_text(yaml.safe_dump(PARAMS))
    (root / "toy.yaml").write_text(yaml.safe_dump(TOY_PARAMS))
    (root / ".gitignore").write_text("runs.log\n.egoeval-cache/\n")
    assert _run(["git", "init", "-q"], root).returncode == 0
    assert dvc(root, "init", "-q").returncode == 0
    return root


@pytest.fixture
def prefect_env(tmp_path: Path) -> dict[str, str]:
    return nightly_env(tmp_path / "prefect-home")


@pytest.fixture(scope="module")
def prefect_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[None]:
    """One temporary Prefect server (and database) for the in-process flow runs of this module."""
    from prefect.settings import PREFECT_HOME, temporary_settings
    from prefect.testing.utilities import prefect_test_harness

    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("PREFECT_SERVER_ANALYTICS_ENABLED", "false")
        mp.delenv("PREFECT_API_URL", raising=False)
        with temporary_settings({PREFECT_HOME: tmp_path_factory.mktemp("prefect-home")}), prefect_test_harness():
            yield


def on_shared_server(env: dict[str, str]) -> dict[str, str]:
    """``env`` pointed at the module's Prefect server (``prefect_server``), for a ``flows.nightly`` subprocess whose
    test is not about the temporary server (each one costs a server start-up; test_once_twice_... tests that path)."""
    from prefect.settings import PREFECT_API_URL

    return {**env, "PREFECT_API_URL": str(PREFECT_API_URL.value())}


def run_flow(root: Path) -> tuple[object, dict[str, str]]:
    """Run the nightly flow in this process; return its final state and each stage's final state name."""
    from flows.pipeline import FlowFailed, nightly_flow

    state = nightly_flow(root=str(root), return_state=True)
    data = state.result(raise_on_failure=False)
    data = data.summary if isinstance(data, FlowFailed) else data
    return state, {row["stage"]: row["state"] for row in data["stages"]}


def read_report_artifact(state: object) -> str:
    """The markdown artifact the flow run published, read back through the Prefect API."""
    from prefect.client.orchestration import get_client
    from prefect.client.schemas.filters import ArtifactFilter, ArtifactFilterFlowRunId

    from flows.config import REPORT_ARTIFACT_KEY

    flow_run_id = state.state_details.flow_run_id
    with get_client(sync_client=True) as client:
        artifacts = client.read_artifacts(
            artifact_filter=ArtifactFilter(flow_run_id=ArtifactFilterFlowRunId(any_=[flow_run_id]))
        )
    (artifact,) = [a for a in artifacts if a.key == REPORT_ARTIFACT_KEY]
    return artifact.data


# ---------------------------------------------------------------- stages and keys (no Prefect server)


def test_stages_follow_dvc_yaml_and_keys_use_dvc_hashes(toy: Path) -> None:
    stages = pipeline_stages(toy)
    assert [s.name for s in stages] == ORDER
    by_name = {s.name: s for s in stages}
    assert by_name["count@left"].upstream == ("prepare",)
    assert by_name["score"].upstream == ("count@left", "count@right")
    assert by_name["score"].metrics == ("metrics/toy.json",)
    assert by_name["count@right"].cmd == "python src/step.py count right"

    before = stage_state(toy, "prepare")
    md5 = {p: hashlib.md5((toy / p).read_bytes()).hexdigest() for p in ("src/step.py", "src/input.txt")}
    assert before.fingerprint == {
        "stage": "prepare",
        "cmd": "python src/step.py prepare",
        "deps": md5,
        "params": {"toy.yaml": {"toy.prepare": TOY_PARAMS["toy"]["prepare"]}},
    }
    assert (
        before.key
        == hashlib.sha256(json.dumps(before.fingerprint, sort_keys=True, separators=(",", ":")).encode()).hexdigest()
    )
    assert before.key == cache_key(before.fingerprint)
    assert before.changed

    assert dvc(toy, "repro").returncode == 0
    assert all(not stage_state(toy, name).changed for name in ORDER)
    assert stage_state(toy, "prepare").key == before.key  # the key depends on inputs, not on whether it ran

    set_params(toy, prepare={"scale": 3})
    after = {name: stage_state(toy, name) for name in ORDER}
    assert after["prepare"].key != before.key
    status = json.loads(dvc(toy, "status", "--json").stdout)
    assert {name for name, s in after.items() if s.changed} == set(status) == {"prepare"}


# ---------------------------------------------------------------- the report (pure functions)


def test_flatten_metrics_reads_both_benchmark_layouts() -> None:
    egonormia = {
        "blind": {
            "chance": {
                "action": 20.0,
                "both": 4.0,
                "n": 100,
                "ci95": {"action": [12.0, 28.0], "both": [1.0, 8.0]},
                "verified": {"action": None, "ci95": {"action": None}},
            }
        }
    }
    assert flatten_metrics(egonormia) == {
        "blind/chance/action": Metric(20.0, (12.0, 28.0)),
        "blind/chance/both": Metric(4.0, (1.0, 8.0)),
        "blind/chance/n": Metric(100.0),
    }
    egohumans = {"bytetrack-gt": {"COMBINED": {"HOTA": 61.5, "IDF1": 70.25}, "sequences": {"s1": {"IDSW": 3}}}}
    assert flatten_metrics(egohumans) == {
        "bytetrack-gt/COMBINED/HOTA": Metric(61.5),
        "bytetrack-gt/COMBINED/IDF1": Metric(70.25),
        "bytetrack-gt/sequences/s1/IDSW": Metric(3.0),
    }
    assert flatten_metrics({"a": {"value": 1.5, "ci95": [1.0, 2.0]}, "b": 2}) == {
        "a": Metric(1.5, (1.0, 2.0)),
        "b": Metric(2.0),
    }


def test_compare_uses_bootstrap_interval_plus_tolerance() -> None:
    base = {"acc": Metric(50.0, (45.0, 55.0)), "idf1": Metric(70.0), "gone": Metric(1.0), "same": Metric(3.0)}
    now = {"acc": Metric(44.4, (40.0, 49.0)), "idf1": Metric(70.4), "new": Metric(9.0), "same": Metric(3.0)}
    changes = {c.metric: c for c in compare("b", base, now, tolerance=0.5)}
    assert set(changes) == {"acc", "idf1", "gone", "new"}
    assert changes["acc"].allowed == (44.5, 55.5) and changes["acc"].regressed  # 44.4 < 45 - 0.5
    assert changes["idf1"].allowed == (69.5, 70.5) and not changes["idf1"].regressed
    assert changes["gone"].regressed and not changes["new"].regressed
    skewed = Metric(6.25, (0.0, 18.75))  # bootstrap intervals need not be symmetric
    for value, regressed in [(44.5, False), (55.5, False), (55.6, True)]:
        (change,) = compare("b", {"acc": base["acc"]}, {"acc": Metric(value)}, 0.5)
        assert change.regressed is regressed
    for value, regressed in [(19.25, False), (19.3, True), (-0.5, False)]:
        (change,) = compare("b", {"acc": skewed}, {"acc": Metric(value)}, 0.5)
        assert change.regressed is regressed
    gated = {c.metric: c for c in compare("b", base, now, tolerance=0.5, gate=["idf1"])}
    assert not gated["acc"].regressed and not gated["acc"].gated and not gated["gone"].regressed


def test_report_names_moved_metric_and_changed_inputs() -> None:
    producer = {"deps": {}, "params": {}, "outs": ["work/x"]}
    lock_old = {
        "p": producer,
        "s": {"deps": {"src/a.py": "a" * 32, "work/x": "b" * 32}, "params": {"params.yaml": {"t.k": 1}}, "outs": []},
    }
    lock_new = {
        "p": producer,
        "s": {"deps": {"src/a.py": "a" * 32, "work/x": "c" * 32}, "params": {"params.yaml": {"t.k": 2}}, "outs": []},
    }
    report = build_report(
        current={"toy": {"acc": {"value": 40.0, "ci95": [35.0, 45.0]}}},
        baseline={"toy": {"acc": {"value": 50.0, "ci95": [45.0, 55.0]}}},
        lock_now=lock_new,
        lock_baseline=lock_old,
        feeding={"toy": {"p", "s"}},
        tolerance=0.5,
        gate=None,
        stage_rows=[["s", "Completed", "1.0", ""]],
        baseline_path="metrics/baseline.json",
    )
    assert [c.metric for c in report.regressions] == ["acc"]
    assert (
        "| toy | acc | 50.00 [45.00, 55.00] | 40.00 [35.00, 45.00] | -10 | [44.50, 55.50] | REGRESSED |"
        in report.markdown
    )
    assert [(i.kind, i.name, i.old, i.new) for i in report.inputs["toy"]] == [
        ("output", "work/x", "b" * 32, "c" * 32),
        ("param", "t.k", 1, 2),
    ]
    assert "| work/x | output | bbbbbbbb | cccccccc | s |" in report.markdown
    assert report.failure_message().endswith("inputs changed: t.k")  # the param, not the output it changed


def test_report_leads_with_the_verdict_and_what_moved_most() -> None:
    """A param change moved 81 metrics: the verdict is the first heading, then the ten that moved most (the
    regression first, then by size), then stages and the whole diff."""
    baseline = {"toy": {f"m{k:02d}": {"value": 50.0, "ci95": [40.0, 60.0]} for k in range(81)}}
    current = {"toy": {f"m{k:02d}": {"value": 50.0 + k / 10, "ci95": [40.0, 60.0]} for k in range(81)}}
    current["toy"]["m00"] = {"value": 20.0, "ci95": [15.0, 25.0]}  # the one regression
    lock = {"s": {"deps": {}, "params": {}, "outs": []}}
    report = build_report(current, baseline, lock, lock, {"toy": {"s"}}, 0.5, None, [["s", "Completed", "1", ""]], "b")
    headings = [line for line in report.markdown.splitlines() if line.startswith("## ")]
    assert headings[:3] == ["## Verdict: FAILED", "## Moved most (10 of 81 that moved)", "## Stages"]
    top = report.markdown.split("## Moved most", 1)[1].split("## Stages", 1)[0]
    metrics = [row.split("|")[2].strip() for row in top.splitlines() if row.startswith("| toy |")]
    assert metrics == ["m00", "m80", "m79", "m78", "m77", "m76", "m75", "m74", "m73", "m72"]
    clean = build_report(baseline, baseline, lock, lock, {"toy": {"s"}}, 0.5, None, [], "b")
    assert clean.markdown.splitlines()[2] == "## Verdict: passed" and "## Moved most" not in clean.markdown


# ---------------------------------------------------------------- python -m flows.nightly --once, twice


@pytest.mark.slow  # a Prefect server
def test_once_twice_second_run_all_cached(toy: Path, prefect_env: dict[str, str], prefect_server: None) -> None:
    command = [sys.executable, "-m", "flows.nightly", "--once", "--root", str(toy)]
    assert "PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS" not in prefect_env  # as README shows it: nothing set
    first = _run(command, toy, prefect_env)
    assert first.returncode == 0, first.stdout + first.stderr
    # the flow says it starts the temporary server, and waits the startup timeout it set itself (Prefect's is 20 s)
    starting = (
        "nightly: starting a temporary Prefect server (no PREFECT_API_URL set; waiting up to 180 s for it to start)"
    )
    assert starting in first.stderr.splitlines(), first.stderr[:2000]
    assert sorted(runs(toy)) == sorted(["prepare", "count left", "count right", "side", "score"])
    assert summary_states(first.stdout, ORDER) == dict.fromkeys(ORDER, "Completed")
    assert "flow run: Completed" in first.stdout

    # the next runs on a server already up (as under a Prefect worker): the caching is DVC's, not the server's
    second = _run(command, toy, on_shared_server(prefect_env))
    assert second.returncode == 0, second.stdout + second.stderr
    assert summary_states(second.stdout, ORDER) == dict.fromkeys(ORDER, "Cached")
    assert len(runs(toy)) == 5  # no stage command ran again
    assert "Finished in state Cached('DVC: up to date', type=COMPLETED)" in second.stderr + second.stdout

    set_params(toy, prepare={"fail_code": 2, "fail_times": 99})  # bad input in the first stage
    third = _run(command, toy, on_shared_server(prefect_env))
    assert third.returncode == 1 and "flow run: Failed" in third.stdout
    assert "stages not completed: prepare, count@left, count@right, score" in third.stdout


def process_alive(pid: int) -> bool:
    """Whether process ``pid`` runs (a zombie has ended: it only waits to be reaped)."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


SLOW_STAGE = """\
stages:
  slow:
    cmd: python -c "import os, time; open('started', 'w').write(str(os.getpid())); time.sleep(600)"
    outs: [never.txt]
"""


@pytest.mark.slow  # a Prefect server
def test_served_deployment_stops_on_one_sigterm_with_its_running_stage(tmp_path: Path) -> None:
    """The scheduled mode (``python -m flows.nightly`` serving the deployment): one SIGTERM while a run's stage is
    running ends the server process within seconds, and the stage with it."""
    root = tmp_path / "slow"
    root.mkdir()
    (root / "dvc.yaml").write_text(SLOW_STAGE)
    (root / "params.yaml").write_text(yaml.safe_dump(PARAMS))
    assert _run(["git", "init", "-q"], root).returncode == 0 and dvc(root, "init", "-q").returncode == 0
    port = free_port()
    env = nightly_env(tmp_path / "prefect-home", PREFECT_API_URL=f"http://127.0.0.1:{port}/api")
    env["PREFECT_SERVER_UI_ENABLED"] = "false"
    server_log, serve_log = tmp_path / "server.log", tmp_path / "serve.log"
    server = start(env, server_log, "server", "start", "--host", "127.0.0.1", "--port", str(port), "--analytics-off")
    with running(server, server_log):
        wait_healthy(env, server, server_log)
        with open(serve_log, "w") as log:
            serving = subprocess.Popen(
                [sys.executable, "-m", "flows.nightly", "--root", str(root)],
                env=env,
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        try:
            triggered = None
            for _ in range(120):  # the deployment exists once the process serves it
                assert serving.poll() is None, serve_log.read_text()[-3000:]
                prefect = [
                    str(Path(sys.executable).with_name("prefect")),
                    "deployment",
                    "run",
                    "egoeval-nightly/nightly",
                ]
                triggered = _run(prefect, root, env)
                if triggered.returncode == 0:
                    break
                time.sleep(1)
            assert triggered is not None and triggered.returncode == 0, triggered and triggered.stdout[-2000:]
            for _ in range(300):
                if (root / "started").exists() and (root / "started").read_text():
                    break
                assert serving.poll() is None, serve_log.read_text()[-3000:]
                time.sleep(1)
            stage = int((root / "started").read_text())
            serving.send_signal(signal.SIGTERM)
            sent = time.monotonic()
            serving.wait(timeout=30)
            stopped_s = time.monotonic() - sent
            while time.monotonic() - sent < 20 and process_alive(stage):
                time.sleep(0.1)
            stage_gone_s = time.monotonic() - sent
        finally:
            if serving.poll() is None:
                os.killpg(serving.pid, signal.SIGKILL)
                serving.wait()
    assert stopped_s < 10, f"the served deployment took {stopped_s:.1f} s to stop:\n{serve_log.read_text()[-3000:]}"
    assert stage_gone_s < 10, f"the running stage outlived the SIGTERM by {stage_gone_s:.1f} s"
    assert serving.returncode == 0, serve_log.read_text()[-3000:]


# ---------------------------------------------------------------- in-process flow runs on one temporary server


@pytest.mark.slow  # a Prefect server
def test_up_to_date_stages_are_cached_and_regression_fails_the_run(toy: Path, prefect_server: None) -> None:
    from flows.nightly import accept_baseline

    assert dvc(toy, "repro").returncode == 0  # reproduced outside Prefect: DVC would skip every stage
    state, stages = run_flow(toy)
    assert state.is_completed() and stages == dict.fromkeys(ORDER, "Cached")
    assert len(runs(toy)) == 5
    assert "No baseline yet" in read_report_artifact(state)
    assert accept_baseline(toy) == 0
    assert json.loads((toy / "metrics/baseline.json").read_text()) == {
        "toy": json.loads((toy / "metrics/toy.json").read_text())
    }
    assert json.loads((toy / "metrics/baseline.lock.json").read_text()) == lock_snapshot(toy)

    set_params(toy, score={"accuracy": 55.5})  # the interval's top (55) plus the tolerance (0.5): passes
    state, stages = run_flow(toy)
    assert state.is_completed()
    assert stages == {**dict.fromkeys(ORDER, "Cached"), "score": "Completed"}
    assert runs(toy)[-1] == "score" and len(runs(toy)) == 6

    set_params(toy, score={"accuracy": 44.0})  # below 45 - 0.5: fails
    state, stages = run_flow(toy)
    assert state.is_failed()
    assert "toy total/accuracy moved 50.00 [45.00, 55.00] -> 44.00 [39.00, 49.00]" in state.message
    assert "inputs changed: toy.score.accuracy" in state.message
    markdown = read_report_artifact(state)
    assert (
        "| toy | total/accuracy | 50.00 [45.00, 55.00] | 44.00 [39.00, 49.00] | -6 | [44.50, 55.50] | REGRESSED |"
        in markdown
    )
    assert "| toy.score.accuracy | param | 50.0 | 44.0 | score |" in markdown
    assert (toy / ".egoeval-cache/prefect/report.md").read_text() == markdown


@pytest.mark.slow  # a Prefect server
def test_transient_failures_retry_and_bad_input_does_not(toy: Path, prefect_server: None) -> None:
    set_params(toy, prepare={"fail_code": 75, "fail_times": 2})  # two transient failures, then success
    state, stages = run_flow(toy)
    assert state.is_completed(), state.message
    assert stages == dict.fromkeys(ORDER, "Completed")
    assert runs(toy).count("prepare") == 3

    set_params(toy, prepare={"fail_code": 2, "fail_times": 99, "scale": 3})  # bad input: one attempt only
    state, stages = run_flow(toy)
    assert state.is_failed()
    assert stages == {
        "prepare": "Failed",
        "count@left": "Skipped",
        "count@right": "Skipped",
        "side": "Cached",
        "score": "Skipped",
    }
    assert runs(toy).count("prepare") == 4
    assert "stages not completed: prepare, count@left, count@right, score" in state.message
    assert "| prepare | Failed |" in read_report_artifact(state) and "exited with 2 |" in read_report_artifact(state)


# ---------------------------------------------------------------- scale-out: sharded inference on a LocalCluster


@pytest.mark.slow  # a Prefect server
def test_sharded_inference_on_two_workers_is_byte_identical(tmp_path: Path, prefect_server: None) -> None:
    import cv2
    import numpy as np
    import pandas as pd
    from prefect import flow

    from egoeval.core.benchmarks import shard_of
    from egoeval.egonormia.inference import InferenceInputs, run_inference
    from egoeval.egonormia.protocols import Protocol, registry
    from egoeval.egonormia.scale_out import ShardedInference, combine, split
    from egoeval.egonormia.schema import read_official_json
    from egoeval.egonormia.settings import InferSettings, ModelSpec
    from flows.shard import run_shards, task_runner

    items = read_official_json(REPO / "tests/data/egonormia/ood_robot.json")  # 11 real clips
    assert {shard_of(clip, 2) for clip in items["id"]} == {0, 1}
    frames = tmp_path / "frames"
    frames.mkdir()
    index = []
    for i, clip in enumerate(items["id"]):  # every third clip has no frames: its video answers record the failure
        image = "" if i % 3 == 2 else f"{i}.jpg"
        if image:
            cv2.imwrite(str(frames / image), np.full((8, 16, 3), 20 * i, np.uint8))
        index.append({"id": clip, "image": image, "error": "" if image else "no video"})
    descriptions = pd.DataFrame({"id": items["id"], "description": items["description"], "error": ""})
    specs = [ModelSpec(backend="random", name="chance", concurrency=2), ModelSpec(backend="random", name="other")]

    def infer_params(cache: str) -> tuple[InferSettings, Protocol]:  # separate response caches: shards answer afresh
        settings = ["blind", "pipeline", "video"]
        infer = InferSettings(settings=settings, seed=0, max_failure_rate=1.0, cache_dir=str(tmp_path / cache))
        return infer, registry()["official"]

    single = run_inference(items, pd.DataFrame(index), frames, descriptions, specs, *infer_params("single"))

    @flow
    def sharded() -> pd.DataFrame:
        infer, protocol = infer_params("sharded")
        inputs = InferenceInputs(items, pd.DataFrame(index), frames, descriptions, specs, infer, protocol, Path("."))
        return combine(run_shards(ShardedInference(egonormia_settings()), split(inputs, 2)))

    write_params(tmp_path, {"flows": {"dask_workers": 2}})
    table = sharded.with_options(task_runner=task_runner(tmp_path))()
    assert len(single) == 11 * 3 * 3 * 2 and (single["error"] != "").sum() == 3 * 3 * 2
    assert table.to_parquet(index=False) == single.to_parquet(index=False)


@pytest.mark.slow  # a Prefect server and four Dask workers
@pytest.mark.parametrize("requested", [2, 6])
def test_sharded_inference_keeps_one_concurrency_budget(
    tmp_path: Path, prefect_server: None, monkeypatch: pytest.MonkeyPatch, requested: int
) -> None:
    """An endpoint configured for ``concurrency: 3`` sees at most 3 calls in flight however the clips are sharded
    (each shard its own process and client), and the budget is used."""
    import pandas as pd
    from openai_server import OpenAIServer
    from prefect import flow

    from egoeval.egonormia.inference import InferenceInputs
    from egoeval.egonormia.protocols import registry
    from egoeval.egonormia.scale_out import ShardedInference, combine, split
    from egoeval.egonormia.schema import read_official_json
    from egoeval.egonormia.settings import InferSettings, ModelSpec
    from flows.shard import run_shards, task_runner

    monkeypatch.setenv("LOOPBACK_KEY", "sk-test")  # the Dask workers inherit it
    items = read_official_json(REPO / "tests/data/egonormia/ood_robot.json")  # 11 real clips
    descriptions = pd.DataFrame({"id": items["id"], "description": items["description"], "error": ""})
    frames = pd.DataFrame({"id": items["id"], "image": "", "error": "no video"})
    infer = InferSettings(settings=["blind", "pipeline"], seed=0, max_failure_rate=1.0, cache_dir=str(tmp_path / "c"))
    with OpenAIServer(latency_s=0.3) as server:
        model = ModelSpec(backend="openai", name="budgeted", base_url=server.url, api_key_env="LOOPBACK_KEY")
        model = model.model_copy(update={"concurrency": 3, "max_retries": 0})
        protocol = registry()["official"]
        inputs = InferenceInputs(items, frames, tmp_path, descriptions, [model], infer, protocol, tmp_path)
        planned = split(inputs, requested)
        assert len(planned) <= 3 and sum(part.models[0].concurrency for part in planned) == 3

        @flow
        def sharded() -> pd.DataFrame:
            return combine(run_shards(ShardedInference(egonormia_settings()), planned))

        write_params(tmp_path, {"flows": {"dask_workers": 4}})
        table = sharded.with_options(task_runner=task_runner(tmp_path))()
    assert (table["error"] == "").all() and len(server.requests) >= 11 * 2 * 2
    assert server.peak_in_flight <= 3, f"{server.peak_in_flight} calls in flight for a budget of 3"


# ---------------------------------------------------------------- slow: this repository's pipeline, and YOLO shards


def fresh_copy(dest: Path) -> Path:
    """A copy of this repository without DVC's lock and the accepted baseline: a project nothing has run in yet."""
    copy_repo(dest)
    for name in ("dvc.lock", "metrics/baseline.json", "metrics/baseline.lock.json"):
        (dest / name).unlink(missing_ok=True)
    return dest


@pytest.mark.slow
def test_real_pipeline_once_twice_then_scaled_out(
    tmp_path: Path, prefect_env: dict[str, str], prefect_server: None
) -> None:
    root = fresh_copy(tmp_path / "repo")
    # every stage of this repository's pipeline, on a smaller sample and two of the trackers (every stage of dvc.yaml
    # still runs: each tracker is an instance of egohumans_track): the flow's states are what is tested here (the
    # sample's numbers, every tracker's, are the reproduced workspace's: tests/test_pipeline.py)
    smaller = {"sample": {"sequences": 1, "frames": 40, "people": 3}, "track": {"trackers": ["bytetrack", "botsort"]}}
    write_params(root, {"egohumans": smaller})
    names = [s.name for s in pipeline_stages(root)]
    assert names[0] == "params" and "egohumans_track@botsort-file" in names
    command = [sys.executable, "-m", "flows.nightly", "--once"]
    first = _run(command, root, on_shared_server(prefect_env))
    assert first.returncode == 0, first.stdout[-3000:] + first.stderr[-3000:]
    assert summary_states(first.stdout, names) == dict.fromkeys(names, "Completed")
    report = (root / ".egoeval-cache/prefect/report.md").read_text()
    assert "## egonormia" in report and "## egohumans" in report and "No baseline yet" in report
    lock = (root / "dvc.lock").read_bytes()

    second = _run(command, root, on_shared_server(prefect_env))
    assert second.returncode == 0, second.stdout[-3000:] + second.stderr[-3000:]
    assert summary_states(second.stdout, names) == dict.fromkeys(names, "Cached")
    assert "Running stage" not in second.stdout + second.stderr and (root / "dvc.lock").read_bytes() == lock

    responses = root / "data/egonormia/responses.parquet"
    single = responses.read_bytes()
    responses.unlink()
    for cache in (root / ".egoeval-cache").glob("responses.sqlite*"):
        cache.unlink()  # the shards answer afresh, not from the single run's response cache
    from distributed import LocalCluster
    from prefect.client.orchestration import get_client

    with get_client(sync_client=True) as client:
        api = {"PREFECT_API_URL": str(client.api_url)}
    with LocalCluster(n_workers=2, threads_per_worker=1, dashboard_address=":0", env=api) as cluster:
        params = yaml.safe_load((root / "params.yaml").read_text())
        params["flows"]["dask_address"] = cluster.scheduler_address
        (root / "params.yaml").write_text(yaml.safe_dump(params, sort_keys=False))
        state, stages = run_flow(root)  # DVC re-runs egonormia_infer (its output is gone) and the params check
    assert state.is_completed(), state.message
    # params.yaml changed (dask_address): checked again; nothing that reads the key runs
    assert stages == {**dict.fromkeys(names, "Cached"), "params": "Completed", "egonormia_infer": "Completed"}
    assert responses.read_bytes() == single  # so egonormia_parse, downstream, stayed Cached
    assert json.loads(dvc(root, "status", "--json").stdout) == {}


@pytest.mark.slow
def test_sharded_yolo_detection_is_byte_identical(tmp_path: Path, prefect_server: None) -> None:
    import hashlib

    import cv2
    import numpy as np
    import pandas as pd

    from egoeval.egohumans.detection import detect
    from egoeval.egohumans.settings import DetectSettings
    from flows.shard import sharded_flow, task_runner

    rng = np.random.default_rng(0)
    fetched = tmp_path / "data/egohumans/fetched"
    fetched.mkdir(parents=True)
    rows = []
    for sequence in ("s1", "s2"):
        for frame in range(1, 6):  # 10 frames in batches of 3: the last batch holds one frame
            path = fetched / f"{sequence}-{frame}.jpg"
            cv2.imwrite(str(path), rng.integers(0, 255, (96, 128, 3), dtype=np.uint8))
            pinned = hashlib.sha256(path.read_bytes()).hexdigest()
            rows.append(
                {"sequence": sequence, "frame": frame, "path": str(path.relative_to(tmp_path)), "sha256": pinned}
            )
    pd.DataFrame(rows).to_parquet(fetched / "images.parquet", index=False)
    params = {
        "yolo_weights": "arch-only",
        "yolo_model": "yolo11n.yaml",
        "yolo_conf": 1e-7,  # an untrained head scores persons around 1e-5
        "yolo_batch": 3,
        "yolo_imgsz": 128,
    }
    frames_root = {"path": "data/egohumans/fetched"}  # the data root the frames must lie in
    params = write_params(
        tmp_path, {"egohumans": {"detect": params, "fetch": frames_root}, "flows": {"dask_workers": 2}}
    )
    params = DetectSettings.model_validate(params["egohumans"]["detect"])

    cwd = Path.cwd()
    os.chdir(tmp_path)  # the stage reads frame paths relative to the project root
    try:
        single = detect("yolo", fetched, tmp_path / "single.parquet", params, Path(frames_root["path"]))  # one process
    finally:
        os.chdir(cwd)
    sharded = sharded_flow.with_options(task_runner=task_runner(tmp_path))
    out = sharded("egohumans", "detect", str(tmp_path), 2, {"mode": "yolo"})
    assert len(single) > 0 and single["sequence"].nunique() == 2
    assert Path(out).read_bytes() == (tmp_path / "single.parquet").read_bytes()
