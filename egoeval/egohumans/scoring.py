"""The egohumans_score stage's work (``write_scores``): every tracking run scored against the ground truth under the
configured protocol (``egoeval.egohumans.evaluators``), and the per-sequence table of the runs side by side.

``egohumans.score.protocol`` picks the rules: ``official`` (EgoHumans' evaluation: mmtracking's ``eval_mot`` on
py-motmetrics 1.4.0, re-implemented in ``egoeval.tracking.motmetrics``; HOTA from TrackEval beside it) or
``trackeval`` (TrackEval's MOT15 semantics). Each run's entry names its protocol.

Reads ``data/egohumans/fetched/gt/<seq>.txt`` and the run folder ``data/egohumans/tracks/<tracker>-<mode>/`` of
every tracker x detection mode of the settings (one MOTChallenge file per ground-truth sequence). Writes
``metrics/egohumans.json`` (``{run: {"COMBINED": ..., "sequences": {seq: ...}, "cross_view": ..., "protocol",
dataset, split, set, modality, detections[, limit]}}``: what data each run scored, ``run_data``),
``metrics/egohumans/<run>.json`` (the headline row ``dvc metrics show`` prints: egoeval.headline),
``plots/egohumans/sequences.csv`` (run, sequence, IDF1, MOTA, HOTA; one row per run and sequence plus a
``COMBINED`` row per run: the trackers side by side), ``plots/egohumans/head_speed.csv`` (run, head-speed bin, its
lower edge speed_from in deg/frame, frames, IDF1, IDSW: see egoeval.egohumans.head_speed) and
``plots/egohumans/paired.csv`` (every pair of trackers per detection mode by a paired bootstrap over sequences: see
egoeval.egohumans.paired).
"""

from __future__ import annotations

from pathlib import Path, PurePosixPath
from typing import Any

import pandas as pd

from egoeval.core.errors import InputError
from egoeval.core.io.atomic import json_bytes
from egoeval.core.io.bounded import read_parquet
from egoeval.core.io.commit import outputs_together
from egoeval.egohumans.artifacts import (
    FETCHED,
    GT_DIR,
    HEAD_SPEED_PLOT,
    HEADLINE_DIR,
    IMAGES,
    METRICS_FILE,
    PAIRED_FILE,
    SEQUENCES_PLOT,
    TRACKS,
)
from egoeval.egohumans.crossview import cross_view_runs
from egoeval.egohumans.evaluators import evaluator
from egoeval.egohumans.head_speed import head_speed_table, head_speeds
from egoeval.egohumans.paired import paired_table
from egoeval.egohumans.settings import EgoHumansSettings, ScoreSettings
from egoeval.headline import write_rows
from egoeval.significance import csv_bytes
from egoeval.tracking.mot import read_mot, read_mot_folder

PLOT_COLUMNS = ["IDF1", "MOTA", "HOTA"]


def run_names(settings: EgoHumansSettings) -> list[str]:
    """The tracking runs the settings configure: ``<tracker>-<mode>`` for every tracker x detection mode."""
    return [f"{tracker}-{mode}" for tracker in settings.track.trackers for mode in settings.detect.modes]


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


def score_runs(
    gt: dict[str, pd.DataFrame], tracks: dict[str, dict[str, pd.DataFrame]], settings: ScoreSettings
) -> dict[str, dict[str, Any]]:
    """Each run's ``{"protocol", "COMBINED", "sequences"}`` under ``settings.protocol``."""
    scoring = evaluator(settings.protocol)
    return {run: scoring.evaluate(gt, pred, settings.iou_threshold) for run, pred in tracks.items()}


def score(gt_dir: Path, tracks_dir: Path, runs: list[str], settings: ScoreSettings) -> dict[str, dict[str, Any]]:
    """Evaluate the named run folders under ``tracks_dir``; each must hold exactly the ground truth's sequences."""
    return score_runs(*read_runs(gt_dir, tracks_dir, runs), settings)


