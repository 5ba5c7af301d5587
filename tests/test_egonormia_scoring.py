"""EgoNormia scoring: hand-computed metrics, the official scorer's semantics, the parse/score stages, the CLI."""

from __future__ import annotations

import json
import math
import subprocess
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from conftest import EGOEVAL, write_params
from hypothesis import given, settings
from hypothesis import strategies as st

from egoeval.core.errors import ScorerInputError
from egoeval.core.settings import benchmark_settings
from egoeval.core.stage_shell import run_stage
from egoeval.egonormia.artifacts import SUBTASKS
from egoeval.egonormia.metrics import score, write_metrics
from egoeval.egonormia.predictions import parse_responses, write_predictions
from egoeval.egonormia.result_names import results_key, setting_of
from egoeval.egonormia.scoring import (
    Outcomes,
    bootstrap_ci,
    category_accuracy,
    failure_rates,
    option_masks,
    outcomes,
    point_estimates,
    score_official,
    set_iou,
)
from egoeval.egonormia.settings import EgoNormiaSettings, ScoreSettings

REPO = Path(__file__).resolve().parents[1]

# ------------------------------------------------------------------ a tiny example, worked out by hand
#
# item  correct  action  just  both  gold sensible  predicted sensible  IoU
#  c0      0       0 ✓    0 ✓    ✓     [0, 3]         [0]                 1/2
#  c1      2       2 ✓    1 ✗    ✗     [2]            [2, 3]              1/2
#  c2      4      -1 ✗    4 ✓    ✗     [4]            [] (unparseable)    0
#  c3      1       0 ✗    1 ✓    ✗     [1, 2]         [1, 2, 3]           2/3
#  c4      4       4 ✓    0 ✗    ✗     []             [] (a real answer)  0 (empty union)
#
# action 3/5 = 60 %, justification 3/5 = 60 %, both 1/5 = 20 %, IoU (1/2 + 1/2 + 0 + 2/3 + 0) / 5 = 1/3 -> 33.33 %.
# c2's action call failed and its sensible answer did not parse: coverage 4/5, each failure rate 1/15.
# Categories of the correct option: c0 [Safety, Politeness], c1 [Politeness], c3 [Safety], c2 and c4 none
# (None is correct): Politeness n=2, action 2/2 = 100 %; Safety n=2 (c0 ✓, c3 ✗) = 50 %.
# Verified split {c0, c2}: action 1/2 = 50 %, justification 2/2 = 100 %, both 1/2 = 50 %, IoU (1/2 + 0)/2 = 25 %,
# coverage 1/2, failure rates 1/6 each.
CORRECT = [0, 2, 4, 1, 4]
GOLD = [[0, 3], [2], [4], [1, 2], []]
ACTION = [0, 2, -1, 0, 4]
JUST = [0, 1, 4, 1, 0]
SENSIBLE = [[0], [2, 3], [], [1, 2, 3], []]
ERRORS = {
    "action": ["", "", "call failed: timeout", "", ""],
    "justification": ["", "", "", "", ""],
    "sensible": ["", "", "parse: no answer found", "", ""],
}
EXPECTED = {"action": 60.0, "justification": 60.0, "both": 20.0, "sensible_iou": 100 / 3}
EXPECTED_VERIFIED = {"action": 50.0, "justification": 100.0, "both": 50.0, "sensible_iou": 25.0}
NAMES = ["Safety", "Politeness", "Privacy", "Proxemics", "Cooperation"]


def taxonomy(correct: int, names: list[str]) -> list[list[str]]:
    rows: list[list[str]] = [["Privacy"], ["Proxemics"], ["Cooperation"], ["Privacy"], []]
    rows[correct] = names
    return rows


def example_items() -> pd.DataFrame:
    behaviors = [[f"behavior {k} of {clip}" for k in range(5)] for clip in range(5)]
    for clip in range(5):
        behaviors[clip][4] = ""
    return pd.DataFrame(
        {
            "id": [f"c{k}" for k in range(5)],
            "behaviors": behaviors,
            "justifications": [[f"reason {k}" if k < 4 else "" for k in range(5)] for _ in range(5)],
            "correct_idx": CORRECT,
            "sensible_idx": GOLD,
            "taxonomy": [
                taxonomy(0, ["Safety", "Politeness"]),
                taxonomy(2, ["Politeness"]),
                taxonomy(4, []),
                taxonomy(1, ["Safety"]),
                taxonomy(4, []),
            ],
            "description": ["a scene"] * 5,
            "verified": [True, False, True, False, False],
            "video": [""] * 5,
        }
    )


