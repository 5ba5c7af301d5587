"""Stage egonormia_sample: render the bundled sample's synthetic context videos (egoeval.egonormia.sample).

``--write-manifest`` pins clips.json and every video in the sample's manifest; ``--balance-positions [--seed N]``
rewrites clips.json with the options spread evenly over the five positions.
"""

from __future__ import annotations

from egoeval.core.settings import benchmark_settings
from egoeval.core.stage_shell import run_stage, stage_parser
from egoeval.egonormia.sample import CLIPS_FILE, MANIFEST, run_sample
from egoeval.egonormia.settings import EgoNormiaSettings


def main(argv: list[str] | None = None) -> int:
    parser = stage_parser(__doc__)
    parser.add_argument("--write-manifest", action="store_true", help=f"rewrite {MANIFEST} from the files on disk")
    parser.add_argument(
        "--balance-positions", action="store_true", help=f"rewrite {CLIPS_FILE} with options spread over positions"
    )
    parser.add_argument("--seed", type=int, default=0, help="--balance-positions: the seed (default 0)")
    args = parser.parse_args(argv)
    return run_stage(
        lambda: run_sample(benchmark_settings("egonormia", EgoNormiaSettings).sample, **vars(args)),
        benchmark="egonormia",
    )


if __name__ == "__main__":
    raise SystemExit(main())
