"""Stage egonormia_clip_logs: every clip's log, a page each in reports/clips/ (and their index), linked from the report.

Per setting and model: the messages sent (rebuilt by the recorded protocol, checked against the recorded request
keys), the raw replies, the parsed answers and the gold; what each holds: egoeval.egonormia.clip_log
(`egoeval show CLIP` prints one).
"""

from __future__ import annotations

from egoeval.core.settings import benchmark_settings
from egoeval.core.stage_shell import run_stage, stage_parser
from egoeval.egonormia.clip_log import write_clip_logs
from egoeval.egonormia.settings import EgoNormiaSettings


def main(argv: list[str] | None = None) -> int:
    stage_parser(__doc__).parse_args(argv)
    return run_stage(lambda: write_clip_logs(benchmark_settings("egonormia", EgoNormiaSettings)), benchmark="egonormia")


if __name__ == "__main__":
    raise SystemExit(main())
