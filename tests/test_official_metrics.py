"""The ``official`` protocol equals EgoHumans' evaluation where it ran (the ``motmetrics_oracle`` fixture: mmtracking's
dataset class and ``eval_mot`` on py-motmetrics 1.4.0 with lap 0.4.0 and NumPy 1, tests/oracle_env.py), every field
per sequence and combined (rates to 1e-9, counts equal): TUD, the tie and sub-pixel cases of issue 17, 220
randomized scenarios, hand-made cases, the CLI; and egoeval's LAPJV port chooses as lap 0.4.0 does."""

from __future__ import annotations

import json
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from conftest import EGOEVAL, TEST_DATA, tool_env
from hypothesis import given, settings
from hypothesis import strategies as st
from oracle_env import MotmetricsOracle, assert_equal_to_oracle

from egoeval.egohumans.evaluators import EVALUATORS, evaluator
from egoeval.egohumans.score_tracks import format_table, score_folders
from egoeval.egohumans.settings import ScoreSettings
from egoeval.tracking.lapjv import LARGE, lapjv
from egoeval.tracking.mot import COLUMNS, read_mot, write_mot
from egoeval.tracking.motmetrics import _expensive_edges, assign, eval_mot

MOT = TEST_DATA / "mot"
TUD = ["TUD-Campus", "TUD-Stadtmitte"]
TUD_SIZE = (640, 480)  # both are 640 x 480 (MOT15 seqinfo.ini)


def frame(rows: list[tuple]) -> pd.DataFrame:
    table = pd.DataFrame(rows, columns=COLUMNS) if rows else pd.DataFrame(columns=COLUMNS)
    return table.astype({"frame": np.int64, "id": np.int64} | {c: np.float64 for c in COLUMNS[2:]})


def write_tree(root: Path, gt: dict, pred: dict, sizes: dict[str, tuple[int, int]]) -> None:
    """``root/gt``: a MOTChallenge tree ``<seq>/gt/gt.txt`` with seqinfo.ini (imWidth, imHeight) for the sequences
    in ``sizes``, a flat ``<seq>.txt`` for the others; ``root/pred/<seq>.txt``."""
    (root / "pred").mkdir(parents=True)
    for name, rows in gt.items():
        if name in sizes:
            (root / "gt" / name / "gt").mkdir(parents=True)
            write_mot(root / "gt" / name / "gt" / "gt.txt", rows)
            length = max([1, *rows["frame"].tolist(), *pred.get(name, rows.iloc[:0])["frame"].tolist()])
            width, height = sizes[name]
            ini = f"[Sequence]\nname={name}\nseqLength={length}\nimWidth={width}\nimHeight={height}\n"
            (root / "gt" / name / "seqinfo.ini").write_text(ini)
        else:
            (root / "gt").mkdir(exist_ok=True)
            write_mot(root / "gt" / f"{name}.txt", rows)
    for name, rows in pred.items():
        write_mot(root / "pred" / f"{name}.txt", rows)


