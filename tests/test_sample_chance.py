"""The bundled EgoNormia sample has no positional shortcut: answerers that never read the options score within chance.

Interval of chance (``chance_interval``): the exact permutation null of a metric's sum over the clips. Each clip's
gold positions (the correct option, which the format uses for the action and the justification, and the sensible
set) are relabelled by a uniformly random permutation of the five positions, independently per clip, the model's
answers held fixed; the interval is the central ``1 - ALPHA`` of that exact distribution (a convolution over clips,
in fractions). For action and justification it is the exact Binomial(n, 1/5) interval; for ``both`` and sensible
IoU it follows the answers (a constant answerer under the unshuffled official protocol has ``both`` at 1/5, under
egoeval's independent shuffles near 1/25). ``ALPHA`` is 0.001 per check because some 170 checks run and two of the
answerers are random; the old sample's shortcut (gold first in 12 of 16) lies at p < 1e-6.
"""

from __future__ import annotations

import itertools
import json
from collections import Counter
from collections.abc import Sequence
from fractions import Fraction
from pathlib import Path
from typing import Any

import pandas as pd
import pytest
import yaml
from conftest import REPO, copy_workspace, dvc
from hypothesis import given, settings
from hypothesis import strategies as st
from openai_server import OpenAIServer, PositionPolicy
from scipy.stats import binom

from egoeval.egonormia.positions import N_OPTIONS, balance_positions, canonical, position_counts, reorder_clip
from egoeval.egonormia.protocols import recorded
from egoeval.egonormia.report import option_order_note
from egoeval.egonormia.schema import read_official_json
from egoeval.egonormia.scoring import outcomes

SAMPLE = REPO / "data/egonormia/sample/clips.json"
ALPHA = 0.001
METRICS = ("action", "justification", "both", "sensible_iou")
ANSWERERS = {f"always-{k}": PositionPolicy.constant(k) for k in range(1, N_OPTIONS + 1)} | {
    "position-biased": PositionPolicy([0.5, 0.2, 0.1, 0.1, 0.1], seed=1)
}
RELABELLINGS = list(itertools.permutations(range(N_OPTIONS)))


def iou(pred: set[int], gold: set[int]) -> Fraction:
    union = pred | gold
    return Fraction(len(pred & gold), len(union)) if union else Fraction(0)


def clip_values(action: int, justification: int, sensible: set[int], correct: int, gold: set[int]) -> tuple:
    """The clip's four metric values (fractions) for one placement of its gold."""
    return (
        Fraction(action == correct),
        Fraction(justification == correct),
        Fraction(action == correct and justification == correct),
        iou(sensible, gold),
    )


def null_of_clip(action: int, justification: int, sensible: set[int], correct: int, gold: set[int]) -> list[Counter]:
    """Per metric, the clip's value distribution (counts over the 120 relabellings of its positions)."""
    dists: list[Counter] = [Counter() for _ in METRICS]
    for sigma in RELABELLINGS:
        values = clip_values(action, justification, sensible, sigma[correct], {sigma[k] for k in gold})
        for dist, value in zip(dists, values, strict=True):
            dist[value] += 1
    return dists


def chance_interval(clips: Sequence[Counter]) -> tuple[Fraction, Fraction]:
    """The central 1 - ALPHA interval of the sum of independent per-clip values (exact convolution)."""
    total: Counter = Counter({Fraction(0): Fraction(1)})
    for clip in clips:
        weight = sum(clip.values())
        step: Counter = Counter()
        for s, p in total.items():
            for value, count in clip.items():
                step[s + value] += p * Fraction(count, weight)
        total = step
    cumulative, low, high = Fraction(0), None, None
    for value in sorted(total):
        cumulative += total[value]
        if low is None and cumulative >= ALPHA / 2:
            low = value
        if high is None and cumulative >= 1 - ALPHA / 2:
            high = value
    assert low is not None and high is not None
    return low, high


def clip_table(rows: pd.DataFrame, items: pd.DataFrame) -> list[tuple[int, int, set[int], int, set[int]]]:
    """Per clip of one setting and model: (action, justification, sensible set, correct, gold sensible set)."""
    gold = items.set_index("id").loc[rows["id"]]
    return [
        (int(a), int(j), {int(k) for k in s}, int(c), {int(k) for k in g})
        for a, j, s, c, g in zip(
            rows["action"],
            rows["justification"],
            rows["sensible"],
            gold["correct_idx"],
            gold["sensible_idx"],
            strict=True,
        )
    ]


