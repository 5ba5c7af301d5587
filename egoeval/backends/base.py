"""The one small interface every model backend speaks: a chat request in, the reply text out."""

from __future__ import annotations

import functools
import hashlib
import json
import re
from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from functools import cached_property
from typing import ClassVar, Protocol


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


@dataclass(frozen=True)
class VideoPart:
    """A video clip given as MP4 bytes (sent as a ``video_url`` data URL, the form vLLM's OpenAI-compatible server
    reads)."""

    mp4: bytes = field(repr=False)

    @cached_property
    def sha256(self) -> str:
        return hashlib.sha256(self.mp4).hexdigest()


Part = TextPart | ImagePart | VideoPart


@dataclass(frozen=True)
class Message:
    role: str  # system | user | assistant
    content: tuple[Part, ...]

    @classmethod
    def text(cls, role: str, text: str) -> Message:
        return cls(role, (TextPart(text),))


@dataclass(frozen=True)
class Decoding:
    """How a reply is decoded; a model entry's settings give it (``from_spec``: no default is declared here)."""

    temperature: float
    max_tokens: int
    seed: int | None = None  # None: the request sends no seed

    @classmethod
    def from_spec(cls, spec: ModelEntry) -> Decoding:
        """The decoding a model entry asks for (its temperature and max_tokens)."""
        return cls(temperature=spec.temperature, max_tokens=spec.max_tokens)


@dataclass(frozen=True)
class MultipleChoice:
    """The question a chat request asks, as a multiple choice: what baselines that do not read chat text answer.

    ``context`` is the text the options are weighed against ("" when there is none), ``options`` the option texts
    in the order the reply numbers them (1..n), ``multi`` whether every fitting option is picked (else exactly one).
    """

    context: str
    options: tuple[str, ...]
    multi: bool


def answer_line(choice: int | list[int]) -> str:
    """The final line every reply ends with: ``Answer: 3`` (one option) or ``Answer: [1, 4]`` (several)."""
    if isinstance(choice, list):
        return f"Answer: [{', '.join(str(c) for c in choice)}]"
    return f"Answer: {choice}"


@dataclass(frozen=True)
class ChatRequest:
    """A chat call: its messages and decoding, and how the request is sent and its reply read.

    ``content_as_parts``: every message's content is sent as a list of parts, text alone too (else a text-only
    message is sent as a plain string). ``content_despite_refusal``: a reply's content is the reply even beside a
    ``refusal`` field or a ``content_filter`` finish, as a client that reads only the content sees it (else those
    are refusals). ``undecodable_as_api_error``: a 200 reply whose body is not UTF-8 is an API error of the call
    (retried, then that call's failure), as the official client raises on it (else it is the request's own
    permanent failure, never retried). ``namespace`` is the caller's name for the conventions the request was built
    under; it enters the request key, so that requests built under different conventions never share a cached reply.
    ``choices`` is the question as a multiple choice, for the baselines that answer from it.
    """

    messages: tuple[Message, ...]
    decoding: Decoding
    choices: MultipleChoice | None = None
    content_as_parts: bool = False
    content_despite_refusal: bool = False
    undecodable_as_api_error: bool = False
    namespace: str = "egoeval"


@dataclass(frozen=True)
class Reply:
    """A backend's answer: the reply text, the model the endpoint says produced it ("" where none is named) and the
    tokens it says the call took (None where it reports none)."""

    text: str
    served_model: str = ""
    prompt_tokens: int | None = None  # the endpoint's ``usage``, where it reports one
    completion_tokens: int | None = None


def _hex(number: int, width: int) -> str:
    """A pattern for ``number`` in ``width`` hex digits, either case."""
    return "".join(f"[{d}{d.upper()}]" if d.isalpha() else d for d in f"{number:0{width}x}")


def _encoded_char(char: str) -> str:
    """Every way one character of a secret can be spelled in what an endpoint sends back: itself, a JSON ``\\u``
    escape (or an escaped one: JSON inside a JSON string), ``\\/`` for a slash, a percent escape of each of its
    UTF-8 bytes (URL encoding) or a percent-escaped percent escape (URL encoding twice)."""
    ways = [re.escape(char)]
    code = ord(char)
    if code <= 0xFFFF:
        ways += [r"\\u" + _hex(code, 4), r"\\\\u" + _hex(code, 4)]
    if char == "/":
        ways.append(r"\\/")
    utf8 = char.encode("utf-8")
    ways.append("".join("%" + _hex(byte, 2) for byte in utf8))
    ways.append("".join("%25" + _hex(byte, 2) for byte in utf8))
    return "(?:" + "|".join(ways) + ")"


@functools.lru_cache(maxsize=8)
def _secret_pattern(secret: str) -> re.Pattern[str]:
    """The secret in any mixture of its encodings, character by character (so partly escaped spellings match too)."""
    return re.compile("".join(_encoded_char(char) for char in secret))


def redact(text: str, secret: str | None) -> str:
    """``text`` with every occurrence of ``secret`` replaced by ``***``, in whatever encoding it appears: raw, JSON
    ``\\u``-escaped in part or whole, URL-encoded (percent escapes, once or twice). The one redaction, applied to every
    string that comes from an endpoint before it is parsed, cut, stored, logged or shown."""
    if not secret:
        return text
    return _secret_pattern(secret).sub("***", text)


class ModelEntry(Protocol):
    """A model entry of the settings as the backends read it, validated by the settings before it gets here."""

    backend: str
    name: str
    base_url: str | None
    api_key_env: str
    concurrency: int
    temperature: float
    max_tokens: int
    timeout_s: float
    max_retries: int
    retry_base_s: float
    retry_max_s: float


class Backend(ABC):
    """A model behind ``complete``; ``name`` is the registry name, ``model`` the display/model name."""

    name: ClassVar[str]
    supports_images: ClassVar[bool]
    # video parts: True (read or ignored alike), False (never sent one), None (as the model entry's video_input says)
    supports_video: ClassVar[bool | None]

    def __init__(self, model: str) -> None:
        self.model = model

    @property
    def cache_name(self) -> str:
        """The backend name request keys carry: the registry name, unless the replies are another backend's."""
        return self.name

    @classmethod
    @abstractmethod
    def from_spec(cls, spec: ModelEntry) -> Backend:
        """Build from a params model entry."""

    @abstractmethod
    def complete(self, request: ChatRequest) -> Reply:
        """The reply; raises CallRetryable or CallRefused (EndpointError, EndpointDown: every call would fail)."""

    def close(self) -> None:  # noqa: B027 - an optional hook; most backends hold nothing to release
        """Release connections or other resources."""


def _canonical_part(part: Part) -> dict[str, str]:
    if isinstance(part, ImagePart):
        return {"type": "image_jpeg", "sha256": part.sha256}
    if isinstance(part, VideoPart):
        return {"type": "video_mp4", "sha256": part.sha256}
    return {"type": "text", "text": part.text}


def request_key(backend: str, model: str, request: ChatRequest) -> str:
    """sha256 of canonical JSON: backend, model, the request's namespace (under the key ``protocol``, the name every
    cache so far was written with), every message (images by sha256) and the decoding."""
    payload = {
        "backend": backend,
        "protocol": request.namespace,
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
