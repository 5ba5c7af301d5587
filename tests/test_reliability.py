"""Crash safety and model-server faults, through `dvc repro` in temporary copies of the repository.

Unit-level behaviour lives elsewhere: fault -> error mapping, Retry-After, retries, the limiter and the cache under
SIGKILL and many writers in test_backends.py; the failure threshold and cache-only replay of the infer stage in
test_infer.py. Here the whole pipeline is killed, run twice at once, and fed faults by a real loopback server.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import secrets
import signal
import sqlite3
import subprocess
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import conftest
import pandas as pd
import pytest
import yaml
from conftest import copy_repo, copy_workspace, tool_env
from openai_server import KeyedPolicy, OpenAIServer, default_policy, last_user_text

pytestmark = pytest.mark.slow
KEY_ENV = "EGOEVAL_TEST_KEY"
CANARY = "sk-canary-" + secrets.token_hex(12)  # made at run time: no source file holds it
MODEL = "loopback-vlm"
CACHE = ".egoeval-cache/responses.sqlite"
OUTPUTS = ("metrics/egonormia.json", "data/egonormia/responses.parquet", "data/egonormia/descriptions.parquet")
OPTION = re.compile(r"^1\. ", re.MULTILINE)


def dvc(root: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """``dvc <args>`` with the model's key in the environment."""
    return conftest.dvc(root, *args, **{KEY_ENV: CANARY})


def start_repro(root: Path) -> subprocess.Popen[str]:
    """`dvc repro egonormia_score` in its own process group (so a kill takes the stage with it)."""
    env = tool_env(**{KEY_ENV: CANARY})
    return subprocess.Popen(
        ["dvc", "repro", "egonormia_score"],
        cwd=root,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )


def digest(body: dict[str, Any]) -> str:
    return hashlib.sha256(json.dumps(body, sort_keys=True).encode()).hexdigest()


def is_question(body: dict[str, Any]) -> bool:
    """Infer asks questions with numbered options; describe asks for a scene description."""
    return bool(OPTION.search(last_user_text(body)))


def cached_rows(root: Path) -> int:
    if not (root / CACHE).exists():
        return 0
    with sqlite3.connect(root / CACHE) as db:
        return db.execute("SELECT COUNT(*) FROM responses").fetchone()[0]


def wait_for(condition: Callable[[], bool], what: str, timeout_s: float = 90.0) -> None:
    deadline = time.monotonic() + timeout_s
    while not condition():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.01)


def kill_group(process: subprocess.Popen[str]) -> None:
    os.killpg(process.pid, signal.SIGKILL)
    process.communicate()
    assert process.returncode == -signal.SIGKILL


def configure(root: Path, server: OpenAIServer, **model: Any) -> None:
    """The model under evaluation is the loopback server's; descriptions come from it too; no baselines."""
    params = yaml.safe_load((root / "params.yaml").read_text())
    settings = {"backend": "openai", "name": MODEL, "base_url": server.url, "api_key_env": KEY_ENV, "concurrency": 2}
    settings |= {"timeout_s": 5, "max_retries": 8, "retry_base_s": 0.01, "retry_max_s": 0.05}
    params["egonormia"]["model"].update(settings | model)
    params["egonormia"]["baselines"] = []
    params["egonormia"]["describe"]["source"] = "model"
    # the call counts below follow egoeval's conversations; the official protocol's calls: tests/test_official.py
    params["egonormia"]["protocol"] = "egoeval"
    (root / "params.yaml").write_text(yaml.safe_dump(params, sort_keys=False))


def answer_key(items: pd.DataFrame) -> Callable[[dict[str, Any]], str]:
    """Every question answered correctly (the server reads the options back); a fixed text for descriptions."""
    keyed = KeyedPolicy.from_items(items)
    return lambda body: keyed(body) if is_question(body) else default_policy(body)


