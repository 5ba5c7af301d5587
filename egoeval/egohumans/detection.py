"""EgoHumans detections: the boxes the trackers start from, for each detection mode.

``gt``: the ground-truth boxes (ignored ones left out) with score 1, nothing more (no ids, no 3D), which isolates
association. ``official``: the released ``detections_<modality>.pkl`` -- EgoHumans' "public detections", which are
ground-truth boxes with score 1.0 (the official script calls them "ground truth bbox and 3D using midas"; the
published table used YOLOX-X boxes instead): their boxes and scores, and beside them ``released_depth`` (their
``roots_3d`` decoded: a relative depth, not metres), which trackers ignore; where the pickle holds the annotation's
boxes, ``gt`` and ``official`` feed a tracker the same inputs. Only ``file`` carries metric roots (the user's own
detector's). ``file``: detections the user brings (``egohumans.fetch.detections``: a pickle in any layout mmtracking's
MOTChallenge dataset accepts, det.txt files or a parquet table). ``yolo``: an ultralytics YOLO model over the frames,
person class only, in batches, from a local weights file (never a download) or the untrained architecture
(``arch-only``). Pickles are read with the restricted unpickler only. Used by the egohumans_detect stage
(``write_detections``: ``data/egohumans/detections/<mode>.parquet``, columns sequence, frame, x, y, w, h, score) and
by its sharded form (egohumans/scale_out.py).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
from tqdm import tqdm

from egoeval.core.errors import InputError
from egoeval.core.io.atomic import write_parquet
from egoeval.core.io.bounded import read_json, read_parquet
from egoeval.core.io.paths import data_roots
from egoeval.egohumans.artifacts import DETECTIONS, FETCHED, IMAGES
from egoeval.egohumans.formats import (
    DETECTION_COLUMNS,
    DETECTION_MODES,
    empty_detections,
    read_detections_parquet,
    sort_detections,
)
from egoeval.egohumans.settings import DetectSettings, EgoHumansSettings
from egoeval.tracking.mot import read_mot
from egoeval.video import read_pinned_image

OUT_DIR = DETECTIONS
ARCH_ONLY = "arch-only"
PERSON = 0  # COCO class id of "person"


def _sequences(fetched: Path) -> dict[str, Any]:
    path = fetched / "sequences.json"
    if not path.is_file():
        raise InputError(path, "file not found (run the egohumans_fetch stage first)")
    summary = read_json(path)
    if not isinstance(summary, dict) or not isinstance(summary.get("sequences"), list):
        raise InputError(path, "not a sequences summary (run the egohumans_fetch stage again)")
    return summary


def gt_detections(fetched: Path) -> pd.DataFrame:
    """Ground-truth boxes as detections with score 1 (read_mot drops the boxes marked ignore, conf 0), nothing more:
    no ids, no 3D (NaN roots and released depth), in the canonical order (by box, never by id)."""
    parts = []
    for seq in _sequences(fetched)["sequences"]:
        gt = read_mot(fetched / "gt" / f"{seq['name']}.txt", kind="gt")
        parts.append(
            pd.DataFrame(
                {
                    "sequence": pd.array([seq["name"]] * len(gt), dtype="str"),
                    "frame": gt["frame"].to_numpy(np.int64),
                    **{c: gt[c].to_numpy(np.float64) for c in ("x", "y", "w", "h")},
                    "score": np.ones(len(gt)),
                }
            )
        )
    return sort_detections(pd.concat([empty_detections(), *parts], ignore_index=True))


def fetched_detections(fetched: Path, kind: str) -> pd.DataFrame:
    """The detections fetch read for mode ``official`` (the released pickle) or ``file`` (the user's)."""
    summary = _sequences(fetched)
    if not summary.get("detections", {}).get(kind):
        modality, annotation = summary.get("modality"), summary.get("annotation")
        pickles = " or ".join(f"detections_{m}.pkl" for m in ([modality] if isinstance(modality, str) else modality))
        where = annotation if isinstance(annotation, str) else " / ".join(map(str, annotation or []))
        hint = (
            f"no {pickles} beside {where} under the data root"
            if kind == "official"
            else "egohumans.fetch.detections is null: name your detections file (relative to the data root)"
        )
        raise InputError(fetched / "sequences.json", f"--mode {kind} has no detections: {hint}")
    return read_detections_parquet(fetched / f"detections_{kind}.parquet")


def load_yolo(settings: DetectSettings, arch_only: bool = False) -> Any:
    """The YOLO model from a local weights file, or the untrained architecture (``yolo_model``); never a download."""
    os.environ.setdefault("YOLO_OFFLINE", "1")
    weights = settings.yolo_weights
    if arch_only or weights == ARCH_ONLY:
        import torch
        from ultralytics import YOLO

        torch.manual_seed(0)
        return YOLO(settings.yolo_model)
    if not weights:
        raise InputError(
            "egohumans.detect.yolo_weights",
            "not set: give the path of a local YOLO weights file (.pt; nothing is "
            f"downloaded), or '{ARCH_ONLY}' (or --arch-only) for the untrained architecture",
        )
    if not Path(weights).is_file():
        raise InputError(weights, "egohumans.detect.yolo_weights names no such file (weights are never downloaded)")
    from ultralytics import YOLO

    return YOLO(str(weights))


def read_images(fetched: Path) -> pd.DataFrame:
    """The frames listed by fetch (sequence, frame, path, sha256), in the stage's order: by sequence, then frame."""
    images = read_parquet(fetched / "images.parquet", ["sequence", "frame", "path", "sha256"])
    return images.sort_values(["sequence", "frame"]).reset_index(drop=True)


def detect_images(model: Any, images: pd.DataFrame, settings: DetectSettings, data_root: Path) -> pd.DataFrame:
    """Run ``model`` over the given frames (sequence, frame, path, sha256; each read only inside ``data_root``,
    egohumans.fetch.path, as every pinned frame is), in their order and in batches of ``yolo_batch``.

    Person boxes only, as a sorted detections table. A frame's boxes depend on the batch it is predicted in, so
    callers that split the work (egohumans/scale_out.py) pass whole batches of the stage's order.
    """
    batch, roots = settings.yolo_batch, data_roots(data_root)
    parts = []
    with tqdm(total=len(images), desc="yolo", unit="frame") as progress:
        for start in range(0, len(images), batch):
            chunk = images.iloc[start : start + batch]
            frames = [
                read_pinned_image(row.path, row.sha256, roots, IMAGES, f"{row.sequence} frame {row.frame}")
                for row in chunk.itertuples(index=False)
            ]
            results = model.predict(
                frames,
                imgsz=settings.yolo_imgsz,
                conf=settings.yolo_conf,
                classes=[PERSON],
                verbose=False,
            )
            for (sequence, frame), result in zip(
                chunk[["sequence", "frame"]].itertuples(index=False), results, strict=True
            ):
                boxes = result.boxes
                keep = boxes.cls.cpu().numpy() == PERSON
                xyxy = boxes.xyxy.cpu().numpy().astype(np.float64)[keep]
                parts.append(
                    pd.DataFrame(
                        {
                            "sequence": pd.array([sequence] * len(xyxy), dtype="str"),
                            "frame": np.full(len(xyxy), frame, dtype=np.int64),
                            "x": xyxy[:, 0],
                            "y": xyxy[:, 1],
                            "w": xyxy[:, 2] - xyxy[:, 0],
                            "h": xyxy[:, 3] - xyxy[:, 1],
                            "score": boxes.conf.cpu().numpy().astype(np.float64)[keep],
                        }
                    )
                )
            progress.update(len(chunk))
    return sort_detections(pd.concat([empty_detections(), *parts], ignore_index=True))


def yolo_detections(fetched: Path, settings: DetectSettings, data_root: Path, arch_only: bool = False) -> pd.DataFrame:
    """Run YOLO over every frame listed by fetch (``detect_images`` with the model of the settings)."""
    return detect_images(load_yolo(settings, arch_only), read_images(fetched), settings, data_root)


def detections(
    mode: str, fetched: Path, settings: DetectSettings, data_root: Path, arch_only: bool = False
) -> pd.DataFrame:
    """The detections of ``mode`` (one of DETECTION_MODES) for the fetched sequences (frames read, for ``yolo``, only
    inside the data root ``data_root``)."""
    if mode == "gt":
        return gt_detections(fetched)
    if mode in ("official", "file"):
        return fetched_detections(fetched, mode)
    if mode == "yolo":
        return yolo_detections(fetched, settings, data_root, arch_only)
    raise ValueError(f"detection mode must be one of {DETECTION_MODES}, got {mode!r}")


def detect(
    mode: str, fetched: Path, out_path: Path, settings: DetectSettings, data_root: Path, arch_only: bool = False
) -> pd.DataFrame:
    """Build the detections of ``mode`` and write them to ``out_path``."""
    table = detections(mode, fetched, settings, data_root, arch_only)
    write_parquet(out_path, table[DETECTION_COLUMNS])
    return table


def write_detections(settings: EgoHumansSettings, mode: str, arch_only: bool = False) -> None:
    """The egohumans_detect stage: ``mode``'s boxes over the fetched sequences -> ``OUT_DIR/<mode>.parquet``."""
    table = detect(mode, FETCHED, OUT_DIR / f"{mode}.parquet", settings.detect, Path(settings.fetch.path), arch_only)
    print(f"{mode}: {len(table)} boxes over {table['sequence'].nunique()} sequences")
