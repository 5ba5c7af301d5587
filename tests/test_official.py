"""``egonormia.protocol: official``: our requests and numbers against the official code's (tests/official_oracle.py).

Real items (tests/data/egonormia/ood_robot.json, with two descriptions blanked and one clip's sensible gold emptied,
as real items have them), every setting, two model names (one with ``claude`` in it, which changes the official
sensible prompt), crafted replies (trailing digits, brackets, commentary, invalid answers, floats, refusals with and
without content, a ``content_filter`` finish with text, integers past Python's int-string limit) and API errors
(500s, per-request 400s), through the real pipeline twice: ``run_inference`` and the parse and score stages in
process, and ``dvc repro`` of the EgoNormia stages on a local dataset folder against the loopback
OpenAI-compatible server (issue 17, items 3-8, each checked against the official code's behaviour).
"""

from __future__ import annotations

import base64
import hashlib
import json
import re
import subprocess
from pathlib import Path
from typing import Any

import cv2
import numpy as np
import pandas as pd
import pytest
import yaml
from conftest import EGOEVAL, copy_repo, dvc, write_params
from hypothesis import given, settings
from hypothesis import strategies as st
from official_oracle import APIError, OfficialEval, compute_scores, datapoint
from openai_server import Fault, OpenAIServer, Served, last_user_text

from egoeval.backends import ChatRequest
from egoeval.backends.openai import request_body
from egoeval.egonormia.descriptions import from_dataset
from egoeval.egonormia.fetching import write_folder_manifest
from egoeval.egonormia.inference import run_inference
from egoeval.egonormia.metrics import score
from egoeval.egonormia.predictions import eval_json, parse_responses
from egoeval.egonormia.protocols import official, registry
from egoeval.egonormia.result_names import results_key, setting_of
from egoeval.egonormia.schema import read_official_json
from egoeval.egonormia.scoring import score_official
from egoeval.egonormia.settings import InferSettings, ModelSpec, ScoreSettings

REPO = Path(__file__).resolve().parents[1]
OOD_ROBOT = REPO / "tests" / "data" / "egonormia" / "ood_robot.json"
RAW = json.loads(OOD_ROBOT.read_text())
BLANK = {"clip-9": "   ", "clip-6": ""}  # descriptions as blank as the last item of final_data.json
NO_SENSIBLE = "clip-11"  # None is correct and nothing is sensible: an empty gold list
ROBOT = {
    clip: {**item, "desc": BLANK.get(clip, item["desc"]), "sensibles": [] if clip == NO_SENSIBLE else item["sensibles"]}
    for clip, item in RAW.items()
}
SETTINGS = ["blind", "pipeline", "video"]
MODELS = ["vlm-under-test", "claude-3-haiku"]
HUGE = "1" + "9" * 5000  # past Python's int-string limit (4,300 digits)
REPLIES: list[str | Served | Fault] = [
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
    f"Thinking it over.\n{HUGE}",
    f"[{HUGE}, 2]",
    Served("Option 2", refusal="I would rather not say."),
    Served("I pick 3", finish_reason="content_filter"),
    Fault("500"),
    Fault("400"),
    Fault("refusal"),
]


def crafted(body: dict[str, Any]) -> str | Served:
    """A reply chosen by the request's text (so the oracle, given the same request, gets the same reply); the empty
    gold clip's sensible question is answered with an empty list (both lists empty: the scorer's division by zero)."""
    text = last_user_text(body)
    if "PYTHON LIST" in text and RAW[NO_SENSIBLE]["behaviors"][0] in text:
        return "None of them fits.\n[]"
    reply = REPLIES[int(hashlib.sha256(f"{body['model']}|{text}".encode()).hexdigest()[:8], 16) % len(REPLIES)]
    if isinstance(reply, Fault):
        raise reply
    return reply


def oracle_call(body: dict[str, Any]) -> str | None:
    """What the official code gets for the same request: the reply's content (None for a refusal without content,
    as the OpenAI client returns it), APIError for an HTTP error."""
    try:
        reply = crafted(body)
    except Fault as fault:
        if fault.kind == "refusal":
            return None
        raise APIError(fault.kind) from None
    return reply.content if isinstance(reply, Served) else reply


