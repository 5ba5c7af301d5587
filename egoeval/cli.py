"""The ``egoeval`` console script. Each subcommand lives with the code it drives."""

from __future__ import annotations

import importlib
import os
import signal
import sys

# subcommand -> (module, function, one-line help); function(argv: list[str]) -> int
COMMANDS: dict[str, tuple[str, str, str]] = {
    "score-norms": (
        "egoeval.egonormia.rescore",
        "main",
        "rescore EgoNormia predictions in the official eval-JSON layout",
    ),
    "score-tracks": ("egoeval.metrics.cli", "main", "score MOTChallenge tracker output (CLEAR, Identity, HOTA)"),
    "check-params": ("egoeval.settings", "check_params_main", "validate params.yaml (types, ranges, unknown keys)"),
    "audit": ("egoeval.audit", "main", "check that reported numbers reproduce from pinned inputs"),
    "compare": ("egoeval.compare", "main", "print reported numbers beside the published ones"),
}


def usage() -> str:
    lines = ["usage: egoeval COMMAND [ARGS...]", "", "commands:"]
    lines += [f"  {name:<14} {help_}" for name, (_, _, help_) in COMMANDS.items()]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if not argv or argv[0] in {"-h", "--help"}:
        print(usage())
        return 0 if argv else 2
    name, rest = argv[0], argv[1:]
    if name not in COMMANDS:
        print(f"egoeval: unknown command {name!r}\n\n{usage()}", file=sys.stderr)
        return 2
    module, function, _ = COMMANDS[name]
    try:
        return int(getattr(importlib.import_module(module), function)(rest) or 0)
    except BrokenPipeError:  # `egoeval ... | head`: the reader left; say nothing more
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 128 + signal.SIGPIPE


if __name__ == "__main__":
    sys.exit(main())
