"""Any OpenAI-compatible chat completions endpoint: vLLM, SGLang, Ollama, OpenAI, Gemini's compatibility API.

The API key is read from the environment variable *named* by ``api_key_env`` at call time; it is never kept on
the object; an unset or empty variable stops the stage before its first request (EndpointError naming it).
Everything the endpoint sends back crosses one boundary (``EndpointAnswer.read``): the body is read up to
``reply_byte_limit(max_tokens)`` bytes, within ``timeout_s`` from connect to its last byte, and the key is
redacted (``redact``: every encoding of it) from every string in it before anything cuts, stores, logs or shows it.

What an answer means:

- 200 with a completion: the reply. A ``refusal`` field or a ``content_filter`` finish is a refusal, unless the
  request reads its content despite them (``ChatRequest.content_despite_refusal``) and there is content;
- 408, 409, 425, 429, 5xx, dropped connections, timeouts, empty or malformed bodies: transient, retried;
- 400, 413, 422 (a content-policy refusal, an image the endpoint will not read) and a reply over the size cap:
  that request's own failure (RequestRejected), never retried;
- a 200 whose body is not UTF-8: that request's failure (RequestRejected), or, for a request read as the official
  client reads it (``undecodable_as_api_error``), transient: that client raises on such a body;
- 401, 403, 404, 405 and other statuses, an HTML page, a 200 whose body is an error object, a body that cannot
  be decoded, a content that is not a string (a list of parts), a URL that cannot be called: EndpointError (every
  call would fail alike: exit 2);
- nothing answers at the address, and nothing ever did: EndpointDown (exit 75), within CONNECT_TIMEOUT_S.
"""

from __future__ import annotations

import base64
import email.utils
import json
import os
import re
import threading
import time
from dataclasses import dataclass
from typing import Any, ClassVar

import httpcore
import httpx

from egoeval.backends.base import (
    Backend,
    ChatRequest,
    ImagePart,
    Message,
    ModelEntry,
    Reply,
    TextPart,
    VideoPart,
    redact,
)
from egoeval.backends.usage import usage_counts
from egoeval.core.errors import CallRefused, CallRetryable, EndpointDown, EndpointError, RequestRejected

OVERLOAD_STATUS = {429, 503, 529}  # the server says: slow down
RETRY_STATUS = {408, 409, 425, 500, 502, 504} | OVERLOAD_STATUS
REJECTED_STATUS = {400, 413, 422}  # this request refused (a policy, an image, a size): the others may pass
FIX = {  # what each permanent answer asks the user to fix
    400: "the server rejects the request: check the model's name, max_tokens and temperature",
    401: "the key is missing or wrong: set a valid key in ${env} (named by the model's api_key_env)",
    403: "the key may not use this model: check ${env} and the model's name",
    404: "no such endpoint or model: check the model's base_url (it usually ends in /v1) and name",
    405: "not a chat completions endpoint: check the model's base_url",
    413: "the request is too large for the server: send smaller images (the egonormia.frames settings)",
    422: "the server rejects the request: check the model's name, max_tokens and temperature",
}
DEFAULT_FIX = "check the model's base_url, name and key (api_key_env)"
CONNECT_TIMEOUT_S = 5.0  # a connection not made by then (or refused): nothing answers at that address
DETAIL_CHARS = 300  # what an error message quotes of the endpoint's own words
REPLY_ENVELOPE_BYTES = 64 * 1024  # the JSON around a completion: ids, usage, a served model name
REPLY_BYTES_PER_TOKEN = 128  # generous: a token is a few bytes of text, a few dozen JSON-escaped


def reply_byte_limit(max_tokens: int) -> int:
    """The most bytes of a reply read and kept: what ``max_tokens`` tokens can justify, plus the JSON envelope.
    A longer reply is cut there and recorded as that request's failure (nothing of it is kept)."""
    return REPLY_ENVELOPE_BYTES + max(0, max_tokens) * REPLY_BYTES_PER_TOKEN


def parse_retry_after(value: str | None) -> float | None:
    """Seconds to wait from a Retry-After header (delta-seconds or an HTTP date); None when absent or bad."""
    if not value:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    return max(0.0, when.timestamp() - time.time())