def jpeg(k: int) -> bytes:
    ok, buffer = cv2.imencode(".jpg", np.full((24, 72, 3), 20 * k, np.uint8))
    assert ok
    return buffer.tobytes()


def oracle_run(images: dict[str, str]) -> tuple[dict[tuple[str, str], Any], list[dict[str, Any]]]:
    """The official code on ROBOT for every model and setting: its eval-JSON entries per (setting, model) and its
    request bodies; ``images``: the image URL each clip's video calls carry (ours: the data URL we send)."""
    expected: dict[tuple[str, str], Any] = {}
    bodies: list[dict[str, Any]] = []
    for model in MODELS:
        for setting in SETTINGS:
            evaluation = OfficialEval(model, setting, oracle_call)
            expected[(setting, model)] = evaluation.evaluate([datapoint(ROBOT[c], images[c]) for c in sorted(ROBOT)])
            bodies += evaluation.bodies
    return expected, bodies


@pytest.fixture(scope="module")
def run(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    root = tmp_path_factory.mktemp("official")
    (root / "ood_robot.json").write_text(json.dumps(ROBOT))
    items = read_official_json(root / "ood_robot.json")
    frames = root / "frames"
    frames.mkdir()
    for k, clip_id in enumerate(items["id"]):
        (frames / f"{clip_id}.jpg").write_bytes(jpeg(k))
    index = pd.DataFrame({"id": items["id"], "image": [f"{i}.jpg" for i in items["id"]], "error": ""})
    specs = [
        {"backend": "openai", "name": name, "base_url": None, "concurrency": 2, "max_retries": 0, "retry_base_s": 0.01}
        for name in MODELS
    ]
    infer = InferSettings(settings=SETTINGS, seed=0, max_failure_rate=1.0, cache_dir=str(root / "cache"))
    with OpenAIServer(policy=crafted) as server, pytest.MonkeyPatch.context() as env:
        env.setenv(KEY_ENV, CANARY)  # the loopback endpoint takes any key; the backend sends none without one
        models = [ModelSpec.model_validate({**spec, "base_url": server.url, "api_key_env": KEY_ENV}) for spec in specs]
        descriptions = from_dataset(items)
        responses = run_inference(items, index, frames, descriptions, models, infer, registry()["official"])
        bodies = [request.body for request in server.requests]
    predictions = parse_responses(items, responses)
    metrics, _, _ = score(items, predictions, ScoreSettings(bootstrap_samples=20, bootstrap_seed=0, confidence=0.9))
    images = {c: "data:image/jpeg;base64," + base64.b64encode(jpeg(k)).decode() for k, c in enumerate(items["id"])}
    expected, oracle_bodies = oracle_run(images)
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
    layout = eval_json(run["items"], run["predictions"])
    scores = score_official(layout)
    for (setting, model), entries in run["oracle"].items():
        theirs = compute_scores(entries)
        for metric in ("action", "justification", "both", "sensible_iou", "n"):
            assert scores[results_key(setting, model)][metric] == pytest.approx(theirs[metric], abs=1e-9)
    for (setting, model), entries in run["oracle"].items():  # entry for entry, under the official results' names
        key = OfficialEval(model, setting, oracle_call).key
        ours = {clip: models[key] for clip, models in layout.items() if key in models}
        assert set(ours) == set(entries)
        for clip, entry in entries.items():
            assert ours[clip]["best"] == entry["best"]
            assert sorted(ours[clip]["sensible"]["results"]) == sorted(entry["sensible"]["results"])
            assert sorted(ours[clip]["sensible"]["correct"]) == sorted(entry["sensible"]["correct"])


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
    except official.ReferenceCodeError:
        return "error"
    return "invalid" if chosen is None else chosen


_PIECES = st.sampled_from(
    ["1", "2", "5", "0", "7", "12", "2.5", "3.0", "-1", "[", "]", "[1, 3]", "[2]", "['x']", "(", ")", ", ", " ",
     "\n", "Answer:", "option", "None", "True", "1j", "[1, [2]]", "{1}", "٣", HUGE, "0" * 4300 + "3", "\r", "\x00"]
)  # fmt: skip


@settings(max_examples=400, deadline=None)
@given(st.lists(_PIECES, max_size=12).map("".join))
def test_extraction_equals_the_official_code(text: str) -> None:
    assert official.extract_single(text) == _oracle_single(text)
    assert _ours_multi(text) == _oracle_multi(text)


@pytest.mark.bad_input
@settings(max_examples=1000, deadline=None)
@given(st.text())
def test_no_reply_text_crashes_the_official_readers(text: str) -> None:
    assert official.extract_single(text) in {None, 0, 1, 2, 3, 4}
    try:
        chosen = official.extract_multi(text)
    except official.ReferenceCodeError:  # the official code's API error (a float or complex in range): recorded as one
        chosen = None
    assert chosen is None or isinstance(chosen, list)
    found = re.findall(r"\[.*\]", text)
    assert official.last_list(text) == (found[-1] if found else None)  # the official pattern, in linear time


@pytest.mark.bad_input
@pytest.mark.parametrize(
    "reply",
    ["[" * 300_000, "[" * 150_000 + "]", "1" * 300_000, ("[1, " * 75_000) + "]", "\n".join(["[2] ["] * 50_000)],
)
def test_hostile_replies_of_the_capped_size_are_read_without_a_crash(reply: str) -> None:
    """At most reply_byte_limit(2000) bytes reach a reader (egoeval.backends.openai); ``re.findall(r"\\[.*\\]")``
    would take hours on the first of these."""
    official.extract_single(reply)
    assert official.extract_multi(reply) in (None, [], [0], [1])


def test_request_body_shape_and_cache_key_carry_the_protocol() -> None:
    request = official.action_request("blind", ["a", "", "c", "d", "e"])
    assert request_body("m", request)["messages"][0]["content"] == [
        {"type": "text", "text": request.messages[0].content[0].text}
    ]
    egoeval_twin = ChatRequest(request.messages, request.decoding, request.choices)
    from egoeval.backends import request_key

    assert request_key("openai", "m", request) != request_key("openai", "m", egoeval_twin)
    assert request_body("m", egoeval_twin)["messages"][0]["content"] == request.messages[0].content[0].text


# ------------------------------------------------------------------ issue 17, items 3-8: through `dvc repro`

KEY_ENV = "EGOEVAL_OFFICIAL_TEST_KEY"
CANARY = "sk-official-" + hashlib.sha256(str(REPO).encode()).hexdigest()[:24]


@pytest.fixture(scope="module")
def repro(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """``dvc repro egonormia_score`` under ``egonormia.protocol: official`` on ROBOT (a local folder laid out as
    distributed, with its frame strips, pinned by a manifest), both models answered by the crafted loopback server."""
    root = copy_repo(tmp_path_factory.mktemp("repro"))
    folder = root / "robot"
    for k, clip in enumerate(sorted(ROBOT)):
        (folder / "video" / clip).mkdir(parents=True)
        (folder / "video" / clip / "frame_all_prev.jpg").write_bytes(jpeg(k))
    (folder / "ood_robot.json").write_text(json.dumps(ROBOT))
    write_folder_manifest(folder, folder / "manifest.sha256")
    with OpenAIServer(policy=crafted) as server:
        model = {"backend": "openai", "base_url": server.url, "api_key_env": KEY_ENV, "concurrency": 2}
        model |= {"max_retries": 0, "retry_base_s": 0.01, "retry_max_s": 0.05, "timeout_s": 10}
        write_params(
            root,
            {
                "egonormia": {
                    "protocol": "official",
                    "fetch": {"dataset": "ood_robot", "source": "local", "path": "robot", "media_path": None},
                    "frames": {"source": "dataset"},
                    "model": {**model, "name": MODELS[0]},
                    "baselines": [{**model, "name": MODELS[1]}],
                    "infer": {"max_failure_rate": 1.0},
                }
            },
        )
        params = yaml.safe_load((root / "params.yaml").read_text())
        params["egonormia"]["fetch"]["manifest"] = "robot/manifest.sha256"
        (root / "params.yaml").write_text(yaml.safe_dump(params, sort_keys=False))
        run = dvc(root, "repro", "egonormia_score", **{KEY_ENV: CANARY})
        requests = list(server.requests)
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    frames = pd.read_parquet(root / "data/egonormia/frames/index.parquet").set_index("id")
    sent = {clip: (root / "data/egonormia/frames" / frames.loc[clip, "image"]).read_bytes() for clip in ROBOT}
    assert all(sent[clip] == jpeg(k) for k, clip in enumerate(sorted(ROBOT)))  # the pinned strips, as they are
    expected, oracle_bodies = oracle_run(
        {c: "data:image/jpeg;base64," + base64.b64encode(b).decode() for c, b in sent.items()}
    )
    return {
        "root": root,
        "run": run,
        "requests": requests,
        "oracle": expected,
        "oracle_bodies": oracle_bodies,
        "responses": pd.read_parquet(root / "data/egonormia/responses.parquet"),
        "predictions": pd.read_parquet(root / "data/egonormia/predictions.parquet"),
        "metrics": json.loads((root / "metrics/egonormia.json").read_text()),
        "eval_json": json.loads((root / "data/egonormia/predictions_eval.json").read_text()),
    }


def fault_of(body: dict[str, Any]) -> str | None:
    """The fault the crafted server answers a request with (None: a reply)."""
    try:
        crafted(body)
    except Fault as fault:
        return fault.kind
    return None


@pytest.mark.slow
def test_repro_sends_what_the_official_code_sends_and_scores_as_its_scorer(repro: dict[str, Any]) -> None:
    ours = sorted(canonical(r.body) for r in repro["requests"])
    assert ours == sorted(canonical(body) for body in repro["oracle_bodies"])
    for (setting, model), entries in repro["oracle"].items():
        theirs, mine = compute_scores(entries), repro["metrics"][setting][model]
        assert mine["n"] == theirs["n"] and mine["excluded"] == len(ROBOT) - theirs["n"]
        for metric in ("action", "justification", "both", "sensible_iou"):
            assert mine[metric] == pytest.approx(theirs[metric], abs=1e-9), (setting, model, metric)
    assert "Traceback" not in repro["run"].stderr
    assert not [p for p in repro["root"].rglob("*") if p.is_file() and CANARY.encode() in p.read_bytes()]


@pytest.mark.slow
def test_item3_an_integer_past_the_int_string_limit_is_an_invalid_answer(repro: dict[str, Any]) -> None:
    responses, predictions = repro["responses"], repro["predictions"].set_index(["id", "setting", "model"])
    huge = responses[responses["response"].fillna("").str.endswith(HUGE) & (responses["subtask"] == "action")]
    assert len(huge) > 0
    for row in huge.itertuples():
        answer = predictions.loc[(row.id, row.setting, row.model)]
        assert answer["action"] == -1 and answer["justification"] == -1  # invalid: both wrong, still in n
        assert answer["action_error"] == "parse: official: the last integer is not 1-5"
        assert (row.id, row.setting, row.model) not in {
            (r.id, r.setting, r.model)
            for r in responses[responses["subtask"] == "justification"].itertuples()
            if not r.error.startswith("not sent: ")
        }  # the official code sends no justification call after an invalid action
    assert (responses["response"].fillna("").str.startswith(f"[{HUGE}")).any()  # the sensible form too


@pytest.mark.slow
def test_item4_content_beside_a_refusal_is_read_and_the_justification_asked(repro: dict[str, Any]) -> None:
    responses = repro["responses"].set_index(["id", "setting", "model", "subtask"])
    actions = responses.xs("action", level="subtask")
    read = actions[actions["response"].isin(["Option 2", "I pick 3"])]  # refusal field / content_filter beside them
    assert {"Option 2", "I pick 3"} <= set(read["response"])
    for (clip, setting, model), _ in read.iterrows():
        justification = responses.loc[(clip, setting, model, "justification")]
        assert not justification["error"].startswith("not sent: "), (clip, setting, model)
    predictions = repro["predictions"].set_index(["id", "setting", "model"])
    chosen = {(k, r["response"]): predictions.loc[k, "action"] for k, r in read.iterrows()}
    assert all(action in (-1, 1 if text == "Option 2" else 2) for (_, text), action in chosen.items())
    assert any(action >= 0 for action in chosen.values())  # read, not refused


@pytest.mark.slow
def test_item5_a_blank_description_is_sent_as_the_official_code_sends_it(repro: dict[str, Any]) -> None:
    def with_blank(bodies: list[dict[str, Any]], clip: str) -> list[bytes]:
        prefix = f"The following description: ''' {BLANK[clip]} '''"
        shown = str(ROBOT[clip]["behaviors"])
        return sorted(
            canonical(b) for b in bodies if last_user_text(b).startswith(prefix) and shown in last_user_text(b)
        )

    responses = repro["responses"]
    for clip in BLANK:
        mine = with_blank([r.body for r in repro["requests"]], clip)
        assert mine == with_blank(repro["oracle_bodies"], clip) and len(mine) >= len(MODELS)  # each action call
        rows = responses[(responses["id"] == clip) & (responses["setting"] == "pipeline")]
        assert not rows["error"].str.startswith("description unavailable").any()
        for model in MODELS:  # in n as the official results have it (unless an API error dropped it there too)
            key = results_key("pipeline", model)
            assert (key in repro["eval_json"][clip]) == (clip in repro["oracle"][("pipeline", model)])


@pytest.mark.slow
def test_item6_a_400_fails_its_request_only_and_is_counted_as_the_official_code_counts_it(
    repro: dict[str, Any],
) -> None:
    rejected = [r for r in repro["requests"] if fault_of(r.body) == "400"]
    assert rejected  # some requests were refused, and the run went on (exit 0)
    digests = [canonical(r.body) for r in repro["requests"]]
    assert all(digests.count(canonical(r.body)) == 1 for r in rejected)  # never retried
    errors = repro["responses"]["error"]
    failed = repro["responses"][errors.str.startswith("http 400: This request was rejected")]
    assert len(failed) == len(rejected)
    action_failed = failed[failed["subtask"] == "action"]
    for row in action_failed.itertuples():  # an API error in the action call: out of n, the sensible call not sent
        assert row.id not in {c for c, m in repro["eval_json"].items() if results_key(row.setting, row.model) in m}
    assert failed["error"].str.endswith("(authorized by Bearer ***)").all()  # the quoted key, redacted


@pytest.mark.slow
def test_item7_the_eval_json_uses_the_official_names_and_score_norms_reads_it(
    repro: dict[str, Any], tmp_path: Path
) -> None:
    keys = {key for models in repro["eval_json"].values() for key in models}
    assert keys == {"blind_vlm-under-test", "desc_vlm-under-test", "vlm-under-test"} | {
        "blind_claude-3-haiku",
        "desc_claude-3-haiku",
        "claude-3-haiku",
    }
    done = subprocess.run(
        [
            EGOEVAL,
            "score-norms",
            "--official-eval",
            "data/egonormia/predictions_eval.json",
            "--json",
            str(tmp_path / "s"),
        ],
        cwd=repro["root"],
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    scores = json.loads((tmp_path / "s").read_text())["models"]
    for (setting, model), entries in repro["oracle"].items():
        key = OfficialEval(model, setting, oracle_call).key
        theirs = compute_scores(entries)
        assert scores[key] == pytest.approx(theirs, abs=1e-9)


@pytest.mark.slow
def test_item8_both_sensible_lists_empty_leaves_n_and_keeps_the_action(repro: dict[str, Any]) -> None:
    entries = repro["eval_json"][NO_SENSIBLE]
    empty = [key for key, entry in entries.items() if entry["sensible"] == {"results": [], "correct": []}]
    assert empty  # the empty gold clip answered [] somewhere: the newest scorer's caught division by zero
    for key in empty:
        setting, model = setting_of(key)
        theirs = compute_scores(repro["oracle"][(setting, model)])
        mine = repro["metrics"][setting][model]
        assert mine["n"] == theirs["n"] < len(repro["oracle"][(setting, model)])
        assert mine["action"] == pytest.approx(theirs["action"], abs=1e-9)
