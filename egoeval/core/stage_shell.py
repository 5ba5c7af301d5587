"""The thin CLI shell every stage shares: exit codes that say whether a retry can help, and a prompt stop.

Every stage first rolls back an output commit a killed run left half done and removes what it left
(``egoeval.core.io.commit.recover_outputs``), then checks params.yaml whole.

A stage stopped by SIGINT (Ctrl-C) or SIGTERM stops at once: what it had staged is removed (the last good outputs
stay), one line says what was kept, and it exits 128 + the signal's number without waiting for calls in flight.
Worker processes it started die with it (``die_with_parent``), even when it is killed with SIGKILL.
A command's help is its docstring as plain text (``help_text``); a stage's parser is ``stage_parser``.
"""

from __future__ import annotations

import argparse
import os
import re
import signal
import sys
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from egoeval.core.errors import (
    EXIT_BAD_INPUT,
    EXIT_OK,
    EXIT_TRANSIENT,
    InputError,
    Interrupted,
    PermanentFailure,
    TransientFailure,
    os_error_exit,
)
from egoeval.core.io.commit import recover_outputs

KEPT: list[Callable[[], str]] = []
"""What an interrupted run keeps beyond the last good outputs: each returns a phrase, or "" when it kept nothing (the
response cache registers its answers here)."""


def help_text(doc: str) -> str:
    """A docstring as help text: reStructuredText literals (x between double backticks) and roles (``:func:``,
    ``:class:``...) shown as `x`."""
    doc = re.sub(r":[a-z]+:`~?([^`]+)`", lambda m: f"`{m[1].rsplit('.', 1)[-1] if '~' in m[0] else m[1]}`", doc)
    return re.sub(r"``(.+?)``", r"`\1`", doc, flags=re.DOTALL)


def stage_parser(doc: str | None) -> argparse.ArgumentParser:
    """A stage's argument parser: its docstring is the help's description; the usage line names the command as it was
    run (``python -m stages.<benchmark>.<stage>``)."""
    spec = getattr(sys.modules.get("__main__"), "__spec__", None)
    return argparse.ArgumentParser(
        prog=f"python -m {spec.name}" if spec is not None else None,
        description=help_text(doc or ""),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )


def command_env(**extra: str) -> dict[str, str]:
    """The environment for running stage commands and dvc: this interpreter's bin folder first on PATH."""
    env = {**os.environ, **extra}
    env["PATH"] = os.pathsep.join([str(Path(sys.executable).parent), env.get("PATH", "")])
    return env


def _interrupt(signum: int, frame: object) -> None:
    for ignored in (signal.SIGINT, signal.SIGTERM):  # the first signal stops the stage; later ones change nothing
        signal.signal(ignored, signal.SIG_IGN)
    raise Interrupted(signum)


@contextmanager
def signals_interrupt() -> Iterator[None]:
    """Within the block, SIGINT and SIGTERM raise Interrupted (in the main thread; elsewhere nothing changes)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = {signum: signal.signal(signum, _interrupt) for signum in (signal.SIGINT, signal.SIGTERM)}
    try:
        yield
    except Interrupted:
        raise  # the signals stay ignored: a second Ctrl-C (DVC forwards one) must not kill the stage mid-message
    except BaseException:
        _restore(previous)
        raise
    _restore(previous)


def _restore(handlers: dict[int, Any]) -> None:
    """Put back the signal handlers the block replaced."""
    for signum, handler in handlers.items():
        signal.signal(signum, handler)


def _stop(interrupted: Interrupted, started: float) -> None:
    """Say what an interrupted stage kept, then exit at once: threads still waiting on the network are not waited
    for (the response cache commits every answer as it arrives, so a kill loses nothing finished)."""
    for signum in (signal.SIGINT, signal.SIGTERM):
        signal.signal(signum, signal.SIG_IGN)  # a second Ctrl-C does not cut this message short
    kept = ["the last good outputs (nothing was written)", *filter(None, (note() for note in KEPT))]
    name = signal.Signals(interrupted.signum).name
    seconds = time.monotonic() - started
    print(f"error: interrupted by {name} after {seconds:.0f} s: stopped; kept {'; '.join(kept)}", file=sys.stderr)
    for stream in (sys.stdout, sys.stderr):
        try:
            if stream is not None:
                stream.flush()
        except OSError:
            pass
    os._exit(128 + interrupted.signum)


def run_stage(body: Callable[[], object], benchmark: str | None = None, *, check_params: bool = True) -> int:
    """Validate params.yaml (unless ``check_params`` is False: a tool mode; only ``benchmark``'s section when given:
    the params stage checks the whole file first), then run a stage body; map a failure to an exit code and a one-line
    message on stderr. SIGINT and SIGTERM stop it at once (see the module docstring)."""
    from egoeval.core.settings import load_settings

    started = time.monotonic()
    try:
        with signals_interrupt():
            recover_outputs()  # a commit a killed run left half done is rolled back before anything reads it
            if check_params:
                load_settings(only=benchmark)  # a bad key stops the stage before it does any work
            result = body()
    except Interrupted as interrupted:
        _stop(interrupted, started)
    except InputError as error:
        print(f"error: bad input: {error}", file=sys.stderr)
        return EXIT_BAD_INPUT
    except PermanentFailure as error:
        print(f"error: permanent failure, not retried: {error}", file=sys.stderr)
        return EXIT_BAD_INPUT
    except TransientFailure as error:
        print(f"error: transient failure: {error}", file=sys.stderr)
        return EXIT_TRANSIENT
    except OSError as error:
        code, message = os_error_exit(error)
        print(f"error: {message}", file=sys.stderr)
        return code
    return int(result) if isinstance(result, int) else EXIT_OK


def die_with_parent(parent: int) -> None:
    """In a worker process: be killed (SIGKILL) as soon as ``parent`` dies, however it dies (Linux's
    PR_SET_PDEATHSIG). A pool's initializer, so that no worker outlives its stage."""
    if sys.platform.startswith("linux"):
        import ctypes

        pr_set_pdeathsig = 1
        ctypes.CDLL(None, use_errno=True).prctl(pr_set_pdeathsig, signal.SIGKILL)
    if os.getppid() != parent:  # the parent died before the line above took effect
        os._exit(1)
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C stops the stage, which stops its workers
