"""Stage egohumans_score: CLEAR, Identity and HOTA metrics of every tracking run against the ground truth.

``egohumans.score.protocol`` picks the rules (``egoeval.egohumans.evaluators``): ``official`` (EgoHumans' evaluation:
mmtracking's ``eval_mot`` on py-motmetrics 1.4.0, re-implemented in ``egoeval.tracking.motmetrics``; HOTA from
TrackEval beside it) or ``trackeval`` (TrackEval's MOT15 semantics). Each run's entry names its protocol.

Reads ``data/egohumans/fetched/gt/<seq>.txt`` and the run folder ``data/egohumans/tracks/<tracker>-<mode>/`` of
every tracker x detection mode in params.yaml (one MOTChallenge file per ground-truth sequence). Writes
``metrics/egohumans.json`` (``{run: {"COMBINED": ..., "sequences": {seq: ...}, "cross_view": ..., "protocol",
dataset, split, set, modality, detections[, limit]}}``: what data each run scored, egoeval.egohumans.scoring.run_data),
``metrics/egohumans/<run>.json`` (the headline row ``dvc metrics show`` prints: egoeval.headline),
``plots/egohumans/sequences.csv`` (run, sequence, IDF1, MOTA, HOTA; one row per run and sequence plus a
``COMBINED`` row per run: the trackers side by side), ``plots/egohumans/head_speed.csv`` (run, head-speed bin, its
lower edge speed_from in deg/frame, frames, IDF1, IDSW: see egoeval.egohumans.head_speed) and
``plots/egohumans/paired.csv`` (every pair of trackers per detection mode by a paired bootstrap over sequences: see
egoeval.egohumans.paired).
"""

from __future__ import annotations

import argparse

import pandas as pd

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
from egoeval.egohumans.head_speed import head_speed_table, head_speeds
from egoeval.egohumans.paired import paired_table
from egoeval.egohumans.scoring import headline_rows, read_runs, run_data, run_names, score_runs, sequence_table
from egoeval.egohumans.settings import EgoHumansSettings
from egoeval.headline import write_rows
from egoeval.io import json_bytes, outputs_together, read_parquet
from egoeval.paired import csv_bytes
from egoeval.settings import benchmark_settings
from egoeval.stage import run_stage


def _csv(table: pd.DataFrame) -> bytes:
    return table.to_csv(index=False, float_format="%.4f", lineterminator="\n").encode()


def main(argv: list[str] | None = None) -> int:
    argparse.ArgumentParser(description=__doc__.splitlines()[0]).parse_args(argv)

    def body() -> None:
        with outputs_together(METRICS_FILE, HEADLINE_DIR, SEQUENCES_PLOT, HEAD_SPEED_PLOT, PAIRED_FILE) as outputs:
            params = benchmark_settings("egohumans", EgoHumansSettings)
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

    return run_stage(body, benchmark="egohumans")


if __name__ == "__main__":
    raise SystemExit(main())