class ClipFaults(OpenAIServer):
    """An OpenAIServer that gives every question about chosen clips a fixed fault (its options name the clip)."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.clip_faults: dict[str, str] = {}  # an option text of the clip -> fault
        self.faulted: set[str] = set()  # digests of the bodies given a clip fault

    def _admit(self, headers: dict[str, str], body: dict[str, Any], **how: Any) -> str | None:
        text = last_user_text(body)
        forced = next((fault for marker, fault in self.clip_faults.items() if marker in text), None)
        if forced:
            self.faulted.add(digest(body))
        chosen = super()._admit(headers, body, **how)  # records the request (with the server's own choice of fault)
        return forced or chosen


def answered(requests: list[Any], faulted: set[str] = frozenset()) -> set[str]:
    """Digests of the request bodies the server answered with a reply."""
    return {digest(r.body) for r in requests if r.fault is None} - faulted


@pytest.fixture(scope="module")
def base(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A copy of the repository with the bundled sample fetched and its frames extracted (no model run yet)."""
    root = copy_repo(tmp_path_factory.mktemp("base"))
    run = dvc(root, "repro", "egonormia_frames")
    assert run.returncode == 0, run.stdout[-2000:] + run.stderr[-2000:]
    return root


@pytest.fixture(scope="module")
def items(base: Path) -> pd.DataFrame:
    return pd.read_parquet(base / "data/egonormia/fetched/items.parquet")


@pytest.fixture
def workspace(base: Path, tmp_path: Path) -> Path:
    return copy_workspace(base, tmp_path / "ws")


@pytest.fixture(scope="module")
def reference(base: Path, items: pd.DataFrame, tmp_path_factory: pytest.TempPathFactory) -> dict[str, bytes]:
    """The outputs of one uninterrupted, fault-free run."""
    root = copy_workspace(base, tmp_path_factory.mktemp("reference") / "ws")
    with OpenAIServer(policy=answer_key(items)) as server:
        configure(root, server)
        run = dvc(root, "repro", "egonormia_score")
    assert run.returncode == 0, run.stdout[-2000:] + run.stderr[-2000:]
    return {name: (root / name).read_bytes() for name in OUTPUTS}


def test_sigkill_in_describe_and_in_infer_then_repro_resends_nothing_answered(
    workspace: Path, items: pd.DataFrame, reference: dict[str, bytes]
) -> None:
    server = OpenAIServer(policy=answer_key(items), latency_s=0.15).start()
    try:
        configure(workspace, server)
        kills = []  # per kill: (requests before it, rows in the response cache right after it)
        for phase, (latency, seen) in enumerate([(0.15, lambda b: not is_question(b)), (0.03, is_question)]):
            server.latency_s = latency
            process = start_repro(workspace)
            wait_for(lambda seen=seen: sum(seen(r.body) for r in list(server.requests)) >= 6, f"phase {phase} calls")
            kill_group(process)
            kills.append((len(server.requests), cached_rows(workspace)))
            # the first kill hits describe, the second infer: neither wrote its output
            assert (workspace / "data/egonormia/descriptions.parquet").exists() == (phase == 1)
            assert not (workspace / "data/egonormia/responses.parquet").exists()
        final = dvc(workspace, "repro", "egonormia_score")
        assert final.returncode == 0, final.stdout[-2000:] + final.stderr[-2000:]
        # the killed run's entries in DVC's rwlock name a dead pid: DVC drops them itself and says so
        assert "had been killed. Auto removed it from the lock file." in final.stderr
        requests = list(server.requests)
    finally:
        server.stop()

    for before, stored in kills:
        done, later = answered(requests[:before]), {digest(r.body) for r in requests[before:]}
        assert 0 < stored <= len(done)
        # Of what was answered before the kill, exactly the calls still in flight (answered, not yet committed to the
        # cache: at most one per worker thread) are sent again; every committed answer is served from the cache.
        assert len(done & later) == len(done) - stored <= 4
    for name in OUTPUTS:
        assert (workspace / name).read_bytes() == reference[name], name
    assert "Data and pipelines are up to date" in dvc(workspace, "status", "egonormia_score").stdout


def test_two_repros_at_once_one_is_refused_by_the_lock(workspace: Path, items: pd.DataFrame) -> None:
    with OpenAIServer(policy=answer_key(items), latency_s=0.03) as server:
        configure(workspace, server)
        first = start_repro(workspace)
        wait_for(lambda: len(server.requests) >= 4, "the first run's model calls")
        second = dvc(workspace, "repro", "egonormia_score")
        out, err = first.communicate(timeout=120)
    assert first.returncode == 0, out[-2000:] + err[-2000:]
    assert second.returncode != 0
    refused = second.stderr
    assert "Unable to acquire lock" in refused or ("is busy, it is being blocked by" in refused and "rwlock" in refused)
    assert "Data and pipelines are up to date" in dvc(workspace, "status", "egonormia_score").stdout


