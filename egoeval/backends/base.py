"""The one small interface every model backend speaks: a chat request in, the reply text out."""

from __future__ import annotations

import hashlib
import json
from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any, ClassVar

from egoeval.errors import PermanentFailure, TransientFailure


@dataclass(frozen=True)
class TextPart:
    text: str


@dataclass(frozen=True)
class ImagePart:
    """An image given as JPEG bytes."""

    jpeg: bytes = field(repr=False)

    @cached_property
    def sha256(self) -> str:
        return hashlib.sha256(self.jpeg).hexdigest()


Part = TextPart | ImagePart


@dataclass(frozen=True)
class Message:
    role: str  # system | user | assistant
    content: tuple[Part, ...]

    @classmethod
    def text(cls, role: str, text: str) -> Message:
        return cls(role, (TextPart(text),))


@dataclass(frozen=True)
class Decoding:
    temperature: float = 0.0
    max_tokens: int = 1024
    seed: int | None = None

    @classmethod
    def from_spec(cls, spec: dict[str, Any]) -> Decoding:
        """Decoding settings from a params model entry (``egonormia.model`` or a baseline)."""
        seed = spec.get("seed")
        return cls(
            temperature=float(spec.get("temperature", 0.0)),
            max_tokens=int(spec.get("max_tokens", 1024)),
            seed=None if seed is None else int(seed),
        )


@dataclass(frozen=True)
class Question:
    """A structured view of a multiple-choice question, for baselines that do not read chat text."""

    setting: str  # blind | pipeline | video
    subtask: str  # action | justification | sensible
    context: str  # the scene description (pipeline) or the situation text (blind); "" for video
    options: tuple[str, ...]  # option texts in displayed order (numbered 1..n)
    multi: bool  # True: pick every fitting option; False: pick exactly one
    chosen_action: str | None = None  # justification: the text of the action chosen before


def answer_line(choice: int | list[int]) -> str:
    """The final line every reply ends with: ``Answer: 3`` (one option) or ``Answer: [1, 4]`` (several)."""
    if isinstance(choice, list):
        return f"Answer: [{', '.join(str(c) for c in choice)}]"
    return f"Answer: {choice}"


PROTOCOLS = ("official", "egoeval")


@dataclass(frozen=True)
class ChatRequest:
    """A chat call; ``protocol`` says whose request shapes it follows and is part of the cache key.

    Under ``official`` every message's content is sent as a list of parts (the official code's OpenAI shape,
    even for text alone); under ``egoeval`` a text-only message is sent as a plain string.
    """

    messages: tuple[Message, ...]
    decoding: Decoding = Decoding()
    question: Question | None = None
    protocol: str = "egoeval"

    def __post_init__(self) -> None:
        if self.protocol not in PROTOCOLS:
            raise ValueError(f"unknown protocol {self.protocol!r}; known: {', '.join(PROTOCOLS)}")


@dataclass(frozen=True)
class Reply:
    """A backend's answer: the reply text, and the model the endpoint says produced it ("" where none is named)."""

    text: str
    served_model: str = ""


def redact(text: str, secret: str | None) -> str:
    """``text`` with every occurrence of ``secret`` replaced by ``***``: the one redaction, applied to every string
    that comes from an endpoint before it is cut, stored, logged or shown."""
    return text.replace(secret, "***") if secret else text


class BackendError(Exception):
    """A model call that did not produce a reply; ``str(error)`` is a short reason safe to record."""


class TransientError(BackendError):
    """Retryable: 429, 5xx, dropped connections, timeouts, malformed or empty bodies."""

    def __init__(self, reason: str, *, retry_after: float | None = None, overload: bool = False) -> None:
        super().__init__(reason)
        self.retry_after = retry_after
        self.overload = overload  # the server asked us to slow down (429/503): the limiter backs off


class PermanentError(BackendError):
    """Not retryable, and about this one request: a refusal, a question the backend cannot answer."""


class RequestRejected(PermanentError):
    """The endpoint refused this one request (HTTP 400, 413 or 422: a content-policy refusal, an image it will not
    read; or a reply over the size cap): that request's failure, never retried. ``kind`` groups alike rejections;
    ``where`` (the endpoint) and ``fix`` make the message for when every call is rejected alike."""

    def __init__(self, reason: str, *, kind: str, where: str, fix: str) -> None:
        super().__init__(reason)
        self.kind = kind
        self.where = where
        self.fix = fix


class EndpointError(PermanentError, PermanentFailure):
    """Every call would fail the same way (a wrong key, URL, model name or endpoint): the stage stops, exit 2.

    The message names the endpoint, what it answered and the param or environment variable to fix.
    """


class EndpointDown(BackendError, TransientFailure):
    """Nothing answers at the endpoint's address (refused, unresolvable, no answer to connect): every call would
    fail alike, so the stage stops at once, exit 75 (the server may be started later)."""


class Backend(ABC):
    """A model behind ``complete``; ``name`` is the registry name, ``model`` the display/model name."""

    name: ClassVar[str]
    supports_images: ClassVar[bool]

    def __init__(self, model: str, concurrency: int = 1) -> None:
        self.model = model
        self.concurrency = concurrency

    @classmethod
    @abstractmethod
    def from_spec(cls, spec: dict[str, Any]) -> Backend:
        """Build from a params model entry."""

    @abstractmethod
    def complete(self, request: ChatRequest) -> Reply:
        """The reply; raises TransientError or PermanentError (EndpointError, EndpointDown: every call would fail)."""

    def close(self) -> None:  # noqa: B027 - an optional hook; most backends hold nothing to release
        """Release connections or other resources."""


def _canonical_part(part: Part) -> dict[str, str]:
    if isinstance(part, ImagePart):
        return {"type": "image_jpeg", "sha256": part.sha256}
    return {"type": "text", "text": part.text}


def request_key(backend: str, model: str, request: ChatRequest) -> str:
    """sha256 of canonical JSON: backend, model, protocol, every message (images by sha256) and the decoding."""
    payload = {
        "backend": backend,
        "protocol": request.protocol,
        "model": model,
        "messages": [{"role": m.role, "content": [_canonical_part(p) for p in m.content]} for m in request.messages],
        "decoding": {
            "temperature": request.decoding.temperature,
            "max_tokens": request.decoding.max_tokens,
            "seed": request.decoding.seed,
        },
    }
    text = json.dumps(payload, sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False)
    return hashlib.sha256(text.encode("utf-8")).hexdigest()
