"""`egoeval estimate` (calls, tokens and cost before a run) and the infer stage's ledger (after it), against the
loopback OpenAI server."""

from __future__ import annotations

import io
import json
import math
import re
import subprocess
import sys
from pathlib import Path

import forked
import numpy as np
import pytest
import qwen2_vl_oracle
import yaml
from conftest import copy_workspace, dvc, tool_env, write_params
from hypothesis import assume, given
from hypothesis import strategies as st
from openai_server import OpenAIServer, prompt_usage
from PIL import Image

from egoeval.backends.base import ChatRequest, Decoding, ImagePart, Message, TextPart
from egoeval.backends.client import ModelClient, token_cost
from egoeval.cache import ResponseCache
from egoeval.cli import main as egoeval_main
from egoeval.egonormia.estimate import (
    VLLM_VIDEO_FRAMES,
    image_tokens,
    qwen2_vl_image_tokens,
    rule_prompt_tokens,
    video_tokens,
)
from egoeval.egonormia.inference import LEDGER_FILE
from egoeval.egonormia.settings import IMAGE_RULES, ModelSpec

KEY_ENV = "EGOEVAL_ESTIMATE_TEST_KEY"


# OpenAI's worked examples for gpt-4o (platform.openai.com/docs/guides/vision, "Calculating costs"):
@pytest.mark.parametrize(
    ("size", "tokens"),
    [((1024, 1024), 765), ((2048, 4096), 1105), ((4096, 8192), 1105), ((512, 512), 255), ((320, 240), 255)],
)
def test_image_tokens_follow_openais_worked_examples(size: tuple[int, int], tokens: int) -> None:
    assert image_tokens(*size) == tokens


@given(st.integers(1, 20000), st.integers(1, 20000))
def test_image_tokens_are_bounded_as_the_rule_says(width: int, height: int) -> None:
    # at most 2048 x 768 after resizing: 4 x 2 tiles; at least one tile
    assert 85 + 170 <= image_tokens(width, height) <= 85 + 170 * 8


def test_the_token_rules_params_allow_are_the_registrys_and_each_counts_an_image() -> None:
    assert IMAGE_RULES.names() == ("openai", "qwen2_vl")
    assert IMAGE_RULES.get("openai") is image_tokens and IMAGE_RULES.get("qwen2_vl") is qwen2_vl_image_tokens
    schema = ModelSpec.model_json_schema()["properties"]["token_rule"]
    assert schema["enum"] == ["openai", "qwen2_vl"] and schema["default"] == "openai"


# (width, height): tiny (scaled up to min_pixels), odd, sides on a half multiple of 28 (42 = 1.5 x 28, 70 = 2.5 x 28:
# rounded half to even), the strip's shapes, portrait, full HD, and huge (over max_pixels: scaled down)
QWEN_SHAPES = [
    (1, 1),
    (3, 5),
    (10, 10),
    (27, 29),
    (42, 70),
    (70, 42),
    (56, 56),
    (641, 359),
    (360, 640),
    (8000, 360),
    (1080, 1920),
    (1920, 1080),
    (4000, 3300),
    (3584, 3584),
]


def random_shapes(rng: np.random.Generator, n: int, largest: int) -> list[tuple[int, int]]:
    """``n`` (width, height) pairs up to ``largest`` px a side, the side ratio at most 200 (the processor's limit)."""
    shapes: list[tuple[int, int]] = []
    while len(shapes) < n:
        width, height = (int(x) for x in rng.integers(1, largest + 1, size=2))
        if max(width, height) / min(width, height) <= 200:
            shapes.append((width, height))
    return shapes


def test_qwen2_vl_image_tokens_equal_transformers_image_processor() -> None:
    shapes = QWEN_SHAPES + random_shapes(np.random.default_rng(31), 24, 1200)
    ours = [qwen2_vl_image_tokens(width, height) for width, height in shapes]
    assert ours == [qwen2_vl_oracle.image_tokens(width, height) for width, height in shapes]
    # worked by hand: 640 x 360 -> 644 x 364 px, 23 x 13 tokens; 1 x 1 -> 56 x 56 (min_pixels), 2 x 2
    assert (ours[QWEN_SHAPES.index((360, 640))], qwen2_vl_image_tokens(640, 360), ours[0]) == (13 * 23, 23 * 13, 4)