def test_transient_faults_give_the_metrics_of_a_clean_run(
    workspace: Path, items: pd.DataFrame, reference: dict[str, bytes]
) -> None:
    kinds = ("429", "500", "503", "drop", "timeout", "malformed", "empty")
    with OpenAIServer(policy=answer_key(items), fault_rate=0.3, fault_kinds=kinds, hang_s=0.6, seed=3) as server:
        configure(workspace, server, timeout_s=0.5, max_retries=12)
        run = dvc(workspace, "repro", "egonormia_score")
        requests = list(server.requests)
    assert run.returncode == 0, run.stdout[-2000:] + run.stderr[-2000:]
    assert {r.fault for r in requests} == {None, *kinds}
    for name in OUTPUTS:
        assert (workspace / name).read_bytes() == reference[name], name


def test_failures_over_the_threshold_fail_the_stage_naming_items_and_below_are_recorded(
    workspace: Path, items: pd.DataFrame
) -> None:
    first, second = items["id"].iloc[3], items["id"].iloc[11]
    marker = {clip: next(b for b in items.set_index("id").loc[clip, "behaviors"] if b) for clip in (first, second)}
    with ClipFaults(policy=answer_key(items)) as server:
        configure(workspace, server, max_retries=2)
        # 2 of 16 clips: 2 x 4 settings (the sample's three and its video:frames8 variant) x 3 answers = 24 of 192
        # answers fail (12.5% > max_failure_rate 10%)
        server.clip_faults = {marker[first]: "500", marker[second]: "500"}
        failed = dvc(workspace, "repro", "egonormia_score")
        before, faulted = len(server.requests), set(server.faulted)
        # permanent answers, not retried: both clips are refused; under a threshold of 15% the 24 failed answers
        # are recorded
        server.clip_faults = {marker[first]: "refusal", marker[second]: "refusal"}
        params = yaml.safe_load((workspace / "params.yaml").read_text())
        params["egonormia"]["infer"]["max_failure_rate"] = 0.15
        (workspace / "params.yaml").write_text(yaml.safe_dump(params, sort_keys=False))
        passed = dvc(workspace, "repro", "egonormia_score")
        requests = list(server.requests)

    assert failed.returncode != 0 and "exited with 75" in failed.stderr
    assert "24 of 192 answers failed (12.5% > 10.0%)" in failed.stderr
    assert f"{first}/blind/{MODEL}/action: http 500 after 2 retries" in failed.stderr and second in failed.stderr
    assert passed.returncode == 0, passed.stdout[-2000:] + passed.stderr[-2000:]
    # the failed run's successes were cached: the rerun sent none of them again
    assert not answered(requests[:before], faulted) & {digest(r.body) for r in requests[before:]}
    responses = pd.read_parquet(workspace / "data/egonormia/responses.parquet")
    failures = responses[responses["error"] != ""].groupby("id")["error"].unique().map(set).to_dict()
    refusal = "refusal: I cannot help with that."
    assert failures == {first: {refusal, f"action failed: {refusal}"}, second: {refusal, f"action failed: {refusal}"}}
    assert (responses["error"] != "").sum() == 24  # 2 clips x 4 settings x 3 answers
    metrics = json.loads((workspace / "metrics/egonormia.json").read_text())
    for setting in ("blind", "pipeline", "video", "video:frames8"):
        numbers = metrics[setting][MODEL]
        assert numbers["call_failure_rate"] == pytest.approx(6 / 48)  # 2 clips x 3 subtasks of 16 x 3
        assert numbers["action"] == pytest.approx(100 * 14 / 16)  # every other clip is answered correctly

    # The key reached the server and nowhere else: not the run's output, nor any file (workspace, DVC and
    # response caches, dvc.lock).
    assert all(r.headers.get("Authorization") == f"Bearer {CANARY}" for r in requests)
    assert CANARY not in failed.stdout + failed.stderr + passed.stdout + passed.stderr
    assert [path for path in workspace.rglob("*") if path.is_file() and CANARY.encode() in path.read_bytes()] == []


