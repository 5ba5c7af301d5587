"""Tracking metrics equal TrackEval 1.3.0 (MOT15) to 1e-9: real sequences, randomized ones, edge cases, the CLI."""

from __future__ import annotations

import contextlib
import io
import json
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import trackeval
from conftest import TEST_DATA
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy.optimize import linear_sum_assignment
from trackeval_oracle import assert_same, run_trackeval, sequence_data, write_tree

from egoeval.tracking.clear import CLEAR
from egoeval.tracking.hota import ALPHAS, HOTA
from egoeval.tracking.identity import Identity
from egoeval.tracking.matching import forced_matches
from egoeval.tracking.mot import read_mot
from egoeval.tracking.npsum import row_col_sums
from egoeval.tracking.trackeval import evaluate, evaluate_sequences, summarize

MOT = TEST_DATA / "mot"
TUD = ["TUD-Campus", "TUD-Stadtmitte"]
EGOEVAL = str(Path(sys.executable).with_name("egoeval"))
SUMMARY_FROM = {"HOTA": ("HOTA", "HOTA"), "DetA": ("HOTA", "DetA"), "AssA": ("HOTA", "AssA")}
SUMMARY_FROM |= {"LocA": ("HOTA", "LocA"), "MOTA": ("CLEAR", "MOTA"), "MOTP": ("CLEAR", "MOTP")}
SUMMARY_FROM |= {"IDF1": ("Identity", "IDF1"), "IDP": ("Identity", "IDP"), "IDR": ("Identity", "IDR")}
COUNTS_FROM = {"IDSW": "IDSW", "FP": "CLR_FP", "FN": "CLR_FN", "Frag": "Frag", "MT": "MT", "PT": "PT", "ML": "ML"}


def last_frame(*paths: Path) -> int:
    """The largest frame in the files (zero-marked rows included, as TrackEval's seqLength must cover them)."""
    frames = [int(line.split(",")[0]) for p in paths for line in p.read_text().splitlines() if line.strip()]
    return max(frames, default=1)


def tud_oracle(tmp_path: Path, pred: dict[str, Path]) -> tuple[dict, dict[str, int]]:
    gt = {seq: MOT / "gt" / f"{seq}.txt" for seq in TUD}
    lengths = {seq: last_frame(gt[seq], *([pred[seq]] if seq in pred else [])) for seq in TUD}
    write_tree(tmp_path / "trackeval", gt, pred, lengths)
    return run_trackeval(tmp_path / "trackeval"), lengths


def assert_summary_matches(summary: dict, theirs: dict) -> None:
    for key, (metric, field) in SUMMARY_FROM.items():
        assert summary[key] == pytest.approx(100 * float(np.mean(theirs[metric][field])), abs=1e-9), key
    for key, field in COUNTS_FROM.items():
        assert summary[key] == int(theirs["CLEAR"][field]), key


def test_tud_sequences_equal_trackeval(tmp_path: Path) -> None:
    theirs, lengths = tud_oracle(tmp_path, {seq: MOT / "pred" / f"{seq}.txt" for seq in TUD})
    gt = {seq: read_mot(MOT / "gt" / f"{seq}.txt", kind="gt") for seq in TUD}
    pred = {seq: read_mot(MOT / "pred" / f"{seq}.txt", kind="pred") for seq in TUD}
    ours = evaluate(gt, pred, seq_lengths=lengths)
    for seq in TUD:
        assert_same(ours["sequences"][seq], theirs["sequences"][seq], seq)
    assert_same(ours["COMBINED"], theirs["COMBINED"], "COMBINED")
    summaries = evaluate_sequences(gt, pred, seq_lengths=lengths)
    assert_summary_matches(summaries["COMBINED"], theirs["COMBINED"])
    assert summaries["COMBINED"] == summarize(ours["COMBINED"])