def score_cli(root: Path) -> dict:
    """``egoeval score-tracks root/gt root/pred --protocol official`` as a user runs it."""
    out = root / "official.json"
    done = subprocess.run(
        [EGOEVAL, "score-tracks", root / "gt", root / "pred", "--protocol", "official", "--json", out],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    return json.loads(out.read_text())


def tud() -> tuple[dict, dict]:
    gt = {seq: read_mot(MOT / "gt" / f"{seq}.txt", kind="pred") for seq in TUD}
    pred = {seq: read_mot(MOT / "pred" / f"{seq}.txt", kind="pred") for seq in TUD}
    return gt, pred


@pytest.mark.parametrize("seqinfo", [True, False], ids=["seqinfo", "flat"])
def test_tud_sequences_equal_eval_mot(motmetrics_oracle: MotmetricsOracle, tmp_path: Path, seqinfo: bool) -> None:
    gt, pred = tud()
    sizes = dict.fromkeys(TUD, TUD_SIZE) if seqinfo else {}
    write_tree(tmp_path, gt, pred, sizes)
    ours = score_cli(tmp_path)
    assert ours["protocol"] == "official"
    assert_equal_to_oracle(ours, motmetrics_oracle.evaluate_mot(gt, pred, sizes))
    assert ours["COMBINED"]["IDSW"] == 14 and ours["COMBINED"]["HOTA"] > 0  # HOTA from TrackEval, beside it


# --- the cases of issue 17 -----------------------------------------------------------------------------------------

TIE_GT = [(1, 1, 0, 0, 10, 10, 1), (2, 1, 0, 0, 10, 10, 1)]
TIE_PRED = [(1, 10, 0, 0, 10, 10, 1), (1, 11, 0, 0, 10, 10, 1), (2, 11, 0, 0, 10, 10, 1)]  # 10 and 11 identical


def test_identical_tracker_boxes_tie_as_lap_breaks_it(motmetrics_oracle: MotmetricsOracle) -> None:
    """lap 0.4.0 gives the person to tracker 11 in frame 1, so frame 2 (11 alone) continues it: no switch."""
    gt, pred = {"S": frame(TIE_GT)}, {"S": frame(TIE_PRED)}
    official = evaluator("official").evaluate(gt, pred)
    assert (official["COMBINED"]["IDSW"], official["COMBINED"]["MOTA"]) == (0, 50.0)
    assert_equal_to_oracle(official, motmetrics_oracle.evaluate_mot(gt, pred))
    trackeval = evaluator("trackeval").evaluate(gt, pred)["COMBINED"]  # TrackEval's SciPy takes tracker 10 first
    assert (trackeval["IDSW"], trackeval["MOTA"]) == (1, 0.0)


def sub_pixel_sequence() -> tuple[pd.DataFrame, pd.DataFrame]:
    """A 100 x 80 image: two people, one whose box is 0.5 px wide, one left of the image, one wholly below it, one cut
    by the right edge (kept), a crowd box. The tracker follows the three people on the image, now and then missing."""
    people = {
        1: (10, 10, 20, 40),
        2: (50, 20, 15, 30),
        3: (30, 5, 0.5, 40),  # narrower than a pixel
        4: (-30, 10, 30, 40),  # ends exactly at x = 0: no overlap with the image
        5: (40, 80, 20, 30),  # starts exactly at the bottom edge
        6: (90, 30, 20, 40),  # half outside: kept
    }
    gt, pred = [], []
    for f in range(1, 41):
        for pid, (x, y, w, h) in people.items():
            gt.append((f, pid, x, y, w, h, 1))
            if f % 7 and pid in (1, 2, 6):
                pred.append((f, 100 + pid, x, y, w, h, 1))
        gt.append((f, 9, 70, 0, 25, 25, 0))  # crowd: an ignore box
        pred.append((f, 300, 72, 2, 20, 20, 1))  # on it, unmatched: removed
    return frame(gt), frame(pred)


def test_sub_pixel_and_off_image_ground_truth_is_dropped(motmetrics_oracle: MotmetricsOracle, tmp_path: Path) -> None:
    gt, pred = sub_pixel_sequence()
    write_tree(tmp_path, {"S": gt}, {"S": pred}, {"S": (100, 80)})
    ours = score_cli(tmp_path)
    assert_equal_to_oracle(ours, motmetrics_oracle.evaluate_mot({"S": gt}, {"S": pred}, {"S": (100, 80)}))
    kept_all = evaluator("official").evaluate({"S": gt}, {"S": pred})["COMBINED"]  # without the dataset's rules
    assert (ours["COMBINED"]["GT_Dets"], kept_all["GT_Dets"]) == (3 * 40, 6 * 40)
    assert (ours["COMBINED"]["ML"], kept_all["ML"]) == (0, 3)
    assert ours["COMBINED"]["FN"] < kept_all["FN"]


# --- randomized sequences ------------------------------------------------------------------------------------


def make_sequence(rng: np.random.Generator, frames: int, people: int, size: tuple[int, int]) -> tuple[list, list]:
    """Ground truth and tracker rows on a ``size`` image: people on a small grid, some partly or wholly off the
    image, some narrower or lower than a pixel, crowd (ignore, conf 0) boxes, gaps (missed frames, then re-acquired
    under the old id or a new one), id swaps, exact duplicates (two tracker ids on one box, two people on one box),
    near duplicates (a fraction of a pixel off), boxes at IoU exactly 0.5 and false positives."""
    width, height = size
    gt, pred = [], []
    start = rng.integers(-12, max(width, height) + 4, (people, 2)).astype(float)
    velocity = rng.integers(-3, 4, (people, 2))
    shape = rng.integers(1, 10, (people, 2)).astype(float)
    tiny = rng.random((people, 2)) < 0.1
    shape[tiny] = rng.choice([0.0, 0.5, 0.999], int(tiny.sum()))  # under a pixel: dropped
    first, last = np.sort(rng.integers(1, frames + 1, (2, people)), axis=0)
    crowd = rng.random(people) < 0.15
    twin = rng.integers(0, people) if people > 1 and rng.random() < 0.3 else -1  # shares person 0's box
    swap_at = int(rng.integers(1, frames + 1))
    swapped = rng.permutation(people) if rng.random() < 0.4 else np.arange(people)
    for f in range(1, frames + 1):
        taken: set[int] = set()
        for k in range(people):
            if not first[k] <= f <= last[k] or rng.random() < 0.1:
                continue
            j = 0 if k == twin else k
            x, y = (start[j] + velocity[j] * (f - 1)).tolist()
            w, h = shape[j].tolist()
            gt.append((f, k + 1, x, y, w, h, 0 if crowd[k] else 1))
            if rng.random() < 0.25:
                continue  # missed: the person is re-acquired later
            tid = 100 + int(swapped[k] if f >= swap_at else k)
            if rng.random() < 0.08:
                tid = 300 + int(rng.integers(0, 4))  # re-acquired under another id
            mode = rng.integers(0, 5)
            if mode == 1:
                w *= 2  # IoU exactly 0.5
            elif mode == 2:
                x, y = x + int(rng.integers(-2, 3)), y + int(rng.integers(-2, 3))
            elif mode == 3:
                x, y = x + float(rng.choice([0.25, -0.5, 1e-9])), y  # a near duplicate of the exact box
            w, h = max(w, 1.0), max(h, 1.0)
            if tid not in taken:
                pred.append((f, tid, x, y, w, h, 1))
                taken.add(tid)
            for copy in range(int(rng.random() < 0.2) + int(rng.random() < 0.05)):  # exact duplicates, other ids
                if 700 + 10 * k + copy not in taken:
                    pred.append((f, 700 + 10 * k + copy, x, y, w, h, 1))
                    taken.add(700 + 10 * k + copy)
        for j in range(int(rng.poisson(0.5))):
            x, y = rng.integers(-5, max(width, height), 2).tolist()
            pred.append((f, 500 + j, x, y, *rng.integers(2, 10, 2).tolist(), 1))
    return gt, pred


@st.composite
def scenarios(draw: st.DrawFn) -> tuple[dict, dict, dict]:
    gt, pred, sizes = {}, {}, {}
    for k in range(draw(st.integers(1, 3))):
        rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
        size = (draw(st.integers(8, 40)), draw(st.integers(8, 40)))
        rows_gt, rows_pred = make_sequence(rng, draw(st.integers(1, 14)), draw(st.integers(0, 7)), size)
        gt[f"S{k}"] = frame(rows_gt)
        if draw(st.booleans()) or k:
            pred[f"S{k}"] = frame(rows_pred)
        if draw(st.integers(0, 5)):  # most with seqinfo.ini, some flat (no image size)
            sizes[f"S{k}"] = size
    return gt, pred, sizes


@settings(max_examples=220, deadline=None)
@given(scenarios())
def test_random_sequences_equal_eval_mot(motmetrics_oracle: MotmetricsOracle, case: tuple[dict, dict, dict]) -> None:
    """``score-tracks --protocol official`` (its code, in process, on the files) against the official evaluation."""
    gt, pred, sizes = case
    with tempfile.TemporaryDirectory() as tmp:
        write_tree(Path(tmp), gt, pred, sizes)
        ours = score_folders(Path(tmp) / "gt", Path(tmp) / "pred", "official")
    assert_equal_to_oracle(ours, motmetrics_oracle.evaluate_mot(gt, pred, sizes))


# --- hand-made cases ------------------------------------------------------------------------------------------

REACQUIRED_GT = [(f, 1, 0, 0, 10, 10, 1) for f in (1, 2, 3)]
# Frame 1: tracker 10 on the person. Frame 2: tracker 10 elsewhere (a miss and a false positive). Frame 3: tracker
# 10 back (IoU 0.6) and tracker 20 exactly on the person.
REACQUIRED_PRED = [(1, 10, 0, 0, 10, 10, 1), (2, 10, 50, 50, 10, 10, 1), (3, 10, 0, 0, 10, 6, 1)]
REACQUIRED_PRED += [(3, 20, 0, 0, 10, 10, 1)]


def test_reacquired_person_keeps_its_last_track(motmetrics_oracle: MotmetricsOracle) -> None:
    gt, pred = {"S": frame(REACQUIRED_GT)}, {"S": frame(REACQUIRED_PRED)}
    official = evaluator("official").evaluate(gt, pred)["COMBINED"]
    assert (official["IDSW"], official["FN"], official["FP"], official["MOTA"]) == (0, 1, 2, 0.0)
    assert_equal_to_oracle(evaluator("official").evaluate(gt, pred), motmetrics_oracle.evaluate_mot(gt, pred))
    trackeval = evaluator("trackeval").evaluate(gt, pred)["COMBINED"]  # only the previous frame's match counts there
    assert trackeval["IDSW"] == 1 and trackeval["MOTA"] == pytest.approx(-100 / 3)


def test_unmatched_boxes_on_ignore_regions_are_removed(motmetrics_oracle: MotmetricsOracle) -> None:
    gt = {"S": frame([(1, 1, 0, 0, 10, 10, 0), (1, 2, 40, 40, 10, 10, 1)])}
    pred = {"S": frame([(1, 5, 1, 1, 8, 8, 1), (1, 6, 40, 40, 10, 10, 1)])}
    official = evaluator("official").evaluate(gt, pred)["COMBINED"]
    assert (official["FP"], official["Dets"], official["MOTA"]) == (0, 1, 100.0)
    assert evaluator("trackeval").evaluate(gt, pred)["COMBINED"]["FP"] == 1
    assert_equal_to_oracle(evaluator("official").evaluate(gt, pred), motmetrics_oracle.evaluate_mot(gt, pred))


def test_sequences_without_accumulated_frames_are_left_out(motmetrics_oracle: MotmetricsOracle) -> None:
    gt = {"A": frame([(1, 1, 0, 0, 10, 10, 1)]), "B": frame([(1, 1, 0, 0, 10, 10, 0)]), "C": frame([])}
    pred = {"A": frame([(1, 3, 0, 0, 10, 10, 1)]), "B": frame([(1, 4, 0, 0, 10, 10, 1)])}
    ours = eval_mot(gt, pred)
    assert list(ours["sequences"]) == ["A"]
    assert ours["COMBINED"]["IDF1"] == 100.0
    assert_equal_to_oracle(evaluator("official").evaluate(gt, pred), motmetrics_oracle.evaluate_mot(gt, pred))


def test_cli_protocols(motmetrics_oracle: MotmetricsOracle, tmp_path: Path) -> None:
    def run(protocol: str) -> dict:
        out = tmp_path / f"{protocol}.json"
        done = subprocess.run(
            [EGOEVAL, "score-tracks", MOT / "gt", MOT / "pred", "--protocol", protocol, "--json", out],
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert done.returncode == 0, done.stderr
        if protocol == "official":  # the flat layout has no seqinfo.ini: said, not hidden
            assert "TUD-Campus: no imWidth/imHeight" in done.stderr
        return json.loads(out.read_text())

    official, trackeval = run("official"), run("trackeval")
    assert (official["protocol"], trackeval["protocol"]) == ("official", "trackeval")
    assert_equal_to_oracle(official, motmetrics_oracle.evaluate_mot(*tud()))
    assert official["COMBINED"]["HOTA"] == trackeval["COMBINED"]["HOTA"]


def test_the_protocols_params_accept_are_the_evaluators() -> None:
    """egohumans.score.protocol (its schema's enum) and the registry name the same evaluators."""
    accepted = ScoreSettings.model_json_schema()["properties"]["protocol"]["enum"]
    assert sorted(accepted) == sorted(EVALUATORS) == ["official", "trackeval"]
    assert all(evaluator(name).name == name for name in accepted)
    with pytest.raises(ValueError, match=r"unknown protocol 'motchallenge' \(known: official, trackeval\)"):
        evaluator("motchallenge")


# --- the LAPJV port ---------------------------------------------------------------------------------------------

TIE_VALUES = [[0.0, 1.0], [0.0, 0.5, 1.0], [0.0, 0.25, 0.5, 7.0], [2.0], [0.1, 0.3, 0.7], [0.0, 2e6, 3e6]]


@st.composite
def tie_matrices(draw: st.DrawFn) -> np.ndarray:
    """Small matrices of a few repeated values (many exact ties), any shape, some with costs past lap's LARGE."""
    rows, cols = draw(st.integers(1, 9)), draw(st.integers(1, 9))
    values = draw(st.sampled_from(TIE_VALUES))
    cells = draw(st.lists(st.sampled_from(values), min_size=rows * cols, max_size=rows * cols))
    return np.array(cells, dtype=np.float64).reshape(rows, cols)


@settings(max_examples=300, deadline=None)
@given(tie_matrices())
def test_lapjv_port_chooses_as_lap_0_4_0(motmetrics_oracle: MotmetricsOracle, matrix: np.ndarray) -> None:
    assert lapjv(matrix).tolist() == motmetrics_oracle.lapjv([matrix])[0]


def test_lapjv_port_on_many_random_matrices(motmetrics_oracle: MotmetricsOracle) -> None:
    """3,000 seeded matrices in one request: ties, py-motmetrics' expensive-edge matrices of IoU distances, costs
    around lap's LARGE, and larger ones up to 40 x 50."""
    rng = np.random.default_rng(17)
    matrices = []
    for k in range(3000):
        rows, cols = rng.integers(1, 12, 2) if k % 100 else rng.integers(20, 51, 2)
        kind = k % 4
        if kind == 0:
            m = rng.integers(0, 3, (rows, cols)).astype(float)
        elif kind == 1:  # distances 1 - IoU on a coarse grid, NaN past 0.5, as the matching builds them
            d = np.round(rng.random((rows, cols)) * 4) / 8
            d[rng.random((rows, cols)) < 0.5] = np.nan
            m = _expensive_edges(d) if np.isfinite(d).any() else np.zeros_like(d)
        elif kind == 2:
            m = rng.choice([0.0, 1.0, LARGE, 2 * LARGE], (rows, cols))
        else:
            m = np.round(rng.random((rows, cols)), 2)
        matrices.append(m)
    theirs = motmetrics_oracle.lapjv(matrices)
    mismatches = [k for k, m in enumerate(matrices) if lapjv(m).tolist() != theirs[k]]
    assert mismatches == []


@st.composite
def forced_assignments(draw: st.DrawFn) -> np.ndarray:
    """NaN everywhere but at most one finite cost per row and column (and a few all-NaN matrices)."""
    rows, cols = draw(st.integers(1, 10)), draw(st.integers(1, 10))
    costs = np.full((rows, cols), np.nan)
    pairs = draw(st.integers(0, min(rows, cols)))
    for i, j in zip(draw(st.permutations(range(rows)))[:pairs], draw(st.permutations(range(cols)))[:pairs]):  # noqa: B905
        costs[i, j] = draw(st.sampled_from([0.0, 0.25, 0.5, 1 / 3]))
    return costs


@settings(max_examples=300, deadline=None)
@given(forced_assignments())
def test_forced_assignment_fast_path_equals_lapjv(costs: np.ndarray) -> None:
    """The fast path of ``assign`` gives what LAPJV gives on py-motmetrics' matrix (the port: checked above)."""
    valid = np.isfinite(costs)
    full = [] if not valid.any() else lapjv(_expensive_edges(costs)).tolist()
    assert assign(costs) == [(i, j) for i, j in enumerate(full) if j >= 0 and valid[i, j]]


SCORE_PROBE = """
import contextlib, io, json, sys
from egoeval.cli import main
out = io.StringIO()
with contextlib.redirect_stdout(out):
    code = main(sys.argv[1:])
print(json.dumps({"code": code, "table": out.getvalue(), "loaded": sorted(sys.modules)}))
"""


def test_score_tracks_official_loads_neither_pandas_nor_scipy_optimize_nor_yaml(tmp_path: Path) -> None:
    """Start-up (issue 30): the command imports what scoring needs (NumPy, SciPy's assignment solver), not pandas
    (the files are read into NumPy columns), ``scipy.optimize``'s whole package, YAML (only ``--json`` checks dvc.lock)
    or pydantic; its numbers unchanged."""
    args = ["score-tracks", str(MOT / "gt"), str(MOT / "pred"), "--protocol", "official"]
    run = subprocess.run(
        [sys.executable, "-c", SCORE_PROBE, *args], env=tool_env(), capture_output=True, text=True, timeout=120
    )
    assert run.returncode == 0, run.stderr
    probe = json.loads(run.stdout)
    assert probe["code"] == 0 and "COMBINED" in probe["table"]
    loaded = set(probe["loaded"])
    assert {"numpy", "scipy.optimize._lsap"} <= loaded
    unwanted = loaded & {"pandas", "pyarrow", "scipy.optimize", "scipy.linalg", "yaml", "pydantic"}
    assert not unwanted, f"egoeval score-tracks --protocol official imports {sorted(unwanted)}"
    assert probe["table"].rstrip("\n") == format_table(score_folders(MOT / "gt", MOT / "pred", "official"))
