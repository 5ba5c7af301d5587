"""Every error egoeval raises on purpose, and the exit status each one means; every layer imports it, it imports none.

- **2** (bad input): retrying cannot help; the message names the file and row, the params key or the endpoint.
- **75** (EX_TEMPFAIL, transient): a later retry may succeed (network, rate limits, 5xx, a full disk).
"""

from __future__ import annotations

import errno
import os
import signal

EXIT_OK = 0
EXIT_BAD_INPUT = 2  # retrying cannot help: fix the named file, row, param or endpoint
EXIT_TRANSIENT = 75  # EX_TEMPFAIL: a retry may succeed (network, rate limits, 5xx, a full disk)

FULL = {errno.ENOSPC, errno.EDQUOT, errno.EFBIG}  # no room for a write: a retry after freeing space can succeed


class InputError(ValueError):
    """Bad input: the message names the file (and the row, where there is one)."""

    def __init__(self, path: str | os.PathLike[str], message: str, row: object | None = None) -> None:
        where = f"{path}" if row is None else f"{path}, row {row}"
        super().__init__(f"{where}: {message}")
        self.path = str(path)
        self.row = row


class ParamsError(InputError):
    """The params file is invalid (``egoeval.settings``); the message lists every bad key (exit 2: nothing runs)."""


class UnknownName(ValueError):
    """A name no registry entry has (``egoeval.registry``): the message names it, its kind and the known names."""

    def __init__(self, kind: str, name: object, known: tuple[str, ...]) -> None:
        super().__init__(f"unknown {kind} {name!r} (known: {', '.join(known) or 'none'})")
        self.kind = kind
        self.name = name
        self.known = known


class PermanentFailure(RuntimeError):
    """A stage failed in a way no retry can mend (a wrong key, URL or endpoint); the message says what to fix."""


class TransientFailure(RuntimeError):
    """A stage failed for reasons a later retry may not meet (e.g. too many model calls failed transiently)."""


class Interrupted(BaseException):
    """SIGINT or SIGTERM reached the stage (a BaseException, like KeyboardInterrupt: nothing catches it by mistake)."""

    def __init__(self, signum: int) -> None:
        super().__init__(signal.Signals(signum).name)
        self.signum = signum


def os_error_exit(error: OSError) -> tuple[int, str]:
    """(exit code, one-line message) for an OSError: no room to write is transient (75), anything else is bad input
    (2: a permission, a read-only disk, a folder where a file should be)."""
    where = f"{error.filename}: " if error.filename else ""
    reason = error.strerror or str(error)
    if error.errno in FULL:
        room = "raise the file size limit (ulimit -f)" if error.errno == errno.EFBIG else "free space on the disk"
        return EXIT_TRANSIENT, f"transient failure: {where}{reason}: {room} and run again"
    return EXIT_BAD_INPUT, f"bad input: {where}{reason}"