def test_metric_units_on_trackeval_preprocessed_data(tmp_path: Path) -> None:
    """Our metric classes fed TrackEval's own preprocessed data give TrackEval's metric classes' results."""
    gt = {seq: MOT / "gt" / f"{seq}.txt" for seq in TUD}
    pred = {seq: MOT / "pred" / f"{seq}.txt" for seq in TUD}
    write_tree(tmp_path, gt, pred, {seq: last_frame(gt[seq], pred[seq]) for seq in TUD})
    config = {"GT_FOLDER": str(tmp_path / "gt"), "TRACKERS_FOLDER": str(tmp_path / "trackers"), "PRINT_CONFIG": False}
    config |= {"BENCHMARK": "MOT15", "SPLIT_TO_EVAL": "train"}
    quiet = {"PRINT_CONFIG": False}
    with contextlib.redirect_stdout(io.StringIO()):
        dataset = trackeval.datasets.MotChallenge2DBox(config)
        pairs = [
            (trackeval.metrics.HOTA(), HOTA()),
            (trackeval.metrics.CLEAR(quiet), CLEAR()),
            (trackeval.metrics.Identity(quiet), Identity()),
        ]
        theirs, ours = {}, {}
        for seq in TUD:
            data = dataset.get_preprocessed_seq_data(dataset.get_raw_seq_data("oracle", seq), "pedestrian")
            mine = sequence_data(data["gt_ids"], data["tracker_ids"], data["similarity_scores"])
            theirs[seq] = {ref.get_name(): ref.eval_sequence(data) for ref, _ in pairs}
            ours[seq] = {unit.name: unit.eval_sequence(mine) for _, unit in pairs}
    for ref, unit in pairs:
        name = unit.name
        combined = unit.combine_sequences({s: ours[s][name] for s in TUD})
        expected = ref.combine_sequences({s: theirs[s][name] for s in TUD})
        for field, value in expected.items():
            np.testing.assert_allclose(np.asarray(combined[field], float), value, rtol=1e-12, atol=1e-9)
        for seq in TUD:
            for field, value in theirs[seq][name].items():
                np.testing.assert_allclose(np.asarray(ours[seq][name][field], float), value, rtol=1e-12, atol=1e-9)


# --- randomized sequences ------------------------------------------------------------------------------------


def make_sequence(rng: np.random.Generator, frames: int, tracks: int, kind: str) -> tuple[list, list]:
    """gt and tracker rows ``(frame, id, x, y, w, h, conf)`` on a small integer grid: crossings (opposite
    velocities), gaps, zero-marked gt, id swaps and switches, boxes at IoU exactly 0.5, two tracker boxes
    on one person, false positives."""
    gt, pred = [], []
    velocity = rng.integers(-3, 4, (tracks, 2))
    start = rng.integers(0, 25, (tracks, 2))
    size = rng.integers(1, 9, (tracks, 2))
    first, last = rng.integers(1, frames + 1, tracks), rng.integers(1, frames + 1, tracks)
    swap_at = int(rng.integers(1, frames + 1))
    swapped = rng.permutation(tracks) if rng.random() < 0.5 else np.arange(tracks)
    for f in range(1, frames + 1):
        blank_tracker = rng.random() < 0.1
        used: set[int] = set()
        for k in range(tracks):
            if not min(first[k], last[k]) <= f <= max(first[k], last[k]) or rng.random() < 0.15:
                continue  # outside the track's life, or a gap
            x, y = (start[k] + velocity[k] * (f - 1)).tolist()
            w, h = size[k].tolist()
            conf = 0 if rng.random() < 0.1 else (-1 if rng.random() < 0.1 else 1)
            gt.append((f, k + 1, x, y, w, h, conf))
            if blank_tracker or kind == "empty_pred" or rng.random() < 0.2:
                continue
            tid = 100 + int(swapped[k] if f >= swap_at else k)
            if rng.random() < 0.05:
                tid = 300 + int(rng.integers(0, 5))  # a switch to another id
            mode = rng.integers(0, 5)
            if mode == 1:
                w = 2 * w  # IoU exactly 0.5
            elif mode == 2:
                x, y = x + int(rng.integers(-2, 3)), y + int(rng.integers(-2, 3))
            elif mode == 3:
                x, w = x + 0.25 * int(rng.integers(-4, 5)), w + 0.5 * int(rng.integers(0, 3))
            if tid not in used:
                used.add(tid)
                pred.append((f, tid, x, y, w, h, 1))
            if rng.random() < 0.2:  # a second box on the same person: two candidates for one gt box
                pred.append((f, 700 + k, x + int(rng.integers(-1, 2)), y, w, h + int(rng.integers(0, 2)), 1))
        for j in range(int(rng.poisson(0.6))):
            if kind != "empty_pred" and not blank_tracker:
                pred.append((f, 500 + j, *rng.integers(0, 30, 2).tolist(), *rng.integers(1, 9, 2).tolist(), 1))
    if kind == "empty_gt":
        gt = [(*row[:6], 0) for row in gt]  # every box zero-marked: no ground truth after filtering
    return gt, pred


