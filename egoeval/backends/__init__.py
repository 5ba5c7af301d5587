"""Model backends behind one interface, chosen by name (``backend:`` in params.yaml)."""

from __future__ import annotations

from egoeval.backends.base import (
    Backend,
    ChatRequest,
    Decoding,
    ImagePart,
    Message,
    ModelEntry,
    MultipleChoice,
    Reply,
    TextPart,
    answer_line,
    redact,
    request_key,
)
from egoeval.backends.batch import OpenAIBatchBackend
from egoeval.backends.chance import ChanceBackend
from egoeval.backends.minilm import MiniLMBackend
from egoeval.backends.openai import OpenAIBackend
from egoeval.errors import CallFailed, CallRefused, CallRetryable, EndpointDown, EndpointError, RequestRejected

BACKENDS: dict[str, type[Backend]] = {
    "openai": OpenAIBackend,
    "openai_batch": OpenAIBatchBackend,
    "random": ChanceBackend,
    "minilm": MiniLMBackend,
}


def make_backend(spec: ModelEntry) -> Backend:
    """The backend of a validated model entry of params.yaml."""
    return BACKENDS[spec.backend].from_spec(spec)


__all__ = [
    "BACKENDS",
    "Backend",
    "CallFailed",
    "CallRefused",
    "CallRetryable",
    "ChatRequest",
    "Decoding",
    "EndpointDown",
    "EndpointError",
    "ImagePart",
    "Message",
    "ModelEntry",
    "MultipleChoice",
    "Reply",
    "RequestRejected",
    "TextPart",
    "answer_line",
    "make_backend",
    "redact",
    "request_key",
]
