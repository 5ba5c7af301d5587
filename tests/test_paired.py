"""Paired comparisons: egoeval.significance (exact McNemar, paired bootstrap, Holm) against SciPy and independent
implementations written here, on fixed and random outcome tables; the score stages' paired.csv files and
``egoeval compare --models`` on the reproduced sample."""

from __future__ import annotations

import io
import json
import re
import shutil
import subprocess
from fractions import Fraction
from itertools import combinations
from math import comb
from pathlib import Path

import forked
import numpy as np
import pandas as pd
import pytest
from conftest import EGOEVAL, REPO, tool_env
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy.stats import binomtest

from egoeval.core.errors import InputError
from egoeval.egonormia.paired import Run, paired_table
from egoeval.egonormia.scoring import Outcomes
from egoeval.egonormia.settings import ScoreSettings
from egoeval.significance import (
    COLUMNS,
    compare_binary,
    compare_continuous,
    csv_bytes,
    holm,
    mcnemar_exact,
    oriented,
    read_paired,
    text_table,
)

SAMPLES, SEED, LEVEL = 200, 3, 0.9


# ------------------------------------------------------------------ independent implementations


def exact_mcnemar(a_only: int, b_only: int) -> float:
    """Two-sided exact binomial test at 1/2 in exact arithmetic: P(X <= min) + P(X >= max), at most 1."""
    n = a_only + b_only
    if n == 0:
        return 1.0
    low = min(a_only, b_only)
    tail = sum(Fraction(comb(n, k), 2**n) for k in range(low + 1))
    return float(min(Fraction(1), 2 * tail))


def straightforward_holm(p: list[float]) -> list[float]:
    """Holm's step-down procedure as textbooks write it, with loops."""
    m = len(p)
    order = sorted(range(m), key=lambda k: (p[k], k))
    adjusted = [0.0] * m
    running = 0.0
    for rank, k in enumerate(order):
        running = max(running, min(1.0, (m - rank) * p[k]))
        adjusted[k] = running
    return adjusted


def bootstrap_by_hand(a: list[float], b: list[float], samples: int, seed: int, level: float) -> tuple[float, float]:
    """The paired bootstrap written out: one index draw, each resample's mean difference, percentiles."""
    n = len(a)
    draws = np.random.default_rng(seed).integers(0, n, size=(samples, n))
    diffs = sorted(sum(a[i] - b[i] for i in row) / n for row in draws.tolist())

    def percentile(q: float) -> float:  # NumPy's default (linear) rule
        position = (len(diffs) - 1) * q
        low = int(np.floor(position))
        high = min(low + 1, len(diffs) - 1)
        return diffs[low] + (diffs[high] - diffs[low]) * (position - low)

    tail = (1 - level) / 2
    return percentile(tail), percentile(1 - tail)


# ------------------------------------------------------------------ the statistics


@given(st.integers(0, 400), st.integers(0, 400))
@settings(max_examples=300, deadline=None)
def test_mcnemar_is_scipys_exact_binomial_test_on_the_discordant_counts(a_only: int, b_only: int) -> None:
    p = mcnemar_exact(a_only, b_only)
    expected = 1.0 if a_only + b_only == 0 else binomtest(a_only, a_only + b_only, 0.5).pvalue
    assert p == expected
    assert p == pytest.approx(exact_mcnemar(a_only, b_only), rel=1e-9, abs=1e-300)


def test_mcnemar_hand_values() -> None:
    assert mcnemar_exact(0, 0) == 1.0
    assert mcnemar_exact(7, 0) == pytest.approx(2 / 2**7)  # 0.015625: all seven discordant clips one way
    assert mcnemar_exact(3, 3) == 1.0


@given(st.lists(st.floats(0, 1), min_size=1, max_size=30))
@settings(max_examples=300, deadline=None)
def test_holm_equals_the_textbook_procedure(p: list[float]) -> None:
    assert holm(p) == pytest.approx(straightforward_holm(p), rel=1e-12, abs=0)


def test_holm_hand_values() -> None:
    assert holm([0.01, 0.04, 0.03]) == pytest.approx([0.03, 0.06, 0.06])