def test_hand_computed_metrics() -> None:
    result = outcomes(ACTION, JUST, SENSIBLE, CORRECT, GOLD)
    assert point_estimates(result) == pytest.approx(EXPECTED, abs=1e-9)
    rates = failure_rates(ERRORS)
    assert rates == pytest.approx({"coverage": 0.8, "parse_failure_rate": 1 / 15, "call_failure_rate": 1 / 15})
    categories = [t[k] for t, k in zip(example_items()["taxonomy"], CORRECT, strict=True)]
    assert category_accuracy(result.action, categories) == [("Politeness", 2, 100.0), ("Safety", 2, 50.0)]


def test_iou_rule() -> None:
    iou = set_iou(option_masks([[], [0], [0, 1], [4], []]), option_masks([[], [], [1, 2], [4], [3]]))
    assert iou.tolist() == [0.0, 0.0, 1 / 3, 1.0, 0.0]
    with pytest.raises(ValueError, match="outside"):
        option_masks([[5]])


def test_bootstrap_is_deterministic_and_brackets_the_estimate() -> None:
    rng = np.random.default_rng(1)
    n = 300
    result = outcomes(
        rng.integers(0, 5, n),
        rng.integers(0, 5, n),
        [list(rng.choice(5, 2, replace=False)) for _ in range(n)],
        rng.integers(0, 5, n),
        [list(rng.choice(5, 2, replace=False)) for _ in range(n)],
    )
    first = bootstrap_ci(result, samples=500, seed=3, confidence=0.95)
    assert first == bootstrap_ci(result, samples=500, seed=3, confidence=0.95)
    assert first != bootstrap_ci(result, samples=500, seed=4, confidence=0.95)
    narrower = bootstrap_ci(result, samples=500, seed=3, confidence=0.5)
    for metric, value in point_estimates(result).items():
        low, high = first[metric]
        assert low <= value <= high
        assert low <= narrower[metric][0] <= narrower[metric][1] <= high
        assert 0 < high - low < 20


# ------------------------------------------------------------------ the official scorer's semantics


def naive_official(data: dict[str, Any]) -> dict[str, dict[str, float | None]]:
    """An independent oracle: the loop of the newest compute_scores_final.py (default branch, 2019f27), whose
    ``except`` catches the division by zero of an empty union after the action and justification were added."""
    scores: dict[str, dict[str, float]] = {}
    for clip in data:
        for model in sorted(data[clip]):
            if not model:
                continue
            s = scores.setdefault(model, {"action": 0, "justification": 0, "both": 0, "sensible_iou": 0, "n": 0})
            try:
                entry = data[clip][model]
                a = entry["best"]["results"][0] == entry["best"]["correct"][0]
                j = entry["best"]["results"][1] == entry["best"]["correct"][1]
                s["action"] += a
                s["justification"] += j
                s["both"] += a and j
                sensible = entry["sensible"]
                if type(sensible) is dict and len(sensible) > 0:
                    union = set(sensible["results"] + sensible["correct"])
                    inter = set(sensible["results"]) & set(sensible["correct"])
                    s["sensible_iou"] += len(inter) / len(union)
                s["n"] += 1
            except ZeroDivisionError:
                continue
    return {
        m: {k: v if k == "n" else (v / s["n"] * 100 if s["n"] else None) for k, v in s.items()}
        for m, s in scores.items()
    }


index = st.integers(-1, 4)
entries = st.fixed_dictionaries(
    {
        "best": st.fixed_dictionaries(
            {"results": st.lists(index, min_size=2, max_size=2), "correct": st.lists(index, min_size=2, max_size=2)}
        ),
        "sensible": st.one_of(
            st.just({}),
            st.just([]),
            st.none(),
            st.fixed_dictionaries(
                {"results": st.lists(st.integers(0, 4), max_size=5), "correct": st.lists(st.integers(0, 4), max_size=5)}
            ),
        ),
    }
)
eval_jsons = st.dictionaries(
    st.text(min_size=1, max_size=8),
    st.dictionaries(st.sampled_from(["blind_m1", "m1", "desc_m2", "m3", ""]), entries, max_size=4),
    max_size=25,
)


