"""``egoeval score-tracks GT_DIR PRED_DIR [--protocol official|trackeval] [--json OUT]``: MOTChallenge files scored
under an EgoHumans protocol (``egoeval.egohumans.evaluators``)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from egoeval.core.errors import InputError
from egoeval.egohumans.evaluators import EVALUATORS, evaluator

if TYPE_CHECKING:
    from egoeval.tracking.mot import SeqInfo

TABLE = ["HOTA", "DetA", "AssA", "LocA", "MOTA", "MOTP", "IDF1", "IDP", "IDR"]
TABLE_COUNTS = ["IDSW", "FP", "FN", "Frag", "MT", "PT", "ML"]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="egoeval score-tracks",
        description="Score MOTChallenge tracker output against ground truth. Protocol trackeval: TrackEval's "
        "MOT15 semantics (gt rows with conf 0 are dropped, no class filtering). Protocol official: EgoHumans' "
        "evaluation, mmtracking's eval_mot on py-motmetrics 1.4.0 with lap 0.4.0's assignment (gt rows with conf 0 "
        "are ignore boxes; gt boxes under 1 px, and those outside the image of seqinfo.ini's imWidth x imHeight, "
        "are dropped as EgoHumans' dataset class drops them), with TrackEval's HOTA beside it. Both folders hold "
        "<seq>.txt files; the ground truth may instead be a MOTChallenge tree <seq>/gt/gt.txt (with seqinfo.ini).",
    )
    parser.add_argument("gt_dir", type=Path, help="ground-truth folder")
    parser.add_argument("pred_dir", type=Path, help="tracker output folder (<seq>.txt)")
    parser.add_argument(
        "--protocol",
        choices=EVALUATORS.names(),
        default="trackeval",
        help="the evaluation's rules (default: trackeval)",
    )
    parser.add_argument("--json", type=Path, help="also write the numbers to this JSON file")
    args = parser.parse_args(sys.argv[1:] if argv is None else argv)
    try:
        if args.json is not None:
            from egoeval.core.io.commit import check_output  # YAML (dvc.lock): only with --json

            check_output(args.json, inputs=[args.gt_dir, args.pred_dir])
        results = score_folders(args.gt_dir, args.pred_dir, args.protocol)
    except InputError as err:
        print(f"egoeval score-tracks: {err}", file=sys.stderr)
        return 2
    print(format_table(results))
    if args.json:
        from egoeval.core.io.atomic import write_json

        write_json(args.json, results)
    return 0


def score_folders(gt_dir: Path, pred_dir: Path, protocol: str = "trackeval") -> dict[str, dict]:
    """Read both folders (validating every row) and score every ground-truth sequence under ``protocol``."""
    from egoeval.tracking.mot import read_mot_folder, read_mot_table, read_seqinfo

    gt_files = read_mot_folder(gt_dir)
    if not gt_files:
        raise InputError(gt_dir, "no ground truth found (<seq>.txt or <seq>/gt/gt.txt)")
    pred_files = read_mot_folder(pred_dir)
    for seq in sorted(set(gt_files) - set(pred_files)):
        print(f"egoeval score-tracks: no tracker output for {seq}: scored as empty", file=sys.stderr)
    for seq in sorted(set(pred_files) - set(gt_files)):
        print(f"egoeval score-tracks: {pred_files[seq]} has no ground truth: ignored", file=sys.stderr)
    gt = {seq: read_mot_table(path, kind="pred") for seq, path in gt_files.items()}  # conf 0: the protocol decides
    pred = {seq: read_mot_table(path, kind="pred") for seq, path in pred_files.items() if seq in gt}
    infos: dict[str, SeqInfo] = {}
    for seq, path in gt_files.items():
        info = read_seqinfo(path)
        if info is None:
            continue
        for table, source in ((gt[seq], path), (pred.get(seq), pred_files.get(seq))):
            if table is not None and len(table) and table.frame.max() > info.length:
                raise InputError(source, f"frame {table.frame.max()} lies beyond seqLength {info.length} of {seq}")
        infos[seq] = info
    scoring = evaluator(protocol)
    for seq, table in gt.items():
        info = infos.get(seq)
        size = None if info is None or info.width is None else (info.width, info.height)
        if size is None and scoring.uses_image_size:
            print(
                f"egoeval score-tracks: {seq}: no imWidth/imHeight (<seq>/seqinfo.ini): ground-truth boxes outside the "
                "image are kept, those under 1 px dropped",
                file=sys.stderr,
            )
        gt[seq] = scoring.dataset_ground_truth(table, size)
    return scoring.evaluate(gt, pred, seq_lengths={seq: info.length for seq, info in infos.items()})


def format_table(results: dict[str, dict]) -> str:
    """One aligned row per sequence and one for COMBINED; percentages with 3 decimals (``nan`` where undefined)."""
    rows = [("Sequence", *TABLE, *TABLE_COUNTS)]
    named = [*sorted(results["sequences"].items()), ("COMBINED", results["COMBINED"])]
    for name, summary in named:
        percent = ("nan" if summary.get(k) is None else f"{summary[k]:.3f}" for k in TABLE)
        rows.append((name, *percent, *(str(summary[k]) for k in TABLE_COUNTS)))
    widths = [max(len(row[k]) for row in rows) for k in range(len(rows[0]))]
    lines = [
        "  ".join(
            cell.ljust(width) if k == 0 else cell.rjust(width)
            for k, (cell, width) in enumerate(zip(row, widths, strict=True))
        )
        for row in rows
    ]
    return "\n".join(lines)