@st.composite
def scenarios(draw: st.DrawFn) -> list[dict]:
    """One to three sequences; some have no ground truth, no tracker boxes or no tracker file."""
    sequences = []
    for k in range(draw(st.integers(1, 3))):
        kind = draw(st.sampled_from(["normal"] * 5 + ["crowded", "empty_gt", "empty_pred", "missing_pred"]))
        frames = draw(st.integers(1, 12))
        tracks = draw(st.integers(8, 15) if kind == "crowded" else st.integers(0, 6))
        rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
        gt, pred = make_sequence(rng, frames, tracks, kind)
        sequences.append(
            {"name": f"SEQ-{k}", "frames": frames, "gt": gt, "pred": None if kind == "missing_pred" else pred}
        )
    return sequences


def mot_lines(rows: list[tuple]) -> str:
    return "".join(f"{f},{i},{x!r},{y!r},{w!r},{h!r},{c},-1,-1,-1\n" for f, i, x, y, w, h, c in rows)


@settings(max_examples=200, deadline=None)
@given(scenarios())
def test_random_sequences_equal_trackeval_evaluator(sequences: list[dict]) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        gt_paths, pred_paths = {}, {}
        for seq in sequences:
            gt_paths[seq["name"]] = root / f"{seq['name']}-gt.txt"
            gt_paths[seq["name"]].write_text(mot_lines(seq["gt"]))
            if seq["pred"] is not None:
                pred_paths[seq["name"]] = root / f"{seq['name']}-pred.txt"
                pred_paths[seq["name"]].write_text(mot_lines(seq["pred"]))
        lengths = {seq["name"]: seq["frames"] for seq in sequences}
        write_tree(root / "trackeval", gt_paths, pred_paths, lengths)
        theirs = run_trackeval(root / "trackeval")
        gt = {name: read_mot(path, kind="gt") for name, path in gt_paths.items()}
        pred = {name: read_mot(path, kind="pred") for name, path in pred_paths.items()}
    ours = evaluate(gt, pred, seq_lengths=lengths)
    for name in gt:
        assert_same(ours["sequences"][name], theirs["sequences"][name], name)
    assert_same(ours["COMBINED"], theirs["COMBINED"], "COMBINED")


# --- hand-made edge cases -------------------------------------------------------------------------------------


def score_rows(tmp_path: Path, gt_rows: list[tuple], pred_rows: list[tuple]) -> tuple[dict, dict]:
    """(ours, TrackEval's) results for one sequence given as rows."""
    (tmp_path / "gt.txt").write_text(mot_lines(gt_rows))
    (tmp_path / "pred.txt").write_text(mot_lines(pred_rows))
    length = max([row[0] for row in gt_rows + pred_rows], default=1)
    write_tree(tmp_path / "te", {"S": tmp_path / "gt.txt"}, {"S": tmp_path / "pred.txt"}, {"S": length})
    theirs = run_trackeval(tmp_path / "te")
    gt, pred = read_mot(tmp_path / "gt.txt", kind="gt"), read_mot(tmp_path / "pred.txt", kind="pred")
    ours = evaluate({"S": gt}, {"S": pred}, seq_lengths={"S": length})
    assert_same(ours["sequences"]["S"], theirs["sequences"]["S"], "S")
    assert_same(ours["COMBINED"], theirs["COMBINED"], "COMBINED")
    return ours["sequences"]["S"], theirs["sequences"]["S"]