@given(st.integers(1, 20000), st.integers(1, 20000))
def test_qwen2_vl_image_tokens_lie_between_the_pixel_bounds(width: int, height: int) -> None:
    # min_pixels 3136 and max_pixels 12,845,056 are 4 and 16,384 tokens of 28 x 28 px
    assume(max(width, height) / min(width, height) <= 200)  # the processor refuses a longer side ratio
    assert 4 <= qwen2_vl_image_tokens(width, height) <= 16_384


@pytest.mark.parametrize("frames", [1, 2, 3, 5, 8, 9])
@pytest.mark.parametrize("size", [(1, 1), (27, 29), (70, 42), (360, 640), (641, 359), (1920, 1080)])
def test_video_tokens_equal_transformers_video_processor(frames: int, size: tuple[int, int]) -> None:
    """A clip of up to 32 frames reaches the processor whole (vLLM's loader takes every frame of a short clip); odd
    counts are padded with the last frame to a multiple of temporal_patch_size 2."""
    width, height = size
    pixels = np.zeros((frames, height, width, 3), np.uint8)
    assert video_tokens(frames, width, height) == qwen2_vl_oracle.video_tokens(pixels)


def test_video_tokens_equal_the_video_processor_on_random_and_huge_clips() -> None:
    rng = np.random.default_rng(32)
    clips = [(int(rng.integers(1, VLLM_VIDEO_FRAMES + 1)), *shape) for shape in random_shapes(rng, 12, 500)]
    clips += [(2, 4000, 3300), (1, 8000, 360), (VLLM_VIDEO_FRAMES, 64, 48)]
    for frames, width, height in clips:
        tokens = qwen2_vl_oracle.video_tokens(np.zeros((frames, height, width, 3), np.uint8))
        assert video_tokens(frames, width, height) == tokens, (frames, width, height)


def test_a_longer_clip_counts_the_frames_vllm_samples() -> None:
    """vLLM's default loader hands the processor 32 of a longer clip's frames (VideoMediaIO num_frames): 45 frames
    cost what 32 do, 16 frame pairs (not ceil(45 / 2) = 23)."""
    sampled = qwen2_vl_oracle.video_tokens(np.zeros((VLLM_VIDEO_FRAMES, 360, 640, 3), np.uint8))
    assert video_tokens(45, 640, 360) == video_tokens(VLLM_VIDEO_FRAMES, 640, 360) == sampled == 16 * 13 * 23