@settings(max_examples=300, deadline=None)
@given(data=eval_jsons)
def test_score_official_matches_the_naive_oracle(data: dict[str, Any]) -> None:
    ours, oracle = score_official(data), naive_official(data)
    assert set(ours) == set(oracle)
    for model, scores in oracle.items():
        assert ours[model]["n"] == scores["n"]
        for metric in ("action", "justification", "both", "sensible_iou"):
            if scores[metric] is None:  # no clip counted: the script divides by zero, we give no number
                assert ours[model][metric] is None
            else:
                assert math.isclose(ours[model][metric], scores[metric], rel_tol=0, abs_tol=1e-9)


def test_per_model_denominators_and_empty_sensible() -> None:
    def entry(action: int, sensible: Any) -> dict[str, Any]:
        return {"best": {"results": [action, -1], "correct": [1, 1]}, "sensible": sensible}

    data = {
        "a": {"m": entry(1, {"results": [1], "correct": [1, 2]}), "k": entry(0, {})},
        "b": {"m": entry(1, {}), "k": entry(1, {"results": [], "correct": []})},
        "c": {"m": entry(0, {"results": [1, 2], "correct": [1, 2]})},
    }
    scores = score_official(data)
    # m: 3 clips, actions ✓ ✓ ✗ -> 200/3 %; IoU 1/2 + 0 ({}) + 1 -> 50 %; justification -1 never correct.
    assert scores["m"] == pytest.approx(
        {"action": 200 / 3, "justification": 0.0, "both": 0.0, "sensible_iou": 50.0, "n": 3}
    )
    # k: 2 clips carry it; b's empty union leaves n (the newest scorer) but its correct action stays in the sum.
    assert scores["k"] == pytest.approx(
        {"action": 100.0, "justification": 0.0, "both": 0.0, "sensible_iou": 0.0, "n": 1}
    )
    only_empty = {"b": {"k": entry(1, {"results": [], "correct": []})}}
    assert score_official(only_empty) == {
        "k": dict.fromkeys(["action", "justification", "both", "sensible_iou"]) | {"n": 0}
    }


@pytest.mark.parametrize(
    ("data", "message"),
    [
        ([], "top level"),
        ({"c1": []}, "c1"),
        ({"c1": {"m": {"sensible": {}}}}, "missing key 'best'"),
        ({"c1": {"m": {"best": {"results": [1, 1], "correct": [1, 1]}}}}, "missing key 'sensible'"),
        ({"c1": {"m": {"best": {"results": [1], "correct": [1, 1]}, "sensible": {}}}}, "two entries"),
        ({"c1": {"m": {"best": {"results": [1, 1], "correct": [1, 1]}, "sensible": {"results": [1]}}}}, "'correct'"),
    ],
)
def test_score_official_rejects_malformed_input(data: Any, message: str) -> None:
    with pytest.raises(ScorerInputError, match=message):
        score_official(data)


# ------------------------------------------------------------------ the parse and score stages


def displayed(permutation: list[int], stored: int) -> int:
    return permutation.index(stored) + 1


def example_responses() -> pd.DataFrame:
    """Responses that parse to the hand example, plus a second model whose rows for c3 are missing."""
    rows = []
    for k in range(5):
        clip = f"c{k}"
        perms = {s: list(np.roll([0, 1, 2, 3, 4], k + j)) for j, s in enumerate(SUBTASKS)}
        action = "" if ACTION[k] < 0 else f"Reasoning 1, 2, 3.\nAnswer: {displayed(perms['action'], ACTION[k])}"
        just = f"**Answer:** {'ABCDE'[displayed(perms['justification'], JUST[k]) - 1]}"
        sensible = "Answer: [" + ", ".join(str(displayed(perms["sensible"], s)) for s in SENSIBLE[k]) + "]"
        if k == 2:
            sensible = "I think several could work."
        texts = {"action": action, "justification": just, "sensible": sensible}
        for subtask in SUBTASKS:
            error = "timeout" if (k == 2 and subtask == "action") else ""
            rows.append((clip, "blind", "modelA", subtask, perms[subtask], None if error else texts[subtask], error))
            if k != 3:
                b_text = "Answer: [5]" if subtask == "sensible" else "Answer: 5"
                rows.append((clip, "video", "modelB", subtask, [0, 1, 2, 3, 4], b_text, ""))
    columns = ["id", "setting", "model", "subtask", "permutation", "response", "error"]
    frame = pd.DataFrame(rows, columns=columns)
    frame["backend"] = "test"
    frame["protocol"] = "egoeval"  # egoeval answer lines and shuffles; the official protocol: test_official.py
    frame["request_key"] = [f"key{k}" for k in range(len(frame))]
    frame["served_model"] = ""  # the endpoint named no other model (responses.parquet's column: RESPONSE_COLUMNS)
    answered_a = (frame["model"] == "modelA") & frame["response"].notna()  # modelA's endpoint reports usage
    frame["prompt_tokens"] = pd.array([100 + k if a else None for k, a in enumerate(answered_a)], dtype="Int64")
    frame["completion_tokens"] = pd.array([7 if a else None for a in answered_a], dtype="Int64")
    return frame.iloc[::-1].reset_index(drop=True)  # order must not matter


