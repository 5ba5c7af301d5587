"""Model backends behind one interface, chosen by name (``backend:`` in params.yaml)."""

from __future__ import annotations

from typing import Any

from egoeval.backends.base import (
    Backend,
    BackendError,
    ChatRequest,
    Decoding,
    EndpointDown,
    EndpointError,
    ImagePart,
    Message,
    PermanentError,
    Question,
    Reply,
    RequestRejected,
    TextPart,
    TransientError,
    answer_line,
    redact,
    request_key,
)
from egoeval.backends.chance import ChanceBackend
from egoeval.backends.minilm import MiniLMBackend
from egoeval.backends.openai import OpenAIBackend
from egoeval.errors import InputError
from egoeval.io import PARAMS_FILE

BACKENDS: dict[str, type[Backend]] = {
    "openai": OpenAIBackend,
    "random": ChanceBackend,
    "minilm": MiniLMBackend,
}


def make_backend(spec: dict[str, Any]) -> Backend:
    """A backend from a params model entry (``egonormia.model`` or one of ``egonormia.baselines``)."""
    kind = spec.get("backend")
    if kind not in BACKENDS:
        known = ", ".join(BACKENDS)
        raise InputError(PARAMS_FILE, f"unknown backend {kind!r} for model {spec.get('name')!r}; known: {known}")
    if not spec.get("name"):
        raise InputError(PARAMS_FILE, f"a {kind} model entry needs a name")
    return BACKENDS[kind].from_spec(spec)


__all__ = [
    "BACKENDS",
    "Backend",
    "BackendError",
    "ChatRequest",
    "Decoding",
    "EndpointDown",
    "EndpointError",
    "ImagePart",
    "Message",
    "PermanentError",
    "Question",
    "Reply",
    "RequestRejected",
    "TextPart",
    "TransientError",
    "answer_line",
    "make_backend",
    "redact",
    "request_key",
]
