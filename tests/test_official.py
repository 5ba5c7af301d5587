"""``egonormia.protocol: official``: our requests and numbers against the official code's (tests/official_oracle.py).

Real items (tests/data/egonormia/ood_robot.json), every setting, two model names (one with ``claude`` in it, which
changes the official sensible prompt), crafted replies (trailing digits, brackets, commentary, invalid answers,
floats, refusals) and API errors, all through the real pipeline: ``run_inference`` against the loopback
OpenAI-compatible server, then the parse and score stages.
"""

from __future__ import annotations

import base64
import hashlib
import json
from pathlib import Path
from typing import Any

import cv2
import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from official_oracle import APIError, OfficialEval, compute_scores, datapoint

from egoeval.backends import ChatRequest
from egoeval.backends.openai import request_body
from egoeval.egonormia import official
from egoeval.egonormia.inference import run_inference
from egoeval.egonormia.schema import read_official_json
from egoeval.egonormia.scoring import score_official
from egoeval.openai_server import Fault, OpenAIServer, last_user_text
from stages.egonormia import describe as describe_stage
from stages.egonormia import parse as parse_stage
from stages.egonormia import score as score_stage

REPO = Path(__file__).resolve().parents[1]
OOD_ROBOT = REPO / "tests" / "data" / "egonormia" / "ood_robot.json"
RAW = json.loads(OOD_ROBOT.read_text())
SETTINGS = ["blind", "pipeline", "video"]
MODELS = ["vlm-under-test", "claude-3-haiku"]
REPLIES: list[str | Fault] = [
    "Reasoning about options 2 and 4.\n3",
    "I choose 5",
    "The answer is 0",
    "Option 7 is the best",
    "no number at all",
    "[2, 4] (options 1 and 3 are rude)",
    "Answer: 2.",
    "1\n\nActually 2 and 4 are fine too",
    "[1, 3]",
    "Thinking about [2]\n[4, 5]",
    "[1, 3] and [2]",
    "[6, 1]",
    "[1.5]",
    "['a']",
    "[]",
    "[2.0, 3]",
    "None of these",
    Fault("500"),
    Fault("refusal"),
]


def crafted(body: dict[str, Any]) -> str:
    """A reply chosen by the request's text (so the oracle, given the same request, gets the same reply)."""
    text = last_user_text(body)
    reply = REPLIES[int(hashlib.sha256(f"{body['model']}|{text}".encode()).hexdigest()[:8], 16) % len(REPLIES)]
    if isinstance(reply, Fault):
        raise reply
    return reply


def oracle_call(body: dict[str, Any]) -> str | None:
    """What the official code gets for the same request: the reply, None for a refusal, APIError for an error."""
    try:
        return crafted(body)
    except Fault as fault:
        if fault.kind == "refusal":
            return None  # the OpenAI client returns content None
        raise APIError(fault.kind) from None


def jpeg(k: int) -> bytes:
    ok, buffer = cv2.imencode(".jpg", np.full((24, 72, 3), 20 * k, np.uint8))
    assert ok
    return buffer.tobytes()