def observed_sums(rows: pd.DataFrame, items: pd.DataFrame) -> list[Fraction]:
    """Per metric, the sum of its values over the clips (stored indices compared with the gold)."""
    values = [clip_values(*clip) for clip in clip_table(rows, items)]
    return [sum((v[m] for v in values), Fraction(0)) for m in range(len(METRICS))]


def outside_chance(rows: pd.DataFrame, items: pd.DataFrame) -> dict[str, tuple[Fraction, tuple[Fraction, Fraction]]]:
    """The metrics of one setting and model (its prediction rows, stored indices) outside their interval of chance."""
    nulls = [null_of_clip(*clip) for clip in clip_table(rows, items)]
    found = {}
    for m, (metric, value) in enumerate(zip(METRICS, observed_sums(rows, items), strict=True)):
        low, high = chance_interval([null[m] for null in nulls])
        if not low <= value <= high:
            found[metric] = (value, (low, high))
    return found


# ------------------------------------------------------------------ the sample and its generator (fast)


def sample_items() -> pd.DataFrame:
    return read_official_json(SAMPLE)


def constant_answers(items: pd.DataFrame, option: int) -> pd.DataFrame:
    """What a constant answerer (0-based ``option``) answers under the official protocol: that stored position."""
    n = len(items)
    return pd.DataFrame(
        {"id": items["id"], "action": [option] * n, "justification": [option] * n, "sensible": [[option]] * n}
    )


def test_the_committed_sample_is_the_generators_output_with_balanced_gold_positions() -> None:
    clips = json.loads(SAMPLE.read_text())
    assert balance_positions(clips, seed=0) == clips
    counts = position_counts(clips)
    assert max(counts["gold"]) - min(counts["gold"]) <= 1
    assert max(counts["sensible"]) - min(counts["sensible"]) <= 1
    assert max(counts["empty"]) - min(counts["empty"]) <= 1


@pytest.mark.parametrize("option", range(N_OPTIONS))
def test_a_constant_answerer_scores_within_chance_on_the_sample(option: int) -> None:
    items = sample_items()
    rows = constant_answers(items, option)
    assert outside_chance(rows, items) == {}
    # for action the permutation null is Binomial(n, 1/5): its interval as SciPy computes it
    low, high = chance_interval([null_of_clip(*clip)[0] for clip in clip_table(rows, items)])
    assert [low, high] == list(binom.ppf([ALPHA / 2, 1 - ALPHA / 2], len(items), 1 / N_OPTIONS))


def test_the_interval_finds_the_shortcut_of_a_sample_with_the_gold_first() -> None:
    clips = json.loads(SAMPLE.read_text())
    first = [
        reorder_clip(c, [c["correct"], *(k for k in range(N_OPTIONS) if k != c["correct"])]) for c in clips.values()
    ]
    shortcut = pd.DataFrame(
        {
            "id": [c["id"] for c in first],
            "correct_idx": [c["correct"] for c in first],
            "sensible_idx": [c["sensibles"] for c in first],
        }
    )
    assert {"action", "justification", "both"} <= set(outside_chance(constant_answers(shortcut, 0), shortcut))


@st.composite
def official_clips(draw: st.DrawFn) -> dict[str, dict[str, Any]]:
    """Clips in the official layout: five distinct options (one may be empty), a correct index, sensible indices."""
    n = draw(st.integers(1, 40))
    clips = {}
    for k in range(n):
        texts = draw(st.lists(st.text("abcxyz", max_size=4), min_size=N_OPTIONS, max_size=N_OPTIONS, unique=True))
        clips[f"clip-{k}"] = {
            "id": f"clip-{k}",
            "behaviors": texts,
            "justifications": [f"because {t}" for t in texts],
            "correct": draw(st.integers(0, N_OPTIONS - 1)),
            "sensibles": draw(st.lists(st.integers(0, N_OPTIONS - 1), max_size=3, unique=True)),
            "taxonomy": {str(i): [f"category of {t}"] for i, t in enumerate(texts)},
            "desc": f"scene {k}",
        }
    return clips


def meaning(clip: dict[str, Any]) -> tuple:
    """A clip's content independent of option order: each option with its justification, taxonomy and roles."""
    return tuple(
        sorted(
            (b, j, tuple(clip["taxonomy"][str(k)]), k == clip["correct"], k in clip["sensibles"])
            for k, (b, j) in enumerate(zip(clip["behaviors"], clip["justifications"], strict=True))
        )
    )