def test_two_infer_processes_share_the_response_cache_consistently(workspace: Path, items: pd.DataFrame) -> None:
    """Outside DVC's lock (e.g. two shards), two processes write one response cache at once."""
    with OpenAIServer(policy=answer_key(items), latency_s=0.01) as server:
        configure(workspace, server)
        assert dvc(workspace, "repro", "egonormia_describe").returncode == 0
        env = tool_env(**{KEY_ENV: CANARY})
        command = ["python", "-m", "stages.egonormia.infer"]
        processes = [subprocess.Popen(command, cwd=workspace, env=env, stderr=subprocess.PIPE) for _ in range(2)]
        results = [(p.wait(timeout=120), p.stderr.read()) for p in processes]
        sent = [r for r in server.requests if is_question(r.body)]
    assert [code for code, _ in results] == [0, 0], results
    responses = pd.read_parquet(workspace / "data/egonormia/responses.parquet")
    assert (responses["error"] == "").all() and responses["request_key"].is_unique
    with sqlite3.connect(workspace / CACHE) as db:
        cached = dict(db.execute("SELECT key, response FROM responses"))
    assert len(cached) == len(responses) + len(items)  # every answer and every description, once
    assert all(cached[row.request_key] == row.response for row in responses.itertuples())
    assert len(responses) <= len(sent) <= 2 * len(responses)  # a key may race once; never more


SERVED = "loopback-vlm-2026-01-01"  # the model the loopback endpoint names as serving (an alias resolved, say)


@pytest.fixture(scope="module")
def answered_workspace(
    reproduced: Path, items: pd.DataFrame, tmp_path_factory: pytest.TempPathFactory
) -> tuple[Path, str]:
    """A copy of the reproduced sample after one good `dvc repro` of everything against the loopback model (which
    names another model as serving it), and that run's stderr."""
    root = copy_workspace(reproduced, tmp_path_factory.mktemp("answered") / "ws")
    with OpenAIServer(policy=answer_key(items), served_model=SERVED) as server:
        configure(root, server)
        run = dvc(root, "repro")
    assert run.returncode == 0, run.stdout[-2000:] + run.stderr[-2000:]
    return root, run.stderr


KEPT = (
    "metrics/egonormia.json",
    "plots/egonormia/categories.csv",
    "dvc.lock",
    "reports/fragments/egonormia.json",
    "reports/index.html",
    CACHE,
    *OUTPUTS,
)


def test_a_served_model_other_than_the_requested_one_is_recorded_and_said(answered_workspace: tuple[Path, str]) -> None:
    root, stderr = answered_workspace
    responses = pd.read_parquet(root / "data/egonormia/responses.parquet")
    assert (responses["served_model"] == SERVED).all() and (responses["model"] == MODEL).all()
    said = f"{MODEL}: the endpoint named another model as serving 192 of 192 replies: '{SERVED}' (192)"
    assert f"infer: warning: {said}" in stderr
    assert f"describe: warning: {MODEL}: the endpoint named another model as serving 16 of 16" in stderr
    # recorded in the metrics beside the numbers it produced (the model asked stays the row's name) ...
    metrics = json.loads((root / "metrics/egonormia.json").read_text())
    assert {setting: models[MODEL]["served_models"] for setting, models in metrics.items()} == {
        setting: {SERVED: 48}
        for setting in ("blind", "pipeline", "video", "video:frames8")  # 16 clips x 3 answers
    }
    # ... and shown on the report page next to that model's numbers, in every setting's leaderboard
    page = (root / "reports/index.html").read_text(encoding="utf-8")
    section = page.split('<section id="egonormia-leaderboard">')[1].split("</section>")[0]
    ours = "".join(re.findall(r'<table class="leaderboard">(.*?)</table>', section))  # not the published apart
    rows = re.findall(r"<tr><td>\d+</td><td>(.*?)</td>", ours)
    tag = f'<span class="tag wrong served">served as {SERVED} (48 of 48 calls)</span>'
    assert rows == [f"{MODEL} {tag}"] * 4  # the three settings' leaderboards and the video variant's


