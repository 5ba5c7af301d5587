"""The describe and infer stages end to end, against a real OpenAI-compatible server on 127.0.0.1."""

from __future__ import annotations

import base64
import io
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import forked
import numpy as np
import pandas as pd
import pytest
import yaml
from conftest import infer_stage, tool_env, write_params
from openai_server import KeyedPolicy, OpenAIServer
from PIL import Image

from egoeval.core.settings import benchmark_settings
from egoeval.core.stage_shell import run_stage
from egoeval.egonormia.answers import NONE_OF_THE_ABOVE, displayed_options
from egoeval.egonormia.artifacts import RESPONSE_COLUMNS
from egoeval.egonormia.descriptions import from_dataset, write_descriptions
from egoeval.egonormia.inference import check_failures, run_inference
from egoeval.egonormia.protocols import Protocol, registry
from egoeval.egonormia.protocols.egoeval import permutation
from egoeval.egonormia.settings import EgoNormiaSettings, InferSettings, ModelSpec

KEY_ENV = "EGOEVAL_TEST_API_KEY"
SECRET = "sk-test-infer-secret-42"
SINGLE = re.compile(r"\nAnswer: ([1-5])$")
MULTI = re.compile(r"\nAnswer: \[((?:[1-5](?:, [1-5])*)?)\]$")


@pytest.fixture(autouse=True)
def api_key(monkeypatch: pytest.MonkeyPatch) -> None:
    """The loopback endpoint takes any key, but the backend refuses to send without one (its variable unset)."""
    monkeypatch.setenv(KEY_ENV, SECRET)


def make_items(n: int) -> pd.DataFrame:
    """Synthetic clips: unique option texts, the empty slot moving around, one clip whose answer is None."""
    rows = []
    for i in range(n):
        empty = (4 + i) % 5
        behaviors = [f"Behaviour {k} for clip {i}" for k in range(5)]
        justifications = [f"Reason {k} for clip {i}" for k in range(5)]
        behaviors[empty] = justifications[empty] = ""
        if i == 0:
            correct, sensible = empty, []
        else:
            correct = next(k for k in ((i * 3) % 5, (i * 3 + 1) % 5) if k != empty)
            sensible = sorted({correct, next(k for k in range(5) if k not in (correct, empty))})
        rows.append(
            {
                "id": f"clip-{i:03d}",
                "behaviors": behaviors,
                "justifications": justifications,
                "correct_idx": correct,
                "sensible_idx": sensible,
                "description": f"Scene {i}: a busy room.",
                "video": f"video/clip-{i:03d}/context.mp4",
            }
        )
    return pd.DataFrame(rows)


def jpeg(i: int) -> bytes:
    buffer = io.BytesIO()
    Image.new("RGB", (48, 16), ((37 * i) % 256, 80, 160)).save(buffer, format="JPEG")
    return buffer.getvalue()


def write_frames(frames_dir: Path, items: pd.DataFrame, broken: set[str] = frozenset()) -> pd.DataFrame:
    frames_dir.mkdir(parents=True, exist_ok=True)
    rows = []
    for i, clip_id in enumerate(items["id"]):
        if clip_id in broken:
            rows.append({"id": clip_id, "image": "", "n_frames": 0, "times": [], "error": "video unreadable"})
            continue
        (frames_dir / f"{clip_id}.jpg").write_bytes(jpeg(i))
        rows.append({"id": clip_id, "image": f"{clip_id}.jpg", "n_frames": 3, "times": [0.0, 1.0, 2.0], "error": ""})
    index = pd.DataFrame(rows)
    index.to_parquet(frames_dir / "index.parquet", index=False)
    return index


def model_spec(server: OpenAIServer, **extra: Any) -> dict[str, Any]:
    return {
        "backend": "openai",
        "name": "keyed-vlm",
        "base_url": server.url,
        "api_key_env": KEY_ENV,
        "concurrency": 4,
        "temperature": 0.0,
        "max_tokens": 256,
        "timeout_s": 5,
        "max_retries": 3,
        "retry_base_s": 0.01,
        "retry_max_s": 0.05,
        "published_as": None,
        "batch_poll_s": 30,
        "batch_deadline_s": 86400,
        "batch_max_requests": 50000,
        "video_input": False,
        "token_rule": "openai",
        **extra,
    }


