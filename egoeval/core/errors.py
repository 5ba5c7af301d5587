"""Every error egoeval raises on purpose, and the exit status each one means; every layer imports it, it imports
none of egoeval.

- **2** (bad input): retrying cannot help; the message names the file and row, the params key or the endpoint.
- **75** (EX_TEMPFAIL, transient): a later retry may succeed (network, rate limits, 5xx, a full disk).
"""

from __future__ import annotations

import errno
import os
import pickle
import signal
from typing import Any

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
    """The params file is invalid (``egoeval.core.settings``); the message lists every bad key (exit 2: no run)."""


class UnknownName(ValueError):
    """A name no registry entry has (``egoeval.core.registry``): the message names it, its kind and the known names."""

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


# ------------------------------------------- a model call that produced no reply: the client retries or records it


class CallFailed(Exception):
    """A model call that did not produce a reply; ``str(error)`` is a short reason safe to record."""


class CallRetryable(CallFailed):
    """Retryable: 429, 5xx, dropped connections, timeouts, malformed or empty bodies."""

    def __init__(self, reason: str, *, retry_after: float | None = None, overload: bool = False) -> None:
        super().__init__(reason)
        self.retry_after = retry_after
        self.overload = overload  # the server asked us to slow down (429/503): the limiter backs off


class CallRefused(CallFailed):
    """Not retryable, and about this one request: a refusal, a question the backend cannot answer."""


class RequestRejected(CallRefused):
    """The endpoint refused this one request (HTTP 400, 413 or 422: a content-policy refusal, an image it will not
    read; or a reply over the size cap): that request's failure, never retried. ``kind`` groups alike rejections;
    ``where`` (the endpoint) and ``fix`` make the message for when every call is rejected alike."""

    def __init__(self, reason: str, *, kind: str, where: str, fix: str) -> None:
        super().__init__(reason)
        self.kind = kind
        self.where = where
        self.fix = fix


class EndpointError(CallRefused, PermanentFailure):
    """Every call would fail the same way (a wrong key, URL, model name or endpoint): the stage stops, exit 2.

    The message names the endpoint, what it answered and the param or environment variable to fix.
    """


class EndpointDown(CallFailed, TransientFailure):
    """Nothing answers at the endpoint's address (refused, unresolvable, no answer to connect): every call would
    fail alike, so the stage stops at once, exit 75 (the server may be started later)."""


class RetriesExhausted(CallFailed):
    """A transient fault that outlasted every retry; the message says which and how many."""


class BatchError(CallRetryable, TransientFailure):
    """A Batch API call that failed in a way a later run may not (5xx, 429, a dropped connection): exit 75."""


class BatchNotFound(EndpointError):
    """A Batch API call answered 404: the batch or file it names is unknown to the endpoint."""


class ReplyDeferred(Exception):
    """Raised by the discovery ``ask``: the conversation's next call is not answered yet."""


# ------------------------------------------------------------- what data or a reference implementation refused


class UnreadableAnswer(ValueError):
    """The response holds no usable answer; ``reason`` says why."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


class ScorerInputError(ValueError):
    """An eval file the reference scorer could not read; names the clip (and model) at fault."""

    def __init__(self, message: str, clip: str | None = None, model: str | None = None) -> None:
        where = "" if clip is None else f"clip {clip!r}" + ("" if model is None else f", model {model!r}") + ": "
        super().__init__(where + message)
        self.clip = clip
        self.model = model


class ReferenceCodeError(Exception):
    """A reference implementation raised something other than its invalid-response error: recorded as an API
    error."""


class ArtifactUnavailable(Exception):
    """A clip's frames image or description cannot be had; the message (recorded as the error) says why."""


class RefusedPickleGlobal(pickle.UnpicklingError):
    """A pickle names a global the restricted unpickler does not load (only containers and NumPy arrays)."""

    def __init__(self, module: str, name: str) -> None:
        super().__init__(f"refused global {module}.{name}")
        self.qualified = f"{module}.{name}"


# ------------------------------------------------------------------------- a run of the pipeline (flows/)


class StageFailed(RuntimeError):
    """A stage's ``dvc repro`` failed; ``exit_code`` is the stage command's own code when DVC reported one."""

    def __init__(self, stage: str, exit_code: int | None, tail: str) -> None:
        super().__init__(f"stage {stage!r} failed (exit code {exit_code}):\n{tail}")
        self.stage, self.exit_code, self.tail = stage, exit_code, tail

    def __reduce__(self) -> tuple[Any, ...]:
        return StageFailed, (self.stage, self.exit_code, self.tail)

    @property
    def transient(self) -> bool:
        return self.exit_code == EXIT_TRANSIENT


class FlowFailed(RuntimeError):
    """A flow run failed (a stage, or a metric beyond the baseline); ``summary`` is the run's summary."""

    def __init__(self, message: str, summary: dict[str, Any]) -> None:
        super().__init__(message)
        self.summary = summary

    def __reduce__(self) -> tuple[Any, ...]:
        return FlowFailed, (str(self), self.summary)


def os_error_exit(error: OSError) -> tuple[int, str]:
    """(exit code, one-line message) for an OSError: no room to write is transient (75), anything else is bad input
    (2: a permission, a read-only disk, a folder where a file should be)."""
    where = f"{error.filename}: " if error.filename else ""
    reason = error.strerror or str(error)
    if error.errno in FULL:
        room = "raise the file size limit (ulimit -f)" if error.errno == errno.EFBIG else "free space on the disk"
        return EXIT_TRANSIENT, f"transient failure: {where}{reason}: {room} and run again"
    return EXIT_BAD_INPUT, f"bad input: {where}{reason}"