def sequence_table(results: dict[str, dict[str, Any]]) -> pd.DataFrame:
    """One row per run and sequence (and a COMBINED row per run), sorted by run then sequence."""
    rows = []
    for run, result in results.items():
        for sequence, metrics in [*result["sequences"].items(), ("COMBINED", result["COMBINED"])]:
            rows.append({"run": run, "sequence": sequence, **{c: metrics.get(c) for c in PLOT_COLUMNS}})
    table = pd.DataFrame(rows, columns=["run", "sequence", *PLOT_COLUMNS])
    return table.sort_values(["run", "sequence"], kind="mergesort").reset_index(drop=True)


def run_data(settings: EgoHumansSettings, run: str) -> dict[str, Any]:
    """What data a run scored, as its metrics entry records it: dataset (``sample`` for the bundled sample), split
    (the annotation's folder, ``all`` in the official layout), set (the folder above it: the benchmark's set, e.g.
    ``test``), the modalities, the run's detection mode and, in a smoke run only, its limit. ``egoeval compare``
    ranks a run beside the published table only when these are the published data's (``published.mismatch``)."""
    fetch = settings.fetch
    parents = PurePosixPath(fetch.annotation).parents
    data: dict[str, Any] = {
        "dataset": "sample" if fetch.source == "sample" else "egohumans",
        "split": parents[1].name or ".",
        "set": parents[2].name if len(parents) > 2 and parents[2].name else ".",
        "modality": sorted([fetch.modality] if isinstance(fetch.modality, str) else fetch.modality),
        "detections": run.rsplit("-", 1)[-1],
    }
    if fetch.limit is not None:
        data["limit"] = {"sequences": fetch.limit}
    return data


def headline_rows(results: dict[str, dict[str, Any]], settings: EgoHumansSettings) -> dict[tuple[str], dict[str, Any]]:
    """(run,) -> the row ``dvc metrics show`` prints: combined IDF1, MOTA, HOTA with protocol, dataset (``sample``
    for the bundled sample), split (the annotation's folder, ``all`` in the official layout), n (sequences) and a
    smoke run's limit (``run_data``)."""
    about = {k: v for k, v in run_data(settings, "").items() if k in ("dataset", "split", "limit")}
    return {
        (run,): {
            "protocol": result["protocol"],
            **about,
            "n": len(result["sequences"]),
            **{key: result["COMBINED"].get(key) for key in PLOT_COLUMNS},
        }
        for run, result in results.items()
    }


def _csv(table: pd.DataFrame) -> bytes:
    return table.to_csv(index=False, float_format="%.4f", lineterminator="\n").encode()


def write_scores(params: EgoHumansSettings) -> None:
    """The egohumans_score stage: score every run, write the metrics, headline rows and plot tables together, and print
    each run's headline figures."""
    with outputs_together(METRICS_FILE, HEADLINE_DIR, SEQUENCES_PLOT, HEAD_SPEED_PLOT, PAIRED_FILE) as outputs:
        gt, tracks = read_runs(GT_DIR, TRACKS, run_names(params))
        results = score_runs(gt, tracks, params.score)
        for run, entry in cross_view_runs(params, gt, tracks, FETCHED, TRACKS).items():  # across each take's views
            results[run]["cross_view"] = entry
        for run in results:  # what data it scored: egoeval compare ranks only the published data's runs
            results[run] |= run_data(params, run)
        speeds = head_speeds(read_parquet(IMAGES, ["sequence", "frame", "extrinsics"]), IMAGES)
        by_speed = head_speed_table(gt, tracks, speeds, params.score)
        outputs.write(METRICS_FILE, json_bytes(results))
        write_rows(outputs.path(HEADLINE_DIR), headline_rows(results, params))
        outputs.write(SEQUENCES_PLOT, _csv(sequence_table(results)))
        outputs.write(HEAD_SPEED_PLOT, _csv(by_speed))
        outputs.write(PAIRED_FILE, csv_bytes(paired_table(results, params)))
    for run, result in results.items():
        combined = result["COMBINED"]
        shown = "  ".join(f"{k} {combined.get(k) or float('nan'):.2f}" for k in ("HOTA", "IDF1", "MOTA"))
        print(f"{run} ({result['protocol']}): {shown}")