def models(*specs: dict[str, Any]) -> list[ModelSpec]:
    return [ModelSpec.model_validate(spec) for spec in specs]


def infer_params(tmp_path: Path, **extra: Any) -> tuple[InferSettings, Protocol]:
    """``run_inference``'s settings and protocol: egoeval's, whose shuffles and answer lines these tests exercise
    (official: test_official.py)."""
    infer = {"settings": ["blind", "pipeline", "video"], "seed": 0, "max_failure_rate": 0.1}
    infer |= {"cache_dir": str(tmp_path / "cache"), **extra}
    return InferSettings.model_validate(infer), registry()["egoeval"]


def descriptions_of(items: pd.DataFrame) -> pd.DataFrame:
    return from_dataset(items)


def stored_answer(row: Any) -> int | list[int]:
    """Map a reply's displayed option number(s) back to stored indices through the recorded permutation."""
    if row.subtask == "sensible":
        numbers = MULTI.search(row.response).group(1)
        return sorted(row.permutation[int(n) - 1] for n in numbers.split(", ") if n)
    return row.permutation[int(SINGLE.search(row.response).group(1)) - 1]


def test_every_answer_of_a_correct_model_maps_back_to_the_gold_options(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setenv(KEY_ENV, SECRET)
    items = make_items(6)
    index = write_frames(tmp_path / "frames", items)
    with OpenAIServer(policy=KeyedPolicy.from_items(items)) as server:
        responses = run_inference(
            items,
            index,
            tmp_path / "frames",
            descriptions_of(items),
            models(model_spec(server)),
            *infer_params(tmp_path),
        )
    assert list(responses.columns) == list(RESPONSE_COLUMNS)
    assert len(responses) == 6 * 3 * 3 and (responses["error"] == "").all()
    assert responses[["id", "setting", "model", "subtask"]].duplicated().sum() == 0
    gold = items.set_index("id")
    for row in responses.itertuples(index=False):
        assert row.permutation == permutation(0, row.id, row.subtask)
        expected = (
            sorted(gold.loc[row.id, "sensible_idx"]) if row.subtask == "sensible" else gold.loc[row.id, "correct_idx"]
        )
        assert stored_answer(row) == expected, row
    assert len(server.requests) == len(responses)
    assert server.peak_in_flight <= 4  # the limiter bounds calls in flight, whatever the thread count
    video = [r for r in server.requests if not isinstance(r.body["messages"][1]["content"], str)]
    assert len(video) == 6 * 3
    for request in video:
        url = request.body["messages"][1]["content"][0]["image_url"]["url"]
        text = request.body["messages"][1]["content"][1]["text"]
        clip = int(re.search(r"for clip (\d+)", text).group(1))
        assert base64.b64decode(url.removeprefix("data:image/jpeg;base64,")) == jpeg(clip)
        assert request.headers["Authorization"] == f"Bearer {SECRET}"
    justification = [r for r in server.requests if len(r.body["messages"]) == 4]
    assert len(justification) == 6 * 3
    for request in justification:  # the model's own action reply is the assistant turn
        assert request.body["messages"][2]["role"] == "assistant"
        assert SINGLE.search(request.body["messages"][2]["content"])
        assert "the action you chose" in request.body["messages"][3]["content"]
    pipeline = [r for r in server.requests if "Scene 3: a busy room." in str(r.body)]
    assert len(pipeline) == 3
    assert (responses["backend"] == "openai").all() and (responses["model"] == "keyed-vlm").all()


def test_a_rerun_is_served_from_the_cache_and_identical(tmp_path: Path) -> None:
    items = make_items(4)
    index = write_frames(tmp_path / "frames", items)
    args = (items, index, tmp_path / "frames", descriptions_of(items))
    with OpenAIServer(policy=KeyedPolicy.from_items(items)) as server:
        first = run_inference(*args, models(model_spec(server)), *infer_params(tmp_path))
        sent = len(server.requests)
        second = run_inference(*args, models(model_spec(server)), *infer_params(tmp_path))
    assert sent == 4 * 3 * 3 and len(server.requests) == sent
    pd.testing.assert_frame_equal(first, second)


def test_broken_frames_and_permanent_errors_are_recorded_not_raised(tmp_path: Path) -> None:
    items = make_items(5)
    index = write_frames(tmp_path / "frames", items, broken={"clip-002"})
    with OpenAIServer(policy=KeyedPolicy.from_items(items)) as server:
        responses = run_inference(
            items,
            index,
            tmp_path / "frames",
            descriptions_of(items),
            models(model_spec(server)),
            *infer_params(tmp_path),
        )
    failed = responses[responses["error"] != ""]
    assert set(failed["id"]) == {"clip-002"} and set(failed["setting"]) == {"video"} and len(failed) == 3
    assert (failed["error"] == "frames unavailable: video unreadable").all()
    assert failed["response"].isna().all() and (failed["request_key"] == "").all()

    items = make_items(2)
    with OpenAIServer(per_request=["refusal"]) as server:
        responses = run_inference(
            items,
            write_frames(tmp_path / "f2", items),
            tmp_path / "f2",
            descriptions_of(items),
            models(model_spec(server)),
            *infer_params(tmp_path, settings=["blind"], cache_dir=str(tmp_path / "c2")),
        )
    by_subtask = responses.set_index(["id", "subtask"])["error"]
    assert by_subtask[("clip-000", "action")] == "refusal: I cannot help with that."
    assert by_subtask[("clip-000", "justification")] == "action failed: refusal: I cannot help with that."
    assert by_subtask[("clip-001", "sensible")] == "refusal: I cannot help with that."


def test_baselines_answer_in_format_skip_what_they_cannot_do_and_repeat_exactly(tmp_path: Path) -> None:
    items = make_items(4)
    index = write_frames(tmp_path / "frames", items)
    specs = models({"backend": "random", "name": "chance"}, {"backend": "minilm", "name": "all-MiniLM-L6-v2"})
    args = (items, index, tmp_path / "frames", descriptions_of(items), specs)
    first = run_inference(*args, *infer_params(tmp_path))
    again = run_inference(*args, *infer_params(tmp_path, cache_dir=str(tmp_path / "fresh")))
    pd.testing.assert_frame_equal(first, again)  # seeded, not merely cached
    assert (first["error"] == "").all()
    settings = first.groupby("model")["setting"].unique().map(sorted).to_dict()
    assert settings == {"chance": ["blind", "pipeline", "video"], "all-MiniLM-L6-v2": ["blind", "pipeline"]}
    for row in first.itertuples(index=False):
        pattern = MULTI if row.subtask == "sensible" else SINGLE
        assert pattern.search(row.response), row.response


def test_failure_threshold(tmp_path: Path) -> None:
    items = make_items(10)
    frames = tmp_path / "frames"
    index = write_frames(frames, items, broken={"clip-001"})
    specs = models({"backend": "random", "name": "chance"})
    responses = run_inference(items, index, frames, descriptions_of(items), specs, *infer_params(tmp_path))
    assert (responses["error"] != "").sum() == 3  # 3 of 90 answers: 3.3%
    check_failures(responses, 0.05)
    with pytest.raises(Exception, match=r"3 of 90 answers failed \(3.3% > 2.0%\).*clip-001/video/chance/action"):
        check_failures(responses, 0.02)


def test_permutations_are_seeded_and_uniform() -> None:
    assert permutation(0, "clip-a", "action") == permutation(0, "clip-a", "action")
    assert sorted(permutation(7, "x", "sensible")) == [0, 1, 2, 3, 4]
    perms = np.array([permutation(0, f"clip-{i}", "action") for i in range(5000)])
    where_first = np.argmax(perms == 0, axis=1)  # display position of stored option 0
    share = np.bincount(where_first, minlength=5) / len(perms)
    assert np.all(np.abs(share - 0.2) < 0.025), share  # stored order (correct first) is not leaked
    differ = sum(permutation(0, f"c{i}", "action") != permutation(1, f"c{i}", "action") for i in range(100))
    assert differ > 90
    shown = displayed_options(["a", "", "c", "d", "e"], [1, 0, 4, 3, 2])
    assert shown == (NONE_OF_THE_ABOVE, "a", "e", "d", "c")


# ------------------------------------------------------------------ the stage CLIs


def describe() -> int:
    """The describe stage's work through the stage shell, as its CLI runs it."""
    return run_stage(
        lambda: write_descriptions(benchmark_settings("egonormia", EgoNormiaSettings)), benchmark="egonormia"
    )


def write_stage_inputs(root: Path, items: pd.DataFrame, model: dict[str, Any], **infer: Any) -> None:
    fetched = root / "data/egonormia/fetched"
    fetched.mkdir(parents=True)
    items.to_parquet(fetched / "items.parquet", index=False)
    write_frames(root / "data/egonormia/frames", items)
    params = {
        "egonormia": {
            "describe": {"source": "dataset"},
            "frames": {"variants": [{"kind": "strip"}]},  # the frames folder written here holds the strip only
            "model": model,
            "baselines": [],
            "infer": {
                "settings": ["blind", "pipeline", "video"],
                "seed": 0,
                "max_failure_rate": 0.1,
                "cache_dir": ".egoeval-cache",
                **infer,
            },
        }
    }
    write_params(root, params)


def test_stage_writes_nothing_when_too_much_failed_and_a_rerun_completes(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setenv(KEY_ENV, SECRET)
    monkeypatch.chdir(tmp_path)
    items = make_items(3)
    out = Path("data/egonormia/responses.parquet")
    with OpenAIServer(policy=KeyedPolicy.from_items(items), per_request=["500", "500"]) as server:
        write_stage_inputs(tmp_path, items, model_spec(server, max_retries=1))
        assert describe() == 0
        assert run_stage(infer_stage, benchmark="egonormia") == 75 and not out.exists()
        # params.yaml's protocol is official: each action call tried twice, no sensible call after it failed
        assert len(server.requests) == 3 * 3 * 2
        write_stage_inputs_params(tmp_path, model_spec(server, max_retries=3))
        assert run_stage(infer_stage, benchmark="egonormia") == 0
    responses = pd.read_parquet(out)
    assert len(responses) == 27 and (responses["error"] == "").all()
    assert (responses["protocol"] == "official").all()
    assert all(list(p) == [0, 1, 2, 3, 4] for p in responses["permutation"])  # the official code: stored order
    for file in [*tmp_path.rglob("*")]:
        if file.is_file():
            assert SECRET.encode() not in file.read_bytes(), file


def write_stage_inputs_params(root: Path, model: dict[str, Any]) -> None:
    params = yaml.safe_load((root / "params.yaml").read_text())
    params["egonormia"]["model"] = model
    (root / "params.yaml").write_text(yaml.safe_dump(params))


def test_describe_from_the_dataset_and_from_a_model(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.chdir(tmp_path)
    items = make_items(3)
    items.loc[1, "description"] = ""
    with OpenAIServer() as server:
        write_stage_inputs(tmp_path, items, model_spec(server))
        assert describe() == 0
        table = pd.read_parquet("data/egonormia/descriptions.parquet")
        assert list(table.columns) == ["id", "description", "source", "error", "request_key"]
        assert (table["request_key"] == "").all()  # no model was asked
        assert table["error"].tolist() == ["", "no description in the dataset", ""]
        assert table["description"].iloc[2] == "Scene 2: a busy room." and (table["source"] == "dataset").all()
        params = yaml.safe_load(Path("params.yaml").read_text())
        params["egonormia"]["describe"]["source"] = "model"
        Path("params.yaml").write_text(yaml.safe_dump(params))
        assert describe() == 0
    table = pd.read_parquet("data/egonormia/descriptions.parquet")
    assert (table["error"] == "").all() and (table["source"] == "model:keyed-vlm").all()
    assert table["request_key"].str.fullmatch("[0-9a-f]{64}").all()  # what the audit replays on another clone
    assert (table["description"] == "A person stands in a kitchen talking to a friend.").all()
    assert len(server.requests) == 3
    sent = [
        base64.b64decode(r.body["messages"][1]["content"][0]["image_url"]["url"].split(",")[1]) for r in server.requests
    ]
    assert sorted(sent) == sorted(jpeg(i) for i in range(3))


def test_cache_only_mode_replays_and_reports_misses_without_calling(tmp_path: Path, monkeypatch) -> None:
    items = make_items(4)
    index = write_frames(tmp_path / "frames", items)
    args = (index, tmp_path / "frames", descriptions_of(items))
    with OpenAIServer(policy=KeyedPolicy.from_items(items)) as server:
        first = run_inference(items.iloc[:3], *args, models(model_spec(server)), *infer_params(tmp_path))
        sent = len(server.requests)
        monkeypatch.setenv("EGOEVAL_CACHE_ONLY", "1")
        monkeypatch.setenv("EGOEVAL_CACHE_DIR", str(tmp_path / "cache"))
        elsewhere = infer_params(tmp_path, cache_dir=str(tmp_path / "not-used"))
        replay = run_inference(items, *args, models(model_spec(server)), *elsewhere)
    assert len(server.requests) == sent  # nothing sent in cache-only mode
    assert not (tmp_path / "not-used").exists()
    pd.testing.assert_frame_equal(replay[replay["id"] != "clip-003"].reset_index(drop=True), first)
    missing = replay[replay["id"] == "clip-003"]
    assert len(missing) == 9
    assert set(missing["error"]) == {
        "not in the response cache (cache-only mode)",
        "action failed: not in the response cache (cache-only mode)",
    }


@pytest.mark.bad_input
@pytest.mark.parametrize("backend", ["openai", "openai_batch"])
@pytest.mark.parametrize("value", [None, ""], ids=["unset", "empty"])
def test_a_missing_key_variable_stops_the_stage_before_its_first_request(
    tmp_path: Path, backend: str, value: str | None
) -> None:
    """The infer stage's CLI with the key variable unset or empty: exit 2, one line naming the variable, and the
    loopback server counts no request at all (no chat call, no Batch API file or batch)."""
    items = make_items(2)
    env = {k: v for k, v in tool_env().items() if k != KEY_ENV} | ({} if value is None else {KEY_ENV: value})
    with OpenAIServer(policy=KeyedPolicy.from_items(items)) as server:
        write_stage_inputs(tmp_path, items, model_spec(server, backend=backend))
        assert describe_in(tmp_path) == 0
        run = subprocess.run(
            [sys.executable, "-m", "stages.egonormia.infer"],
            cwd=tmp_path,
            env=env,
            capture_output=True,
            text=True,
            timeout=120,
        )
    assert run.returncode == 2, run.stderr[-2000:]
    (line,) = [line for line in run.stderr.splitlines() if line.startswith("error:")]
    state = "not set" if value is None else "empty"
    assert f"the environment variable {KEY_ENV} (named by the model's api_key_env) is {state}" in line, line
    assert "Traceback" not in run.stderr
    assert server.requests == [] and server.files == {} and server.batches_created == 0
    assert not (tmp_path / "data/egonormia/responses.parquet").exists()
    assert list((tmp_path / "data/egonormia/batches").glob("*.jsonl")) == []  # no request file written either


def describe_in(root: Path) -> int:
    """The describe stage (from the dataset: no model call) in ``root``, as its CLI runs it."""
    run = forked.run([sys.executable, "-m", "stages.egonormia.describe"], root, tool_env(), timeout=120)
    return run.returncode