@settings(max_examples=60, deadline=None)
@given(official_clips(), st.integers(0, 2**32 - 1))
def test_balancing_keeps_every_clips_meaning_balances_gold_and_is_idempotent(clips: dict, seed: int) -> None:
    balanced = balance_positions(clips, seed)
    assert list(balanced) == list(clips)
    for clip_id, clip in clips.items():
        assert meaning(balanced[clip_id]) == meaning(clip)
        assert balanced[clip_id]["desc"] == clip["desc"]
    gold = position_counts(balanced)["gold"]
    assert max(gold) - min(gold) <= 1 and sum(gold) == len(clips)
    assert balance_positions(balanced, seed) == balanced
    shuffled_first = {i: reorder_clip(c, [4, 2, 0, 1, 3]) for i, c in clips.items()}
    assert balance_positions(shuffled_first, seed) == balanced  # depends on the options, not their stored order
    assert all(canonical(c) == canonical(balanced[i]) for i, c in clips.items())


def test_the_clip_note_says_how_the_options_were_shown_per_protocol() -> None:
    responses = pd.DataFrame(
        {
            "protocol": ["official", "official", "egoeval", "egoeval"],
            "permutation": [[0, 1, 2, 3, 4], [0, 1, 2, 3, 4], [0, 1, 2, 3, 4], [3, 0, 4, 1, 2]],
        }
    )
    assert option_order_note(responses.iloc[:2]) == "under protocol official the models saw them in this order."
    assert option_order_note(responses) == (
        "under protocol egoeval the models saw them shuffled, as their replies note; "
        "under protocol official the models saw them in this order."
    )


# ------------------------------------------------------------------ through the pipeline (slow)


def by_model(body: dict[str, Any]) -> str:
    return ANSWERERS[body["model"]](body)


@pytest.fixture(scope="module", params=["official", "egoeval"])
def position_run(request: pytest.FixtureRequest, reproduced: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A copy of the reproduced repository re-run under one protocol with the position answerers and chance."""
    root = copy_workspace(reproduced, tmp_path_factory.mktemp(request.param) / "ws")
    params = yaml.safe_load((root / "params.yaml").read_text())
    with OpenAIServer(policy=by_model) as server:
        endpoint = {"backend": "openai", "base_url": server.url, "api_key_env": "EGOEVAL_TEST_KEY"}
        names = list(ANSWERERS)
        params["egonormia"]["protocol"] = request.param
        params["egonormia"]["model"].update(endpoint, name=names[0], concurrency=8, max_retries=0)
        params["egonormia"]["baselines"] = [
            *({**endpoint, "name": name} for name in names[1:]),
            {"backend": "random", "name": "chance"},
        ]
        (root / "params.yaml").write_text(yaml.safe_dump(params, sort_keys=False))
        run = dvc(root, "repro", EGOEVAL_TEST_KEY="sk-test-position")
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    return root


@pytest.mark.slow
def test_position_answerers_and_chance_score_within_chance_under_both_protocols(position_run: Path) -> None:
    items = pd.read_parquet(position_run / "data/egonormia/fetched/items.parquet")
    predictions = pd.read_parquet(position_run / "data/egonormia/predictions.parquet")
    assert set(predictions["model"]) == {*ANSWERERS, "chance"}
    for subtask in ("action", "justification", "sensible"):  # every answer read: no answerer scores 0 by failing
        assert (predictions[f"{subtask}_error"] == "").all(), predictions[f"{subtask}_error"].unique()
    found = {}
    for (setting, model), rows in predictions.groupby(["setting", "model"]):
        assert not recorded(str(rows["protocol"].iloc[0]), Path("predictions")).excluded(rows).any()
        # the pipeline's per-clip outcomes sum to what this module reads
        gold = items.set_index("id").loc[rows["id"]]
        result = outcomes(
            rows["action"],
            rows["justification"],
            list(rows["sensible"]),
            gold["correct_idx"],
            list(gold["sensible_idx"]),
        )
        assert result.columns().sum(axis=1) == pytest.approx([float(v) for v in observed_sums(rows, items)], abs=1e-9)
        if flagged := outside_chance(rows, items):
            found[setting, model] = flagged
    assert found == {}


@pytest.mark.slow
def test_the_report_says_how_the_options_were_shown(position_run: Path) -> None:
    page = (position_run / "reports/index.html").read_text()
    protocol = yaml.safe_load((position_run / "params.yaml").read_text())["egonormia"]["protocol"]
    if protocol == "official":
        assert "under protocol official the models saw them in this order." in page
        assert "shuffled" not in page
    else:
        assert "under protocol egoeval the models saw them shuffled, as their replies note." in page