def test_iou_exactly_half_matches(tmp_path: Path) -> None:
    ours, _ = score_rows(tmp_path, [(1, 1, 0, 0, 2, 1, 1)], [(1, 7, 0, 0, 1, 1, 1)])  # IoU = 1 / 2
    assert ours["CLEAR"]["CLR_TP"] == 1
    assert ours["Identity"]["IDTP"] == 1
    passed = ALPHAS - np.finfo(float).eps <= 0.5  # HOTA counts the match for alpha <= 0.5
    np.testing.assert_array_equal(ours["HOTA"]["HOTA_TP"], passed.astype(float))
    assert summarize(ours)["HOTA"] == pytest.approx(100 * passed.sum() / len(ALPHAS))


def test_iou_a_hair_below_half(tmp_path: Path) -> None:
    # IoU = 1 / (2 + 2**-51): CLEAR still matches (it allows eps below the threshold), Identity does not.
    ours, _ = score_rows(tmp_path, [(1, 1, 0, 0, 2.0000000000000004, 1, 1)], [(1, 7, 0, 0, 1, 1, 1)])
    assert ours["CLEAR"]["CLR_TP"] == 1
    assert ours["Identity"]["IDTP"] == 0


def test_empty_tracker_output_conventions(tmp_path: Path) -> None:
    ours, _ = score_rows(tmp_path, [(1, 1, 0, 0, 4, 4, 1), (2, 1, 0, 0, 4, 4, 1)], [])
    summary = summarize(ours)
    assert (summary["MOTA"], summary["LocA"], summary["HOTA"], summary["IDF1"]) == (0.0, 100.0, 0.0, 0.0)
    assert (summary["FN"], summary["ML"], summary["FP"]) == (2, 1, 0)


def test_tracker_boxes_on_ignored_gt_are_false_positives(tmp_path: Path) -> None:
    ours, _ = score_rows(tmp_path, [(1, 1, 0, 0, 4, 4, 0), (1, 2, 9, 9, 4, 4, 1)], [(1, 5, 0, 0, 4, 4, 1)])
    summary = summarize(ours)
    assert (summary["FP"], summary["FN"], summary["GT_Dets"]) == (1, 1, 1)


def test_clear_keeps_the_previous_match_over_a_better_box(tmp_path: Path) -> None:
    # Frame 2 offers tracker 20 (IoU 1) and tracker 10 (IoU 0.6, matched in frame 1): CLEAR keeps 10, no IDSW.
    gt = [(f, 1, 0, 0, 10, 10, 1) for f in (1, 2)]
    pred = [(1, 10, 0, 0, 10, 10, 1), (2, 20, 0, 0, 10, 10, 1), (2, 10, 0, 0, 10, 6, 1)]
    ours, _ = score_rows(tmp_path, gt, pred)
    assert (ours["CLEAR"]["IDSW"], ours["CLEAR"]["CLR_TP"], ours["CLEAR"]["CLR_FP"]) == (0, 2, 1)
    assert ours["CLEAR"]["MOTP_sum"] == pytest.approx(1.6)


def test_id_swap_at_a_crossing(tmp_path: Path) -> None:
    # Two people cross; the tracker swaps their ids when they meet: two IDSW.
    gt = [(f, 1, 2 * f, 0, 4, 8, 1) for f in range(1, 9)] + [(f, 2, 18 - 2 * f, 0, 4, 8, 1) for f in range(1, 9)]
    pred = [(f, 10 if f < 5 else 20, 2 * f, 0, 4, 8, 1) for f in range(1, 9)]
    pred += [(f, 20 if f < 5 else 10, 18 - 2 * f, 0, 4, 8, 1) for f in range(1, 9)]
    ours, _ = score_rows(tmp_path, gt, pred)
    assert ours["CLEAR"]["IDSW"] == 2