@pytest.fixture
def workdir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    (tmp_path / "data/egonormia/fetched").mkdir(parents=True)
    example_items().to_parquet(tmp_path / "data/egonormia/fetched/items.parquet", index=False)
    example_responses().to_parquet(tmp_path / "data/egonormia/responses.parquet", index=False)
    params = {"egonormia": {"score": {"bootstrap_samples": 200, "bootstrap_seed": 0, "confidence": 0.95}}}
    write_params(tmp_path, params)
    monkeypatch.chdir(tmp_path)
    return tmp_path


def run_stages(workdir: Path) -> dict[str, bytes]:
    assert run_stage(write_predictions, benchmark="egonormia") == 0
    assert (
        run_stage(lambda: write_metrics(benchmark_settings("egonormia", EgoNormiaSettings)), benchmark="egonormia") == 0
    )
    names = [
        "data/egonormia/predictions.parquet",
        "data/egonormia/predictions_eval.json",
        "metrics/egonormia.json",
        "plots/egonormia/categories.csv",
    ]
    return {name: (workdir / name).read_bytes() for name in names}


def test_stages_end_to_end(workdir: Path) -> None:
    outputs = run_stages(workdir)
    assert run_stages(workdir) == outputs  # byte-identical on rerun

    predictions = pd.read_parquet(workdir / "data/egonormia/predictions.parquet")
    a = predictions[predictions["model"] == "modelA"]
    assert a["id"].tolist() == [f"c{k}" for k in range(5)]
    assert a["action"].tolist() == ACTION and a["justification"].tolist() == JUST
    assert [list(s) for s in a["sensible"]] == SENSIBLE
    assert a["action_error"].tolist() == ["", "", "call failed: timeout", "", ""]
    assert a["sensible_error"].tolist()[2] == "parse: no answer found"
    b = predictions[predictions["model"] == "modelB"].set_index("id")
    assert b.loc["c3", "action"] == -1 and b.loc["c3", "action_error"] == "call failed: no response recorded"
    assert b.loc["c0", "action"] == 4 and list(b.loc["c0", "sensible"]) == [4]  # displayed 5 -> stored 4

    metrics = json.loads(outputs["metrics/egonormia.json"])
    assert set(metrics) == {"blind", "video"}
    a_metrics = metrics["blind"]["modelA"]
    assert {k: a_metrics[k] for k in EXPECTED} == pytest.approx(EXPECTED, abs=1e-9)
    assert a_metrics["n"] == 5 and a_metrics["coverage"] == pytest.approx(0.8)
    assert a_metrics["parse_failure_rate"] == pytest.approx(1 / 15)
    assert a_metrics["call_failure_rate"] == pytest.approx(1 / 15)
    assert set(a_metrics["ci95"]) == set(EXPECTED)
    verified = a_metrics["verified"]
    assert {k: verified[k] for k in EXPECTED_VERIFIED} == pytest.approx(EXPECTED_VERIFIED, abs=1e-9)
    assert verified["n"] == 2 and verified["coverage"] == pytest.approx(0.5)
    assert verified["parse_failure_rate"] == pytest.approx(1 / 6)
    # modelB always answers the None slot (stored 4): right on c2 and c4; c3 had no response at all.
    b_metrics = metrics["video"]["modelB"]
    assert b_metrics["action"] == pytest.approx(40.0) and b_metrics["call_failure_rate"] == pytest.approx(3 / 15)
    assert b_metrics["coverage"] == pytest.approx(0.8)
    # the ledger: modelA's 14 answered calls (c2's action timed out) and their usage; modelB's report none
    answered = example_responses().query("model == 'modelA' and response.notna()")
    tokens = int(answered["prompt_tokens"].sum())
    assert a_metrics["ledger"] == {
        "calls": 14,
        "calls_without_usage": 0,
        "prompt_tokens": tokens,
        "completion_tokens": 14 * 7,
        "cost_usd": None,
        "cost_is_lower_bound": False,
    }
    assert b_metrics["ledger"] == dict.fromkeys(a_metrics["ledger"]) | {
        "calls": 12,
        "calls_without_usage": 12,
        "cost_is_lower_bound": False,  # no price: no cost, bound or not
    }

    categories = pd.read_csv(workdir / "plots/egonormia/categories.csv")
    assert list(categories.columns) == ["setting", "model", "category", "n", "accuracy"]
    a_rows = categories[categories["model"] == "modelA"]
    assert a_rows[["category", "n", "accuracy"]].values.tolist() == [["Politeness", 2, 100.0], ["Safety", 2, 50.0]]

    # The official scorer on our eval JSON gives our stage's numbers (same n, failures count as wrong).
    official = score_official(json.loads(outputs["data/egonormia/predictions_eval.json"]))
    for setting, models in metrics.items():
        for model, ours in models.items():
            theirs = official[results_key(setting, model)]
            assert theirs["n"] == ours["n"]
            for metric in EXPECTED:
                assert math.isclose(theirs[metric], ours[metric], abs_tol=1e-9)