outcome_tables = st.integers(1, 40).flatmap(
    lambda n: st.tuples(
        st.lists(st.booleans(), min_size=n, max_size=n), st.lists(st.booleans(), min_size=n, max_size=n)
    )
)


@given(outcome_tables, st.integers(0, 2**32 - 1))
@settings(max_examples=150, deadline=None)
def test_binary_rows_on_random_outcome_tables(table: tuple[list[bool], list[bool]], seed: int) -> None:
    right_a, right_b = np.array(table[0]), np.array(table[1])
    n = len(right_a)
    draws = np.random.default_rng(seed).integers(0, n, size=(SAMPLES, n))
    row = compare_binary("s", "full", "action", ("A", "B"), right_a, right_b, draws, LEVEL)
    a_only = sum(x and not y for x, y in zip(*table, strict=True))
    b_only = sum(y and not x for x, y in zip(*table, strict=True))
    assert (row.n, row.n_a_only, row.n_b_only) == (n, a_only, b_only)
    assert row.a == pytest.approx(100 * sum(table[0]) / n) and row.b == pytest.approx(100 * sum(table[1]) / n)
    assert row.diff == pytest.approx(100 * (a_only - b_only) / n, abs=1e-9)
    assert row.p_value == (1.0 if a_only + b_only == 0 else binomtest(a_only, a_only + b_only, 0.5).pvalue)
    low, high = bootstrap_by_hand([100.0 * x for x in table[0]], [100.0 * x for x in table[1]], SAMPLES, seed, LEVEL)
    assert (row.ci_low, row.ci_high) == (pytest.approx(low, abs=1e-9), pytest.approx(high, abs=1e-9))
    swapped = compare_binary("s", "full", "action", ("B", "A"), right_b, right_a, draws, LEVEL)
    assert swapped.p_value == row.p_value and (swapped.n_a_only, swapped.n_b_only) == (b_only, a_only)
    assert (swapped.ci_low, swapped.ci_high) == (pytest.approx(-row.ci_high), pytest.approx(-row.ci_low))


@given(
    st.integers(1, 30).flatmap(
        lambda n: st.tuples(
            st.lists(st.floats(0, 100), min_size=n, max_size=n), st.lists(st.floats(0, 100), min_size=n, max_size=n)
        )
    ),
    st.integers(0, 2**32 - 1),
)
@settings(max_examples=150, deadline=None)
def test_bootstrap_rows_equal_an_independent_paired_bootstrap(
    values: tuple[list[float], list[float]], seed: int
) -> None:
    a, b = values
    n = len(a)
    draws = np.random.default_rng(seed).integers(0, n, size=(SAMPLES, n))
    row = compare_continuous("s", "full", "sensible_iou", ("A", "B"), np.array(a), np.array(b), draws, LEVEL)
    low, high = bootstrap_by_hand(a, b, SAMPLES, seed, LEVEL)
    assert row.ci_low == pytest.approx(low, abs=1e-9) and row.ci_high == pytest.approx(high, abs=1e-9)
    assert row.diff == pytest.approx(sum(a) / n - sum(b) / n, abs=1e-9)
    assert 0 < row.p_value <= 1 and np.isnan(row.n_a_only) and row.test == "paired bootstrap"


def random_runs(draw_seed: int, models: int, clips: int) -> dict[tuple[str, str], Run]:
    rng = np.random.default_rng(draw_seed)
    runs = {}
    for setting in ("blind", "pipeline", "video"):
        for model in [f"m{k}" for k in range(models)]:
            outcomes = Outcomes(
                rng.random(clips) < 0.5, rng.random(clips) < 0.5, rng.random(clips), rng.random(clips) < 0.9
            )
            runs[setting, model] = Run("egoeval", outcomes)
    return runs