def test_far_apart_frames_cost_nothing_and_change_only_frame_counts() -> None:
    rows = {"id": [1, 1], "x": [0.0, 1.0], "y": [0.0, 0.0], "w": [4.0, 4.0], "h": [4.0, 4.0], "conf": [1.0, 1.0]}
    near, far = pd.DataFrame({"frame": [1, 2], **rows}), pd.DataFrame({"frame": [1, 10**12], **rows})
    a = evaluate({"S": near}, {"S": near.assign(id=[5, 6])})["sequences"]["S"]
    b = evaluate({"S": far}, {"S": far.assign(id=[5, 6])})["sequences"]["S"]
    assert (b["CLEAR"]["CLR_Frames"], b["Count"]["Frames"]) == (10**12, 10**12)
    for metric in ["HOTA", "CLEAR", "Identity"]:
        for field in set(a[metric]) - {"CLR_Frames", "FP_per_frame"}:
            np.testing.assert_array_equal(a[metric][field], b[metric][field], err_msg=field)
    assert a["CLEAR"]["IDSW"] == 1


# --- the vectorised pieces against what they replace ---------------------------------------------------------


def test_row_and_column_sums_are_numpys_bit_for_bit() -> None:
    rng = np.random.default_rng(0)
    shapes = [(1, 1), (1, 9), (9, 1), (200, 1), (3, 7), (8, 8), (12, 130), (130, 12), (5, 300), (40, 2)]
    matrices = [rng.random(s) * (rng.random(s) < 0.6) for s in shapes]
    data = sequence_data([np.arange(m.shape[0]) for m in matrices], [np.arange(m.shape[1]) for m in matrices], matrices)
    rows, cols = row_col_sums(data)
    np.testing.assert_array_equal(rows, np.concatenate([m.sum(1) for m in matrices]))
    np.testing.assert_array_equal(cols, np.concatenate([m.sum(0) for m in matrices]))


def test_forced_assignments_are_what_scipy_returns() -> None:
    rng = np.random.default_rng(1)
    matrices = []
    for _ in range(400):
        shape = tuple(rng.integers(1, 6, 2))
        values = rng.integers(0, 4, shape) * (rng.random(shape) < 0.4)  # small integers: many ties
        matrices.append(values.astype(float))
    data = sequence_data([np.arange(m.shape[0]) for m in matrices], [np.arange(m.shape[1]) for m in matrices], matrices)
    forced, matched = forced_matches(data, data.similarity)
    assert 0 < forced.sum() < len(matrices)
    got = {(int(g), int(k)) for g, k in zip(data.pair_gt[matched], data.pair_tracker[matched], strict=True)}
    for t in np.flatnonzero(forced):
        rows, cols = linear_sum_assignment(-matrices[t])
        keep = matrices[t][rows, cols] > 0
        offset = np.array([data.gt_start[t], data.tracker_start[t]])
        expected = {(int(r), int(c)) for r, c in np.column_stack([rows[keep], cols[keep]]) + offset}
        mine = {pair for pair in got if data.gt_t[pair[0]] == t}
        assert mine == expected, t


# --- the command line ------------------------------------------------------------------------------------------