def closed_port_url() -> str:
    """An http URL on 127.0.0.1 where nothing listens."""
    import socket

    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return f"http://127.0.0.1:{probe.getsockname()[1]}/v1"


ENDPOINT = "{url}/chat/completions (model 'loopback-vlm')"
FAILED_RUNS = {  # fault: (exit code, message, model settings); {url}: the server's base URL
    "401": (
        2,
        ENDPOINT + " answered http 401: bad key in Bearer ***; the key is missing or wrong: set a valid key in "
        f"${KEY_ENV}",
        {},
    ),
    "404": (2, ENDPOINT + " answered http 404", {}),
    "html": (2, ENDPOINT + " answered 200 with a non-JSON body (text/html", {}),
    "429": (75, "the server asks to wait 3600 s (Retry-After), longer than retry_max_s (0.05 s): not waiting", {}),
    # issue 19: the key quoted past the 200th character of an error is redacted before anything cuts it (item 2)
    "400": (
        2,
        ENDPOINT + " rejected the first 8 calls alike (http 400: This request was rejected by the content policy",
        {},
    ),
    "trickle_headers": (75, "timeout (no complete reply within timeout_s, 1 s)", {"timeout_s": 1, "max_retries": 0}),
    "huge": (2, ENDPOINT + " rejected the first 8 calls alike (reply cut at 196,608 bytes: more than max_tokens", {}),
    "gzip": (2, ENDPOINT + " answered with a body that cannot be decoded (", {}),
    "error_object": (2, ENDPOINT + " answered 200 with an error object instead of a completion (The model is", {}),
    "unreachable": (75, "{url}/chat/completions: nothing answers at this address (", {}),
}


def lock_but_params(lock: bytes) -> dict[str, Any]:
    """dvc.lock's entries but the params check's."""
    stages = yaml.safe_load(lock)["stages"]
    stages.pop("params")
    return stages


@pytest.mark.bad_input
@pytest.mark.parametrize("fault", sorted(FAILED_RUNS))
def test_a_failed_run_keeps_the_last_good_outputs_and_says_what_to_fix(
    answered_workspace: tuple[Path, str], tmp_path: Path, fault: str
) -> None:
    exit_code, message, model = FAILED_RUNS[fault]
    root = copy_workspace(answered_workspace[0], tmp_path / "ws")
    faults = [] if fault == "unreachable" else [fault] * 20
    with OpenAIServer(per_request=faults, retry_after=3600, hang_s=30, huge_bytes=5_000_000, echo_auth=True) as server:
        url = closed_port_url() if fault == "unreachable" else server.url
        # new requests (temperature): nothing is in the response cache
        configure(root, server, **{"temperature": 0.5, "timeout_s": 30, "base_url": url, **model})
        before = {name: (root / name).read_bytes() for name in KEPT}
        started = time.monotonic()
        run = dvc(root, "repro")
        elapsed = time.monotonic() - started
        requests = list(server.requests)
    assert run.returncode != 0 and f"exited with {exit_code}" in run.stderr, run.stderr[-2000:]
    assert message.format(url=url) in run.stderr, run.stderr[-2000:]
    assert "Traceback" not in run.stdout + run.stderr
    assert not any(form in run.stdout + run.stderr for form in (CANARY, CANARY[:20]))
    if fault == "unreachable":
        assert "check base_url of model 'loopback-vlm' and that the server is running" in run.stderr and elapsed < 40
    # one attempt per call at most: a permanent failure is not retried, a pause asked for is not waited out
    assert len({digest(r.body) for r in requests}) == len(requests)
    assert elapsed < 30 + 60  # the acceptance bound of issue 13: timeout_s plus start-up, never the hour asked for
    for name, content in before.items():
        if name == "dvc.lock":  # the run's params check (its first stage, passed) records the new params.yaml
            assert lock_but_params(content) == lock_but_params((root / name).read_bytes()), "dvc.lock changed"
        else:
            assert (root / name).read_bytes() == content, f"{name} changed by the failed run"
    status = json.loads(conftest.dvc(root, "status", "--json").stdout)
    assert "egonormia_describe" in status  # still shown as changed: the next repro runs it again
