"""The whole DVC pipeline on the bundled sample, run for real with `dvc repro` in a temporary copy."""

from __future__ import annotations

import json
import re
import secrets
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml
from conftest import REPO, REPRODUCED_FILES, copy_workspace, dvc
from openai_server import KeyedPolicy, OpenAIServer

from egoeval.dvc_project import pipeline_stages

pytestmark = pytest.mark.slow
CANARY = "sk-canary-" + secrets.token_hex(12)  # made at run time, so no source file holds it


def ran_stages(output: str) -> list[str]:
    return re.findall(r"Running stage '([^']+)'", output)


@pytest.fixture(scope="module")
def workspace(reproduced: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """This module's own copy of the reproduced repository, for the tests that change it."""
    return copy_workspace(reproduced, tmp_path_factory.mktemp("repo") / "ws")


def test_repro_reproduces_the_committed_metrics(reproduced: Path) -> None:
    for name in REPRODUCED_FILES:  # deleted from the copy before `dvc repro`: computed anew, byte for byte
        assert (reproduced / name).read_bytes() == (REPO / name).read_bytes(), name
    metrics = json.loads((reproduced / "metrics/egonormia.json").read_text())
    assert set(metrics) == {"blind", "pipeline", "video", "video:frames8"}  # the sample's second video variant
    for setting in metrics.values():
        for model in setting.values():
            assert {"action", "justification", "both", "sensible_iou"} <= set(model)
            assert all(0 <= model[m] <= 100 for m in ("action", "justification", "both", "sensible_iou"))
    tracking = json.loads((reproduced / "metrics/egohumans.json").read_text())
    params = yaml.safe_load((reproduced / "params.yaml").read_text())["egohumans"]
    runs = {f"{t}-{m}" for t in params["track"]["trackers"] for m in params["detect"]["modes"]}
    assert set(tracking) == runs


def test_the_committed_dvc_lock_is_what_repro_writes(reproduced: Path) -> None:
    """Every hash dvc.lock pins (code, inputs, params, outputs) is what a full `dvc repro` of this tree records: an
    edit to a stage's code or params is committed with the lock it produces, so an audit starts from the truth."""
    ours, committed = (yaml.safe_load((root / "dvc.lock").read_text())["stages"] for root in (reproduced, REPO))
    stale = sorted(name for name in ours.keys() | committed.keys() if ours.get(name) != committed.get(name))
    assert not stale, f"dvc.lock is stale for {stale}: run `dvc repro` and commit dvc.lock"


def test_second_repro_runs_nothing(reproduced: Path) -> None:
    run = dvc(reproduced, "repro")
    assert run.returncode == 0 and ran_stages(run.stdout) == []


def test_a_scoring_param_reruns_only_the_scoring_stage_and_the_page(workspace: Path) -> None:
    params = yaml.safe_load((workspace / "params.yaml").read_text())
    params["egonormia"]["score"]["bootstrap_samples"] = 200
    (workspace / "params.yaml").write_text(yaml.safe_dump(params, sort_keys=False))
    run = dvc(workspace, "repro")
    assert run.returncode == 0, run.stderr[-2000:]
    # params.yaml is checked whole first; EgoNormia's part of the report page, then the page, show the new intervals
    assert ran_stages(run.stdout) == ["params", "egonormia_score", "egonormia_report", "report"]
    metrics = yaml.safe_load((workspace / "dvc.lock").read_text())["stages"]["egonormia_score"]["params"]
    assert metrics["params.yaml"]["egonormia.score"]["bootstrap_samples"] == 200


def test_openai_backend_runs_every_setting_with_no_code_change(workspace: Path) -> None:
    """Only params.yaml changes: a loopback OpenAI-compatible server answers every question correctly."""
    import pandas as pd

    items = pd.read_parquet(workspace / "data/egonormia/fetched/items.parquet")
    params = yaml.safe_load((workspace / "params.yaml").read_text())
    policy = KeyedPolicy.from_items(items)
    with OpenAIServer(policy=policy, fault_rate=0.2, fault_kinds=("500", "429", "drop")) as server:
        params["egonormia"]["model"].update(
            backend="openai",
            name="loopback-vlm",
            base_url=server.url,
            api_key_env="EGOEVAL_TEST_KEY",
            concurrency=4,
            timeout_s=5,
            max_retries=8,
        )
        params["egonormia"]["baselines"] = []
        (workspace / "params.yaml").write_text(yaml.safe_dump(params, sort_keys=False))
        run = dvc(workspace, "repro", "egonormia_score", EGOEVAL_TEST_KEY=CANARY)
        assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
        ran = ["params", "egonormia_describe", "egonormia_infer", "egonormia_parse", "egonormia_score"]
        assert ran_stages(run.stdout) == ran
        requests = list(server.requests)

    metrics = json.loads((workspace / "metrics/egonormia.json").read_text())
    # The server knows the answer key, so it answers [] where nothing is sensible: both lists empty, and the official
    # scorer (params' protocol) leaves those items out of n while their (right) actions stay in the sums.
    counted = sum(len(s) > 0 for s in items["sensible_idx"])
    assert 0 < counted < len(items)
    for setting in ("blind", "pipeline", "video"):
        numbers = metrics[setting]["loopback-vlm"]
        assert numbers["n"] == counted and numbers["excluded"] == len(items) - counted
        # every answer comes back right: len(items) right answers over the counted items
        assert numbers["action"] == numbers["justification"] == numbers["both"]
        assert numbers["action"] == pytest.approx(100.0 * len(items) / counted, abs=1e-9)
        assert numbers["sensible_iou"] == pytest.approx(100.0, abs=1e-9)
    assert any(r.fault for r in requests), "the server injected no faults"
    images = [
        part["image_url"]["url"]
        for r in requests
        for message in r.body["messages"]
        if isinstance(message["content"], list)
        for part in message["content"]
        if part.get("type") == "image_url"
    ]
    assert images and all(url.startswith("data:image/jpeg;base64,") for url in images)
    assert all(r.headers.get("Authorization") == f"Bearer {CANARY}" for r in requests)

    # The key reached the server and nowhere else: no file of the workspace, DVC cache or response cache holds it.
    leaks = [
        str(path)
        for path in workspace.rglob("*")
        if path.is_file() and ".git" not in path.parts and CANARY.encode() in path.read_bytes()
    ]
    assert leaks == []


def test_openai_batch_backend_runs_through_dvc_and_keeps_its_request_files(workspace: Path) -> None:
    """backend openai_batch through `dvc repro`: one batch per round, every answer right, each batch's request file
    in the declared output data/egonormia/batches/, the key in none of them."""
    import pandas as pd

    items = pd.read_parquet(workspace / "data/egonormia/fetched/items.parquet")
    params = yaml.safe_load((workspace / "params.yaml").read_text())
    with OpenAIServer(policy=KeyedPolicy.from_items(items), echo_auth=False) as server:
        params["egonormia"]["model"].update(
            backend="openai_batch",
            name="loopback-batch-vlm",
            base_url=server.url,
            api_key_env="EGOEVAL_TEST_KEY",
            batch_poll_s=0.05,
        )
        params["egonormia"]["baselines"] = []
        (workspace / "params.yaml").write_text(yaml.safe_dump(params, sort_keys=False))
        run = dvc(workspace, "repro", "egonormia_score", EGOEVAL_TEST_KEY=CANARY)
        assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
        assert "egonormia_infer" in ran_stages(run.stdout)
    assert server.batches_created == 3  # the official protocol: action, justification, sensible rounds
    assert not any(r.via == "online" for r in server.requests)
    records = sorted((workspace / "data/egonormia/batches").glob("loopback-batch-vlm-*.jsonl"))
    assert len(records) == 3 and all(CANARY.encode() not in f.read_bytes() for f in records)
    assert dvc(workspace, "status", "egonormia_infer").stdout.strip().endswith("up to date.")
    metrics = json.loads((workspace / "metrics/egonormia.json").read_text())
    counted = sum(len(s) > 0 for s in items["sensible_idx"])
    for setting in ("blind", "pipeline", "video", "video:frames8"):  # the sample runs a video variant too
        numbers = metrics[setting]["loopback-batch-vlm"]
        assert numbers["action"] == pytest.approx(100.0 * len(items) / counted, abs=1e-9)
    # the variant's calls went through the Batch API as separate images: eight image parts in one message
    images = [
        sum(
            part.get("type") == "image_url"
            for m in r.body["messages"]
            if isinstance(m["content"], list)
            for part in m["content"]
        )
        for r in server.requests
    ]
    # the variant's calls are the strip's (one image each), the same conversations with its frames instead
    assert images.count(8) == images.count(1) > 0 and set(images) == {0, 1, 8}, sorted(set(images))


def test_reading_the_stages_waits_for_a_dvc_lock_held_a_moment(tmp_path: Path) -> None:
    """Two readers at once (e.g. both xdist workers collecting tests/test_dvc_deps.py, or an audit beside a nightly
    run) must not fail: the second waits for the project's lock beyond DVC's own 3 s of tries."""
    holder = subprocess.Popen(
        [sys.executable, "-c", HOLD_LOCK, str(REPO / ".dvc" / "tmp" / "lock"), "5"],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "held"
        started = time.monotonic()
        stages = pipeline_stages(REPO)
        assert time.monotonic() - started >= 3.0  # it did wait for the holder
        assert [s.name for s in stages if s.name == "egonormia_score"] == ["egonormia_score"]
    finally:
        holder.wait(timeout=30)


HOLD_LOCK = """
import sys, time
import zc.lockfile
lock = zc.lockfile.LockFile(sys.argv[1])
print("held", flush=True)
time.sleep(float(sys.argv[2]))
lock.close()
"""