@pytest.mark.bad_input
def test_an_unknown_token_rule_is_refused_naming_the_key(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    write_params(tmp_path, {"egonormia": {"model": {"token_rule": "gemini"}}})
    code = egoeval_main(["check-params", str(tmp_path / "params.yaml")])
    err = capsys.readouterr().err
    assert code == 2 and "egonormia.model.token_rule" in err and "(known: openai, qwen2_vl)" in err, err
    assert "Traceback" not in err


def jpeg(width: int, height: int) -> bytes:
    out = io.BytesIO()
    Image.new("RGB", (width, height), (90, 30, 10)).save(out, "JPEG")
    return out.getvalue()


# a 1024 px square: gpt-4o's 4 tiles (OpenAI's worked example); Qwen2-VL's 37 x 37 tokens (1024 / 28 = 36.6 -> 37)
@pytest.mark.parametrize(("rule", "image"), [("openai", 765), ("qwen2_vl", 37 * 37)])
def test_the_ledger_counts_calls_hits_retries_usage_and_cost(
    tmp_path: Path, monkeypatch, rule: str, image: int
) -> None:
    monkeypatch.setenv(KEY_ENV, "sk-estimate")
    text = "Which action is normative? 1. wave 2. bow"
    request = ChatRequest((Message("user", (TextPart(text), ImagePart(jpeg(1024, 1024)))),), Decoding(0.0, 1024))
    with (
        OpenAIServer(per_request=["503"], token_rule=rule) as server,
        ResponseCache(tmp_path / "c.sqlite") as cache,
    ):
        spec = ModelSpec(
            backend="openai",
            name="m",
            base_url=server.url,
            api_key_env=KEY_ENV,
            timeout_s=10,
            retry_base_s=0.01,
            retry_max_s=0.02,
        )
        client = ModelClient.from_spec(spec, cache)
        first, again = client.complete(request), client.complete(request)
        ledger = client.ledger((2.5, 10.0))
        sent = [r.body for r in server.requests]
    assert first.error == "" and again.response == first.response
    assert len(sent) == 2 and ledger["calls"] == 1 and ledger["cache_hits"] == 1 and ledger["retries"] == 1
    prompt = math.ceil(len(text) / 4) + image
    assert ledger["prompt_tokens"] == prompt == prompt_usage(sent[-1], rule) == rule_prompt_tokens(request, rule)
    completion = math.ceil(len(first.response) / 4)
    assert ledger["completion_tokens"] == completion
    assert ledger["cost_usd"] == pytest.approx((prompt * 2.5 + completion * 10.0) / 1e6)
    assert ledger["cost_usd"] == token_cost(prompt, completion, (2.5, 10.0))
    assert 0 < ledger["latency_p50_s"] <= ledger["latency_p95_s"]
    meta = ResponseCache(tmp_path / "c.sqlite").entry(first.key)[1]
    assert (meta["prompt_tokens"], meta["completion_tokens"]) == (prompt, completion)


def egoeval(root: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return forked.run([sys.executable, "-m", "egoeval.cli", *args], root, tool_env(**{KEY_ENV: "sk-estimate"}))


@pytest.mark.slow
def test_the_estimates_upper_bound_is_the_max_tokens_the_protocol_sends(reproduced: Path, tmp_path: Path) -> None:
    """With nothing cached the completion tokens are each request's own max_tokens: under the official protocol
    2000 a call (what it sends), not egonormia.model.max_tokens."""
    root = copy_workspace(reproduced, tmp_path / "repo")
    protocol = yaml.safe_load((root / "params.yaml").read_text())["egonormia"]["protocol"]
    with OpenAIServer() as server:
        model = {"backend": "openai", "name": "loopback-fresh", "base_url": server.url, "api_key_env": KEY_ENV}
        model |= {"max_tokens": 1024, "price": {"input": 2.5, "output": 10.0}}
        write_params(root, {"egonormia": {"model": model, "fetch": {"limit": 3}}})
        inputs = dvc(root, "repro", "egonormia_describe", **{KEY_ENV: "sk-estimate"})
        assert inputs.returncode == 0, inputs.stdout[-3000:] + inputs.stderr[-3000:]
        estimated = egoeval(root, "estimate", "--json")
        assert estimated.returncode == 0 and not server.requests, estimated.stderr[-3000:]
        run = dvc(root, "repro", "egonormia_infer", **{KEY_ENV: "sk-estimate"})
        assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
        sent = [r.body for r in server.requests]
    rows = [r for r in json.loads(estimated.stdout) if r["model"] == "loopback-fresh"]
    assert sum(r["new"] for r in rows) == len(sent) > 0 and sum(r["cached"] for r in rows) == 0
    worst = sum(body["max_tokens"] for body in sent)  # what the run asked the endpoint for, at most
    assert sum(r["completion_tokens"] for r in rows) == worst
    if protocol == "official":
        assert {body["max_tokens"] for body in sent} == {2000}  # the official client's, not the param's 1024
    prompt = sum(r["prompt_tokens"] for r in rows)  # each row's rounded to a token: the cost within a cent's 1/1000
    assert sum(r["cost_usd"] for r in rows) == pytest.approx(token_cost(prompt, worst, (2.5, 10.0)), abs=1e-5)


@pytest.mark.slow
def test_the_estimate_equals_the_calls_and_cached_share_of_the_run(reproduced: Path, tmp_path: Path) -> None:
    root = copy_workspace(reproduced, tmp_path / "repo")
    with OpenAIServer() as server:
        model = {"backend": "openai", "name": "loopback-vlm", "base_url": server.url, "api_key_env": KEY_ENV}
        model["price"] = {"input": 2.5, "output": 10.0}
        # a first smoke run fills the response cache for a few clips; the next, larger run finds part of it there
        write_params(root, {"egonormia": {"model": model, "fetch": {"limit": 5}}})
        first = dvc(root, "repro", "egonormia_infer", **{KEY_ENV: "sk-estimate"})
        assert first.returncode == 0, first.stdout[-3000:] + first.stderr[-3000:]
        write_params(root, {"egonormia": {"model": model, "fetch": {"limit": 11}}})
        inputs = dvc(root, "repro", "egonormia_describe", **{KEY_ENV: "sk-estimate"})
        assert inputs.returncode == 0, inputs.stdout[-3000:] + inputs.stderr[-3000:]
        before = len(server.requests)
        estimated = egoeval(root, "estimate", "--json")
        assert estimated.returncode == 0, estimated.stderr[-3000:]
        assert len(server.requests) == before  # the estimate sends nothing
        table = egoeval(root, "estimate")
        assert table.returncode == 0 and "loopback-vlm" in table.stdout and "total" in table.stdout
        run = dvc(root, "repro", "egonormia_infer", **{KEY_ENV: "sk-estimate"})
        assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
        sent = [r.body for r in server.requests[before:]]
    rows = [r for r in json.loads(estimated.stdout) if r["model"] == "loopback-vlm"]
    assert {r["setting"] for r in rows} == {"blind", "pipeline", "video", "video:frames8"}  # each video variant
    new, cached = sum(r["new"] for r in rows), sum(r["cached"] for r in rows)
    assert new > 0 and cached > 0  # a mixed run: the test sees both shares
    assert new == len(sent)  # the server counts every request
    ledger = json.loads((root / ".egoeval-cache" / LEDGER_FILE).read_text())["loopback-vlm"]
    assert (ledger["calls"], ledger["cache_hits"], ledger["retries"]) == (new, cached, 0)
    assert ledger["prompt_tokens"] == sum(prompt_usage(body) for body in sent)
    assert ledger["cost_usd"] == token_cost(ledger["prompt_tokens"], ledger["completion_tokens"], (2.5, 10.0))
    estimated_prompt = sum(r["prompt_tokens"] for r in rows)
    print(f"estimate: {new} new, {cached} cached, {estimated_prompt} prompt tokens; run: {ledger}")
    assert abs(estimated_prompt - ledger["prompt_tokens"]) <= 0.1 * ledger["prompt_tokens"], (estimated_prompt, ledger)
    # the metrics' ledger: every answer's call, sent this run or found cached, with the price of params
    scored = dvc(root, "repro", "egonormia_score")
    assert scored.returncode == 0, scored.stdout[-3000:] + scored.stderr[-3000:]
    metrics = json.loads((root / "metrics/egonormia.json").read_text())
    answers = [
        metrics[setting]["loopback-vlm"]["ledger"] for setting in ("blind", "pipeline", "video", "video:frames8")
    ]
    assert sum(entry["calls"] for entry in answers) == new + cached
    assert sum(entry["prompt_tokens"] for entry in answers) > ledger["prompt_tokens"]  # the cached calls' too
    for entry in answers:
        assert entry["cost_usd"] == token_cost(entry["prompt_tokens"], entry["completion_tokens"], (2.5, 10.0))


def test_the_answers_ledger_is_what_the_calls_reported_sent_cached_or_batched(tmp_path: Path, monkeypatch) -> None:
    """metrics' ledger (egoeval.egonormia.ledger) from responses.parquet: tokens are the server's ``usage``, the
    same when every answer comes from the cache, and the same through the Batch API; the run's own ledger counts
    batched calls as sent, not as cache hits, and a run from the cache as hits that cost nothing."""
    import pandas as pd
    from openai_server import KeyedPolicy
    from test_batch import FAST_POLL
    from test_infer import KEY_ENV as INFER_KEY
    from test_infer import descriptions_of, infer_params, make_items, model_spec, models, write_frames

    from egoeval.egonormia.inference import run_inference
    from egoeval.egonormia.ledger import answer_ledgers
    from egoeval.egonormia.settings import Price

    monkeypatch.setenv(INFER_KEY, "sk-ledger")
    items = make_items(4)
    price = Price(input=2.5, output=10.0)

    def run(server: OpenAIServer, backend: str, root: Path) -> pd.DataFrame:
        settings, protocol = infer_params(root)
        index = write_frames(root / "frames", items)
        spec = models(model_spec(server, backend=backend, **FAST_POLL))
        return run_inference(
            items, index, root / "frames", descriptions_of(items), spec, settings, protocol, root, ledger=True
        )

    policy = KeyedPolicy.from_items(items)
    with OpenAIServer(policy=policy) as online, OpenAIServer(policy=policy) as batch_server:
        sent = run(online, "openai", tmp_path / "online")
        again = run(online, "openai", tmp_path / "online")  # every answer from the response cache
        batched = run(batch_server, "openai_batch", tmp_path / "batch")
        bodies = [r.body for r in online.requests]
    assert len(bodies) == len(sent[sent["response"].notna()]) > 0  # each answer one call
    pd.testing.assert_frame_equal(sent, again)  # a cached answer carries its first call's figures
    ledgers = answer_ledgers(sent, {"keyed-vlm": price})
    total = {k: sum(entry[k] for entry in ledgers.values()) for k in ("calls", "prompt_tokens", "completion_tokens")}
    completion = sum(-(-len(text) // 4) for text in sent["response"].dropna())  # the server's count: 4 chars a token
    assert total == {
        "calls": len(bodies),
        "prompt_tokens": sum(map(prompt_usage, bodies)),
        "completion_tokens": completion,
    }
    for entry in ledgers.values():
        assert entry["cost_usd"] == token_cost(entry["prompt_tokens"], entry["completion_tokens"], (2.5, 10.0))
    assert answer_ledgers(batched, {"keyed-vlm": price}) == ledgers  # the same tokens and cost through batches
    run_ledger = json.loads((tmp_path / "batch" / "cache" / LEDGER_FILE).read_text())["keyed-vlm"]
    assert (run_ledger["calls"], run_ledger["cache_hits"]) == (len(bodies), 0)
    assert run_ledger["prompt_tokens"] == total["prompt_tokens"]
    cached_run = json.loads((tmp_path / "online" / "cache" / LEDGER_FILE).read_text())["keyed-vlm"]
    assert (cached_run["calls"], cached_run["cache_hits"], cached_run["prompt_tokens"]) == (0, len(bodies), 0)


@pytest.mark.slow
def test_the_infer_stage_prints_its_ledger_and_a_price_change_reruns_the_score_not_inference(
    reproduced: Path, tmp_path: Path
) -> None:
    """The user guide's two claims: the infer stage prints what its run cost (calls, hits, retries, tokens, latency,
    cost: the figures of ledger-egonormia_infer.json), and a changed price re-runs the score stage and the reports
    after it, not describe or infer (nothing is asked again), with the metrics' cost at the new price."""
    root = copy_workspace(reproduced, tmp_path / "repo")
    with OpenAIServer() as server:
        model = {"backend": "openai", "name": "loopback-vlm", "base_url": server.url, "api_key_env": KEY_ENV}
        write_params(root, {"egonormia": {"model": model | {"price": {"input": 2.5, "output": 10.0}}}})
        first = dvc(root, "repro", **{KEY_ENV: "sk-estimate"})
        assert first.returncode == 0, first.stdout[-3000:] + first.stderr[-3000:]
        sent = len(server.requests)
        write_params(root, {"egonormia": {"model": model | {"price": {"input": 5.0, "output": 20.0}}}})
        again = dvc(root, "repro", **{KEY_ENV: "sk-estimate"})
        assert again.returncode == 0, again.stdout[-3000:] + again.stderr[-3000:]
        assert len(server.requests) == sent > 0  # no call asked again
    ledger = json.loads((root / ".egoeval-cache" / LEDGER_FILE).read_text())["loopback-vlm"]
    printed = (
        f"infer: loopback-vlm: {sent} calls, 0 cache hits, 0 retries, {ledger['prompt_tokens']:,} prompt + "
        f"{ledger['completion_tokens']:,} completion tokens, latency p50 {ledger['latency_p50_s']:g} s, p95 "
        f"{ledger['latency_p95_s']:g} s, cost ${ledger['cost_usd']:.4f}, limit "
    )
    assert ledger["calls"] == sent and ledger["prompt_tokens"] > 0 and printed in first.stdout + first.stderr
    assert "is empty" not in first.stdout + first.stderr  # DVC finds no declared output empty (data/egonormia/batches)
    ran = re.findall(r"^Running stage '([^']+)'", again.stdout, flags=re.MULTILINE)
    assert ran == ["params", "egonormia_score", "egonormia_report", "report"], again.stdout[-3000:]
    metrics = json.loads((root / "metrics/egonormia.json").read_text())
    for setting in ("blind", "pipeline", "video"):
        entry = metrics[setting]["loopback-vlm"]["ledger"]
        assert entry["cost_usd"] == token_cost(entry["prompt_tokens"], entry["completion_tokens"], (5.0, 20.0)) > 0
