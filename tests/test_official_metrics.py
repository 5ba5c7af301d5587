"""The ``official`` protocol equals py-motmetrics 1.4.0 as mmtracking's eval_mot calls it (to 1e-9): TUD, 200+
randomized sequences (re-acquisition after gaps, ID swaps, duplicate boxes, ignore boxes), hand-made cases, the CLI."""

from __future__ import annotations

import json
import math
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from conftest import TEST_DATA
from hypothesis import given, settings
from hypothesis import strategies as st
from motmetrics_oracle import run_oracle

from egoeval.metrics import score_protocol
from egoeval.metrics.official import evaluate_official
from egoeval.mot import COLUMNS, read_mot

MOT = TEST_DATA / "mot"
TUD = ["TUD-Campus", "TUD-Stadtmitte"]
EGOEVAL = str(Path(sys.executable).with_name("egoeval"))
FRACTIONS = {"IDF1": "idf1", "IDP": "idp", "IDR": "idr", "MOTA": "mota", "MOTP": "motp"}
FRACTIONS |= {"Rcll": "recall", "Prcn": "precision"}
COUNTS = {"FP": "num_false_positives", "FN": "num_misses", "IDSW": "num_switches", "MT": "mostly_tracked"}
COUNTS |= {"PT": "partially_tracked", "ML": "mostly_lost", "Frag": "num_fragmentations"}
COUNTS |= {"GT_Dets": "num_objects", "Dets": "num_predictions"}


def assert_equal_to_oracle(ours: dict, theirs: dict) -> None:
    """Every sequence py-motmetrics keeps, and OVERALL, to 1e-9 (NaN where py-motmetrics divides by zero)."""
    assert sorted(ours["sequences"]) == sorted(theirs["sequences"])
    pairs = [(ours["sequences"][n], theirs["sequences"][n], n) for n in theirs["sequences"]]
    if theirs["COMBINED"] is not None:
        pairs.append((ours["COMBINED"], theirs["COMBINED"], "COMBINED"))
    for mine, other, name in pairs:
        for key, field in FRACTIONS.items():
            expected = 100 * float(other[field])
            if math.isfinite(expected):
                assert mine[key] == pytest.approx(expected, abs=1e-9), (name, key)
            else:
                assert mine[key] is None or not math.isfinite(mine[key]), (name, key)
        for key, field in COUNTS.items():
            assert mine[key] == int(other[field]), (name, key)


def frame(rows: list[tuple]) -> pd.DataFrame:
    table = pd.DataFrame(rows, columns=COLUMNS) if rows else pd.DataFrame(columns=COLUMNS)
    return table.astype({"frame": np.int64, "id": np.int64} | {c: np.float64 for c in COLUMNS[2:]})


def test_tud_sequences_equal_py_motmetrics() -> None:
    gt = {seq: read_mot(MOT / "gt" / f"{seq}.txt", kind="pred") for seq in TUD}
    pred = {seq: read_mot(MOT / "pred" / f"{seq}.txt", kind="pred") for seq in TUD}
    ours = score_protocol(gt, pred, "official")
    assert ours["protocol"] == "official"
    assert_equal_to_oracle(ours, run_oracle(gt, pred))
    assert ours["COMBINED"]["IDSW"] == 14 and ours["COMBINED"]["HOTA"] > 0  # HOTA from TrackEval, beside it


# --- randomized sequences ------------------------------------------------------------------------------------


def make_sequence(rng: np.random.Generator, frames: int, people: int) -> tuple[list, list]:
    """Ground truth and tracker rows: people on a small grid with gaps (missed frames, then re-acquired under the
    old id or a new one), id swaps, duplicate boxes under two ids, ignore boxes (conf 0) with tracker boxes on them,
    boxes at IoU exactly 0.5 and false positives."""
    gt, pred = [], []
    start, velocity = rng.integers(0, 30, (people, 2)), rng.integers(-3, 4, (people, 2))
    size = rng.integers(2, 10, (people, 2))
    first, last = np.sort(rng.integers(1, frames + 1, (2, people)), axis=0)
    ignored = rng.random(people) < 0.15
    swap_at = int(rng.integers(1, frames + 1))
    swapped = rng.permutation(people) if rng.random() < 0.4 else np.arange(people)
    for f in range(1, frames + 1):
        for k in range(people):
            if not first[k] <= f <= last[k] or rng.random() < 0.1:
                continue
            x, y = (start[k] + velocity[k] * (f - 1)).tolist()
            w, h = size[k].tolist()
            gt.append((f, k + 1, x, y, w, h, 0 if ignored[k] else 1))
            if rng.random() < 0.25:
                continue  # missed: the person is re-acquired later
            tid = 100 + int(swapped[k] if f >= swap_at else k)
            if rng.random() < 0.08:
                tid = 300 + int(rng.integers(0, 4))  # re-acquired under another id
            mode = rng.integers(0, 4)
            if mode == 1:
                w *= 2  # IoU exactly 0.5
            elif mode == 2:
                x, y = x + int(rng.integers(-2, 3)), y + int(rng.integers(-2, 3))
            if tid not in {row[1] for row in pred if row[0] == f}:
                pred.append((f, tid, x, y, w, h, 1))
            if rng.random() < 0.15:  # a duplicate box on the same person under another id
                pred.append((f, 700 + k, x, y, w, h, 1))
        for j in range(int(rng.poisson(0.5))):
            pred.append((f, 500 + j, *rng.integers(0, 30, 2).tolist(), *rng.integers(2, 10, 2).tolist(), 1))
    return gt, pred