def score_tracks(*args: str | Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([EGOEVAL, "score-tracks", *map(str, args)], capture_output=True, text=True, timeout=120)


def test_cli_scores_flat_folders_like_trackeval(tmp_path: Path) -> None:
    theirs, _ = tud_oracle(tmp_path, {seq: MOT / "pred" / f"{seq}.txt" for seq in TUD})
    done = score_tracks(MOT / "gt", MOT / "pred", "--json", tmp_path / "out.json")
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert lines[0].split()[:4] == ["Sequence", "HOTA", "DetA", "AssA"]
    assert [line.split()[0] for line in lines[1:]] == [*TUD, "COMBINED"]
    result = json.loads((tmp_path / "out.json").read_text())
    for seq in TUD:
        assert_summary_matches(result["sequences"][seq], theirs["sequences"][seq])
    assert_summary_matches(result["COMBINED"], theirs["COMBINED"])
    first = (tmp_path / "out.json").read_bytes()
    assert score_tracks(MOT / "gt", MOT / "pred", "--json", tmp_path / "out.json").returncode == 0
    assert (tmp_path / "out.json").read_bytes() == first


def test_cli_tree_layout_with_a_missing_prediction(tmp_path: Path) -> None:
    tree = tmp_path / "gt"
    for seq in TUD:
        (tree / seq / "gt").mkdir(parents=True)
        (tree / seq / "gt" / "gt.txt").write_bytes((MOT / "gt" / f"{seq}.txt").read_bytes())
        length = last_frame(MOT / "gt" / f"{seq}.txt", MOT / "pred" / f"{seq}.txt")
        (tree / seq / "seqinfo.ini").write_text(f"[Sequence]\nname={seq}\nseqLength={length}\n")
    (tmp_path / "pred").mkdir()
    (tmp_path / "pred" / "TUD-Campus.txt").write_bytes((MOT / "pred" / "TUD-Campus.txt").read_bytes())
    done = score_tracks(tree, tmp_path / "pred", "--json", tmp_path / "out.json")
    assert done.returncode == 0, done.stderr
    assert "no tracker output for TUD-Stadtmitte: scored as empty" in done.stderr
    theirs, _ = tud_oracle(tmp_path, {"TUD-Campus": MOT / "pred" / "TUD-Campus.txt"})
    result = json.loads((tmp_path / "out.json").read_text())
    assert result["sequences"]["TUD-Stadtmitte"]["MOTA"] == 0.0
    for seq in TUD:
        assert_summary_matches(result["sequences"][seq], theirs["sequences"][seq])
    assert_summary_matches(result["COMBINED"], theirs["COMBINED"])


def test_cli_rejects_a_malformed_row(tmp_path: Path) -> None:
    (tmp_path / "pred").mkdir()
    lines = (MOT / "pred" / "TUD-Campus.txt").read_text().splitlines()
    lines[6] = "7,3,113.84,274.5"
    (tmp_path / "pred" / "TUD-Campus.txt").write_text("\n".join(lines) + "\n")
    done = score_tracks(MOT / "gt", tmp_path / "pred", "--json", tmp_path / "out.json")
    assert done.returncode == 2
    assert f"{tmp_path / 'pred' / 'TUD-Campus.txt'}, row 7: 4 fields" in done.stderr
    assert not (tmp_path / "out.json").exists()


def test_cli_rejects_frames_beyond_seqinfo_and_empty_folders(tmp_path: Path) -> None:
    (tmp_path / "gt" / "S" / "gt").mkdir(parents=True)
    (tmp_path / "gt" / "S" / "gt" / "gt.txt").write_text("1,1,0,0,5,5,1,-1,-1,-1\n3,1,0,0,5,5,1,-1,-1,-1\n")
    (tmp_path / "gt" / "S" / "seqinfo.ini").write_text("[Sequence]\nname=S\nseqLength=2\n")
    (tmp_path / "pred").mkdir()
    done = score_tracks(tmp_path / "gt", tmp_path / "pred")
    assert done.returncode == 2
    assert "beyond seqLength 2" in done.stderr
    done = score_tracks(tmp_path / "pred", tmp_path / "pred")
    assert done.returncode == 2
    assert "no ground truth found" in done.stderr


def test_linear_sum_assignment_is_scipys_without_importing_scipy_optimize() -> None:
    """egoeval.tracking.matching loads SciPy's solver (scipy.optimize._lsap) alone: the same function that a later
    ``import scipy.optimize`` exports, without that package's quarter of a second of imports."""
    probe = (
        "import sys\n"
        "from egoeval.tracking.matching import linear_sum_assignment\n"
        "assert 'scipy.optimize' not in sys.modules, 'scipy.optimize imported'\n"
        "import scipy.optimize\n"
        "assert scipy.optimize.linear_sum_assignment is linear_sum_assignment\n"
        "print(linear_sum_assignment([[4.0, 1.0], [2.0, 0.0]])[1].tolist())\n"
    )
    run = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=120)
    assert run.returncode == 0, run.stderr
    assert run.stdout.strip() == "[1, 0]"