def test_eval_json_layout(workdir: Path) -> None:
    run_stages(workdir)
    layout = json.loads((workdir / "data/egonormia/predictions_eval.json").read_text())
    assert layout["c0"]["blind_modelA"] == {  # the official results' names: blind_<model>, <model> for video
        "best": {"results": [0, 0], "correct": [0, 0]},
        "sensible": {"results": [0], "correct": [0, 3]},
    }
    assert layout["c2"]["blind_modelA"]["best"]["results"] == [-1, 4]
    assert layout["c2"]["blind_modelA"]["sensible"] == {}  # unparseable (protocol egoeval: in n, IoU 0)
    assert layout["c4"]["blind_modelA"]["sensible"] == {}  # [] against []: in n with IoU 0 under egoeval
    assert "modelB" in layout["c3"]  # no response still yields an entry: same denominator
    assert {key for models in layout.values() for key in models} == {"blind_modelA", "modelB"}


def test_bad_responses_name_the_file_and_row(workdir: Path, capsys: pytest.CaptureFixture[str]) -> None:
    responses = example_responses()
    responses.loc[7, "setting"] = "audio"
    responses.to_parquet(workdir / "data/egonormia/responses.parquet", index=False)
    assert run_stage(write_predictions, benchmark="egonormia") == 2
    assert "responses.parquet, row 7" in capsys.readouterr().err


