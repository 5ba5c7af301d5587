"""The ``egoeval`` console script. Each subcommand lives with the code it drives.

A subcommand's module builds its argument parser before it imports anything heavy (pandas, numpy, pydantic...:
they are imported where the work needs them), so that ``egoeval COMMAND --help`` answers at once
(tests/test_cli.py checks what ``--help`` loads; bench/cli_help.py times it).
"""

from __future__ import annotations

import difflib
import importlib
import os
import signal
import sys
from pathlib import Path

from egoeval.core.errors import ParamsError, os_error_exit

# subcommand -> (module, function, one-line help); function(argv: list[str]) -> int. Each benchmark adds its own
# (``Benchmark.commands``).
SHARED_COMMANDS: dict[str, tuple[str, str, str]] = {
    "check-params": ("egoeval.cli", "check_params", "validate the params (types, ranges, unknown keys)"),
    "audit": ("egoeval.audit", "main", "check that reported numbers reproduce from pinned inputs"),
    "compare": ("egoeval.compare", "main", "print reported numbers beside the published ones"),
    "report": ("egoeval.report_page", "main", "write every benchmark's results as one self-contained HTML page"),
}


def commands() -> dict[str, tuple[str, str, str]]:
    """Every subcommand: each benchmark's, then the shared ones."""
    from egoeval.core.benchmarks import registry

    own = {name: command for b in registry().values() for name, command in b.commands.items()}
    return {**own, **SHARED_COMMANDS}


def usage() -> str:
    lines = ["usage: egoeval COMMAND [ARGS...]", "       egoeval --version", "", "commands:"]
    lines += [f"  {name:<14} {help_}" for name, (_, _, help_) in commands().items()]
    lines += ["", "egoeval COMMAND --help: the command's arguments"]
    return "\n".join(lines)


def version() -> str:
    """The installed package's version (its metadata: pyproject.toml's ``version``)."""
    from importlib.metadata import version

    return version("egoeval")


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if not argv or argv[0] in {"-h", "--help"}:
        print(usage())
        return 0 if argv else 2
    if argv[0] == "--version":
        print(f"egoeval {version()}")
        return 0
    name, rest = argv[0], argv[1:]
    known = commands()
    if name not in known:
        close = difflib.get_close_matches(name, known, n=1)
        if close:
            print(f"egoeval: unknown command {name!r}: did you mean {close[0]!r}? (egoeval --help)", file=sys.stderr)
        else:
            print(f"egoeval: unknown command {name!r}\n\n{usage()}", file=sys.stderr)
        return 2
    if sys.stdout is None:  # started with stdout closed (`>&-`): the results would go nowhere, silently
        print(f"egoeval {name}: standard output is closed: redirect it to a file instead", file=sys.stderr)
        return 2
    module, function, _ = known[name]
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


def check_params(argv: list[str]) -> int:
    """`egoeval check-params [PARAMS]`: validate the params file; exit 0 when valid, 2 with every error otherwise.

    It lives here, not in egoeval.core.settings, so that its `--help` does not import pydantic."""
    import argparse

    parser = argparse.ArgumentParser(prog="egoeval check-params", description=check_params.__doc__.splitlines()[0])
    parser.add_argument("params", type=Path, nargs="?", help="default: the params file of this folder's project")
    given = parser.parse_args(argv).params
    from egoeval.core.io.paths import project_root
    from egoeval.core.settings import load_settings, params_file

    path = given or params_file(project_root())  # from a subfolder too, as DVC finds the project

    try:
        load_settings(path)
    except ParamsError as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    print(f"{path}: ok")
    return 0


def _drop_stdout() -> None:
    """Point stdout at /dev/null, so that the interpreter's last flush cannot fail again at exit."""
    os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())


if __name__ == "__main__":
    sys.exit(main())