def _message_json(message: Message, content_as_parts: bool = False) -> dict[str, Any]:
    """One message as the API wants it: a lone text as a plain string unless ``content_as_parts``, else a list of
    parts in their order (images and videos as data URLs)."""
    parts = message.content
    if not content_as_parts and len(parts) == 1 and isinstance(parts[0], TextPart):
        return {"role": message.role, "content": parts[0].text}
    content: list[dict[str, Any]] = []
    for part in parts:
        if isinstance(part, ImagePart):
            url = "data:image/jpeg;base64," + base64.b64encode(part.jpeg).decode("ascii")
            content.append({"type": "image_url", "image_url": {"url": url}})
        elif isinstance(part, VideoPart):  # vLLM's OpenAI-compatible server: a video_url part (data URL or URL)
            url = "data:video/mp4;base64," + base64.b64encode(part.mp4).decode("ascii")
            content.append({"type": "video_url", "video_url": {"url": url}})
        else:
            content.append({"type": "text", "text": part.text})
    return {"role": message.role, "content": content}


def request_body(model: str, request: ChatRequest) -> dict[str, Any]:
    """The JSON body of a chat completions call."""
    body: dict[str, Any] = {
        "model": model,
        "messages": [_message_json(m, request.content_as_parts) for m in request.messages],
        "max_tokens": request.decoding.max_tokens,
        "temperature": request.decoding.temperature,
    }
    if request.decoding.seed is not None:
        body["seed"] = request.decoding.seed
    return body


# ------------------------------------------------------------------ timeout_s from connect to the last byte


class _Deadline(threading.local):
    """When the current call of this thread must be done (``time.monotonic()``); None between calls."""

    at: float | None = None

    def bound(self, timeout: float | None, expired: type[Exception]) -> float | None:
        """``timeout`` cut to the time the call has left; raises ``expired`` when none is left."""
        if self.at is None:
            return timeout
        left = self.at - time.monotonic()
        if left <= 0:
            raise expired("timeout_s passed")
        return left if timeout is None else min(timeout, left)


class _BoundedStream(httpcore.NetworkStream):
    """A connection whose every socket operation ends by the deadline of the call using it."""

    def __init__(self, stream: httpcore.NetworkStream, deadline: _Deadline) -> None:
        self._stream = stream
        self._deadline = deadline

    def read(self, max_bytes: int, timeout: float | None = None) -> bytes:
        return self._stream.read(max_bytes, self._deadline.bound(timeout, httpcore.ReadTimeout))

    def write(self, buffer: bytes, timeout: float | None = None) -> None:
        self._stream.write(buffer, self._deadline.bound(timeout, httpcore.WriteTimeout))

    def close(self) -> None:
        self._stream.close()

    def start_tls(self, ssl_context: Any, server_hostname: str | None = None, timeout: float | None = None) -> Any:
        bounded = self._deadline.bound(timeout, httpcore.ConnectTimeout)
        return _BoundedStream(self._stream.start_tls(ssl_context, server_hostname, bounded), self._deadline)

    def get_extra_info(self, info: str) -> Any:
        return self._stream.get_extra_info(info)


class _BoundedBackend(httpcore.NetworkBackend):
    """httpcore's sockets, each operation bounded by the calling thread's deadline."""

    def __init__(self, inner: httpcore.NetworkBackend, deadline: _Deadline) -> None:
        self._inner = inner
        self._deadline = deadline

    def connect_tcp(
        self,
        host: str,
        port: int,
        timeout: float | None = None,
        local_address: str | None = None,
        socket_options: Any = None,
    ) -> httpcore.NetworkStream:
        bounded = self._deadline.bound(timeout, httpcore.ConnectTimeout)
        stream = self._inner.connect_tcp(host, port, bounded, local_address, socket_options)
        return _BoundedStream(stream, self._deadline)

    def connect_unix_socket(
        self, path: str, timeout: float | None = None, socket_options: Any = None
    ) -> httpcore.NetworkStream:
        bounded = self._deadline.bound(timeout, httpcore.ConnectTimeout)
        return _BoundedStream(self._inner.connect_unix_socket(path, bounded, socket_options), self._deadline)

    def sleep(self, seconds: float) -> None:
        self._inner.sleep(seconds)


