"""The thin CLI shell every stage shares: exit codes that say whether a retry can help."""

from __future__ import annotations

import os
import sys
from collections.abc import Callable
from pathlib import Path

from egoeval.io import PARAMS_FILE, InputError

EXIT_OK = 0
EXIT_BAD_INPUT = 2  # retrying cannot help: fix the named file, row, param or endpoint
EXIT_TRANSIENT = 75  # EX_TEMPFAIL: a retry may succeed (network, rate limits, 5xx)


class TransientFailure(RuntimeError):
    """A stage failed for reasons a later retry may not meet (e.g. too many model calls failed transiently)."""


class PermanentFailure(RuntimeError):
    """A stage failed in a way no retry can mend (a wrong key, URL or endpoint); the message says what to fix."""


def command_env(**extra: str) -> dict[str, str]:
    """The environment for running stage commands and dvc: this interpreter's bin folder first on PATH."""
    env = {**os.environ, **extra}
    env["PATH"] = os.pathsep.join([str(Path(sys.executable).parent), env.get("PATH", "")])
    return env


def run_stage(body: Callable[[], object], params: str | os.PathLike[str] | None = PARAMS_FILE) -> int:
    """Validate params.yaml whole (unless ``params`` is None: a tool mode), then run a stage body; map a failure to
    an exit code and a one-line message on stderr."""
    from egoeval.settings import load_settings

    try:
        if params is not None:
            load_settings(params)  # a bad key stops every stage before it does any work
        result = body()
    except InputError as error:
        print(f"error: bad input: {error}", file=sys.stderr)
        return EXIT_BAD_INPUT
    except PermanentFailure as error:
        print(f"error: permanent failure, not retried: {error}", file=sys.stderr)
        return EXIT_BAD_INPUT
    except TransientFailure as error:
        print(f"error: transient failure: {error}", file=sys.stderr)
        return EXIT_TRANSIENT
    return int(result) if isinstance(result, int) else EXIT_OK