@given(st.integers(0, 10_000), st.integers(2, 4), st.integers(2, 25))
@settings(max_examples=40, deadline=None)
def test_egonormia_table_on_random_runs(draw_seed: int, models: int, clips: int) -> None:
    runs = random_runs(draw_seed, models, clips)
    verified = np.random.default_rng(draw_seed + 1).random(clips) < 0.5
    params = ScoreSettings(bootstrap_samples=50, bootstrap_seed=SEED, confidence=LEVEL)
    table = paired_table(runs, verified, "full", params)
    assert list(table.columns) == COLUMNS
    pairs = table[~table["setting"].str.contains("-")]
    expected = {
        (s, sp, a, b)
        for s in ("blind", "pipeline", "video")
        for sp in ("full", "verified")
        for a, b in combinations(sorted(f"m{k}" for k in range(models)), 2)
    }
    assert set(zip(pairs["setting"], pairs["split"], pairs["model_a"], pairs["model_b"], strict=True)) <= expected
    for (setting, split, model_a, model_b), rows in pairs.groupby(["setting", "split", "model_a", "model_b"]):
        a, b = runs[setting, model_a].outcomes, runs[setting, model_b].outcomes
        units = a.in_n & b.in_n & (verified if split == "verified" else True)
        assert set(rows["n"]) == {int(units.sum())}
        action = rows.set_index("metric").loc["action"]
        a_only = int((a.action & ~b.action & units).sum())
        b_only = int((b.action & ~a.action & units).sum())
        assert (action["n_a_only"], action["n_b_only"]) == (a_only, b_only)
        assert action["p_value"] == (1.0 if a_only + b_only == 0 else binomtest(a_only, a_only + b_only).pvalue)
        iou = rows.set_index("metric").loc["sensible_iou"]
        low, high = bootstrap_by_hand(
            list(a.sensible_iou[units] * 100), list(b.sensible_iou[units] * 100), 50, SEED, LEVEL
        )
        assert (iou["ci_low"], iou["ci_high"]) == (pytest.approx(low, abs=1e-9), pytest.approx(high, abs=1e-9))
    for _, family in table.groupby(["setting", "split", "metric"]):
        assert list(family["p_holm"]) == pytest.approx(straightforward_holm(list(family["p_value"])), rel=1e-12)
    gains = table[table["setting"].isin(["video-blind", "pipeline-blind"])]
    assert (gains["model_a"] == gains["model_b"]).all()
    expected_gains = [
        (f"{first}-blind", split, model)
        for first in ("video", "pipeline")
        for split, mask in (("full", True), ("verified", verified))
        for model in (f"m{k}" for k in range(models))
        if (runs[first, model].outcomes.in_n & runs["blind", model].outcomes.in_n & mask).any()
    ]
    assert len(gains) == 4 * len(expected_gains)
    assert set(zip(gains["setting"], gains["split"], gains["model_a"], strict=True)) == set(expected_gains)
    read_back = pd.read_csv(io.BytesIO(csv_bytes(table)))
    assert list(read_back.columns) == COLUMNS and len(read_back) == len(table)
    assert np.allclose(read_back["p_value"], table["p_value"], rtol=0, atol=0)  # full precision on disk


def test_oriented_swaps_a_pair_written_the_other_way() -> None:
    draws = np.random.default_rng(0).integers(0, 4, size=(20, 4))
    row = compare_binary(
        "blind", "full", "action", ("x", "y"), np.array([1, 1, 0, 0]), np.array([0, 1, 1, 1]), draws, 0.9
    )
    table = pd.DataFrame([row.__dict__], columns=COLUMNS)
    flipped = oriented(table, "y", "x").iloc[0]
    assert (flipped["a"], flipped["b"], flipped["diff"]) == (row.b, row.a, -row.diff)
    assert (flipped["n_a_only"], flipped["n_b_only"]) == (row.n_b_only, row.n_a_only)
    assert (flipped["ci_low"], flipped["ci_high"]) == (-row.ci_high, -row.ci_low)
    lines = text_table(oriented(table, "y", "x")).splitlines()
    assert len(lines) == 2 and lines[0].split()[:4] == ["setting", "split", "metric", "n"]


# ------------------------------------------------------------------ the reproduced sample


