"""Stage egonormia_fetch: pinned EgoNormia items and media -> data/egonormia/fetched/ (egoeval.egonormia.fetching).

``--write-manifest FOLDER [--media PATH] [--manifest PATH]`` pins a local folder for any dataset and split instead.
"""

from __future__ import annotations

from pathlib import Path

from egoeval.core.settings import benchmark_settings
from egoeval.core.stage_shell import run_stage, stage_parser
from egoeval.egonormia.fetching import pin_folder, write_fetched
from egoeval.egonormia.settings import EgoNormiaSettings


def main(argv: list[str] | None = None) -> int:
    parser = stage_parser(__doc__)
    parser.add_argument("--write-manifest", metavar="FOLDER", type=Path, help="pin a local folder instead of fetching")
    parser.add_argument("--manifest", type=Path, help="for --write-manifest: its path (default FOLDER/manifest.sha256)")
    parser.add_argument("--media", type=Path, help="with --write-manifest: the media folder (default FOLDER)")
    args = parser.parse_args(argv)
    if args.write_manifest is not None:  # a tool mode: params.yaml is not read
        return run_stage(lambda: pin_folder(args.write_manifest, args.manifest, args.media), check_params=False)
    return run_stage(
        lambda: write_fetched(benchmark_settings("egonormia", EgoNormiaSettings).fetch), benchmark="egonormia"
    )


if __name__ == "__main__":
    raise SystemExit(main())
