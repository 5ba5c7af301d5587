"""Stage egonormia_frames: one JPEG frames strip per clip, the image of the video setting.

``egonormia.frames.source``: ``dataset`` copies the dataset's pinned strip; ``video`` renders it from the context
video. Outputs data/egonormia/frames/<id>.jpg and its index.parquet: egoeval.egonormia.frames.
"""

from __future__ import annotations

from egoeval.core.settings import benchmark_settings
from egoeval.core.stage_shell import run_stage, stage_parser
from egoeval.egonormia.frames import write_frames
from egoeval.egonormia.settings import EgoNormiaSettings


def main(argv: list[str] | None = None) -> int:
    stage_parser(__doc__).parse_args(argv)
    return run_stage(
        lambda: write_frames(benchmark_settings("egonormia", EgoNormiaSettings).frames), benchmark="egonormia"
    )


if __name__ == "__main__":
    raise SystemExit(main())