def _bounded_client(timeout_s: float, connections: int, deadline: _Deadline) -> httpx.Client:
    """An httpx client whose calls end by ``deadline``: httpx bounds each read, not a call (a server trickling its
    headers a byte a second would hold a call for ever), so every connection pool it made (proxies' too) gets a
    network backend that cuts each socket operation to the time the call has left."""
    limits = httpx.Limits(max_connections=connections, max_keepalive_connections=connections)
    client = httpx.Client(timeout=httpx.Timeout(timeout_s, connect=min(timeout_s, CONNECT_TIMEOUT_S)), limits=limits)
    for transport in (client._transport, *client._mounts.values()):
        pool = getattr(transport, "_pool", None)
        if pool is not None:
            pool._network_backend = _BoundedBackend(pool._network_backend, deadline)
    return client


# ------------------------------------------------------------------ the boundary: what the endpoint sent back


def _redacted(data: Any, key: str | None) -> Any:
    """Parsed JSON with ``key`` redacted from every string in it (object keys too)."""
    if not key:
        return data
    if isinstance(data, str):
        return redact(data, key)
    if isinstance(data, list):
        return [_redacted(value, key) for value in data]
    if isinstance(data, dict):
        return {redact(name, key): _redacted(value, key) for name, value in data.items()}
    return data


def snippet(text: str, limit: int = DETAIL_CHARS) -> str:
    """``text`` on one line, at most ``limit`` characters (cut with an ellipsis that says so)."""
    line = " ".join(text.split())
    return line if len(line) <= limit else line[: limit - 1] + "…"


@dataclass(frozen=True)
class EndpointAnswer:
    """What the endpoint sent back, every string in it already redacted."""

    status: int
    content_type: str
    retry_after: float | None
    text: str  # the body as text
    data: Any  # the body as JSON; None when it is not JSON
    utf8: bool = True  # False: the body held bytes that are not UTF-8 (replaced in ``text`` and ``data``)

    @classmethod
    def read(cls, status: int, headers: httpx.Headers, body: bytes, key: str | None) -> EndpointAnswer:
        """The boundary: nothing the endpoint sent is kept unredacted past this point."""
        try:
            text, utf8 = body.decode("utf-8"), True
        except UnicodeDecodeError:
            text, utf8 = body.decode("utf-8", errors="replace"), False
        data = None
        if text.lstrip().startswith(("{", "[")):
            try:
                data = _redacted(json.loads(text), key)
            except (ValueError, RecursionError):  # malformed, nested too deep, an integer beyond Python's limit
                data = None
        content_type = snippet(redact(headers.get("Content-Type", "no content type"), key), 100)
        retry_after = parse_retry_after(headers.get("Retry-After"))
        return cls(status, content_type, retry_after, redact(text, key), data, utf8)

    def detail(self) -> str:
        """The endpoint's own words for an error: its error message when the body has one, else the body."""
        error = self.data.get("error") if isinstance(self.data, dict) else None
        if isinstance(error, dict) and isinstance(error.get("message"), str):
            return snippet(error["message"])
        if error is not None:
            return snippet(error if isinstance(error, str) else json.dumps(error, ensure_ascii=False))
        return snippet(self.text)

    def error_code(self) -> int | None:
        """The HTTP-like status an error object in a 200 body names (``code`` or ``status``), if any."""
        error = self.data.get("error") if isinstance(self.data, dict) else None
        for name in ("code", "status"):
            value = error.get(name) if isinstance(error, dict) else None
            if isinstance(value, int) or (isinstance(value, str) and re.fullmatch(r"[1-5][0-9][0-9]", value)):
                return int(value)
        return None


def _usage(data: dict[str, Any]) -> tuple[int | None, int | None]:
    """(prompt_tokens, completion_tokens) of the reply's ``usage``, each None when absent or not a sane count."""
    counts = usage_counts(data.get("usage"), "the endpoint")
    return counts.get("prompt_tokens"), counts.get("completion_tokens")


def _shape(content: Any) -> str:
    """What an endpoint's ``choices[0].message.content`` that is not text is, and why it stops the run."""
    if isinstance(content, list):
        kinds = sorted({snippet(str(p.get("type")), 40) if isinstance(p, dict) else type(p).__name__ for p in content})
        shape = f"a list of {len(content)} part(s) (types: {', '.join(kinds) or 'none'})"
    else:
        shape = f"a JSON {type(content).__name__}"
    return (
        f"answered choices[0].message.content as {shape}, not a string: the chat completions API (and the official "
        "client's attribute access, which would hand that object to the answer parser) reads text there, so every "
        "reply of this endpoint is unreadable; check the model's base_url and name (an endpoint that "
        "answers content as a string)"
    )


