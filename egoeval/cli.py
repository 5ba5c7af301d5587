"""The ``egoeval`` console script. Each subcommand lives with the code it drives."""

from __future__ import annotations

import importlib
import os
import signal
import sys

from egoeval.errors import os_error_exit

# subcommand -> (module, function, one-line help); function(argv: list[str]) -> int
COMMANDS: dict[str, tuple[str, str, str]] = {
    "score-norms": (
        "egoeval.egonormia.rescore",
        "main",
        "rescore EgoNormia predictions in the official eval-JSON layout",
    ),
    "score-tracks": (
        "egoeval.egohumans.score_tracks",
        "main",
        "score MOTChallenge tracker output (CLEAR, Identity, HOTA)",
    ),
    "check-params": ("egoeval.settings", "check_params_main", "validate params.yaml (types, ranges, unknown keys)"),
    "audit": ("egoeval.audit", "main", "check that reported numbers reproduce from pinned inputs"),
    "compare": ("egoeval.compare", "main", "print reported numbers beside the published ones"),
    "report": ("egoeval.report", "main", "write the results of both benchmarks as one self-contained HTML page"),
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
    if sys.stdout is None:  # started with stdout closed (`>&-`): the results would go nowhere, silently
        print(f"egoeval {name}: standard output is closed: redirect it to a file instead", file=sys.stderr)
        return 2
    module, function, _ = COMMANDS[name]
    try:
        code = int(getattr(importlib.import_module(module), function)(rest) or 0)
        sys.stdout.flush()  # a full disk under a redirect fails here, not in a traceback at exit
        return code
    except BrokenPipeError:  # `egoeval ... | head`: the reader left; say nothing more
        _drop_stdout()
        return 128 + signal.SIGPIPE
    except OSError as error:
        _drop_stdout()
        code, message = os_error_exit(error)
        where = "" if error.filename else "standard output: "
        print(f"egoeval {name}: error: {where}{message}", file=sys.stderr)
        return code


def _drop_stdout() -> None:
    """Point stdout at /dev/null, so that the interpreter's last flush cannot fail again at exit."""
    os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())


if __name__ == "__main__":
    sys.exit(main())