@st.composite
def scenarios(draw: st.DrawFn) -> tuple[dict, dict]:
    gt, pred = {}, {}
    for k in range(draw(st.integers(1, 3))):
        rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
        rows_gt, rows_pred = make_sequence(rng, draw(st.integers(1, 14)), draw(st.integers(0, 7)))
        gt[f"S{k}"] = frame(rows_gt)
        if draw(st.booleans()) or k:
            pred[f"S{k}"] = frame(rows_pred)
    return gt, pred


@settings(max_examples=220, deadline=None)
@given(scenarios())
def test_random_sequences_equal_py_motmetrics(case: tuple[dict, dict]) -> None:
    gt, pred = case
    assert_equal_to_oracle(score_protocol(gt, pred, "official"), run_oracle(gt, pred))


# --- hand-made cases ------------------------------------------------------------------------------------------

REACQUIRED_GT = [(f, 1, 0, 0, 10, 10, 1) for f in (1, 2, 3)]
# Frame 1: tracker 10 on the person. Frame 2: tracker 10 elsewhere (a miss and a false positive). Frame 3: tracker
# 10 back (IoU 0.6) and tracker 20 exactly on the person.
REACQUIRED_PRED = [(1, 10, 0, 0, 10, 10, 1), (2, 10, 50, 50, 10, 10, 1), (3, 10, 0, 0, 10, 6, 1)]
REACQUIRED_PRED += [(3, 20, 0, 0, 10, 10, 1)]


def test_reacquired_person_keeps_its_last_track() -> None:
    gt, pred = {"S": frame(REACQUIRED_GT)}, {"S": frame(REACQUIRED_PRED)}
    official = score_protocol(gt, pred, "official")["COMBINED"]
    assert (official["IDSW"], official["FN"], official["FP"], official["MOTA"]) == (0, 1, 2, 0.0)
    assert_equal_to_oracle(score_protocol(gt, pred, "official"), run_oracle(gt, pred))
    trackeval = score_protocol(gt, pred, "trackeval")["COMBINED"]  # only the previous frame's match counts there
    assert trackeval["IDSW"] == 1 and trackeval["MOTA"] == pytest.approx(-100 / 3)


def test_unmatched_boxes_on_ignore_regions_are_removed() -> None:
    gt = {"S": frame([(1, 1, 0, 0, 10, 10, 0), (1, 2, 40, 40, 10, 10, 1)])}
    pred = {"S": frame([(1, 5, 1, 1, 8, 8, 1), (1, 6, 40, 40, 10, 10, 1)])}
    official = score_protocol(gt, pred, "official")["COMBINED"]
    assert (official["FP"], official["Dets"], official["MOTA"]) == (0, 1, 100.0)
    assert score_protocol(gt, pred, "trackeval")["COMBINED"]["FP"] == 1
    assert_equal_to_oracle(score_protocol(gt, pred, "official"), run_oracle(gt, pred))


def test_sequences_without_accumulated_frames_are_left_out() -> None:
    gt = {"A": frame([(1, 1, 0, 0, 10, 10, 1)]), "B": frame([(1, 1, 0, 0, 10, 10, 0)]), "C": frame([])}
    pred = {"A": frame([(1, 3, 0, 0, 10, 10, 1)]), "B": frame([(1, 4, 0, 0, 10, 10, 1)])}
    ours = evaluate_official(gt, pred)
    assert list(ours["sequences"]) == ["A"]
    assert ours["COMBINED"]["IDF1"] == 100.0
    assert_equal_to_oracle(score_protocol(gt, pred, "official"), run_oracle(gt, pred))


def test_cli_protocols(tmp_path: Path) -> None:
    def run(protocol: str) -> dict:
        out = tmp_path / f"{protocol}.json"
        done = subprocess.run(
            [EGOEVAL, "score-tracks", MOT / "gt", MOT / "pred", "--protocol", protocol, "--json", out],
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert done.returncode == 0, done.stderr
        return json.loads(out.read_text())

    official, trackeval = run("official"), run("trackeval")
    assert (official["protocol"], trackeval["protocol"]) == ("official", "trackeval")
    gt = {seq: read_mot(MOT / "gt" / f"{seq}.txt", kind="pred") for seq in TUD}
    pred = {seq: read_mot(MOT / "pred" / f"{seq}.txt", kind="pred") for seq in TUD}
    assert_equal_to_oracle(official, run_oracle(gt, pred))
    assert official["COMBINED"]["HOTA"] == trackeval["COMBINED"]["HOTA"]
