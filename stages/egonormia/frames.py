"""Stage egonormia_frames: one JPEG frames strip per clip, the image of the video setting.

``egonormia.frames.source``: ``dataset`` copies the dataset's pinned ``frame_all_prev.jpg`` (fetched as
``strips/<id>.jpg``), the image the official runs send; ``video`` renders it from the context video
``video_prev.mp4``: frames at ``fps``, each ``frame_height`` px high, left to right, scaled down only when the
strip would be wider than ``max_width``; ``workers`` clips decode in parallel (processes).
A missing or broken file fails only its own clip: the index records the reason and the other clips go on.
Outputs: data/egonormia/frames/<id>.jpg and data/egonormia/frames/index.parquet
(id, image, n_frames, times, video_fps, video_frames, width, height, error).
"""

from __future__ import annotations

import argparse
import sys

from egoeval.egonormia.artifacts import FETCHED, FRAMES, ITEMS, read_table
from egoeval.egonormia.frames import extract_frames
from egoeval.egonormia.settings import EgoNormiaSettings, FramesSettings
from egoeval.io import replaced_dir, write_parquet
from egoeval.settings import benchmark_settings
from egoeval.stage import run_stage


def main(argv: list[str] | None = None) -> int:
    argparse.ArgumentParser(description=__doc__).parse_args(argv)

    def run() -> None:
        settings: FramesSettings = benchmark_settings("egonormia", EgoNormiaSettings).frames
        items = read_table(ITEMS, ["id", "video", "strip"])
        with replaced_dir(FRAMES) as work:
            index = extract_frames(items, FETCHED, work, settings)
            write_parquet(work / "index.parquet", index)
        failed = index[index["error"] != ""]
        for row in failed.itertuples(index=False):
            print(f"frames: {row.id}: {row.error}", file=sys.stderr)
        print(f"frames: {len(index) - len(failed)} of {len(index)} clips extracted", file=sys.stderr)

    return run_stage(run, benchmark="egonormia")


if __name__ == "__main__":
    raise SystemExit(main())