def test_missing_responses_file(workdir: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (workdir / "data/egonormia/responses.parquet").unlink()
    assert run_stage(write_predictions, benchmark="egonormia") == 2
    assert "responses.parquet: file not found" in capsys.readouterr().err


def test_every_call_failed(workdir: Path) -> None:
    example_responses().assign(response=None, error="HTTP 500").to_parquet(
        workdir / "data/egonormia/responses.parquet", index=False
    )
    outputs = run_stages(workdir)
    schema = pq.read_schema(workdir / "data/egonormia/predictions.parquet")
    assert schema.field("sensible").type == pa.list_(pa.int64())  # stable even when every list is empty
    scores = json.loads(outputs["metrics/egonormia.json"])["blind"]["modelA"]
    assert scores["action"] == 0.0 and scores["sensible_iou"] == 0.0 and scores["coverage"] == 0.0
    assert scores["call_failure_rate"] == 1.0 and scores["parse_failure_rate"] == 0.0
    assert scores["ci95"]["action"] == [0.0, 0.0]


def test_score_rejects_incomplete_predictions(workdir: Path) -> None:
    run_stages(workdir)
    predictions = pd.read_parquet(workdir / "data/egonormia/predictions.parquet").iloc[1:]
    items = pd.read_parquet(workdir / "data/egonormia/fetched/items.parquet")
    with pytest.raises(ValueError, match="does not cover"):
        score(items, predictions, ScoreSettings(bootstrap_samples=10, bootstrap_seed=0, confidence=0.95))


def test_verified_split_can_be_empty() -> None:
    items = example_items().assign(verified=False)
    predictions = parse_responses(items, example_responses())
    metrics, _, _ = score(items, predictions, ScoreSettings(bootstrap_samples=10, bootstrap_seed=0, confidence=0.9))
    verified = metrics["blind"]["modelA"]["verified"]
    assert verified["n"] == 0 and verified["action"] is None and verified["ci95"] is None


# ------------------------------------------------------------------ the CLI


def test_cli_score_norms(tmp_path: Path) -> None:
    hit = {"best": {"results": [1, 1], "correct": [1, 1]}, "sensible": {"results": [1], "correct": [1]}}
    data = {
        "a": {"blind/m": hit},
        "b": {
            "blind/m": {"best": {"results": [2, -1], "correct": [1, 1]}, "sensible": {}},
            "video/long-model-name": {"best": {"results": [1, 1], "correct": [1, 1]}, "sensible": {}},
        },
    }
    source, out = tmp_path / "eval.json", tmp_path / "out" / "scores.json"
    source.write_text(json.dumps(data))
    done = subprocess.run(
        [EGOEVAL, "score-norms", "--official-eval", str(source), "--json", str(out)],
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    written = json.loads(out.read_text())
    assert written == {
        "models": {
            "blind/m": {"action": 50.0, "justification": 50.0, "both": 50.0, "sensible_iou": 50.0, "n": 2},
            "video/long-model-name": {
                "action": 100.0,
                "justification": 100.0,
                "both": 100.0,
                "sensible_iou": 0.0,
                "n": 1,
            },
        }
    }
    lines = done.stdout.splitlines()
    assert lines[0].split() == ["model", "n", "action", "justification", "both", "sensible_iou"]
    assert lines[1].split() == ["blind/m", "2", "50.00", "50.00", "50.00", "50.00"]
    assert len({len(line) for line in lines}) == 1  # aligned

    source.write_text(json.dumps({"a": {"m": {"best": {"results": [1, 1], "correct": [1, 1]}}}}))
    bad = subprocess.run([EGOEVAL, "score-norms", "--official-eval", str(source)], capture_output=True, text=True)
    assert bad.returncode == 2
    assert str(source) in bad.stderr and "clip 'a'" in bad.stderr and "sensible" in bad.stderr
    source.write_text("{not json")
    assert subprocess.run([EGOEVAL, "score-norms", "--official-eval", str(source)]).returncode == 2


@settings(max_examples=300, deadline=None)
@given(st.sampled_from(["blind", "pipeline", "video"]), st.text(min_size=1, max_size=12))
def test_results_keys_are_the_official_names_and_read_back(setting: str, model: str) -> None:
    try:
        key = results_key(setting, model)
    except ValueError as error:  # only a video model named like another setting's run
        assert setting == "video" and model.startswith(("blind_", "desc_")) and repr(model) in str(error)
        return
    assert key == {"blind": f"blind_{model}", "pipeline": f"desc_{model}", "video": model}[setting]
    assert setting_of(key) == (setting, model)


def test_items_out_of_n_stay_in_the_sums() -> None:
    """The newest official scorer's accounting: an uncounted item adds its action, not its count."""
    result = outcomes([0, 1, 2, 3], [0, 1, 0, 0], [[0], [], [2], []], [0, 1, 2, 4], [[0], [], [2, 3], []])
    counted = Outcomes(result.action, result.justification, result.sensible_iou, np.array([True, False, True, False]))
    assert point_estimates(counted) == {"action": 150.0, "justification": 100.0, "both": 100.0, "sensible_iou": 75.0}
    assert point_estimates(result) == {"action": 75.0, "justification": 50.0, "both": 50.0, "sensible_iou": 37.5}
    intervals = bootstrap_ci(counted, samples=200, seed=0, confidence=0.9)
    assert all(np.isfinite(bound) for pair in intervals.values() for bound in pair)