def sensible_iou(predicted: set[int], gold: set[int]) -> float:
    union = predicted | gold
    return len(predicted & gold) / len(union) if union else 0.0


@pytest.mark.slow
def test_egonormia_paired_csv_from_the_score_stage(reproduced: Path) -> None:
    table = read_paired(reproduced / "plots/egonormia/paired.csv")
    assert list(table.columns) == COLUMNS and len(table) > 0
    params = ScoreSettings(bootstrap_samples=1000, bootstrap_seed=0, confidence=0.95)  # params.yaml's egonormia.score
    items = pd.read_parquet(reproduced / "data/egonormia/fetched/items.parquet").sort_values("id")
    predictions = pd.read_parquet(reproduced / "data/egonormia/predictions.parquet")
    metrics = json.loads((reproduced / "metrics/egonormia.json").read_text())
    gold = {row.id: (int(row.correct_idx), {int(i) for i in row.sensible_idx}) for row in items.itertuples()}
    checked = 0
    for row in table[(table["split"] == "full") & ~table["setting"].str.contains("-")].itertuples():
        assert metrics[row.setting][row.model_a]["excluded"] == 0 == metrics[row.setting][row.model_b]["excluded"]
        per = {}
        for model in (row.model_a, row.model_b):
            mine = predictions[(predictions["setting"] == row.setting) & (predictions["model"] == model)]
            mine = mine.set_index("id").loc[list(gold)]
            correct = {
                "action": [int(p) == gold[c][0] for c, p in mine["action"].items()],
                "justification": [int(p) == gold[c][0] for c, p in mine["justification"].items()],
            }
            correct["both"] = [x and y for x, y in zip(correct["action"], correct["justification"], strict=True)]
            correct["sensible_iou"] = [
                100 * sensible_iou({int(i) for i in s}, gold[c][1]) for c, s in mine["sensible"].items()
            ]
            per[model] = correct
        assert row.n == len(gold)
        a, b = per[row.model_a][row.metric], per[row.model_b][row.metric]
        scale = 1.0 if row.metric == "sensible_iou" else 100.0  # right/wrong as 100/0 points
        low, high = bootstrap_by_hand([scale * x for x in a], [scale * x for x in b], 1000, 0, 0.95)
        assert (row.ci_low, row.ci_high) == (pytest.approx(low, abs=1e-9), pytest.approx(high, abs=1e-9))
        if row.metric == "sensible_iou":
            assert row.test == "paired bootstrap" and np.isnan(row.n_a_only)
        else:
            a_only = sum(x and not y for x, y in zip(a, b, strict=True))
            b_only = sum(y and not x for x, y in zip(a, b, strict=True))
            assert (row.n_a_only, row.n_b_only) == (a_only, b_only)
            assert row.p_value == pytest.approx(exact_mcnemar(a_only, b_only), rel=1e-9)
            assert row.p_value == (1.0 if a_only + b_only == 0 else binomtest(a_only, a_only + b_only).pvalue)
            assert row.a == pytest.approx(metrics[row.setting][row.model_a][row.metric])
        checked += 1
    assert checked >= 8  # two settings x four metrics on the sample, at least
    assert params.bootstrap_samples == 1000


