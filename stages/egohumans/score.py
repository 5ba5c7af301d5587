"""Stage egohumans_score: CLEAR, Identity and HOTA metrics of every tracking run against the ground truth.

``egohumans.score.protocol`` picks the rules: ``official`` (EgoHumans' evaluation: mmtracking's ``eval_mot`` on
py-motmetrics 1.4.0, re-implemented in ``egoeval.metrics.official``; HOTA from TrackEval beside it) or
``trackeval`` (TrackEval's MOT15 semantics). Each run's entry names its protocol.

Reads ``data/egohumans/fetched/gt/<seq>.txt`` and the run folder ``data/egohumans/tracks/<tracker>-<mode>/`` of
every tracker x detection mode in params.yaml
(one MOTChallenge file per ground-truth sequence). Writes ``metrics/egohumans.json`` (``{run: {"COMBINED": ...,
"sequences": {seq: ...}}}``), ``plots/egohumans/sequences.csv`` (run, sequence, IDF1, MOTA, HOTA; one row per
run and sequence plus a ``COMBINED`` row per run: the trackers side by side) and ``plots/egohumans/head_speed.csv``
(run, head-speed bin, frames, IDF1, IDSW: see egoeval.egohumans.head_speed).
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

import pandas as pd

from egoeval.egohumans.artifacts import GT_DIR, HEAD_SPEED_PLOT, IMAGES, METRICS_FILE, SEQUENCES_PLOT, TRACKS
from egoeval.egohumans.head_speed import head_speed_table, head_speeds
from egoeval.errors import InputError
from egoeval.io import json_bytes, outputs_together, read_parquet
from egoeval.metrics import score_protocol
from egoeval.mot import read_mot, read_mot_folder
from egoeval.settings import load_settings
from egoeval.stage import run_stage

TRACKS_DIR, METRICS, PLOT = TRACKS, METRICS_FILE, SEQUENCES_PLOT
PLOT_COLUMNS = ["IDF1", "MOTA", "HOTA"]


def score(
    gt_dir: Path, tracks_dir: Path, runs: list[str], iou_threshold: float, protocol: str = "official"
) -> dict[str, dict[str, Any]]:
    """Evaluate the named run folders under ``tracks_dir``; each must hold exactly the ground truth's sequences."""
    gt, tracks = read_runs(gt_dir, tracks_dir, runs)
    return {run: score_protocol(gt, pred, protocol, iou_threshold=iou_threshold) for run, pred in tracks.items()}


def read_runs(
    gt_dir: Path, tracks_dir: Path, runs: list[str]
) -> tuple[dict[str, pd.DataFrame], dict[str, dict[str, pd.DataFrame]]]:
    """(ground truth by sequence, each run's tracks by sequence); every run holds exactly the ground truth's."""
    gt = {name: read_mot(path, kind="pred") for name, path in read_mot_folder(gt_dir).items()}  # with ignore rows
    if not gt:
        raise InputError(gt_dir, "no ground-truth sequences (<seq>.txt)")
    tracks = {}
    for run in (tracks_dir / name for name in sorted(runs)):
        if not run.is_dir():
            raise InputError(run, "tracking run not found (run the egohumans_track stage first)")
        found = read_mot_folder(run)
        missing, extra = sorted(set(gt) - set(found)), sorted(set(found) - set(gt))
        if missing or extra:
            raise InputError(run, f"sequences differ from the ground truth: missing {missing}, unknown {extra}")
        tracks[run.name] = {name: read_mot(found[name], kind="pred") for name in gt}
    return gt, tracks


def sequence_table(results: dict[str, dict[str, Any]]) -> pd.DataFrame:
    """One row per run and sequence (and a COMBINED row per run), sorted by run then sequence."""
    rows = []
    for run, result in results.items():
        for sequence, metrics in [*result["sequences"].items(), ("COMBINED", result["COMBINED"])]:
            rows.append({"run": run, "sequence": sequence, **{c: metrics.get(c) for c in PLOT_COLUMNS}})
    table = pd.DataFrame(rows, columns=["run", "sequence", *PLOT_COLUMNS])
    return table.sort_values(["run", "sequence"], kind="mergesort").reset_index(drop=True)


def _csv(table: pd.DataFrame) -> bytes:
    return table.to_csv(index=False, float_format="%.4f", lineterminator="\n").encode()


def main(argv: list[str] | None = None) -> int:
    argparse.ArgumentParser(description=__doc__.splitlines()[0]).parse_args(argv)

    def body() -> None:
        with outputs_together(METRICS, PLOT, HEAD_SPEED_PLOT) as outputs:
            params = load_settings().egohumans
            runs = [f"{tracker}-{mode}" for tracker in params.track.trackers for mode in params.detect.modes]
            gt, tracks = read_runs(GT_DIR, TRACKS_DIR, runs)
            protocol, iou = params.score.protocol, params.score.iou_threshold
            results = {run: score_protocol(gt, pred, protocol, iou_threshold=iou) for run, pred in tracks.items()}
            speeds = head_speeds(read_parquet(IMAGES, ["sequence", "frame", "extrinsics"]))
            by_speed = head_speed_table(gt, tracks, speeds, protocol, iou)
            outputs.write(METRICS, json_bytes(results))
            outputs.write(PLOT, _csv(sequence_table(results)))
            outputs.write(HEAD_SPEED_PLOT, _csv(by_speed))
        for run, result in results.items():
            combined = result["COMBINED"]
            shown = "  ".join(f"{k} {combined.get(k) or float('nan'):.2f}" for k in ("HOTA", "IDF1", "MOTA"))
            print(f"{run} ({result['protocol']}): {shown}")

    return run_stage(body)


if __name__ == "__main__":
    raise SystemExit(main())