@pytest.fixture(scope="module")
def run(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    root = tmp_path_factory.mktemp("official")
    items = read_official_json(OOD_ROBOT)
    frames = root / "frames"
    frames.mkdir()
    for k, clip_id in enumerate(items["id"]):
        (frames / f"{clip_id}.jpg").write_bytes(jpeg(k))
    index = pd.DataFrame({"id": items["id"], "image": [f"{i}.jpg" for i in items["id"]], "error": ""})
    specs = [
        {"backend": "openai", "name": name, "base_url": None, "concurrency": 2, "max_retries": 0, "retry_base_s": 0.01}
        for name in MODELS
    ]
    infer = {
        "settings": SETTINGS,
        "seed": 0,
        "max_failure_rate": 1.0,
        "cache_dir": str(root / "cache"),
        "protocol": "official",
    }
    with OpenAIServer(policy=crafted) as server:
        for spec in specs:
            spec["base_url"] = server.url
        responses = run_inference(items, index, frames, describe_stage.from_dataset(items), specs, infer)
        bodies = [request.body for request in server.requests]
    predictions = parse_stage.parse_responses(items, responses)
    metrics, _ = score_stage.score(
        items, predictions, {"bootstrap_samples": 20, "bootstrap_seed": 0, "confidence": 0.9}
    )
    expected: dict[tuple[str, str], Any] = {}
    oracle_bodies: list[dict[str, Any]] = []
    for model in MODELS:
        for setting in SETTINGS:
            evaluation = OfficialEval(model, setting, oracle_call)
            images = {
                clip_id: "data:image/jpeg;base64," + base64.b64encode(jpeg(k)).decode()
                for k, clip_id in enumerate(items["id"])
            }
            points = [datapoint(RAW[clip_id], images[clip_id]) for clip_id in items["id"]]
            expected[(setting, model)] = evaluation.evaluate(points)
            oracle_bodies += evaluation.bodies
    return {
        "items": items,
        "responses": responses,
        "predictions": predictions,
        "metrics": metrics,
        "bodies": bodies,
        "oracle": expected,
        "oracle_bodies": oracle_bodies,
    }


def canonical(body: dict[str, Any]) -> bytes:
    return json.dumps(body, sort_keys=True, ensure_ascii=False).encode()


def test_every_request_equals_the_official_codes_byte_for_byte(run: dict[str, Any]) -> None:
    ours = sorted(canonical(body) for body in run["bodies"])
    theirs = sorted(canonical(body) for body in run["oracle_bodies"])
    assert len(ours) == len(theirs)
    assert ours == theirs  # same calls, same texts, same parts in the same order, same decoding
    texts = [last_user_text(body) for body in run["bodies"]]
    assert any("{desc}" in text for text in texts)  # the official quirk: the description call's justification
    assert any(text.endswith(official.protocol()["templates"]["claude_suffix"]) for text in texts)
    assert any(body["messages"][0]["content"][0]["type"] == "image_url" for body in run["bodies"])


def test_the_metrics_equal_the_official_scorers(run: dict[str, Any]) -> None:
    for (setting, model), entries in run["oracle"].items():
        ours = run["metrics"][setting][model]
        theirs = compute_scores(entries)
        assert ours["protocol"] == "official"
        assert ours["n"] == theirs["n"] and ours["excluded"] == len(run["items"]) - theirs["n"]
        for metric in ("action", "justification", "both", "sensible_iou"):
            assert ours[metric] == pytest.approx(theirs[metric], abs=1e-9), (setting, model, metric)
    excluded = sum(run["metrics"][s][m]["excluded"] for s in SETTINGS for m in MODELS)
    assert excluded > 0  # API errors happened, and left n


def test_our_eval_json_scores_the_same(run: dict[str, Any]) -> None:
    layout = parse_stage.eval_json(run["items"], run["predictions"])
    scores = score_official(layout)
    for (setting, model), entries in run["oracle"].items():
        theirs = compute_scores(entries)
        for metric in ("action", "justification", "both", "sensible_iou", "n"):
            assert scores[f"{setting}/{model}"][metric] == pytest.approx(theirs[metric], abs=1e-9)


def test_calls_the_official_code_does_not_make_are_recorded_not_sent(run: dict[str, Any]) -> None:
    responses = run["responses"]
    assert (responses["protocol"] == "official").all()
    not_sent = responses[responses["error"].str.startswith("not sent: ")]
    assert set(not_sent["subtask"]) == {"justification", "sensible"}
    assert len(run["bodies"]) == int((~responses["error"].str.startswith("not sent: ")).sum())


# ------------------------------------------------------------------ extraction, fuzzed against the oracle


def _oracle_single(text: str) -> int | None:
    evaluation = OfficialEval("m", "blind", lambda body: text if "Behavior options" in last_user_text(body) else "1")
    best = evaluation.pick_best(datapoint(RAW["clip-1"], None))
    return None if best["results"][0] == -1 else best["results"][0]


def _oracle_multi(text: str) -> list[int] | str:
    evaluation = OfficialEval("m", "blind", lambda body: text)
    results = evaluation.pick_sensible(datapoint(RAW["clip-1"], None), {"results": [0, 0]})["results"]
    return {(-1, -1): "invalid", (-2, -2): "error"}.get(tuple(results), results)


def _ours_multi(text: str) -> list[int] | str:
    try:
        chosen = official.extract_multi(text)
    except official.OfficialError:
        return "error"
    return "invalid" if chosen is None else chosen


_PIECES = st.sampled_from(
    ["1", "2", "5", "0", "7", "12", "2.5", "3.0", "-1", "[", "]", "[1, 3]", "[2]", "['x']", "(", ")", ", ", " ",
     "\n", "Answer:", "option", "None", "True", "1j", "[1, [2]]", "{1}", "٣"]
)  # fmt: skip


@settings(max_examples=400, deadline=None)
@given(st.lists(_PIECES, max_size=12).map("".join))
def test_extraction_equals_the_official_code(text: str) -> None:
    assert official.extract_single(text) == _oracle_single(text)
    assert _ours_multi(text) == _oracle_multi(text)


def test_request_body_shape_and_cache_key_carry_the_protocol() -> None:
    request = official.action_request("blind", ["a", "", "c", "d", "e"])
    assert request_body("m", request)["messages"][0]["content"] == [
        {"type": "text", "text": request.messages[0].content[0].text}
    ]
    egoeval_twin = ChatRequest(request.messages, request.decoding, request.question, protocol="egoeval")
    from egoeval.backends import request_key

    assert request_key("openai", "m", request) != request_key("openai", "m", egoeval_twin)
    assert request_body("m", egoeval_twin)["messages"][0]["content"] == request.messages[0].content[0].text