class OpenAIBackend(Backend):
    name: ClassVar[str] = "openai"
    supports_images: ClassVar[bool] = True
    supports_video: ClassVar[bool | None] = None  # the endpoint's model entry declares it (video_input)

    def __init__(self, model: str, base_url: str, api_key_env: str | None, timeout_s: float, connections: int) -> None:
        """``connections``: the HTTP connection pool's size (``from_spec``: the model's ``concurrency``, so that every
        call the client lets through has a connection; the client's limiter, not the pool, paces the calls)."""
        super().__init__(model)
        self.base_url = base_url.rstrip("/")
        self.api_key_env = api_key_env
        self.timeout_s = timeout_s
        self._deadline = _Deadline()
        self._client = _bounded_client(timeout_s, connections, self._deadline)
        self._answered = False  # has anything ever answered at this address? (then a refused connection is transient)

    @classmethod
    def from_spec(cls, spec: ModelEntry) -> OpenAIBackend:
        if spec.base_url is None:  # the settings refuse such an entry; a caller that built one by hand gets this
            raise ValueError(f"model {spec.name!r}: the openai backend needs base_url")
        return cls(spec.name, spec.base_url, spec.api_key_env, spec.timeout_s, spec.concurrency)

    @property
    def endpoint(self) -> str:
        return f"{self.base_url}/chat/completions"

    @property
    def _who(self) -> str:
        return f"{self.endpoint} (model {self.model!r})"

    def _fix(self, status: int | None) -> str:
        return FIX.get(status or 0, DEFAULT_FIX).replace("${env}", f"${self.api_key_env}")

    def api_key(self) -> str | None:
        """The key, read now from the variable ``api_key_env`` names (None when the backend was built without one);
        an unset or empty variable is an EndpointError naming it, raised before anything is sent: every call would
        go out without a key."""
        if not self.api_key_env:
            return None
        key = os.environ.get(self.api_key_env, "")
        if not key:
            raise EndpointError(
                f"{self._who}: the environment variable {self.api_key_env} (named by the model's api_key_env) is "
                f"{'empty' if self.api_key_env in os.environ else 'not set'}: export the endpoint's key in it (an "
                f"endpoint that takes no key accepts any value, e.g. {self.api_key_env}=EMPTY); nothing was sent"
            )
        return key

    def _headers(self) -> tuple[dict[str, str], str | None]:
        key = self.api_key()
        headers = {"Content-Type": "application/json"}
        if key:
            if not key.isprintable() or not key.isascii() or key != key.strip():
                raise EndpointError(
                    f"{self.endpoint}: the key in ${self.api_key_env} holds whitespace, a newline or a non-ASCII "
                    f"character (copied with a line break?): fix the environment variable {self.api_key_env}"
                )
            headers["Authorization"] = f"Bearer {key}"
        return headers, key

    def _nothing_answers(self, why: str) -> EndpointDown:
        return EndpointDown(
            f"{self.endpoint}: nothing answers at this address ({why}): check base_url of model {self.model!r} "
            "and that the server is running there"
        )

    def complete(self, request: ChatRequest) -> Reply:
        headers, key = self._headers()
        try:
            answer = self._post(request, headers, key)
        except httpx.ConnectTimeout:
            if not self._answered:
                raise self._nothing_answers(f"no connection within {CONNECT_TIMEOUT_S:g} s") from None
            raise CallRetryable("timeout (ConnectTimeout)") from None
        except httpx.TimeoutException:
            raise CallRetryable(f"timeout (no complete reply within timeout_s, {self.timeout_s:g} s)") from None
        except httpx.DecodingError as error:
            raise EndpointError(
                f"{self._who} answered with a body that cannot be decoded ({snippet(redact(str(error), key))}): not a "
                "working chat completions API; check the model's base_url (or a proxy between that garbles it)"
            ) from None
        except (httpx.UnsupportedProtocol, httpx.InvalidURL, httpx.LocalProtocolError) as error:
            raise EndpointError(
                f"{self.endpoint}: cannot be called ({type(error).__name__}: {snippet(redact(str(error), key))}): "
                "check the model's base_url (http:// or https://, host, port)"
            ) from None
        except httpx.ConnectError as error:
            if not self._answered:
                raise self._nothing_answers(snippet(redact(str(error), key), 120)) from None
            raise CallRetryable("connection error (ConnectError)") from None
        except httpx.HTTPError as error:
            raise CallRetryable(f"connection error ({type(error).__name__})") from None
        return self._interpret(answer, request)

    def _post(self, request: ChatRequest, headers: dict[str, str], key: str | None) -> EndpointAnswer:
        """POST and read the reply, at most ``reply_byte_limit`` bytes, all within ``timeout_s``."""
        limit = reply_byte_limit(request.decoding.max_tokens)
        self._deadline.at = time.monotonic() + self.timeout_s
        try:
            with self._client.stream(
                "POST", self.endpoint, json=request_body(self.model, request), headers=headers
            ) as (streamed):
                self._answered = True
                chunks, size = [], 0
                for chunk in streamed.iter_bytes():
                    size += len(chunk)
                    if size > limit:
                        raise RequestRejected(
                            f"reply cut at {limit:,} bytes: more than max_tokens {request.decoding.max_tokens} can "
                            "justify (reply_byte_limit); nothing of it kept",
                            kind="replies over the size cap",
                            where=self._who,
                            fix="the server ignores max_tokens: check the model's max_tokens and the server",
                        )
                    chunks.append(chunk)
                return EndpointAnswer.read(streamed.status_code, streamed.headers, b"".join(chunks), key)
        finally:
            self._deadline.at = None

    def _interpret(self, answer: EndpointAnswer, request: ChatRequest) -> Reply:
        """The reply, or the Transient/Permanent/Rejected/Endpoint error the answer means (module docstring)."""
        status = answer.status
        if status in RETRY_STATUS or status >= 500:
            raise CallRetryable(f"http {status}", retry_after=answer.retry_after, overload=status in OVERLOAD_STATUS)
        detail = answer.detail()
        said = f"http {status}: {detail}" if detail else f"http {status}"
        if status in REJECTED_STATUS:
            raise RequestRejected(said, kind=f"http {status}", where=self._who, fix=self._fix(status))
        if status != 200:
            raise EndpointError(f"{self._who} answered {said}; {self._fix(status)}")
        if not answer.utf8:
            if request.undecodable_as_api_error:  # the official client raises UnicodeDecodeError: an API error
                raise CallRetryable("http 200 with a body that is not UTF-8 (the official client cannot decode it)")
            raise RequestRejected(
                "http 200 with a JSON body holding bytes that are not UTF-8; nothing of it kept",
                kind="replies not UTF-8",
                where=self._who,
                fix="the server garbles its replies' text encoding: check the server (or a proxy before it)",
            )
        if not answer.text.strip():
            raise CallRetryable("empty response body")
        data = answer.data
        if data is None:
            if answer.text.lstrip().startswith(("{", "[")):
                raise CallRetryable("malformed response body")
            raise EndpointError(
                f"{self._who} answered 200 with a non-JSON body ({answer.content_type}: {snippet(answer.text, 80)!r}): "
                "not an OpenAI chat completions API; check the model's base_url (it usually ends in /v1)"
            )
        if isinstance(data, dict) and "error" in data and "choices" not in data:
            code = answer.error_code()
            if code is not None and (code in RETRY_STATUS or code >= 500):
                raise CallRetryable(f"http 200 with an error object (code {code})", overload=code in OVERLOAD_STATUS)
            raise EndpointError(
                f"{self._who} answered 200 with an error object instead of a completion ({detail}); {self._fix(code)}"
            )
        try:
            choice = data["choices"][0]
            message = choice["message"]
        except (KeyError, IndexError, TypeError):
            raise CallRetryable("malformed response body") from None
        if not isinstance(message, dict):
            raise CallRetryable("malformed response body")
        served = data.get("model") if isinstance(data.get("model"), str) else ""
        content = message.get("content")
        if content is not None and not isinstance(content, str):
            raise EndpointError(f"{self._who} {_shape(content)}")
        has_text = isinstance(content, str) and bool(content.strip())
        tokens = _usage(data)
        if has_text and request.content_despite_refusal:
            return Reply(content, snippet(served, 200), *tokens)  # whatever else is said beside it
        if message.get("refusal"):
            raise CallRefused(f"refusal: {snippet(str(message['refusal']), 200)}")
        if choice.get("finish_reason") == "content_filter":
            raise CallRefused("refusal: finish_reason content_filter")
        if not has_text:
            raise CallRetryable("empty completion")
        return Reply(content, snippet(served, 200), *tokens)

    def close(self) -> None:
        self._client.close()
