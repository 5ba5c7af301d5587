"""Stage egohumans_fetch: check the pinned EgoHumans inputs and normalise them.

Source ``sample`` (the bundled sample) or ``local`` (a folder in the same layout): ``tracking_ego_rgb.json`` (the
COCO-video annotation), the frames it names, and public detections as ``detections.pkl`` (EgoHumans' pickle,
loaded with a restricted unpickler) or else ``det/<seq>.txt`` (MOTChallenge). Every file read, frames included, is
checked against the sha256 manifest first. Written to ``data/egohumans/fetched`` (replaced as a whole):

- ``gt/<seq>.txt`` ground truth, MOTChallenge text,
- ``detections_file.parquet`` the public detections (sequence, frame, x, y, w, h, score; empty when none),
- ``images.parquet`` sequence, frame, path (the frame at its source location; frames are not copied), width,
  height, extrinsics,
- ``sequences.json`` names, lengths, fps, sizes, and where the public detections came from.
"""

from __future__ import annotations

import argparse
import os
from pathlib import Path

import numpy as np
import pandas as pd
from tqdm import tqdm

from egoeval.egohumans.formats import (
    DETECTION_COLUMNS,
    check_detections_known,
    empty_detections,
    read_det_txt,
    read_detection_pickle,
    read_tracking_annotation,
    sort_detections,
)
from egoeval.io import (
    PARAMS_FILE,
    InputError,
    load_params,
    read_manifest,
    replaced_dir,
    sha256_file,
    write_json,
    write_parquet,
)
from egoeval.mot import write_mot
from egoeval.stage import run_stage

OUT_DIR = Path("data/egohumans/fetched")
ANNOTATION = "tracking_ego_rgb.json"
DETECTIONS_PICKLE = "detections.pkl"
DETECTIONS_TXT = "det"
SOURCES = ("sample", "local")


def _verify(manifest: Path, root: Path, names: list[str], desc: str) -> None:
    """Each file must exist, be pinned and match its sha256."""
    pinned = read_manifest(manifest)
    for name in tqdm(sorted(names), desc=desc, unit="file", disable=len(names) < 100):
        if name not in pinned:
            raise InputError(manifest, f"{name} is not pinned in the manifest")
        if not (root / name).is_file():
            raise InputError(root / name, "missing (the annotation or the manifest names it)")
        actual = sha256_file(root / name)
        if actual != pinned[name]:
            raise InputError(root / name, f"sha256 {actual} differs from the manifest's {pinned[name]}")


def fetch(
    source: str, path: str | os.PathLike[str], manifest: str | os.PathLike[str] | None, out_dir: str | os.PathLike[str]
) -> dict[str, object]:
    """Verify and normalise the inputs in ``path`` into ``out_dir``; return the sequences summary."""
    if source not in SOURCES:
        raise InputError(PARAMS_FILE, f"egohumans.fetch.source must be one of {SOURCES}, got {source!r}")
    if not manifest:
        raise InputError(PARAMS_FILE, "egohumans.fetch.manifest must name the sha256 manifest pinning the inputs")
    root, manifest, out_dir = Path(path), Path(manifest), Path(out_dir)
    if not manifest.is_file():
        raise InputError(manifest, "the sha256 manifest (egohumans.fetch.manifest) does not exist")

    _verify(manifest, root, [ANNOTATION], "annotation")
    annotation = read_tracking_annotation(root / ANNOTATION)
    _verify(manifest, root, annotation.images["file_name"].tolist(), "verifying frames")

    txt_files = sorted((root / DETECTIONS_TXT).glob("*.txt"))
    if (root / DETECTIONS_PICKLE).is_file():
        _verify(manifest, root, [DETECTIONS_PICKLE], "detections")
        detections = read_detection_pickle(root / DETECTIONS_PICKLE, annotation.images)
        detections_source = DETECTIONS_PICKLE
    elif txt_files:
        _verify(manifest, root, [p.relative_to(root).as_posix() for p in txt_files], "detections")
        known = set(annotation.sequences["name"])
        for txt in txt_files:
            if txt.stem not in known:
                raise InputError(txt, f"no sequence {txt.stem!r} in {ANNOTATION}")
        detections = sort_detections(pd.concat([read_det_txt(p, p.stem) for p in txt_files], ignore_index=True))
        detections_source = DETECTIONS_TXT
    else:
        detections = empty_detections()
        detections_source = None
    check_detections_known(detections, annotation.images, root / (detections_source or DETECTIONS_PICKLE))

    images = annotation.images
    image_table = pd.DataFrame(
        {
            "sequence": images["sequence"],
            "frame": images["frame"],
            "path": [(root / name).as_posix() for name in images["file_name"]],
            "width": images["width"],
            "height": images["height"],
            "extrinsics": images["extrinsics"],
        }
    )
    summary: dict[str, object] = {
        "source": source,
        "detections": detections_source,
        "sequences": [
            {
                "name": row.name,
                "length": int(row.length),
                "images": int(row.images),
                "fps": None if np.isnan(row.fps) else float(row.fps),
                "width": int(row.width),
                "height": int(row.height),
            }
            for row in annotation.sequences.itertuples(index=False)
        ],
    }

    with replaced_dir(out_dir) as work:
        (work / "gt").mkdir()
        for name, gt in annotation.ground_truth.items():
            write_mot(work / "gt" / f"{name}.txt", gt)
        write_parquet(work / "detections_file.parquet", detections[DETECTION_COLUMNS])
        write_parquet(work / "images.parquet", image_table)
        write_json(work / "sequences.json", summary)
    return summary


def main(argv: list[str] | None = None) -> int:
    argparse.ArgumentParser(description=__doc__.splitlines()[0]).parse_args(argv)

    def body() -> None:
        params = load_params("egohumans.fetch")
        summary = fetch(params["source"], params["path"], params.get("manifest"), OUT_DIR)
        print(f"fetched {len(summary['sequences'])} sequences (detections: {summary['detections']}) to {OUT_DIR}")

    return run_stage(body)


if __name__ == "__main__":
    raise SystemExit(main())