@pytest.mark.slow
def test_egohumans_paired_csv_from_the_score_stage(reproduced: Path) -> None:
    table = read_paired(reproduced / "plots/egohumans/paired.csv")
    assert list(table.columns) == COLUMNS and set(table["test"]) == {"paired bootstrap"}
    assert table["n_a_only"].isna().all() and table["n_b_only"].isna().all()
    metrics = json.loads((reproduced / "metrics/egohumans.json").read_text())
    for row in table.itertuples():
        seq_a, seq_b = metrics[row.model_a]["sequences"], metrics[row.model_b]["sequences"]
        names = sorted(seq_a)
        assert row.n == len(names) == len(seq_b) > 1 and sorted(seq_b) == names
        assert row.model_a.endswith(f"-{row.setting}")
        a = [seq_a[name][row.metric] for name in names]
        b = [seq_b[name][row.metric] for name in names]
        assert row.a == pytest.approx(sum(a) / len(a)) and row.b == pytest.approx(sum(b) / len(b))
        low, high = bootstrap_by_hand(a, b, 1000, 0, 0.95)
        assert (row.ci_low, row.ci_high) == (pytest.approx(low, abs=1e-9), pytest.approx(high, abs=1e-9))
    trackers = len({name.rsplit("-", 1)[0] for name in metrics})
    modes = len({name.rsplit("-", 1)[1] for name in metrics})
    assert len(table) == modes * (trackers * (trackers - 1) // 2) * 3  # every mode, every pair, three metrics


def compare(root: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return forked.run([EGOEVAL, "compare", "metrics/egonormia.json", *args], root, tool_env())


@pytest.mark.slow
def test_compare_models_prints_the_aligned_table(reproduced: Path) -> None:
    run = compare(reproduced, "--models", "chance", "all-MiniLM-L6-v2")
    assert run.returncode == 0, run.stderr
    out = run.stdout
    # the data the metrics were scored on, as they record it: the bundled sample is not "dataset egonormia"
    said = (
        "protocol official, dataset sample, the bundled synthetic sample (not EgoNormia's clips), full split, 16 clips;"
    )
    assert out.startswith(f"Paired comparisons (plots/egonormia/paired.csv): {said}")
    assert "a = chance, b = all-MiniLM-L6-v2" in out
    lines = out.splitlines()
    start = lines.index("a = chance, b = all-MiniLM-L6-v2:") + 1
    block = lines[start : lines.index("", start)]
    header = block[0].split()
    assert header[:8] == ["setting", "split", "metric", "n", "a", "b", "diff", "interval"]
    table = read_paired(reproduced / "plots/egonormia/paired.csv")
    expected = oriented(table[~table["setting"].str.contains("-")], "chance", "all-MiniLM-L6-v2")
    assert len(block) - 1 == len(expected)
    mcnemar = [line for line in block[1:] if line.endswith("exact McNemar")]
    edges = set()
    for line in mcnemar:  # text columns start together, numbers end together
        fields = list(re.finditer(r"\S+(?: \S+)*", line))
        edges.add((*(f.start() for f in fields[:3]), *(f.end() for f in fields[3:-1]), fields[-1].start()))
    assert len(mcnemar) >= 6 and len(edges) == 1
    first = expected.iloc[0]
    assert block[1].split()[:7] == [
        first["setting"],
        first["split"],
        first["metric"],
        str(first["n"]),
        f"{first['a']:.1f}",
        f"{first['b']:.1f}",
        f"{first['diff']:+.1f}".replace("+0.0", "0.0").replace("-0.0", "0.0"),
    ]
    assert "chance's gains from seeing the clip" in out and "all-MiniLM-L6-v2's gains from seeing the clip" in out


@pytest.mark.slow
@pytest.mark.bad_input
def test_compare_models_names_an_unknown_model(reproduced: Path) -> None:
    run = compare(reproduced, "--models", "chance", "gpt-9")
    assert run.returncode == 2 and "Traceback" not in run.stderr
    assert "plots/egonormia/paired.csv" in run.stderr and "'gpt-9'" in run.stderr and "chance" in run.stderr


@pytest.mark.bad_input
def test_a_paired_table_with_other_columns_is_named(tmp_path: Path) -> None:
    bad = tmp_path / "paired.csv"
    bad.write_text("setting,model_a\nblind,x\n")
    with pytest.raises(InputError, match=r"paired\.csv.*columns"):
        read_paired(bad)


@pytest.mark.bad_input
def test_compare_models_without_paired_csv_exits_2_naming_it(tmp_path: Path) -> None:
    (tmp_path / "metrics").mkdir()
    (tmp_path / "metrics/egonormia.json").write_text('{"blind": {"chance": {"protocol": "official"}}}')
    shutil.copy(REPO / "params.yaml", tmp_path / "params.yaml")
    run = compare(tmp_path, "--models", "chance", "x")
    assert run.returncode == 2 and "Traceback" not in run.stderr
    assert "plots/egonormia/paired.csv: file not found" in run.stderr
