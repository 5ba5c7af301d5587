"""Model backends behind one interface, chosen by name (a model entry's ``backend``)."""

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
    VideoPart,
    answer_line,
    redact,
    request_key,
)
from egoeval.core.registry import Registry

BACKENDS: Registry[type[Backend]] = Registry("backend")
"""Every backend class by its name (a model entry's ``backend``; the settings allow exactly these names), each
imported when first used: reading the names imports no HTTP client or model."""
BACKENDS.register_lazy("openai", "egoeval.backends.openai:OpenAIBackend")
BACKENDS.register_lazy("openai_batch", "egoeval.backends.batch:OpenAIBatchBackend")
BACKENDS.register_lazy("random", "egoeval.backends.chance:ChanceBackend")
BACKENDS.register_lazy("minilm", "egoeval.backends.minilm:MiniLMBackend")


def make_backend(spec: ModelEntry) -> Backend:
    """The backend of a validated model entry of the settings."""
    return BACKENDS.get(spec.backend).from_spec(spec)


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
    "VideoPart",
    "answer_line",
    "make_backend",
    "redact",
    "request_key",
]
